"""Forked children, without blocking: reaping them, and a child's own start
(L{leave_parent}) and end (L{exit_child}).  Shared by the job fork server
(L{ganeti.luxid.forkserver}) and the warm launcher (L{ganeti.warmstart}).
Standard library only: both import it before forking."""

from __future__ import annotations

import errno
import os
import signal
import sys
from typing import Callable, Iterator, NoReturn


def exited() -> Iterator[tuple[int, int]]:
    """C{(pid, wait status)} of each child that has ended, without waiting
    for the others; stops when none is left to reap now (or none at all)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except OSError as e:
            if e.errno == errno.EINTR:
                continue
            raise
        if pid == 0:
            return
        yield pid, status


def pid_exists(pid: int) -> bool:
    """Whether a process C{pid} exists (signal 0; one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_alive(pid: int, marker: str = "", proc: str = "/proc") -> bool:
    """Whether C{pid} is a live (not zombie) process whose command line
    contains C{marker}; without C{/proc}, whether the pid exists at all."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if not os.path.isdir(proc):
        return pid_exists(pid)
    base = os.path.join(proc, str(pid))
    try:
        with open(os.path.join(base, "stat"), "rb") as handle:
            stat = handle.read()
        with open(os.path.join(base, "cmdline"), "rb") as handle:
            cmdline = handle.read()
    except OSError as e:
        if e.errno == errno.EACCES:
            return pid_exists(pid)
        return False
    fields = stat.rsplit(b")", 1)[-1].split()
    if fields and fields[0] in (b"Z", b"X", b"x"):
        return False
    return not marker or marker.encode() in cmdline


def leave_parent(keep_closed: list[int], new_session: bool = True) -> None:
    """In a forked child: its own session (if C{new_session}), the server's
    signal handling undone, the server's descriptors C{keep_closed} closed."""
    if new_session:
        os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    for fd in keep_closed:
        try:
            os.close(fd)
        except OSError:
            pass


def set_name(name: str) -> None:
    """Name this process C{name} in C{ps}, C{top} and the process accounting (a forked child's command line
    stays its parent's)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


#: Modules that read the environment when imported: imported again in a child given another environment.
ENV_MODULES = ("ganeti.jobs.trace",)


def take_environment(environ: dict[str, str]) -> None:
    """In a forked child: C{environ} replaces the environment, and the L{ENV_MODULES} imported so far run
    again (they read it when imported)."""
    import importlib

    os.environ.clear()
    os.environ.update(environ)
    for name in ENV_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            importlib.reload(module)


def exit_child(run: Callable[[], int]) -> NoReturn:
    """Run C{run()} (the exit code) in a forked child, then end the child
    without the parent's exit handlers; an exception is printed (exit 1)."""
    code = 1
    try:
        code = run()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
