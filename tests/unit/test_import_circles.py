"""No import circles anywhere in ganeti/ (issue 22, item 4).

The graph is the one of L{tests.unit.test_import_graph}: every import of a
C{ganeti} module, at the top of a module or inside a function, is an edge.
One kind of edge is left out: a package's C{__init__} importing one of its
own submodules inside a function.  That is a package exposing a factory
over its implementations (C{ganeti.backend.storage} picking the class of a
disk template), where the submodules import the interface from the package;
the package is complete before any submodule loads, so nothing ever runs
half-initialised.  A top-level import of a submodule by its package stays
an edge.

The allow-list holds the one circle another branch removes.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_import_graph import ROOT, _imported, cycles, import_graph, module_names

#: circles tolerated for now, each as the sorted module names of one strongly connected component
ALLOWED: list[list[str]] = []


def _lazy_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside a function or method of C{tree}."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.extend(n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found


def factory_edges(name: str, source: str, modules: set[str]) -> set[str]:
    """The submodules of package C{name} that its C{__init__} (C{source})
    imports only inside functions, never at the top."""
    tree = ast.parse(source)
    lazy = ast.Module(body=list(_lazy_imports(tree)), type_ignores=[])
    top = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
    own = {t for t in _imported(lazy, name, True, modules) if t.startswith(name + ".")}
    return own - _imported(top, name, True, modules)


def circle_graph(root: Path) -> dict[str, set[str]]:
    """L{import_graph} without the packages' lazy imports of their own submodules."""
    paths = module_names(root)
    modules = set(paths)
    graph = import_graph(root)
    for name, path in paths.items():
        if path.name == "__init__.py":
            graph[name] = graph[name] - factory_edges(name, path.read_text(), modules)
    return graph


def test_a_package_factory_importing_its_parts_lazily_is_no_circle() -> None:
    source = {
        "ganeti.s": "from ganeti import errors\ndef get(kind):\n    from ganeti.s.file import F\n    return F\n",
        "ganeti.s.file": "from ganeti.s import IStorage\n",
        "ganeti.errors": "",
    }
    modules = set(source)
    graph = {name: _imported(ast.parse(text), name, name == "ganeti.s", modules) for name, text in source.items()}
    assert cycles(graph) == [["ganeti.s", "ganeti.s.file"]]
    graph["ganeti.s"] -= factory_edges("ganeti.s", source["ganeti.s"], modules)
    assert cycles(graph) == []


def test_a_package_importing_a_part_at_the_top_still_closes_a_circle() -> None:
    text = "from ganeti.s import file\ndef get():\n    from ganeti.s.file import F\n"
    assert factory_edges("ganeti.s", text, {"ganeti.s", "ganeti.s.file"}) == set()


def test_a_lazy_import_of_another_package_still_closes_a_circle() -> None:
    text = "def get():\n    from ganeti.t import x\n"
    assert factory_edges("ganeti.s", text, {"ganeti.s", "ganeti.t"}) == set()


def test_no_import_circle_in_ganeti() -> None:
    """Every strongly connected component of the import graph is a single
    module, but for the circles in L{ALLOWED} (which may be gone already)."""
    found = cycles(circle_graph(ROOT))
    assert [c for c in found if c not in ALLOWED] == []
