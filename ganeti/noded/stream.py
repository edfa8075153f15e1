"""Disk data streamed node to node: the wire format, sources and sinks.

One transfer is one TLS connection (mutual: the cluster certificate on
both ends, or, between two clusters, each side's own certificate, which the
other pins) from the sending node to a listener the receiving node opened
for it.  The sender first writes C{<token>\\n} (the one-time token the
receiver gave the master); then the data in frames C{[length: 4 bytes,
big endian][bytes]}, compressed per the transfer's compression (gzip
format, in-process); then an end frame of length 0 followed by the count
of uncompressed bytes (8 bytes, big endian).  The receiver answers one
line, C{OK\\n} once its sink has stored everything (a file fsynced, or an
OS import script exited with status 0), or C{ER <reason>\\n}, and closes.
A connection that ends without the end frame is a failed transfer.

Nothing here holds a disk in memory: a source reads 1 MiB at a time and
stops while the connection's buffers are full (producer/consumer), a sink
stops the connection while its own output backs up.
"""

from __future__ import annotations

import fcntl
import os
import signal
import struct
import sys
import zlib
from typing import Any, Callable

from twisted.internet import abstract, defer, fdesc, main
from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from ganeti.backend.osapi import exit_problem

#: frame header: length of the frame's data
FRAME = struct.Struct("!I")
#: after the end frame: uncompressed bytes sent
TRAILER = struct.Struct("!Q")
#: largest frame accepted
MAX_FRAME = 4 << 20
#: bytes read from a file per step
CHUNK = 1 << 20
#: compression tools done in-process, and their zlib levels
COMPRESSION_LEVELS = {"gzip": 6, "gzip-fast": 1, "gzip-slow": 9}
COMPRESS_NONE = "none"
#: the child runs this: a new session (so that an abort kills everything it started), then the script
_SETSID_EXEC = "import os, sys; os.setsid(); os.execv(sys.argv[1], sys.argv[1:])"


class StreamError(Exception):
    """A transfer failed; the message says why."""


def check_compression(name: Any) -> str:
    """C{name} if it is a compression this node does.
    @raise StreamError: otherwise
    """
    if name == COMPRESS_NONE or name in COMPRESSION_LEVELS:
        return name
    raise StreamError("Unsupported compression %r (supported: none, %s)"
                      % (name, ", ".join(sorted(COMPRESSION_LEVELS))))


class Compressor:
    """Compresses (or passes through) what is sent."""

    def __init__(self, compression: str) -> None:
        level = COMPRESSION_LEVELS.get(compression)
        self._zlib = None if level is None else zlib.compressobj(level, zlib.DEFLATED, 31)

    def feed(self, data: bytes) -> bytes:
        return data if self._zlib is None else self._zlib.compress(data)

    def flush(self) -> bytes:
        return b"" if self._zlib is None else self._zlib.flush()


class Decompressor:
    """Undoes L{Compressor} (the sender is a cluster node, authenticated by its certificate)."""

    def __init__(self, compression: str) -> None:
        self._zlib = None if compression == COMPRESS_NONE else zlib.decompressobj(31)

    def feed(self, data: bytes) -> bytes:
        if self._zlib is None:
            return data
        try:
            return self._zlib.decompress(data)
        except zlib.error as exc:
            raise StreamError("corrupt compressed data: %s" % exc) from None

    def flush(self) -> bytes:
        if self._zlib is None:
            return b""
        if not self._zlib.eof:
            raise StreamError("the compressed stream is truncated")
        return self._zlib.flush()


def frame(data: bytes) -> bytes:
    return FRAME.pack(len(data)) + data


def end_frame(total: int) -> bytes:
    return FRAME.pack(0) + TRAILER.pack(total)


class FrameParser:
    """Splits the received bytes into the frames' data (pure).

    Frame data is passed on as it arrives, in pieces (never reassembled:
    a receiver copies nothing it does not have to).

    @ivar ended: the end frame arrived; L{total} is what the sender counted
    """

    def __init__(self) -> None:
        self._head = b""
        self._left = 0  # bytes of the current frame's data still to come
        self.ended = False
        self.total = -1

    def feed(self, data: bytes) -> list[bytes]:
        """The frame data in C{data}, in pieces.
        @raise StreamError: a frame too large, or bytes after the end
        """
        if self.ended:
            if data:
                raise StreamError("data after the end of the stream")
            return []
        out: list[bytes] = []
        view = memoryview(data)
        while view:
            if self._left:
                piece = view[:self._left]
                out.append(piece.tobytes() if len(piece) != len(data) else data)
                self._left -= len(piece)
                view = view[len(piece):]
                continue
            need = FRAME.size - len(self._head)
            self._head += view[:need].tobytes()
            view = view[need:]
            if len(self._head) < FRAME.size:
                break
            if len(self._head) == FRAME.size:
                (length,) = FRAME.unpack(self._head)
                if length > MAX_FRAME:
                    raise StreamError("frame of %d bytes is larger than %d" % (length, MAX_FRAME))
                if length:
                    self._head, self._left = b"", length
                    continue
            # the end frame: its header, then the trailer
            need = FRAME.size + TRAILER.size - len(self._head)
            self._head += view[:need].tobytes()
            view = view[need:]
            if len(self._head) < FRAME.size + TRAILER.size:
                break
            (self.total,) = TRAILER.unpack_from(self._head, FRAME.size)
            self.ended = True
            if view:
                raise StreamError("data after the end of the stream")
        return out


