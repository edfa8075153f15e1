"""Room for the last word when the data directory fills.

When the filesystem of C{var/lib/ganeti} is full, every job file write
fails with C{ENOSPC}, and a job LuxiD cannot write stays "queued" or
"running" for ever, its process long dead.  LuxiD keeps a reserve: a file
of L{RESERVE_BYTES} in the data directory, made while there is room.  The
first write that finds the disk full removes it (L{SpaceReserve.release})
and is tried again, and so are the final statuses written after it: the
jobs that cannot go on end in error at once, saying why
(L{disk_full_message}).  While the reserve is spent, LuxiD accepts no new
job (L{SpaceReserve.check_room}); it makes the reserve again, and accepts
jobs, once there is room (L{SpaceReserve.ensure}: the reserve and
L{MIN_FREE_BYTES} more free).
"""

from __future__ import annotations

import errno
import os

from twisted.logger import Logger

#: bytes kept back for final job statuses (a few hundred job files)
RESERVE_BYTES = 4 * 1024 * 1024
#: free bytes needed, besides the reserve, before it is made again
MIN_FREE_BYTES = 4 * 1024 * 1024
#: the reserve file, in the data directory (not the queue directory: the
#: candidates' queue replicas are compared with it)
RESERVE_NAME = "luxid-space-reserve"
#: exit code of a job process that could not write its files because the
#: filesystem is full (LuxiD then says so in the job's result)
EXIT_DISK_FULL = 28


def is_disk_full(error: BaseException) -> bool:
    """Whether C{error} says the filesystem is full (or a quota is spent)."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def free_bytes(path: str) -> int | None:
    """Bytes available to this process on C{path}'s filesystem (None: unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def disk_full_message(data_dir: str, error: BaseException | None = None) -> str:
    """What a job that failed for want of space says."""
    free = free_bytes(data_dir)
    why = "%s; " % (error.strerror if isinstance(error, OSError) and error.strerror else error,) if error else ""
    return ("the data directory %s is full (%s%s free): free space there, then submit the job again;"
            " a change it made before may need repairing (gnt-cluster verify)"
            % (data_dir, why, "unknown" if free is None else "%d KiB" % (free // 1024)))


class SpaceReserve:
    """The reserve file of one data directory (see the module docstring).

    @ivar spent: the reserve was given back to a write that found the disk
        full, and not made again yet
    """

    log = Logger()

    def __init__(self, data_dir: str, size: int = RESERVE_BYTES, min_free: int = MIN_FREE_BYTES) -> None:
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, RESERVE_NAME)
        self.size = size
        self.min_free = min_free
        self.spent = False

    def ensure(self) -> bool:
        """Make the reserve if it is missing and there is room; whether it is held now."""
        try:
            if os.path.getsize(self.path) >= self.size:
                return True
        except OSError:
            pass
        free = free_bytes(self.data_dir)
        if free is None or free < self.size + self.min_free:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)  # real blocks: a sparse file frees nothing
            finally:
                os.close(fd)
        except OSError as e:
            self.log.warn("cannot make the space reserve {path}: {e}", path=self.path, e=e)
            self._remove()
            return False
        if self.spent:
            self.spent = False
            self.log.info("there is room in {dir} again: space reserve made, jobs accepted", dir=self.data_dir)
        return True

    def release(self) -> bool:
        """Give the reserve back (the disk is full); whether there was one."""
        self.spent = True
        if self._remove():
            self.log.critical("the data directory {dir} is full: space reserve released; jobs that cannot be"
                              " written end in error, no new job is accepted until there is room",
                              dir=self.data_dir)
            return True
        return False

    def check_room(self) -> str | None:
        """Why no job can be accepted now (the reserve is spent and cannot
        be made again), or None."""
        if not self.spent or self.ensure():
            return None
        return disk_full_message(self.data_dir)

    def _remove(self) -> bool:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            return False
        except OSError as e:
            self.log.warn("cannot remove the space reserve {path}: {e}", path=self.path, e=e)
            return False
        return True


__all__ = ["EXIT_DISK_FULL", "MIN_FREE_BYTES", "RESERVE_BYTES", "SpaceReserve", "disk_full_message", "free_bytes", "is_disk_full"]
