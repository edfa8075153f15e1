"""MonD's service: collector timers from the cluster's settings, the report
cache, failing and slow collectors, confd going away (Clock, fake confd)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

import attrs
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import serializer
from ganeti.confd import wire
from ganeti.confd.client import ConfdTimeout
from ganeti.mond import settings
from ganeti.mond.collectors import Collector, CollectorError
from ganeti.mond.report import KIND_STATUS
from ganeti.mond.service import MondService
from ganeti.paths import Paths


@attrs.frozen
class Result:
    status: int
    answer: Any

    @property
    def ok(self) -> bool:
        return self.status == 0


class Counting(Collector):
    """Counts its runs; C{behaviour} decides each run's outcome."""

    def __init__(self, name: str, category: str | None = None, kind: int = 0) -> None:
        self.name, self.category, self.kind = name, category, kind
        self.runs = 0
        self.behaviour: Any = None

    def collect(self, view: Any) -> Any:
        self.runs += 1
        if self.behaviour is not None:
            return self.behaviour(view)
        return {"run": self.runs}


class FakeConfd:
    def __init__(self) -> None:
        self.collectors: dict[str, Any] = {}
        self.instances: list[dict[str, Any]] = [{"name": "vm1.test", "uuid": "u1", "admin_state": "up",
                                                 "hypervisor": "fake", "mtime": 1.0,
                                                 "beparams": {"maxmem": 128, "vcpus": 2}}]
        self.down = False
        self.queries: list[int] = []

    def __call__(self, qtype: int, query: Any) -> Any:
        self.queries.append(qtype)
        if self.down:
            return fail(ConfdTimeout("no confd answer from 1 peer(s)"))
        if qtype == wire.REQ_DATA_COLLECTORS:
            return succeed(Result(0, self.collectors))
        assert qtype == wire.REQ_NODE_INSTANCES and query == "node2.test"
        return succeed(Result(0, [self.instances, []]))


class ServiceCase(SynchronousTestCase):
    """A node root with ssconf, a Clock, a fake confd and three collectors."""

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="mond-service-")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.paths = Paths(self.root)
        os.makedirs(self.paths.data_dir)
        for key, value in (("master_node", "node1.test"), ("hypervisor_list", "fake"),
                           ("file_storage_dir", "/srv/ganeti/file-storage"), ("shared_file_storage_dir", "")):
            with open(self.paths.ssconf(key), "w") as handle:
                handle.write(value + "\n")
        self.clock = Clock()
        self.confd = FakeConfd()
        self.cpu = Counting("cpu-avg-load")
        self.disks = Counting("diskstats", "storage")
        self.status = Counting("probe", "storage", KIND_STATUS)

    def service(self) -> MondService:
        service = MondService(self.paths, self.clock, "node2.test", [self.cpu, self.disks, self.status],
                              confd=self.confd, config_interval=15)
        service.startService()
        self.addCleanup(service.stopService)
        return service

    def names(self, service: MondService) -> list[str]:
        return [entry[0] for entry in json.loads(service.list_bytes())]


