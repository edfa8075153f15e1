"""The web console's WebSockets through a candidate: a byte relay to the master's RAPI.

L{ganeti.rapi.forward} drops C{Upgrade} (a hop-by-hop header), so a
browser's console WebSocket (C{GET /ui/instances/NAME/console} or C{.../vnc}
with C{Upgrade: websocket}) sent to a candidate is not forwarded as one.
Instead the candidate opens a TLS connection of its own to the master's RAPI
(same certificate pinning as the forwarder: L{forward.RapiCertificatePolicy}),
sends the upgrade request with the browser's end-to-end headers (session
cookie, C{Origin}, C{Sec-WebSocket-*}) and the host the browser asked for as
C{X-Forwarded-Host} (the master checks the C{Origin} against it), and:

  - on C{101}: sends that answer to the browser and from then on relays bytes
    both ways until either side closes; a side whose send buffer is full
    pauses reading on the other side;
  - on any other answer (403, 429, ...): passes it on as an HTTP answer.

The master authorises (session, C{write} right, origin) and bridges to the
console as it does for its own clients.  Each relay counts against the
candidate's web console stream limits (L{ganeti.rapi.ui.events.StreamLimits}),
per the session's user when the candidate knows the session, else per client
address.  Any other upgrade request is forwarded as before (without C{Upgrade}).
"""

from __future__ import annotations

import re
from typing import Any, Callable

import h11
from twisted.internet import protocol
from twisted.internet.interfaces import IPushProducer
from twisted.python.failure import Failure
from twisted.web.http_headers import Headers
from zope.interface import implementer

from ganeti.rapi import baserlib

_CONSOLE = re.compile(r"^/ui/instances/(%s)/(console|vnc)$" % baserlib.NAME)
#: the largest answer head (or refusal) accepted from the master, in bytes
MAX_ANSWER = 64 * 1024


def is_console_upgrade(request: Any) -> bool:
    """Whether C{request} is a WebSocket upgrade to a console path (C{GET}, C{Upgrade: websocket},
    C{Connection: upgrade})."""
    if request.method != b"GET" or (request.getHeader(b"upgrade") or b"").strip().lower() != b"websocket":
        return False
    tokens = [t.strip().lower() for t in (request.getHeader(b"connection") or b"").split(b",")]
    return b"upgrade" in tokens and _CONSOLE.match(request.path.decode("ascii", "replace")) is not None


def upgrade_request(request: Any, netloc: bytes, kept: Headers) -> h11.Request:
    """The upgrade request sent to the master (pure): C{kept}, the browser's end-to-end headers,
    and C{X-Forwarded-Host} the host it asked for."""
    kept.removeHeader(b"x-forwarded-host")
    headers = [(b"host", netloc)]
    headers += [(name, value) for name, values in kept.getAllRawHeaders() for value in values]
    host = request.getHeader(b"host")
    if host:
        headers.append((b"x-forwarded-host", host))
    headers += [(b"upgrade", b"websocket"), (b"connection", b"Upgrade")]
    return h11.Request(method=b"GET", target=request.uri, headers=headers)


class _Master(protocol.Protocol):
    """The connection to the master's RAPI."""

    def __init__(self, tunnel: ConsoleTunnel) -> None:
        self.tunnel = tunnel

    def connectionMade(self) -> None:
        self.tunnel.master_made(self.transport)

    def dataReceived(self, data: bytes) -> None:
        self.tunnel.from_master(data)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.tunnel.master_lost()


class MasterFactory(protocol.Factory):
    def __init__(self, tunnel: ConsoleTunnel) -> None:
        self.tunnel = tunnel

    def buildProtocol(self, addr: Any) -> protocol.Protocol:
        return _Master(self.tunnel)


@implementer(IPushProducer)
class _BrowserReading:
    """Registered on the master's connection: its full buffer pauses reading from the browser."""

    def __init__(self, producer: Any) -> None:
        self.producer = producer

    def pauseProducing(self) -> None:
        self.producer.pauseProducing()

    def resumeProducing(self) -> None:
        self.producer.resumeProducing()

    def stopProducing(self) -> None:
        pass


