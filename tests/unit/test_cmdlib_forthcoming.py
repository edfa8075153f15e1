"""Tests for forthcoming instances (L{ganeti.cmdlib.instance_forthcoming}):
C{gnt-instance add --forthcoming} reserves, C{--commit} makes real, the
other LUs refuse one, or (rename, remove, failover) change only the
configuration."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from tests.unit.instance_fakes import N2, N3
from tests.unit.test_cmdlib_instance import WEB, InstanceTestCase, create, op

NODE_WORK = {"blockdev_create", "blockdev_remove", "instance_os_add", "instance_start", "instance_shutdown",
             "instance_run_rename"}


class ForthcomingTestCase(InstanceTestCase):
    def reserve(self, **extra: Any) -> None:
        self.assertEqual(self.ok(create(pnode=N2, forthcoming=True, **extra)), [N2])

    def node_work(self) -> list[str]:
        return [p for p in self.rpc.procedures() if p in NODE_WORK]

    def snapshot(self) -> Any:
        cfg = self.cfg()
        return cfg.instances, cfg.disks


class ReserveTests(ForthcomingTestCase):
    def test_reserves_without_touching_the_nodes(self) -> None:
        self.reserve(disks=[{"size": 10}, {"size": 20}])
        self.assertEqual(self.node_work(), [])
        self.assertEqual(self.rpc.disks.get(N2, set()), set())
        inst = self.instance()
        assert inst is not None
        self.assertTrue(inst.to_dict()["forthcoming"])
        self.assertEqual(inst.admin_state, "down")
        self.assertEqual([d.to_dict()["forthcoming"] for d in self.disks()], [True, True])
        self.assertEqual(self.node_of(), N2)
        self.assertTrue(inst.nics[0].mac)
        self.assertTrue(any("forthcoming" in line for line in self.log), self.log)
        # the name is taken
        self.assertIn("already in the cluster", self.error(create(pnode=N3), code=errors.ECODE_EXISTS))

    def test_forthcoming_and_commit_together(self) -> None:
        before = self.snapshot()
        self.assertIn("mutually exclusive",
                      self.error(create(pnode=N2, forthcoming=True, commit=True), code=errors.ECODE_INVAL))
        self.assertEqual(self.snapshot(), before)
        self.assertEqual(self.rpc.calls, [])

    def test_not_with_an_import(self) -> None:
        self.assertIn("only be created, not imported",
                      self.error(create(pnode=N2, forthcoming=True, mode="import", src_node=N2, src_path="x"),
                                 code=errors.ECODE_INVAL))


class CommitTests(ForthcomingTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.reserve(disks=[{"size": 10}, {"size": 20}], beparams={"memory": 256})
        self.reserved = self.instance()
        self.rpc.calls.clear()

    def test_commit_creates_and_starts(self) -> None:
        self.assertEqual(self.ok(create(commit=True, disks=[{"size": 10}, {"size": 20}])), [N2])
        self.assertEqual([p for p in self.node_work()],
                         ["blockdev_create", "blockdev_create", "instance_os_add", "instance_start"])
        inst = self.instance()
        assert inst is not None and self.reserved is not None
        self.assertEqual(inst.uuid, self.reserved.uuid)
        self.assertEqual(inst.disks, self.reserved.disks)
        self.assertEqual(inst.nics[0].mac, self.reserved.nics[0].mac)
        self.assertFalse(inst.forthcoming)
        self.assertEqual(inst.to_dict()["forthcoming"], False)
        self.assertEqual([d.forthcoming for d in self.disks()], [False, False])
        self.assertEqual(inst.admin_state, "up")
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        # a second commit: the instance is real now
        self.assertIn("not forthcoming but --commit was passed",
                      self.error(create(commit=True, disks=[{"size": 10}, {"size": 20}]), code=errors.ECODE_STATE))

    def test_commit_without_start(self) -> None:
        self.ok(create(pnode=N2, commit=True, start=False, disks=[{"size": 10}, {"size": 20}]))
        self.assertEqual(self.node_work(), ["blockdev_create", "blockdev_create", "instance_os_add"])
        inst = self.instance()
        assert inst is not None
        self.assertEqual(inst.admin_state, "down")

    def test_bad_commits_change_nothing(self) -> None:
        before = self.snapshot()
        self.assertIn("Instance other1.example.test unknown",
                      self.error(create("other1.example.test", commit=True), code=errors.ECODE_NOENT))
        self.assertIn("reserved on node %s, not on %s" % (N2, N3),
                      self.error(create(pnode=N3, commit=True, disks=[{"size": 10}, {"size": 20}]),
                                 code=errors.ECODE_INVAL))
        self.assertIn("reserved disks of 10, 20 MiB, not 10, 30",
                      self.error(create(commit=True, disks=[{"size": 10}, {"size": 30}]), code=errors.ECODE_INVAL))
        self.assertIn("2 reserved disks, not 1", self.error(create(commit=True), code=errors.ECODE_INVAL))
        self.assertIn("disk template file, not sharedfile",
                      self.error(create(commit=True, disk_template="sharedfile", disks=[{"size": 10}, {"size": 20}]),
                                 code=errors.ECODE_INVAL))
        self.assertEqual(self.snapshot(), before)
        self.assertEqual(self.node_work(), [])

    def test_failed_commit_leaves_it_forthcoming(self) -> None:
        self.rpc.fail[("instance_os_add", N2)] = "no space"
        self.assertIn("no space", self.error(create(commit=True, disks=[{"size": 10}, {"size": 20}]),
                                             kind="OpExecError"))
        inst = self.instance()
        assert inst is not None and self.reserved is not None
        self.assertTrue(inst.forthcoming)
        self.assertEqual(inst.uuid, self.reserved.uuid)
        self.assertEqual([d.forthcoming for d in self.disks()], [True, True])
        self.assertEqual(self.rpc.disks.get(N2, set()), set())
        del self.rpc.fail[("instance_os_add", N2)]
        self.ok(create(commit=True, disks=[{"size": 10}, {"size": 20}]))
        self.assertEqual(self.rpc.running_on(N2), {WEB})


class OtherOperationsTests(ForthcomingTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.reserve()
        self.rpc.calls.clear()

    def test_refused(self) -> None:
        before = self.snapshot()
        for opcode in (op("STARTUP"), op("SHUTDOWN"), op("REBOOT", reboot_type="hard"), op("REINSTALL"),
                       op("SET_PARAMS", beparams={"memory": 128}), op("MIGRATE"),
                       op("GROW_DISK", disk=0, amount=10), op("ACTIVATE_DISKS")):
            self.assertIn("forthcoming instances are not supported for this operation",
                          self.error(opcode, code=errors.ECODE_STATE))
        self.assertEqual(self.snapshot(), before)
        self.assertEqual(self.node_work(), [])

    def test_remove(self) -> None:
        self.ok(op("REMOVE"))
        self.assertIsNone(self.instance())
        self.assertEqual(self.cfg().disks, {})
        self.assertEqual(self.node_work(), [])

    def test_rename(self) -> None:
        self.assertEqual(self.ok(op("RENAME", new_name="web2.example.test", name_check=False, ip_check=False)),
                         "web2.example.test")
        self.assertIsNotNone(self.instance("web2.example.test"))
        self.assertEqual(self.node_work(), [])
        self.ok(create("web2.example.test", commit=True))
        self.assertEqual(self.rpc.running_on(N2), {"web2.example.test"})

    def test_query_data(self) -> None:
        data = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": [WEB], "static": True})
        self.assertEqual(data[WEB]["pnode"], N2)


class FailoverTests(ForthcomingTestCase):
    def test_failover_moves_the_reservation(self) -> None:
        self.reserve(disk_template="sharedfile")
        self.rpc.calls.clear()
        self.ok(op("FAILOVER", target_node=N3))
        self.assertEqual(self.node_of(), N3)
        self.assertEqual(self.node_work(), [])
        self.assertIn("Instance is forthcoming, just updating the configuration", self.log)
        self.ok(create(commit=True, disk_template="sharedfile"))
        self.assertEqual(self.rpc.running_on(N3), {WEB})
