"""Disk data streamed node to node: the wire format, sources and sinks.

One transfer is one TCP connection from the sending node to a listener the
receiving node opened for it.  It starts with a TLS handshake (mutual: the
cluster certificate on both ends, or, between two clusters, each side's own
certificate, which the other pins; see L{ganeti.noded.bulk}).  Over TLS,
the sender writes C{<token>\\n} (the one-time token the receiver gave the
master); the receiver answers C{GO <key>\\n} (a fresh random 256-bit key,
hex) or C{ER <reason>\\n} and closes.  The TLS session ends there: the
data follows on the same connection in frames sealed with AES-256-GCM under
that key (L{Sealer}), which encrypts and authenticates each frame as TLS
would, but a megabyte at a time instead of 16 KiB records:

  C{[kind: 1 byte][length: 4 bytes, big endian][sealed data: length bytes]}

the header is the frame's associated data and the nonce counts the frames
of each direction (L{TO_RECEIVER}, L{TO_SENDER}), so a frame altered,
dropped, replayed or reordered fails to open.  The sender's frames are
L{DATA} (the bytes, compressed per the transfer's compression: gzip format,
in-process) and one L{END} (the count of uncompressed bytes, 8 bytes big
endian).  The receiver answers one L{ANSWER} frame, C{OK} once its sink has
stored everything (a file fsynced, or an OS import script exited with
status 0), or C{ER <reason>}, and closes.  A connection that ends without
the end frame is a failed transfer.

The bytes are moved by a thread per transfer with blocking sockets
(L{ganeti.noded.bulk}): the sources and sinks here are blocking too; their
disk side runs in a thread of its own (L{ganeti.noded.pipeline}).  Nothing
holds a disk in memory: a source is read L{CHUNK} bytes at a time into a few
rotating buffers, a sink keeps at most a few blocks of L{pipeline.BLOCK}
bytes not yet written, and frames are sealed and opened in place.

Sinks and sources are used by their transfer's thread, except C{discard}
and C{kill}, which undo or stop from any thread (an abort).
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import struct
import subprocess
import threading
import zlib
from typing import Any, Callable, Iterable, Protocol, cast

from ganeti.noded import pipeline

#: frame header: kind, length of the sealed data (plain data and tag)
HEADER = struct.Struct("!BI")
#: frame kinds
DATA, END, ANSWER = 1, 2, 3
#: the end frame's data: uncompressed bytes sent
TRAILER = struct.Struct("!Q")
#: nonce: direction, frame number
NONCE = struct.Struct("!IQ")
TO_RECEIVER, TO_SENDER = 0, 1
#: AES-GCM's tag, and the key's length
TAG = 16
KEY_BYTES = 32
#: largest frame data accepted (sealed: L{TAG} more)
MAX_FRAME = 4 << 20
#: bytes read from a source per frame
CHUNK = 1 << 20
#: compression tools done in-process, and their zlib levels
COMPRESSION_LEVELS = {"gzip": 6, "gzip-fast": 1, "gzip-slow": 9}
COMPRESS_NONE = "none"


class StreamError(Exception):
    """A transfer failed; the message says why."""


class ConnectionEnded(StreamError):
    """The connection ended where more was due."""


def check_compression(name: Any) -> str:
    """C{name} if it is a compression this node does.
    @raise StreamError: otherwise
    """
    if name == COMPRESS_NONE or name in COMPRESSION_LEVELS:
        return cast("str", name)
    raise StreamError("Unsupported compression %r (supported: none, %s)"
                      % (name, ", ".join(sorted(COMPRESSION_LEVELS))))


class Compressor:
    """Compresses (or passes through) what is sent."""

    def __init__(self, compression: str) -> None:
        level = COMPRESSION_LEVELS.get(compression)
        self._zlib = None if level is None else zlib.compressobj(level, zlib.DEFLATED, 31)

    @property
    def passthrough(self) -> bool:
        return self._zlib is None

    def feed(self, data: bytes | memoryview) -> bytes | memoryview:
        return data if self._zlib is None else self._zlib.compress(data)

    def flush(self) -> bytes:
        return b"" if self._zlib is None else self._zlib.flush()


class Decompressor:
    """Undoes L{Compressor} (the sender is a cluster node, authenticated by its certificate)."""

    def __init__(self, compression: str) -> None:
        self._zlib = None if compression == COMPRESS_NONE else zlib.decompressobj(31)

    @property
    def passthrough(self) -> bool:
        return self._zlib is None

    def feed(self, data: bytes | memoryview) -> bytes | memoryview:
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


def _aead(key: bytes) -> Any:
    """AES-GCM under C{key}: C{cryptography}'s, imported by the first transfer (a daemon keeps it out until
    then: L{ganeti.tlsbio})."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


