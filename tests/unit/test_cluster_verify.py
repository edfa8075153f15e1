"""OP_CLUSTER_VERIFY as Ganeti runs it (follow-up jobs: the config job, one
job per group), OP_CLUSTER_VERIFY_GROUP, OP_CLUSTER_VERIFY_DISKS and
OP_GROUP_VERIFY_DISKS, OP_CLUSTER_REPAIR_DISK_SIZES; and the gnt-cluster
commands verify, verify-disks, repair-disk-sizes against a fake LuxiD."""

from __future__ import annotations

import io
from typing import Any

import attrs
from twisted.internet.defer import Deferred

from ganeti.client import gnt_cluster, runner
from ganeti.objects import NodeGroup
from tests.unit.instance_fakes import N2, N3, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_cli import FakeClient
from tests.unit.test_cmdlib_grow_disk import SizedNodes
from tests.unit.test_processor import Env

WEB, DB = "web.example.test", "db.example.test"
FILE_DIR = "/srv/ganeti/file-storage"
GIB = 1024 * 1024 * 1024


def two_groups() -> Any:
    """The master and N2 in group C{default}, N3 in group C{rack2}."""
    cfg = cluster(nodes=2)
    rack = NodeGroup(name="rack2", uuid="rack2-uuid", serial_no=1)
    nodes = {u: (attrs.evolve(n, group=rack.uuid) if n.name == N3 else n) for u, n in cfg.nodes.items()}
    return attrs.evolve(cfg, nodegroups=dict(cfg.nodegroups, **{rack.uuid: rack}), nodes=nodes)


def create(name: str, pnode: str, template: str = "file", sizes: tuple[int, ...] = (1024,)) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": template,
            "disks": [{"size": s} for s in sizes], "nics": [{}], "os_type": "noop", "pnode": pnode}


class HealthyNodes(SizedNodes):
    """Nodes that know their files' sizes and whose node_verify is clean."""

    def _node_verify(self, node: str, checks: dict[str, Any], cluster_name: str) -> Any:
        out = super()._node_verify(node, checks, cluster_name)
        out["cluster_name"] = cluster_name
        return out


