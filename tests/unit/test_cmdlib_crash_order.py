"""Multi-step LUs killed between any two steps: the state left behind is
one C{gnt-cluster verify} reports (or a consistent one), and running the
same command again (for a creation: removing the instance) finishes the
job.  A kill is a node call that never answers (the job process frozen at
that point, as if killed) followed by freeing the job's locks, as WConfD
does for a dead job."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from ganeti.jobs import model
from ganeti.rpc import wire
from ganeti.rpc.contract import Runner
from tests.unit.instance_fakes import N2, N3, FakeNodes, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_cmdlib_grow_disk import SizedNodes
from tests.unit.test_cmdlib_instance import WEB, create, op
from tests.unit.test_processor import Env

FILE_DIR = "/srv/ganeti/file-storage/%s" % WEB


class KillableNodes(FakeNodes, Runner):
    """L{FakeNodes} that freeze the job at the C{n}-th call of C{procedure},
    before its effect (C{after} false) or after it."""

    def __init__(self) -> None:
        super().__init__()
        self.kill: tuple[str, int, bool] | None = None
        self.seen: dict[str, int] = {}

    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> Any:
        if self.kill is not None and self.kill[0] == procedure:
            self.seen[procedure] = self.seen.get(procedure, 0) + 1
            if self.seen[procedure] == self.kill[1]:
                if self.kill[2]:
                    await super().call(nodes, procedure, args, **kwargs)
                self.kill = None
                await Deferred()  # never fires: the process is gone
        return await super().call(nodes, procedure, args, **kwargs)


class CrashOrderTestCase(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = KillableNodes()
        self.next_id = 100
        #: the killed jobs, kept from the garbage collector while the test runs
        self.frozen: list[Any] = []

    def killed_at(self, opcode: dict[str, Any], procedure: str, nth: int = 1, after: bool = False) -> None:
        """Run C{opcode} until it is killed at that call; free its locks."""
        self.rpc.kill = (procedure, nth, after)
        self.rpc.seen = {}
        self.next_id += 1
        run = self.env.start(self.next_id, [opcode], rpc_factory=lambda: self.rpc)
        for _ in range(50):
            self.env.advance(1)
        self.assertFalse(run.done.called, "the job was not killed at %s #%d" % (procedure, nth))
        self.assertIsNone(self.rpc.kill, "the job never reached %s #%d" % (procedure, nth))
        self.assertEqual(run.ops[0].status, model.RUNNING)
        self.frozen.append(run)
        self.env.call(self.env.admin.client.free_locks(run.owner))

    def verify(self) -> tuple[bool, list[str]]:
        result = self.verify_cluster()
        return result, [line for line in self.log if "ERROR" in line or "WARNING" in line]

    def web(self) -> Any:
        return self.env.read_config().find_instance(WEB)

    def assert_clean(self) -> None:
        """No trace of the instance anywhere, and verify passes."""
        self.assertIsNone(self.web())
        self.assertEqual(self.rpc.disks.get(N2, set()), set())
        self.assertEqual(self.rpc.running_on(N2), set())
        self.assertEqual(self.verify(), (True, []))


def missing(index: int) -> str:
    return ("  - ERROR: instance %s: disk disk/%d (file %s/disk%d) missing on node %s"
            % (WEB, index, FILE_DIR, index, N2))


class RemoveTests(CrashOrderTestCase):
    """Remove: mark down, stop, remove the disks, drop from the config."""

    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]))
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.verify(), (True, []))

    def rerun(self) -> None:
        self.ok(op("REMOVE", shutdown_timeout=0))
        self.assert_clean()

    def test_killed_before_stopping(self) -> None:
        self.killed_at(op("REMOVE"), "instance_shutdown")
        self.assertEqual(self.web().admin_state, "down", "marked down first: nothing restarts it")
        # verify reports the partial effect (issue 23): marked down, still running
        self.assertEqual(self.verify(), (False, [
            "  - ERROR: instance %s: instance is marked down but runs on its primary node %s (stop it with"
            " gnt-instance shutdown, or mark it up with gnt-instance startup)" % (WEB, N2)]))
        self.rerun()

    def test_killed_after_stopping(self) -> None:
        self.killed_at(op("REMOVE"), "instance_shutdown", after=True)
        self.assertEqual((self.web().admin_state, self.rpc.running_on(N2)), ("down", set()))
        self.assertEqual(self.verify(), (True, []))
        self.rerun()

    def test_killed_after_the_first_disk(self) -> None:
        self.killed_at(op("REMOVE"), "blockdev_remove", 1, after=True)
        self.assertEqual(self.verify(), (False, [missing(0)]))
        self.rerun()

    def test_killed_after_the_last_disk(self) -> None:
        self.killed_at(op("REMOVE"), "blockdev_remove", 2, after=True)
        self.assertEqual(self.web().admin_state, "down")
        self.assertEqual(self.verify(), (False, [missing(0), missing(1)]))
        self.rerun()

    def test_an_instance_marked_up_but_stopped_is_reported(self) -> None:
        """The state of the original report: verify no longer passes."""
        self.rpc.running[N2].clear()
        self.assertEqual(self.verify(), (False, ["  - ERROR: instance %s: instance not running on its primary"
                                                 " node %s" % (WEB, N2)]))


class CreateTests(CrashOrderTestCase):
    """Create: config (down), disks, OS, mark up and start."""

    def repaired_by_remove(self) -> None:
        self.ok(op("REMOVE", shutdown_timeout=0))
        self.assert_clean()

    def test_killed_before_the_first_disk(self) -> None:
        self.killed_at(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]), "blockdev_create")
        self.assertEqual(self.web().admin_state, "down")
        self.assertEqual(self.verify(), (False, [missing(0), missing(1)]))
        self.repaired_by_remove()

    def test_killed_after_the_first_disk(self) -> None:
        self.killed_at(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]), "blockdev_create", 1, after=True)
        self.assertEqual(self.verify(), (False, [missing(1)]))
        self.repaired_by_remove()

    def test_killed_before_the_os_install(self) -> None:
        self.killed_at(create(pnode=N2), "instance_os_add")
        self.assertEqual(self.web().admin_state, "down")
        self.assertEqual(self.verify(), (True, []))
        self.repaired_by_remove()

    def test_killed_before_starting(self) -> None:
        self.killed_at(create(pnode=N2), "instance_start")
        self.assertEqual(self.web().admin_state, "up")
        self.assertEqual(self.verify(), (False, ["  - ERROR: instance %s: instance not running on its primary"
                                                 " node %s" % (WEB, N2)]))
        self.ok(op("STARTUP"))
        self.assertEqual(self.verify(), (True, []))

    def test_a_startup_killed_after_the_start_leaves_a_running_instance_marked_up(self) -> None:
        """(The start before the admin state, killed between the two, would leave it running marked down: the
        watcher would not repair that.)"""
        self.ok(create(pnode=N2, start=False))
        self.killed_at(op("STARTUP"), "instance_start", after=True)
        self.assertEqual((self.web().admin_state, self.verify()), ("up", (True, [])))

    def test_a_startup_killed_before_the_start_leaves_it_marked_up_and_stopped(self) -> None:
        self.ok(create(pnode=N2, start=False))
        self.killed_at(op("STARTUP"), "instance_start")
        self.assertEqual(self.web().admin_state, "up")
        self.assertEqual(self.verify(), (False, ["  - ERROR: instance %s: instance not running on its primary"
                                                 " node %s" % (WEB, N2)]))
        self.ok(op("STARTUP"))
        self.assertEqual(self.verify(), (True, []))

    def test_failed_disk_leaves_nothing(self) -> None:
        self.rpc.fail[("blockdev_create", N2)] = "disk full"
        self.error(create(pnode=N2), kind="OpExecError")
        self.assert_clean()


class SetParamsDiskTests(CrashOrderTestCase):
    """Set-params: remove old disks' files, store the config, create new disks' files."""

    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, disks=[{"size": 10}, {"size": 20}], start=False))

    def test_killed_after_removing_a_disk_file(self) -> None:
        self.killed_at(op("SET_PARAMS", disks=[["remove", 1, {}]]), "blockdev_remove", after=True)
        self.assertEqual(len(self.web().disks), 2, "the config forgets the disk last")
        self.assertEqual(self.verify(), (False, [missing(1)]))
        self.ok(op("SET_PARAMS", disks=[["remove", 1, {}]]))
        self.assertEqual((len(self.web().disks), self.verify()), (1, (True, [])))
        self.assertEqual(self.rpc.disks[N2], {FILE_DIR + "/disk0"})

    def test_killed_before_creating_a_new_disk(self) -> None:
        self.killed_at(op("SET_PARAMS", disks=[["add", {"size": 5}]]), "blockdev_create")
        self.assertEqual(len(self.web().disks), 3, "the config knows the new disk first")
        self.assertEqual(self.verify(), (False, [missing(2)]))
        self.ok(op("SET_PARAMS", disks=[["remove", 2, {}]]))
        self.assertEqual((len(self.web().disks), self.verify()), (2, (True, [])))

    def test_failed_new_disk_is_undone(self) -> None:
        self.rpc.fail[("blockdev_create", N2)] = "disk full"
        self.error(op("SET_PARAMS", disks=[["add", {"size": 5}]], beparams={"vcpus": 3}), kind="OpExecError")
        self.assertEqual(len(self.web().disks), 2)
        self.assertNotIn("vcpus", self.web().beparams, "the other changes are undone too")
        self.assertEqual(self.verify(), (True, []))


class OrphanTests(CrashOrderTestCase):
    def test_instances_running_where_they_should_not(self) -> None:
        self.ok(create(pnode=N2))
        self.rpc.start(N3, WEB)
        self.rpc.start(N3, "ghost.example.test")
        self.assertEqual(self.verify(), (False, [
            "  - ERROR: node %s: instance ghost.example.test on node %s should not exist" % (N3, N3),
            "  - ERROR: instance %s: instance should not run on node %s" % (WEB, N3)]))
        self.verify_cluster(error_codes=True)
        self.assertIn("  - ERROR:EINSTANCEWRONGNODE:instance:%s:instance should not run on node %s" % (WEB, N3),
                      self.log)

    def test_orphan_disk_file_is_a_warning(self) -> None:
        self.rpc.disks[N2] = {"/srv/ganeti/file-storage/gone/disk0"}
        self.assertEqual(self.verify(), (True, [
            "  - WARNING: node %s: disk file /srv/ganeti/file-storage/gone/disk0 is unknown (no disk of the"
            " configuration owns it)" % N2]))


class NodeRemoveTests(CrashOrderTestCase):
    """Node removal: the node leaves, then the config forgets it."""

    def test_killed_after_the_node_left(self) -> None:
        def leave(node: str, *args: Any) -> None:
            self.rpc.down.add(node)

        self.rpc._node_leave_cluster = leave
        self.killed_at({"OP_ID": "OP_NODE_REMOVE", "node_name": N2}, "node_leave_cluster", after=True)
        self.assertIsNotNone(self.env.read_config().find_node(N2), "the config forgets the node last")
        self.assertEqual(self.verify(), (False, ["  - ERROR: node %s: while contacting node: node unreachable:"
                                                 " connection refused" % N2]))
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": N2})
        self.assertIsNone(self.env.read_config().find_node(N2))
        self.assertEqual(self.verify(), (True, []))


class SizedKillableNodes(KillableNodes, SizedNodes):
    """Killable nodes that know their files' sizes and report them to verify."""

    def _node_verify(self, node: str, checks: dict[str, Any], cluster_name: str) -> Any:
        out = super()._node_verify(node, checks, cluster_name)
        if wire.NV_DISK_FILES in out:
            present = checks[wire.NV_DISK_FILES]["present"]
            out[wire.NV_DISK_FILES]["sizes"] = {p: self.sizes[(node, p)] for p in present if (node, p) in self.sizes}
        return out


