"""The HTTP/1.1 client under node RPC: a request and its answer on a
connection kept open between calls.

    client = HttpClient(reactor, endpoint_for)
    code, headers, body = await client.request("127.0.1.2", 1811, b"/version", b"", b"[]")

Node RPC asks little of HTTP: C{POST} a JSON body, read the status, one
header and the body.  Twisted's HTTP client (C{Agent} and its connection
pool) did that in about 820 Python calls per round trip, 300-400 us of the
caller's CPU (C{scripts/bench rpc}), most of it in its general machinery
(body producers, header objects, the pool's bookkeeping, a state machine
per request and per answer); with two master candidates, LuxiD spent a
fifth of its busy time there replicating job files.  This client writes a
request as one byte string and parses the answer in one pass over what
arrived: a status line, headers, and a body framed by C{Content-Length},
chunked, or (an HTTP/1.0 answer) the connection's end.

A connection serves one request at a time.  Up to C{max_idle} idle
connections per node are kept for the next requests (C{persistent}); a
connection the node closed while idle is forgotten at once.  How a lost
connection failed a request tells the caller whether the node can have
seen it:

  - L{NotSent}: lost before the TLS handshake was done, so the request
    never left this process (a NodeD stopping while it accepted);
  - L{NoAnswer}: lost after the request was sent, before any byte of the
    answer (the node may have run it);
  - L{AnswerCut}: lost in the middle of the answer, or the answer broke HTTP.

Each carries C{reasons}, the failures beneath (a L{ganeti.tlsbio.TLSError}
for a refused certificate).  A request's Deferred, cancelled, aborts its
connection (and a connection being made) and fails with C{CancelledError}.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import error as ierror
from twisted.internet.defer import CancelledError, Deferred, gatherResults
from twisted.internet.interfaces import IHandshakeListener, ISSLTransport
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.python.failure import Failure
from zope.interface import implementer

#: the longest status line and headers accepted in an answer, bytes
MAX_HEAD = 64 * 1024
#: bodies larger than this are written apart from the request's head (no copy)
_JOIN_LIMIT = 64 * 1024

#: a connection's key in the pool: its route (a Unix socket's path, or None: TCP), host and port
Key = tuple[str | None, str, int]
#: an answer: status code, headers (names in lower case), body
Answer = tuple[int, dict[bytes, bytes], bytes]

_HEAD, _LENGTH, _SIZE, _DATA, _CRLF, _TRAILER, _CLOSE = range(7)


class HttpFailure(Exception):
    """A request failed on its connection; C{reasons}: the failures beneath."""

    def __init__(self, reasons: list[Failure]) -> None:
        super().__init__(reasons)
        self.reasons = reasons


class NotSent(HttpFailure):
    """The connection was lost before the request left this process."""


class NoAnswer(HttpFailure):
    """The connection was lost after the request was sent, before any byte of the answer."""


class AnswerCut(HttpFailure):
    """The connection was lost in the middle of the answer, or the answer was not HTTP."""


@implementer(IHandshakeListener)
class HttpConnection(Protocol):
    """One connection to a node: L{request} sends a request and gives its answer."""

    transport: Any

    def __init__(self, release: Callable[[HttpConnection, bool], None], key: Key) -> None:
        self._release = release
        self.key = key
        self.lost = False
        self._secured = True  # no TLS handshake to wait for (set in connectionMade)
        self._answer: Deferred[Answer] | None = None
        self._on_lost: list[Deferred[None]] = []
        self._reset()

    def _reset(self) -> None:
        self._mode = _HEAD
        self._buffer = b""
        self._got = False  # a byte of the answer arrived
        self._code = 0
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._left = 0
        self._keep = False

    # --- the connection -----------------------------------------------------------------------

    def connectionMade(self) -> None:
        self._secured = not ISSLTransport.providedBy(self.transport)

    def handshakeCompleted(self) -> None:
        self._secured = True

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lost = True
        self._release(self, False)
        waiters, self._on_lost = self._on_lost, []
        for waiter in waiters:
            waiter.callback(None)
        d, self._answer = self._answer, None
        if d is None:
            return
        if self._mode == _CLOSE:  # an answer delimited by the connection's end
            d.callback((self._code, self._headers, b"".join(self._body)))
            return
        kind = AnswerCut if self._got else NoAnswer if self._secured else NotSent
        d.errback(kind([reason]))

    def closed(self) -> Deferred[None]:
        """Fires once the connection is lost."""
        d: Deferred[None] = Deferred()
        if self.lost:
            d.callback(None)
        else:
            self._on_lost.append(d)
        return d

    # --- a request ----------------------------------------------------------------------------

    def request(self, head: bytes, body: bytes) -> Deferred[Answer]:
        """Send a request (its head ends with the empty line); fires with the answer."""
        self._reset()
        d: Deferred[Answer] = Deferred(self._cancel)
        self._answer = d
        if len(body) > _JOIN_LIMIT:
            self.transport.write(head)
            self.transport.write(body)
        else:
            self.transport.write(head + body)
        return d

    def _cancel(self, d: Deferred[Answer]) -> None:
        self._answer = None
        self.transport.abortConnection()  # (the Deferred fails with CancelledError)

    def dataReceived(self, data: bytes) -> None:
        if self._answer is None:  # nothing asked for: a confused peer
            self.transport.abortConnection()
            return
        self._got = True
        self._buffer = self._buffer + data if self._buffer else data
        try:
            done = self._parse()
        except ValueError as e:
            d, self._answer = self._answer, None
            self.transport.abortConnection()
            d.errback(AnswerCut([Failure(e)]))
            return
        if done:
            d, self._answer = self._answer, None
            answer = (self._code, self._headers, b"".join(self._body))
            self._release(self, self._keep and not self._buffer)
            d.callback(answer)

    def _parse(self) -> bool:
        """Read what the buffer holds; whether the answer is complete."""
        while True:
            buf = self._buffer
            mode = self._mode
            if mode == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD:
                        raise ValueError("the answer's head is longer than %d bytes" % MAX_HEAD)
                    return False
                self._buffer = buf[end + 4:]
                self._head(buf[:end])
            elif mode == _LENGTH:
                take = buf[:self._left]
                self._body.append(take)
                self._left -= len(take)
                self._buffer = buf[len(take):]
                return self._left == 0
            elif mode == _SIZE:
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > 1024:
                        raise ValueError("a chunk's size line is too long")
                    return False
                size = _number(buf[:end].split(b";", 1)[0], 16, "chunk size")
                self._buffer = buf[end + 2:]
                self._left, self._mode = size, _DATA if size else _TRAILER
            elif mode == _DATA:
                if not buf:
                    return False
                take = buf[:self._left]
                self._body.append(take)
                self._left -= len(take)
                self._buffer = buf[len(take):]
                if not self._left:
                    self._mode = _CRLF
            elif mode == _CRLF:
                if len(buf) < 2:
                    return False
                if buf[:2] != b"\r\n":
                    raise ValueError("a chunk does not end where its size says")
                self._buffer = buf[2:]
                self._mode = _SIZE
            elif mode == _TRAILER:
                end = buf.find(b"\r\n")
                if end < 0:
                    return False
                self._buffer = buf[end + 2:]
                if end == 0:
                    return True
            else:  # _CLOSE: everything up to the connection's end
                self._body.append(buf)
                self._buffer = b""
                return False

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status = lines[0].split(b" ", 2)
        if len(status) < 2 or not status[0].startswith(b"HTTP/1."):
            raise ValueError("not an HTTP answer: %r" % (lines[0][:80],))
        code = _number(status[1], 10, "status code")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise ValueError("a header line without a colon: %r" % (line[:80],))
            headers[name.strip().lower()] = value.strip()
        if 100 <= code < 200:  # an interim answer: the real one follows
            return
        self._code, self._headers = code, headers
        self._keep = status[0] == b"HTTP/1.1" and headers.get(b"connection", b"").lower() != b"close"
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            self._mode = _SIZE
        elif b"content-length" in headers:
            self._left, self._mode = _number(headers[b"content-length"], 10, "Content-Length"), _LENGTH
        elif code in (204, 304):
            self._left, self._mode = 0, _LENGTH
        else:
            self._keep, self._mode = False, _CLOSE


def _number(text: bytes, base: int, what: str) -> int:
    if not text.strip().isalnum():
        raise ValueError("bad %s: %r" % (what, text[:40]))
    try:
        value = int(text, base)
    except ValueError:
        raise ValueError("bad %s: %r" % (what, text[:40])) from None
    return value


class _Connecting(Factory):
    noisy = False

    def __init__(self, release: Callable[[HttpConnection, bool], None], key: Key) -> None:
        self._release = release
        self._key = key

    def buildProtocol(self, addr: Any) -> HttpConnection:
        return HttpConnection(self._release, self._key)


class HttpClient:
    """Requests to nodes over connections kept open between them.

    @param endpoint_for: C{(key)} -> the client endpoint that reaches a
        connection's route, host and port (TLS included where it applies)
    @param persistent: keep connections open between requests
    @param max_idle: idle connections kept per key (a daemon's fds grow by
        at most this per node)
    """

    def __init__(self, endpoint_for: Callable[[Key], Any], *, persistent: bool = True, max_idle: int = 4) -> None:
        self._endpoint_for = endpoint_for
        self._persistent = persistent
        self._max_idle = max_idle
        self._idle: dict[Key, list[HttpConnection]] = {}

    async def request(self, key: Key, head: bytes, body: bytes) -> Answer:
        """Send a request (C{head}: its request line and headers, ending
        with the empty line) on an idle connection to C{key} or a new one."""
        idle = self._idle.get(key)
        connection = idle.pop() if idle else None
        if connection is None:
            try:
                connection = await self._endpoint_for(key).connect(_Connecting(self._release, key))
            except ierror.ConnectingCancelledError:
                raise CancelledError() from None
        assert connection is not None
        return await connection.request(head, body)

    def _release(self, connection: HttpConnection, reusable: bool) -> None:
        """A connection is free again (its answer read whole, C{reusable}) or lost."""
        idle = self._idle.get(connection.key)
        if idle is not None and connection in idle:  # lost while idle
            idle.remove(connection)
        elif reusable and self._persistent and not connection.lost and len(idle or ()) < self._max_idle:
            self._idle.setdefault(connection.key, []).append(connection)
            return
        elif not connection.lost:
            connection.transport.loseConnection()
        if idle is not None and not idle:
            del self._idle[connection.key]

    async def close(self) -> None:
        """Close the idle connections; fires once they are lost."""
        connections = [c for idle in self._idle.values() for c in idle]
        self._idle.clear()
        lost = [c.closed() for c in connections]
        for connection in connections:
            connection.transport.loseConnection()
        await gatherResults(lost)


__all__ = ["MAX_HEAD", "AnswerCut", "HttpClient", "HttpConnection", "HttpFailure", "NoAnswer", "NotSent"]
