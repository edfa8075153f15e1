"""The liveness roster state machine, the durable store, and the backoff."""

from __future__ import annotations

import os
import tempfile

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.heartbeat import roster as r
from ganeti.heartbeat.client import Backoff
from ganeti.heartbeat.store import LivenessStore
from ganeti.rpc.contract import Runner


class RosterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.roster = r.Roster(self.clock.seconds(), timeout=2.0, grace=1.0)
        self.roster.set_nodes(["a", "b"], [], self.clock.seconds())
        self.conn = object()

    def advance(self, seconds: float, step: float = 0.25) -> list[r.Transition]:
        out: list[r.Transition] = []
        end = self.clock.seconds() + seconds
        while self.clock.seconds() < end - 1e-9:
            self.clock.advance(step)
            out += self.roster.sweep(self.clock.seconds())
        return out

    def state(self, name: str) -> str:
        return self.roster.snapshot()[name]["liveness"]

    def test_hello_makes_a_node_up_once(self) -> None:
        """A hello is one 'up' transition; beats after it produce none."""
        got = self.roster.hello("a", self.conn, "boot-1", self.clock.seconds())
        self.assertEqual([(t.node, t.event, t.state) for t in got], [("a", "up", "up")])
        transitions = []
        for _ in range(60):
            self.clock.advance(1)
            transitions += self.roster.seen("a", self.conn, self.clock.seconds())
            transitions += [t for t in self.roster.sweep(self.clock.seconds()) if t.node == "a"]
        self.assertEqual(transitions, [])
        self.assertEqual(self.state("a"), "up")

    def test_silent_node_unreachable_after_timeout(self) -> None:
        """No byte for 2 s: unreachable (at the first sweep after 2 s); a byte again: up."""
        self.roster.hello("a", self.conn, "boot-1", 0)
        self.assertEqual([t for t in self.advance(1.75) if t.node == "a"], [])
        got = [t for t in self.advance(0.25) if t.node == "a"]
        self.assertEqual([(t.event, t.state) for t in got], [("unreachable", "unreachable")])
        self.assertEqual(self.state("a"), "unreachable")
        back = self.roster.seen("a", self.conn, self.clock.seconds())
        self.assertEqual([(t.event, t.state) for t in back], [("up", "up")])

    def test_closed_connection_has_a_grace(self) -> None:
        """A closed connection replaced within 1 s changes nothing; not replaced: unreachable after 1 s."""
        self.roster.hello("a", self.conn, "boot-1", 0)
        self.roster.closed("a", self.conn, 0)
        self.advance(0.5)
        other = object()
        self.assertEqual(self.roster.hello("a", other, "boot-1", self.clock.seconds()), [])
        self.assertEqual([t for t in self.advance(1.5) if t.node == "a"], [])
        self.roster.closed("a", other, self.clock.seconds())
        self.assertEqual([t for t in self.advance(0.75) if t.node == "a"], [])
        got = [t for t in self.advance(0.25) if t.node == "a"]
        self.assertEqual([(t.event, t.reason) for t in got], [("unreachable", "connection closed")])

    def test_old_connection_closing_does_not_count(self) -> None:
        """The close of a replaced connection does not touch the node."""
        first, second = object(), object()
        self.roster.hello("a", first, "boot-1", 0)
        self.roster.hello("a", second, "boot-1", 0)
        self.roster.closed("a", first, 0)
        self.roster.seen("a", first, 0)
        self.assertEqual([t for t in self.advance(1.5) if t.node == "a"], [])

    def test_a_hello_as_the_node_then_a_close_does_not_hide_its_beats(self) -> None:
        """One peer says hello as node a and closes at once while a's own
        NodeD keeps beating on its connection: a stays up (it was left
        unreachable for half an hour, until its NodeD reconnected)."""
        real, intruder = object(), object()
        self.roster.hello("a", real, "boot-1", 0)
        self.assertEqual(self.roster.hello("a", intruder, "boot-1", 0.5), [])
        self.roster.closed("a", intruder, 0.5)
        transitions = []
        for _ in range(120):
            self.clock.advance(0.5)
            transitions += self.roster.seen("a", real, self.clock.seconds())
            transitions += [t for t in self.roster.sweep(self.clock.seconds()) if t.node == "a"]
        self.assertEqual(transitions, [])
        self.assertEqual(self.state("a"), "up")
        self.assertIsNotNone(self.roster.snapshot()["a"]["connected_since"])
        # and a report on the real connection is still the node's
        self.assertIsNotNone(self.roster.reported("a", real, {"full": True, "instances": {}}, self.clock.seconds()))
        # its last connection closing is what starts the grace
        self.roster.closed("a", real, self.clock.seconds())
        got = [t for t in self.advance(1.0) if t.node == "a"]
        self.assertEqual([(t.event, t.reason) for t in got], [("unreachable", "connection closed")])

    def test_a_node_beating_on_its_older_connection_is_alive(self) -> None:
        """Two open connections of a node, beats on the older one only: up."""
        older, newer = object(), object()
        self.roster.hello("a", older, "boot-1", 0)
        self.roster.hello("a", newer, "boot-1", 0)
        transitions = []
        for _ in range(20):
            self.clock.advance(0.5)
            transitions += self.roster.seen("a", older, self.clock.seconds())
            transitions += [t for t in self.roster.sweep(self.clock.seconds()) if t.node == "a"]
        self.assertEqual(transitions, [])

    def test_reboot_is_a_transition(self) -> None:
        """A hello with another boot id: 'rebooted', even when the node was up."""
        self.roster.hello("a", self.conn, "boot-1", 0)
        got = self.roster.hello("a", object(), "boot-2", 1)
        self.assertEqual([(t.event, t.state, t.boot_id) for t in got], [("rebooted", "up", "boot-2")])
        self.assertEqual(self.roster.snapshot()["a"]["boot_id"], "boot-2")

    def test_never_connected_becomes_unreachable(self) -> None:
        """A node that never connects is unknown for the timeout plus the
        nodes' longest reconnect delay (2 + 2 s), then unreachable."""
        self.advance(3.75)
        self.assertEqual(self.state("b"), "unknown")
        self.advance(0.25)
        self.assertEqual(self.state("b"), "unreachable")

    def test_a_node_deep_in_its_backoff_at_start_is_only_up(self) -> None:
        """A node that tried just before LuxiD listened waits up to 2 s, then
        needs a handshake: connecting 3.9 s after the start is one 'up' and
        nothing else (a fresh cluster writes one record per node)."""
        transitions = self.advance(3.75)
        self.clock.advance(0.15)
        transitions += self.roster.hello("b", self.conn, "boot-1", self.clock.seconds())
        for _ in range(10):
            transitions += self.advance(1)
            transitions += self.roster.seen("b", self.conn, self.clock.seconds())
        self.assertEqual([(t.node, t.event) for t in transitions if t.node == "b"], [("b", "up")])

    def test_offline_nodes_are_expected_silent(self) -> None:
        """A node the admin marked offline never becomes unreachable."""
        self.roster.set_nodes(["a"], ["b"], 0)
        self.assertEqual([t for t in self.advance(10) if t.node == "b"], [])
        self.assertEqual(self.state("b"), "offline")

    def test_restart_rebuilds_without_writes(self) -> None:
        """After a restart, the same nodes reconnecting with the same boot ids
        produce no transition; one that stays away becomes unreachable."""
        recorded = {"a": {"state": "up", "boot_id": "boot-1"}, "b": {"state": "up", "boot_id": "boot-9"}}
        roster = r.Roster(0, timeout=2.0, recorded=recorded)
        roster.set_nodes(["a", "b"], [], 0)
        self.assertEqual(roster.hello("a", self.conn, "boot-1", 0.5), [])
        self.assertEqual(roster.snapshot()["a"]["liveness"], "up")
        self.assertEqual([t for t in roster.sweep(3.9) if t.node == "b"], [])  # 2 s timeout + 2 s of backoff
        got = [t for t in roster.sweep(4.0) if t.node == "b"]
        self.assertEqual([(t.node, t.event) for t in got], [("b", "unreachable")])
        self.assertEqual(roster.hello("b", object(), "boot-10", 5.0)[0].event, "rebooted")

    def test_reports_merge(self) -> None:
        """A full report replaces, a partial one updates; only a connected, up node's report is fresh."""
        self.roster.hello("a", self.conn, "boot-1", 0)
        self.roster.reported("a", self.conn, {"full": True, "instances": {"i1": {"state": "running"},
                                                                          "i2": {"state": "running"}}}, 0)
        self.roster.reported("a", self.conn, {"full": False, "instances": {"i1": {"state": "shutdown"}, "i2": None}},
                             0)
        self.assertEqual(self.roster.fresh_report("a"), {"instances": {"i1": {"state": "shutdown"}}, "node": {}})
        self.roster.closed("a", self.conn, 0)
        self.assertIsNone(self.roster.fresh_report("a"))

    def test_bad_parameters(self) -> None:
        self.assertRaises(ValueError, r.Roster, 0, timeout=0)
        self.assertRaises(ValueError, r.Roster, 0, rejoin=-1)