class Sealer:
    """Seals the frames of one direction (the nonce counts them)."""

    def __init__(self, key: bytes, direction: int) -> None:
        self._aead = _aead(key)
        self._direction = direction
        self._count = 0

    def seal(self, kind: int, data: Any) -> tuple[bytes, bytes]:
        """The frame's header and sealed data."""
        header = HEADER.pack(kind, len(data) + TAG)
        nonce = NONCE.pack(self._direction, self._count)
        self._count += 1
        return header, self._aead.encrypt(nonce, data, header)

    def seal_into(self, kind: int, data: Any, out: memoryview) -> tuple[bytes, memoryview]:
        """Like L{seal}, into C{out} (room for C{len(data)} + L{TAG} bytes): no new buffer."""
        header = HEADER.pack(kind, len(data) + TAG)
        nonce = NONCE.pack(self._direction, self._count)
        self._count += 1
        sealed = out[:len(data) + TAG]
        self._aead.encrypt_into(nonce, data, header, sealed)
        return header, sealed


class Opener:
    """Opens the frames of one direction, in order."""

    def __init__(self, key: bytes, direction: int) -> None:
        from cryptography.exceptions import InvalidTag

        self._aead = _aead(key)
        self._invalid = InvalidTag
        self._direction = direction
        self._count = 0

    def open(self, header: bytes, sealed: Any) -> bytes:
        """@raise StreamError: the frame was not sealed with this key as the next one"""
        nonce = NONCE.pack(self._direction, self._count)
        self._count += 1
        try:
            return cast(bytes, self._aead.decrypt(nonce, sealed, header))
        except self._invalid:
            raise StreamError("a frame failed authentication (altered, forged or out of order)") from None

    def open_into(self, header: bytes, sealed: Any, out: memoryview) -> None:
        """Like L{open}, the data into C{out} (exactly its length)."""
        nonce = NONCE.pack(self._direction, self._count)
        self._count += 1
        try:
            self._aead.decrypt_into(nonce, sealed, header, out)
        except self._invalid:
            raise StreamError("a frame failed authentication (altered, forged or out of order)") from None


class Reader:
    """Blocking reads from a connection: a line, or exactly so many bytes.

    @param recv_into: the connection's C{recv_into} (returns 0 at its end)
    """

    def __init__(self, recv_into: Callable[[memoryview], int]) -> None:
        self._recv_into = recv_into
        self._pending = b""  # received after a line, not yet asked for

    @property
    def pending(self) -> bool:
        """Whether bytes were received beyond what was asked for."""
        return bool(self._pending)

    def line(self, limit: int) -> bytes:
        """The next line, without its newline.
        @raise StreamError: the connection ended first, or the line is longer than C{limit}
        """
        buf = bytearray(limit + 1)
        got = self._pending
        self._pending = b""
        while b"\n" not in got:
            if len(got) > limit:
                raise StreamError("a line longer than %d bytes" % limit)
            count = self._recv_into(memoryview(buf))
            if not count:
                raise ConnectionEnded("the connection ended")
            got += bytes(buf[:count])
        line, _, self._pending = got.partition(b"\n")
        if len(line) > limit:
            raise StreamError("a line longer than %d bytes" % limit)
        return line

    def exact(self, view: memoryview) -> None:
        """Fill C{view} completely.
        @raise StreamError: the connection ended first
        """
        done = 0
        if self._pending:
            done = min(len(self._pending), len(view))
            view[:done] = self._pending[:done]
            self._pending = self._pending[done:]
        while done < len(view):
            count = self._recv_into(view[done:])
            if not count:
                raise ConnectionEnded("the connection ended")
            done += count


