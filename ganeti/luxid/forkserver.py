"""A fork server for job processes: C{python -m ganeti.luxid.forkserver}.

A cold Python interpreter needs ~100 ms before it can run a job.  LuxiD
has one such server: forked at its start, sharing LuxiD's imported pages
(L{ganeti.forkseed}), or started as its own child with
C{spawnProcess} where that could not be done; after a while without a job
LuxiD ends it and forks the next from itself as it runs; the server imports
everything a job needs, then waits on fd 3, a Unix socket.
For each job LuxiD makes the two handshake pipes itself and passes the
child's ends with C{SCM_RIGHTS}; the server forks, the child puts them on
fds 3 and 4 and runs exactly what C{python -m ganeti.jobs} runs: the same
handshake, its own lock file, its own process (and session, so signals
meant for one job reach only that job).

The server keeps one spare child forked ahead (L{ganeti.jobs.spare}): it
has its reactor, a connection to WConfD and the config ready, and gets
the next job's pipe ends over a socket instead of being forked then.  A
spare that dies without a job is not reported; the job is forked as above
when there is no spare.  A spare not given a job within L{SPARE_IDLE}
seconds is retired (its socket closed: it exits): an idle master does not
keep a job process (46 MiB RSS, 12 MiB PSS of its own on a one-node master)
for a job that may not come; the next job is forked (about 40 ms slower
than on a spare), and the spare forked again after it.
Before each fork the server brings its copy of the config forward
(L{ganeti.luxid.configseed}: one request to WConfD, the changes since the
copy), which the child starts from; an idle server (its spare retired)
keeps none.  The server freezes its heap (C{gc.freeze}) before
each fork: a child's collections then leave the inherited objects, and
their pages, alone.

The server reports on stdout, one JSON line each:
C{{"spawned": job_id, "pid": pid}},
C{{"exited": pid, "job": job_id, "code": c, "signal": s}} and
C{{"spare": pid}} for each spare forked (the next job's process unless it
dies first: LuxiD plans it for a job and names, in the job's request
C{{"job": id, "lockfile": path}}, the lock file the spare is to take), and
C{{"retired": pid}} when an idle spare is retired (a job planned for it
meanwhile is forked: its plan is not used, as for a spare that died).
It exits when LuxiD closes the socket (or dies).
"""

from __future__ import annotations

import fcntl
import gc
import os
import select
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

import orjson

from ganeti import childproc, ports
from ganeti.jobs import blanks, channel, trace, wconfdlink
from ganeti.paths import Paths

if TYPE_CHECKING:
    from ganeti.luxid.configseed import ConfigSeed

CONTROL_FD = 3


def _warm_imports() -> None:
    """Import what a job needs, without installing a reactor: the child's
    C{task.react} installs its own (an epoll instance must not be shared
    across a fork), from modules already here."""
    from ganeti import leanimports

    leanimports.defer_system_openssl()  # as in the daemons: jobs use no HTTPS of the standard library's

    import twisted.internet.default  # noqa: F401
    import twisted.internet.defer  # noqa: F401
    import twisted.internet.epollreactor  # noqa: F401
    import twisted.internet.stdio  # noqa: F401
    import twisted.internet.task  # noqa: F401
    import twisted.protocols.amp  # noqa: F401

    import ganeti.heartbeat.store  # noqa: F401  (the nodes LuxiD counts unreachable)
    import ganeti.jobs.model  # noqa: F401
    import ganeti.jobs.process  # noqa: F401
    import ganeti.jobs.spare  # noqa: F401
    import ganeti.luxi.client  # noqa: F401  (follow-up jobs, the liveness roster)
    import ganeti.luxi.methods  # noqa: F401
    import ganeti.rpc.client  # noqa: F401
    import ganeti.wconfd.client  # noqa: F401

    try:
        import ganeti.cmdlib
        import ganeti.cmdlib.hooks  # noqa: F401
        import ganeti.cmdlib.liveness_verify  # noqa: F401
        import ganeti.jobs.processor  # noqa: F401

        ganeti.cmdlib.load_all()
    except ImportError:
        pass
    _warm_interfaces()


#: what L{_warm_interfaces} made, held: the declarations' cache keeps them only while something does
_WARMED: list[Any] = []


def _warm_interfaces() -> None:
    """Work out here, once, the interface declarations (C{zope.interface}) every job process otherwise works
    out for itself when it first connects: those of the protocol classes it uses and of Twisted's endpoint
    wrapper (0.5-1 ms of CPU per job)."""
    from twisted.internet import endpoints, interfaces
    from zope.interface import declarations, implementedBy

    from ganeti.jobs import process
    from ganeti.wconfd import client

    for cls in (client._ClientProtocol, endpoints._WrappingProtocol, process._Control):
        implementedBy(cls)
    wrapper = endpoints._WrappingProtocol
    _WARMED.extend(declarations.Provides(wrapper, iface)
                   for iface in (interfaces.IFileDescriptorReceiver, interfaces.IHandshakeListener))