class StoreTests(SynchronousTestCase):
    def test_one_write_per_transition_and_reload(self) -> None:
        """Each append is one counted write; load gives each node's last record."""
        path = os.path.join(tempfile.mkdtemp(), "liveness.log")
        store = LivenessStore(path)
        self.assertEqual(store.load(), {})
        store.append({"node": "a", "state": "up", "boot_id": "x"})
        store.append({"node": "a", "state": "unreachable", "boot_id": "x"})
        store.close()
        with open(path, "ab") as handle:
            handle.write(b'{"node": "b", "sta')  # a torn last line
        self.assertEqual(store.writes, 2)
        self.assertEqual(LivenessStore(path).load(), {"a": {"node": "a", "state": "unreachable", "boot_id": "x"}})


class BackoffTests(SynchronousTestCase):
    def test_grows_to_two_seconds_with_jitter(self) -> None:
        """0.1 s doubling up to 2 s, each delay jittered down by at most half; reset starts over."""
        backoff = Backoff(rand=lambda: 0.0)
        self.assertEqual([round(backoff.next(), 3) for _ in range(7)], [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0])
        backoff.reset()
        self.assertEqual(backoff.next(), 0.1)
        jittered = Backoff(rand=lambda: 1.0)
        self.assertEqual(jittered.next(), 0.05)

    def test_reconnects_follow_the_backoff(self) -> None:
        """A client whose master cannot be found tries again at the backoff's delays."""
        from ganeti.heartbeat.client import HeartbeatClient

        clock = Clock()
        tries: list[float] = []

        async def lookup(failed: bool) -> None:
            tries.append(clock.seconds())
            return None

        client = HeartbeatClient(clock, lambda: {"t": "hello"}, lookup, None, backoff=Backoff(rand=lambda: 0.0))
        client.startService()
        while len(tries) < 6:
            clock.advance(min(c.getTime() for c in clock.getDelayedCalls()) - clock.seconds())
        self.assertEqual([round(t, 2) for t in tries], [0.0, 0.1, 0.3, 0.7, 1.5, 3.1])
        client.stopService()
        clock.advance(10)
        self.assertEqual(len(tries), 6)


