"""State pushed from nodes: what NodeD sends when, and LuxiD answering
live query fields from the reports instead of asking by RPC."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.heartbeat.reporter import StateReporter, instance_changes, node_changed
from ganeti.luxid import live
from ganeti.query import fields as q

from .test_luxid_live import FakeRpc, make_config

RUNNING = {"state": "running", "memory": 128, "vcpus": 1, "time": 5}


class DiffTests(SynchronousTestCase):
    def test_instance_changes(self) -> None:
        """New, changed and gone instances; the uptime alone is no change."""
        old = {"a": RUNNING, "b": RUNNING}
        new = {"a": dict(RUNNING, time=99), "c": RUNNING}
        self.assertEqual(instance_changes(old, new), {"c": RUNNING, "b": None})
        self.assertEqual(instance_changes(new, {"a": dict(RUNNING, state="shutdown"), "c": RUNNING}),
                         {"a": dict(RUNNING, state="shutdown")})

    def test_node_changed_thresholds(self) -> None:
        self.assertFalse(node_changed({"mfree": 1000, "bootid": "x"}, {"mfree": 1040, "bootid": "x"}))
        self.assertTrue(node_changed({"mfree": 1000}, {"mfree": 1100}))
        self.assertTrue(node_changed({"mfree": 1000, "bootid": "x"}, {"mfree": 1000, "bootid": "y"}))


class ReporterTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.sent: list[dict[str, Any]] = []
        self.instances: dict[str, Any] = {"a": RUNNING}
        self.node: dict[str, Any] = {"mfree": 1000}
        self.connected = True

        async def instances(args: list[Any]) -> dict[str, Any]:
            return dict(self.instances)

        async def node_info(args: list[Any]) -> dict[str, Any]:
            return dict(self.node)

        def send(message: dict[str, Any]) -> bool:
            if self.connected:
                self.sent.append(message)
            return self.connected

        self.reporter = StateReporter(self.clock, send, instances, node_info, poll=1.0, full_every=60.0)

    def tearDown(self) -> None:
        self.reporter.stop()

    def test_full_on_connect_then_only_changes(self) -> None:
        """A full report at once; nothing while nothing changes; a change at
        the next look; a forced full one a minute later, not before."""
        self.reporter.connected({"instances": [], "node_info": [[], []]})
        self.assertEqual(self.sent, [{"t": "report", "full": True, "instances": {"a": RUNNING},
                                      "node": {"mfree": 1000}}])
        self.clock.pump([1.0] * 10)
        self.assertEqual(len(self.sent), 1)
        self.instances = {"a": dict(RUNNING, state="shutdown")}
        self.reporter.check()  # what inotify calls
        self.assertEqual(self.sent[-1], {"t": "report", "full": False,
                                         "instances": {"a": dict(RUNNING, state="shutdown")}})
        self.node = {"mfree": 500}
        self.clock.advance(1.0)
        self.assertEqual(self.sent[-1], {"t": "report", "full": False, "node": {"mfree": 500}})
        count = len(self.sent)
        self.clock.pump([1.0] * 47)
        self.assertEqual(len(self.sent), count)
        self.clock.pump([1.0] * 2)
        self.assertEqual(self.sent[-1]["full"], True)

    def test_no_arguments_no_reports(self) -> None:
        """Before LuxiD sent the report arguments, nothing is sent."""
        self.reporter.connected(None)
        self.clock.pump([1.0] * 5)
        self.assertEqual(self.sent, [])
        self.reporter.params({"instances": [], "node_info": [[], []]})
        self.assertEqual(len(self.sent), 1)

    def test_reconnect_sends_a_full_report(self) -> None:
        self.reporter.connected({"instances": [], "node_info": [[], []]})
        self.connected = False
        self.instances = {}
        self.clock.advance(1.0)
        self.connected = True
        self.reporter.connected(None)
        self.assertEqual(self.sent[-1], {"t": "report", "full": True, "instances": {}, "node": {"mfree": 1000}})


class GatherTests(SynchronousTestCase):
    def test_pushed_reports_replace_rpc(self) -> None:
        """Nodes with a fresh report are not asked; the others are."""
        rpc = FakeRpc({("all_instances_info", "node2.example.test"): {"web2": {"memory": 1, "vcpus": 1,
                                                                               "state": 0}},
                       ("node_info", "node2.example.test"): ["b", [], [{"memory_free": 7}]]})
        pushed = {"node1.example.test": {"instances": {"web1": RUNNING}, "node": {"mfree": 1000}}}
        data = live.LiveData(lambda: rpc)
        d = ensureDeferred(data.gather(make_config(), {q.NEED_LIVE_INSTANCES, q.NEED_LIVE_NODES}, None,
                                       pushed.get))
        got = self.successResultOf(d)
        self.assertEqual(got["node1.example.test"], {"instances": {"web1": RUNNING}, "mfree": 1000})
        self.assertEqual(got["node2.example.test"]["instances"]["web2"]["state"], "running")
        self.assertEqual(got["node2.example.test"]["mfree"], 7)
        self.assertEqual(sorted((p, sorted(n)) for p, n, _a, _t in rpc.calls),
                         [("all_instances_info", ["node2.example.test"]), ("node_info", ["node2.example.test"])])

    def test_all_pushed_no_rpc_at_all(self) -> None:
        rpc = FakeRpc()
        pushed = {n: {"instances": {}, "node": {"mfree": 1}} for n in ("node1.example.test", "node2.example.test")}
        d = ensureDeferred(live.LiveData(lambda: rpc).gather(make_config(), {q.NEED_LIVE_INSTANCES}, None,
                                                              pushed.get))
        self.successResultOf(d)
        self.assertEqual(rpc.calls, [])
