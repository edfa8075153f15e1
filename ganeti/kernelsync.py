"""fsync done by the kernel in the background, without a thread.

LuxiD acknowledges a job once its file is durable: an fsync of the file and
of the queue directory.  Done in the reactor's thread pool, that costs a
thread's wake-up before it (0.4-0.7 ms on a busy 2-core machine) and the
interpreter lock after, and the two fsyncs run one after the other.  Linux's
asynchronous I/O (C{io_submit}) takes fsyncs since 4.18 (C{IOCB_CMD_FSYNC}):
the kernel runs them in its own workers, all those submitted at once side
by side, and counts each completion on an eventfd the reactor watches.

L{KernelSync.open} gives C{None} where that cannot be had (another
architecture, no AIO in the kernel, the system's AIO limit reached): the
caller fsyncs in threads as before.  A submission the kernel refuses
(C{EINVAL}: a file system whose files take no asynchronous fsync) is done in
the thread pool, and so is every later one.  The context belongs to the
process that opened it: a forked child does not use it (the kernel does
not give it the context).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading
from typing import Any, Callable, Sequence

from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import Logger

#: syscall numbers (io_setup, io_destroy, io_getevents, io_submit) by machine
_SYSCALLS = {
    "x86_64": (206, 207, 208, 209),
    "aarch64": (0, 1, 4, 2),
}
_IOCB_CMD_FSYNC = 2
_IOCB_FLAG_RESFD = 1

#: what io_submit answers when it takes no fsync at all (a kernel or file system without it, a full ring
#: with nothing in flight): fsyncs go to threads from then on
_REFUSALS = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EAGAIN, 0)

#: requests in flight at most (more wait for free slots)
SLOTS = 128


class _Iocb(ctypes.Structure):  # struct iocb (linux/aio_abi.h), little-endian
    _fields_ = [
        ("data", ctypes.c_uint64), ("key", ctypes.c_uint32), ("rw_flags", ctypes.c_uint32),
        ("opcode", ctypes.c_uint16), ("reqprio", ctypes.c_int16), ("fildes", ctypes.c_uint32),
        ("buf", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("offset", ctypes.c_int64),
        ("reserved2", ctypes.c_uint64), ("flags", ctypes.c_uint32), ("resfd", ctypes.c_uint32),
    ]


class _Event(ctypes.Structure):  # struct io_event
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64), ("res", ctypes.c_int64),
                ("res2", ctypes.c_int64)]


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


class _Batch:
    """The fsyncs of one L{KernelSync.fsync} call: fires when the last ends."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.error: OSError | None = None
        self.done: Deferred[None] = Deferred()

    def ended(self, error: OSError | None) -> None:
        self.error = self.error or error
        self.left -= 1
        if self.left == 0:
            if self.error is not None:
                self.done.errback(self.error)
            else:
                self.done.callback(None)


