"""Liveness of the master itself: beats answered, silence detected, stalls re-checked.

Pure decisions directly; both heartbeat ends over StringTransport and Clock.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.ha.election import NodeView
from ganeti.ha.liveness import StallGuard, confirms, master_silent, stall_threshold
from ganeti.heartbeat import wire
from ganeti.heartbeat.client import Backoff, HeartbeatClient, HeartbeatClientProtocol
from ganeti.heartbeat.server import HeartbeatFactory, LivenessService
from ganeti.heartbeat.store import LivenessStore
from tests.unit.test_heartbeat_protocol import AbortableTransport, frame, frames, make_root


class MasterSilentTests(SynchronousTestCase):
    def test_answered_beats_keep_the_master(self) -> None:
        self.assertFalse(master_silent(12.0, 0.0, 10.5, True, True, 2.0))
        self.assertFalse(master_silent(12.5, 0.0, 10.5, True, True, 2.0))  # exactly the timeout: not yet

    def test_silence_for_the_timeout_loses_it_whatever_tcp_says(self) -> None:
        self.assertTrue(master_silent(12.6, 0.0, 10.5, True, True, 2.0))

    def test_an_older_luxid_that_does_not_answer_is_left_to_tcp(self) -> None:
        """No beats negotiated: silence is what an older LuxiD always shows, never a loss."""
        self.assertFalse(master_silent(1000.0, 0.0, 1.0, True, False, 2.0))

    def test_a_connection_never_accepted_is_left_after_the_timeout_and_an_allowance(self) -> None:
        """A stopped master's kernel completes the TCP handshake; nothing answers the hello."""
        self.assertFalse(master_silent(3.9, 0.0, None, False, False, 2.0))
        self.assertTrue(master_silent(4.1, 0.0, None, False, False, 2.0))


class StallGuardTests(SynchronousTestCase):
    def test_a_running_loop_is_no_stall(self) -> None:
        clock = Clock()
        guard = StallGuard(clock.seconds())
        for _ in range(100):
            clock.advance(0.25)
            self.assertFalse(guard.observe(clock.seconds(), 1.0))
        self.assertIsNone(guard.suspect)
        self.assertEqual(guard.longest, 0.25)

    def test_a_gap_over_the_threshold_is_suspect_until_confirmed(self) -> None:
        clock = Clock()
        guard = StallGuard(clock.seconds())
        clock.advance(30)  # SIGSTOP ... SIGCONT
        self.assertTrue(guard.observe(clock.seconds(), 2.5))
        self.assertIn("did not run for 30.0 s", guard.suspect or "")
        clock.advance(0.1)
        self.assertFalse(guard.observe(clock.seconds(), 2.5))
        self.assertIsNotNone(guard.suspect)  # still suspect: only a confirmation clears it
        guard.confirmed()
        self.assertIsNone(guard.suspect)

    def test_the_first_operation_after_the_stall_sees_it(self) -> None:
        """The gap is measured at every operation, so a request handled before the tick sees it too."""
        guard = StallGuard(100.0)
        self.assertTrue(guard.observe(140.0, 2.5))

    def test_threshold_is_a_fraction_of_the_failover_timeout_with_a_floor(self) -> None:
        self.assertEqual(stall_threshold(10.0), 2.5)
        self.assertEqual(stall_threshold(2.0), 1.0)


def view(name: str, master: str = "node1", epoch: int = 0, lost_for: float | None = None) -> NodeView:
    return NodeView(name, lost_for, master, True, epoch, 5, 5)


class ConfirmsTests(SynchronousTestCase):
    def test_a_majority_naming_this_master_at_its_epoch(self) -> None:
        ok, why = confirms("node1", 3, [view("node1", epoch=3), view("node2", epoch=3)], 3, True, 10.0)
        self.assertTrue(ok, why)

    def test_a_higher_epoch_is_a_newer_master_or_a_vote_for_one(self) -> None:
        ok, why = confirms("node1", 3, [view("node1", epoch=3), view("node2", epoch=4), view("node3", epoch=4)], 3,
                           True, 10.0)
        self.assertFalse(ok)
        self.assertIn("node2 has seen master epoch 4", why)

    def test_another_master_named(self) -> None:
        ok, why = confirms("node1", 0, [view("node1"), view("node2", master="node2"), view("node3", master="node2")],
                           3, True, 10.0)
        self.assertFalse(ok)
        self.assertIn("node3 names node2 the master", why)

    def test_nodes_about_to_vote_do_not_confirm(self) -> None:
        """Lost for half the failover timeout: such a node may vote before it hears this master again."""
        views = [view("node1"), view("node2", lost_for=6.0), view("node3", lost_for=4.0)]
        self.assertTrue(confirms("node1", 0, views, 3, True, 10.0)[0])
        views[2] = view("node3", lost_for=5.0)
        self.assertFalse(confirms("node1", 0, views, 3, True, 10.0)[0])
        self.assertTrue(confirms("node1", 0, views, 3, False, 10.0)[0])  # nobody votes with it off

    def test_silence_is_no_confirmation(self) -> None:
        self.assertFalse(confirms("node1", 0, [view("node1")], 3, True, 10.0)[0])


