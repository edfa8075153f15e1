"""A candidate's RAPI relays the web console's WebSockets to the master's (ganeti.rapi.wsforward)."""

from __future__ import annotations

from typing import Any

import h11
import pytest
from twisted.internet import defer, error
from twisted.internet.address import IPv4Address
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import Site

from ganeti import http_limits
from ganeti.http_limits import ClosureReport, HttpLimits
from ganeti.rapi.forward import ForwardingResource
from ganeti.rapi.ui.events import StreamLimits, Streams

LIMITS = HttpLimits(max_connections=6, max_connections_per_ip=3, handshake_timeout=5, header_timeout=10,
                    body_timeout=20, idle_timeout=60, max_header_size=4096, close_grace=3)
KEY = b"dGhlIHNhbXBsZSBub25jZQ=="


def upgrade(path: bytes = b"/ui/instances/web1.example.com/console") -> bytes:
    return (b"GET " + path + b" HTTP/1.1\r\nHost: node2.example.com:5080\r\nUpgrade: websocket\r\n"
            b"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: " + KEY + b"\r\nSec-WebSocket-Version: 13\r\n"
            b"Origin: https://node2.example.com:5080\r\nCookie: ganeti_ui=abc\r\n"
            b"X-Forwarded-Host: evil.example.com\r\n\r\n")


class Local(Resource):
    isLeaf = True

    def __init__(self, limits: StreamLimits) -> None:
        super().__init__()

        class Ui:
            streams = Streams(limits)

        self.ui = Ui()

    def render(self, request: Any) -> bytes:
        return b"local"


class Agent:
    """The forwarder's ordinary HTTPS client: records requests, never answers."""

    def __init__(self) -> None:
        self.requests: list[tuple[bytes, bytes, Any]] = []

    def request(self, method: bytes, url: bytes, headers: Any, producer: Any) -> defer.Deferred[Any]:
        self.requests.append((method, url, headers))
        return defer.Deferred()


class Candidate:
    """A candidate's RAPI (forwarding to 10.0.0.1) on a guarded channel, its tunnels to the master recorded."""

    def __init__(self, limits: StreamLimits | None = None) -> None:
        self.clock = Clock()
        self.agent = Agent()
        self.local = Local(limits or StreamLimits())
        self.tunnels: list[tuple[str, int, Any, defer.Deferred[Any]]] = []
        self.resource = ForwardingResource(self.local, lambda: "10.0.0.1", 5080, self.agent, self.clock,
                                           tunnel=self._tunnel)
        report = ClosureReport(self.clock, "test", interval=30)
        report.log = Logger(observer=lambda event: None)
        self.factory = http_limits.guard(Site(self.resource, reactor=self.clock), LIMITS, report)

    def _tunnel(self, address: str, port: int, factory: Any) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        self.tunnels.append((address, port, factory, d))
        return d

    def browser(self) -> tuple[Any, StringTransport]:
        addr = IPv4Address("TCP", "192.0.2.7", 40000)
        channel = self.factory.buildProtocol(addr)
        peer = StringTransport(peerAddress=addr)
        channel.makeConnection(peer)
        return channel, peer

    def master(self, index: int = 0) -> tuple[Any, StringTransport]:
        """The connection to the master's RAPI made (as the TLS endpoint would)."""
        _, _, factory, d = self.tunnels[index]
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        d.callback(proto)
        return proto, transport


def sent_request(transport: StringTransport) -> h11.Request:
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(transport.value())
    event = conn.next_event()
    assert isinstance(event, h11.Request)
    return event


def closing(transport: StringTransport) -> bool:
    return bool(transport.disconnecting)


ACCEPT = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")


