"""Riding out a WConfD restart: reconnecting clients, request ids, owner binding.

A "restart" is a new L{WConfdService} recovered from the same
L{MemoryStorage} (the old one is simply abandoned, as a SIGKILL leaves
it); connections go over L{twisted.test.iosim}, and a connection is cut
right after WConfD applied a call, before its answer got out.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import attrs
from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.test.iosim import IOPump, connectedServerAndClient
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.lockfile import lock_holders
from ganeti.wconfd import commands as c
from ganeti.wconfd.client import WConfdClient, _ClientProtocol, backoff
from ganeti.wconfd.protocol import WConfdProtocol, peer_pid
from ganeti.wconfd.requests import RequestLog
from ganeti.wconfd.service import WConfdService
from ganeti.wconfd.storage import MemoryStorage
from tests.unit.wconfd_helpers import BGL, Wire, job, make_config, make_service

INST1 = "inst1.example.test"
LOCK1 = "instance/" + INST1


class Switchboard:
    """Connects clients to whichever service is current, over iosim pipes."""

    def __init__(self, service: WConfdService) -> None:
        self.service = service
        self.pumps: list[IOPump] = []
        self.refuse = 0
        self.attempts: list[float] = []

    def connect(self, clock: Clock) -> Deferred:
        self.attempts.append(clock.seconds())
        if self.refuse:
            self.refuse -= 1
            return fail(ConnectionRefusedError("no WConfD"))
        client, _server, pump = connectedServerAndClient(
            lambda: WConfdProtocol(self.service), _ClientProtocol, clock=self.service.clock
        )
        self.pumps.append(pump)
        return succeed(client)

    def flush(self) -> None:
        for _ in range(100):
            if not any([pump.pump() for pump in list(self.pumps)]):
                return

    def deliver_and_lose_answers(self) -> None:
        """The requests sent so far reach WConfD; its answers never get out."""
        pump = self.pumps[-1]
        pump.pump()
        pump.serverIO.stream = []

    def cut(self) -> None:
        """The connection breaks (WConfD died)."""
        pump = self.pumps[-1]
        pump.serverIO.stream = []
        pump.serverIO.loseConnection()
        self.flush()


class ReconnectTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.storage = MemoryStorage(make_config().to_json())
        self.service = make_service(storage=self.storage, clock=Clock())
        self.board = Switchboard(self.service)
        self.clock = Clock()
        self.client = self.make_client()
        self.a, self.b = job(1), job(2)

    def make_client(self, reconnect_for: float = 30, draw: float = 0.0) -> WConfdClient:
        return WConfdClient(
            None, self.clock, connector=lambda: self.board.connect(self.clock), reconnect_for=reconnect_for,
            draw=lambda: draw,
        )

    def go(self, work: Any) -> Deferred:
        d = ensureDeferred(work)
        self.board.flush()
        return d

    def ok(self, work: Any) -> Any:
        return self.successResultOf(self.go(work))

    def restart(self, **kwargs: Any) -> WConfdService:
        """WConfD is killed and started again on the same files."""
        kwargs.setdefault("probe", lambda path: False)
        self.service = WConfdService(self.storage, Clock(), **kwargs)
        self.service.startService()
        self.board.service = self.service
        self.board.cut()
        return self.service


class RetryAfterRestartTests(ReconnectTestCase):
    def test_an_update_whose_answer_was_lost_is_not_applied_twice(self) -> None:
        """The retried update gets the recorded answer; the config moves once."""
        self.ok(self.client.try_update_locks(self.a, [(BGL, "shared"), (LOCK1, "exclusive")]))
        inst = self.ok(self.client.read_instance(INST1))
        serial = self.service.config_store.serial_no
        d = ensureDeferred(self.client.update_instance(self.a, attrs.evolve(inst, os="v2"), release=[LOCK1]))
        self.board.deliver_and_lose_answers()
        self.assertNoResult(d)
        service = self.restart()  # the restart folds the journal into config.data
        self.assertEqual(self.storage.journal, [])
        self.board.flush()
        stored = self.successResultOf(d)
        self.assertEqual(stored.os, "v2")
        self.assertEqual(service.config_store.serial_no, serial + 1)
        self.assertEqual(service.config_store.lookup("instance", INST1).serial_no, stored.serial_no)
        self.assertEqual(stored.serial_no, inst.serial_no + 1)
        self.assertEqual(service.locks.owned(self.a), [(BGL, "shared")])
        self.assertEqual(self.client.connections, 2)  # the first, and one after the restart

    def test_added_locks_whose_answer_was_lost_are_not_added_twice(self) -> None:
        name = "instance/new.example.test"
        self.ok(self.client.try_update_locks(self.a, [(BGL, "shared")]))
        d = ensureDeferred(self.client.add_locks(self.a, [name]))
        self.board.deliver_and_lose_answers()
        service = self.restart()
        self.board.flush()
        self.assertEqual(self.successResultOf(d), [])
        self.assertIn((name, "exclusive"), service.locks.owned(self.a))

    def test_a_waiting_lock_request_is_sent_again_and_granted_over_the_new_connection(self) -> None:
        self.service.try_update(self.a, [(BGL, "shared"), (LOCK1, "exclusive")])
        d = self.go(self.client.acquire(self.b, [(BGL, "shared"), (LOCK1, "exclusive")], timeout=60))
        self.assertNoResult(d)
        service = self.restart()
        self.board.flush()
        self.assertNoResult(d)
        self.assertTrue(service.locks.has_pending(self.b))
        service.try_update(self.a, [(LOCK1, "release")])
        self.board.flush()
        self.assertIsNone(self.successResultOf(d))
        self.assertIn((LOCK1, "exclusive"), service.locks.owned(self.b))

    def test_a_request_granted_while_disconnected_is_found_granted_on_return(self) -> None:
        """The blocker died during the restart: WConfD granted the request
        with nobody to tell; the re-sent request finds it satisfied."""
        self.service.try_update(self.a, [(BGL, "shared"), (LOCK1, "exclusive")])
        d = self.go(self.client.acquire(self.b, [(BGL, "shared"), (LOCK1, "exclusive")], timeout=60))
        service = self.restart(probe=lambda path: path == self.a.lockfile)
        self.board.flush()
        self.assertIsNone(self.successResultOf(d))
        self.assertIn((LOCK1, "exclusive"), service.locks.owned(self.b))

    def test_the_lock_timeout_keeps_running_across_a_restart(self) -> None:
        self.service.try_update(self.a, [(BGL, "shared"), (LOCK1, "exclusive")])
        d = self.go(self.client.acquire(self.b, [(BGL, "shared"), (LOCK1, "exclusive")], timeout=5))
        self.clock.advance(3)
        service = self.restart()
        self.board.flush()
        self.clock.advance(2)
        self.board.flush()
        self.assertIn("timed out after 5", str(self.failureResultOf(d, errors.LockError).value))
        self.assertFalse(service.locks.has_pending(self.b))

    def test_a_cancel_whose_answer_was_lost_still_says_it_cancelled(self) -> None:
        self.service.try_update(self.a, [(BGL, "shared"), (LOCK1, "exclusive")])
        self.service.update_waiting(self.b, 0, [[BGL, "shared"], [LOCK1, "exclusive"]])
        d = ensureDeferred(self.client.cancel_pending_request(self.b))
        self.board.deliver_and_lose_answers()
        self.restart()
        self.board.flush()
        self.assertTrue(self.successResultOf(d))

    def test_the_owners_are_registered_on_the_new_connection(self) -> None:
        self.ok(self.client.register_owner(self.a))
        service = self.restart()
        self.board.flush()
        self.assertEqual(len(service._connections.get(self.a, ())), 1)


class BackoffTests(ReconnectTestCase):
    def test_backoff_doubles_from_50_ms_to_1_s_with_jitter(self) -> None:
        self.assertEqual([backoff(n, 1.0) for n in range(7)], [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
        self.assertEqual(backoff(0, 0.0), 0.025)
        self.assertEqual(backoff(40, 0.5), 0.75)

    def test_the_client_gives_up_after_its_limit_with_a_clear_error(self) -> None:
        client = self.make_client(reconnect_for=2, draw=1.0)
        self.board.refuse = 1000
        d = ensureDeferred(client.echo("hello"))
        while self.clock.getDelayedCalls():
            self.clock.advance(min(call.getTime() for call in self.clock.getDelayedCalls()) - self.clock.seconds())
        error = self.failureResultOf(d, errors.ConfigurationError).value
        self.assertIn("WConfD unreachable for 2 seconds", str(error))
        self.assertEqual([round(t, 2) for t in self.board.attempts], [0.0, 0.05, 0.15, 0.35, 0.75, 1.55, 2.0])
        # WConfD is back: the next call connects again
        self.board.refuse = 0
        self.assertEqual(self.successResultOf(self.go(client.echo("again"))), "again")

    def test_a_hook_refusing_the_reconnection_stops_the_client_before_it_connects(self) -> None:
        """A job process whose node saw a newer master must not reach a WConfD again
        (L{ganeti.jobs.process.exit_if_fenced} is that hook)."""
        self.ok(self.client.echo("first"))
        asked: list[int] = []

        def fenced() -> None:
            asked.append(len(self.board.attempts))
            raise RuntimeError("fenced")

        self.client.before_reconnect = fenced
        self.board.cut()
        d = self.go(self.client.echo("later"))
        self.assertIn("fenced", str(self.failureResultOf(d, errors.ConfigurationError).value))
        self.assertTrue(asked)
        self.assertEqual(len(self.board.attempts), 1)  # the first connection only: never another

    def test_calls_made_while_reconnecting_go_out_once_connected(self) -> None:
        self.ok(self.client.echo("first"))
        self.board.refuse = 2
        self.board.cut()
        d = self.go(self.client.echo("later"))
        self.assertNoResult(d)
        self.clock.advance(0.025)
        self.clock.advance(0.05)
        self.board.flush()
        self.assertEqual(self.successResultOf(d), "later")

    def test_a_client_without_reconnect_fails_its_calls_as_before(self) -> None:
        wire = Wire.connect(self.service)
        self.service.try_update(self.a, [(BGL, "shared")])
        d = wire.run(wire.client.acquire(self.b, [(BGL, "exclusive")]))
        wire.server.transport.loseConnection()
        wire.pump.flush()
        self.failureResultOf(d, errors.LockError)


class RequestIdTests(SynchronousTestCase):
    """A retry on the same WConfD (the connection broke, WConfD did not)."""

    def setUp(self) -> None:
        self.service = make_service()
        self.wire = Wire.connect(self.service)
        self.a = job(1)

    def call(self, command: type[c.Command], **kwargs: Any) -> Deferred:
        return self.wire.run(self.wire.client.protocol.callRemote(command, **kwargs))

    def test_a_repeated_request_id_answers_without_applying_again(self) -> None:
        self.successResultOf(self.call(c.TryUpdateLocks, owner=self.a, request=[[BGL, "shared"]]))
        name = "instance/new.example.test"
        first = self.successResultOf(self.call(c.AddLocks, owner=self.a, locks=[name], rid=5))
        again = self.successResultOf(self.call(c.AddLocks, owner=self.a, locks=[name], rid=5))
        self.assertEqual(first, again)
        self.assertEqual(again["blockers"], [])
        # without the id it is a new request, which fails as it always did
        self.failureResultOf(self.call(c.AddLocks, owner=self.a, locks=[name]), errors.LockError)

    def test_a_retry_arriving_while_the_change_is_being_saved_waits_for_its_answer(self) -> None:
        storage = self.service.storage
        held: list[Deferred] = []
        original = storage.append

        def slow_append(record: dict[str, Any]) -> Deferred:
            original(record)
            d: Deferred = Deferred()
            held.append(d)
            return d

        storage.append = slow_append
        self.successResultOf(self.call(c.TryUpdateLocks, owner=self.a, request=[[BGL, "shared"], [LOCK1, "exclusive"]]))
        inst = self.service.config_store.lookup("instance", INST1)
        serial = self.service.config_store.serial_no
        entity = attrs.evolve(inst, os="v9").to_json()
        first = self.call(c.UpdateEntity, owner=self.a, kind="instance", entity=entity, release=None, rid=11)
        second = self.call(c.UpdateEntity, owner=self.a, kind="instance", entity=entity, release=None, rid=11)
        self.assertNoResult(first)
        self.assertNoResult(second)
        self.assertEqual(len(held), 1)
        held[0].callback(None)
        self.wire.pump.flush()
        self.assertEqual(self.successResultOf(first), self.successResultOf(second))
        self.assertEqual(self.service.config_store.serial_no, serial + 1)

    def test_answers_are_journalled_with_their_change(self) -> None:
        self.successResultOf(self.call(c.TryUpdateLocks, owner=self.a, request=[[BGL, "shared"], [LOCK1, "exclusive"]]))
        inst = self.service.config_store.lookup("instance", INST1)
        entity = attrs.evolve(inst, os="v3").to_json()
        answer = self.successResultOf(
            self.call(c.UpdateEntity, owner=self.a, kind="instance", entity=entity, release=None, rid=12)
        )
        (record,) = self.service.storage.journal
        self.assertEqual(record["r"], [self.a.to_wire(), 12, answer])


class RequestLogTests(SynchronousTestCase):
    def test_records_the_last_answers_of_each_owner(self) -> None:
        log = RequestLog(window=2)
        a, b = job(1), job(2)
        log.record(a, 1, {"x": 1})
        log.record(a, 2, {"x": 2})
        log.record(a, 3, {"x": 3})
        log.record(b, 1, {"y": 1})
        self.assertIsNone(log.answer(a, 1))
        self.assertEqual((log.answer(a, 2), log.answer(a, 3), log.answer(b, 1)), ({"x": 2}, {"x": 3}, {"y": 1}))
        self.assertIsNone(log.answer(b, 2))
        log.forget(a)
        self.assertEqual(log.owners(), [b])

    def test_round_trips_and_skips_what_it_cannot_read(self) -> None:
        log = RequestLog()
        log.record(job(1), 7, {"blockers": []})
        again = RequestLog()
        again.load(log.to_data() + [["not an owner", [[1, {}]]], [[2, "/l"], [["x", {}], [3, None]]], 5])
        again.load("garbage")
        self.assertEqual(again.to_data(), log.to_data())
        self.assertRaises(ValueError, log.record, job(1), 8, None)


PROC_LOCKS = b"""\
1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146467 0 EOF
1: -> FLOCK  ADVISORY  WRITE 999 fe:00:2146467 0 EOF
2: POSIX  ADVISORY  READ 77 fe:00:2146467 0 EOF
3: OFDLCK ADVISORY  WRITE -1 fe:00:2146467 0 EOF
4: FLOCK  ADVISORY  WRITE 5000 fe:00:12146467 0 EOF
5: FLOCK  ADVISORY  WRITE 6000 fe:00:146467 0 EOF
"""


class OwnerBindingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.a = job(1)
        self.holders = {self.a.lockfile: 100}
        self.checks: list[tuple[str, int]] = []
        self.service = make_service(holder=self.holds)

    def holds(self, path: str, pid: int) -> bool:
        self.checks.append((path, pid))
        return self.holders.get(path) == pid

    def wire(self, pid: int | None) -> Wire:
        wire = Wire.connect(self.service)
        wire.server.peer_pid = pid
        return wire

    def test_an_owner_is_refused_to_a_process_that_does_not_hold_its_lock_file(self) -> None:
        stranger = self.wire(200)
        d = stranger.run(stranger.client.try_update_locks(self.a, [(BGL, "exclusive")]))
        self.assertIn("(pid 200) does not hold its lock file", str(self.failureResultOf(d, errors.LockError).value))
        self.assertEqual(self.service.locks.owned(self.a), [])
        unknown = self.wire(None)
        d = unknown.run(unknown.client.try_update_locks(self.a, [(BGL, "exclusive")]))
        self.failureResultOf(d, errors.LockError)

    def test_bound_to_its_connection_checked_once_and_rebound_by_its_holder(self) -> None:
        mine, stranger = self.wire(100), self.wire(200)
        for _ in range(3):
            self.successResultOf(mine.run(mine.client.try_update_locks(self.a, [(BGL, "shared")])))
        self.assertEqual(self.checks, [(self.a.lockfile, 100)])
        d = stranger.run(stranger.client.free_locks(self.a))
        self.assertIn("bound to another connection", str(self.failureResultOf(d, errors.LockError).value))
        self.assertEqual(self.service.locks.owned(self.a), [(BGL, "shared")])
        # the holder's new connection (a reconnect) takes the owner over
        again = self.wire(100)
        self.successResultOf(again.run(again.client.register_owner(self.a)))
        self.assertIs(self.service._bindings[self.a], again.server)
        self.assertNotIn(self.a, mine.server._bound)

    def test_lock_holders_come_from_proc_locks(self) -> None:
        self.assertEqual(lock_holders(PROC_LOCKS, 2146467), {4242, 77})
        self.assertEqual(lock_holders(PROC_LOCKS, 146467), {6000})
        self.assertEqual(lock_holders(b"junk\n\n1: FLOCK ADVISORY WRITE x fe:00:5 0 EOF\n", 5), set())

    def test_peer_pid_comes_from_so_peercred_of_unix_sockets(self) -> None:
        class FakeSocket:
            family = socket.AF_UNIX

            def getsockopt(self, level: int, option: int, size: int) -> bytes:
                assert (level, option) == (socket.SOL_SOCKET, socket.SO_PEERCRED)
                return struct.pack("3i", 4242, 0, 0)

        class FakeTransport:
            def getHandle(self) -> FakeSocket:
                return FakeSocket()

        self.assertEqual(peer_pid(FakeTransport()), 4242)
        self.assertIsNone(peer_pid(object()))


