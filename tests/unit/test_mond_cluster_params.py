"""The cluster's data collector settings: gnt-cluster modify's options,
OP_CLUSTER_SET_PARAMS, and confd's DATA_COLLECTORS answer that MonD reads."""

from __future__ import annotations

import argparse
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti import daemons, errors, opcodes
from ganeti.client.cluster_init import parse_collector_intervals, parse_collector_states
from ganeti.cmdlib.cluster import data_collectors_changed
from ganeti.jobs import model
from tests.unit.test_processor import ProcessorTestCase


class ClientOptionTests(SynchronousTestCase):
    def test_states(self) -> None:
        self.assertEqual(parse_collector_states("diskstats=false,cpu-avg-load=True,lv=yes,drbd=0"),
                         {"diskstats": False, "cpu-avg-load": True, "lv": True, "drbd": False})
        self.assertRaises(argparse.ArgumentTypeError, parse_collector_states, "diskstats=maybe")
        self.assertRaises(argparse.ArgumentTypeError, parse_collector_states, "diskstats")

    def test_intervals_are_microseconds(self) -> None:
        """Ganeti's conversion: seconds on the command line, microseconds in the config."""
        self.assertEqual(parse_collector_intervals("cpu-avg-load=0.5,diskstats=10"),
                         {"cpu-avg-load": 500000, "diskstats": 10000000})
        for bad in ("diskstats=0", "diskstats=-1", "diskstats=soon"):
            self.assertRaises(argparse.ArgumentTypeError, parse_collector_intervals, bad)


class MergeTests(SynchronousTestCase):
    def test_merge(self) -> None:
        current = {"diskstats": {"active": True, "interval": 5000000}}
        merged = data_collectors_changed(current, {"diskstats": False, "good-plugin": False}, {"diskstats": 1000})
        self.assertEqual(merged, {"diskstats": {"active": False, "interval": 1000},
                                  "good-plugin": {"active": False, "interval": 5000000}})
        self.assertEqual(current, {"diskstats": {"active": True, "interval": 5000000}}, "the input is not changed")

    def test_bad_names(self) -> None:
        for name in ("", "bad name", "../x", "-x"):
            self.assertRaises(errors.OpPrereqError, data_collectors_changed, {}, {name: True}, None)

    def test_opcode_types(self) -> None:
        for params in ({"data_collector_interval": {"diskstats": 0}}, {"enabled_data_collectors": {"lv": "yes"}},
                       {"enabled_data_collectors": ["lv"]}):
            self.assertRaises(errors.OpPrereqError, opcodes.validate, dict({"OP_ID": "OP_CLUSTER_SET_PARAMS"}, **params))
        opcodes.validate({"OP_ID": "OP_CLUSTER_SET_PARAMS", "enabled_data_collectors": {"lv": False},
                          "data_collector_interval": {"lv": 10}})


class SetParamsTests(ProcessorTestCase):
    def test_collectors_change_in_the_config(self) -> None:
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "enabled_data_collectors": {"diskstats": False},
              "data_collector_interval": {"cpu-avg-load": 1000000}}
        job = self.env.execute(1, [op])
        self.assertEqual(job.status, model.SUCCESS, job.ops[0].result)
        collectors = self.env.read_config().cluster.data_collectors
        self.assertFalse(collectors["diskstats"]["active"])
        self.assertEqual(collectors["cpu-avg-load"]["interval"], 1000000)

    def test_bad_name_changes_nothing(self) -> None:
        before = self.env.read_config().cluster
        job = self.env.execute(1, [{"OP_ID": "OP_CLUSTER_SET_PARAMS", "enabled_data_collectors": {"a b": True}}])
        self.assertEqual(job.status, model.ERROR)
        self.assertEqual(job.ops[0].result[0], "OpPrereqError")
        self.assertEqual(self.env.read_config().cluster, before)

    def test_bad_interval_type_is_refused(self) -> None:
        job = self.env.execute(1, [{"OP_ID": "OP_CLUSTER_SET_PARAMS", "data_collector_interval": {"lv": -5}}])
        self.assertEqual(job.status, model.ERROR)