def _report(message: dict[str, Any]) -> None:
    data = orjson.dumps(message) + b"\n"
    while data:
        try:
            data = data[os.write(1, data):]
        except InterruptedError:
            continue


def _child(job_id: int, paths: Paths, fds: list[int], keep_closed: list[int], rpc_port: int) -> None:
    """In the forked child: become the job process.  Never returns."""

    def become() -> int:
        childproc.leave_parent(keep_closed)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in fds]  # out of the way of 3 and 4
        for fd in fds:
            if fd not in (channel.TO_PARENT_FD, channel.FROM_PARENT_FD):
                os.close(fd)
        os.dup2(high[0], channel.TO_PARENT_FD, inheritable=False)
        os.dup2(high[1], channel.FROM_PARENT_FD, inheritable=False)
        for fd in high:
            os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        from ganeti.jobs.process import run

        return trace.profiled(job_id, lambda: run(job_id, paths, rpc_port=rpc_port))

    childproc.exit_child(become)


def _spare_child(paths: Paths, sock: socket.socket, keep_closed: list[int], rpc_port: int) -> None:
    """In the forked child: become a spare job process (L{ganeti.jobs.spare}).  Never returns."""

    def become() -> int:
        childproc.leave_parent(keep_closed)
        high = socket.socket(fileno=fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD_CLOEXEC, 10))
        sock.close()
        opened = os.open(os.devnull, os.O_RDONLY)
        devnull = fcntl.fcntl(opened, fcntl.F_DUPFD, 10)  # not itself one of those it goes to
        os.close(opened)
        for fd in (0, channel.TO_PARENT_FD, channel.FROM_PARENT_FD):  # 3 and 4 held until the pipes come
            os.dup2(devnull, fd, inheritable=fd == 0)
        os.close(devnull)
        from ganeti.jobs import spare

        return spare.run(paths, high, rpc_port)

    childproc.exit_child(become)


#: seconds without a spare after one died before it was given a job (no loop of spares dying at once)
SPARE_PAUSE = 5.0
#: seconds a spare waits for a job before it is retired (the next job is forked, and a spare after it)
SPARE_IDLE = 30.0


class _Spares:
    """The fork server's one spare job process: forked ahead, given the next job."""

    def __init__(self, paths: Paths, rpc_port: int, keep_closed: list[int], idle: float = SPARE_IDLE,
                 seed: ConfigSeed | None = None) -> None:
        from ganeti.luxid.configseed import ConfigSeed

        self.paths = paths
        #: the config the children start from, brought forward before each fork
        self.seed = seed or ConfigSeed(paths.wconfd_socket)
        self.rpc_port = rpc_port
        self.keep_closed = keep_closed
        self.idle = idle
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.paused_until = 0.0
        #: when the spare waiting was forked (it is retired L{idle} seconds later)
        self.forked_at = 0.0
        #: spares that ended (or were ended) without a job: reaped, never reported
        self.lost: set[int] = set()
        #: a profile per job (L{trace.PROFILE_ENV}) covers a process from its fork: no spares
        self.enabled = not os.environ.get(trace.PROFILE_ENV)

    def fork(self) -> None:
        """Fork a spare unless there is one (or spares are paused)."""
        if not self.enabled or self.pid is not None or time.monotonic() < self.paused_until:
            return
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.hand_down()
        gc.freeze()
        try:
            pid = os.fork()
        except OSError:
            mine.close()
            theirs.close()
            return
        if pid == 0:
            _spare_child(self.paths, theirs, [*self.keep_closed, mine.fileno()], self.rpc_port)
        theirs.close()
        self.pid, self.sock = pid, mine
        self.forked_at = time.monotonic()
        _report({"spare": pid})

    def hand_down(self) -> None:
        """Bring the config copy forward, for the child about to be forked."""
        self.seed.refresh()
        wconfdlink.inherit(self.seed.serial, self.seed.config)

    def retire_in(self) -> float | None:
        """Seconds until the spare waiting is retired (0: now), or None without one."""
        if self.pid is None:
            return None
        return max(0.0, self.forked_at + self.idle - time.monotonic())

    def retire(self) -> None:
        """End the spare waiting: closing its socket makes it exit (reaped as a spare, never reported)."""
        pid, sock = self.pid, self.sock
        if pid is None or sock is None:
            return
        self.pid = self.sock = None
        self.lost.add(pid)
        sock.close()
        self.seed.drop()  # (an idle server keeps no copy either)
        wconfdlink.inherit(None, None)
        _report({"retired": pid})

    def assign(self, message: bytes, fds: list[int]) -> int | None:
        """Give the job of C{message} and its pipe ends to the spare; its
        pid, or None (no spare, or it is gone: fork the job instead)."""
        pid, sock = self.pid, self.sock
        if pid is None or sock is None:
            return None
        self.pid = self.sock = None
        try:
            socket.send_fds(sock, [message], fds)
        except OSError:
            try:
                os.kill(pid, signal.SIGKILL)  # not a job's: reaped as a spare (L{exited})
            except OSError:
                pass
            self.lost.add(pid)
            return None
        finally:
            sock.close()
        return pid

    def exited(self, pid: int) -> bool:
        """Whether C{pid} was a spare without a job (then another is not forked for L{SPARE_PAUSE} s)."""
        if pid in self.lost:
            self.lost.discard(pid)
            return True
        if pid != self.pid:
            return False
        if self.sock is not None:
            self.sock.close()
        self.pid = self.sock = None
        self.paused_until = time.monotonic() + SPARE_PAUSE
        return True


