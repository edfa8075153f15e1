"""Tests for the QMP client against a fake QMP server, over an in-memory pipe.

L{FakeQMPServer} greets like qemu and answers each command from a script;
L{twisted.test.iosim} connects it to a L{QMPProtocol} without sockets.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from twisted.internet.defer import ensureDeferred
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.protocols.basic import LineOnlyReceiver
from twisted.python.failure import Failure
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase

from ganeti.backend.hypervisor import HypervisorError
from ganeti.backend.hypervisor.qmp import (
    QMPDisconnected,
    QMPError,
    QMPProtocol,
    QMPProtocolError,
    connect_qmp,
    encode_command,
)

GREETING = {"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}, "package": ""},
                    "capabilities": ["oob"]}}
STATUS = {"running": True, "singlestep": False, "status": "running"}


def event(name: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"event": name, "timestamp": {"seconds": 1700000000, "microseconds": 500000}}
    if data is not None:
        message["data"] = data
    return message


class FakeQMPServer(LineOnlyReceiver):
    """qemu's side: greet, then answer each command with what C{handle} returns.

    C{handle(message)} returns a list of messages to send (events, replies);
    C{None} means hold the reply (send later with L{send}).  By default
    commands are answered with C{{"return": {}}} and their id.
    """

    delimiter = b"\n"                   # what the client sends; qemu itself sends CRLF

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.handle: Callable[[dict[str, Any]], list[dict[str, Any]] | None] = self.default
        self.greeting: dict[str, Any] | bytes = GREETING

    def default(self, message: dict[str, Any]) -> list[dict[str, Any]] | None:
        return [{"return": {}, "id": message.get("id")}]

    def connectionMade(self) -> None:
        if isinstance(self.greeting, bytes):
            self.transport.write(self.greeting + b"\r\n")
        else:
            self.send(self.greeting)

    def send(self, message: dict[str, Any]) -> None:
        self.transport.write(json.dumps(message).encode() + b"\r\n")

    def lineReceived(self, line: bytes) -> None:
        message = json.loads(line)
        self.received.append(message)
        for reply in self.handle(message) or []:
            self.send(reply)

    def commands(self) -> list[str]:
        return [m["execute"] for m in self.received]


def reply(message: dict[str, Any], value: Any) -> dict[str, Any]:
    return {"return": value, "id": message["id"]}


class QMPTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.events: list[tuple[str, dict[str, Any], float | None]] = []
        self.server = FakeQMPServer()

    def connect(self, flush: bool = True) -> QMPProtocol:
        self.client, self.server, self.pump = iosim.connectedServerAndClient(
            lambda: self.server,
            lambda: QMPProtocol(lambda *args: self.events.append(args)),
            greet=False,
        )
        if flush:
            self.pump.flush()
        return self.client


class NegotiationTests(QMPTestCase):
    def test_greeting_and_capabilities(self) -> None:
        """The client answers the greeting with qmp_capabilities, then is ready."""
        client = self.connect()
        self.assertEqual(self.successResultOf(client.ready), GREETING["QMP"])
        self.assertEqual(self.server.received, [{"execute": "qmp_capabilities", "id": 0}])

    def test_commands_wait_for_negotiation(self) -> None:
        """Commands issued before the greeting go out after qmp_capabilities."""
        client = self.connect(flush=False)
        self.server.handle = lambda m: [reply(m, STATUS if m["execute"] == "query-status" else {})]
        d = client.query_status()
        self.assertNoResult(d)
        self.pump.flush()
        self.assertEqual(self.successResultOf(d), STATUS)
        self.assertEqual(self.server.commands(), ["qmp_capabilities", "query-status"])

    def test_capabilities_refused(self) -> None:
        self.server.handle = lambda m: [{"error": {"class": "CommandNotFound", "desc": "no"}, "id": m["id"]}]
        client = self.connect(flush=False)
        d = client.stop()
        self.pump.flush()
        failure = self.failureResultOf(client.ready, QMPError)
        self.assertEqual(failure.value.error_class, "CommandNotFound")
        self.failureResultOf(d, QMPDisconnected)
        self.assertTrue(self.client.transport.disconnecting or self.client.transport.disconnected)

    def test_bad_greeting(self) -> None:
        """A peer that does not greet like qemu is dropped."""
        self.server.greeting = {"hello": "world"}
        client = self.connect()
        self.failureResultOf(client.ready, QMPProtocolError)
        self.successResultOf(client.closed)

    def test_not_json(self) -> None:
        self.server.greeting = b"SSH-2.0-OpenSSH"
        client = self.connect()
        self.failureResultOf(client.ready, QMPProtocolError)

    def test_lost_before_greeting(self) -> None:
        client = QMPProtocol()
        client.makeConnection(StringTransport())
        client.connectionLost(Failure(ConnectionDone()))
        self.failureResultOf(client.ready, QMPDisconnected)


class CommandTests(QMPTestCase):
    def test_return_value(self) -> None:
        client = self.connect()
        self.server.handle = lambda m: [reply(m, STATUS)]
        d = client.query_status()
        self.pump.flush()
        self.assertEqual(self.successResultOf(d), STATUS)
        self.assertEqual(self.server.received[-1], {"execute": "query-status", "id": 1})

    def test_error_reply(self) -> None:
        client = self.connect()
        self.server.handle = lambda m: [{"error": {"class": "GenericError", "desc": "There's a migration process in progress"}, "id": m["id"]}]
        d = client.migrate("tcp:192.0.2.7:8102")
        self.pump.flush()
        failure = self.failureResultOf(d, QMPError)
        self.assertEqual((failure.value.error_class, failure.value.desc, failure.value.command),
                         ("GenericError", "There's a migration process in progress", "migrate"))
        self.assertIsInstance(failure.value, HypervisorError)
        # the connection stays usable after an error
        self.server.handle = self.server.default
        d = client.cont()
        self.pump.flush()
        self.assertEqual(self.successResultOf(d), {})

    def test_event_between_replies(self) -> None:
        """Events arriving before, between and after replies go to the callback."""
        client = self.connect()
        self.server.handle = lambda m: [event("STOP"), reply(m, {}), event("RESUME")]
        d1 = client.stop()
        self.pump.flush()
        self.server.handle = lambda m: [event("SHUTDOWN", {"guest": True, "reason": "guest-shutdown"}),
                                        reply(m, STATUS)]
        d2 = client.query_status()
        self.pump.flush()
        self.assertEqual(self.successResultOf(d1), {})
        self.assertEqual(self.successResultOf(d2), STATUS)
        self.assertEqual(self.events, [
            ("STOP", {}, 1700000000.5),
            ("RESUME", {}, 1700000000.5),
            ("SHUTDOWN", {"guest": True, "reason": "guest-shutdown"}, 1700000000.5),
        ])

    def test_event_callback_failure_is_logged(self) -> None:
        def broken(*args: Any) -> None:
            raise RuntimeError("boom")
        client = self.connect()
        client.on_event = broken
        self.server.handle = lambda m: [event("POWERDOWN"), reply(m, {})]
        d = client.system_powerdown()
        self.pump.flush()
        self.assertEqual(self.successResultOf(d), {})
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_pipelined_commands_answered_in_order(self) -> None:
        """Several commands in flight: replies are matched to them in order."""
        client = self.connect()
        held: list[dict[str, Any]] = []
        self.server.handle = lambda m: held.append(m)
        d1, d2, d3 = client.query_status(), client.query_migrate(), client.execute("query-name")
        self.pump.flush()
        self.assertEqual([m["execute"] for m in held], ["query-status", "query-migrate", "query-name"])
        self.assertEqual([m["id"] for m in held], [1, 2, 3])
        self.server.send(reply(held[0], STATUS))
        self.server.send({"error": {"class": "GenericError", "desc": "nope"}, "id": held[1]["id"]})
        self.pump.flush()
        self.assertEqual(self.successResultOf(d1), STATUS)
        self.failureResultOf(d2, QMPError)
        self.assertNoResult(d3)
        self.server.send(reply(held[2], {"name": "inst1"}))
        self.pump.flush()
        self.assertEqual(self.successResultOf(d3), {"name": "inst1"})

    def test_reply_without_id_answers_oldest(self) -> None:
        client = self.connect()
        self.server.handle = lambda m: [{"return": m["execute"]}]
        d1, d2 = client.stop(), client.cont()
        self.pump.flush()
        self.assertEqual((self.successResultOf(d1), self.successResultOf(d2)), ("stop", "cont"))

    def test_connection_loss_fails_pending(self) -> None:
        client = self.connect()
        self.server.handle = lambda m: None
        d1, d2 = client.query_status(), client.system_powerdown()
        self.pump.flush()
        self.server.transport.loseConnection()
        self.pump.flush()
        self.failureResultOf(d1, QMPDisconnected)
        self.failureResultOf(d2, QMPDisconnected)
        self.successResultOf(client.closed)
        self.failureResultOf(client.query_status(), QMPDisconnected)

    def test_quit_closed_before_reply(self) -> None:
        """qemu may close the socket instead of answering quit: still success."""
        client = self.connect()
        self.server.handle = lambda m: self.server.transport.loseConnection()
        d = client.quit()
        self.pump.flush()
        self.assertIsNone(self.successResultOf(d))
        self.assertEqual(self.server.commands()[-1], "quit")

    def test_quit_error_still_fails(self) -> None:
        client = self.connect()
        self.server.handle = lambda m: [{"error": {"class": "GenericError", "desc": "x"}, "id": m["id"]}]
        d = client.quit()
        self.pump.flush()
        self.failureResultOf(d, QMPError)


class HelperWireTests(SynchronousTestCase):
    """The exact commands the helpers send."""

    def setUp(self) -> None:
        self.transport = StringTransport()
        self.client = QMPProtocol()
        self.client.makeConnection(self.transport)
        self.client.dataReceived(json.dumps(GREETING).encode() + b"\r\n")
        self.client.dataReceived(b'{"return": {}, "id": 0}\r\n')
        self.successResultOf(self.client.ready)
        self.transport.clear()

    def sent(self) -> list[dict[str, Any]]:
        lines = self.transport.value().split(b"\n")
        self.transport.clear()
        return [json.loads(line) for line in lines if line]

    def test_helpers(self) -> None:
        c = self.client
        c.system_powerdown(); c.system_reset(); c.stop(); c.cont(); c.quit(); c.query_status()
        c.migrate("tcp:192.0.2.7:8102"); c.query_migrate(); c.migrate_cancel()
        c.migrate_incoming("tcp:0.0.0.0:8102")
        self.assertEqual(self.sent(), [
            {"execute": "system_powerdown", "id": 1},
            {"execute": "system_reset", "id": 2},
            {"execute": "stop", "id": 3},
            {"execute": "cont", "id": 4},
            {"execute": "quit", "id": 5},
            {"execute": "query-status", "id": 6},
            {"execute": "migrate", "arguments": {"uri": "tcp:192.0.2.7:8102"}, "id": 7},
            {"execute": "query-migrate", "id": 8},
            {"execute": "migrate_cancel", "id": 9},
            {"execute": "migrate-incoming", "arguments": {"uri": "tcp:0.0.0.0:8102"}, "id": 10},
        ])

    def test_migration_parameters(self) -> None:
        self.client.migrate_set_parameters(max_bandwidth=32 * 1024 * 1024, downtime_limit=30, xbzrle_cache_size=0)
        self.client.migrate_set_capabilities({"xbzrle": True})
        self.assertEqual(self.sent(), [
            {"execute": "migrate-set-parameters",
             "arguments": {"xbzrle-cache-size": 0, "max-bandwidth": 33554432, "downtime-limit": 30}, "id": 1},
            {"execute": "migrate-set-capabilities",
             "arguments": {"capabilities": [{"capability": "xbzrle", "state": True}]}, "id": 2},
        ])

    def test_encode_command(self) -> None:
        self.assertEqual(json.loads(encode_command("stop", None, 4)), {"execute": "stop", "id": 4})

    def test_split_lines(self) -> None:
        """Replies split across reads and glued together still parse."""
        d1, d2 = self.client.stop(), self.client.cont()
        self.client.dataReceived(b'{"return": {}, "i')
        self.client.dataReceived(b'd": 1}\r\n{"event": "STOP"}\r\n{"return": 7, "id": 2}\r\n')
        self.assertEqual((self.successResultOf(d1), self.successResultOf(d2)), ({}, 7))


class ConnectTests(SynchronousTestCase):
    def test_connect_qmp(self) -> None:
        """connect_qmp dials the Unix socket and fires once negotiated."""
        reactor = MemoryReactorClock()
        d = ensureDeferred(connect_qmp(reactor, "/run/ganeti/kvm/inst1.qmp"))
        (address, factory, _timeout, _check_pid), = reactor.unixClients
        self.assertEqual(address, "/run/ganeti/kvm/inst1.qmp")
        wrapper = factory.buildProtocol(None)
        transport = StringTransport()
        wrapper.makeConnection(transport)
        self.assertNoResult(d)
        wrapper.dataReceived(json.dumps(GREETING).encode() + b"\r\n")
        self.assertEqual(json.loads(transport.value()), {"execute": "qmp_capabilities", "id": 0})
        wrapper.dataReceived(b'{"return": {}, "id": 0}\r\n')
        client = self.successResultOf(d)
        self.assertIsInstance(client, QMPProtocol)