class KernelSync:
    """fsyncs submitted to the kernel (L{fsync}), their completions read
    when the eventfd it counts them on is readable (an C{IReadDescriptor}
    of the reactor)."""

    log = Logger()

    def __init__(self, reactor: Any, libc: Any, calls: tuple[int, int, int, int], context: int, eventfd: int,
                 in_thread: Callable[..., Deferred]) -> None:
        self.reactor = reactor
        self._libc = libc
        self._setup, self._destroy, self._getevents, self._submit = calls
        self._context = context
        self._eventfd = eventfd
        self._in_thread = in_thread
        self._pid = os.getpid()
        self._next = 0
        #: token -> (its iocb, kept alive while the kernel holds it; its batch)
        self._flying: dict[int, tuple[_Iocb, _Batch]] = {}
        #: (fd, batch) waiting for a free slot
        self._queued: list[tuple[int, _Batch]] = []
        #: set once the kernel refused a submission: every fsync goes to threads from then on
        self.refused = False
        reactor.addReader(self)

    @classmethod
    def open(cls, reactor: Any, in_thread: Callable[..., Deferred]) -> KernelSync | None:
        """A context of L{SLOTS} requests, or C{None} where there is none to
        have.  C{in_thread(function, *args)}: runs a blocking call (an
        fsync) off the reactor, the fallback."""
        context = _new_context()
        if context is None:
            return None
        eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        return cls(reactor, *context, eventfd, in_thread)

    # --- fsyncs --------------------------------------------------------------------
    def fsync(self, fds: Sequence[int]) -> Deferred[None]:
        """fsync every file of C{fds} (open, and kept open by the caller until
        the result fires), side by side; fails with the first C{OSError}."""
        if not fds:
            return succeed(None)
        if self.refused or os.getpid() != self._pid or self._context == 0:
            return self._in_thread(_fsync_all, list(fds))
        batch = _Batch(len(fds))
        self._queued.extend((fd, batch) for fd in fds)
        self._pump()
        return batch.done

    def _pump(self) -> None:
        """Submit what waits, as far as there are free slots."""
        while self._queued and len(self._flying) < SLOTS:
            room = SLOTS - len(self._flying)
            taking, self._queued = self._queued[:room], self._queued[room:]
            blocks = []
            for fd, batch in taking:
                self._next += 1
                block = _Iocb(data=self._next, opcode=_IOCB_CMD_FSYNC, fildes=fd, flags=_IOCB_FLAG_RESFD,
                              resfd=self._eventfd)
                self._flying[self._next] = (block, batch)
                blocks.append(block)
            pointers = (ctypes.POINTER(_Iocb) * len(blocks))(*(ctypes.pointer(b) for b in blocks))
            done = self._libc.syscall(ctypes.c_long(self._submit), ctypes.c_ulong(self._context),
                                      ctypes.c_long(len(blocks)), pointers)
            if done < 0:
                code = ctypes.get_errno()
                done = 0
            else:
                code = errno.EAGAIN if done < len(blocks) else 0
            not_taken = taking[done:]
            for block in blocks[done:]:
                self._flying.pop(block.data)
            if not not_taken:
                continue
            if code == errno.EAGAIN and self._flying:  # the kernel's ring is full: the rest waits for room
                self._queued[:0] = not_taken
                return
            if code not in _REFUSALS:  # (EBADF, say) that file's fsync fails; the others are submitted again
                fd, batch = not_taken[0]
                batch.ended(OSError(code, "fsync of descriptor %d: %s" % (fd, os.strerror(code))))
                self._queued[:0] = not_taken[1:]
                continue
            self.refused = True
            self.log.info("the kernel refused an asynchronous fsync ({why}): fsyncs run in threads from now on",
                          why=os.strerror(code) if code else "none taken")
            for fd, batch in not_taken + self._queued:
                self._in_thread(os.fsync, fd).addCallbacks(lambda _r, b=batch: b.ended(None),
                                                            lambda f, b=batch: b.ended(f.value))
            self._queued = []
            return

    # --- IReadDescriptor -----------------------------------------------------------
    def fileno(self) -> int:
        return self._eventfd

    def logPrefix(self) -> str:
        return "kernelsync"

    def doRead(self) -> None:
        try:
            os.eventfd_read(self._eventfd)
        except BlockingIOError:
            return
        events = (_Event * SLOTS)()
        now = _Timespec(0, 0)
        while self._flying:
            got = self._libc.syscall(ctypes.c_long(self._getevents), ctypes.c_ulong(self._context), ctypes.c_long(0),
                                     ctypes.c_long(SLOTS), events, ctypes.byref(now))
            if got <= 0:
                break
            for event in events[:got]:
                entry = self._flying.pop(event.data, None)
                if entry is None:
                    continue
                result = event.res
                entry[1].ended(None if result >= 0 else OSError(-result, os.strerror(-result)))
            if got < SLOTS:
                break
        self._pump()

    def connectionLost(self, reason: Any) -> None:
        pass

    def close(self) -> None:
        """Stop watching and free the context (fsyncs in flight end unseen: the kernel finishes them)."""
        self.reactor.removeReader(self)
        if os.getpid() == self._pid and self._context:
            self._libc.syscall(ctypes.c_long(self._destroy), ctypes.c_ulong(self._context))
        self._context = 0
        os.close(self._eventfd)
        for _block, batch in list(self._flying.values()):
            batch.ended(OSError(errno.ECANCELED, "closed before the fsync ended"))
        self._flying.clear()


