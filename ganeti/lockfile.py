"""Lock files: the one place that takes, probes and reads flock'ed files.

Three kinds of lock file use it:

  - a daemon's pid file (C{run/ganeti/<daemon>.pid}), locked for the
    daemon's lifetime so a second instance on the same root stops;
  - a lock owner's livelock file (a job process, LuxiD), locked while the
    owner lives so WConfD sees it die the instant the kernel drops it;
  - LuxiD's job queue lock (C{queue/lock}).

A holder takes an exclusive C{flock(2)} with L{hold}; a prober takes a
non-blocking shared lock and lets it go at once.  Both flock and POSIX
(C{fcntl}) locks are probed by L{is_free}, so owners that lock either way
(ours use flock, Ganeti's jobs use fcntl) are seen alive.  Standard
library only.
"""

from __future__ import annotations

import errno
import fcntl
import os

#: the kernel's table of held locks
PROC_LOCKS = "/proc/locks"

_HELD_ERRNOS = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class LockHeld(Exception):
    """Another process holds the lock file.

    @ivar path: the lock file.
    """

    def __init__(self, path: str) -> None:
        super().__init__("%s is locked by another process" % path)
        self.path = path


def hold(path: str, mode: int = 0o600, create_new: bool = False) -> int:
    """Create C{path} (and its directory) and hold it exclusively.

    Returns the open file descriptor: the lock lasts as long as it stays
    open (and survives a fork).  Nothing is left open on failure.

    @param mode: permissions of a newly created file.
    @param create_new: fail with C{FileExistsError} if C{path} exists.
    @raise LockHeld: another process holds C{path}.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if create_new else 0)
    fd = os.open(path, flags, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in _HELD_ERRNOS:
            raise LockHeld(path) from None
        raise
    except BaseException:
        os.close(fd)
        raise
    return fd


def release(fd: int) -> None:
    """Unlock and close a descriptor returned by L{hold}."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def write_pid(fd: int, pid: int | None = None) -> None:
    """Replace the content of a held pid file by C{pid} (default: ours)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, b"%d\n" % (os.getpid() if pid is None else pid), 0)


def read_pid(path: str) -> str:
    """The pid written in C{path} as text, C{"?"} when empty or unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(32)
    except OSError:
        return "?"
    return data.decode(errors="replace").strip() or "?"


def holder_pid(path: str) -> int | None:
    """The pid written in a held pid file; C{None} when nobody holds it.

    A held file whose content is not a pid gives C{-1}.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            data = os.read(fd, 32).decode(errors="replace").strip()
            return int(data) if data.isdigit() else -1
        return None
    finally:
        os.close(fd)


def is_free(path: str) -> bool:
    """C{True} when nothing holds C{path} locked (or it is missing).

    A lock owner whose livelock file is free is dead.  An unreadable file
    or a symlink cannot be told apart, so it counts as held (nothing is
    freed because of it).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError as e:
        return e.errno in (errno.ENOTDIR,)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):
            return False
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True
    finally:
        os.close(fd)  # releases whatever this probe took


def lock_holders(proc_locks: bytes, inode: int) -> set[int]:
    """The pids holding a lock on inode C{inode}, from C{/proc/locks}' text.

    Lines look like C{1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146467 0 EOF};
    waiters (C{1: -> FLOCK ...}) hold nothing and are skipped, and so are
    open file description locks, which show pid -1.
    """
    wanted = b":%d" % inode
    holders: set[int] = set()
    for line in proc_locks.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == b"->":
            continue
        if not fields[5].endswith(wanted) or fields[5].count(b":") != 2:
            continue
        try:
            pid = int(fields[4])
        except ValueError:
            continue
        if pid > 0:
            holders.add(pid)
    return holders


def holds_lock(path: str, pid: int, proc_locks: str = PROC_LOCKS) -> bool:
    """Does process C{pid} hold a lock (flock or POSIX) on C{path}?

    The lock is found in C{/proc/locks} by the file's inode number (the
    device is not compared: on overlay file systems stat() and the lock
    table disagree about it).  A process that inherited a locked file
    descriptor is not seen as its holder: owners lock their own files.
    """
    try:
        inode = os.stat(path).st_ino
    except OSError:
        return False
    with open(proc_locks, "rb") as handle:
        data = handle.read()
    return pid in lock_holders(data, inode)
