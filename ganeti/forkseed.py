"""LuxiD's job fork server, forked from LuxiD's own start instead of run anew.

The fork server (L{ganeti.luxid.forkserver}) run as C{python -m} imports
Twisted, the standard library's TLS and Ganeti's modules into a heap of its own: 35 MiB of
a one-node master's memory that no other process shares.  A node's master
daemons are forked from one launcher that has imported what they share
(L{ganeti.warmstart}); a fork server forked from LuxiD before LuxiD's own
start shares those pages too.

L{prefork} runs in C{ganeti-twistd ganeti-luxid} before twistd does
anything (no reactor installed, no thread started): it forks the I{seed}.
The seed imports what a job needs (L{ganeti.luxid.forkserver._warm_imports})
while LuxiD starts, then waits on its socket for LuxiD's adoption message
(L{adopt_message}: the node's root, the RPC port and LuxiD's environment
as it is then, with the master epoch LuxiD adopted on its start), and from
then on is the fork server, reporting on the pipe it has as stdout.  Until
then it forks nothing: no spare connects to WConfD before LuxiD passed its
start-up vote.  End of file on the socket (LuxiD gone, or started without
a fork server) ends the seed.

LuxiD takes the seed (L{take}) when its service starts the fork server; a
second start (the service stopped and started again), a LuxiD started some
other way, or a failed prefork run the fork server with C{python -m} as
before (L{ganeti.luxid.forkclient.ForkServer.start}).

LuxiD retires its fork server after a while without a job; for the next job
it forks a new seed from itself as it runs (L{fork_running}): by then LuxiD
runs its reactor, its log observers and maybe threads of its thread pool, so
the child first undoes what it inherited of them (L{_leave_running}).
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import threading
from typing import Callable

import attrs

#: the seed's socket (LuxiD's adoption, then the job requests): fd 3 in the seed, as in the fork server
CONTROL_FD = 3
#: largest adoption message read (the environment included)
MAX_ADOPT = 1 << 20
#: the seed's process name (C{ps -o comm}, C{top}; its command line is LuxiD's launcher's); jobs forked from it
#: have it too, until they run an OS script
NAME = "ganeti-jobfork"
#: set (to anything) to start LuxiD's fork server with C{python -m} as before
DISABLE_ENV = "GANETI_NO_FORKSEED"


@attrs.define
class Seed:
    """LuxiD's ends of a seed: its pid, its socket and the read end of its report pipe."""

    pid: int
    sock: socket.socket
    reports: int

    def close(self) -> None:
        """Give the seed up: it exits at the end of file.  Closes each descriptor once (a number closed
        may be reused by the time of a second call)."""
        self.sock.close()
        reports, self.reports = self.reports, -1
        if reports >= 0:
            os.close(reports)


_seed: Seed | None = None


def take() -> Seed | None:
    """The seed forked at this process's start, once (None: none, or taken)."""
    global _seed
    seed, _seed = _seed, None
    return seed


def discard() -> None:
    """End the seed nobody will adopt (LuxiD runs jobs without a fork server)."""
    seed = take()
    if seed is not None:
        seed.close()


def wanted(argv: list[str]) -> bool:
    """Whether C{ganeti-twistd ARGV} starts LuxiD with its fork server."""
    daemon = next((arg for arg in argv[1:] if arg.startswith("ganeti-") and "/" not in arg), None)
    if DISABLE_ENV in os.environ or daemon != "ganeti-luxid":  # (twistd's subcommand: its first such word)
        return False
    own = argv[argv.index("ganeti-luxid") + 1:]
    return not any(arg in ("-h", "--help", "--version") or arg.startswith("--no-f") for arg in own)