class DaemonsTests(SynchronousTestCase):
    def test_mond_runs_everywhere_last(self) -> None:
        self.assertEqual(daemons.DAEMONS[-1].name, "ganeti-mond")
        self.assertIs(daemons.MOND, daemons.DAEMONS[-1])
        self.assertFalse(daemons.MOND.master_only)
        self.assertEqual((daemons.MOND.port, daemons.MOND.logbase), (1815, "monitoring-daemon"))
        self.assertIs(daemons.spec_by_name("mond"), daemons.MOND)

    def test_mond_options(self) -> None:
        """--bind defaults to the node's primary IP, as for the other daemons."""
        import shutil
        import tempfile

        from twisted.python import usage

        from ganeti.mond.tap import Options
        from ganeti.paths import Paths

        paths = Paths(tempfile.mkdtemp(prefix="mondopt"))
        self.addCleanup(shutil.rmtree, paths.root, True)
        options = Options()
        self.assertRaises(usage.UsageError, options.parseOptions, ["--root", paths.root])
        daemons.write_node_identity(paths, "node2.test", "127.0.1.2")
        options = Options()
        options.parseOptions(["--root", paths.root])
        self.assertEqual((options["bind"], options["port"], options["plugin-dir"]),
                         ("127.0.1.2", 1815, paths.root + "/etc/ganeti/mond/plugins"))


class NodedOptionTests(SynchronousTestCase):
    def test_mond_port(self) -> None:
        from twisted.python import usage

        from ganeti.noded.tap import Options

        def parsed(*args: str) -> Options:
            options = Options()
            options.parseOptions(["--bind", "127.0.1.2", *args])
            return options
        self.assertEqual(parsed()["mond-port"], 1815)
        self.assertEqual(parsed("--mond-port", "0")["mond-port"], 0)
        self.assertEqual(parsed("--mond-port", "18150")["mond-port"], 18150)
        self.assertRaises(usage.UsageError, parsed, "--mond-port", "70000")

    def test_start_mond(self) -> None:
        from twisted.internet.testing import MemoryReactor

        from ganeti.noded.tap import start_mond
        from ganeti.paths import Paths

        class Spawning(MemoryReactor):
            spawned: list[list[str]] = []

            def spawnProcess(self, protocol: Any, executable: str, args: list[str], env: Any = None,
                             path: Any = None) -> None:
                self.spawned.append(args)

        reactor = Spawning()
        start_mond(Paths("/tmp/r"), "127.0.1.2", 0, reactor)
        self.assertEqual(reactor.spawned, [])
        start_mond(Paths("/tmp/r"), "127.0.1.2", 1815, reactor)
        (argv,) = reactor.spawned
        self.assertEqual(argv[-7:], ["ganeti-mond", "--root", "/tmp/r", "--bind", "127.0.1.2", "--port", "1815"])
        self.assertIn("--pidfile=", argv)  # daemonized, as ganeti-daemons starts it


class StartRaceTests(SynchronousTestCase):
    def test_started_meanwhile_by_someone_else(self) -> None:
        """noded starts MonD after a join; a ganeti-daemons start racing it
        finds MonD running (its twistd fails on the pid file) and says so."""
        import shutil
        import subprocess
        import tempfile
        from unittest import mock

        from ganeti.paths import Paths

        paths = Paths(tempfile.mkdtemp(prefix="drace"))
        self.addCleanup(shutil.rmtree, paths.root, True)
        daemons.write_node_identity(paths, "node2.test", "127.0.1.2")
        pids = iter([None, 4242, 4242])
        lines: list[str] = []
        failed = subprocess.CompletedProcess([], 1, "", "ganeti-mond is already running on root %s (pid 4242, "
                                             "pid file x)" % paths.root)
        with mock.patch.object(daemons, "running_pid", lambda p, s: next(pids)), \
                mock.patch.object(daemons, "listening_problem", lambda p, s, a: None), \
                mock.patch.object(subprocess, "run", lambda *a, **k: failed):
            self.assertEqual(daemons.start(paths, ["mond"], out=lines.append), daemons.EXIT_OK)
        self.assertEqual(lines, ["ganeti-mond: already running (pid 4242)"])

    def test_a_daemon_that_failed_is_not_taken_for_a_running_one(self) -> None:
        """A daemon that could not listen may still hold its pid file for an
        instant when twistd reports the failure: that is a failure."""
        import shutil
        import subprocess
        import tempfile
        from unittest import mock

        from ganeti.paths import Paths

        paths = Paths(tempfile.mkdtemp(prefix="drace"))
        self.addCleanup(shutil.rmtree, paths.root, True)
        daemons.write_node_identity(paths, "node2.test", "127.0.1.2")
        lines: list[str] = []
        failed = subprocess.CompletedProcess([], 1, "", "ganeti-noded cannot listen on 127.0.1.2 port 1811 (TCP): busy")
        pids = iter([None, 4242, 4242])
        with mock.patch.object(daemons, "running_pid", lambda p, s: next(pids)), \
                mock.patch.object(daemons, "listening_problem", lambda p, s, a: None), \
                mock.patch.object(subprocess, "run", lambda *a, **k: failed):
            self.assertEqual(daemons.start(paths, ["noded"], out=lines.append), daemons.EXIT_FAILURE)
        self.assertEqual(lines, ["ganeti-noded failed to start: ganeti-noded cannot listen on 127.0.1.2 port 1811 "
                                 "(TCP): busy"])