class GrowDiskTests(CrashOrderTestCase):
    """Grow-disk: grow the file to the target (from its real size), record the size."""

    def setUp(self) -> None:
        super().setUp()
        self.rpc = SizedKillableNodes()
        self.ok(create(pnode=N2, disks=[{"size": 1024}]))

    def recorded(self) -> int:
        cfg = self.env.read_config()
        return cfg.disks[self.web().disks[0]].size

    def test_killed_before_recording_the_size(self) -> None:
        grow = {"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": WEB, "disk": 0, "amount": 512}
        self.killed_at(grow, "blockdev_grow", 3)
        self.assertEqual((self.recorded(), self.rpc.sizes[(N2, FILE_DIR + "/disk0")]), (1024, 1536))
        self.assertEqual(self.verify(), (False, [
            "  - ERROR: instance %s: disk disk/0 (file %s/disk0) on node %s is 1536 MiB, the configuration says"
            " 1024 MiB" % (WEB, FILE_DIR, N2)]))
        self.ok(grow)
        self.assertEqual((self.recorded(), self.rpc.sizes[(N2, FILE_DIR + "/disk0")]), (1536, 1536))
        self.assertEqual(self.verify(), (True, []))
        self.rpc.sizes[(N2, FILE_DIR + "/disk0")] = 4096  # grown behind our back: never shrunk, nor grown more
        self.assertIn("is already 4.0G on node %s, more than 2.0G" % N2, self.error(grow, kind="OpExecError"))
        self.assertEqual((self.recorded(), self.rpc.sizes[(N2, FILE_DIR + "/disk0")]), (1536, 4096))
        self.ok(dict(grow, amount=4096, absolute=True))
        self.assertEqual((self.recorded(), self.verify()), (4096, (True, [])))