def _read_header(reader: Reader, buf: memoryview) -> tuple[int, int, bytes]:
    header = bytearray(HEADER.size)
    reader.exact(memoryview(header))
    kind, length = HEADER.unpack(header)
    if kind not in (DATA, END, ANSWER) or not TAG <= length <= MAX_FRAME + TAG:
        raise StreamError("a frame of kind %d and %d bytes is not valid" % (kind, length))
    reader.exact(buf[:length])
    return kind, length, bytes(header)


def read_frame(reader: Reader, opener: Opener, buf: memoryview) -> tuple[int, bytes]:
    """The next frame: its kind and data (C{buf}: room for L{MAX_FRAME} + L{TAG} bytes).
    @raise StreamError: a frame too large, unknown or not authentic
    """
    kind, length, header = _read_header(reader, buf)
    return kind, opener.open(header, buf[:length])


class Store(Protocol):
    """Where a receiver puts what it opens: room to open a frame into
    (C{reserve}, then C{commit}), or a copy of bytes (C{put})."""

    def reserve(self, count: int) -> memoryview: ...

    def commit(self, count: int) -> None: ...

    def put(self, data: Any) -> None: ...


def read_frames(reader: Reader, opener: Opener, decompress: Decompressor, store: Store,
                progress: Callable[[int], None] = lambda count: None) -> int:
    """Receive L{DATA} frames up to the L{END} frame into C{store}
    (decompressed; without compression, each frame is opened straight into
    the room the store gives); the bytes stored.
    @raise StreamError: a cut, corrupt or forged stream, a count that differs from the sender's
    """
    buf = memoryview(bytearray(MAX_FRAME + TAG))
    total = 0
    direct = decompress.passthrough
    while True:
        kind, length, header = _read_header(reader, buf)
        if kind == DATA and direct:
            count = length - TAG
            opener.open_into(header, buf[:length], store.reserve(count))
            store.commit(count)
            total += count
            progress(count)
            continue
        data = opener.open(header, buf[:length])
        if kind == END:
            break
        if kind != DATA:
            raise StreamError("unexpected frame of kind %d" % kind)
        out = decompress.feed(data)
        if len(out):
            store.put(out)
            total += len(out)
            progress(len(out))
    if len(data) != TRAILER.size:
        raise StreamError("the end frame is not valid")
    (sent,) = TRAILER.unpack(data)
    tail = decompress.flush()
    if tail:
        store.put(tail)
        total += len(tail)
        progress(len(tail))
    if sent != total:
        raise StreamError("the sender sent %d bytes, %d arrived" % (sent, total))
    return total


def write_frames(send: Callable[[bytes, Any], None], chunks: Iterable[memoryview], sealer: Sealer,
                 compress: Compressor, progress: Callable[[int], None]) -> int:
    """Send the C{chunks} (a source's content, read ahead) in L{DATA} frames
    of at most L{CHUNK} bytes; the bytes read.  No end frame (the source
    must be checked first).

    @param send: sends a header and sealed data (done with it on return)
    """
    out = memoryview(bytearray(MAX_FRAME + TAG))
    total = 0
    for chunk in chunks:
        total += len(chunk)
        progress(len(chunk))
        data = compress.feed(chunk)
        for start in range(0, len(data), CHUNK):
            send(*sealer.seal_into(DATA, data[start:start + CHUNK], out))
    return total


def write_end(send: Callable[[bytes, Any], None], sealer: Sealer, compress: Compressor, total: int) -> None:
    """What the compressor kept, then the end frame (C{total}: the bytes read)."""
    tail = compress.flush()
    for start in range(0, len(tail), MAX_FRAME):
        send(*sealer.seal(DATA, tail[start:start + MAX_FRAME]))
    send(*sealer.seal(END, TRAILER.pack(total)))