class ConsoleTunnel:
    """One browser's console upgrade, relayed to the master's RAPI.

    @param request: the browser's upgrade request (on a L{ganeti.http_limits.GuardedChannel})
    @param netloc: the master's C{host:port}, as the C{Host} of the request sent there
    @param on_close: called once when the relay (or the attempt) is over
    @param end_to_end: the headers of a request or answer that are sent on (L{ganeti.rapi.forward.forwarded_headers})
    """

    def __init__(self, request: Any, netloc: bytes, on_close: Callable[[], None],
                 end_to_end: Callable[[Headers], Headers]) -> None:
        self.end_to_end = end_to_end
        self.request = request
        self.channel = request.channel
        self.conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_ANSWER)
        self.netloc = netloc
        self.on_close = on_close
        self.master: Any = None
        self.relaying = False
        self.closed = False
        self._answer: h11.Response | None = None
        self._body: list[bytes] = []
        self._size = 0

    # --- before the 101 ----------------------------------------------------------------
    def master_made(self, transport: Any) -> None:
        if self.closed:
            transport.loseConnection()
            return
        self.master = transport
        head = upgrade_request(self.request, self.netloc, self.end_to_end(self.request.requestHeaders))
        transport.write(self.conn.send(head) + self.conn.send(h11.EndOfMessage()))

    def failed(self, message: str) -> None:
        """The master cannot be reached (or answered nonsense): 502 to the browser."""
        if self.closed:
            return
        self._done()
        if self.request.finished or self.request._disconnected:
            return
        self.request.setResponseCode(502)
        self.request.setHeader(b"content-type", b"application/json")
        self.request.write(b'{"code": 502, "message": "%s", "explain": "this node forwards the console to the master"}'
                           % message.replace('"', "'").encode("utf-8", "replace"))
        self.request.finish()

    def from_master(self, data: bytes) -> None:
        if self.relaying:
            self.channel.transport.write(data)
            return
        if self.closed:
            return
        try:
            self.conn.receive_data(data)
            while True:
                event = self.conn.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    return
                if isinstance(event, h11.InformationalResponse):
                    if event.status_code == 101:
                        self._take_over(event)
                        return
                elif isinstance(event, h11.Response):
                    self._answer = event
                elif isinstance(event, h11.Data):
                    self._size += len(event.data)
                    if self._size > MAX_ANSWER:
                        raise h11.RemoteProtocolError("answer too large")
                    self._body.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._refused()
                    return
                elif isinstance(event, h11.ConnectionClosed):
                    raise h11.RemoteProtocolError("connection closed")
        except h11.RemoteProtocolError as e:
            self.failed("Invalid answer from the master's RAPI: %s" % e)

    def _refused(self) -> None:
        """The master answered without upgrading: that answer, to the browser."""
        answer = self._answer
        assert answer is not None
        self._done()
        request = self.request
        if request.finished or request._disconnected:
            return
        request.setResponseCode(answer.status_code, answer.reason or None)
        received = Headers()
        for name, value in answer.headers.raw_items():
            received.addRawHeader(name, value)
        for name, values in self.end_to_end(received).getAllRawHeaders():
            request.responseHeaders.setRawHeaders(name, values)
        body = b"".join(self._body)
        request.setHeader(b"content-length", b"%d" % len(body))
        request.write(body)
        request.finish()

    def _take_over(self, answer: h11.InformationalResponse) -> None:
        """The master upgraded: its answer to the browser, then the bytes both ways."""
        channel = self.channel
        if self.request._disconnected or channel.transport is None:
            self._done()
            return
        self.relaying = True
        channel.setTimeout(None)  # the master's pings (and the browser's pongs) keep both ends alive
        original_lost = channel.connectionLost

        def lost(reason: Failure = protocol.connectionDone) -> None:
            self._done()
            original_lost(reason)

        channel.dataReceived = self.from_browser
        channel.connectionLost = lost
        channel.pauseProducing = self._pause_master      # the browser's buffer is full
        channel.resumeProducing = self._resume_master
        reading = getattr(channel, "_networkProducer", None) or channel.transport
        self.master.registerProducer(_BrowserReading(reading), True)  # the master's buffer is full
        head = [b"HTTP/1.1 101 " + (answer.reason or b"Switching Protocols")]
        head += [name + b": " + value for name, value in answer.headers.raw_items()]
        channel.transport.write(b"\r\n".join(head) + b"\r\n\r\n")
        trailing, _closed = self.conn.trailing_data
        if trailing:
            channel.transport.write(bytes(trailing))
        buffered = b"".join(getattr(channel, "_dataBuffer", []))
        if buffered:  # sent by the browser before the answer came (HTTPChannel kept it)
            channel._dataBuffer = []
            self.master.write(buffered)

    def _pause_master(self) -> None:
        if self.master is not None:
            self.master.pauseProducing()

    def _resume_master(self) -> None:
        if self.master is not None:
            self.master.resumeProducing()

    # --- relaying --------------------------------------------------------------------
    def from_browser(self, data: bytes) -> None:
        if not self.closed and self.master is not None:
            self.master.write(data)

    def abandon(self) -> None:
        """The browser left before the master answered."""
        if not self.relaying:
            self._done()

    def master_lost(self) -> None:
        if self.relaying:
            if not self.closed:
                self._done()
                self.channel.loseConnection()
            return
        if not self.closed:
            self.failed("The master's RAPI closed the connection before it answered")

    def _done(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.master is not None:
            self.master.loseConnection()
        self.on_close()
