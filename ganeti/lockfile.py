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

#: the kernel's table of held locks (reading it waits for an RCU grace period: milliseconds)
PROC_LOCKS = "/proc/locks"
#: where the processes' open file descriptions are described (C{<pid>/fdinfo/<fd>})
PROC = "/proc"

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


def fdinfo_lock_holders(fdinfo: bytes, inode: int) -> set[int] | None:
    """The pids holding a lock on inode C{inode} through one open file, from
    its C{/proc/<pid>/fdinfo/<fd>} text; C{None} when that file is another
    inode (or the text names none).

    The text has C{ino:} and, per lock, C{lock:} lines in the format of
    C{/proc/locks} (L{lock_holders}).
    """
    lines = fdinfo.splitlines()
    ino = next((line.split(b":", 1)[1].strip() for line in lines if line.startswith(b"ino:")), None)
    if ino is None or not ino.isdigit() or int(ino) != inode:
        return None
    locks = b"\n".join(line[len(b"lock:"):].strip() for line in lines if line.startswith(b"lock:"))
    return lock_holders(locks, inode)


def _fdinfo_holds(proc: str, pid: int, inode: int) -> bool | None:
    """Whether C{pid} holds a lock on C{inode}, from its own fdinfo files;
    C{None} when they cannot be read (another user's process, or none)."""
    directory = os.path.join(proc, str(pid), "fdinfo")
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                holders = fdinfo_lock_holders(handle.read(), inode)
        except FileNotFoundError:
            continue  # closed meanwhile
        except OSError:
            return None
        if holders is not None and pid in holders:
            return True
    return False


def holds_lock(path: str, pid: int, proc_locks: str = PROC_LOCKS, proc: str = PROC) -> bool:
    """Does process C{pid} hold a lock (flock or POSIX) on C{path}?

    The lock is found by the file's inode number (the device is not
    compared: on overlay file systems stat() and the lock table disagree
    about it) among the locks of C{pid}'s open files (C{fdinfo}), or, when
    those cannot be read, in C{/proc/locks} (whose reading costs
    milliseconds on a busy machine).  A process that inherited a locked
    file descriptor is not seen as its holder: owners lock their own files.
    """
    try:
        inode = os.stat(path).st_ino
    except OSError:
        return False
    held = _fdinfo_holds(proc, pid, inode)
    if held is not None:
        return held
    with open(proc_locks, "rb") as handle:
        data = handle.read()
    return pid in lock_holders(data, inode)