class VerifyTests(SynchronousTestCase):
    def test_unreachable_online_nodes_are_problems(self) -> None:
        """Only online nodes the roster calls unreachable are reported, with how long ago they were heard."""
        from ganeti.cmdlib.liveness_verify import liveness_problems

        def row(*values: object) -> list[list[object]]:
            return [[0, v] for v in values]

        rows = [row("n1", False, "up", 99.0), row("n2", False, "unreachable", 90.0),
                row("n3", True, "offline", None), row("n4", False, "unreachable", None)]
        self.assertEqual(liveness_problems(rows, 100.0), [
            ("n2", "node is unreachable: no heartbeat (last heard from 10 s ago)"),
            ("n4", "node is unreachable: no heartbeat (not heard from since the master started)"),
        ])


class NotingRpcTests(SynchronousTestCase):
    def test_a_call_to_an_unreachable_node_is_noted_once(self) -> None:
        """The job log names an unreachable node a call waits for, once; reachable ones are not named."""
        from twisted.internet.defer import Deferred, ensureDeferred

        from ganeti.cmdlib.liveness_verify import NotingRpc

        answers: Deferred = Deferred()
        lines: list[str] = []

        class Rpc(Runner):
            async def call(self, nodes: object, procedure: str, args: object = (), **kw: object) -> object:
                if not answers.called:
                    await answers
                return {"n1": 1, "n2": 2}

        async def roster(names: list[str]) -> dict:
            return {"n1": {"liveness": "up", "last_seen": 1.0}, "n2": {"liveness": "unreachable", "last_seen": None}}

        async def feedback(line: str) -> None:
            lines.append(line)

        rpc = NotingRpc(Rpc(), roster, feedback)
        d = ensureDeferred(rpc.call({"n1": "a", "n2": "b"}, "instance_start", [], timeout=60))
        self.assertEqual(lines, ["Node n2 is unreachable (no heartbeat since the master started); "
                                 "instance_start waits up to 60 s for its answer"])
        answers.callback({"n1": 1, "n2": 2})
        self.assertEqual(self.successResultOf(d), {"n1": 1, "n2": 2})
        self.assertEqual(self.successResultOf(ensureDeferred(rpc.call_one("n2", "b", "version"))), 2)
        self.assertEqual(len(lines), 1)

    def test_the_roster_is_asked_again_only_after_a_second(self) -> None:
        """A job's steps call the same nodes one after another: one LUXI query per second at most, and a
        node found unreachable after that is still named."""
        from twisted.internet.defer import ensureDeferred
        from twisted.internet.task import Clock

        from ganeti.cmdlib.liveness_verify import ROSTER_TTL, NotingRpc

        clock, asked, lines = Clock(), [], []
        state = {"n1": "up"}

        class Rpc(Runner):
            async def call(self, nodes: object, procedure: str, args: object = (), **kw: object) -> object:
                return {"n1": 1}

        async def roster(names: list[str]) -> dict:
            asked.append(list(names))
            return {"n1": {"liveness": state["n1"], "last_seen": 1.0}}

        async def feedback(line: str) -> None:
            lines.append(line)

        rpc = NotingRpc(Rpc(), roster, feedback, clock)
        for _ in range(5):
            self.successResultOf(ensureDeferred(rpc.call({"n1": "a"}, "version")))
        self.assertEqual(asked, [["n1"]])
        state["n1"] = "unreachable"
        clock.advance(ROSTER_TTL)
        self.successResultOf(ensureDeferred(rpc.call({"n1": "a"}, "version")))
        self.assertEqual(asked, [["n1"], ["n1"]])
        self.assertEqual(len(lines), 1)
        self.assertIn("Node n1 is unreachable", lines[0])