# --- sinks: where received data goes ------------------------------------------------------


class FileSink:
    """Writes into a new file at C{path}; removed again on abort."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)

    def start(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """Writes to a file never back up: nothing to pause."""

    def write(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= CHUNK:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        view = memoryview(b"".join(self._pending))
        self._pending, self._pending_size = [], 0
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def finish(self) -> defer.Deferred[None]:
        try:
            self._flush()
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
        return defer.succeed(None)

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class DiskSink(FileSink):
    """Overwrites an existing disk file in place (a move's target disk,
    created beforehand and removed by the master when the move fails)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)

    def abort(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _ScriptProcess(ProcessProtocol):
    """An OS script with one end piped to us, output of the other ends to its log."""

    def __init__(self, on_out: Callable[[bytes], None] | None = None) -> None:
        self.on_out = on_out
        self.ended: defer.Deferred[None] = defer.Deferred()
        self.exited = False

    def outReceived(self, data: bytes) -> None:
        if self.on_out is not None:
            self.on_out(data)

    def processEnded(self, reason: Failure) -> None:
        self.exited = True
        problem = exit_problem(reason)
        if problem is None:
            self.ended.callback(None)
        else:
            self.ended.errback(StreamError(problem))

    def kill(self) -> None:
        if self.exited:
            return
        pid = getattr(self.transport, "pid", None)
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
                return
            except OSError:
                pass
        try:
            self.transport.signalProcess("KILL")
        except Exception:
            pass


def spawn_script(reactor: Any, protocol: _ScriptProcess, script: str, env: dict[str, str], cwd: str,
                 log_fd: int, piped: int) -> Any:
    """Start C{script} in its own session; fd C{piped} (0 or 1) is a pipe to
    us, the others go to C{log_fd} (and stdin, when not piped, to /dev/null)."""
    null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fds: dict[int, Any] = {0: null_fd, 1: log_fd, 2: log_fd}
        fds[piped] = "w" if piped == 0 else "r"
        argv = [sys.executable, "-I", "-S", "-c", _SETSID_EXEC, script]
        return reactor.spawnProcess(protocol, sys.executable, argv, env=env, path=cwd, childFDs=fds)
    finally:
        os.close(null_fd)


class ScriptSink:
    """Feeds the received data to an OS import script's stdin."""

    log = Logger()

    def __init__(self, reactor: Any, script: str, env: dict[str, str], cwd: str, log_fd: int,
                 log_path: str) -> None:
        self.log_path = log_path
        self._proc = _ScriptProcess()
        try:
            self._transport = spawn_script(reactor, self._proc, script, env, cwd, log_fd, 0)
        finally:
            os.close(log_fd)
        writer = self._transport.pipes.get(0)
        if writer is not None:
            widen_pipe(writer.fileno())

    def start(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """Stop reading the connection while the script's stdin is full."""
        writer = self._transport.pipes.get(0)
        if writer is not None:
            writer.registerProducer(_Callbacks(pause, resume), True)

    def write(self, data: bytes) -> None:
        if self._proc.exited:
            raise StreamError("the import script ended before all data arrived (log %s)" % self.log_path)
        self._transport.write(data)

    async def _finish(self) -> None:
        writer = self._transport.pipes.get(0)
        if writer is not None:
            writer.unregisterProducer()
        self._transport.closeStdin()
        try:
            await self._proc.ended
        except StreamError as exc:
            raise StreamError("the import script failed (%s); see %s" % (exc, self.log_path)) from None

    def finish(self) -> defer.Deferred[None]:
        return defer.ensureDeferred(self._finish())

    def abort(self) -> None:
        self._proc.kill()
        self._proc.ended.addErrback(lambda _: None)


@implementer(IPushProducer)
class _Callbacks:
    """A push producer made of two callbacks."""

    def __init__(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        self.pauseProducing = pause
        self.resumeProducing = resume

    def stopProducing(self) -> None:
        pass


# --- sources: what is sent ----------------------------------------------------------------


class FileSource:
    """Reads a file, C{CHUNK} bytes per reactor turn, as a push producer
    (paused while the connection's buffer is full).

    A pull producer would stall when a write produces nothing (a
    compressor that keeps the chunk): nothing would drain, so nothing
    would ask for more.
    """

    def __init__(self, path: str, reactor: Any = None) -> None:
        self.path = path
        self._reactor = reactor
        self._handle = open(path, "rb", buffering=0)
        self._emit: Callable[[bytes], None] | None = None
        self._done: Callable[[Failure | None], None] | None = None
        self._paused = False
        self._scheduled: Any = None

    def start(self, consumer: Any, emit: Callable[[bytes], None], done: Callable[[Failure | None], None]) -> None:
        if self._reactor is None:
            from twisted.internet import reactor

            self._reactor = reactor
        self._emit, self._done = emit, done
        consumer.registerProducer(self, True)
        self._schedule()

    def _schedule(self) -> None:
        if self._scheduled is None and not self._paused and self._emit is not None:
            self._scheduled = self._reactor.callLater(0, self._step)

    def _step(self) -> None:
        self._scheduled = None
        if self._emit is None or self._paused:
            return
        try:
            data = self._handle.read(CHUNK)
        except OSError as exc:
            self._finish(Failure(StreamError("cannot read %s: %s" % (self.path, exc.strerror))))
            return
        if not data:
            self._finish(None)
            return
        self._emit(data)
        self._schedule()

    def _finish(self, failure: Failure | None) -> None:
        done, self._emit, self._done = self._done, None, None
        self._handle.close()
        if done is not None:
            done(failure)

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        self._schedule()

    def stopProducing(self) -> None:
        self.abort()

    def abort(self) -> None:
        self._emit = self._done = None
        if self._scheduled is not None and self._scheduled.active():
            self._scheduled.cancel()
        self._scheduled = None
        if not self._handle.closed:
            self._handle.close()


#: Linux F_SETPIPE_SZ: the capacity of the pipes between scripts and noded
F_SETPIPE_SZ = 1031
PIPE_SIZE = 1 << 20


def widen_pipe(fd: int) -> None:
    """Give the pipe C{fd} a capacity of L{PIPE_SIZE} (fewer wake-ups), if the system lets us."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass


class PipeReader(abstract.FileDescriptor):
    """Reads a pipe C{CHUNK} bytes at a time (Twisted's process pipes read
    8 KiB); a push producer (pausing stops reading)."""

    def __init__(self, reactor: Any, fd: int, on_data: Callable[[bytes], None],
                 on_end: Callable[[Failure], None]) -> None:
        super().__init__(reactor)
        self.fd = fd
        self.connected = 1  # resumeProducing reads again only while "connected"
        self._on_data, self._on_end = on_data, on_end
        fdesc.setNonBlocking(fd)

    def fileno(self) -> int:
        return self.fd

    def doRead(self) -> Any:
        try:
            data = os.read(self.fd, CHUNK)
        except BlockingIOError:
            return None
        except OSError:
            return main.CONNECTION_LOST
        if not data:
            return main.CONNECTION_DONE
        self._on_data(data)
        return None

    def connectionLost(self, reason: Failure) -> None:
        abstract.FileDescriptor.connectionLost(self, reason)
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self._on_end(reason)


class ScriptSource:
    """The stdout of an OS export script (a pipe read 1 MiB at a time),
    paused while the connection is full."""

    def __init__(self, reactor: Any, script: str, env: dict[str, str], cwd: str, log_fd: int,
                 log_path: str) -> None:
        self._reactor, self._script, self._env, self._cwd = reactor, script, env, cwd
        self._log_fd, self.log_path = log_fd, log_path
        self._proc: _ScriptProcess | None = None
        self._reader: PipeReader | None = None

    def start(self, consumer: Any, emit: Callable[[bytes], None], done: Callable[[Failure | None], None]) -> None:
        self._proc = _ScriptProcess()
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        widen_pipe(read_fd)
        eof: defer.Deferred[None] = defer.Deferred()
        try:
            null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            try:
                argv = [sys.executable, "-I", "-S", "-c", _SETSID_EXEC, self._script]
                self._reactor.spawnProcess(self._proc, sys.executable, argv, env=self._env, path=self._cwd,
                                           childFDs={0: null_fd, 1: write_fd, 2: self._log_fd})
            finally:
                os.close(null_fd)
        except Exception:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            os.close(self._log_fd)
        self._reader = PipeReader(self._reactor, read_fd, emit, lambda reason: eof.callback(None))
        consumer.registerProducer(self._reader, True)
        self._reader.startReading()

        def ended(results: Any) -> None:
            (ok, value), _eof = results
            if not ok:
                done(Failure(StreamError("the export script failed (%s); see %s"
                                         % (value.getErrorMessage(), self.log_path))))
            else:
                done(None)

        defer.DeferredList([self._proc.ended, eof], consumeErrors=True).addCallback(ended)

    def abort(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            if self._reader is not None and self._reader.fd >= 0:
                self._reader.stopReading()
                self._reader.connectionLost(Failure(StreamError("aborted")))
        else:
            try:
                os.close(self._log_fd)
            except OSError:
                pass
