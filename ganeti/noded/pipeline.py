"""A transfer's disk side in a thread of its own, beside the network side.

A transfer's thread (L{ganeti.noded.bulk}) receives, opens and stores, or
reads, seals and sends, one step after the other: on a node whose cores
are busy, each step waits for the one before.  Here the disk side gets a
thread of its own, so that reading or writing the disk overlaps with the
network and the cipher (the system calls release the interpreter's lock):

  - L{ReadAhead}: the sender's source is read into a few rotating buffers
    ahead of the frames being sealed and sent;
  - L{BlockWriter}: the receiver opens the frames straight into large
    buffers (no copy in between), which a writer thread writes to the file
    in blocks of L{BLOCK} bytes.  The file is opened with C{O_DIRECT} where
    its file system allows it: the blocks go to the disk from these
    buffers, without a copy into the page cache nor the dirty-page
    throttling a buffered writer meets, and the final fsync has only the
    file's metadata left to flush.  Elsewhere (C{O_DIRECT} refused) the
    writes are buffered and their writeback started as they go.

Nothing is reported as stored before the final fsync (L{BlockWriter.finish}).
A failure of the writer (a full disk, an I/O error) stops the transfer at
the next block.  Neither thread outlives its transfer: C{close} stops and
joins it before the descriptor is closed (never a write or read on a
number reused meanwhile).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import queue
import threading
from typing import Any, Callable, Iterator

#: bytes a writer writes at once (a multiple of L{ALIGN})
BLOCK = 4 << 20
#: buffers in flight between the network side and the disk side
DEPTH = 3
#: what O_DIRECT wants: offsets, lengths and buffer addresses aligned so
ALIGN = 4096
#: buffered writes: start the writeback of every so many bytes (see L{start_writeback})
WRITEBACK_STEP = 8 << 20
#: Linux sync_file_range's SYNC_FILE_RANGE_WRITE
_SYNC_FILE_RANGE_WRITE = 2
#: Linux F_SETPIPE_SZ: the capacity of the pipes between scripts and noded
F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20


def _sync_file_range() -> Any:
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_FILE_RANGE = _sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Have the kernel start writing C{length} bytes at C{offset} of C{fd} to
    disk, without waiting (Linux C{sync_file_range}): the final fsync then
    waits for the last few megabytes only, not for the whole file."""
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def widen_pipe(fd: int) -> None:
    """Give the pipe C{fd} a capacity of L{PIPE_SIZE} (fewer wake-ups), if the system lets us."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass


class DiskError(Exception):
    """The disk side failed; the message says why."""


def aligned_buffer(size: int) -> memoryview:
    """C{size} bytes of anonymous memory, page-aligned (an O_DIRECT buffer)."""
    return memoryview(mmap.mmap(-1, size))


def open_direct(path: str, flags: int, mode: int = 0o600) -> tuple[int, bool]:
    """Open C{path} with C{O_DIRECT} if its file system allows it; the
    descriptor and whether it is direct."""
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            return os.open(path, flags | direct, mode), True
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    return os.open(path, flags, mode), False


def set_direct(fd: int, on: bool) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    direct = getattr(os, "O_DIRECT", 0)
    fcntl.fcntl(fd, fcntl.F_SETFL, (flags | direct) if on else (flags & ~direct))


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[written:]


class BlockWriter:
    """Writes what a receiver opens into C{fd} from a thread of its own.

    The receiver asks for room (L{reserve}), fills it (opening a frame into
    it) and L{commit}s it; or it L{put}s bytes it has (decompressed data).
    A full buffer goes to the writer thread; L{finish} writes the rest and
    syncs the file.

    @param fd: open for writing, at offset 0 (not closed here)
    @param direct: C{fd} has C{O_DIRECT}
    @param sync: fsync C{fd} at the end (a file; not a pipe)
    @param writeback: C{(offset, length)}, called after every
        L{WRITEBACK_STEP} bytes of buffered writes: starts the kernel's
        writeback of what was written, without waiting for it
    """

    def __init__(self, fd: int, path: str, *, direct: bool, sync: bool = True,
                 writeback: Callable[[int, int], None] | None = None) -> None:
        self._fd, self._path, self._direct, self._sync = fd, path, direct, sync
        self._writeback = writeback
        self._free: queue.Queue[memoryview] = queue.Queue()
        self._full: queue.Queue[tuple[memoryview, int] | None] = queue.Queue()
        for _ in range(DEPTH):
            self._free.put(aligned_buffer(BLOCK))
        self._error: str | None = None
        self._current: memoryview | None = None
        self._fill = 0
        self._scratch: memoryview | None = None
        self._reserved_scratch = False
        self._written = self._flushed = 0
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name="transfer-write",
                                                                 daemon=True)
        self._thread.start()

    # --- the network side (the transfer's thread) ----------------------------------------

    def _buffer(self) -> memoryview:
        if self._current is None:
            while True:
                try:
                    self._current = self._free.get(timeout=1.0)
                    break
                except queue.Empty:
                    self._check()
            self._fill = 0
        self._check()
        return self._current

    def _check(self) -> None:
        if self._error is not None:
            raise DiskError(self._error)

    def reserve(self, count: int) -> memoryview:
        """Room for C{count} bytes (at most L{BLOCK}); L{commit} them once filled."""
        buf = self._buffer()
        if self._fill + count <= BLOCK:
            self._reserved_scratch = False
            return buf[self._fill:self._fill + count]
        if self._scratch is None or len(self._scratch) < count:
            self._scratch = memoryview(bytearray(count))
        self._reserved_scratch = True
        return self._scratch[:count]

    def commit(self, count: int) -> None:
        """The C{count} bytes L{reserve}d are filled."""
        if self._reserved_scratch:
            assert self._scratch is not None
            self._reserved_scratch = False
            self.put(self._scratch[:count])
            return
        self._fill += count
        if self._fill == BLOCK:
            self._hand_over()

    def put(self, data: Any) -> None:
        """Store a copy of C{data}."""
        view = memoryview(data).cast("B")
        while view:
            buf = self._buffer()
            take = min(len(view), BLOCK - self._fill)
            buf[self._fill:self._fill + take] = view[:take]
            self._fill += take
            view = view[take:]
            if self._fill == BLOCK:
                self._hand_over()

    def _hand_over(self) -> None:
        assert self._current is not None
        self._full.put((self._current, self._fill))
        self._current, self._fill = None, 0

    def finish(self) -> None:
        """Write what remains, wait for the writer, sync the file.
        @raise DiskError: a write or the sync failed
        """
        if self._current is not None and self._fill:
            self._hand_over()
        self._stop()
        self._check()
        if self._sync:
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise DiskError("cannot sync %s: %s" % (self._path, exc.strerror)) from None

    def close(self) -> None:
        """Stop the writer thread (what it has not written is dropped)."""
        while True:  # drop queued blocks: the writer exits at the stop mark
            try:
                self._full.get_nowait()
            except queue.Empty:
                break
        self._error = self._error or "closed"
        self._stop()

    def _stop(self) -> None:
        if self._thread is not None:
            self._full.put(None)
            self._thread.join()
            self._thread = None

    # --- the disk side (the writer thread) ------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._full.get()
            if item is None:
                return
            buf, count = item
            if self._error is None:
                try:
                    self._write(buf[:count])
                except OSError as exc:
                    self._error = "cannot write %s: %s" % (self._path, exc.strerror or exc)
            self._free.put(buf)

    def _write(self, view: memoryview) -> None:
        if self._direct:
            whole, done = len(view) - len(view) % ALIGN, 0
            try:
                while done < whole:
                    done += os.write(self._fd, view[done:whole])
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
            if done < len(view):  # the last, partial block, or a device that refuses: buffered from here on
                set_direct(self._fd, False)
                self._direct = False
            self._written += done
            view = view[done:]
        if not view:
            return
        _write_all(self._fd, view)
        self._written += len(view)
        if self._writeback is not None and self._written - self._flushed >= WRITEBACK_STEP:
            self._writeback(self._flushed, self._written - self._flushed)
            self._flushed = self._written


class ReadAhead:
    """Reads a source ahead, in a thread, into C{depth} rotating buffers of
    C{size} bytes (aligned: a file may be read with C{O_DIRECT}).

    Iterating gives each buffer's filled part, valid until the next step;
    a buffer is filled completely unless the source ended.  L{close} stops
    the thread (the caller first makes a blocked read return: killing the
    script that writes the pipe).

    @param readinto: the source's C{readinto} (0 at its end)
    """

    def __init__(self, readinto: Callable[[memoryview], int], size: int, depth: int = DEPTH) -> None:
        self._readinto = readinto
        self._free: queue.Queue[memoryview | None] = queue.Queue()
        self._full: queue.Queue[tuple[memoryview, int] | BaseException] = queue.Queue()
        for _ in range(depth):
            self._free.put(aligned_buffer(size))
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        try:
            while True:
                buf = self._free.get()
                if buf is None:
                    return
                done = 0
                while done < len(buf):
                    count = self._readinto(buf[done:])
                    if not count:
                        break
                    done += count
                self._full.put((buf, done))
                if done < len(buf):
                    return
        except BaseException as exc:  # handed to the transfer's thread, which raises it
            self._full.put(exc)

    def __iter__(self) -> Iterator[memoryview]:
        self._thread = threading.Thread(target=self._run, name="transfer-read", daemon=True)
        self._thread.start()
        while True:
            item = self._full.get()
            if isinstance(item, BaseException):
                raise item
            buf, count = item
            if count:
                yield buf[:count]
            if count < len(buf):
                return
            self._free.put(buf)

    def close(self) -> None:
        """Stop the thread; a read it is blocked in must return first."""
        if self._thread is not None:
            self._free.put(None)
            self._thread.join()
            self._thread = None
