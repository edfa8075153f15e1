"""The heartbeat protocol on both ends, over StringTransport and Clock."""

from __future__ import annotations

import os
import struct
import tempfile
from typing import Any

from twisted.internet.defer import ensureDeferred, succeed
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from ganeti import ssconf
from ganeti.daemons import write_node_identity
from ganeti.heartbeat import wire
from ganeti.heartbeat.client import Backoff, HeartbeatClient, HeartbeatClientProtocol
from ganeti.heartbeat.server import HELLO_TIMEOUT, HeartbeatFactory, LivenessService
from ganeti.heartbeat.store import LivenessStore
from ganeti.paths import Paths


def frame(message: dict[str, Any] | bytes) -> bytes:
    body = message if isinstance(message, bytes) else wire.encode(message)
    return struct.pack("!I", len(body)) + body


def frames(data: bytes) -> list[dict[str, Any]]:
    out = []
    while data:
        (n,) = struct.unpack("!I", data[:4])
        out.append(wire.decode(data[4:4 + n]))
        data = data[4 + n:]
    return out


class AbortableTransport(StringTransport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False

    def abortConnection(self) -> None:
        self.aborted = True
        self.loseConnection()


def make_root(master: str = "node1.test", me: str = "node1.test") -> Paths:
    paths = Paths(tempfile.mkdtemp(prefix="hbt"))
    paths.ensure_dirs()
    ssconf.write_files(paths, {
        "master_node": master, "node_list": ["node1.test", "node2.test", "node3.test"],
        "online_nodes": ["node1.test", "node2.test"],
        "node_primary_ips": ["node1.test 127.0.1.1", "node2.test 127.0.1.2", "node3.test 127.0.1.3"],
    })
    write_node_identity(paths, me, "127.0.1.1")
    return paths


class ServerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.paths = make_root()
        self.store = LivenessStore(os.path.join(self.paths.data_dir, "liveness.log"))
        self.service = LivenessService(self.paths, self.clock, self.store, port=4242)
        self.service.startService()
        self.factory = HeartbeatFactory(self.service, max_connections=2)

    def tearDown(self) -> None:
        self.service.stopService()

    def connect(self) -> tuple[Any, AbortableTransport]:
        proto = self.factory.buildProtocol(None)
        transport = AbortableTransport()
        proto.makeConnection(transport)
        return proto, transport

    def hello(self, name: str = "node2.test", boot: str = "b1") -> bytes:
        return frame(wire.hello(name, "", boot, 3, "0.1"))

    def test_hello_accepted_and_beats_write_nothing(self) -> None:
        """A hello gets 'accepted' and one durable write (at the end of the reactor's turn); 60 s of beats add
        none and keep the node up."""
        proto, transport = self.connect()
        proto.dataReceived(self.hello())
        self.assertEqual(frames(transport.value()), [wire.accepted("node1.test")])
        self.clock.advance(0)
        self.assertEqual(self.store.writes, 1)
        for _ in range(240):
            self.clock.advance(0.25)
            if self.clock.seconds() % 1 == 0:
                proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        snapshot = self.service.snapshot()
        self.assertEqual(snapshot["node2.test"]["liveness"], "up")
        self.assertEqual(snapshot["node3.test"]["liveness"], "offline")
        # node1 never connected: one write for it becoming unreachable
        self.assertEqual(self.store.writes, 2)
        self.assertEqual(snapshot["node1.test"]["liveness"], "unreachable")

    def test_unreachable_nodes_are_published_in_a_file(self) -> None:
        """LuxiD keeps the nodes it counts unreachable in a file of its run directory (what a job reads instead
        of asking it), rewritten when that set changes, and removes it when it stops."""
        from ganeti.heartbeat.store import read_unreachable

        self.assertEqual(read_unreachable(self.paths.run_dir), {})  # written at the start: nothing stale
        proto, _ = self.connect()
        proto.dataReceived(self.hello(name="node2.test"))
        self.clock.advance(0)
        for _ in range(16):  # node1 never connects: unreachable after the timeout
            self.clock.advance(0.25)
            proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        self.assertEqual(read_unreachable(self.paths.run_dir), {"node1.test": None})
        proto.connectionLost(None)
        for _ in range(20):
            self.clock.advance(0.25)
        seen = self.service.snapshot()["node2.test"]["last_seen"]
        self.assertEqual(read_unreachable(self.paths.run_dir), {"node1.test": None, "node2.test": seen})
        proto, _ = self.connect()
        proto.dataReceived(self.hello(name="node2.test"))
        self.clock.advance(0)
        self.assertEqual(read_unreachable(self.paths.run_dir), {"node1.test": None})
        self.service.stopService()
        self.assertIsNone(read_unreachable(self.paths.run_dir))
        self.service.startService()

    def test_transitions_of_one_turn_are_one_fsync(self) -> None:
        """Nodes marked unreachable by one sweep, then heard from again in one turn of the reactor (as after a
        stall): one fsync for each batch, every transition recorded."""
        protos = []
        for name in ("node1.test", "node2.test"):
            proto, _ = self.connect()
            proto.dataReceived(self.hello(name=name))
            protos.append(proto)
        self.clock.advance(0)
        self.assertEqual((self.store.writes, self.store.syncs), (2, 1))
        self.clock.pump([0.25] * 9)  # silent past the timeout: one sweep marks both unreachable
        self.assertEqual([self.service.snapshot()[n]["liveness"] for n in ("node1.test", "node2.test")],
                         ["unreachable"] * 2)
        self.assertEqual((self.store.writes, self.store.syncs), (4, 2))
        for proto in protos:
            proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        self.clock.advance(0)
        self.assertEqual((self.store.writes, self.store.syncs), (6, 3))
        self.service.stopService()
        self.assertEqual({n: r["state"] for n, r in LivenessStore(self.store.path).load().items()},
                         {"node1.test": "up", "node2.test": "up"})
        self.service.startService()

    def test_unwritten_transitions_written_on_stop(self) -> None:
        proto, _ = self.connect()
        proto.dataReceived(self.hello())
        self.assertEqual(self.store.writes, 0)
        self.service.stopService()
        self.assertEqual(self.store.writes, 1)
        self.assertEqual(LivenessStore(self.store.path).load()["node2.test"]["state"], "up")
        self.service.startService()

    def test_silence_then_close(self) -> None:
        """A silent connection makes the node unreachable within timeout + one sweep."""
        proto, transport = self.connect()
        proto.dataReceived(self.hello())
        self.clock.pump([0.25] * 9)
        self.assertEqual(self.service.snapshot()["node2.test"]["liveness"], "unreachable")
        proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        self.assertEqual(self.service.snapshot()["node2.test"]["liveness"], "up")
        proto.connectionLost(None)
        self.clock.pump([0.25] * 5)
        self.assertEqual(self.service.snapshot()["node2.test"]["liveness"], "unreachable")

    def test_first_message_must_be_hello(self) -> None:
        """A beat or garbage before hello closes the connection; the roster is untouched."""
        for data in (frame(wire.BEAT_FRAME_BODY), frame(b"not json"), frame({"t": "bogus"})):
            proto, transport = self.connect()
            proto.dataReceived(data)
            self.assertTrue(transport.disconnecting)
            self.assertEqual(transport.value(), b"")
            proto.connectionLost(None)
        self.assertEqual(self.store.writes, 0)

    def test_unknown_node_refused(self) -> None:
        """A hello naming a node the cluster does not have is refused: closed, nothing recorded."""
        proto, transport = self.connect()
        proto.dataReceived(self.hello(name="intruder.test"))
        self.assertTrue(transport.disconnecting)
        self.assertEqual(transport.value(), b"")
        self.assertNotIn("intruder.test", self.service.snapshot())
        self.assertEqual(self.store.writes, 0)

    def test_hello_timeout(self) -> None:
        """A connection that never says hello is aborted."""
        proto, transport = self.connect()
        self.clock.advance(HELLO_TIMEOUT)
        self.assertTrue(transport.aborted)

    def test_oversized_frame(self) -> None:
        proto, transport = self.connect()
        proto.dataReceived(struct.pack("!I", wire.MAX_FRAME + 1))
        self.assertTrue(transport.disconnecting)

    def test_connection_cap(self) -> None:
        """Beyond max_connections a new connection gets no protocol (closed at once)."""
        first, _ = self.connect()
        self.connect()
        self.assertIsNone(self.factory.buildProtocol(None))
        first.connectionLost(None)
        self.assertIsNotNone(self.factory.buildProtocol(None))

    def test_not_the_master_redirects(self) -> None:
        """On a node that is not the master, a hello is told who the master is and the connection closed."""
        self.service.paths = make_root(master="node3.test", me="node1.test")
        proto, transport = self.connect()
        proto.dataReceived(self.hello())
        self.assertEqual(frames(transport.value()), [wire.redirect("node3.test", "127.0.1.3", 4242)])
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.store.writes, 0)

    def test_reboot_recorded(self) -> None:
        proto, _ = self.connect()
        proto.dataReceived(self.hello(boot="b1"))
        proto.connectionLost(None)
        again, _ = self.connect()
        again.dataReceived(self.hello(boot="b2"))
        self.clock.advance(0)  # the end of the reactor's turn: its transitions written
        records = LivenessStore(self.store.path).load()
        self.assertEqual((records["node2.test"]["event"], records["node2.test"]["boot_id"]), ("rebooted", "b2"))


class ClientTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.lookups: list[bool] = []

        async def lookup(failed: bool) -> Any:
            self.lookups.append(failed)
            return None

        self.client = HeartbeatClient(self.clock, lambda: wire.hello("node2.test", "", "b1", None, "0.1"), lookup,
                                      None, backoff=Backoff(rand=lambda: 0.0))
        self.client.running = True

    def test_hello_then_a_beat_every_second(self) -> None:
        self.client.hello = wire.hello("node2.test", "", "b1", None, "0.1")
        proto = HeartbeatClientProtocol(self.client)
        transport = StringTransport()
        proto.makeConnection(transport)
        self.assertEqual(frames(transport.value()), [self.client.hello])
        transport.clear()
        proto.dataReceived(frame(wire.accepted("node1.test")))
        self.assertIs(self.client.protocol, proto)
        self.clock.pump([0.5] * 6)
        self.assertEqual(frames(transport.value()), [{"t": "beat"}] * 3)
        proto.connectionLost(None)
        self.assertIsNone(self.client.protocol)
        self.clock.pump([1.0] * 3)
        self.assertEqual(len(frames(transport.value())), 3)  # no beat after the loss
        self.assertTrue(self.lookups)  # and it looked the master up again

    def test_lost_since_tells_how_long_the_master_is_lost(self) -> None:
        """Automatic failover reads it: since the start, None while accepted, the time of the loss after."""
        self.clock.advance(5)
        self.client.running = False
        self.client.startService()
        self.assertEqual(self.client.lost_since, 5)
        self.client.hello = wire.hello("node2.test", "", "b1", None, "0.1")
        proto = HeartbeatClientProtocol(self.client)
        proto.makeConnection(StringTransport())
        self.clock.advance(2)
        self.assertEqual(self.client.lost_since, 5)  # connected but not accepted yet: not the master
        proto.dataReceived(frame(wire.accepted("node1.test")))
        self.assertIsNone(self.client.lost_since)
        self.clock.advance(3)
        proto.connectionLost(None)
        self.assertEqual(self.client.lost_since, 10)
        self.client.stopService()

    def test_an_instance_procedure_has_the_node_report_at_once(self) -> None:
        """A migration accepted or finalized here: the reporter looks now (and
        watches the new qemu's event monitor), not at its next poll."""
        looks: list[str] = []
        self.client.reporter = type("Reporter", (), {"check": lambda _self: looks.append("look") or succeed(None)})()
        self.client.instances_changed()
        self.assertEqual(looks, ["look"])
        self.client.running = False  # stopped: nothing to report to
        self.client.instances_changed()
        self.assertEqual(looks, ["look"])

    def test_redirect_goes_to_the_named_master(self) -> None:
        """'The master is X': the next attempt goes to X without a lookup."""
        self.client.hello = wire.hello("node2.test", "", "b1", None, "0.1")
        proto = HeartbeatClientProtocol(self.client)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(frame(wire.redirect("node3.test", "127.0.1.3", 4242)))
        self.assertTrue(transport.disconnecting)
        self.assertEqual(self.client._redirect, ("node3.test", "127.0.1.3", 4242))


