"""Warm starts of the master daemons: C{python -m ganeti.warmstart --root ROOT}.

A master daemon started cold spends most of its start in Python's imports
(twistd, Twisted, its own modules): a second on a quiet machine, several
under load, all of it inside a failover.  NodeD therefore keeps this
launcher running on every node (L{WarmStarter}, a child of NodeD): it
imports what WConfD, LuxiD and RAPI import, without installing a reactor
or starting a thread, then waits on stdin.  For each request it forks; the
child becomes what C{ganeti-twistd ARGV} would be (L{ganeti.launcher}:
the same options, daemonizing, status pipe, pid file and log), with the
request's environment and working directory, and exits with twistd's
status.  L{ganeti.daemons.start} uses it when NodeD has one
(L{ganeti.daemons.WARM}); it starts cold otherwise, and when the launcher
is gone.

Requests and answers are JSON lines::

    -> {"id": 1, "argv": [...], "env": {...}, "cwd": "/"}
    <- {"id": 1, "code": 0, "output": "what the launcher printed"}

The launcher exits when its stdin closes (NodeD stopped or died).
"""

from __future__ import annotations

import gc
import importlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, cast

import orjson

from ganeti import childproc

#: Modules the master daemons import (imported up front; a missing one is skipped).
WARM_MODULES = (
    "twisted.scripts.twistd", "twisted.application.app", "twisted.internet.epollreactor", "ganeti.launcher",
    "ganeti.logfile", "twisted.plugins.ganeti_wconfd", "twisted.plugins.ganeti_luxid", "twisted.plugins.ganeti_rapi",
    "ganeti.wconfd.tap", "ganeti.luxid.tap", "ganeti.rapi.tap", "ganeti.luxid.service", "ganeti.wconfd.service",
    "ganeti.luxid.handler", "ganeti.luxid.replication", "ganeti.wconfd.replication", "ganeti.ha.guard",
    "ganeti.ha.voting", "ganeti.rpc.client", "ganeti.heartbeat.server",
)
#: What L{ganeti.daemons.start} has imported when it forks a node's daemons from one launcher (C{--shared}):
#: what they all use (twistd, the reactor's modules, TLS, twisted.web, AMP, Ganeti's common modules), not
#: each daemon's own, which would add to every other daemon's memory.
SHARED_MODULES = (
    "twisted.scripts.twistd", "twisted.application.app", "twisted.internet.epollreactor", "ganeti.launcher",
    "ganeti.logfile", "twisted.plugins.ganeti_wconfd", "ssl", "ganeti.tlsbio", "twisted.web.server",
    "twisted.protocols.amp", "ganeti.objects", "ganeti.paths", "ganeti.rpc.client", "ganeti.daemon",
    "ganeti.http_limits", "attrs", "orjson",
)
#: What L{ganeti.daemons.start} has imported when it forks confd and MonD from one launcher (C{--plain}):
#: what both use, without TLS: forked from the L{SHARED_MODULES} launcher, each would carry the standard
#: library's ssl and the system's OpenSSL.
PLAIN_MODULES = (
    "twisted.scripts.twistd", "twisted.application.app", "twisted.internet.epollreactor", "ganeti.launcher",
    "ganeti.logfile", "ganeti.daemon", "ganeti.paths", "ganeti.listening", "ganeti.serializer", "attrs", "orjson",
)
#: Seconds a request may take before the caller gives up on it.
REQUEST_TIMEOUT = 120.0


def _warm_imports(modules: tuple[str, ...] = WARM_MODULES) -> None:
    """Import C{modules} and freeze the heap for the children (see L{fork})."""
    from ganeti import leanimports

    gc.disable()  # no collection frees holes in the pages the children will share
    leanimports.defer_system_openssl()
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if "twisted.internet.reactor" in sys.modules:  # a fork would share its epoll instance
        raise SystemExit("ganeti.warmstart: a warm module installed the reactor")
    gc.freeze()


def fork() -> int:
    """C{os.fork} for a child that shares the launcher's heap.

    As Python's C{gc.freeze} documentation says for a parent that forks
    without exec: the launcher never collects (L{_warm_imports} disables
    the collector), so no freed holes in its pages are filled by the
    children's allocations; everything it holds is frozen before each fork,
    so the children's collections never touch it (L{_child} enables the
    collector again; L{ganeti.daemon.FrozenHeapService} keeps it frozen).
    Both would otherwise write to, and so copy, the pages it shares.
    """
    gc.freeze()
    return os.fork()


def run_main(main: Callable[[], Any]) -> int:
    """C{main()}'s exit status as the interpreter would make it of the program's end or its C{SystemExit}."""
    try:
        code = main()
    except SystemExit as e:
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # as the interpreter says an uncaught SystemExit("why")
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code if isinstance(code, int) else 0


