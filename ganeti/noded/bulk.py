"""The bytes of a disk transfer: one thread per transfer, blocking sockets.

Twisted's TLS wrapper (pyOpenSSL through a memory BIO) cost a Python round
trip per 16 KiB record and several copies.  A transfer now uses TLS (the
standard library's C{ssl}, blocking, in the transfer's thread) for the
handshake, the token and a per-transfer key, then sends the data on the same
socket in 1 MiB frames sealed with that key (AES-256-GCM, see
L{ganeti.noded.stream}): the same confidentiality and integrity as TLS
records, a few Python steps per megabyte instead of per 16 KiB.

Security is the same as for node RPC: mutual TLS (1.2 or later), the
peer's certificate must chain to the trusted certificate and its SHA1
fingerprint must be one of those pinned (L{authenticate}); the receiver
then checks the one-time token, and only then opens its sink and gives the key.

The thread only moves bytes: it reports to the reactor thread
(C{callFromThread}, C{blockingCallFromThread}), which owns the
L{ganeti.noded.impexp.Transfer}.  An abort from the reactor thread
(L{Cancel}) shuts the sockets down, which wakes the thread wherever it
blocks on them.
"""

from __future__ import annotations

import hmac
import secrets
import socket
import threading
from typing import TYPE_CHECKING, Any, Callable, Collection, Protocol

from ganeti.noded import pipeline, stream
from ganeti.rpc.tls import Credentials, context, peer_fingerprint

if TYPE_CHECKING:
    import ssl

#: seconds to connect and to complete the TLS handshake
HANDSHAKE_TIMEOUT = 30.0
#: longest token line accepted
MAX_TOKEN = 256
#: longest answer line accepted
MAX_ANSWER = 2048
#: frames a sender reads ahead of the network
READ_AHEAD = 8
#: seconds a sender whose data was cut off waits for the receiver's reason
LATE_ANSWER_TIMEOUT = 5.0


class Sink(stream.Store, Protocol):

    def finish(self) -> None: ...

    def close(self) -> None: ...

    def discard(self) -> None: ...


class Source(Protocol):
    def start(self) -> None: ...

    def readinto(self, view: memoryview) -> int: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...


def tls_context(creds: Credentials, *, server: bool) -> ssl.SSLContext:
    """A context presenting C{creds}' certificate, requiring the peer's, and
    trusting C{creds.ca_pem} only (the pin is checked by L{authenticate}):
    node RPC's (L{ganeti.rpc.tls.context})."""
    return context(creds, server=server)


def authenticate(conn: ssl.SSLSocket, allowed: Collection[str]) -> None:
    """The peer's certificate is one of C{allowed} (fingerprints).
    @raise stream.StreamError: otherwise
    """
    der = conn.getpeercert(binary_form=True)
    if der is None:
        raise stream.StreamError("the peer presented no certificate")
    digest = peer_fingerprint(der)
    if digest not in allowed:
        raise stream.StreamError("the peer's certificate %s is not the expected one" % digest)


class Cancel:
    """Stops a transfer's thread from another thread: shuts its sockets down.

    A socket is shut down only while it is watched, and the thread stops
    watching it (under the same lock) before closing it, so a descriptor
    number reused after the close is never touched.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.cancelled = False

    def watch(self, sock: socket.socket) -> None:
        """@raise stream.StreamError: the transfer was canceled already"""
        with self._lock:
            if self.cancelled:
                raise stream.StreamError("aborted")
            self._socks.append(sock)

    def close(self, sock: socket.socket) -> None:
        """Stop watching C{sock} and close it."""
        with self._lock:
            if sock in self._socks:
                self._socks.remove(sock)
        sock.close()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            for sock in self._socks:
                try:
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)  # not SSLSocket's, which drops its state
                except OSError:
                    pass


def _tell(conn: Any, line: bytes) -> None:
    """Best effort: the peer may be gone."""
    try:
        conn.sendall(line)
    except OSError:
        pass


def _error_line(exc: Exception) -> bytes:
    return b"ER " + str(exc).encode("utf-8", "replace")[:1000]


class _Plain:
    """The connection after the TLS part: its socket read and written
    directly (the frames are sealed), with large writes."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn

    def recv_into(self, view: memoryview) -> int:
        """As much as C{view} holds, in one call (a frame), unless the connection ends or is shut down."""
        return socket.socket.recv_into(self._conn, view, 0, socket.MSG_WAITALL)

    def send(self, header: bytes, sealed: Any) -> None:
        """Both in one system call when they fit (no copy, no tiny packet)."""
        sent = socket.socket.sendmsg(self._conn, [header, sealed])
        if sent < len(header):
            socket.socket.sendall(self._conn, header[sent:])
            sent = len(header)
        if sent - len(header) < len(sealed):
            socket.socket.sendall(self._conn, memoryview(sealed)[sent - len(header):])