class AnsweredBeatsTests(SynchronousTestCase):
    """Both ends: a new node and a new LuxiD negotiate answered beats; either end old, none."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.paths = make_root()
        self.store = LivenessStore(os.path.join(self.paths.data_dir, "liveness.log"))
        self.service = LivenessService(self.paths, self.clock, self.store, port=4242)
        self.service.startService()
        self.addCleanup(self.service.stopService)
        self.factory = HeartbeatFactory(self.service, max_connections=4)

    def server(self) -> tuple[Any, AbortableTransport]:
        proto = self.factory.buildProtocol(None)
        transport = AbortableTransport()
        proto.makeConnection(transport)
        return proto, transport

    def test_beats_answered_when_asked(self) -> None:
        proto, transport = self.server()
        proto.dataReceived(frame(wire.hello("node2.test", "", "b1", 3, "0.1", beats=True)))
        self.assertEqual(frames(transport.value()), [wire.accepted("node1.test", beats=True)])
        transport.clear()
        for _ in range(5):
            proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        self.assertEqual(frames(transport.value()), [{"t": "beat"}] * 5)
        self.clock.advance(0)
        self.assertEqual(self.store.writes, 1)  # the hello's transition; beats write nothing

    def test_an_older_node_gets_no_answers(self) -> None:
        """An older node takes an unknown message for a broken connection: it is sent none."""
        proto, transport = self.server()
        proto.dataReceived(frame(wire.hello("node2.test", "", "b1", 3, "0.1")))
        self.assertNotIn("beats", frames(transport.value())[0])
        transport.clear()
        proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        self.assertEqual(transport.value(), b"")

    def test_bad_beats_field_refused(self) -> None:
        message = wire.hello("node2.test", "", "b1", 3, "0.1")
        message["beats"] = "yes"
        with self.assertRaises(wire.BadMessage):
            wire.decode(wire.encode(message))

    def client(self, lookup_calls: list[bool]) -> HeartbeatClient:
        async def lookup(failed: bool) -> Any:
            lookup_calls.append(failed)
            return None

        client = HeartbeatClient(self.clock, lambda: wire.hello("node2.test", "", "b1", None, "0.1", beats=True),
                                 lookup, None, backoff=Backoff(rand=lambda: 0.0), silence=2.0)
        client.hello = wire.hello("node2.test", "", "b1", None, "0.1", beats=True)
        client.running = True
        return client

    def test_a_silent_master_is_left_and_lost_since_it_was_last_heard(self) -> None:
        """A paused LuxiD: TCP stays up, no answer comes; lost from the last answer, not from the detection."""
        lookups: list[bool] = []
        client = self.client(lookups)
        proto = HeartbeatClientProtocol(client)
        transport = AbortableTransport()
        proto.makeConnection(transport)
        proto.dataReceived(frame(wire.accepted("node1.test", beats=True)))
        for _ in range(3):  # answered beats keep it
            self.clock.advance(1.0)
            proto.dataReceived(frame(wire.BEAT_FRAME_BODY))
        self.assertIs(client.protocol, proto)
        heard = self.clock.seconds()
        self.clock.advance(1.0)
        self.clock.advance(1.0)
        self.assertFalse(transport.aborted)  # 2 s: not yet over the timeout
        self.clock.advance(1.0)
        self.assertTrue(transport.aborted)
        proto.connectionLost(None)
        self.assertIsNone(client.protocol)
        self.assertEqual(client.lost_since, heard)
        self.clock.advance(0.1)
        self.assertEqual(lookups, [True])  # looked up again, the candidates' confd too

    def test_an_older_luxid_is_never_left_for_silence(self) -> None:
        client = self.client([])
        proto = HeartbeatClientProtocol(client)
        transport = AbortableTransport()
        proto.makeConnection(transport)
        proto.dataReceived(frame(wire.accepted("node1.test")))  # no beats: an older LuxiD
        self.clock.pump([1.0] * 60)
        self.assertFalse(transport.aborted)
        self.assertIs(client.protocol, proto)

    def test_a_hello_never_answered_is_left(self) -> None:
        """A stopped master's kernel accepted the connection; nobody answers the hello."""
        client = self.client([])
        client.lost_since = 990.0
        proto = HeartbeatClientProtocol(client)
        transport = AbortableTransport()
        proto.makeConnection(transport)
        self.clock.pump([1.0] * 5)
        self.assertTrue(transport.aborted)
        proto.connectionLost(None)
        self.assertEqual(client.lost_since, 990.0)  # never accepted: the loss still counts from before

    def test_master_moved_leaves_a_connection_not_accepted(self) -> None:
        client = self.client([])
        proto = HeartbeatClientProtocol(client)
        transport = AbortableTransport()
        proto.makeConnection(transport)
        client.pending = proto
        client.master_moved()
        self.assertTrue(transport.aborted)