def _fsync_all(fds: list[int]) -> None:
    for fd in fds:
        os.fsync(fd)


_local = threading.local()


def fsync_together(fds: Sequence[int]) -> None:
    """fsync C{fds} side by side and wait for all of them, in the calling
    thread (a thread pool's: the wait blocks), with a context of the
    thread's own; one after the other where the kernel takes none.
    @raise OSError: the first fsync that failed"""
    if len(fds) < 2:
        _fsync_all(list(fds))
        return
    context = _thread_context()
    if context is None or len(fds) > SLOTS:
        _fsync_all(list(fds))
        return
    libc, calls, handle = context
    blocks = (_Iocb * len(fds))()
    for n, fd in enumerate(fds):
        blocks[n].data, blocks[n].opcode, blocks[n].fildes = n, _IOCB_CMD_FSYNC, fd
    pointers = (ctypes.POINTER(_Iocb) * len(fds))(*(ctypes.pointer(b) for b in blocks))
    done = libc.syscall(ctypes.c_long(calls[3]), ctypes.c_ulong(handle), ctypes.c_long(len(fds)), pointers)
    taken = max(done, 0)
    error: OSError | None = None
    if taken < len(fds):  # the rest one by one, while the kernel does those it took
        try:
            _fsync_all(list(fds[taken:]))
        except OSError as e:
            error = e
    events = (_Event * max(1, taken))()
    left = taken
    while left:
        got = libc.syscall(ctypes.c_long(calls[2]), ctypes.c_ulong(handle), ctypes.c_long(left), ctypes.c_long(left),
                           events, None)
        if got < 0:
            if ctypes.get_errno() == errno.EINTR:
                continue
            raise OSError(ctypes.get_errno(), "io_getevents")  # (the blocks stay alive: this thread holds them)
        for event in events[:got]:
            if event.res < 0 and error is None:
                error = OSError(-event.res, os.strerror(-event.res))
        left -= got
    if error is not None:
        raise error


def _thread_context() -> tuple[Any, tuple[int, int, int, int], int] | None:
    """This thread's AIO context (made at its first use), None where there is none."""
    if getattr(_local, "pid", None) != os.getpid():
        _local.pid, _local.context = os.getpid(), _new_context()
    context: tuple[Any, tuple[int, int, int, int], int] | None = _local.context
    return context


def _new_context() -> tuple[Any, tuple[int, int, int, int], int] | None:
    """C{(libc, syscall numbers, context)}: an AIO context of L{SLOTS} requests, C{None} where there is none
    to have (another architecture, no AIO in the kernel: ENOSYS, the system's aio-max-nr taken: EAGAIN)."""
    calls = _SYSCALLS.get(os.uname().machine)
    if calls is None or ctypes.sizeof(_Iocb) != 64:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    handle = ctypes.c_ulong(0)
    if libc.syscall(ctypes.c_long(calls[0]), ctypes.c_uint(SLOTS), ctypes.byref(handle)) != 0:
        return None
    return libc, calls, handle.value


def fsync_paths(sync: KernelSync | None, paths: Sequence[str], in_thread: Callable[..., Deferred]) -> Deferred[None]:
    """fsync the files or directories C{paths} with C{sync} (side by side),
    or in a thread without one; each is opened here and closed at the end."""
    if sync is None:
        return in_thread(_fsync_paths, list(paths))
    fds: list[int] = []
    try:
        for path in paths:
            fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
    except OSError as e:
        for fd in fds:
            os.close(fd)
        return fail(e)

    def closed(result: Any) -> Any:
        for fd in fds:
            os.close(fd)
        return result

    return sync.fsync(fds).addBoth(closed)


def _fsync_paths(paths: list[str]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["SLOTS", "KernelSync", "fsync_paths", "fsync_together"]
