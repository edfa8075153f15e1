"""A fork server for job processes: C{python -m ganeti.luxid.forkserver}.

A cold Python interpreter needs ~100 ms before it can run a job.  LuxiD
starts this server once (as its own child, with C{spawnProcess}); the
server imports everything a job needs, then waits on fd 3, a Unix socket.
For each job LuxiD makes the two handshake pipes itself and passes the
child's ends with C{SCM_RIGHTS}; the server forks, the child puts them on
fds 3 and 4 and runs exactly what C{python -m ganeti.jobs} runs: the same
handshake, its own lock file, its own process (and session, so signals
meant for one job reach only that job).

The server reports on stdout, one JSON line each:
C{{"spawned": job_id, "pid": pid}} and
C{{"exited": pid, "job": job_id, "code": c, "signal": s}}.
It exits when LuxiD closes the socket (or dies).
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import socket
import sys
from typing import Any

import orjson

from ganeti import childproc, ports
from ganeti.jobs import channel, trace
from ganeti.paths import Paths

CONTROL_FD = 3


def _warm_imports() -> None:
    """Import what a job needs, without installing a reactor."""
    from ganeti import leanimports

    leanimports.defer_system_openssl()  # as in the daemons: jobs use no HTTPS of the standard library's
    import twisted.internet.defer  # noqa: F401
    import twisted.internet.epollreactor  # noqa: F401
    import twisted.internet.stdio  # noqa: F401
    import twisted.internet.task  # noqa: F401
    import twisted.protocols.amp  # noqa: F401

    import ganeti.jobs.model  # noqa: F401
    import ganeti.jobs.process  # noqa: F401
    import ganeti.wconfd.client  # noqa: F401

    try:
        import ganeti.cmdlib  # noqa: F401
        import ganeti.jobs.processor  # noqa: F401
    except ImportError:
        pass


def _report(message: dict[str, Any]) -> None:
    data = orjson.dumps(message) + b"\n"
    while data:
        try:
            data = data[os.write(1, data):]
        except InterruptedError:
            continue


def _child(job_id: int, paths: Paths, fds: list[int], keep_closed: list[int], rpc_port: int) -> None:
    """In the forked child: become the job process.  Never returns."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        for fd in keep_closed:
            try:
                os.close(fd)
            except OSError:
                pass
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

        code = trace.profiled(job_id, lambda: run(job_id, paths, rpc_port=rpc_port))
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(paths: Paths, control_fd: int = CONTROL_FD, rpc_port: int = ports.NODED) -> int:
    _warm_imports()
    control = socket.socket(fileno=control_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}
    watched: list[socket.socket | int] = [control, wake_r]
    while True:
        try:
            readable, _w, _x = select.select(watched, [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        _reap(children)
        if control not in readable:
            continue
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, 4096, 2)
        except InterruptedError:
            continue
        if not message:
            return 0  # LuxiD went away: jobs keep running on their own
        try:
            job_id = int(orjson.loads(message)["job"])
            if len(fds) != 2:
                raise ValueError("expected two pipe ends, got %d" % len(fds))
        except (ValueError, KeyError, TypeError) as e:
            print("forkserver: bad request %r: %s" % (message[:100], e), file=sys.stderr, flush=True)
            for fd in fds:
                os.close(fd)
            continue
        forking = trace.now()
        pid = os.fork()
        if pid == 0:
            trace.hop(job_id, "fork.child", forking)
            _child(job_id, paths, fds, [control.fileno(), wake_r, wake_w], rpc_port)
        for fd in fds:
            os.close(fd)
        children[pid] = job_id
        _report({"spawned": job_id, "pid": pid})


def _reap(children: dict[int, int]) -> None:
    for pid, status in childproc.exited() if children else ():
        job_id = children.pop(pid, None)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        _report({"exited": pid, "job": job_id, "code": code, "signal": sig})
        if not children:
            return


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ganeti.luxid.forkserver")
    parser.add_argument("--root")
    parser.add_argument("--rpc-port", type=int, default=ports.NODED, help="port of the node daemons, for the jobs")
    args = parser.parse_args(argv)
    return serve(Paths.from_option(args.root), rpc_port=args.rpc_port)


if __name__ == "__main__":
    sys.exit(main())