class VerifyTestCase(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(two_groups())
        self.rpc = HealthyNodes()
        self.next_id = 100
        self.ok(create(WEB, N2, sizes=(1024, 512)))
        self.ok(create(DB, N3))
        self.rpc.calls.clear()

    def disk_path(self, name: str, index: int) -> str:
        return "%s/%s/disk%d" % (FILE_DIR, name, index)


class ClusterVerifyJobsTests(VerifyTestCase):
    def test_one_config_job_then_one_job_per_group_depending_on_it(self) -> None:
        """Ganeti's jobs, parameters and dependencies; nothing is checked by
        OP_CLUSTER_VERIFY itself."""
        self.assertIs(self.verify_cluster(error_codes=True, ignore_errors=["ENODENET"], verbose=True), True)
        jobs = [[{k: v for k, v in op.items() if k not in ("comment", "reason", "priority", "debug_level")}
                 for op in job] for job in self.submitted]
        common = {"error_codes": True, "ignore_errors": ["ENODENET"], "verbose": True, "debug_simulate_errors": False}
        group = dict(common, OP_ID="OP_CLUSTER_VERIFY_GROUP", skip_checks=[], verify_clutter=False)
        self.assertEqual(jobs, [
            [dict(common, OP_ID="OP_CLUSTER_VERIFY_CONFIG")],
            [dict(group, group_name="default", depends=[[-1, []]])],
            [dict(group, group_name="rack2", depends=[[-2, []]])],
        ])
        self.assertEqual(self.log, [
            "* Verifying cluster config",
            "* Verifying group 'default'", "* Gathering data (2 nodes)", "* Verifying node status",
            "* Verifying group 'rack2'", "* Gathering data (1 nodes)", "* Verifying node status",
        ])

    def test_group_name_submits_that_group_only(self) -> None:
        self.assertIs(self.verify_cluster(group_name="rack2"), True)
        ((op,),) = self.submitted
        self.assertEqual((op["OP_ID"], op["group_name"], op.get("depends")), ("OP_CLUSTER_VERIFY_GROUP", "rack2", None))
        self.assertEqual([name for name, _args in self.rpc.calls_of("node_verify")], [N3])

    def test_unknown_group_is_refused_without_jobs(self) -> None:
        message = self.error({"OP_ID": "OP_CLUSTER_VERIFY", "group_name": "nosuch"}, code="unknown_entity")
        self.assertIn("Node group 'nosuch' not found", message)

    def test_each_group_reports_its_own_instances_and_nodes(self) -> None:
        """A missing disk file of an instance of rack2 is an error of the
        rack2 job; the default group's job passes."""
        self.rpc.disks[N3].discard(self.disk_path(DB, 0))
        self.rpc.down.add(N2)
        jobs = self.follow({"OP_ID": "OP_CLUSTER_VERIFY"})
        self.assertEqual([job.ops[0].result for job in jobs], [True, False, False])
        self.assertIn("  - ERROR: instance %s: disk disk/0 (file %s) missing on node %s"
                      % (DB, self.disk_path(DB, 0), N3), jobs[2].ops[0].log[-1][3])
        default_log = [entry[3] for entry in jobs[1].ops[0].log]
        self.assertIn("  - ERROR: node %s: while contacting node: node unreachable: connection refused" % N2,
                      default_log)
        self.assertFalse([line for line in default_log if DB in line])

    def test_group_job_locks_its_group_instances_and_nodes_shared(self) -> None:
        from tests.unit.test_cmdlib import make_lu

        cfg = self.env.read_config()
        lu = make_lu({"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "rack2"}, cfg)
        lu.declare_locks("instance")
        lu.declare_locks("node")
        n3 = next(u for u, n in cfg.nodes.items() if n.name == N3)
        self.assertEqual((lu.needed_locks["instance"], lu.needed_locks["nodegroup"], lu.needed_locks["node"]),
                         ([DB], ["rack2-uuid"], [n3]))
        self.assertTrue(all(lu.share_locks[level] for level in ("instance", "nodegroup", "node")))

    def test_empty_group_is_skipped(self) -> None:
        cfg = self.env.read_config()
        empty = NodeGroup(name="empty", uuid="empty-uuid", serial_no=1)
        self.env = Env(attrs.evolve(cfg, nodegroups=dict(cfg.nodegroups, **{empty.uuid: empty})))
        self.assertIs(self.ok({"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "empty"}), True)
        self.assertEqual(self.log, ["* Verifying group 'empty'", "* Empty node group, skipping verification"])

    def test_simulated_errors_fail_the_group_job_too(self) -> None:
        self.assertIs(self.ok({"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "rack2",
                               "debug_simulate_errors": True}), False)
        self.assertIn("  - ERROR: group rack2: simulated error (debug_simulate_errors)", self.log)


class VerifyWaitsForTheDistributionTests(VerifyTestCase):
    """A group's verify compares the nodes' ssconf files with the config only
    once WConfD distributed the last change (at most SSCONF_SETTLE seconds)."""

    def setUp(self) -> None:
        super().setUp()
        self.pushes: list[Deferred] = []

        def distributor(data: bytes, serial: int) -> Deferred:
            d: Deferred = Deferred()
            self.pushes.append(d)
            return d

        self.env.service.distributor = distributor
        self.ok({"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["changed"]})
        self.env.advance(1)  # the change's config.data written: its distribution starts, and hangs
        self.assertEqual(len(self.pushes), 1)
        self.rpc.calls.clear()

    def start_verify(self) -> Any:
        self.next_id += 1
        return self.env.start(self.next_id, [{"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "default"}],
                              rpc_factory=lambda: self.rpc)

    def messages(self, run: Any) -> list[str]:
        return [entry[3] for entry in run.ops[0].log]

    def test_it_asks_the_nodes_once_the_distribution_ended_and_says_why_it_waits(self) -> None:
        run = self.start_verify()
        self.env.advance(0.5)
        self.assertEqual(self.rpc.calls_of("node_verify"), [])
        self.assertNotIn("* Gathering data (2 nodes)", self.messages(run))
        self.env.advance(1)
        self.assertIn("* Waiting (at most 30s) for the last configuration change to reach the nodes",
                      self.messages(run))
        self.pushes[0].callback(None)  # ended (a node that missed it would be retried and reported)
        job = self.env.finish(run)
        self.assertEqual(job.ops[0].status, "success", job.ops[0].result)
        self.assertNotEqual(self.rpc.calls_of("node_verify"), [])

    def test_a_distribution_that_does_not_end_delays_verify_by_30_seconds_only(self) -> None:
        run = self.start_verify()
        self.env.advance(29)
        self.assertEqual(self.rpc.calls_of("node_verify"), [])
        job = self.env.finish(run)
        self.assertEqual(job.ops[0].status, "success", job.ops[0].result)
        self.assertNotEqual(self.rpc.calls_of("node_verify"), [])


class VerifyDisksTests(VerifyTestCase):
    def test_cluster_verify_disks_submits_one_job_per_group(self) -> None:
        jobs = self.follow({"OP_ID": "OP_CLUSTER_VERIFY_DISKS"})
        self.assertEqual([op["group_name"] for (op,) in self.submitted], ["default", "rack2"])
        self.assertEqual([job.ops[0].result for job in jobs], [[{}, [], {}], [{}, [], {}]])
        self.follow({"OP_ID": "OP_CLUSTER_VERIFY_DISKS", "group_name": "rack2"})
        self.assertEqual([op["group_name"] for (op,) in self.submitted], ["rack2"])

    def test_missing_files_and_unreachable_nodes(self) -> None:
        """Ganeti's triple: node errors by node, nothing to activate (file
        disks), missing volumes by instance as [node, path]."""
        self.rpc.disks[N2].discard(self.disk_path(WEB, 1))
        del self.rpc.sizes[(N2, self.disk_path(WEB, 1))]
        self.assertEqual(self.ok({"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": "default"}),
                         [{}, [], {WEB: [[N2, self.disk_path(WEB, 1)]]}])
        (call,) = self.rpc.calls_of("blockdev_getdimensions")
        self.assertEqual((call[0], [d["logical_id"][1] for d in call[1][0]]),
                         (N2, [self.disk_path(WEB, 0), self.disk_path(WEB, 1)]))
        self.rpc.down.add(N3)
        self.assertEqual(self.ok({"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": "rack2"}),
                         [{N3: "node unreachable: connection refused"}, [], {}])

    def test_offline_nodes_are_not_asked(self) -> None:
        self.ok({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": N3, "offline": True, "auto_promote": True})
        self.rpc.calls.clear()
        self.assertEqual(self.ok({"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": "rack2"}), [{}, [], {}])
        self.assertEqual(self.rpc.calls_of("blockdev_getdimensions"), [])


class RepairDiskSizesTests(VerifyTestCase):
    def sizes(self, name: str) -> list[int]:
        cfg = self.env.read_config()
        inst = cfg.find_instance(name)
        return [cfg.disks[u].size for u in inst.disks]

    def test_records_the_actual_size(self) -> None:
        self.rpc.sizes[(N2, self.disk_path(WEB, 1))] = 2048
        serial = self.env.read_config().serial_no
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES"}), [[WEB, 1, "size", 2048]])
        self.assertEqual(self.sizes(WEB), [1024, 2048])
        self.assertIn(" - INFO: Disk 1 of instance %s has mismatched size, correcting: recorded 512, actual 2048"
                      % WEB, self.log)
        self.assertEqual(self.env.read_config().serial_no, serial + 1)
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES"}), [], "nothing left to repair")

    def test_named_instances_only_and_missing_disks_change_nothing(self) -> None:
        self.rpc.sizes[(N2, self.disk_path(WEB, 0))] = 4096
        self.rpc.sizes[(N3, self.disk_path(DB, 0))] = 10
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": [DB]}), [[DB, 0, "size", 10]])
        self.assertEqual(self.sizes(WEB), [1024, 512])
        del self.rpc.sizes[(N2, self.disk_path(WEB, 0))]
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": [WEB]}), [])
        self.assertIn(" - WARNING: Disk 0 of instance %s did not return size information, ignoring" % WEB, self.log)
        self.rpc.down.add(N2)
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": [WEB]}), [])
        self.assertTrue(any("Failure in blockdev_getdimensions call to node %s" % N2 in line for line in self.log))

    def test_unknown_instance_is_refused(self) -> None:
        self.error({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": ["nosuch.example.test"]})

    def test_locks(self) -> None:
        from tests.unit.test_cmdlib import make_lu

        lu = make_lu({"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": [WEB]}, self.env.read_config())
        lu.declare_locks("node-res")
        n2 = next(u for u, n in self.env.read_config().nodes.items() if n.name == N2)
        self.assertEqual((lu.needed_locks["instance"], lu.needed_locks["node-res"]), ([WEB], [n2]))
        self.assertEqual((lu.share_locks.get("instance", False), lu.share_locks["node-res"]), (False, True))


# --- the commands ----------------------------------------------------------------------------


class JobsClient(FakeClient):
    """A LuxiD with finished jobs: C{jobs[id] = (status, [opresult], [log message])}."""

    def __init__(self, jobs: dict[int, tuple[str, list[Any], list[str]]], first: int = 10) -> None:
        super().__init__()
        self.jobs = jobs
        self.first = first

    def submit_job(self, ops: list[dict[str, Any]]) -> Any:
        self.calls.append(("SubmitJob", (ops,)))
        return self.first

    def wait_for_job_change(self, job_id: int, fields: list[str], prev: Any, serial: Any, timeout: float) -> Any:
        self.calls.append(("WaitForJobChange", (job_id, fields, prev, serial, timeout)))
        status, _results, logs = self.jobs[job_id]
        if serial is None and logs:
            return [[status], [[i + 1, [0, 0], "message", line] for i, line in enumerate(logs)]]
        return [[status], []]

    def query_jobs(self, job_ids: Any, fields: list[str]) -> Any:
        status, results, _logs = self.jobs[job_ids[0]]
        return [[status, [status] * len(results), results]]


def run(client: FakeClient, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = runner.run("gnt-cluster", gnt_cluster.COMMANDS, list(argv), client_factory=lambda ctx: client,
                               stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def verify_jobs(config_ok: Any, group_ok: Any, group_status: str = "success") -> JobsClient:
    return JobsClient({
        10: ("success", [{"jobs": [[True, 11], [True, 12]]}], []),
        11: ("success", [config_ok], ["* Verifying cluster config"]),
        12: (group_status, [group_ok], ["* Verifying group 'default'", "  - ERROR: node n2: broken"]),
    })


def test_gnt_cluster_verify_follows_the_jobs() -> None:
    client = verify_jobs(True, True)
    code, out, _ = run(client, "verify", "--error-codes", "-I", "ENODERPC", "--node-group", "default")
    assert code == 0
    ((ops,),) = client.args("SubmitJob")
    assert [(op["OP_ID"], op["error_codes"], op["ignore_errors"], op["group_name"]) for op in ops] == [
        ("OP_CLUSTER_VERIFY", True, ["ENODERPC"], "default")]
    assert list(dict.fromkeys(args[0] for args in client.args("WaitForJobChange"))) == [10, 11, 12]
    lines = out.splitlines()
    assert lines[0] == "Submitted jobs 11, 12"
    assert lines[1] == "Waiting for job 11 ..."
    assert lines[2].endswith(" * Verifying cluster config")
    assert lines[3] == "Waiting for job 12 ..."
    assert lines[5].endswith("  - ERROR: node n2: broken")


def test_gnt_cluster_verify_fails_when_a_job_finds_errors_or_fails() -> None:
    assert run(verify_jobs(True, False), "verify")[0] == 1
    assert run(verify_jobs(False, True), "verify")[0] == 1
    code, out, err = run(verify_jobs(True, ["OpExecError", ["boom"]], group_status="error"), "verify")
    assert code == 1
    assert "1 job(s) failed while verifying the cluster." in out and "Job 12 has failed: " in err and "boom" in err


def test_gnt_cluster_verify_disks_reports_like_ganeti() -> None:
    client = JobsClient({
        10: ("success", [{"jobs": [[True, 11], [True, 12]]}], []),
        11: ("success", [[{}, [], {}]], []),
        12: ("success", [[{"n3": "node unreachable"}, [], {"db": [["n2", "/srv/db/disk0"], ["n3", "xenvg/lv"]],
                                                            "web": [["n3", "/y"]]}]], []),
    })
    code, out, _ = run(client, "verify-disks", "--node-group", "rack2")
    assert code == 1
    assert client.args("SubmitJob")[0][0][0]["group_name"] == "rack2"
    assert "No disks need to be activated." in out
    assert "Error gathering data on node n3: node unreachable" in out
    assert "Instance db has missing logical volumes:\n\tn2 /srv/db/disk0\n\tbroken node n3 /dev/xenvg/lv\n" in out
    assert "Instance web cannot be verified as it lives on broken nodes" in out
    clean = JobsClient({10: ("success", [{"jobs": [[True, 11]]}], []), 11: ("success", [[{}, [], {}]], [])})
    code, out, _ = run(clean, "verify-disks")
    assert (code, out.splitlines()[-1]) == (0, "No disks need to be activated.")


def test_gnt_cluster_modify_follows_the_jobs_it_submitted() -> None:
    """As Ganeti's: the jobs that connect the instance communication network end before the command does, and
    one that failed makes it fail."""
    done = JobsClient({10: ("success", [{"jobs": [[True, 11]]}], []), 11: ("success", [None], [])})
    code, out, _ = run(done, "modify", "--instance-communication-network", "comm-net")
    assert code == 0 and list(dict.fromkeys(args[0] for args in done.args("WaitForJobChange"))) == [10, 11]
    assert out.splitlines()[:2] == ["Submitted jobs 11", "Waiting for job 11 ..."]
    failed = JobsClient({10: ("success", [{"jobs": [[True, 11]]}], []),
                         11: ("error", [["OpPrereqError", ["no such group", "wrong_input"]]], [])})
    code, out, err = run(failed, "modify", "--instance-communication-network", "comm-net")
    assert code == 1 and "Job 11 has failed: " in err and "job(s) failed." in out
    assert run(JobsClient({10: ("success", [None], [])}), "modify", "-C", "5")[0] == 0


def test_gnt_cluster_repair_disk_sizes() -> None:
    client = JobsClient({10: ("success", [[["web", 1, "size", 2048]]],
                              [" - INFO: Disk 1 of instance web has mismatched size"])})
    code, out, _ = run(client, "repair-disk-sizes", "web", "db")
    assert code == 0 and "Disk 1 of instance web has mismatched size" in out
    ((ops,),) = client.args("SubmitJob")
    assert (ops[0]["OP_ID"], ops[0]["instances"]) == ("OP_CLUSTER_REPAIR_DISK_SIZES", ["web", "db"])
    assert run(JobsClient({10: ("success", [[]], [])}), "repair-disk-sizes")[0] == 0



def test_low_free_space_in_the_data_directory_is_a_warning_naming_it() -> None:
    """Under 50 MiB or 5 % free in a node's data directory: a warning (jobs fail when it is full)."""
    from ganeti.cmdlib.verify import low_space

    path = "/var/lib/ganeti"
    assert low_space({"path": path, "free": 900, "total": 10000}) is None
    assert low_space(None) is None  # a node that does not know the check
    warning = low_space({"path": path, "free": 40, "total": 100000})
    assert warning is not None and warning.startswith("free space in /var/lib/ganeti is low: 40 MiB of 100000 MiB")
    assert low_space({"path": path, "free": 400, "total": 10000}) is not None  # 4 %
    assert "cannot read the free space" in (low_space({"path": path, "error": "EIO"}) or "")
