"""TLS through the standard library's ssl under Twisted (ganeti.tlsbio): two ends connected in memory
(Twisted's iosim), with the cluster's real certificates and ends (ganeti.rpc.tls)."""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IHandshakeListener
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer

from ganeti import crypto as gcrypto
from ganeti.rpc.tls import Credentials, PinnedPolicy, ServerContextFactory
from ganeti.tlsbio import TLSError, TLSServerFactory, _TLSClientFactory
from tests.unit.test_rpc_tls import CLUSTER, NODE_CLIENT, OTHER

CLUSTER_CREDS = Credentials(CLUSTER[0], CLUSTER[1], CLUSTER[1])


@implementer(IHandshakeListener)
class App(Protocol):
    """Records what the application sees of its connection."""

    def __init__(self, greeting: bytes = b"") -> None:
        self.greeting = greeting
        self.received = b""
        self.lost: Failure | None = None
        self.handshakes = 0

    def connectionMade(self) -> None:
        if self.greeting:
            self.transport.write(self.greeting)  # before the handshake: kept until it is done

    def handshakeCompleted(self) -> None:
        self.handshakes += 1

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Any = None) -> None:
        self.lost = reason


def pair(server_end: Any, client_end: Any, server_app: App, client_app: App) -> iosim.IOPump:
    server = TLSServerFactory(server_end, Factory.forProtocol(lambda: server_app)).buildProtocol(None)
    client = _TLSClientFactory(client_end, Factory.forProtocol(lambda: client_app)).buildProtocol(None)
    pump = iosim.connect(server, iosim.makeFakeServer(server), client, iosim.makeFakeClient(client), greet=False)
    pump.flush()
    return pump


def noded(allowed: set[str] | None = None) -> ServerContextFactory:
    fps = allowed if allowed is not None else {CLUSTER_CREDS.ca_fingerprint}
    return ServerContextFactory(CLUSTER_CREDS, lambda: fps)


def rpc_client(creds: Credentials = CLUSTER_CREDS) -> Any:
    return PinnedPolicy(creds, {CLUSTER_CREDS.ca_fingerprint}).creatorForNetloc(b"127.0.1.1", 1811)