class MasterGuardTests(SynchronousTestCase):
    """The shell around L{StallGuard}: requests wait for a confirmation, or are refused."""

    def setUp(self) -> None:
        from ganeti.ha import params as ha_params
        from ganeti.ha.guard import MasterGuard

        self.clock = Clock()
        self.paths = make_root()
        ha_params.write(self.paths, ha_params.HaParams().changed(auto_failover=True, failover_timeout=10.0))
        self.answers: list[Any] = []
        self.asks: list[Any] = []

        def ask() -> Any:
            from twisted.internet.defer import Deferred

            d: Deferred[Any] = Deferred()
            self.asks.append(d)
            return d

        self.guard = MasterGuard(self.paths, self.clock, "ganeti-luxid", port=1811, clock=self.clock.seconds,
                                 ask=ask)
        self.guard.startService()
        self.addCleanup(self.guard.stopService)

    def test_a_running_master_serves_at_once_and_asks_nobody(self) -> None:
        for _ in range(40):
            self.clock.advance(0.25)
            self.assertIsNone(self.guard.ready(ValueError))
        self.assertEqual(self.asks, [])

    def test_after_a_pause_requests_wait_for_the_majority(self) -> None:
        from ganeti.ha.guard import GuardedHandler

        class Inner:
            def handle(self, method: str, args: list[Any]) -> Any:
                return [method, args]

        handler = GuardedHandler(Inner(), self.guard, ValueError)
        self.clock.advance(30)  # SIGSTOP for 30 s, then SIGCONT: the request is the first thing it does
        answer = handler.handle("SubmitManyJobs", [[]])
        self.assertNoResult(answer)
        self.assertEqual(len(self.asks), 1)
        self.asks[0].callback((True, "3 of 3 nodes confirm"))
        self.assertEqual(self.successResultOf(answer), ["SubmitManyJobs", [[]]])
        self.assertIsNone(self.guard.stall.suspect)
        self.assertIsNone(handler.handle("QueryJobs", []) and None)

    def test_refused_when_replaced_and_asked_again_later(self) -> None:
        from ganeti.ha.guard import RETRY_INTERVAL

        confirmed: list[bool] = []
        self.guard.on_confirmed.append(lambda: confirmed.append(True))
        self.clock.advance(30)
        waiting = self.guard.ready(ValueError)
        self.asks[0].callback((False, "node2 has seen master epoch 1"))
        failure = self.failureResultOf(waiting, ValueError)
        self.assertIn("not confirmed as master", str(failure.value))
        self.assertIsNotNone(self.guard.blocked())  # the scheduler starts nothing either
        self.assertEqual(len(self.asks), 1)  # not before the retry interval
        self.clock.advance(RETRY_INTERVAL)
        self.assertIsNotNone(self.guard.blocked())
        self.assertEqual(len(self.asks), 2)
        self.asks[1].callback((True, "confirmed"))
        self.assertEqual(confirmed, [True])
        self.assertIsNone(self.guard.blocked())

    def test_a_failing_ask_is_no_confirmation(self) -> None:
        self.clock.advance(30)
        waiting = self.guard.ready(ValueError)
        self.asks[0].errback(RuntimeError("no route"))
        self.failureResultOf(waiting, ValueError)

    def test_nothing_to_confirm_with_automatic_failover_off(self) -> None:
        from ganeti.ha import params as ha_params

        ha_params.write(self.paths, ha_params.read(self.paths).changed(auto_failover=False))
        self.clock.advance(30)
        self.assertIsNone(self.guard.ready(ValueError))
        self.assertEqual(self.asks, [])
