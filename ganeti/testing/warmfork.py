"""Test daemons forked from a warm parent: a fork each instead of an interpreter start and its imports.

An integration test starts many daemons (every L{ganeti.testing.daemons.Daemon}: a cluster's NodeDs,
WConfD, LuxiD, RAPI, confd, MonD), and most of the suite's CPU went into their Python start-up: 2-6 s of
imports each on a loaded machine.  A test process therefore keeps one launcher per kind
(C{python -m ganeti.testing.warmfork --kind tls|plain}), started on first use: it imports what the daemons
import, without a reactor (L{ganeti.warmstart}'s checks), freezes its heap, then forks one child per
request.  The child runs C{ganeti-twistd ARGV} in the foreground (C{-n}), as the cold command would: the
same options, pid file and log (its stdout and stderr go to the daemon's log file), the request's
environment and working directory.  confd and MonD fork from the C{plain} launcher, which never imports
the TLS modules (they speak no TLS: L{ganeti.daemon.without_tls}).

L{spawn} returns a L{ForkedProcess}, what the tests use of C{subprocess.Popen} (C{pid}, C{poll},
C{wait}, C{send_signal}, C{kill}, C{returncode}): the launcher reaps its children and reports their exit
status.  Requests and answers are JSON lines::

    -> {"id": 1, "argv": [...], "env": {...}, "cwd": "/tmp/gntx", "log": "/tmp/gntx/ganeti-noded.out"}
    <- {"id": 1, "pid": 4242}
    <- {"exit": 4242, "status": 0}

The launcher exits when its stdin closes (the test process ended, however it ended); its children then
get SIGTERM (C{PR_SET_PDEATHSIG}), so no test daemon outlives its test process.  C{GANETI_TEST_WARM=0}
in the environment starts every daemon cold (L{spawn} returns None), e.g. to measure the difference.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable, cast

import orjson

from ganeti import childproc, warmstart

#: C{0}: L{spawn} starts nothing warm
ENV = "GANETI_TEST_WARM"
#: the daemons of each launcher
KIND_OF = {"ganeti-noded": "tls", "ganeti-wconfd": "tls", "ganeti-luxid": "tls", "ganeti-rapi": "tls",
           "ganeti-confd": "plain", "ganeti-mond": "plain"}
_COMMON = ("twisted.scripts.twistd", "twisted.application.app", "twisted.internet.epollreactor", "ganeti.launcher",
           "ganeti.logfile", "ganeti.daemon", "ganeti.daemons", "ganeti.objects", "ganeti.paths", "attrs", "orjson")
#: what each launcher imports (a missing module is skipped)
MODULES = {
    "tls": _COMMON + (
        "twisted.internet.ssl", "twisted.web.server", "twisted.protocols.amp", "ganeti.http_limits",
        "twisted.plugins.ganeti_noded", "twisted.plugins.ganeti_wconfd", "twisted.plugins.ganeti_luxid",
        "twisted.plugins.ganeti_rapi", "ganeti.noded.tap", "ganeti.wconfd.tap", "ganeti.luxid.tap", "ganeti.rapi.tap",
        "ganeti.luxid.service", "ganeti.wconfd.service", "ganeti.luxid.handler", "ganeti.luxid.replication",
        "ganeti.wconfd.replication", "ganeti.ha.guard", "ganeti.ha.voting", "ganeti.rpc.client",
        "ganeti.heartbeat.server", "ganeti.noded.procedures", "ganeti.noded.master",
    ),
    "plain": _COMMON + ("twisted.plugins.ganeti_confd", "twisted.plugins.ganeti_mond", "ganeti.confd.tap",
                        "ganeti.mond.tap", "ganeti.confd.service", "ganeti.mond.service"),
}
#: the launcher of the tests' gnt-* commands (C{python -m ganeti.testing.warmcli}): "stdout" and "stderr" per request
CLI = "cli"
#: seconds L{spawn} waits for the launcher's answer (its imports on a loaded machine come first)
SPAWN_TIMEOUT = 300.0
_PR_SET_PDEATHSIG = 1


# --- the launcher ---------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """In a child: SIGTERM when the launcher ends (and at once if it already has)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)


def _write(message: dict[str, Any]) -> None:
    data = orjson.dumps(message) + b"\n"
    while data:
        try:
            data = data[os.write(1, data):]
        except InterruptedError:
            continue


def serve(kind: str) -> int:
    """A daemons' launcher (see the module docstring)."""
    from ganeti import leanimports

    leanimports.defer_system_openssl()  # as ganeti-twistd does, before Twisted's imports
    if kind == "plain":
        from ganeti.daemon import without_tls

        without_tls()
    warmstart._warm_imports(MODULES[kind])
    return loop(("log",), lambda request, outputs, keep_closed: warmstart._child(request, outputs[0], keep_closed))


