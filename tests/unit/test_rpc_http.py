"""The HTTP/1.1 client under node RPC (ganeti.rpc.http): answers framed every
way HTTP frames them, read whole however the bytes arrive; connections kept
for the next call, and forgotten when lost; a broken or cut answer, a lost
connection and a cancelled call each fail the call the way the retry rules
need (not sent / no answer / cut)."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet import error as ierror
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import directlyProvides

from ganeti.rpc import wire
from ganeti.rpc.client import RpcClient
from ganeti.rpc.http import MAX_HEAD, AnswerCut, HttpClient, NoAnswer, NotSent

KEY = (None, "127.0.1.2", 1811)
HEAD = b"POST /version HTTP/1.1\r\nHost: 127.0.1.2\r\nContent-Length: 2\r\n\r\n"

LENGTH = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n[true, 42]\n"
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Ganeti-Epoch: 7\r\n\r\n"
           b"4;ext=1\r\n[tru\r\n7\r\ne, 42]\n\r\n0\r\nTrailer: x\r\n\r\n")


class Endpoint:
    """Connections made on demand over StringTransports; C{tls}: a TLS transport whose handshake is pending."""

    def __init__(self, tls: bool = False) -> None:
        self.tls = tls
        self.connections: list[Any] = []
        self.pending: defer.Deferred[Any] | None = None
        self.hold = False

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        if self.hold:
            self.pending = defer.Deferred(lambda d: d.errback(ierror.ConnectingCancelledError(None)))
            return self.pending
        protocol = factory.buildProtocol(None)
        transport = StringTransport()
        if self.tls:
            directlyProvides(transport, ISSLTransport)
        protocol.makeConnection(transport)
        self.connections.append(protocol)
        return defer.succeed(protocol)


class HttpClientTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.endpoint = Endpoint()
        self.client = HttpClient(lambda key: self.endpoint)

    def send(self, body: bytes = b"[]") -> defer.Deferred[Any]:
        return defer.ensureDeferred(self.client.request(KEY, HEAD, body))

    def answer(self, data: bytes, connection: int = -1, step: int = 0) -> None:
        protocol = self.endpoint.connections[connection]
        if not step:
            protocol.dataReceived(data)
            return
        for i in range(0, len(data), step):
            protocol.dataReceived(data[i:i + step])

    def test_the_request_goes_out_as_written(self) -> None:
        self.send(b"[1]")
        self.assertEqual(self.endpoint.connections[0].transport.value(), HEAD + b"[1]")

    def test_answers_framed_each_way_are_read_whole_however_they_arrive(self) -> None:
        for answer in (LENGTH, CHUNKED):
            for step in (0, 1, 2, 3, 7, 50):
                d = self.send()
                self.answer(answer, step=step)
                code, headers, body = self.successResultOf(d)
                self.assertEqual((code, body), (200, b"[true, 42]\n"), (answer, step))
        self.assertEqual(len(self.endpoint.connections), 1, "the connection was not used again")
        self.assertEqual(headers[b"x-ganeti-epoch"], b"7")

    def test_a_large_body_is_read_whole(self) -> None:
        body = bytes(range(256)) * 4096
        d = self.send()
        self.answer(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body, step=65536)
        self.assertEqual(self.successResultOf(d)[2], body)

    def test_an_interim_answer_is_skipped(self) -> None:
        d = self.send()
        self.answer(b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH)
        self.assertEqual(self.successResultOf(d)[0], 200)

    def test_an_answer_up_to_the_connections_end_is_read_and_the_connection_not_kept(self) -> None:
        d = self.send()
        self.answer(b"HTTP/1.0 200 OK\r\n\r\n[true,")
        self.answer(b" 1]")
        self.assertNoResult(d)
        self.endpoint.connections[0].connectionLost(Failure(ierror.ConnectionDone()))
        self.assertEqual(self.successResultOf(d)[2], b"[true, 1]")
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_a_node_that_says_it_closes_is_not_asked_again_on_that_connection(self) -> None:
        d = self.send()
        self.answer(LENGTH.replace(b"Content-Type", b"Connection: close\r\nContent-Type"))
        self.assertEqual(self.successResultOf(d)[0], 200)
        self.assertTrue(self.endpoint.connections[0].transport.disconnecting)
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_a_broken_answer_fails_the_call_and_drops_the_connection(self) -> None:
        broken = [
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n",
            b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * (MAX_HEAD // 6 + 1),
        ]
        for n, answer in enumerate(broken):
            d = self.send()
            self.answer(answer)
            failure = self.failureResultOf(d, AnswerCut)
            self.assertIsInstance(failure.value.reasons[0].value, ValueError)
            self.assertTrue(self.endpoint.connections[n].transport.disconnecting)
            self.endpoint.connections[n].connectionLost(Failure(ierror.ConnectionLost()))
        self.assertEqual(len(self.endpoint.connections), len(broken), "a broken connection was used again")

    def test_how_a_lost_connection_fails_the_call(self) -> None:
        d = self.send()
        self.endpoint.connections[0].connectionLost(Failure(ierror.ConnectionLost()))
        self.assertIsInstance(self.failureResultOf(d, NoAnswer).value.reasons[0].value, ierror.ConnectionLost)
        d = self.send()
        self.answer(LENGTH[:30])
        self.endpoint.connections[1].connectionLost(Failure(ierror.ConnectionLost()))
        self.failureResultOf(d, AnswerCut)

    def test_a_request_waiting_for_the_tls_handshake_was_never_sent(self) -> None:
        self.endpoint.tls = True
        d = self.send()
        self.endpoint.connections[0].connectionLost(Failure(ierror.ConnectionLost()))
        self.failureResultOf(d, NotSent)
        d = self.send()
        self.endpoint.connections[1].handshakeCompleted()
        self.endpoint.connections[1].connectionLost(Failure(ierror.ConnectionLost()))
        self.failureResultOf(d, NoAnswer)

    def test_a_connection_the_node_closed_while_idle_is_forgotten(self) -> None:
        d = self.send()
        self.answer(LENGTH)
        self.successResultOf(d)
        self.endpoint.connections[0].connectionLost(Failure(ierror.ConnectionDone()))
        d = self.send()
        self.assertEqual(len(self.endpoint.connections), 2)
        self.answer(LENGTH)
        self.successResultOf(d)

    def test_bytes_on_an_idle_connection_drop_it(self) -> None:
        d = self.send()
        self.answer(LENGTH)
        self.successResultOf(d)
        self.answer(b"HTTP/1.1 200 OK\r\n")
        self.assertTrue(self.endpoint.connections[0].transport.disconnecting)

    def test_at_most_four_idle_connections_are_kept_per_node(self) -> None:
        calls = [self.send() for _ in range(6)]
        self.assertEqual(len(self.endpoint.connections), 6)
        for n in range(6):
            self.answer(LENGTH, connection=n)
        for d in calls:
            self.successResultOf(d)
        closed = [c.transport.disconnecting for c in self.endpoint.connections]
        self.assertEqual(closed, [False] * 4 + [True] * 2)
        self.send()
        self.assertEqual(len(self.endpoint.connections), 6)

    def test_a_client_that_keeps_nothing_closes_after_each_answer(self) -> None:
        self.client = HttpClient(lambda key: self.endpoint, persistent=False)
        d = self.send()
        self.answer(LENGTH)
        self.successResultOf(d)
        self.assertTrue(self.endpoint.connections[0].transport.disconnecting)

    def test_a_cancelled_call_aborts_its_connection(self) -> None:
        d = self.send()
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)
        connection = self.endpoint.connections[0]
        self.assertTrue(connection.transport.disconnecting)
        connection.connectionLost(Failure(ierror.ConnectionAborted()))
        self.send()
        self.assertEqual(len(self.endpoint.connections), 2)

    def test_a_call_cancelled_while_it_connects_fails_as_cancelled(self) -> None:
        self.endpoint.hold = True
        d = self.send()
        d.cancel()
        self.failureResultOf(d, defer.CancelledError)

    def test_close_closes_the_idle_connections_and_waits_for_them(self) -> None:
        for _ in range(2):
            d = self.send()
            self.answer(LENGTH)
            self.successResultOf(d)
        closing = defer.ensureDeferred(self.client.close())
        self.assertTrue(self.endpoint.connections[0].transport.disconnecting)
        self.assertNoResult(closing)
        self.endpoint.connections[0].connectionLost(Failure(ierror.ConnectionDone()))
        self.successResultOf(closing)


class RpcRequestTests(SynchronousTestCase):
    def test_a_node_rpc_request_carries_the_procedure_the_body_and_the_epoch(self) -> None:
        endpoint = Endpoint()
        client = RpcClient(MemoryReactorClock(), None, port=1811, epoch=5)
        client._http._endpoint_for = lambda key: endpoint
        d = defer.ensureDeferred(client.call({"n1": "::1"}, "version", [3]))
        sent = endpoint.connections[0].transport.value()
        self.assertEqual(sent, b"POST /version HTTP/1.1\r\nHost: [::1]\r\nContent-Length: 3\r\n"
                               b"Content-Type: application/json\r\nX-Ganeti-Epoch: 5\r\n\r\n[3]")
        endpoint.connections[0].dataReceived(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                                             % (len(wire.encode_response(True, 7)), wire.encode_response(True, 7)))
        self.assertEqual(self.successResultOf(d)["n1"].payload, 7)
