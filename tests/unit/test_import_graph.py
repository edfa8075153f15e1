"""No import circles among the modules of ganeti/ (issue 13, item 4).

The graph is read from the source with C{ast}: every C{import} and
C{from ... import} of a C{ganeti} module, at the top of a module or inside a
function (a lazy import still closes a circle), is an edge.  C{from
package import name} is an edge to C{package.name} when that is a module,
else to the package.  A submodule's implicit import of its own package is
not an edge: a package that imports its submodules is no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ganeti

ROOT = Path(ganeti.__file__).resolve().parent


def module_names(root: Path) -> dict[str, Path]:
    """Every module under C{root} (the C{ganeti} package directory), by dotted name."""
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(tree: ast.AST, name: str, is_package: bool, modules: set[str]) -> set[str]:
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = "%s.%s" % (base, alias.name)
                targets.add(full if full in modules else base)
    return {t for t in targets if t in modules and t != name}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the C{ganeti} modules it imports."""
    paths = module_names(root)
    modules = set(paths)
    return {
        name: _imported(ast.parse(path.read_text()), name, path.name == "__init__.py", modules)
        for name, path in paths.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_finder_sees_a_circle_through_a_lazy_import() -> None:
    source = {
        "ganeti.a": "from ganeti import b\n",
        "ganeti.b": "def f():\n    from ganeti.c import x\n",
        "ganeti.c": "import ganeti.a\nx = 1\n",
        "ganeti.d": "from ganeti import a\n",
    }
    modules = set(source)
    graph = {name: _imported(ast.parse(text), name, False, modules) for name, text in source.items()}
    assert cycles(graph) == [["ganeti.a", "ganeti.b", "ganeti.c"]]


def test_a_package_importing_its_submodules_is_no_circle() -> None:
    source = {
        "ganeti.p": "from ganeti.p import base, fam\nfrom ganeti.p.base import define\n",
        "ganeti.p.base": "def define(): pass\n",
        "ganeti.p.fam": "from ganeti.p.base import define\n",
    }
    modules = set(source)
    graph = {name: _imported(ast.parse(text), name, name == "ganeti.p", modules) for name, text in source.items()}
    assert graph["ganeti.p.fam"] == {"ganeti.p.base"}
    assert cycles(graph) == []


def test_no_import_circle_among_the_tools_opcodes_and_queries() -> None:
    """The circles this used to have: gnt_instance <-> instance_setup;
    opcodes <-> opcodes_instance, opcodes_backup, opcodes_verify; query's
    fields -> resources -> common/instance -> fields and fields <-> qlang."""
    watched = ("ganeti.client", "ganeti.opcodes", "ganeti.query")
    graph = import_graph(ROOT)
    assert "ganeti.client.instance_setup" in graph and "ganeti.query.engine" in graph
    involved = [c for c in cycles(graph) if any(m == w or m.startswith(w + ".") for m in c for w in watched)]
    assert involved == []


def test_no_import_circle_through_high_availability() -> None:
    """C{ganeti.ha} and the daemons using it (NodeD's procedures load its
    elector, which answers through NodeD's dispatch) form no circle."""
    graph = import_graph(ROOT)
    assert "ganeti.ha.elector" in graph["ganeti.noded.procedures"]
    involved = [c for c in cycles(graph) if any(m == "ganeti.ha" or m.startswith("ganeti.ha.") for m in c)]
    assert involved == []