class LockWaitTests(ProcessorTestCase):
    def test_waits_are_recorded_per_level(self) -> None:
        """Job 2 waits 5 s for the master's node lock job 1 holds; the
        processor writes that into its opcode (C{lock_wait}, queried as
        C{oplockwait}) for RAPI's /metrics."""
        from tests.unit.test_processor import delay

        a = self.env.start(1, [delay(5, no_locks=False)])
        b = self.env.start(2, [delay(5, no_locks=False)])
        self.env.advance(5)
        self.successResultOf(a.done)
        self.env.advance(5)
        self.successResultOf(b.done)
        waited_a, waited_b = a.ops[0].extra["lock_wait"], b.ops[0].extra["lock_wait"]
        self.assertEqual(waited_b["node"], 5.0)
        self.assertEqual(waited_a["node"], 0.0)
        self.assertIn("cluster", waited_b)
        self.assertEqual(b.job.to_dict()["ops"][0]["lock_wait"], waited_b)  # in the job file
        from ganeti.query.resources import JOB_FIELDS

        self.assertIn("oplockwait", JOB_FIELDS)


class CommandTests(SynchronousTestCase):
    def test_modify_submits_the_params(self) -> None:
        from tests.unit.test_cli_commands import following, gnt, submitted_op

        fake = following()
        code, _out, err = gnt("gnt-cluster", "modify", "--enabled-data-collectors", "diskstats=false,lv=true",
                              "--data-collector-interval", "cpu-avg-load=2.5", fake=fake)
        self.assertEqual((code, err), (0, ""))
        op = submitted_op(fake)
        self.assertEqual((op["enabled_data_collectors"], op["data_collector_interval"]),
                         ({"diskstats": False, "lv": True}, {"cpu-avg-load": 2500000}))
        code, _out, err = gnt("gnt-cluster", "modify", "--data-collector-interval", "lv=0", fake=following())
        self.assertEqual(code, 2)
        self.assertIn("the interval must be above zero", err)

    def test_info_shows_the_collectors(self) -> None:
        from tests.unit.test_cli import FakeClient
        from tests.unit.test_cli_commands import gnt

        info = {"name": "c", "uuid": "u", "ctime": 0, "mtime": 0, "master": "n1", "architecture": ["64bits", "x"],
                "tags": [], "default_hypervisor": "fake", "enabled_hypervisors": ["fake"],
                "enabled_disk_templates": ["diskless"], "candidate_pool_size": 10, "master_netdev": "none",
                "file_storage_dir": "", "shared_file_storage_dir": "", "max_running_jobs": 20,
                "max_tracked_jobs": 25, "enabled_data_collectors": {"lv": False, "cpu-avg-load": True},
                "data_collector_interval": {"lv": 5000000, "cpu-avg-load": 500000}}
        class InfoClient(FakeClient):
            def query_cluster_info(self) -> Any:
                return self._answer("QueryClusterInfo")

        code, out, _err = gnt("gnt-cluster", "info", fake=InfoClient(QueryClusterInfo=info))
        self.assertEqual(code, 0)
        self.assertTrue(out.endswith("Data collectors:\n  cpu-avg-load:\n    active: True\n    interval: 0.500s\n"
                                     "  lv:\n    active: False\n    interval: 5.000s\n"), out)