def send_all_fd(fd: int, data: Any) -> None:
    """Write all of C{data} to C{fd}."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --- OS scripts ---------------------------------------------------------------------------


def exit_problem(returncode: int) -> str | None:
    """How a child ended: C{None} for status 0, else C{"killed by signal N"} or C{"exit code N"}."""
    if returncode == 0:
        return None
    if returncode < 0:
        return "killed by signal %d" % -returncode
    return "exit code %d" % returncode


class Child:
    """An OS script in its own session (an abort kills all it started).

    L{wait} (the transfer's thread) and L{kill} (any thread) never race: the
    process is reaped only under the lock that L{kill} takes, so a killed
    process group is always this script's.
    """

    def __init__(self, script: str, env: dict[str, str], cwd: str, stdin: int, stdout: int, stderr: int,
                 argv: list[str] | None = None, pass_fds: tuple[int, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._reaped = False
        self._problem: str | None = None
        self._proc = subprocess.Popen(argv or [script], executable=script, stdin=stdin, stdout=stdout,
                                      stderr=stderr, env=env, cwd=cwd, start_new_session=True, close_fds=True,
                                      pass_fds=pass_fds)

    def wait(self) -> str | None:
        """Wait for the end; see L{exit_problem}."""
        if not self._reaped:
            os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOWAIT)
            with self._lock:
                self._reaped = True
                self._problem = exit_problem(self._proc.wait())
        return self._problem

    def kill(self) -> None:
        with self._lock:
            if self._reaped:
                return
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except OSError:
                pass


class DevicePipe:
    """A volume the OS script reads or writes as its device when the node has
    no device for it (a userspace rbd image): a helper program at the other
    end of a pipe, which the script sees as C{/dev/fd/N}.

    Export (C{script_reads}): the helper (C{rbd export ... -}) writes the
    volume's content into the pipe.  Import: the helper (C{rbd import - ...})
    reads what the script writes; C{on_success} then runs (in the transfer's
    thread) to put the imported volume in place, C{on_failure} to drop it.
    """

    def __init__(self, argv: list[str], env: dict[str, str], stderr: int, script_reads: bool,
                 on_success: Callable[[], None] | None = None, on_failure: Callable[[], None] | None = None) -> None:
        self.what = " ".join(argv[:1] + [a for a in argv[1:] if a in ("export", "import")])
        self._on_success, self._on_failure = on_success, on_failure
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        null_fd = _devnull()
        helper_fd, self.script_fd = (write_fd, read_fd) if script_reads else (read_fd, write_fd)
        try:
            if script_reads:
                self._helper = Child(argv[0], env, "/", null_fd, helper_fd, stderr, argv=argv)
            else:
                self._helper = Child(argv[0], env, "/", helper_fd, stderr, stderr, argv=argv)
        except BaseException:
            os.close(self.script_fd)
            raise
        finally:
            os.close(helper_fd)
            os.close(null_fd)

    def device(self) -> str:
        """The path the script opens."""
        return "/dev/fd/%d" % self.script_fd

    def spawned(self) -> None:
        """The script holds its end now: drop ours (so the helper sees the end)."""
        if self.script_fd >= 0:
            os.close(self.script_fd)
            self.script_fd = -1

    def finish(self) -> None:
        """Wait for the helper; run the success step.
        @raise StreamError: the helper or the step failed"""
        self.spawned()
        problem = self._helper.wait()
        if problem is not None:
            self.fail()
            raise StreamError("%s failed (%s)" % (self.what, problem))
        if self._on_success is not None:
            try:
                self._on_success()
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                self.fail()
                raise StreamError("%s: %s" % (self.what, exc)) from None

    def fail(self) -> None:
        if self._on_failure is not None:
            hook, self._on_failure = self._on_failure, None
            try:
                hook()
            except (OSError, subprocess.SubprocessError, ValueError):
                pass

    def kill(self) -> None:
        self.spawned()
        self._helper.kill()
        self._helper.wait()


#: what makes a script's device pipe: C{(environment variable, factory)}
DeviceSpec = tuple[str, Callable[[], DevicePipe]]


def _devnull() -> int:
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


# --- sinks: where received data goes ------------------------------------------------------


def _disk_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """A sink's method, its writer's failure raised as a L{StreamError}."""

    def call(*args: Any) -> Any:
        try:
            return method(*args)
        except pipeline.DiskError as exc:
            raise StreamError(str(exc)) from None

    call.__doc__ = method.__doc__
    return call


class FileSink:
    """Writes into a new file at C{path} (L{pipeline.BlockWriter}: a
    thread, direct I/O where possible, fsynced at the end); removed again on abort."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._open(os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC)

    def _open(self, flags: int) -> None:
        self._fd, direct = pipeline.open_direct(self.path, flags)
        fd = self._fd
        try:
            self._writer = pipeline.BlockWriter(fd, self.path, direct=direct,
                                                writeback=lambda offset, length: pipeline.start_writeback(fd, offset, length))
        except BaseException:
            os.close(fd)
            raise

    @_disk_errors
    def reserve(self, count: int) -> memoryview:
        return self._writer.reserve(count)

    @_disk_errors
    def commit(self, count: int) -> None:
        self._writer.commit(count)

    @_disk_errors
    def put(self, data: Any) -> None:
        self._writer.put(data)

    write = put

    @_disk_errors
    def finish(self) -> None:
        """Everything is written and on disk (one fsync, at the end)."""
        self._writer.finish()

    def close(self) -> None:
        self._writer.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def discard(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class DiskSink(FileSink):
    """Overwrites an existing disk file in place (a move's target disk,
    created beforehand and removed by the master when the move fails)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._open(os.O_WRONLY | os.O_CLOEXEC)

    def discard(self) -> None:
        """The master removes the disk."""


class ScriptSink:
    """Feeds the received data to an OS import script's stdin (from a
    writer thread, L{pipeline.BlockWriter}), then makes what the script
    wrote to its device durable: the writeback of the device is started
    as the data goes in, and the device is fsynced once the script is
    done (Ganeti's own import leaves that to the kernel)."""

    def __init__(self, script: str, env: dict[str, str], cwd: str, log_fd: int, log_path: str,
                 device: DeviceSpec | None = None) -> None:
        self.log_path = log_path
        self._pipe: DevicePipe | None = None
        self._device_fd = -1
        read_fd, self._fd = os.pipe2(os.O_CLOEXEC)
        pipeline.widen_pipe(self._fd)
        try:
            passed: tuple[int, ...] = ()
            if device is not None:
                self._pipe = device[1]()
                env = dict(env, **{device[0]: self._pipe.device()})
                passed = (self._pipe.script_fd,)
            else:
                self._device_fd = _open_device(env.get("IMPORT_DEVICE"))
            self._child = Child(script, env, cwd, read_fd, log_fd, log_fd, pass_fds=passed)
        except BaseException:
            os.close(self._fd)
            self._close_device()
            if self._pipe is not None:
                self._pipe.kill()
                self._pipe.fail()
            raise
        finally:
            os.close(read_fd)
            os.close(log_fd)
            if self._pipe is not None:
                self._pipe.spawned()
        device_fd = self._device_fd
        writeback = None if device_fd < 0 else (lambda offset, length: pipeline.start_writeback(device_fd, 0, 0))
        self._writer = pipeline.BlockWriter(self._fd, "the import script's input", direct=False, sync=False,
                                            writeback=writeback)

    def _ended_early(self) -> StreamError:
        return StreamError("the import script ended before all data arrived (log %s)" % self.log_path)

    def reserve(self, count: int) -> memoryview:
        try:
            return self._writer.reserve(count)
        except pipeline.DiskError:
            raise self._ended_early() from None

    def commit(self, count: int) -> None:
        try:
            self._writer.commit(count)
        except pipeline.DiskError:
            raise self._ended_early() from None

    def put(self, data: Any) -> None:
        try:
            self._writer.put(data)
        except pipeline.DiskError:
            raise self._ended_early() from None

    write = put

    def finish(self) -> None:
        """The script read everything (its stdin closed) and exited with
        status 0; then what it wrote on its device is synced."""
        try:
            self._writer.finish()
        except pipeline.DiskError:
            raise self._ended_early() from None
        os.close(self._fd)
        self._fd = -1
        problem = self._child.wait()
        if problem is not None:
            if self._pipe is not None:
                self._pipe.kill()
                self._pipe.fail()
            raise StreamError("the import script failed (%s); see %s" % (problem, self.log_path))
        if self._pipe is not None:
            self._pipe.finish()
            self._pipe = None
        if self._device_fd >= 0:
            try:
                os.fsync(self._device_fd)
            except OSError as exc:
                raise StreamError("cannot sync the imported disk: %s" % exc.strerror) from None

    def close(self) -> None:
        self._child.kill()  # first: a write blocked on the pipe then fails
        self._writer.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._child.wait()
        self._close_device()
        if self._pipe is not None:
            self._pipe.kill()
            self._pipe.fail()
            self._pipe = None

    def _close_device(self) -> None:
        if self._device_fd >= 0:
            os.close(self._device_fd)
            self._device_fd = -1

    def discard(self) -> None:
        self._child.kill()
        if self._pipe is not None:
            self._pipe.kill()


def _open_device(path: str | None) -> int:
    """A descriptor of the disk an import script writes (a file or block
    device), to start its writeback and sync it; -1 for anything else."""
    if not path:
        return -1
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return -1
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISBLK(mode)):
        os.close(fd)
        return -1
    return fd


# --- sources: what is sent ----------------------------------------------------------------


class FileSource:
    """Reads a file (opened at once, so that a missing one is reported when
    the transfer starts), with C{O_DIRECT} where the file system allows it:
    a dump or a disk is read once, from the disk, without a copy through the
    page cache (the kernel writes any dirty cached part out first)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd, self._direct = pipeline.open_direct(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        except OSError:
            pass

    def start(self) -> None:
        """Nothing to start."""

    def readinto(self, view: memoryview) -> int:
        """Read into C{view} (aligned, see L{pipeline.aligned_buffer}, for direct reads)."""
        try:
            return os.readv(self._fd, [view])
        except OSError as exc:
            if exc.errno == errno.EINVAL and self._direct:  # not aligned after all: buffered from here on
                pipeline.set_direct(self._fd, False)
                self._direct = False
                return self.readinto(view)
            raise StreamError("cannot read %s: %s" % (self.path, exc.strerror)) from None

    def finish(self) -> None:
        """A file read to its end is complete."""

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def kill(self) -> None:
        """Nothing runs."""


class ScriptSource:
    """The stdout of an OS export script (a pipe)."""

    def __init__(self, script: str, env: dict[str, str], cwd: str, log_fd: int, log_path: str,
                 device: DeviceSpec | None = None) -> None:
        self._script, self._env, self._cwd = script, env, cwd
        self._log_fd, self.log_path = log_fd, log_path
        self._fd = -1
        self._child: Child | None = None
        self._device = device
        self._pipe: DevicePipe | None = None
        self._lock = threading.Lock()
        self._killed = False

    def start(self) -> None:
        """Start the script (once the receiver is authenticated)."""
        with self._lock:
            if self._killed:
                raise StreamError("aborted")
            read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
            pipeline.widen_pipe(read_fd)
            null_fd = _devnull()
            try:
                env = self._env
                passed: tuple[int, ...] = ()
                if self._device is not None:
                    self._pipe = self._device[1]()
                    env = dict(env, **{self._device[0]: self._pipe.device()})
                    passed = (self._pipe.script_fd,)
                self._child = Child(self._script, env, self._cwd, null_fd, write_fd, self._log_fd, pass_fds=passed)
                self._fd = read_fd
            except BaseException:
                os.close(read_fd)
                if self._pipe is not None:
                    self._pipe.kill()
                raise
            finally:
                os.close(null_fd)
                os.close(write_fd)
                os.close(self._log_fd)
                self._log_fd = -1
                if self._pipe is not None:
                    self._pipe.spawned()

    def readinto(self, view: memoryview) -> int:
        return os.readv(self._fd, [view])

    def finish(self) -> None:
        assert self._child is not None
        problem = self._child.wait()
        if problem is not None:
            raise StreamError("the export script failed (%s); see %s" % (problem, self.log_path))
        if self._pipe is not None:
            self._pipe.finish()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._log_fd >= 0:
            os.close(self._log_fd)
            self._log_fd = -1
        if self._child is not None:
            self._child.kill()
            self._child.wait()
        if self._pipe is not None:
            self._pipe.kill()

    def kill(self) -> None:
        with self._lock:
            self._killed = True
            if self._child is not None:
                self._child.kill()
            if self._pipe is not None:
                self._pipe.kill()
