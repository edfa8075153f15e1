"""The tests' C{gnt-*} commands forked from a warm launcher instead of started cold.

The integration tests run about 1,200 of our C{gnt-*} commands per suite, and each cold start of a tool
costs 0.1-0.8 s of CPU, nearly all of it imports (Python, the tool's options and the LUXI contract; Twisted
for the commands that reach nodes themselves): about a sixth of the suite's CPU.  L{run} hands the command
to a launcher of L{ganeti.testing.warmfork}'s kind C{cli} (one per test process, started on first use),
which has imported every module of L{ganeti.client} and forks one child per command.  The child is the
command as a user runs it, in its own process: the request's command line, environment and working
directory, stdin from C{/dev/null}, stdout and stderr to files that L{run} reads back, the tool's
C{main} through the console script's own entry (L{ganeti.client.launch}), its exit status the process's.

Not for the tools' start-up itself (their imports, the console scripts): C{tests/integration/
test_cli_daemons.py} and the packaging tests run those cold, and C{GANETI_TEST_WARM=0} runs every command
cold.  A command that is not one of L{ganeti.client.launch.TOOLS}, or a launcher that is gone, also runs
cold (L{run} returns None).
"""

from __future__ import annotations

import gc
import importlib
import os
import subprocess
import sys
import tempfile
from typing import Any, NoReturn

from ganeti import childproc
from ganeti.testing import warmfork

#: what the launcher imports besides every module of L{ganeti.client} (a missing one is skipped); never
#: C{twisted.internet.reactor}: a fork would share its epoll instance
MODULES = ("ganeti.luxi.client", "ganeti.cmdlib.cluster_params", "ganeti.cmdlib.group_params",
           "ganeti.cmdlib.instance_params", "ganeti.cmdlib.rbd_disks", "ganeti.cmdlib.test",
           "twisted.internet.epollreactor", "twisted.internet.tcp", "twisted.internet.ssl", "twisted.web.client")


def warm_imports() -> None:
    """The launcher's imports (see L{ganeti.warmstart.fork} for the frozen heap)."""
    import pkgutil

    import ganeti.client

    gc.disable()
    names = ["ganeti.client." + module.name for module in pkgutil.iter_modules(ganeti.client.__path__)]
    for name in names + list(MODULES):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if "twisted.internet.reactor" in sys.modules:
        raise SystemExit("ganeti.testing.warmcli: a warm module installed the reactor")
    gc.freeze()


def child(request: dict[str, Any], outputs: list[int], keep_closed: list[int]) -> NoReturn:
    """In the forked child: run the command as the request says.  Never returns."""

    def run() -> int:
        from ganeti import warmstart

        warmstart.enter_child(request, outputs, keep_closed)
        childproc.set_name(os.path.basename(sys.argv[0]))  # the tool's, as a console script's
        from ganeti.client import launch

        return warmstart.run_main(lambda: launch.launch(os.path.basename(sys.argv[0])))

    childproc.exit_child(run)


def run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str] | None:
    """C{subprocess.run(argv, capture_output=True, text=True, timeout=timeout)} for one of our C{gnt-*}
    tools, forked warm; None: run it cold (see the module docstring)."""
    from ganeti.client.launch import TOOLS

    if not warmfork.enabled() or os.path.basename(argv[0]) not in TOOLS:
        return None
    handles = [tempfile.NamedTemporaryFile(prefix="gntcli", dir="/tmp") for _ in range(2)]
    try:
        process = warmfork.launcher(warmfork.CLI).spawn(argv, dict(os.environ), os.getcwd(), stdout=handles[0].name,
                                                 stderr=handles[1].name)
        if process is None:
            return None
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            stdout, stderr = (_text(handle.name) for handle in handles)
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr) from None
        stdout, stderr = (_text(handle.name) for handle in handles)
        assert process.returncode is not None
        return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
    finally:
        for handle in handles:
            handle.close()


def _text(path: str) -> str:
    """A captured output as C{subprocess.run(text=True)} gives it (the locale's encoding, universal newlines)."""
    with open(path, encoding=None, newline=None) as f:
        return f.read()


def main() -> int:
    """The launcher (L{warmfork.Launcher} starts it as C{python -m ganeti.testing.warmcli})."""
    warm_imports()
    return warmfork.loop(("stdout", "stderr"), child)


if __name__ == "__main__":
    sys.exit(main())