def serve(paths: Paths, control_fd: int = CONTROL_FD, rpc_port: int = ports.NODED, spare_idle: float = SPARE_IDLE) -> int:
    """The server's loop, once L{_warm_imports} ran (L{main}, L{serve_seed})."""
    from ganeti.rpc.tls import warm_client_context

    warm_client_context(paths)  # the node RPC client's TLS context, built here once instead of in every job
    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}
    watched: list[socket.socket | int] = [control, wake_r]
    spares = _Spares(paths, rpc_port, [control.fileno(), wake_r, wake_w], spare_idle)
    spares.fork()
    while True:
        try:
            readable, _w, _x = select.select(watched, [], [], spares.retire_in())
        except InterruptedError:
            continue
        if not readable and spares.retire_in() == 0.0:
            spares.retire()
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(children, spares)
        if control not in readable:
            continue
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 4096, 2)
        except InterruptedError:
            continue
        if not message:
            return 0  # LuxiD went away: jobs keep running on their own (a spare ends when it sees this)
        try:
            job_id = int(orjson.loads(message)["job"])
            if len(fds) != 2:
                raise ValueError("expected two pipe ends, got %d" % len(fds))
        except (ValueError, KeyError, TypeError) as e:
            print("forkserver: bad request %r: %s" % (message[:100], e), file=sys.stderr, flush=True)
            for fd in fds:
                os.close(fd)
            continue
        trace.hop(job_id, "forkserver.received")
        pid = spares.assign(message, fds)  # (the spare reads the lock file's name, if any, from it)
        if pid is None:
            forking = trace.now()
            spares.hand_down()
            gc.freeze()  # the objects so far stay out of the child's collections: no copy-on-write of their pages
            pid = os.fork()
            if pid == 0:
                trace.hop(job_id, "fork.child", forking)
                _child(job_id, paths, fds, [control.fileno(), wake_r, wake_w], rpc_port)
        for fd in fds:
            os.close(fd)
        children[pid] = job_id
        _report({"spawned": job_id, "pid": pid})
        spares.fork()  # the next job's, while this one runs


def _reap(children: dict[int, int], spares: _Spares) -> None:
    for pid, status in childproc.exited():
        blanks.forget(spares.paths, pid)  # (what it made ahead and did not use: L{ganeti.jobs.blanks})
        if pid not in children and spares.exited(pid):
            continue
        job_id = children.pop(pid, None)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        _report({"exited": pid, "job": job_id, "code": code, "signal": sig})


def serve_seed(control_fd: int, max_adopt: int) -> int:
    """The fork server forked at LuxiD's start (L{ganeti.forkseed}): import what jobs need, wait for
    LuxiD's adoption on C{control_fd} (the node's root, the RPC port, LuxiD's environment), then L{serve}.
    Returns 0 when LuxiD ended without adopting it, 1 for an adoption that is not one."""
    _warm_imports()
    control = socket.socket(fileno=control_fd)
    try:
        message = control.recv(max_adopt)
    except OSError:
        message = b""
    control.detach()  # (serve wraps the descriptor again)
    if not message:
        return 0
    try:
        decoded: Any = orjson.loads(message)
        root, rpc_port, environ = decoded["root"], decoded["rpc_port"], decoded["env"]
        if not (isinstance(root, str) and isinstance(rpc_port, int) and isinstance(environ, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in environ.items())):
            raise ValueError("root, rpc_port and env are a string, an integer and an object of strings")
    except (ValueError, KeyError, TypeError) as e:
        print("fork server: bad adoption %r: %s" % (message[:100], e), file=sys.stderr, flush=True)
        return 1
    childproc.take_environment(environ)  # (the job trace's file, as LuxiD's environment names it)
    paths = Paths.from_option(root)
    log = os.open(paths.log_file("jobs"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    os.dup2(log, 2)
    os.close(log)
    return serve(paths, control_fd, rpc_port=rpc_port)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ganeti.luxid.forkserver")
    parser.add_argument("--root")
    parser.add_argument("--rpc-port", type=int, default=ports.NODED, help="port of the node daemons, for the jobs")
    parser.add_argument("--spare-idle", type=float, default=SPARE_IDLE,
                        help="seconds a spare job process waits for a job before it is retired (default %g)"
                        % SPARE_IDLE)
    args = parser.parse_args(argv)
    _warm_imports()
    return serve(Paths.from_option(args.root), rpc_port=args.rpc_port, spare_idle=args.spare_idle)


if __name__ == "__main__":
    sys.exit(main())