class RosterFileTests(SynchronousTestCase):
    def test_the_roster_comes_from_luxids_file_or_a_query(self) -> None:
        """A job reads the nodes LuxiD counts unreachable from its file, so a call costs no LUXI round trip;
        without the file (LuxiD has not written it) it asks LuxiD."""
        import tempfile

        from twisted.internet.defer import ensureDeferred

        from ganeti.cmdlib import liveness_verify
        from ganeti.heartbeat.store import write_unreachable
        from ganeti.paths import Paths

        paths = Paths(tempfile.mkdtemp())
        asked: list[list[str]] = []

        async def query(reactor: object, socket: str, names: list[str]) -> dict:
            asked.append(names)
            return {name: {"liveness": "up", "last_seen": 1.0} for name in names}

        self.patch(liveness_verify, "query_roster", query)
        roster = self.successResultOf(ensureDeferred(liveness_verify.roster_of(None, paths, ["n1", "n2"])))
        self.assertEqual((roster, asked), ({"n1": {"liveness": "up", "last_seen": 1.0},
                                            "n2": {"liveness": "up", "last_seen": 1.0}}, [["n1", "n2"]]))
        write_unreachable(paths.run_dir, {"n2": 90.0, "n3": None})
        roster = self.successResultOf(ensureDeferred(liveness_verify.roster_of(None, paths, ["n1", "n2", "n3"])))
        self.assertEqual(roster, {"n1": {}, "n2": {"liveness": "unreachable", "last_seen": 90.0},
                                  "n3": {"liveness": "unreachable", "last_seen": None}})
        self.assertEqual(len(asked), 1)
        self.assertEqual(liveness_verify.unreachable_note("n3", roster["n3"], "version", 5, 100.0),
                         "Node n3 is unreachable (no heartbeat since the master started); version waits up to 5 s"
                         " for its answer")