def loop(files: tuple[str, ...], child: Callable[[dict[str, Any], list[int], list[int]], object]) -> int:
    """A launcher's loop, its imports done: per request, C{files} (its fields naming the output files) opened
    and C{child(request, their descriptors, the descriptors the child closes)} run in a forked child (which
    must not return)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    me = os.getpid()
    children: set[int] = set()
    pending = b""
    while True:
        try:
            readable, _w, _x = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        for pid, status in childproc.exited():
            if pid in children:
                children.discard(pid)
                _write({"exit": pid, "status": status})
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
                outputs = [os.open(str(request[name]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                           for name in files]
            except (ValueError, KeyError, TypeError, OSError) as e:
                print("ganeti.testing.warmfork: bad request %r: %s" % (line[:100], e), file=sys.stderr, flush=True)
                continue
            pid = warmstart.fork()
            if pid == 0:
                _die_with_parent(me)
                child(request, outputs, [wake_r, wake_w])
                os._exit(1)
            for fd in outputs:
                os.close(fd)
            children.add(pid)
            _write({"id": ident, "pid": pid})


# --- the test process's side ----------------------------------------------------------------


class ForkedProcess:
    """A daemon forked by a launcher: the part of C{subprocess.Popen} the tests use."""

    def __init__(self, pid: int, args: list[str]) -> None:
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._exited = threading.Event()
        #: the launcher is gone: nobody reports this process's end, C{poll} looks for the process
        self.orphaned = False

    def _ended(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        self._exited.set()

    def poll(self) -> int | None:
        if self.returncode is None and self.orphaned and not childproc.pid_exists(self.pid):
            self.returncode = -signal.SIGTERM
            self._exited.set()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._exited.wait(0.05)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """One launcher process of one kind, and the test process's bookkeeping of what it forked."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[int, tuple[threading.Event, list[ForkedProcess], list[str]]] = {}
        self._children: dict[int, ForkedProcess] = {}
        command = ["-m", "ganeti.testing.warmcli"] if kind == CLI else ["-m", "ganeti.testing.warmfork", "--kind", kind]
        self._process = subprocess.Popen([sys.executable, *command],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/", close_fds=True)
        threading.Thread(target=self._read, name="warmfork-" + kind, daemon=True).start()

    def alive(self) -> bool:
        return self._process.poll() is None

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            try:
                answer = orjson.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "exit" in answer:
                    child = self._children.pop(int(answer["exit"]), None)
                    if child is not None:
                        child._ended(int(answer["status"]))
                    continue
                found = self._waiting.pop(int(answer.get("id", -1)), None)
                if found is None:
                    continue
                event, result, argv = found
                child = ForkedProcess(int(answer["pid"]), argv)
                self._children[child.pid] = child
                result.append(child)
            event.set()
        with self._lock:  # the launcher is gone: its children got SIGTERM; nobody reports their end
            for child in self._children.values():
                child.orphaned = True
            self._children.clear()
            waiting, self._waiting = self._waiting, {}
        for event, _result, _argv in waiting.values():
            event.set()

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, **files: str) -> ForkedProcess | None:
        """Fork C{argv} (C{ganeti-twistd -n ...}, or a command for L{CLI}) with its output to C{files} (C{log},
        or C{stdout} and C{stderr}); None when the launcher is gone."""
        stdin = self._process.stdin
        if stdin is None or not self.alive():
            return None
        event, result = threading.Event(), cast("list[ForkedProcess]", [])
        with self._lock:
            self._next += 1
            ident = self._next
            self._waiting[ident] = (event, result, argv)
            try:
                stdin.write(orjson.dumps({"id": ident, "argv": argv, "env": env, "cwd": cwd, **files}) + b"\n")
                stdin.flush()
            except (OSError, ValueError):
                self._waiting.pop(ident, None)
                return None
        if not event.wait(SPAWN_TIMEOUT):
            raise RuntimeError("ganeti.testing.warmfork: the %s launcher did not fork within %ss" % (
                self.kind, SPAWN_TIMEOUT))
        return result[0] if result else None

    def close(self) -> None:
        """Close its stdin: it exits, and what it forked gets SIGTERM."""
        try:
            if self._process.stdin is not None:
                self._process.stdin.close()
        except OSError:
            pass


_LAUNCHERS: dict[str, Launcher] = {}
_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def launcher(kind: str) -> Launcher:
    """This process's launcher of C{kind}, started if it is not running."""
    with _LOCK:
        found = _LAUNCHERS.get(kind)
        if found is None or not found.alive():
            found = _LAUNCHERS[kind] = Launcher(kind)
        return found


def forked_children(root: str) -> list[tuple[int, list[str]]]:
    """C{(pid, command line)} of the running daemons this process forked warm whose command line names C{root}
    or a path under it: their own command line is their launcher's, so a search of C{/proc/PID/cmdline} does
    not find them."""
    with _LOCK:
        launchers = list(_LAUNCHERS.values())
    found = []
    for each in launchers:
        with each._lock:
            children = list(each._children.values())
        found += [(child.pid, list(child.args)) for child in children if child.returncode is None
                  and any(arg == root or arg.startswith(root + "/") for arg in child.args)]
    return found


def forked_pids(root: str) -> list[int]:
    """The pids of L{forked_children}."""
    return [pid for pid, _args in forked_children(root)]


def prestart() -> None:
    """Start the launcher most tests use now, so that its imports run while the tests are collected."""
    if enabled():
        launcher("tls")
        launcher(CLI)


def spawn(name: str, argv: list[str], env: dict[str, str], cwd: str, log: str) -> ForkedProcess | None:
    """Daemon C{name} forked warm, or None: start it cold (not enabled, not a daemon of ours, the launcher
    gone, or C{argv} not C{ganeti-twistd}'s)."""
    kind = KIND_OF.get(name)
    if kind is None or not enabled() or os.path.basename(argv[0]) != "ganeti-twistd":
        return None
    return launcher(kind).spawn(argv, env, cwd, log=log)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ganeti.testing.warmfork")
    parser.add_argument("--kind", choices=sorted(MODULES), required=True)
    return serve(parser.parse_args(argv).kind)


if __name__ == "__main__":
    sys.exit(main())