def prefork(argv: list[str]) -> Seed | None:
    """Fork the seed if C{argv} starts LuxiD with a fork server and this
    process can fork safely (no reactor installed, no other thread); the
    seed is kept for L{take}.  Never raises: LuxiD then starts its fork
    server as before."""
    global _seed
    if not wanted(argv) or "twisted.internet.reactor" in sys.modules or threading.active_count() != 1:
        return None
    gc.freeze()  # the seed's collections leave what LuxiD's heap holds now (and its pages) alone
    _seed = _fork(None)
    return _seed


def fork_running() -> Seed | None:
    """A seed forked from this running LuxiD, for a new fork server after the last one was retired
    (L{ganeti.luxid.forkclient.ForkServer.start}): it shares LuxiD's imported modules, so it imports only
    what jobs need on top of them (half a new interpreter's time).  In the child, before anything else,
    what LuxiD's running reactor left behind is undone (L{_leave_running}).  None if it could not fork
    (or C{$GANETI_NO_FORKSEED} is set): LuxiD then runs the fork server with C{python -m}."""
    if DISABLE_ENV in os.environ:
        return None
    return _fork(_leave_running)


def _fork(in_child: Callable[[], None] | None) -> Seed | None:
    """Fork a seed (C{in_child} run first in the child): LuxiD's ends, or None if it could not."""
    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError:
        return None
    try:
        reports, report_w = os.pipe()
    except OSError:
        mine.close()
        theirs.close()
        return None
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:
        if in_child is not None:
            in_child()
        _become_seed(theirs.fileno(), report_w)
    theirs.close()
    os.close(report_w)
    if pid < 0:
        mine.close()
        os.close(reports)
        return None
    return Seed(pid, mine, reports)


def _leave_running() -> None:
    """In a seed forked from a running LuxiD, first: no signal handler of LuxiD's (Twisted's write to its
    reactor's waker), no log observer of LuxiD's (they write to its log file; both descriptors are closed
    next and their numbers may be reused), no reactor installed (each job installs its own; LuxiD's epoll
    instance must not be shared), and no collection of what LuxiD's heap holds (its pages stay shared).
    The threads of LuxiD's thread pool do not exist here; nothing here uses them."""
    gc.freeze()
    signal.set_wakeup_fd(-1)
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (ValueError, OSError):
            continue
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    logger = sys.modules.get("twisted.logger")
    if logger is not None:
        publisher = logger.globalLogPublisher
        for observer in list(getattr(publisher, "_observers", ())):
            publisher.removeObserver(observer)
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__  # (twistd's log files otherwise)
    sys.modules.pop("twisted.internet.reactor", None)
    internet = sys.modules.get("twisted.internet")
    if internet is not None:
        vars(internet).pop("reactor", None)


def adopt_message(root: str, rpc_port: int, environ: dict[str, str]) -> bytes:
    """What LuxiD sends the seed to adopt it (read by L{ganeti.luxid.forkserver.serve_seed})."""
    import orjson

    return orjson.dumps({"root": root, "rpc_port": rpc_port, "env": environ})


def _become_seed(control: int, report_w: int) -> None:
    """In the forked child: the seed.  Never returns."""
    import fcntl
    import importlib

    from ganeti import childproc

    def run() -> int:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (control, report_w, devnull)]  # out of 0-3's way
        for target, fd in zip((CONTROL_FD, 1, 0, 2), (high[0], high[1], high[2], high[2])):
            os.dup2(fd, target, inheritable=target != CONTROL_FD)
        os.closerange(CONTROL_FD + 1, _max_fd())  # LuxiD's: its pid file lock, its log, the launcher's
        childproc.set_name(NAME)
        # the fork server's own modules, loaded in this process only (LuxiD never imports them): by name
        forkserver = importlib.import_module("ganeti.luxid.forkserver")
        return int(forkserver.serve_seed(CONTROL_FD, MAX_ADOPT))

    childproc.exit_child(run)


def _max_fd() -> int:
    try:
        return int(os.sysconf("SC_OPEN_MAX"))
    except (ValueError, OSError):
        return 65536