class ReportHandledTests(SynchronousTestCase):
    """An instance procedure answers once LuxiD has merged the node's report,
    not once NodeD has written it: a job's next step and the query after the
    job reach LuxiD through other connections, and may come first (a report
    held back by Nagle's algorithm came 40 ms late: an instance just migrated
    showed ERROR_down in the gnt-instance list after gnt-node evacuate)."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.paths = make_root()
        self.service = LivenessService(self.paths, self.clock,
                                       LivenessStore(os.path.join(self.paths.data_dir, "liveness.log")), port=4242)
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.server = HeartbeatFactory(self.service, max_connections=2).buildProtocol(None)
        self.to_node = StringTransport()
        self.server.makeConnection(self.to_node)

        async def lookup(failed: bool) -> Any:
            return None

        self.client = HeartbeatClient(self.clock, lambda: None, lookup, None)
        self.client.running = True
        self.client.hello = wire.hello("node2.test", "", "b1", None, "0.1", beats=True)
        self.looks = 0
        client = self.client

        class Reporter:
            def connected(_self, args: Any) -> None:
                pass

            def check(_self) -> Any:
                self.looks += 1
                client.send(wire.report(False, {"web1": {"state": "running"}}))
                return succeed(None)

        self.client.reporter = Reporter()
        self.node = HeartbeatClientProtocol(self.client)
        self.to_luxid = StringTransport()
        self.node.makeConnection(self.to_luxid)
        self.deliver()  # the hello, LuxiD's 'accepted'
        self.assertIs(self.client.protocol, self.node)

    def to_server(self) -> None:
        data, _ = self.to_luxid.value(), self.to_luxid.clear()
        self.server.dataReceived(data)

    def to_client(self) -> None:
        data, _ = self.to_node.value(), self.to_node.clear()
        self.node.dataReceived(data)

    def deliver(self) -> None:
        self.to_server()
        self.to_client()

    def merged(self) -> dict[str, Any]:
        report = self.service.fresh_report("node2.test") or {}
        return dict(report.get("instances", {}))

    def test_fires_once_luxid_answered_a_beat_sent_after_the_report(self) -> None:
        self.clock.advance(1.0)  # a beat of the connection, not answered yet
        d = self.client.instances_changed()
        self.assertEqual(self.looks, 1)
        self.assertNoResult(d)  # written, but LuxiD has not read it: a query now would not see web1
        self.assertEqual(self.merged(), {})
        self.to_server()
        self.assertEqual(self.merged(), {"web1": {"state": "running"}})
        beat = len(frame(wire.BEAT_FRAME_BODY))
        self.node.dataReceived(self.to_node.value()[:beat])  # the answer to the earlier beat only
        self.assertNoResult(d)
        self.node.dataReceived(self.to_node.value()[beat:])
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual((self.node.beats_sent, self.node.beats_answered), (2, 2))

    def test_a_lost_connection_or_a_luxid_without_beats_does_not_hold_it(self) -> None:
        d = self.client.instances_changed()
        self.assertNoResult(d)
        self.node.connectionLost(None)
        self.assertIsNone(self.successResultOf(d))
        older = HeartbeatClientProtocol(self.client)
        older.makeConnection(StringTransport())
        older.dataReceived(frame(wire.accepted("node1.test")))  # an older LuxiD: beats not answered
        self.assertIsNone(self.successResultOf(self.client.instances_changed()))

    def test_both_ends_send_frames_at_once(self) -> None:
        """TCP_NODELAY on both ends, through the TLS layer: else a report written while the previous
        frame is unacknowledged waits for the peer's delayed ACK."""
        from twisted.internet.protocol import Factory, Protocol
        from twisted.protocols.policies import ProtocolWrapper, WrappingFactory

        from ganeti.asyncutil import no_delay

        class Tcp(StringTransport):
            nodelay = False

            def setTcpNoDelay(self, enabled: bool) -> None:
                self.nodelay = enabled

        node, luxid = Tcp(), Tcp()
        HeartbeatClientProtocol(self.client).makeConnection(node)
        HeartbeatFactory(self.service, max_connections=2).buildProtocol(None).makeConnection(luxid)
        self.assertTrue(node.nodelay and luxid.nodelay)
        tcp = Tcp()
        wrapper = ProtocolWrapper(WrappingFactory(Factory()), Protocol())
        wrapper.makeConnection(tcp)
        self.assertTrue(no_delay(wrapper) and tcp.nodelay)
        self.assertFalse(no_delay(StringTransport()))


