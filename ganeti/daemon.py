"""Helpers every daemon's composition root uses."""

from __future__ import annotations

import fcntl
import os

from twisted.application.service import Service

from ganeti.paths import Paths


class AlreadyRunning(SystemExit):
    """Another instance of the daemon holds the pid file."""


def lock_pid_file(paths: Paths, daemon: str) -> int:
    """Hold C{run/ganeti/<daemon>.pid} locked for this process's lifetime.

    The lock is taken before anything else starts, so a second instance on
    the same root stops with a clear message and touches nothing.  The fd
    survives twistd's fork; the pid is rewritten by L{write_pid}.
    """
    path = paths.pid_file(daemon)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            other = os.read(fd, 32).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)
        raise AlreadyRunning("%s is already running on root %s (pid %s, pid file %s)" % (daemon, paths.root, other, path))
    write_pid(fd)
    return fd


def write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d\n" % os.getpid(), 0)


class PidFileService(Service):
    """Rewrites the pid after twistd's fork; the lock is already held."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def startService(self) -> None:
        super().startService()
        write_pid(self.fd)


# --- option coercers shared by the daemons' usage.Options -------------------------


def port_number(value: str) -> int:
    """A TCP/UDP port (0 lets the kernel choose)."""
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError("not a port number (0-65535)")
    return number


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError("must be at least 1")
    return number


def positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise ValueError("must be positive")
    return number
