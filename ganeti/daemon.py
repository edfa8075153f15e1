"""Helpers every daemon's composition root uses."""

from __future__ import annotations

import ctypes
import gc
import sys
from typing import Any, Callable

from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall

from ganeti import lockfile
from ganeti.paths import Paths
from ganeti.ports import port_number  # noqa: F401  (re-exported for the daemons' options)


class AlreadyRunning(SystemExit):
    """Another instance of the daemon holds the pid file."""


def lock_pid_file(paths: Paths, daemon: str) -> int:
    """Hold C{run/ganeti/<daemon>.pid} locked for this process's lifetime.

    The lock is taken before anything else starts, so a second instance on
    the same root stops with a clear message and touches nothing.  The fd
    survives twistd's fork; the pid is rewritten by L{PidFileService}.
    """
    path = paths.pid_file(daemon)
    try:
        fd = lockfile.hold(path, mode=0o644)
    except lockfile.LockHeld:
        other = lockfile.read_pid(path)
        raise AlreadyRunning("%s is already running on root %s (pid %s, pid file %s)" % (daemon, paths.root, other, path)) from None
    lockfile.write_pid(fd)
    return fd


class PidFileService(Service):
    """Rewrites the pid after twistd's fork; the lock is already held."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def startService(self) -> None:
        super().startService()
        lockfile.write_pid(self.fd)


_malloc_trim: Any = None


def release_freed_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc's C{malloc_trim}).

    CPython frees its small objects' arenas by itself, but what it frees
    through C{malloc} (the tables of large dicts and lists, long strings:
    a parsed configuration) stays in the process unless it was at the top
    of the heap.  After a 9.5 MiB configuration (10,000 instances) is
    parsed and dropped, this gives back ~12 MiB of the ~20 MiB left behind.
    A no-op answering C{False} where the C library has no C{malloc_trim}.
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", False)
    if not _malloc_trim:
        return False
    _malloc_trim(0)
    return True


class FrozenHeapService(Service):
    """Keeps the objects a daemon holds for long out of CPython's full collections.

    A full garbage collection walks every tracked object.  A daemon holds
    about 100,000 of them (its modules, Twisted, LuxiD's config), and a
    request that builds a large answer (a bulk query of 1,000 instances
    allocates some 75,000 lists) triggers full collections that walk them
    all, several times per request: that tripled such requests' time.
    Once the reactor runs, this collects everything and freezes the
    survivors (C{gc.freeze}), so later collections skip them; every
    C{interval} seconds, when the long-lived generation has grown past
    C{threshold} objects again (a larger config, say), it unfreezes,
    collects and freezes anew.  After each collection the memory freed
    (start-up's buffers, a replaced config) goes back to the system
    (L{release_freed_memory}).  Process-wide: only a daemon's
    C{makeService} should add it.

    @param collector: the C{gc} module (tests pass a fake).
    @param trim: called after each collection (tests pass a fake).
    """

    def __init__(self, clock: IReactorTime, interval: float = 60.0, threshold: int = 50_000, collector: Any = gc,
                 trim: Callable[[], object] = release_freed_memory) -> None:
        self.clock = clock
        self.interval = interval
        self.threshold = threshold
        self.gc = collector
        self.trim = trim
        self._loop: LoopingCall | None = None
        self._pending: Any = None
        self._inherited: bool | None = None

    def startService(self) -> None:
        super().startService()
        self._loop = LoopingCall(self._check)
        self._loop.clock = self.clock
        self._loop.start(self.interval, now=False)
        self._pending = self.clock.callLater(0, self.refreeze)

    def stopService(self) -> None:
        super().stopService()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        self.gc.unfreeze()

    def _check(self) -> None:
        if len(self.gc.get_objects(generation=2)) > self.threshold:
            self.refreeze()

    def refreeze(self) -> None:
        """Collect everything, freeze what survives, give back what was freed.

        A daemon forked from a parent that froze its heap (L{ganeti.warmstart})
        keeps that heap frozen: unfreezing and collecting it would write to
        every object and so copy the pages it shares with its siblings."""
        if self._inherited is None:
            self._inherited = self.gc.get_freeze_count() > 0
        if not self._inherited:
            self.gc.unfreeze()
        self.gc.collect()
        self.gc.freeze()
        self.trim()


# --- option coercers shared by the daemons' usage.Options -------------------------


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


def seconds_or_never(value: str) -> float:
    """A number of seconds, 0 for never (not NaN, not infinite)."""
    number = float(value)
    if not 0 <= number < float("inf"):
        raise ValueError("must be 0 or a positive number of seconds")
    return number


def without_tls() -> None:
    """Keep pyOpenSSL (and the cryptography it loads) out of this process.

    For daemons that never speak TLS (confd, MonD), however they were
    started: Twisted's TCP support imports pyOpenSSL whenever it is
    installed, about 15 MiB of memory.  (C{ganeti-twistd} keeps it out of
    every daemon: their TLS is the standard library's, L{ganeti.tlsbio}.)
    Only done before the reactor is imported (the daemon's start).
    """
    if "twisted.internet.reactor" not in sys.modules and "OpenSSL" not in sys.modules:
        sys.modules["OpenSSL"] = None  # type: ignore[assignment]
