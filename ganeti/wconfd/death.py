"""Is a lock owner still alive?  Ask its lock file.

A live owner (a job process, LuxiD, ...) holds an exclusive lock on its
lock file for as long as it runs; the kernel drops that lock the instant
the process dies, however it dies.  WConfD probes with a non-blocking
shared lock: if it gets it, or the file is gone, nobody holds the file and
the owner is dead.  Both flock(2) and POSIX (fcntl) locks are checked, so
owners that lock either way (ours use flock, Ganeti's jobs use fcntl) are
seen alive.
"""

from __future__ import annotations

import errno
import fcntl
import os


def owner_is_dead(lockfile: str) -> bool:
    """C{True} when nothing holds C{lockfile} locked (or it is missing)."""
    try:
        fd = os.open(lockfile, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError as e:
        # Unreadable or a symlink: we cannot tell, so we do not free anything.
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


def hold_lockfile(path: str) -> int:
    """Create C{path} and hold it exclusively; returns the fd (keep it open).

    This is how a process shows WConfD it is alive.
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


PROC_LOCKS = "/proc/locks"


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


def holds_lock(lockfile: str, pid: int, proc_locks: str = PROC_LOCKS) -> bool:
    """Does process C{pid} hold a lock (flock or POSIX) on C{lockfile}?

    The lock is found in C{/proc/locks} by the file's inode number (the
    device is not compared: on overlay file systems stat() and the lock
    table disagree about it).  A process that inherited a locked file
    descriptor is not seen as its holder: owners lock their own files.
    """
    try:
        inode = os.stat(lockfile).st_ino
    except OSError:
        return False
    with open(proc_locks, "rb") as handle:
        data = handle.read()
    return pid in lock_holders(data, inode)