def receive(conn: Any, token: str, open_sink: Callable[[], Sink], compression: str,
            progress: Callable[[int], None], stored: Callable[[], bool]) -> int:
    """The receiving end on an authenticated TLS connection; the bytes stored.

    The token comes first: only for the right one is the sink opened and
    the frames' key given.  The sink is discarded when anything fails.
    C{stored()} is asked, once the sink has everything, whether the
    transfer still stands (not aborted meanwhile); the sender gets C{OK}
    only then.

    @raise stream.StreamError: the transfer failed (the sender was told why when it could be)
    """
    tls_reader = stream.Reader(conn.recv_into)
    try:
        line = tls_reader.line(MAX_TOKEN)
        if not hmac.compare_digest(line, token.encode("ascii")) or tls_reader.pending:
            raise stream.StreamError("the sender presented a wrong token")
    except stream.ConnectionEnded:
        raise stream.StreamError("the connection ended before the sender's token") from None
    except stream.StreamError as exc:
        _tell(conn, _error_line(exc) + b"\n")
        raise
    except OSError as exc:
        raise stream.StreamError("the connection ended before the sender's token: %s" % exc) from None
    try:
        sink = open_sink()
    except stream.StreamError as exc:
        _tell(conn, _error_line(exc) + b"\n")
        raise
    plain = _Plain(conn)
    key = secrets.token_bytes(stream.KEY_BYTES)
    answers = stream.Sealer(key, stream.TO_SENDER)
    try:
        try:
            conn.sendall(b"GO " + key.hex().encode("ascii") + b"\n")

            opener = stream.Opener(key, stream.TO_RECEIVER)
            total = stream.read_frames(stream.Reader(plain.recv_into), opener,
                                       stream.Decompressor(compression), sink, progress)
            sink.finish()
            if not stored():
                raise stream.StreamError("aborted")
        except BaseException:
            sink.discard()
            raise
        finally:
            sink.close()
    except stream.ConnectionEnded:
        raise stream.StreamError("the connection ended before all data arrived") from None
    except stream.StreamError as exc:
        _tell_sealed(plain, answers, _error_line(exc))
        raise
    except OSError as exc:
        _tell_sealed(plain, answers, _error_line(exc))
        raise stream.StreamError("the connection ended before all data arrived: %s" % exc) from None
    _tell_sealed(plain, answers, b"OK")
    return total


def _tell_sealed(plain: _Plain, sealer: stream.Sealer, answer: bytes) -> None:
    try:
        plain.send(*sealer.seal(stream.ANSWER, answer))
    except OSError:
        pass


def send(conn: Any, token: str, source: Source, compression: str, progress: Callable[[int], None]) -> int:
    """The sending end on an authenticated TLS connection; the bytes sent.
    @raise stream.StreamError: the transfer failed
    """
    tls_reader = stream.Reader(conn.recv_into)
    try:
        conn.sendall(token.encode("ascii") + b"\n")
        line = tls_reader.line(MAX_ANSWER)
    except (OSError, stream.ConnectionEnded) as exc:
        raise stream.StreamError("the connection ended before the receiver took the token: %s" % exc) from None
    word, _, rest = line.partition(b" ")
    if word != b"GO":
        raise stream.StreamError("the receiver refused the data: %s" % rest.decode("utf-8", "replace"))
    try:
        key = bytes.fromhex(rest.decode("ascii"))
    except ValueError:
        key = b""
    if len(key) != stream.KEY_BYTES or tls_reader.pending:
        raise stream.StreamError("the receiver answered garbage")
    plain = _Plain(conn)
    sealer = stream.Sealer(key, stream.TO_RECEIVER)
    # a frame's worth at a time (a source that stalls still has what it gave sent), 8 ahead
    ahead = pipeline.ReadAhead(source.readinto, stream.CHUNK, READ_AHEAD)
    try:
        source.start()
        compress = stream.Compressor(compression)
        try:
            total = stream.write_frames(plain.send, ahead, sealer, compress, progress)
        except BaseException:
            kill = getattr(source, "kill", None)
            if kill is not None:
                kill()  # a read the read-ahead thread is blocked in ends
            raise
        finally:
            ahead.close()
        source.finish()  # a failed export script: no end frame, the receiver discards what it got
        stream.write_end(plain.send, sealer, compress, total)
        kind, answer = _answer(plain, key)
    except OSError as exc:
        refused = _late_answer(conn, plain, key)
        if refused is not None:
            raise stream.StreamError("the receiver refused the data: %s" % refused) from None
        raise stream.StreamError("the connection ended before the receiver confirmed: %s" % exc) from None
    except stream.ConnectionEnded:
        raise stream.StreamError("the connection ended before the receiver confirmed") from None
    if kind != stream.ANSWER or answer != b"OK":
        raise stream.StreamError("the receiver refused the data: %s" % answer[3:].decode("utf-8", "replace"))
    return total