class NewMasterTests(SynchronousTestCase):
    """A failover rewrote this node's ssconf: the heartbeat looks for the new master at once."""

    def setUp(self) -> None:
        from twisted.internet.testing import MemoryReactorClock

        self.reactor = MemoryReactorClock()
        self.lookups: list[bool] = []
        self.target = ("node1.test", "127.0.1.1", 4242)

        async def lookup(failed: bool) -> Any:
            self.lookups.append(failed)
            return self.target

        self.client = HeartbeatClient(self.reactor, lambda: wire.hello("node2.test", "", "b1", None, "0.1"), lookup,
                                      None, backoff=Backoff(rand=lambda: 0.0))
        self.client.startService()
        self.addCleanup(self.client.stopService)

    def refuse_last(self) -> None:
        from twisted.internet.error import ConnectionRefusedError
        from twisted.python.failure import Failure

        _host, _port, factory, _timeout, _bind = self.reactor.tcpClients[-1]
        factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))

    def test_a_refused_address_is_tried_directly(self) -> None:
        """An address literal: the connection is attempted at once, its refusal known at once."""
        self.assertEqual([c[:2] for c in self.reactor.tcpClients], [("127.0.1.1", 4242)])
        self.refuse_last()
        self.assertIsNone(self.client._attempt)
        self.assertTrue(self.client._retry.active())

    def test_master_moved_tries_again_at_once_trusting_ssconf(self) -> None:
        for _ in range(6):  # the old master is dead: the backoff grew to its maximum
            self.refuse_last()
            self.reactor.advance(wire.MAX_RECONNECT_DELAY)
        self.assertEqual(self.lookups, [False] + [True] * 6)  # after a failure: the candidates' confd first
        self.refuse_last()
        self.target = ("node3.test", "127.0.1.3", 4242)
        attempts = len(self.reactor.tcpClients)
        self.client.master_moved()
        self.assertEqual(len(self.reactor.tcpClients), attempts + 1)  # at once, not after the backoff
        self.assertEqual(self.reactor.tcpClients[-1][:2], ("127.0.1.3", 4242))
        self.assertEqual(self.lookups[-1], False)  # ssconf is fresh: no wait for confd
        self.refuse_last()  # its LuxiD is not listening yet
        self.reactor.advance(0.1)
        self.assertEqual(len(self.reactor.tcpClients), attempts + 2)  # the backoff started again
        self.assertEqual(self.lookups[-1], False)

    def test_master_moved_changes_nothing_while_connected(self) -> None:
        proto = HeartbeatClientProtocol(self.client)
        proto.makeConnection(StringTransport())
        proto.dataReceived(frame(wire.accepted("node1.test")))
        attempts = len(self.reactor.tcpClients)
        self.client.master_moved()
        self.assertEqual(len(self.reactor.tcpClients), attempts)
        self.assertIs(self.client.protocol, proto)


