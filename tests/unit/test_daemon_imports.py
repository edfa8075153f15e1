"""Each daemon imports only what it uses (issue 13, item 8).

What a daemon can ever load is read from the source with C{ast}
(L{tests.unit.test_import_graph.import_graph}): every module reachable from
its composition root (C{tap}, or the fork server's script), through
top-level and lazy imports alike, so an import hidden in a rarely taken
branch counts too.  The packages a daemon has no use for must not be
reachable: the logical units (C{cmdlib}) and the job processor run only in
job processes; opcodes are for those who submit or run jobs (LuxiD, RAPI);
the query engine is LuxiD's (and the jobs' that query); NodeD pushes live
reports without loading LuxiD's query modules.

No module outside the command line's side of the tree reaches
C{ganeti.client} at all (issue 22), and the pure HA decisions import no
Twisted and do no I/O.
"""

from __future__ import annotations

import pytest

from tests.unit.test_import_graph import ROOT, _imported, import_graph

#: daemon -> its composition root
ROOTS = {
    "confd": "ganeti.confd.tap",
    "mond": "ganeti.mond.tap",
    "rapi": "ganeti.rapi.tap",
    "noded": "ganeti.noded.tap",
    "wconfd": "ganeti.wconfd.tap",
    "luxid": "ganeti.luxid.tap",
    "forkserver": "ganeti.luxid.forkserver",
}

_JOB_RUNNING = ("ganeti.cmdlib", "ganeti.jobs.processor", "ganeti.jobs.process")
_JOB_QUEUE = ("ganeti.jobs.queue", "ganeti.jobs.scheduler", "ganeti.luxid")
_OTHER_DAEMONS = ("ganeti.rapi", "ganeti.noded", "ganeti.mond", "ganeti.client")

#: daemon -> packages (or modules) it must never reach
FORBIDDEN = {
    "confd": (*_JOB_RUNNING, *_JOB_QUEUE, *_OTHER_DAEMONS, "ganeti.opcodes", "ganeti.query", "ganeti.rpc",
              "ganeti.luxi", "ganeti.wconfd", "ganeti.locking", "ganeti.config", "ganeti.backend"),
    "mond": (*_JOB_RUNNING, *_JOB_QUEUE, "ganeti.rapi", "ganeti.noded", "ganeti.client", "ganeti.opcodes",
             "ganeti.query", "ganeti.rpc", "ganeti.luxi", "ganeti.wconfd", "ganeti.locking", "ganeti.config"),
    "rapi": (*_JOB_RUNNING, *_JOB_QUEUE, "ganeti.noded", "ganeti.mond", "ganeti.client", "ganeti.query",
             "ganeti.wconfd", "ganeti.locking", "ganeti.config", "ganeti.backend"),
    "noded": (*_JOB_RUNNING, *_JOB_QUEUE, "ganeti.rapi", "ganeti.mond", "ganeti.opcodes", "ganeti.query",
              "ganeti.locking"),
    "wconfd": (*_JOB_RUNNING, *_JOB_QUEUE, *_OTHER_DAEMONS, "ganeti.opcodes", "ganeti.query", "ganeti.backend"),
    "luxid": (*_JOB_RUNNING, *_OTHER_DAEMONS, "ganeti.backend"),
    "forkserver": ("ganeti.jobs.queue", "ganeti.jobs.scheduler", "ganeti.luxid.handler", "ganeti.luxid.service",
                   "ganeti.luxid.live", *_OTHER_DAEMONS, "ganeti.luxi.server", "ganeti.wconfd.service",
                   "ganeti.backend"),
}


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module C{start} can load: its imports, theirs, and the packages
    above each (importing C{a.b.c} runs C{a/__init__} and C{a/b/__init__})."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        todo.extend(graph.get(name, ()))
    return seen


def inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


@pytest.mark.parametrize("daemon", sorted(ROOTS))
def test_a_daemon_cannot_reach_what_it_does_not_use(graph: dict[str, set[str]], daemon: str) -> None:
    loaded = reachable(graph, ROOTS[daemon])
    assert ROOTS[daemon] in graph
    found = sorted(name for name in loaded if any(inside(name, package) for package in FORBIDDEN[daemon]))
    assert found == []


def test_the_fork_server_preloads_what_a_job_runs(graph: dict[str, set[str]]) -> None:
    """The jobs' code is in the fork server before a job forks (spawn time)."""
    loaded = reachable(graph, ROOTS["forkserver"])
    assert {"ganeti.cmdlib", "ganeti.jobs.processor", "ganeti.jobs.process", "ganeti.opcodes"} <= loaded


def test_a_lazy_import_counts() -> None:
    """An import inside a function makes its target reachable, as when the
    function runs; so the check above also sees imports in rare branches."""
    import ast

    source = {
        "ganeti.d.tap": "from ganeti.d import service\n",
        "ganeti.d.service": "def on_demand():\n    from ganeti.cmdlib import base\n",
        "ganeti.cmdlib.base": "x = 1\n",
    }
    modules = set(source) | {"ganeti.d", "ganeti.cmdlib", "ganeti"}
    graph = {name: _imported(ast.parse(text), name, False, modules) for name, text in source.items()}
    assert "ganeti.cmdlib.base" in reachable(graph, "ganeti.d.tap")
    assert "ganeti.cmdlib" in reachable(graph, "ganeti.d.tap")


