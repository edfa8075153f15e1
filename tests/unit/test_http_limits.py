"""ganeti.http_limits: deadlines, head size, connection caps, aggregate log (Clock + StringTransport)."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import Logger
from twisted.python import usage
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from ganeti import http_limits
from ganeti.http_limits import ClosureReport, GuardedChannel, HttpLimits

LIMITS = HttpLimits(max_connections=6, max_connections_per_ip=3, handshake_timeout=5, header_timeout=10,
                    body_timeout=20, idle_timeout=60, max_header_size=2048, close_grace=3)
GET = b"GET /x HTTP/1.1\r\nHost: rapi\r\n\r\n"


class Answer(Resource):
    """Answers C{ok}; C{/slow} answers only when the test calls C{finish}."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Any] = []

    def render(self, request: Any) -> Any:
        if request.path == b"/slow":
            self.pending.append(request)
            return NOT_DONE_YET
        body = request.content.read()
        return b"ok:" + body


class Peer(StringTransport):
    """A client transport that records aborts (a TCP reset)."""

    aborted = False

    def abortConnection(self) -> None:
        self.aborted = True
        super().abortConnection()


class Server:
    def __init__(self, limits: HttpLimits = LIMITS) -> None:
        self.clock = Clock()
        self.resource = Answer()
        self.site = Site(self.resource, reactor=self.clock)
        self.events: list[dict[str, Any]] = []
        self.report = ClosureReport(self.clock, "test", interval=30)
        self.report.log = Logger(observer=self.events.append)
        self.limits = limits
        self.factory = http_limits.guard(self.site, limits, self.report)

    def connect(self, host: str = "127.0.0.1", port: int = 40000) -> tuple[Any, Peer]:
        addr = IPv4Address("TCP", host, port)
        proto = self.factory.buildProtocol(addr)
        assert proto is not None
        peer = Peer(peerAddress=addr)
        proto.makeConnection(peer)
        return proto, peer

    def tls_channel(self) -> tuple[GuardedChannel, Peer]:
        """A channel as TLS builds it: the handshake comes first."""
        channel = GuardedChannel(self.limits, self.report, tls=True)
        channel.site, channel.requestFactory = self.site, self.site.requestFactory
        channel.callLater, channel.timeOut = self.clock.callLater, self.limits.idle_timeout
        peer = Peer(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
        channel.makeConnection(peer)
        return channel, peer


def status(peer: Peer) -> bytes:
    return peer.value().split(b"\r\n", 1)[0]


@pytest.fixture
def server() -> Server:
    return Server()


def test_request_answered_and_kept_alive_until_idle_timeout(server):
    proto, peer = server.connect()
    proto.dataReceived(GET)
    assert status(peer) == b"HTTP/1.1 200 OK" and peer.value().endswith(b"ok:")
    server.clock.advance(59)
    assert not peer.disconnecting
    peer.clear()
    proto.dataReceived(GET)
    assert status(peer) == b"HTTP/1.1 200 OK"
    server.clock.advance(60)
    assert peer.disconnecting
    assert server.report.totals == {http_limits.IDLE_TIMEOUT: 1}


def test_bare_lf_request_is_served(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /x HTTP/1.1\nHost: rapi\n\n")
    assert status(peer) == b"HTTP/1.1 200 OK"


def test_bare_lf_post_body_keeps_its_bytes(server):
    proto, peer = server.connect()
    proto.dataReceived(b"POST /x HTTP/1.1\nContent-Length: 6\n\na\r\nb\nc")
    assert peer.value().endswith(b"ok:a\r\nb\nc")


def test_head_trickling_in_is_cut_at_the_header_timeout(server):
    """One byte a second resets an idle timer forever; the head deadline holds."""
    proto, peer = server.connect()
    for byte in GET[:9]:
        proto.dataReceived(bytes([byte]))
        server.clock.advance(1)
    assert not peer.disconnecting
    proto.dataReceived(b"x")
    server.clock.advance(1)
    assert status(peer) == b"HTTP/1.1 408 Request Timeout"
    assert peer.disconnecting
    assert server.report.totals == {http_limits.HEADER_TIMEOUT: 1}


def test_silent_connection_closed_at_header_timeout(server):
    _proto, peer = server.connect()
    server.clock.advance(9.9)
    assert not peer.disconnecting
    server.clock.advance(0.1)
    assert status(peer) == b"HTTP/1.1 408 Request Timeout" and peer.disconnecting


def test_next_head_on_a_kept_alive_connection_has_its_deadline(server):
    proto, peer = server.connect()
    proto.dataReceived(GET)
    server.clock.advance(30)
    peer.clear()
    proto.dataReceived(b"GET /x HT")
    server.clock.advance(10)
    assert status(peer) == b"HTTP/1.1 408 Request Timeout"


def test_tls_handshake_must_end_in_time(server):
    _channel, peer = server.tls_channel()
    server.clock.advance(4.9)
    assert not peer.disconnecting
    server.clock.advance(0.1)
    assert peer.aborted and peer.value() == b""
    assert server.report.totals == {http_limits.HANDSHAKE_TIMEOUT: 1}


def test_header_deadline_starts_at_the_handshake(server):
    channel, peer = server.tls_channel()
    server.clock.advance(4)
    channel.handshakeCompleted()
    server.clock.advance(9)
    assert not peer.disconnecting
    channel.dataReceived(GET)
    assert status(peer) == b"HTTP/1.1 200 OK"
    server.clock.advance(40)
    assert not peer.disconnecting


def test_slow_body_cut_at_body_timeout(server):
    proto, peer = server.connect()
    proto.dataReceived(b"POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")
    for _ in range(19):
        proto.dataReceived(b"")
        server.clock.advance(1)
    assert not peer.disconnecting
    server.clock.advance(1)
    assert status(peer) == b"HTTP/1.1 408 Request Timeout" and peer.disconnecting
    assert server.report.totals == {http_limits.BODY_TIMEOUT: 1}
    answer = peer.value()
    proto.dataReceived(b"defghij")
    assert peer.value() == answer, "a request cut by a timeout is not answered after all"


def test_long_header_line_answers_431_at_once(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /x HTTP/1.1\r\nX-Big: " + b"a" * 1_000_000)
    assert status(peer) == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert peer.disconnecting
    answer = peer.value()
    proto.dataReceived(b"a" * 100_000 + b"\r\n\r\n")
    assert peer.value() == answer


def test_body_declared_over_the_limit_answers_413_before_it_is_read():
    server = Server()
    server.factory = http_limits.guard(server.site, LIMITS, server.report, max_body=1000)
    proto, peer = server.connect()
    proto.dataReceived(b"POST /x HTTP/1.1\r\nContent-Length: 1073741824\r\nExpect: 100-continue\r\n\r\n")
    assert status(peer) == b"HTTP/1.1 413 Content Too Large" and peer.disconnecting
    assert b"100 Continue" not in peer.value(), "the client is not invited to send the body"
    assert server.report.totals == {http_limits.BODY_TOO_LARGE: 1}
    answer = peer.value()
    proto.dataReceived(b"x" * 100_000)
    assert peer.value() == answer and server.resource.pending == []


def test_body_at_the_limit_is_served():
    server = Server()
    server.factory = http_limits.guard(server.site, LIMITS, server.report, max_body=10)
    proto, peer = server.connect()
    proto.dataReceived(b"POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789")
    assert status(peer) == b"HTTP/1.1 200 OK" and peer.value().endswith(b"ok:0123456789")


def test_memory_is_given_back_once_a_flood_has_closed():
    released: list[float] = []
    limits = HttpLimits(max_connections=200, max_connections_per_ip=200)
    server = Server(limits)
    server.factory = http_limits.guard(server.site, limits, server.report,
                                       release=lambda: released.append(server.clock.seconds()))
    flood = [server.connect(port=40000 + n)[0] for n in range(http_limits.RELEASE_PEAK)]
    for proto in flood[:-17]:
        proto.connectionLost(Failure(ConnectionDone()))
    server.clock.advance(5)
    assert released == [], "a quarter of the peak still open: nothing released yet"
    for proto in flood[-17:]:
        proto.connectionLost(Failure(ConnectionDone()))
    server.clock.advance(5)
    assert len(released) == 1, "released once, a second after the flood closed"


def test_a_few_connections_release_nothing():
    released: list[int] = []
    server = Server()
    server.factory = http_limits.guard(server.site, LIMITS, server.report, release=lambda: released.append(1))
    for n in range(20):
        proto, _peer = server.connect(host="127.0.0.%d" % (1 + n // 3), port=40000 + n)
        proto.connectionLost(Failure(ConnectionDone()))
    server.clock.advance(5)
    assert released == []


def test_too_many_header_bytes_answer_431(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /x HTTP/1.1\r\n" + b"X-A: " + b"b" * 90 + b"\r\n")
    assert peer.value() == b""
    proto.dataReceived((b"X-A: " + b"b" * 90 + b"\r\n") * 30)
    assert status(peer) == b"HTTP/1.1 431 Request Header Fields Too Large"


def test_peer_that_never_closes_is_aborted_after_the_grace(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /x HTTP/1.1\r\nX-Big: " + b"a" * 5000)
    assert peer.disconnecting and not peer.aborted
    server.clock.advance(3)
    assert peer.aborted


def test_bad_request_is_aborted_after_the_grace_too(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GARBAGE\r\n\r\n")
    assert status(peer) == b"HTTP/1.1 400 Bad Request"
    server.clock.advance(3)
    assert peer.aborted


def test_closed_answer_has_the_idle_timeout_to_be_read(server):
    """After a complete answer the peer gets time to read it; then it is cut all the same."""
    proto, peer = server.connect()
    proto.dataReceived(b"GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert status(peer) == b"HTTP/1.1 200 OK" and peer.disconnecting
    server.clock.advance(59)
    assert not peer.aborted
    server.clock.advance(1)
    assert peer.aborted
    assert server.report.totals == {http_limits.CLOSE_ABORTED: 1}


def test_request_being_answered_has_no_deadline(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /slow HTTP/1.1\r\n\r\n")
    server.clock.advance(1000)
    assert not peer.disconnecting
    request = server.resource.pending.pop()
    request.write(b"late")
    request.finish()
    assert status(peer) == b"HTTP/1.1 200 OK" and not peer.disconnecting


def test_pipelined_request_after_a_slow_one_is_answered(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /slow HTTP/1.1\r\n\r\n" + GET)
    server.clock.advance(100)
    request = server.resource.pending.pop()
    request.finish()
    assert peer.value().count(b"HTTP/1.1 200 OK") == 2
    assert not peer.disconnecting


def test_connection_lost_cancels_the_deadlines(server):
    proto, peer = server.connect()
    proto.dataReceived(b"GET /x")
    proto.connectionLost(Failure(ConnectionDone()))
    assert server.clock.getDelayedCalls() == []


# --- connection caps ---------------------------------------------------------------


def test_per_address_cap_leaves_room_for_other_addresses(server):
    protos = [server.connect("127.0.0.1", 40000 + i)[0] for i in range(3)]
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 41000)) is None
    other, peer = server.connect("127.0.0.2")
    other.dataReceived(GET)
    assert status(peer) == b"HTTP/1.1 200 OK"
    protos[0].connectionLost(Failure(ConnectionDone()))
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 41001)) is not None
    assert server.report.totals == {http_limits.OVER_PER_IP: 1}


def test_total_cap_makes_room_by_closing_the_longest_waiting_connection(server):
    conns = [server.connect("127.0.0.%d" % (i // 2 + 1), 40000 + i) for i in range(6)]
    server.clock.advance(1)
    conns[0][0].dataReceived(GET)  # answered, then waiting again: now the newest waiter
    proto, peer = server.connect("127.0.0.9")
    assert conns[1][1].aborted and not conns[0][1].aborted
    assert server.report.totals == {http_limits.EVICTED: 1}
    proto.dataReceived(GET)
    assert status(peer) == b"HTTP/1.1 200 OK"
    conns[1][0].connectionLost(Failure(ConnectionDone()))
    assert server.factory.room.pending == 0 and len(server.factory.protocols) == 6


def test_busy_connections_are_never_closed_for_new_ones(server):
    conns = [server.connect("127.0.0.%d" % (i // 2 + 1), 40000 + i) for i in range(6)]
    for proto, _ in conns:
        proto.dataReceived(b"GET /slow HTTP/1.1\r\n\r\n")
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.9", 41000)) is None
    assert not any(peer.aborted for _, peer in conns)
    assert server.report.totals == {http_limits.OVER_TOTAL: 1}


def test_a_slow_body_is_busy_too(server):
    conns = [server.connect("127.0.0.%d" % (i // 2 + 1), 40000 + i) for i in range(6)]
    for proto, _ in conns:
        proto.dataReceived(b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nab")
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.9", 41000)) is None


def test_closing_evicted_connections_are_bounded(server):
    server.factory.room.max_pending = 2
    conns = [server.connect("127.0.0.%d" % (i // 2 + 1), 40000 + i) for i in range(6)]
    server.connect("127.0.0.9", 1)
    server.connect("127.0.0.9", 2)
    assert [peer.aborted for _, peer in conns] == [True, True, False, False, False, False]
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.9", 3)) is None
    conns[0][0].connectionLost(Failure(ConnectionDone()))
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.9", 4)) is not None


def test_refusals_are_logged_once_per_interval(server):
    for _ in range(3):
        server.connect("127.0.0.1")
    for _ in range(500):
        server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 41000))
    server.connect("127.0.0.3")
    server.connect("127.0.0.3")
    server.connect("127.0.0.4")
    server.connect("127.0.0.5")
    assert server.events == []
    server.clock.advance(30)
    assert len(server.events) == 1
    event = server.events[0]
    # the seventh connection closed the first one; the six left missed the header deadline (10 s)
    assert event["total"] == 507 and event["host"] == "127.0.0.1" and event["count"] == 503
    assert event["details"] == ("500 over the per-address limit, 6 request head timeout, "
                                "1 closed for a newer connection at the connection limit")
    server.clock.advance(300)
    assert len(server.events) == 1


# --- options and the open-files limit ------------------------------------------------


def test_caps_fit_below_the_open_files_limit():
    limits = HttpLimits(max_connections=1000, max_connections_per_ip=100)
    assert http_limits.fit_to_fd_limit(limits, 4096) == limits
    fitted = http_limits.fit_to_fd_limit(limits, 1024)
    assert fitted.max_connections == 1024 - http_limits.FD_RESERVE and fitted.max_connections_per_ip == 100
    tiny = http_limits.fit_to_fd_limit(limits, http_limits.FD_RESERVE + 50)
    assert tiny.max_connections == tiny.max_connections_per_ip == 50
    assert http_limits.fit_to_fd_limit(limits, 10).max_connections == 1


class _Options(usage.Options):
    optParameters = http_limits.option_parameters(HttpLimits())


def test_options_give_the_limits():
    options = _Options()
    options.parseOptions(["--max-connections", "50", "--max-connections-per-ip", "5", "--header-timeout", "2.5"])
    limits = http_limits.limits_from_options(options)
    assert limits == HttpLimits(max_connections=50, max_connections_per_ip=5, header_timeout=2.5)


@pytest.mark.parametrize("argv", [
    ["--max-connections", "10", "--max-connections-per-ip", "11"],
    ["--header-timeout", "0"],
    ["--max-connections", "-1"],
])
def test_bad_limits_are_refused(argv):
    options = _Options()
    with pytest.raises(usage.UsageError):
        options.parseOptions(argv)
        http_limits.limits_from_options(options)


def test_what_is_left_is_logged_when_the_daemon_stops(server):
    server.report.startService()
    for _ in range(3):
        server.connect("127.0.0.1")
    assert server.factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 41000)) is None
    server.report.stopService()
    assert [(e["total"], e["details"]) for e in server.events] == [(1, "1 over the per-address limit")]
    server.clock.advance(30)
    assert len(server.events) == 1