class LookupTests(SynchronousTestCase):
    def test_ssconf_first_confd_after_a_failure(self) -> None:
        """The ssconf master normally; after a failed attempt, the candidates'
        confd answer (highest serial) wins; without one, ssconf again."""
        from ganeti.heartbeat.client import MasterLookup

        lookup = MasterLookup(make_root(master="node1.test"), Clock(), 4242)
        answers: list[Any] = [("node3.test", "127.0.1.3", 4242), None]

        async def from_confd() -> Any:
            return answers.pop(0)

        lookup.from_confd = from_confd
        self.assertEqual(self.successResultOf(ensureDeferred(lookup(False))), ("node1.test", "127.0.1.1", 4242))
        self.assertEqual(self.successResultOf(ensureDeferred(lookup(True))), ("node3.test", "127.0.1.3", 4242))
        self.assertEqual(self.successResultOf(ensureDeferred(lookup(True))), ("node1.test", "127.0.1.1", 4242))

    def test_confd_query_names_master_and_its_address(self) -> None:
        """from_confd asks REQ_CLUSTER_MASTER for the name and the master node's primary IP."""
        from ganeti.confd import wire as cwire
        from ganeti.confd.client import ConfdResult
        from ganeti.heartbeat.client import MasterLookup

        asked: list[Any] = []

        class FakeConfd:
            def query(self, qtype: int, query: Any, wait: str) -> Any:
                asked.append((qtype, query, wait))
                from twisted.internet.defer import succeed

                return succeed(ConfdResult(cwire.REPL_STATUS_OK, ["node2.test", "127.0.1.2"], 7, "127.0.1.2", (),
                                           2, False, True))

            def close(self) -> None:
                pass

        import ganeti.confd.client as cclient

        self.patch(cclient.ConfdClient, "from_paths", classmethod(lambda cls, *a, **k: FakeConfd()))
        lookup = MasterLookup(make_root(), Clock(), 4242)
        got = self.successResultOf(ensureDeferred(lookup.from_confd()))
        self.assertEqual(got, ("node2.test", "127.0.1.2", 4242))
        self.assertEqual(asked, [(cwire.REQ_CLUSTER_MASTER,
                                  {cwire.REQQ_FIELDS: [cwire.REQFIELD_NAME, cwire.REQFIELD_MNODE_PIP]}, "all")])


