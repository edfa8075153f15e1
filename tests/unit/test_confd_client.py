"""The confd client: fan-out, filters, majority/all/timeout (Clock, no sockets)."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.confd import cli, wire
from ganeti.confd.client import ConfdClient, ConfdTimeout, needed_replies

KEY = b"0123456789abcdef0123456789abcdef01234567\n"
PEERS = ["127.0.1.1", "127.0.1.2", "127.0.1.3"]


class FakePort:
    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.sent: list[tuple[bytes, Any]] = []
        self.stopped = False

    def write(self, data: bytes, addr: Any) -> None:
        self.sent.append((data, addr))

    def stopListening(self) -> None:
        self.stopped = True


class FakeReactor(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.ports: list[FakePort] = []

    def listenUDP(self, port: int, protocol: Any, interface: str = "", maxPacketSize: int = 8192) -> FakePort:
        fake = FakePort(protocol)
        self.ports.append(fake)
        return fake


class ClientTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = FakeReactor()
        self.reactor.advance(1700000000)
        self.client = ConfdClient(self.reactor, KEY, PEERS, port=1814, timeout=10)

    def requests(self) -> dict[str, tuple[dict[str, Any], str]]:
        """peer -> (request, rsalt) of the packets sent."""
        out = {}
        for data, (host, port) in self.reactor.ports[0].sent:
            self.assertEqual(port, 1814)
            req = wire.unpack_request(KEY, data, self.reactor.seconds())
            out[host] = (req, req["rsalt"])
        return out

    def answer(self, peer: str, answer: Any, serial: int, *, status: int = 0, key: bytes = KEY, salt: str | None = None, src: str | None = None) -> None:
        rsalt = self.requests()[peer][1] if salt is None else salt
        msg = wire.encode_reply_msg(wire.reply(status, answer, serial))
        self.reactor.ports[0].protocol.datagramReceived(wire.pack_reply(key, msg, rsalt), (src or peer, 1814))

    def test_fan_out_own_salts(self) -> None:
        self.client.query(wire.REQ_CLUSTER_MASTER)
        sent = self.requests()
        self.assertEqual(sorted(sent), PEERS)
        self.assertEqual(len({salt for _, salt in sent.values()}), 3)
        self.assertEqual({req["type"] for req, _ in sent.values()}, {wire.REQ_CLUSTER_MASTER})

    def test_all_keeps_highest_serial(self) -> None:
        d = self.client.query(wire.REQ_CLUSTER_MASTER, wait="all")
        self.answer("127.0.1.1", "old", 5)
        self.answer("127.0.1.3", "new", 7)
        self.assertNoResult(d)
        self.answer("127.0.1.2", "mid", 6)
        result = self.successResultOf(d)
        self.assertEqual((result.answer, result.serial, result.peer, result.timed_out), ("new", 7, "127.0.1.3", False))
        self.assertEqual(len(result.replies), 3)
        self.assertTrue(result.consistent)

    def test_majority(self) -> None:
        """With 3 peers a majority is 2 (Ganeti's rule)."""
        d = self.client.query(wire.REQ_PING)
        self.answer("127.0.1.2", 2030000, 0)
        self.assertNoResult(d)
        self.answer("127.0.1.1", 2030000, 0)
        self.assertEqual(self.successResultOf(d).answer, 2030000)

    def test_ok_beats_error(self) -> None:
        d = self.client.query(wire.REQ_NODE_ROLE_BYNAME, "x", wait="all")
        self.answer("127.0.1.1", 0, 0, status=1)
        self.answer("127.0.1.2", 4, 3)
        self.answer("127.0.1.3", 1, 0, status=1)
        self.assertEqual(self.successResultOf(d).answer, 4)

    def test_filters(self) -> None:
        """Wrong key, unknown salt, wrong source address, duplicate: all dropped."""
        d = self.client.query(wire.REQ_CLUSTER_MASTER, wait="all")
        self.answer("127.0.1.1", "forged", 99, key=b"other\n")
        self.answer("127.0.1.1", "forged", 99, salt="not-a-salt")
        self.answer("127.0.1.1", "forged", 99, src="127.0.9.9")
        self.answer("127.0.1.1", "good", 1)
        self.answer("127.0.1.1", "dup", 99)
        self.assertEqual(self.client.dropped, 4)
        self.assertNoResult(d)
        self.reactor.advance(10)
        result = self.successResultOf(d)
        self.assertEqual((result.answer, result.timed_out, len(result.replies)), ("good", True, 1))

    def test_timeout_without_answer(self) -> None:
        d = self.client.query(wire.REQ_CLUSTER_MASTER, timeout=2)
        self.reactor.advance(2)
        self.failureResultOf(d, ConfdTimeout)
        self.answer("127.0.1.1", "late", 1)  # ignored, no crash
        self.assertEqual(self.client.dropped, 1)

    def test_inconsistent(self) -> None:
        d = self.client.query(wire.REQ_CLUSTER_MASTER, wait="all")
        self.answer("127.0.1.1", "a", 5)
        self.answer("127.0.1.2", "b", 5)
        self.answer("127.0.1.3", "a", 5)
        self.assertFalse(self.successResultOf(d).consistent)

    def test_timer_cancelled(self) -> None:
        d = self.client.query(wire.REQ_PING, wait="all")
        for peer in PEERS:
            self.answer(peer, 1, 0)
        self.successResultOf(d)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_close(self) -> None:
        self.client.query(wire.REQ_PING)
        self.client.close()
        self.assertTrue(self.reactor.ports[0].stopped)

    def test_needed(self) -> None:
        self.assertEqual([needed_replies(n, "majority") for n in range(1, 9)], [1, 2, 2, 3, 3, 4, 4, 5])
        self.assertEqual(needed_replies(7, "all"), 7)
        self.assertRaises(ValueError, needed_replies, 5, "some")


class CliTests(SynchronousTestCase):
    def test_parse(self) -> None:
        args = cli.build_parser().parse_args(["--peer", "127.0.1.1", "node_role_byname", "node1"])
        self.assertEqual((args.type, cli.parse_query(args.query), args.peer), (1, "node1", ["127.0.1.1"]))
        self.assertEqual(cli.parse_type("3"), 3)
        self.assertEqual(cli.parse_type("cluster-master"), 3)
        self.assertEqual(cli.parse_query('{"3": [0, 1]}'), {"3": [0, 1]})
        self.assertIsNone(cli.parse_query(None))

    def test_bad_type(self) -> None:
        self.assertRaises(SystemExit, cli.build_parser().parse_args, ["nosuch"])
        self.flushLoggedErrors()
