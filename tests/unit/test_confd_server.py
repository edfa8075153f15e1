"""The confd protocol and service: answers, bad input, reload atomicity (Clock, no sockets)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import attrs
from twisted.application.service import IService
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import serializer
from ganeti.confd import tap, wire
from ganeti.confd.answers import Index
from ganeti.confd.protocol import ConfdServerProtocol
from ganeti.confd.service import ConfdService
from ganeti.paths import Paths
from tests.unit.test_confd_answers import sample_config

KEY = b"0123456789abcdef0123456789abcdef01234567\n"
NOW = 1700000000.0
PEER = ("127.0.0.1", 40000)


class FakeDatagramTransport:
    def __init__(self) -> None:
        self.written: list[tuple[bytes, Any]] = []

    def write(self, data: bytes, addr: Any = None) -> None:
        self.written.append((data, addr))


class State:
    def __init__(self, index: Index | None) -> None:
        self.key = KEY
        self.index = index


def ask(qtype: int, query: Any = None, rsalt: str = "r1", now: float = NOW, key: bytes = KEY) -> bytes:
    return wire.pack_request(key, wire.request(qtype, query, rsalt), now)


class ProtocolTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.state = State(Index.build(sample_config().to_json()))
        self.proto = ConfdServerProtocol(self.state, self.clock)
        self.transport = FakeDatagramTransport()
        self.proto.makeConnection(self.transport)

    def replies(self) -> list[tuple[dict[str, Any], str, Any]]:
        out = []
        for data, addr in self.transport.written:
            rep, salt = wire.unpack_reply(KEY, data)
            out.append((rep, salt, addr))
        return out

    def test_answer(self) -> None:
        """A signed request gets a reply signed with its rsalt, sent back to the sender."""
        self.proto.datagramReceived(ask(wire.REQ_CLUSTER_MASTER, rsalt="abc"), PEER)
        self.assertEqual(self.replies(), [(wire.reply(0, "node1.example.test", 42), "abc", PEER)])

    def test_every_type(self) -> None:
        for qtype in range(12):
            self.proto.datagramReceived(ask(qtype, rsalt="s%d" % qtype), PEER)
        got = self.replies()
        self.assertEqual([salt for _, salt, _ in got], ["s%d" % n for n in range(12)])

    def test_unknown_type_not_implemented(self) -> None:
        self.proto.datagramReceived(ask(99), PEER)
        self.assertEqual(self.replies()[0][0], wire.reply(wire.REPL_STATUS_NOTIMPLEMENTED, None, 0))

    def test_bad_input_dropped(self) -> None:
        """Unsigned, wrongly signed, stale, future, oversized, non-JSON: no reply, no crash."""
        bad = [
            b"",
            b"plj0",
            b"plj0not json",
            b"xxxx" + ask(0)[4:],
            b'plj0{"msg": "{}", "salt": "1700000000"}',
            ask(0, key=b"wrong key\n"),
            ask(0, now=NOW - 301),
            ask(0, now=NOW + 301),
            ask(1, "x" * 5000),
            wire.sign_compact(KEY, "not json", "1700000000"),
            wire.sign_compact(KEY, '{"type": "ping", "rsalt": "x"}', "1700000000"),
        ]
        for packet in bad:
            self.proto.datagramReceived(packet, PEER)
        self.assertEqual(self.transport.written, [])
        self.assertEqual(self.proto.dropped, len(bad))
        self.proto.datagramReceived(ask(0), PEER)
        self.assertEqual(len(self.transport.written), 1)

    def test_window_follows_clock(self) -> None:
        packet = ask(0)
        self.clock.advance(300)
        self.proto.datagramReceived(packet, PEER)
        self.clock.advance(1)
        self.proto.datagramReceived(packet, PEER)
        self.assertEqual(len(self.transport.written), 1)

    def test_no_config(self) -> None:
        self.state.index = None
        self.proto.datagramReceived(ask(wire.REQ_CLUSTER_MASTER), PEER)
        rep = self.replies()[0][0]
        self.assertEqual((rep["status"], rep["serial"]), (wire.REPL_STATUS_ERROR, 0))

    def test_write_error_survives(self) -> None:
        def fail(data: bytes, addr: Any = None) -> None:
            raise OSError("message too long")

        self.transport.write = fail
        self.proto.datagramReceived(ask(0), PEER)
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)


class ServiceTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="confdu"))
        self.addCleanup(__import__("shutil").rmtree, self.paths.root, True)
        self.paths.ensure_dirs()
        with open(self.paths.hmac_key, "wb") as handle:
            handle.write(KEY)
        self.config = sample_config()
        self.write(self.config)
        self.clock = Clock()
        self.events: list[Any] = []
        self.service = ConfdService(self.paths, self.clock, check_interval=5, watch=self.fake_watch)

    def fake_watch(self, directory: str, callback: Any) -> Any:
        self.events.append((directory, callback))
        test = self

        class Watcher:
            def stop(self) -> None:
                test.events.append("closed")

        return Watcher()

    def write(self, config: Any, data: bytes | None = None) -> None:
        serializer.write_file(self.paths.config_data, data if data is not None else config.to_json(), durable=False)

    def bumped(self, serial: int) -> Any:
        return attrs.evolve(self.config, serial_no=serial, cluster=attrs.evolve(self.config.cluster, serial_no=serial))

    def test_start_loads(self) -> None:
        self.service.startService()
        self.assertEqual(self.service.key, KEY)
        assert self.service.index is not None
        self.assertEqual(self.service.index.serial, 99)
        self.assertEqual(self.events[0][0], self.paths.data_dir)
        self.service.stopService()
        self.assertEqual(self.events[-1], "closed")

    def test_inotify_reload(self) -> None:
        self.service.startService()
        self.write(self.bumped(100))
        self.events[0][1]("config.data")
        self.assertEqual(self.service.index.serial, 100)

    def test_timer_reload(self) -> None:
        """Without an event, the timer picks up the change within one interval."""
        self.service.startService()
        self.write(self.bumped(101))
        self.clock.advance(4.9)
        self.assertEqual(self.service.index.serial, 99)
        self.clock.advance(0.1)
        self.assertEqual(self.service.index.serial, 101)

    def test_a_slow_reload_spaces_the_next(self) -> None:
        """A reload that took 0.5 s (10,000 instances): changes coming meanwhile are loaded 1.5 s after it,
        the newest of them, once; a fast one is followed at once."""
        from ganeti.confd import service as service_module

        self.service.startService()
        costs = iter([0.0, 0.5] + [1.0] * 10)  # the reload after the first change takes 0.5 s, the others none
        self.patch(service_module, "_elapsed", lambda: next(costs))
        self.write(self.bumped(300))
        self.events[0][1]("config.data")
        self.assertEqual(self.service.index.serial, 300)
        for serial in (301, 302):
            self.write(self.bumped(serial))
            self.events[0][1]("config.data")
            self.clock.advance(0.5)
        self.assertEqual((self.service.index.serial, self.service.reloads), (300, 2))
        self.clock.advance(0.5)  # 1.5 s after the slow reload
        self.assertEqual((self.service.index.serial, self.service.reloads), (302, 3))
        self.write(self.bumped(303))  # that reload was fast: the next comes at once
        self.events[0][1]("config.data")
        self.assertEqual(self.service.index.serial, 303)
        self.service.stopService()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_corrupt_keeps_old(self) -> None:
        """A half-written or corrupt file is ignored; the old index keeps serving."""
        self.service.startService()
        old = self.service.index
        full = self.bumped(102).to_json()
        for data in (full[: len(full) // 2], b"", b"garbage", b"[]"):
            self.write(None, data)
            self.clock.advance(5)
            self.assertIs(self.service.index, old)
        self.write(self.bumped(102))
        self.clock.advance(5)
        self.assertEqual(self.service.index.serial, 102)

    def test_swap_is_atomic(self) -> None:
        """A query answered during a reload uses one index: old or new, never a mix."""
        self.service.startService()
        clock = Clock()
        clock.advance(NOW)
        proto = ConfdServerProtocol(self.service, clock)
        transport = FakeDatagramTransport()
        proto.makeConnection(transport)
        for serial in range(200, 210):
            self.write(self.bumped(serial))
            self.service.check()
            proto.datagramReceived(ask(wire.REQ_CLUSTER_MASTER, {"3": [0]}, rsalt="a"), PEER)
            proto.datagramReceived(ask(wire.REQ_CONFIG_QUERY, "/serial_no", rsalt="b"), PEER)
            (rep1, _), (rep2, _) = (wire.unpack_reply(KEY, d) for d, _ in transport.written[-2:])
            self.assertEqual((rep1["serial"], rep2["answer"]), (serial, serial))

    def test_missing_config_then_created(self) -> None:
        os.unlink(self.paths.config_data)
        self.service.startService()
        self.assertIsNone(self.service.index)
        self.write(self.config)
        self.clock.advance(5)
        self.assertIsNotNone(self.service.index)

    def test_key_reload(self) -> None:
        self.service.startService()
        with open(self.paths.hmac_key, "wb") as handle:
            handle.write(b"f" * 40 + b"\n")
        self.events[0][1]("hmac.key")
        self.assertEqual(self.service.key, b"f" * 40 + b"\n")


    def test_accepted_keys_during_a_renewal(self) -> None:
        """hmac.key.accept (renew-crypto): a request signed with another accepted key is answered with that
        key; once the file is emptied, it is dropped."""
        from ganeti.confd.service import accept_file

        other = b"e" * 40 + b"\n"
        self.service.startService()
        with open(accept_file(self.paths), "wb") as handle:
            handle.write(other)
        self.events[0][1]("hmac.key.accept")
        self.assertEqual(self.service.accepted_keys, (other,))
        clock = Clock()
        clock.advance(NOW)
        proto = ConfdServerProtocol(self.service, clock)
        transport = FakeDatagramTransport()
        proto.makeConnection(transport)
        proto.datagramReceived(ask(wire.REQ_PING, key=other), PEER)
        (data, _addr), = transport.written
        self.assertEqual(wire.unpack_reply(other, data)[0]["status"], 0)
        proto.datagramReceived(ask(wire.REQ_PING), PEER)
        self.assertEqual(len(transport.written), 2, "the current key still works")
        with open(accept_file(self.paths), "wb") as handle:
            handle.write(b"")
        self.events[0][1]("hmac.key.accept")
        proto.datagramReceived(ask(wire.REQ_PING, key=other), PEER)
        self.assertEqual(len(transport.written), 2, "the retired key is dropped")
        self.assertEqual(proto.dropped, 1)


class UDPMemoryReactor(MemoryReactorClock):
    """MemoryReactorClock has no listenUDP: record the calls."""

    def __init__(self) -> None:
        super().__init__()
        self.udpServers: list[tuple[Any, ...]] = []

    def listenUDP(self, port: int, protocol: Any, interface: str = "", maxPacketSize: int = 8192) -> Any:
        self.udpServers.append((port, protocol, interface, maxPacketSize))

        class Port:
            def stopListening(self) -> None:
                pass

        return Port()


class TapTests(SynchronousTestCase):
    def test_make_service(self) -> None:
        paths = Paths(tempfile.mkdtemp(prefix="confdt"))
        self.addCleanup(__import__("shutil").rmtree, paths.root, True)
        paths.ensure_dirs()
        with open(paths.hmac_key, "wb") as handle:
            handle.write(KEY)
        options = tap.Options()
        options.parseOptions(["--root", paths.root, "--bind", "127.0.1.1", "--port", "0", "--no-inotify"])
        reactor = UDPMemoryReactor()
        service = tap.makeService(options, reactor)
        IService(service).startService()
        self.assertEqual(len(reactor.udpServers), 1)
        self.assertEqual(reactor.udpServers[0][0], 0)
        self.assertEqual(reactor.udpServers[0][2], "127.0.1.1")
        self.assertIsInstance(reactor.udpServers[0][1], ConfdServerProtocol)
        IService(service).stopService()

    def test_no_key(self) -> None:
        paths = Paths(tempfile.mkdtemp(prefix="confdt"))
        self.addCleanup(__import__("shutil").rmtree, paths.root, True)
        options = tap.Options()
        options.parseOptions(["--root", paths.root])
        self.assertRaises(SystemExit, tap.makeService, options, MemoryReactorClock())