class DeadPeerTests(SynchronousTestCase):
    def test_user_timeout_set_under_tls(self) -> None:
        """TCP_USER_TIMEOUT and keepalives go on the TCP socket under the TLS layer."""
        import socket

        from ganeti.heartbeat.client import dead_peer_timeout

        options: list[tuple[int, int, int]] = []

        class Sock:
            def setsockopt(self, level: int, name: int, value: int) -> None:
                options.append((level, name, value))

        class Tcp:
            def getHandle(self) -> Sock:
                return Sock()

        class Tls:
            transport = Tcp()

        self.assertTrue(dead_peer_timeout(Tls(), 5.0))
        self.assertIn((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1), options)
        self.assertIn((socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", 18), 5000), options)
        self.assertFalse(dead_peer_timeout(StringTransport(), 5.0))

    def test_user_timeout_set_under_a_real_tls_layer(self) -> None:
        """Twisted's TLS layer has a getHandle of its own (its OpenSSL connection, no socket):
        the options must still reach the TCP socket below (else a partitioned master is never left)."""
        import socket

        from OpenSSL import SSL
        from twisted.internet.protocol import Factory, Protocol
        from twisted.internet.ssl import CertificateOptions
        from twisted.protocols.tls import TLSMemoryBIOFactory

        from ganeti.heartbeat.client import dead_peer_timeout

        options: list[tuple[int, int, int]] = []

        class Sock(socket.socket):
            def setsockopt(self, level: int, name: int, value: int) -> None:  # type: ignore[override]
                options.append((level, name, value))

        class Tcp(StringTransport):
            def getHandle(self) -> Sock:
                return sock

        sock = Sock()
        self.addCleanup(sock.close)
        tls = TLSMemoryBIOFactory(CertificateOptions(), True,
                                  Factory.forProtocol(Protocol)).buildProtocol(None)
        tls.makeConnection(Tcp())
        self.assertIsInstance(tls.getHandle(), SSL.Connection)
        self.assertTrue(dead_peer_timeout(tls, 5.0))
        self.assertIn((socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", 18), 5000), options)


class PortDemuxTests(ServerTests):
    """The heartbeat port serves LUXI to the other nodes too (issue 23): the first byte decides."""

    def setUp(self) -> None:
        super().setUp()
        from ganeti.luxi.server import LuxiServerFactory, MethodHandler

        class Tags(MethodHandler):
            def luxi_QueryTags(self, kind: str, name: str) -> list[str]:
                return ["t1"]

        self.factory = HeartbeatFactory(self.service, max_connections=2, luxi=LuxiServerFactory(Tags()))

    def test_luxi_request_is_answered_and_never_times_out_as_a_hello(self) -> None:
        from ganeti.luxi import wire as luxi_wire

        proto, transport = self.connect()
        proto.dataReceived(luxi_wire.encode_request("QueryTags", ["cluster", ""], luxi_wire.LUXI_VERSION))
        self.assertEqual(luxi_wire.decode_result(transport.value().rstrip(luxi_wire.ETX), luxi_wire.LUXI_VERSION),
                         ["t1"])
        self.clock.advance(HELLO_TIMEOUT + 1)
        self.assertFalse(transport.aborted)
        self.assertEqual(self.service.connections, 1)
        proto.connectionLost(None)
        self.assertEqual(self.service.connections, 0)

    def test_heartbeat_still_works(self) -> None:
        proto, transport = self.connect()
        proto.dataReceived(self.hello())
        self.assertEqual(frames(transport.value()), [wire.accepted("node1.test")])