class TLSProtocolTests(SynchronousTestCase):
    def test_both_ways_with_the_cluster_certificate(self) -> None:
        server_app, client_app = App(), App(b"request")
        pump = pair(noded(), rpc_client(), server_app, client_app)
        self.assertEqual(server_app.received, b"request")
        server_app.transport.write(b"answer")
        pump.flush()
        self.assertEqual(client_app.received, b"answer")
        self.assertEqual((server_app.handshakes, client_app.handshakes), (1, 1))
        self.assertEqual(gcrypto.fingerprint(CLUSTER[1]),
                         __import__("ganeti.rpc.tls", fromlist=["x"]).peer_fingerprint(
                             server_app.transport.getPeerCertificate()))

    def test_a_megabyte_arrives_whole_and_in_order(self) -> None:
        data = bytes(range(256)) * 4096
        server_app, client_app = App(), App()
        pump = pair(noded(), rpc_client(), server_app, client_app)
        client_app.transport.write(data[:1000])
        client_app.transport.writeSequence([data[1000:500000], data[500000:]])
        pump.flush()
        self.assertEqual(server_app.received, data)

    def test_lose_connection_sends_what_was_written_then_closes_both(self) -> None:
        server_app, client_app = App(), App(b"last words")
        pump = pair(noded(), rpc_client(), server_app, client_app)
        client_app.transport.write(b", and more")
        client_app.transport.loseConnection()
        client_app.transport.write(b"ignored after the close")
        pump.flush()
        self.assertEqual(server_app.received, b"last words, and more")
        self.assertIsNotNone(server_app.lost)
        self.assertIsNotNone(client_app.lost)
        self.assertNotIsInstance(server_app.lost.value, TLSError)

    def test_an_unlisted_client_certificate_is_refused_before_any_data(self) -> None:
        """Signed by the cluster but not a candidate's: the server's pin refuses it."""
        creds = Credentials(NODE_CLIENT[0], NODE_CLIENT[1], CLUSTER[1])
        server_app, client_app = App(), App(b"request")
        pair(noded(), rpc_client(creds), server_app, client_app)
        self.assertEqual(server_app.received, b"")
        self.assertIsInstance(server_app.lost.value, TLSError)
        self.assertIn(gcrypto.fingerprint(NODE_CLIENT[1]), str(server_app.lost.value))
        self.assertIn("not a cluster certificate", str(server_app.lost.value))
        self.assertIsNotNone(client_app.lost)
        # listed, the same certificate is accepted
        server_app, client_app = App(), App(b"request")
        pair(noded({CLUSTER_CREDS.ca_fingerprint, gcrypto.fingerprint(NODE_CLIENT[1])}), rpc_client(creds),
             server_app, client_app)
        self.assertEqual(server_app.received, b"request")

    def test_a_client_certificate_of_another_cluster_fails_the_handshake(self) -> None:
        creds = Credentials(OTHER[0], OTHER[1], CLUSTER[1])
        server_app, client_app = App(), App(b"request")
        pair(noded({CLUSTER_CREDS.ca_fingerprint, gcrypto.fingerprint(OTHER[1])}), rpc_client(creds),
             server_app, client_app)
        self.assertEqual(server_app.received, b"")
        self.assertIsInstance(server_app.lost.value, TLSError)
        self.assertIn("handshake failed", str(server_app.lost.value))

    def test_the_client_refuses_a_node_of_another_cluster_and_sends_nothing(self) -> None:
        other_node = ServerContextFactory(Credentials(OTHER[0], OTHER[1], CLUSTER[1]),
                                          lambda: {CLUSTER_CREDS.ca_fingerprint})
        server_app, client_app = App(), App(b"secret request")
        pair(other_node, rpc_client(), server_app, client_app)
        self.assertEqual(server_app.received, b"")
        self.assertIsInstance(client_app.lost.value, TLSError)
        self.assertIn("certificate verify failed", str(client_app.lost.value))
        self.assertEqual(client_app.handshakes, 0)

    def test_garbage_instead_of_tls_is_an_error_not_data(self) -> None:
        server_app = App()
        server = TLSServerFactory(noded(), Factory.forProtocol(lambda: server_app)).buildProtocol(None)
        transport = iosim.makeFakeServer(server)
        server.makeConnection(transport)
        server.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(server_app.received, b"")
        self.assertTrue(transport.disconnecting)
        server.connectionLost(Failure(Exception("closed")))
        self.assertIsInstance(server_app.lost.value, TLSError)

    def test_a_connection_the_wrapped_factory_refuses_is_refused(self) -> None:
        class Refusing(Factory):
            def buildProtocol(self, addr: Any) -> None:
                return None

        self.assertIsNone(TLSServerFactory(noded(), Refusing()).buildProtocol(None))


class CloseAlertTests(SynchronousTestCase):
    def test_a_close_alert_is_answered_with_ours_and_the_connection_closed(self) -> None:
        """A peer that closes cleanly (pyOpenSSL's, curl's) waits for our close alert before it closes the TCP
        connection: the server sends it at once and closes (else the connection stayed until a timeout)."""
        import ssl

        from twisted.internet.testing import StringTransport

        server_app = App()
        server = TLSServerFactory(noded(), Factory.forProtocol(lambda: server_app)).buildProtocol(None)
        transport = StringTransport()
        server.makeConnection(transport)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        client = rpc_client().getContext().wrap_bio(incoming, outgoing, server_side=False)
        for _ in range(10):
            try:
                client.do_handshake()
                break
            except ssl.SSLWantReadError:
                server.dataReceived(outgoing.read())
                incoming.write(transport.value())
                transport.clear()
        client.write(b"hello")
        server.dataReceived(outgoing.read())
        self.assertEqual(server_app.received, b"hello")
        self.assertRaises(ssl.SSLWantReadError, client.unwrap)  # our close alert; the server's not yet
        server.dataReceived(outgoing.read())
        self.assertTrue(transport.disconnecting)
        incoming.write(transport.value())
        client.unwrap()  # the server's close alert arrived: a clean close on both sides