def _answer(plain: _Plain, key: bytes) -> tuple[int, bytes]:
    return stream.read_frame(stream.Reader(plain.recv_into), stream.Opener(key, stream.TO_SENDER),
                             memoryview(bytearray(MAX_ANSWER + stream.TAG)))


def _late_answer(conn: Any, plain: _Plain, key: bytes) -> str | None:
    """Why the receiver stopped taking data (it answers before it closes), if it said so."""
    try:
        conn.settimeout(LATE_ANSWER_TIMEOUT)
        kind, answer = _answer(plain, key)
    except (OSError, stream.StreamError):
        return None
    if kind != stream.ANSWER or not answer.startswith(b"ER "):
        return None
    return answer[3:].decode("utf-8", "replace")


def serve(listener: socket.socket, cancel: Cancel, tls: ssl.SSLContext, allowed: Collection[str],
          accepted: Callable[[], None], run: Callable[[ssl.SSLSocket], Any]) -> Any:
    """Accept one connection on C{listener} (then closed), authenticate it,
    and C{run} the transfer on it.
    @raise stream.StreamError: any failure
    """
    try:
        try:
            raw, _addr = listener.accept()
        except OSError as exc:
            raise stream.StreamError("aborted" if cancel.cancelled else "accept failed: %s" % exc) from None
    finally:
        cancel.close(listener)
    accepted()
    return _secured(raw, cancel, tls, allowed, True, run)


def connect(host: str, port: int, cancel: Cancel, tls: ssl.SSLContext, allowed: Collection[str],
            run: Callable[[ssl.SSLSocket], Any]) -> Any:
    """Connect to C{host}:C{port}, authenticate the receiver, and C{run} the transfer.
    @raise stream.StreamError: any failure
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    raw = socket.socket(family, socket.SOCK_STREAM)
    try:
        cancel.watch(raw)
    except stream.StreamError:
        raw.close()
        raise
    try:
        raw.settimeout(HANDSHAKE_TIMEOUT)
        raw.connect((host, port))
    except OSError as exc:
        cancel.close(raw)
        raise stream.StreamError("cannot connect to %s port %d: %s" % (host, port, exc)) from None
    except BaseException:
        cancel.close(raw)
        raise
    return _secured(raw, cancel, tls, allowed, False, run, watched=True)


def _secured(raw: socket.socket, cancel: Cancel, tls: ssl.SSLContext, allowed: Collection[str], server: bool,
             run: Callable[[ssl.SSLSocket], Any], watched: bool = False) -> Any:
    try:
        if not watched:
            cancel.watch(raw)
    except stream.StreamError:
        raw.close()
        raise
    conn: ssl.SSLSocket | None = None
    try:
        raw.settimeout(HANDSHAKE_TIMEOUT)
        try:
            conn = tls.wrap_socket(raw, server_side=server, do_handshake_on_connect=False)
            cancel.watch(conn)
            conn.do_handshake()
        except OSError as exc:
            raise stream.StreamError("TLS handshake failed: %s" % exc) from None
        authenticate(conn, allowed)
        conn.settimeout(None)  # the lease (and Cancel) ends a stalled transfer
        return run(conn)
    finally:
        if conn is not None:
            cancel.close(conn)
        cancel.close(raw)