#: daemon -> modules (ours or libraries) that importing its composition root must not load
NOT_LOADED = {
    "confd": ("twisted.web", "ganeti.rpc", "ganeti.query", "ganeti.opcodes"),
    "mond": ("twisted.web.server", "twisted.spread", "ganeti.rpc", "ganeti.query"),
    "rapi": ("http.server", "socketserver", "mimetypes", "ganeti.query", "ganeti.cmdlib", "ganeti.locking"),
    "noded": ("ganeti.luxid", "ganeti.query", "ganeti.opcodes", "ganeti.cmdlib", "ganeti.client", "twisted.web.client"),
}


@pytest.mark.parametrize("daemon", sorted(NOT_LOADED))
def test_importing_a_daemon_loads_no_unused_library(daemon: str) -> None:
    """The same, measured: a fresh interpreter imports the daemon's root
    and lists what got loaded (libraries are not in the graph above)."""
    import subprocess
    import sys

    script = ("import sys, importlib; importlib.import_module(%r); "
              "print('\\n'.join(name for name, module in sys.modules.items() if module is not None))" % ROOTS[daemon])
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert ROOTS[daemon] in loaded
    assert sorted(name for name in loaded if any(inside(name, unused) for unused in NOT_LOADED[daemon])) == []


# --- the daemons and the command line (issue 22) -----------------------------------------

#: the command line's side of the tree: the gnt-* commands, their facade, completion and tools, test harnesses
COMMAND_LINE = ("ganeti.client", "ganeti.cli", "ganeti.completion", "ganeti.tools", "ganeti.testing")


def path_to(graph: dict[str, set[str]], start: str, package: str) -> list[str] | None:
    """The shortest chain of imports from C{start} to a module of C{package}
    (the packages above a module count, as in L{reachable}), or C{None}."""
    before: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        following = []
        for name in todo:
            if inside(name, package):
                chain: list[str] = []
                step: str | None = name
                while step is not None:
                    chain.append(step)
                    step = before[step]
                return chain[::-1]
            parts = name.split(".")
            for target in [*(".".join(parts[:i]) for i in range(1, len(parts))), *sorted(graph.get(name, ()))]:
                if target not in before:
                    before[target] = name
                    following.append(target)
        todo = following
    return None


def test_no_daemon_module_reaches_the_command_line(graph: dict[str, set[str]]) -> None:
    """No module outside the command line's side (every daemon package,
    C{ganeti.ha}, C{ganeti.heartbeat}, the wire protocols, the pure core)
    imports C{ganeti.client}, directly or through others, at the top or
    lazily: a daemon drives the steps it shares with a command (the master
    failover's, L{ganeti.ha.takeover}) through an interface of their own."""
    found = {}
    for name in sorted(graph):
        if any(inside(name, side) for side in COMMAND_LINE):
            continue
        chain = path_to(graph, name, "ganeti.client")
        if chain is not None:
            found[name] = " -> ".join(chain)
    assert found == {}
    assert {"ganeti.ha.elector", "ganeti.ha.takeover", "ganeti.noded.tap", "ganeti.luxid.tap"} <= set(graph)


def test_a_lazy_import_of_the_command_line_is_found() -> None:
    """The check above sees a daemon reaching C{ganeti.client} through a
    lazy import two modules away (what NodeD's election once did)."""
    import ast

    source = {
        "ganeti.d.election": "def take_over():\n    from ganeti.d import steps\n",
        "ganeti.d.steps": "import ganeti.client.failover\n",
        "ganeti.client.failover": "x = 1\n",
    }
    modules = set(source) | {"ganeti.d", "ganeti.client", "ganeti"}
    graph = {name: _imported(ast.parse(text), name, False, modules) for name, text in source.items()}
    assert path_to(graph, "ganeti.d.election", "ganeti.client") == ["ganeti.d.election", "ganeti.d.steps",
                                                                    "ganeti.client.failover"]
    assert path_to(graph, "ganeti.d.steps", "ganeti.d.election") is None


#: the pure HA decisions -> the only modules of ours they may import
PURE_HA = {
    "ganeti.ha.election": {"ganeti.ha.failover"},
    "ganeti.ha.failover": {"ganeti.jobs.lifecycle"},
}


@pytest.mark.parametrize("module", sorted(PURE_HA))
def test_the_pure_ha_decisions_stay_pure(graph: dict[str, set[str]], module: str) -> None:
    """The failover's and the election's decisions import the standard
    library, attrs and the allowed modules of ours only: no Twisted, no I/O."""
    import ast
    import sys

    from tests.unit.test_import_graph import module_names

    assert graph[module] <= PURE_HA[module]
    tree = ast.parse(module_names(ROOT)[module].read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
    outside = sorted(name for name in imported if name.split(".")[0] not in {*sys.stdlib_module_names, "attrs", "ganeti"})
    assert outside == []
