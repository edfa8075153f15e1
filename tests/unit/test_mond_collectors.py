"""MonD's collectors: the kernel file parsers, cpu-avg-load's averaging,
instance, storage and daemon statuses, plugins (no real processes)."""

from __future__ import annotations

import os
import shutil
import tempfile
from types import SimpleNamespace
from typing import Any

from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti.mond.collectors import ClusterView, CollectorError, proc
from ganeti.mond.collectors.daemons import DaemonStatus, daemon_figures
from ganeti.mond.collectors.host import CpuAvgLoad, DiskStats, Host, NodeResources, average_load
from ganeti.mond.collectors.instances import FIELDS, InstanceStatus, instance_statuses
from ganeti.mond.collectors.plugins import Plugin, parse_output, scan
from ganeti.mond.collectors.storage import FileStorage, node_path, storage_data

STAT = """cpu  100 0 50 1000 10 0 0 0 0 0
cpu0 60 0 30 500 5 0 0 0 0 0
cpu1 40 0 20 500 5 0 0 0 0 0
intr 1 2 3
btime 1700000000
"""
DISKSTATS = """   8       0 sda 100 2 3000 40 200 5 6000 70 0 90 110
   8       1 sda1 10 0 300 4 20 0 600 7 0 9 11
"""
MEMINFO = "MemTotal:       2048 kB\nMemFree:         1024 kB\nMemAvailable:    1536 kB\nHugePages_Total: 0\n"
NETDEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     2000      20    0    0    0     0       0          0
"""
MOUNTS = "/dev/sda1 / ext4 rw 0 0\nproc /proc proc rw 0 0\ntmpfs /run tmpfs rw 0 0\n"


def statvfs(blocks: int = 1000, bfree: int = 400, bavail: int = 300, frsize: int = 4096) -> Any:
    return SimpleNamespace(f_blocks=blocks, f_bfree=bfree, f_bavail=bavail, f_frsize=frsize)


class ProcDir:
    """A temporary /proc with the given files."""

    def __init__(self, case: SynchronousTestCase, files: dict[str, str]) -> None:
        self.path = tempfile.mkdtemp(prefix="mond-proc-")
        case.addCleanup(shutil.rmtree, self.path, True)
        for name, text in files.items():
            self.write(name, text)

    def write(self, name: str, text: str) -> None:
        path = os.path.join(self.path, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


class ParserTests(SynchronousTestCase):
    def test_stat(self) -> None:
        self.assertEqual(proc.parse_stat_cpus(STAT), [("cpu", 160, 1000), ("cpu0", 95, 500), ("cpu1", 65, 500)])
        self.assertEqual(proc.parse_btime(STAT), 1700000000)
        self.assertRaises(ValueError, proc.parse_stat_cpus, "cpu0 1 2 3 4\n")
        self.assertRaises(ValueError, proc.parse_stat_cpus, "cpu 1 x 3 4\n")

    def test_diskstats_in_ganeti_names(self) -> None:
        sda, sda1 = proc.parse_diskstats(DISKSTATS)
        self.assertEqual(sda, {"major": 8, "minor": 0, "name": "sda", "readsNum": 100, "mergedReads": 2,
                               "secRead": 3000, "timeRead": 40, "writes": 200, "mergedWrites": 5,
                               "secWritten": 6000, "timeWrite": 70, "ios": 0, "timeIO": 90, "wIOmillis": 110})
        self.assertEqual(sda1["name"], "sda1")

    def test_meminfo_net_mounts_pid(self) -> None:
        self.assertEqual(proc.parse_meminfo(MEMINFO),
                         {"MemTotal": 2048 * 1024, "MemFree": 1024 * 1024, "MemAvailable": 1536 * 1024,
                          "HugePages_Total": 0})
        (lo,) = proc.parse_net_dev(NETDEV)
        self.assertEqual((lo["name"], lo["rx_bytes"], lo["tx_bytes"], lo["tx_packets"]), ("lo", 1000, 2000, 20))
        self.assertEqual(proc.parse_mounts(MOUNTS + "srv:/x /mnt/nfs nfs4 rw 0 0\n"),
                         [("/dev/sda1", "/", "ext4"), ("tmpfs", "/run", "tmpfs")])
        stat = "42 (a (weird) name) S " + " ".join(str(n) for n in range(4, 53))
        self.assertEqual(proc.parse_pid_stat(stat), {"utime": 14, "stime": 15, "starttime": 22, "rss": 24})
        self.assertRaises(ValueError, proc.parse_pid_stat, "42 (x) S 1 2")


class CpuLoadTests(SynchronousTestCase):
    def test_average_over_the_window(self) -> None:
        """Ganeti's rule: newest minus oldest sample of the window, over
        the time between them, in CPUs (ticks per second)."""
        self.assertIn("error", average_load([(0.0, [0, 0, 0])], 0.0, 100))
        samples = [(0.0, [0, 0, 0]), (5.0, [300, 100, 200]), (10.0, [1000, 500, 500])]
        self.assertEqual(average_load(samples, 10.0, 100),
                         {"cpu_number": 2, "cpus": [0.5, 0.5], "cpu_total": 1.0})
        # samples older than the window are left out
        self.assertEqual(average_load(samples, 604.0, 100)["cpus"], [0.8, 0.6])

    def test_collector_samples_each_run(self) -> None:
        clock = Clock()
        files = ProcDir(self, {"stat": STAT})
        host = Host(files.path, clock=clock.seconds)
        host.ticks = 100
        collector = CpuAvgLoad(host)
        self.assertIn("error", collector.collect(ClusterView()))
        clock.advance(5)
        files.write("stat", STAT.replace("cpu  100", "cpu  400").replace("cpu0 60", "cpu0 360"))
        self.assertEqual(collector.collect(ClusterView()), {"cpu_number": 2, "cpus": [0.6, 0.0], "cpu_total": 0.6})

    def test_missing_or_bad_files_are_collector_errors(self) -> None:
        files = ProcDir(self, {"diskstats": "8 0 sda 1 2 x 4 5 6 7 8 9 10 11\n"})
        host = Host(files.path)
        self.assertRaises(CollectorError, CpuAvgLoad(host).collect, ClusterView())
        self.assertRaises(CollectorError, DiskStats(host).collect, ClusterView())

    def test_node_resources(self) -> None:
        files = ProcDir(self, {"stat": STAT, "meminfo": MEMINFO, "net/dev": NETDEV, "mounts": MOUNTS})
        host = Host(files.path, statvfs=lambda path: statvfs())
        data = NodeResources(host).collect(ClusterView())
        self.assertEqual(data["cpus"], 2)
        self.assertEqual(data["memory"]["total"], 2048 * 1024)
        self.assertEqual([fs["mountpoint"] for fs in data["filesystems"]], ["/", "/run"])
        self.assertEqual(data["filesystems"][0]["size"], 1000 * 4096)
        self.assertEqual(data["filesystems"][0]["used"], 600 * 4096)
        self.assertEqual(data["nics"][0]["name"], "lo")


INSTANCES = [
    {"name": "up.test", "uuid": "u1", "admin_state": "up", "mtime": 100.0, "hypervisor": "fake", "memory": 128,
     "vcpus": 1, "state_reason": []},
    {"name": "down.test", "uuid": "u2", "admin_state": "down", "mtime": 100.0, "hypervisor": "fake", "memory": 64,
     "vcpus": 1, "state_reason": []},
]


class InstanceStatusTests(SynchronousTestCase):
    def test_as_configured(self) -> None:
        data = instance_statuses("fake", INSTANCES, {"up.test": {"memory": 128, "vcpus": 2, "time": 30}}, 1000.0, 5.0)
        up, down = data["instances"][1], data["instances"][0]
        self.assertEqual(data["status"], {"code": 0, "message": ""})
        self.assertEqual((up["actual_state"], up["uptime"], up["status"]["code"]), ("running", "30", 0))
        self.assertEqual((down["actual_state"], down["uptime"], down["status"]["code"]), ("shutdown", None, 0))
        self.assertEqual(up["vcpus"], 2)

    def test_mismatch_recent_then_bad(self) -> None:
        """A difference newer than two intervals may be a change in flight (1); older it is bad (4)."""
        recent = instance_statuses("fake", INSTANCES, {"down.test": {}}, 105.0, 5.0)
        self.assertEqual([i["status"]["code"] for i in recent["instances"]], [1, 1])
        old = instance_statuses("fake", INSTANCES, {"down.test": {}}, 111.0, 5.0)
        self.assertEqual([i["status"]["code"] for i in old["instances"]], [4, 4])
        self.assertEqual(old["status"]["code"], 4)
        self.assertIn("down.test, up.test", old["status"]["message"])
        self.assertEqual(old["instances"][0]["status"]["message"], "The instance is running, but it should not be")

    def test_unknown_instance_and_stale_view(self) -> None:
        data = instance_statuses("fake", [], {"stray.test": {"time": 1}}, 0.0, 5.0, stale="confd did not answer")
        (stray,) = data["instances"]
        self.assertEqual((stray["admin_state"], stray["status"]["code"]), ("unknown", 4))
        self.assertIn("admin states from cached configuration: confd did not answer", data["status"]["message"])
        stale = instance_statuses("fake", [], {}, 0.0, 5.0, stale="confd did not answer")
        self.assertEqual(stale["status"]["code"], 1)

    def test_collector_filters_by_hypervisor_and_verbose(self) -> None:
        kvm = dict(INSTANCES[0], name="kvm.test", hypervisor="kvm")
        collector = InstanceStatus("fake", lambda: {"up.test": {"time": 5}}, lambda: 1000.0)
        view = ClusterView(hypervisors=("fake",), instances=(INSTANCES[0], kvm))
        self.assertTrue(collector.available(view))
        self.assertFalse(InstanceStatus("kvm", dict, lambda: 0.0).available(view))
        data = self.successResultOf(collector.collect(view))
        self.assertEqual([i["name"] for i in data["instances"]], ["up.test"])
        self.assertEqual(set(collector.present(data, False)["instances"][0]), set(FIELDS))
        self.assertEqual(collector.present(data, True)["instances"][0]["memory"], 128)

    def test_hypervisor_failure_is_unknown(self) -> None:
        def broken() -> Any:
            raise OSError("no state directory")
        failure = self.failureResultOf(InstanceStatus("fake", broken, lambda: 0.0).collect(ClusterView()),
                                       CollectorError)
        self.assertEqual(failure.value.code, 2)
        self.assertIn("no state directory", str(failure.value))


class StorageTests(SynchronousTestCase):
    def test_sizes_and_low_space(self) -> None:
        data = storage_data("file", "/x", statvfs())
        self.assertEqual((data["size"], data["used"], data["free"]), (1000 * 4096, 600 * 4096, 300 * 4096))
        self.assertEqual(data["status"]["code"], 0)
        self.assertEqual(storage_data("file", "/x", statvfs(bavail=10))["status"]["code"], 1)

    def test_collector_paths_and_errors(self) -> None:
        seen = []

        def fake_statvfs(path: str) -> Any:
            seen.append(path)
            raise FileNotFoundError(2, "No such file or directory")
        collector = FileStorage("sharedfile", "/tmp/root", fake_statvfs)
        self.assertFalse(collector.available(ClusterView(file_storage_dir="/srv/f")))
        view = ClusterView(shared_file_storage_dir="/srv/s")
        self.assertTrue(collector.available(view))
        error = self.failureResultOf(collector.collect(view), CollectorError).value
        self.assertEqual((seen, error.code), (["/tmp/root/srv/s"], 4))
        self.assertEqual(node_path("/", "/srv/s"), "/srv/s")

    def test_statvfs_runs_where_it_is_told(self) -> None:
        """The daemon calls statvfs in a thread: a hung network file system does not hold MonD up."""
        from twisted.internet.defer import Deferred

        calls: list[Any] = []
        pending: Deferred[Any] = Deferred()

        def run(function: Any, *args: Any) -> Any:
            calls.append((function, args))
            return pending
        collector = FileStorage("file", "/", lambda path: statvfs(), run=run)
        d = collector.collect(ClusterView(file_storage_dir="/srv/f"))
        self.assertNoResult(d)
        self.assertEqual(calls[0][1], ("/srv/f",))
        pending.callback(statvfs())
        self.assertEqual(self.successResultOf(d)["size"], 1000 * 4096)


class DaemonStatusTests(SynchronousTestCase):
    def test_figures(self) -> None:
        stat = {"utime": 300, "stime": 100, "starttime": 1000, "rss": 10}
        first = daemon_figures(stat, 1700000000, 100, 4096, 7, 1700000100.0, None)
        self.assertEqual(first, {"memory": 40960, "cpu_seconds": 4.0, "cpu_percent": 0.0,
                                 "start_time": 1700000010.0, "uptime": 90, "open_fds": 7})
        later = daemon_figures(dict(stat, utime=400), 1700000000, 100, 4096, 7, 1700000110.0, (1700000100.0, 4.0))
        self.assertEqual(later["cpu_percent"], 10.0)

    def test_running_and_not(self) -> None:
        files = ProcDir(self, {"stat": STAT, "42/stat": "42 (twistd) S " + " ".join(["1"] * 49)})
        os.makedirs(os.path.join(files.path, "42", "fd"))
        for n in range(3):
            open(os.path.join(files.path, "42", "fd", str(n)), "w").close()
        clock = Clock()
        clock.advance(1700000500)
        pid: list[Any] = [42]
        collector = DaemonStatus("ganeti-noded", False, lambda: pid[0], Host(files.path, clock=clock.seconds))
        data = collector.collect(ClusterView())
        self.assertEqual((data["running"], data["pid"], data["open_fds"], data["status"]["code"]),
                         (True, 42, 3, 0))
        pid[0] = None
        data = collector.collect(ClusterView())
        self.assertEqual((data["running"], data["status"]), (False, {"code": 4,
                                                                     "message": "ganeti-noded is not running"}))
        pid[0] = 43  # holds its pid file, but /proc/43 cannot be read
        self.assertEqual(self.assertRaises(CollectorError, collector.collect, ClusterView()).code, 2)

    def test_master_only(self) -> None:
        collector = DaemonStatus("ganeti-luxid", True, lambda: None, Host())
        self.assertFalse(collector.available(ClusterView(master=False)))
        self.assertTrue(collector.available(ClusterView(master=True)))


class FakeProcess:
    def __init__(self) -> None:
        self.signals: list[str] = []
        self.stdin_closed = False

    def closeStdin(self) -> None:
        self.stdin_closed = True

    def signalProcess(self, signal: str) -> None:
        self.signals.append(signal)


class SpawningClock(Clock):
    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[tuple[Any, str, list[str], dict[str, str]]] = []

    def spawnProcess(self, protocol: Any, executable: str, args: list[str], env: Any = None, path: Any = None) -> Any:
        process = FakeProcess()
        self.spawned.append((protocol, executable, args, env))
        protocol.makeConnection(process)
        return process


class PluginTests(SynchronousTestCase):
    def test_output(self) -> None:
        self.assertEqual(parse_output(b'{"a": 1}'), (None, 0, "1", 1, {"a": 1}))
        self.assertEqual(parse_output(b'{"data": [1], "category": "storage", "kind": 1, "version": "v2"}'),
                         ("storage", 1, "v2", 1, [1]))
        for bad in (b"garbage", b"[1, 2]", b'{"data": 1, "category": "nope"}', b'{"data": 1, "kind": 7}',
                    b'{"data": 1, "kind": true}', b'{"data": 1, "version": 3}', b"\xff\xfe"):
            self.assertRaises(CollectorError, parse_output, bad)

    def test_scan(self) -> None:
        directory = tempfile.mkdtemp(prefix="mond-plugins-")
        self.addCleanup(shutil.rmtree, directory, True)
        for name, mode in (("good", 0o755), ("not-executable", 0o644), (".hidden", 0o755), ("bad name", 0o755)):
            path = os.path.join(directory, name)
            open(path, "w").close()
            os.chmod(path, mode)
        os.mkdir(os.path.join(directory, "dir"))
        self.assertEqual(scan(directory), ["good"])
        self.assertEqual(scan(os.path.join(directory, "missing")), [])

    def run_plugin(self, timeout: float = 5.0) -> tuple[Plugin, Any, SpawningClock, Any]:
        clock = SpawningClock()
        plugin = Plugin("probe", "/plugins", clock, timeout=timeout)
        d = plugin.collect(ClusterView(node="node1.test"))
        protocol, executable, args, env = clock.spawned[0]
        self.assertEqual((executable, args, env["GANETI_NODE"]), ("/plugins/probe", ["/plugins/probe"], "node1.test"))
        return plugin, d, clock, protocol

    def test_good_plugin(self) -> None:
        plugin, d, _clock, protocol = self.run_plugin()
        protocol.outReceived(b'{"data": {"x": 1}, "category": "hypervisor",')
        protocol.outReceived(b' "kind": 1}')
        protocol.processEnded(Failure(ProcessDone(0)))
        self.assertEqual(self.successResultOf(d), {"x": 1})
        self.assertEqual((plugin.category, plugin.kind), ("hypervisor", 1))

    def test_failing_plugin(self) -> None:
        plugin, d, _clock, protocol = self.run_plugin()
        protocol.errReceived(b"disk on fire\n")
        protocol.processEnded(Failure(ProcessTerminated(exitCode=3)))
        error = self.failureResultOf(d, CollectorError).value
        self.assertEqual(error.code, 4)
        self.assertEqual(str(error), "plugin probe failed: it exited with status 3: disk on fire")
        self.assertEqual(plugin.kind, 1)

    def test_hanging_plugin_is_killed(self) -> None:
        _plugin, d, clock, protocol = self.run_plugin(timeout=2)
        clock.advance(2)
        self.assertEqual(protocol.transport.signals, ["KILL"])
        self.assertNoResult(d)
        protocol.processEnded(Failure(ProcessTerminated(signal=9)))
        self.assertIn("it ran longer than 2s and was killed", str(self.failureResultOf(d, CollectorError).value))

    def test_garbage(self) -> None:
        _plugin, d, _clock, protocol = self.run_plugin()
        protocol.outReceived(b"hello")
        protocol.processEnded(Failure(ProcessDone(0)))
        self.assertIn("printed no JSON object", str(self.failureResultOf(d, CollectorError).value))

    def test_stop_kills_a_running_plugin(self) -> None:
        plugin, d, clock, protocol = self.run_plugin(timeout=30)
        plugin.stop()
        self.assertEqual(protocol.transport.signals, ["KILL"])
        protocol.processEnded(Failure(ProcessTerminated(signal=9)))
        self.assertIn("MonD stopped", str(self.failureResultOf(d, CollectorError).value))
        self.assertEqual(clock.getDelayedCalls(), [])  # the timeout is cancelled
        plugin.stop()  # nothing runs any more: no second kill
        self.assertEqual(protocol.transport.signals, ["KILL"])