def test_a_console_upgrade_is_relayed_both_ways_until_the_master_closes() -> None:
    candidate = Candidate()
    channel, browser = candidate.browser()
    channel.dataReceived(upgrade())
    assert candidate.agent.requests == []  # not the ordinary forward, which drops Upgrade
    assert [(a, p) for a, p, _, _ in candidate.tunnels] == [("10.0.0.1", 5080)]
    master, to_master = candidate.master()
    request = sent_request(to_master)
    headers = dict(request.headers)
    assert request.target == b"/ui/instances/web1.example.com/console"
    assert headers[b"upgrade"] == b"websocket" and headers[b"connection"] == b"Upgrade"
    assert headers[b"sec-websocket-key"] == KEY and headers[b"cookie"] == b"ganeti_ui=abc"
    assert headers[b"origin"] == b"https://node2.example.com:5080"
    # the master checks the Origin against the host the browser asked for, not one the browser claims
    assert [v for k, v in request.headers if k == b"x-forwarded-host"] == [b"node2.example.com:5080"]
    assert headers[b"host"] == b"10.0.0.1:5080"

    master.dataReceived(ACCEPT + b"\x81\x05hello")
    answer = browser.value()
    assert answer.startswith(b"HTTP/1.1 101 ") and b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in answer
    assert answer.endswith(b"\r\n\r\n\x81\x05hello")
    to_master.clear()
    channel.dataReceived(b"\x82\x85frame")
    assert to_master.value() == b"\x82\x85frame"
    master.dataReceived(b"more")
    assert browser.value().endswith(b"more")
    assert candidate.local.ui.streams.open == 1
    candidate.clock.advance(LIMITS.idle_timeout + 1)  # no idle timeout on a console
    assert not closing(browser)

    master.connectionLost(Failure(error.ConnectionDone()))
    assert closing(browser)
    assert candidate.local.ui.streams.open == 0


def test_a_full_buffer_pauses_the_other_side() -> None:
    candidate = Candidate()
    channel, browser = candidate.browser()
    channel.dataReceived(upgrade(b"/ui/instances/web1.example.com/vnc"))
    master, to_master = candidate.master()
    master.dataReceived(ACCEPT)
    # the browser's buffer is full: the master is not read
    browser.producer.pauseProducing()
    assert to_master.producerState == "paused"
    browser.producer.resumeProducing()
    assert to_master.producerState == "producing"
    # the master's buffer is full: the browser is not read
    to_master.producer.pauseProducing()
    assert browser.producerState == "paused"
    to_master.producer.resumeProducing()
    assert browser.producerState == "producing"
    # the browser leaves: the master's connection is closed
    channel.connectionLost(Failure(error.ConnectionDone()))
    assert to_master.disconnecting
    assert candidate.local.ui.streams.open == 0


def test_a_refusal_from_the_master_is_the_browsers_answer() -> None:
    candidate = Candidate()
    channel, browser = candidate.browser()
    channel.dataReceived(upgrade())
    master, to_master = candidate.master()
    body = b'{"code": 403, "message": "User jack lacks the right (write) to open a console"}'
    master.dataReceived(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(body), body))
    answer = browser.value()
    assert answer.startswith(b"HTTP/1.1 403 Forbidden") and answer.endswith(body)
    assert to_master.disconnecting
    assert candidate.local.ui.streams.open == 0


def test_an_unreachable_master_is_a_502() -> None:
    candidate = Candidate()
    channel, browser = candidate.browser()
    channel.dataReceived(upgrade())
    candidate.tunnels[0][3].errback(error.ConnectionRefusedError())
    assert browser.value().startswith(b"HTTP/1.1 502 ")
    assert b"cannot be reached" in browser.value()
    assert candidate.local.ui.streams.open == 0


def test_consoles_count_against_the_stream_limits() -> None:
    candidate = Candidate(StreamLimits(total=4, per_user=1))
    first, _ = candidate.browser()
    first.dataReceived(upgrade())
    second, browser = candidate.browser()
    second.dataReceived(upgrade())
    assert browser.value().startswith(b"HTTP/1.1 429 ")
    assert len(candidate.tunnels) == 1


@pytest.mark.parametrize("head", [
    upgrade(b"/ui/events"),                                            # not a console
    upgrade(b"/ui/instances/web1.example.com/console/x"),
    upgrade().replace(b"Upgrade: websocket", b"Upgrade: h2c"),         # not a WebSocket
    upgrade().replace(b"keep-alive, Upgrade", b"keep-alive"),          # no Connection: upgrade
])
def test_other_upgrades_are_forwarded_as_before(head: bytes) -> None:
    candidate = Candidate()
    channel, _ = candidate.browser()
    channel.dataReceived(head)
    assert candidate.tunnels == []
    [(method, url, headers)] = candidate.agent.requests
    assert method == b"GET" and url.startswith(b"https://10.0.0.1:5080/ui/")
    assert not headers.hasHeader(b"upgrade")
