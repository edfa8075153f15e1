"""The web console's charts: MonD's reports sampled by RAPI and pushed on the event stream."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rapi.ui import charts, events
from tests.unit.test_rapi_ui import ClusterLuxi, FakeRequest

GIB = 1 << 30


def report(cpus: list[float] | None = None, total: int = 8 * GIB, available: int = 6 * GIB) -> list[dict[str, Any]]:
    """MonD's /1/report/all with the two collectors the charts read."""
    load = {"cpu_number": len(cpus), "cpus": cpus, "cpu_total": sum(cpus)} if cpus is not None else \
        {"error": "Time covered by data is not sufficient"}
    return [{"name": "cpu-avg-load", "data": load},
            {"name": "node-resources", "data": {"cpus": 2, "memory": {"total": total, "available": available}}},
            {"name": "ganeti-noded", "data": {"running": True}}]


class SampleTests(SynchronousTestCase):
    def test_cpu_is_the_busy_share_of_all_cpus_and_memory_the_share_in_use(self) -> None:
        self.assertEqual(charts.sample(report([0.5, 0.25]), 10.0),
                         {"t": 10.0, "cpu": 37.5, "mem": 25.0, "mem_used": 2048, "mem_total": 8192})

    def test_what_mond_does_not_have_is_none(self) -> None:
        self.assertEqual(charts.sample(report(None), 1.0)["cpu"], None)
        for bad in (None, "garbage", [1, 2], [{"name": "node-resources", "data": {"memory": {"total": 0}}}],
                    [{"name": "cpu-avg-load", "data": {"cpus": ["x"]}}]):
            sample = charts.sample(bad, 1.0)
            self.assertEqual((sample["cpu"], sample["mem"]), (None, None), bad)


class NodeMetricsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.answers: dict[str, Any] = {"127.0.1.1": report([0.1]), "127.0.1.2": OSError("refused")}
        self.asked: list[str] = []
        self.metrics = charts.NodeMetrics(self.clock, 1815, self.fetch, keep=3)

    def fetch(self, address: str) -> Deferred[Any]:
        self.asked.append(address)
        answer = self.answers[address]
        return fail(answer) if isinstance(answer, Exception) else succeed(answer)

    def test_online_nodes_are_sampled_a_dead_mond_gives_no_values_and_history_is_bounded(self) -> None:
        nodes = {"node1.test": {"pip": "127.0.1.1"}, "node2.test": {"pip": "127.0.1.2"},
                 "node3.test": {"pip": "127.0.1.3", "offline": True}}
        for _ in range(4):
            self.clock.advance(5)
            new = self.successResultOf(Deferred.fromCoroutine(self.metrics.poll(nodes)))
        self.assertEqual(sorted(self.asked), ["127.0.1.1"] * 4 + ["127.0.1.2"] * 4)  # never the offline node
        self.assertEqual(new["node1.test"]["cpu"], 10.0)
        self.assertEqual((new["node2.test"]["cpu"], new["node2.test"]["mem"]), (None, None))
        self.assertEqual([s["t"] for s in self.metrics.recent()["node1.test"]], [10.0, 15.0, 20.0])
        self.assertFalse(self.metrics.is_due())
        self.clock.advance(charts.INTERVAL)
        self.assertTrue(self.metrics.is_due())
        self.successResultOf(Deferred.fromCoroutine(self.metrics.poll({"node1.test": {"pip": "127.0.1.1"}})))
        self.assertEqual(sorted(self.metrics.recent()), ["node1.test"])  # a removed node's history goes


class HubMetricsTests(SynchronousTestCase):
    def test_the_event_stream_carries_the_samples_while_pages_are_open(self) -> None:
        clock = Clock()
        luxi = ClusterLuxi()
        luxi.nodes = {"node1.test": {"liveness": "up", "pip": "127.0.1.1"}}
        asked: list[str] = []

        def fetch(address: str) -> Deferred[Any]:
            asked.append(address)
            return succeed(report([0.2, 0.4]))

        hub = events.EventHub(luxi, clock, interval=0.5, metrics=charts.NodeMetrics(clock, 1815, fetch))
        request = FakeRequest()
        hub.subscribe(events.ClusterStream(request, hub, "jack"))
        sent = request.events()
        self.assertEqual([kind for kind, _ in sent], ["snapshot", "metrics"])
        self.assertEqual(sent[1][1]["node1.test"]["cpu"], 30.0)
        self.assertEqual(asked, ["127.0.1.1"])
        clock.advance(charts.INTERVAL)
        self.assertEqual(asked, ["127.0.1.1"] * 2)  # every INTERVAL, not every 0.5 s poll
        late = FakeRequest()
        hub.subscribe(events.ClusterStream(late, hub, "jack"))
        ((kind, snapshot),) = late.events()
        self.assertEqual([s["cpu"] for s in snapshot["metrics"]["node1.test"]], [30.0, 30.0])