def enter_child(request: dict[str, Any], outputs: list[int], keep_closed: list[int]) -> None:
    """In a forked child of a launcher: become the process the request describes, before its program runs.
    Stdin from C{/dev/null}, stdout and stderr to C{outputs} (closed here), the request's environment
    (L{childproc.ENV_MODULES} read again), working directory and C{sys.argv}; the collector on again."""
    gc.enable()
    childproc.leave_parent(keep_closed, new_session=False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for target, fd in zip((1, 2), outputs):
        os.dup2(fd, target)
    for fd in set(outputs):
        os.close(fd)
    childproc.take_environment({str(k): str(v) for k, v in request["env"].items()})
    os.chdir(request["cwd"])
    import random

    random.seed()  # not the launcher's (and every sibling's) state
    sys.argv = [str(arg) for arg in request["argv"]]


def _child(request: dict[str, Any], output: int, keep_closed: list[int]) -> None:
    """In the forked child: run twistd as the request says.  Never returns."""

    def run() -> int:
        enter_child(request, [output, output], keep_closed)
        name = next((arg for arg in sys.argv if arg.startswith("ganeti-") and "/" not in arg), None)
        if name is not None:
            childproc.set_name(name)  # after its daemon
        from ganeti import launcher

        return run_main(launcher.main)  # None: 0

    childproc.exit_child(run)


def _answer(message: dict[str, Any]) -> None:
    data = orjson.dumps(message) + b"\n"
    while data:
        try:
            data = data[os.write(1, data):]
        except InterruptedError:
            continue


def serve(run_dir: str, modules: tuple[str, ...] = WARM_MODULES) -> int:
    """The launcher's loop (see the module docstring)."""
    _warm_imports(modules)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, tuple[int, str]] = {}  # pid -> (request id, output file)
    pending = b""
    while True:
        try:
            readable, _w, _x = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(children)
        if 0 not in readable:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return 0
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            try:
                request = orjson.loads(line)
                ident = int(request["id"])
                if not (isinstance(request["argv"], list) and isinstance(request["env"], dict)
                        and isinstance(request["cwd"], str)):
                    raise ValueError("argv, env and cwd are a list, a dict and a string")
            except (ValueError, KeyError, TypeError) as e:
                print("ganeti.warmstart: bad request %r: %s" % (line[:100], e), file=sys.stderr, flush=True)
                continue
            output, path = tempfile.mkstemp(prefix="warmstart.", dir=run_dir)
            pid = fork()
            if pid == 0:
                _child(request, output, [wake_r, wake_w])
            os.close(output)
            children[pid] = (ident, path)


def _reap(children: dict[int, tuple[int, str]]) -> None:
    for pid, status in childproc.exited() if children else ():
        if pid not in children:
            continue
        ident, path = children.pop(pid)
        try:
            with open(path, "rb") as handle:
                output = handle.read()[-4000:].decode(errors="replace")
            os.unlink(path)
        except OSError:
            output = ""
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        _answer({"id": ident, "code": code, "output": output})
        if not children:
            return


class WarmStarter:
    """NodeD's side: the launcher process and a blocking L{run} for
    L{ganeti.daemons.start} (called from threads)."""

    def __init__(self, root: str, run_dir: str, shared: bool = False, plain: bool = False) -> None:
        """@param shared: import L{SHARED_MODULES}, not L{WARM_MODULES}
        @param plain: import L{PLAIN_MODULES} without TLS (for confd and MonD)"""
        self.root = root
        self.run_dir = run_dir
        self.shared = shared
        self.plain = plain
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}

    def start(self) -> None:
        """Start the launcher (it imports in the background)."""
        os.makedirs(self.run_dir, exist_ok=True)
        self._process = subprocess.Popen([sys.executable, "-m", "ganeti.warmstart", "--root", self.root,
                                          "--run-dir", self.run_dir, *(["--shared"] if self.shared else []),
                                          *(["--plain"] if self.plain else [])],
                                         stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, cwd="/", close_fds=True)
        threading.Thread(target=self._read, args=(self._process,), name="warmstart", daemon=True).start()

    def stop(self) -> None:
        """Close the launcher's stdin: it exits (the daemons it started run on); reaped in a thread."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            assert process.stdin is not None
            process.stdin.close()
        except OSError:
            pass

        def reap() -> None:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

        threading.Thread(target=reap, name="warmstart-reap", daemon=True).start()

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def busy(self) -> bool:
        """Whether a start is under way."""
        with self._lock:
            return bool(self._waiting)

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                answer = orjson.loads(line)
                ident = int(answer["id"])
            except (ValueError, KeyError, TypeError):
                continue
            with self._lock:
                found = self._waiting.pop(ident, None)
            if found is not None:
                found[1].append(answer)
                found[0].set()
        with self._lock:  # the launcher is gone: nobody waits for it
            waiting, self._waiting = self._waiting, {}
        for event, _answers in waiting.values():
            event.set()

    def run(self, argv: list[str], env: dict[str, str], cwd: str) -> tuple[int, str] | None:
        """Run twistd with C{argv} warm: its exit status and output, or
        C{None} when the launcher cannot (gone): start it cold then."""
        process = self._process
        if process is None or process.poll() is not None or process.stdin is None:
            return None
        event, answers = threading.Event(), cast("list[dict[str, Any]]", [])
        with self._lock:
            self._next += 1
            ident = self._next
            self._waiting[ident] = (event, answers)
            try:
                process.stdin.write(orjson.dumps({"id": ident, "argv": argv, "env": env, "cwd": cwd}) + b"\n")
                process.stdin.flush()
            except (OSError, ValueError):
                self._waiting.pop(ident, None)
                return None
        if not event.wait(REQUEST_TIMEOUT) or not answers:
            with self._lock:
                self._waiting.pop(ident, None)
            return None
        return int(answers[0]["code"]), str(answers[0].get("output") or "")


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ganeti.warmstart")
    parser.add_argument("--root", help="the node's root (named so that its processes can be found by it)")
    parser.add_argument("--run-dir", required=True, help="where the children's output goes until answered")
    parser.add_argument("--shared", action="store_true",
                        help="import only what a node's daemons share (ganeti-daemons start), not the master's")
    parser.add_argument("--plain", action="store_true",
                        help="import only what confd and MonD share, without TLS (ganeti-daemons start)")
    args = parser.parse_args(argv)
    gc.disable()  # see fork
    if args.plain:
        from ganeti import leanimports

        leanimports.defer_system_openssl()
        from ganeti.daemon import without_tls

        without_tls()
        return serve(args.run_dir, PLAIN_MODULES)
    return serve(args.run_dir, SHARED_MODULES if args.shared else WARM_MODULES)


if __name__ == "__main__":
    sys.exit(main())