class ServiceTests(ServiceCase):

    def test_collectors_run_on_their_intervals(self) -> None:
        self.confd.collectors = {"cpu-avg-load": {"active": True, "interval": 1000000},
                                 "diskstats": {"active": True, "interval": 10000000}}
        service = self.service()
        self.assertEqual((self.cpu.runs, self.disks.runs), (1, 1))  # at once
        self.clock.pump([1] * 5)
        self.assertEqual((self.cpu.runs, self.disks.runs), (6, 1))
        self.clock.pump([1] * 5)
        self.assertEqual((self.cpu.runs, self.disks.runs), (11, 2))
        report = json.loads(service.report_bytes(self.cpu, False))
        self.assertEqual((report["name"], report["data"], report["timestamp"]), ("cpu-avg-load", {"run": 11}, 10 * 10**9))
        self.assertEqual(service.view.instances[0]["memory"], 128)
        self.assertEqual((service.view.source, service.view.stale, service.view.master), ("confd", "", False))

    def test_settings_change_is_followed(self) -> None:
        service = self.service()
        self.assertEqual(self.names(service), ["cpu-avg-load", "diskstats", "probe"])
        self.confd.collectors = {"diskstats": {"active": False, "interval": 5000000},
                                 "cpu-avg-load": {"active": True, "interval": 500000}}
        self.clock.advance(15)  # the next refresh
        self.assertEqual(self.names(service), ["cpu-avg-load", "probe"])
        self.assertNotIn(b"diskstats", service.all_bytes(False))
        runs = self.cpu.runs
        self.clock.pump([0.5, 0.5])
        self.assertEqual(self.cpu.runs, runs + 2)
        disk_runs = self.disks.runs
        self.clock.pump([1] * 14)
        self.assertEqual(self.disks.runs, disk_runs)  # deactivated: not run any more
        self.confd.collectors = {}
        self.clock.advance(0)
        service.refresh()
        self.assertEqual(self.names(service), ["cpu-avg-load", "diskstats", "probe"])
        self.assertEqual(self.disks.runs, disk_runs + 1)

    def test_failing_collectors_report_a_status(self) -> None:
        service = self.service()
        self.status.behaviour = lambda view: fail(CollectorError("disk on fire", 4))
        self.cpu.behaviour = lambda view: 1 // 0
        self.clock.advance(5)
        status = json.loads(service.report_bytes(self.status, False))
        self.assertEqual(status["data"], {"status": {"code": 4, "message": "disk on fire"}})
        cpu = json.loads(service.report_bytes(self.cpu, False))
        self.assertEqual(cpu["data"]["status"]["code"], 2)
        self.assertIn("by zero", cpu["data"]["status"]["message"])
        self.flushLoggedErrors(ZeroDivisionError)
        self.assertEqual(len(json.loads(service.all_bytes(False))), 3)  # the others still report

    def test_a_hanging_collector_holds_nothing_up(self) -> None:
        self.status.behaviour = lambda view: Deferred()
        service = self.service()
        report = json.loads(service.report_bytes(self.status, False))
        self.assertEqual(report["data"]["status"], {"code": 2, "message": "no data collected yet"})
        self.clock.advance(30)
        self.assertEqual(self.status.runs, 1)  # not started again while the first run hangs
        self.assertEqual(len(json.loads(service.all_bytes(False))), 3)

    def test_confd_down_uses_the_cache_and_says_so(self) -> None:
        self.confd.collectors = {"diskstats": {"active": False, "interval": 5000000}}
        first = self.service()
        self.assertEqual(self.names(first), ["cpu-avg-load", "probe"])
        first.stopService()
        self.confd.down = True
        restarted = self.service()  # a new MonD: nothing in memory
        self.assertEqual(self.names(restarted), ["cpu-avg-load", "probe"])
        self.assertEqual(restarted.view.source, "cache")
        self.assertIn("confd did not answer", restarted.view.stale)
        self.assertEqual([i["name"] for i in restarted.view.instances], ["vm1.test"])
        self.confd.down = False
        self.clock.advance(15)
        self.assertEqual((restarted.view.source, restarted.view.stale), ("confd", ""))

    def test_confd_down_on_a_candidate_reads_its_replica(self) -> None:
        self.confd.down = True
        config = {"cluster": {"data_collectors": {"probe": {"active": False, "interval": 1}}},
                  "nodes": {"n2": {"name": "node2.test"}},
                  "instances": {"i1": {"name": "vm9.test", "primary_node": "n2", "admin_state": "down"},
                                "i2": {"name": "other.test", "primary_node": "n3"}}}
        serializer.write_json(self.paths.config_data, config)
        service = self.service()
        self.assertEqual((service.view.source, service.view.stale), ("config replica", ""))
        self.assertEqual([i["name"] for i in service.view.instances], ["vm9.test"])
        self.assertEqual(self.names(service), ["cpu-avg-load", "diskstats"])

    def test_confd_down_without_any_copy(self) -> None:
        self.confd.down = True
        service = self.service()
        self.assertEqual(service.view.source, "none")
        self.assertIn("no cached copy", service.view.stale)
        self.assertEqual(self.names(service), ["cpu-avg-load", "diskstats", "probe"])  # Ganeti's defaults

    def test_plugins_come_and_go(self) -> None:
        plugins: dict[str, Collector] = {"extra": Counting("extra")}
        service = MondService(self.paths, self.clock, "node2.test", [self.cpu], confd=self.confd,
                              plugins=lambda: plugins)
        service.startService()
        self.addCleanup(service.stopService)
        self.assertEqual(self.names(service), ["cpu-avg-load", "extra"])
        plugins.clear()
        self.clock.advance(settings.CONFIG_INTERVAL)
        self.assertEqual(self.names(service), ["cpu-avg-load"])


class OverdueTests(ServiceCase):
    def test_a_stuck_collector_says_so(self) -> None:
        """A run that has not ended after two intervals (at least 10 s) is
        reported with status 2; its next result replaces that."""
        pending: Deferred[Any] = Deferred()
        self.status.behaviour = lambda view: pending
        service = self.service()
        self.clock.pump([1] * 9)
        self.assertEqual(json.loads(service.report_bytes(self.status, False))["data"]["status"]["message"],
                         "no data collected yet")
        self.clock.pump([1])
        report = json.loads(service.report_bytes(self.status, False))
        self.assertEqual(report["data"]["status"], {"code": 2, "message": "the collector has not finished after 10s"})
        self.assertEqual(self.status.runs, 1)
        self.flushLoggedErrors()
        pending.callback({"status": {"code": 0, "message": ""}})
        self.assertEqual(json.loads(service.report_bytes(self.status, False))["data"]["status"]["code"], 0)
        self.clock.pump([5])
        self.assertEqual(self.status.runs, 2)


class StopTests(ServiceCase):
    def test_stopping_stops_collectors_and_timers(self) -> None:
        stopped: list[str] = []
        self.cpu.stop = lambda: stopped.append("cpu-avg-load")
        service = self.service()
        service.stopService()
        self.assertEqual(stopped, ["cpu-avg-load"])
        self.assertEqual(self.clock.getDelayedCalls(), [])


class SettingsTests(SynchronousTestCase):
    def test_parse(self) -> None:
        parsed = settings.parse_collectors({"a": {"active": False, "interval": 2500000}, "b": {}, "c": "junk",
                                            "d": {"active": "yes"}, "e": {"interval": 1}})
        self.assertEqual(parsed, {"a": settings.Setting(False, 2.5), "b": settings.Setting(True, 5.0),
                                  "e": settings.Setting(True, settings.MIN_INTERVAL)})
        self.assertRaises(ValueError, settings.parse_collectors, [])
        self.assertEqual(settings.setting_of(parsed, "zzz"), settings.Setting(True, 5.0))

    def test_instance_record(self) -> None:
        record = settings.instance_record({"name": "x", "uuid": "u", "admin_state": "up", "hypervisor": "kvm",
                                           "mtime": 2.5, "beparams": {"maxmem": 256, "vcpus": 4},
                                           "admin_state_source": "admin"})
        self.assertEqual(record, {"name": "x", "uuid": "u", "admin_state": "up", "hypervisor": "kvm", "mtime": 2.5,
                                  "memory": 256, "vcpus": 4, "state_reason": [["admin", "", 2500000000]]})
