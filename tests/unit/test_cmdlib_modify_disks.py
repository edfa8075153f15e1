"""gnt-instance modify --disk add/attach/detach for the templates ext and
blockdev (L{ganeti.cmdlib.disk_attach}) through the processor against fake
nodes: the records made or kept, what the primary is asked, and refusals
that change nothing."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.cmdlib import disk_convert
from ganeti.objects import Disk
from tests.unit.instance_fakes import N2, N3, cluster
from tests.unit.test_cmdlib_ext import ExtNodes
from tests.unit.test_cmdlib_instance import WEB, InstanceTestCase, create, op

OTHER = "web2.example.test"


class Nodes(ExtNodes):
    def _blockdev_shutdown(self, node: str, disk: dict[str, Any]) -> Any:
        return None


class DiskTestCase(InstanceTestCase):
    config = cluster(enabled_disk_templates=["file", "ext", "blockdev"])

    def setUp(self) -> None:
        super().setUp()
        self.rpc = Nodes()
        self.rpc.devices["/dev/loop8"] = 32

    def ext(self, name: str = WEB) -> None:
        self.ok(create(name, pnode="node2", disk_template="ext", no_install=True, start=False,
                       disks=[{"size": 64, "provider": "loopback", "dir": "/vol"}]))

    def unchanged(self, opcode: dict[str, Any], text: str, code: str | None = None) -> None:
        before = self.cfg()
        self.rpc.calls.clear()
        self.assertIn(text, self.error(opcode, code=code))
        after = self.cfg()
        self.assertEqual((after.instances, after.disks), (before.instances, before.disks))
        self.assertNotIn("blockdev_create", self.rpc.procedures())


class ModifyDiskTests(DiskTestCase):
    def test_ext_add_takes_the_provider_of_the_first_disk(self) -> None:
        self.ext()
        self.rpc.calls.clear()
        result = self.ok(op("SET_PARAMS", disks=[["add", -1, {"size": 32, "dir": "/other"}]]))
        self.assertEqual(result, [["disk/1", "add:size=32,mode=rw"]])
        self.assertEqual(self.rpc.procedures(), ["extstorage_diagnose", "blockdev_create"])
        disk = self.disks()[1]
        self.assertEqual((disk.dev_type, disk.logical_id[0], disk.params, disk.iv_name),
                         ("ext", "loopback", {"provider": "loopback", "dir": "/other"}, "disk/1"))
        self.assertTrue(disk.logical_id[1].endswith(".ext.disk1"))

    def test_ext_add_refusals(self) -> None:
        self.ext()
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"size": 32, "provider": "nope"}]]),
                       "ExtStorage provider nope not found on node node2")
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"size": 32, "pool": "x"}]]),
                       "does not take the parameter(s) pool")
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"size": 32, "adopt": "/dev/loop8"}]]),
                       "only possible with template blockdev")
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"provider": "loopback"}]]), "missing size")

    def test_blockdev_add_adopts_with_the_device_size(self) -> None:
        self.ok(create(pnode="node2", disk_template="blockdev", no_install=True, start=False,
                       disks=[{"adopt": "/dev/loop7"}]))
        self.rpc.calls.clear()
        self.ok(op("SET_PARAMS", disks=[["add", -1, {"adopt": "/dev/loop8"}]]))
        disk = self.disks()[1]
        self.assertEqual((disk.logical_id, disk.size), (["manual", "/dev/loop8"], 32))
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"adopt": "/dev/nope"}]]),
                       "Missing block device(s) on node node2", code=errors.ECODE_NOENT)
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"adopt": "/dev/loop7"}]]), "already adopted")
        self.unchanged(op("SET_PARAMS", disks=[["add", -1, {"size": 10}]]), "needs the block device to adopt")

    def test_detach_then_attach_elsewhere(self) -> None:
        self.ext()
        self.ext(OTHER)
        self.ok(op("SET_PARAMS", disks=[["add", -1, {"size": 32, "name": "data"}]]))
        data = self.disks()[1]
        self.rpc.calls.clear()
        self.assertEqual(self.ok(op("SET_PARAMS", disks=[["detach", "data", {}]])), [["disk/1", "detach"]])
        self.assertEqual(self.rpc.procedures(), ["blockdev_shutdown"])
        self.assertEqual(len(self.disks()), 1)
        self.assertIn(data.uuid, self.cfg().disks)               # kept, without an instance
        self.unchanged(op("SET_PARAMS", disks=[["remove", 0, {}], ["detach", 0, {}]]), "Invalid disk index 0")
        result = self.ok(op("SET_PARAMS", OTHER, disks=[["attach", 0, {"name": "data"}]]))
        self.assertEqual(result, [["disk/0", "attach:size=32,mode=rw"]])
        self.assertEqual([d.uuid for d in self.disks(OTHER)][0], data.uuid)
        self.assertEqual(self.disks(OTHER)[0].iv_name, "disk/0")
        self.unchanged(op("SET_PARAMS", disks=[["attach", -1, {"uuid": data.uuid}]]),
                       "is attached to instance %s" % OTHER, code=errors.ECODE_STATE)

    def test_attach_detach_refusals(self) -> None:
        self.ext()
        self.unchanged(op("SET_PARAMS", disks=[["attach", -1, {"name": "nope"}]]), "Disk with name 'nope' not found",
                       code=errors.ECODE_NOENT)
        self.unchanged(op("SET_PARAMS", disks=[["attach", -1, {"name": "a", "uuid": "b"}]]),
                       "Only one argument is permitted in attach op")
        self.unchanged(op("SET_PARAMS", disks=[["detach", 0, {}]]), "Cannot remove the last disk")
        self.unchanged(op("SET_PARAMS", disks=[["detach", 5, {}]]), "Invalid disk index 5")
        self.ok(create(OTHER, pnode="node2", no_install=True, start=False))
        self.unchanged(op("SET_PARAMS", OTHER, disks=[["detach", 0, {}]]),
                       "Disks of template file cannot be detached here")
        self.ok({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": WEB})
        self.ok(op("SET_PARAMS", disks=[["add", -1, {"size": 32}]]))
        self.unchanged(op("SET_PARAMS", disks=[["detach", 1, {}]]),
                       "stop it before removing disks, or remove them with --hotplug", code=errors.ECODE_STATE)
        self.assertEqual(N2, self.node_of())


class ModifyExtParamsTests(DiskTestCase):
    """C{--disk N:modify,KEY=VALUE} of ext disks, as Ganeti's: the disk's
    parameters change in the configuration (C{default} removes one)."""

    def test_parameters_change(self) -> None:
        self.ext()
        self.rpc.calls.clear()
        result = self.ok(op("SET_PARAMS", disks=[["modify", 0, {"dir": "/vol2", "mode": "ro"}]]))
        self.assertEqual(result, [["disk.mode/0", "ro"], ["disk.params:dir/0", "/vol2"]])
        self.assertEqual(self.rpc.procedures(), ["extstorage_diagnose"])
        disk = self.disks()[0]
        self.assertEqual((disk.params, disk.mode), ({"provider": "loopback", "dir": "/vol2"}, "ro"))
        result = self.ok(op("SET_PARAMS", disks=[[0, {"dir": "default"}]]))  # Ganeti's old format too
        self.assertEqual(result, [["disk.params:dir/0", "default"]])
        self.assertEqual(self.disks()[0].params, {"provider": "loopback"})

    def test_refusals_change_nothing(self) -> None:
        self.ext()
        self.unchanged(op("SET_PARAMS", disks=[["modify", 0, {"pool": "x"}]]),
                       "Disk 0: ExtStorage provider loopback does not take the parameter(s) pool")
        self.unchanged(op("SET_PARAMS", disks=[["modify", 0, {"provider": "other"}]]),
                       "Disk 'provider' parameter change is not possible")
        self.unchanged(op("SET_PARAMS", disks=[["modify", 0, {"access": "userspace"}]]),
                       "Disk 'access' parameter change is not possible")
        self.unchanged(op("SET_PARAMS", disks=[["modify", 0, {"bad-name": "x"}]]),
                       "invalid ExtStorage parameter name")

    def test_other_templates_take_no_parameters(self) -> None:
        self.ok(create(pnode="node2", no_install=True, start=False))
        self.unchanged(op("SET_PARAMS", disks=[["modify", 0, {"dir": "/x"}]]), "Disk 0: unknown parameter 'dir'")


class ConvertTests(DiskTestCase):
    """C{gnt-instance modify -t TEMPLATE}: Ganeti's generic disk template conversion."""

    config = cluster(enabled_disk_templates=["file", "sharedfile", "ext", "blockdev", "diskless"])

    def file(self, name: str = WEB, **extra: Any) -> None:
        self.ok(create(name, pnode="node2", no_install=True, start=False,
                       disks=[{"size": 64, "name": "root"}, {"size": 32, "mode": "ro"}], **extra))

    def test_file_to_ext_and_back(self) -> None:
        self.file()
        old = self.disks()
        self.rpc.calls.clear()
        result = self.ok(op("SET_PARAMS", disk_template="ext",
                            ext_params={"provider": "loopback", "dir": "/vol"}, beparams={"vcpus": 2}))
        self.assertEqual(result, [["be/vcpus", 2], ["disk_template", "ext"]])
        self.assertEqual(self.rpc.procedures(), ["instance_info", "extstorage_diagnose", "blockdev_create",
                                                 "blockdev_create", "blockdev_convert", "blockdev_convert",
                                                 "blockdev_remove", "blockdev_remove"])
        new = self.disks()
        self.assertEqual([(d.dev_type, d.size, d.mode, d.name, d.params) for d in new],
                         [("ext", 64, "rw", "root", {"provider": "loopback", "dir": "/vol"}),
                          ("ext", 32, "ro", None, {"provider": "loopback", "dir": "/vol"})])
        inst = self.instance()
        assert inst is not None
        self.assertEqual((inst.disk_template, inst.beparams.get("vcpus")), ("ext", 2))
        self.assertFalse(set(self.cfg().disks) & {d.uuid for d in old}, "the old disks left the configuration")
        self.assertEqual(self.rpc.disks[N2], {d.logical_id[1] for d in new}, "the old files were removed")
        converts = self.rpc.calls_of("blockdev_convert")
        self.assertEqual([(a[0]["uuid"], a[1]["uuid"]) for _n, a in converts],
                         [(o.uuid, n.uuid) for o, n in zip(old, new)])
        self.ok(op("SET_PARAMS", disk_template="sharedfile", file_driver="loop"))
        self.assertEqual([d.dev_type for d in self.disks()], ["sharedfile", "sharedfile"])

    def test_refusals_change_nothing(self) -> None:
        self.file()
        for opcode, text in [
            (op("SET_PARAMS", disk_template="ext"), "Provider option is missing"),
            (op("SET_PARAMS", disk_template="sharedfile", ext_params={"provider": "loopback"}),
             "requires converting to the 'ext' disk template"),
            (op("SET_PARAMS", ext_params={"provider": "loopback"}), "requires converting to the 'ext'"),
            (op("SET_PARAMS", disk_template="ext", file_driver="loop", ext_params={"provider": "loopback"}),
             "requires converting to a file-based disk template"),
            (op("SET_PARAMS", disk_template="blockdev"), "Conversion to the 'blockdev' disk template is not"),
            (op("SET_PARAMS", disk_template="drbd"), "needs LVM and DRBD, which these nodes cannot run"),
            (op("SET_PARAMS", disk_template="file"), "Instance already has disk template file"),
            (op("SET_PARAMS", disk_template="ext", ext_params={"provider": "loopback", "pool": "x"}),
             "does not take the parameter(s) pool"),
            (op("SET_PARAMS", disk_template="ext", ext_params={"provider": "nope"}), "provider nope not found"),
            (op("SET_PARAMS", disk_template="sharedfile", disks=[["add", -1, {"size": 1}]]),
             "Disk template conversion and other disk changes not supported at the same time"),
        ]:
            self.unchanged(opcode, text)
        self.ok(op("STARTUP"))
        self.unchanged(op("SET_PARAMS", disk_template="sharedfile"), "cannot change disk template")

    def test_same_provider_and_diskless(self) -> None:
        self.ext()
        self.unchanged(op("SET_PARAMS", disk_template="ext", ext_params={"provider": "loopback"}),
                       "Not converting, 'disk/0' of type ExtStorage already using provider 'loopback'")
        self.ok(create("nodisk.example.test", pnode="node2", disk_template="diskless", disks=[], start=False,
                       no_install=True))
        self.unchanged(op("SET_PARAMS", "nodisk.example.test", disk_template="file"),
                       "Conversion from the 'diskless' disk template is not supported")

    def test_failed_copy_removes_the_new_disks(self) -> None:
        self.file()
        before = self.disks()
        self.rpc.fail[("blockdev_convert", N2)] = "I/O error"
        self.assertIn("I/O error", self.error(op("SET_PARAMS", disk_template="sharedfile"), kind="OpExecError"))
        self.assertEqual(self.disks(), before)
        self.assertEqual(len(self.rpc.disks[N2]), 2, "only the old files are left")


class NewPrimaryTests(DiskTestCase):
    """Ganeti's C{gnt-instance modify --new-primary NODE}: the configuration only."""

    config = cluster(enabled_disk_templates=["file", "sharedfile", "ext"])

    def test_sharedfile_instance_changes_node(self) -> None:
        self.ok(create(pnode=N2, disk_template="sharedfile", no_install=True, start=False))
        self.rpc.calls.clear()
        self.ok(op("SET_PARAMS", pnode="node3"))
        self.assertEqual(self.node_of(), N3)
        self.assertEqual(self.rpc.procedures(), ["instance_info"])
        cfg = self.cfg()
        self.assertEqual([cfg.nodes[n].name for n in self.disks()[0].nodes], [N3])
        self.ok(op("STARTUP"))
        self.assertEqual(self.rpc.running_on(N3), {WEB})
        self.unchanged(op("SET_PARAMS", pnode=N2), "Instance is still running on %s" % N3)

    def test_file_disk_must_be_on_the_new_node(self) -> None:
        self.ok(create(pnode=N2, no_install=True, start=False))
        self.unchanged(op("SET_PARAMS", pnode=N3), "is not on node %s: a file disk stays on its node" % N3)
        self.ok(op("SET_PARAMS", pnode=N3, force=True))
        self.assertEqual(self.node_of(), N3)
        self.assertTrue(any("changed anyway" in line for line in self.log), self.log)

    def test_refusals(self) -> None:
        self.ok(create(pnode=N2, disk_template="sharedfile", no_install=True, start=False))
        self.unchanged(op("SET_PARAMS", iallocator="hail"), "only chooses the secondary node of a conversion to drbd")
        self.unchanged(op("SET_PARAMS", remote_node=N3), "only for a conversion to drbd")
        self.unchanged(op("SET_PARAMS", pnode=N3, disk_template="file"), "and the disk template at once")
        self.unchanged(op("SET_PARAMS", pnode="nosuch"), "Node 'nosuch' not known")


class CopyableTests(SynchronousTestCase):
    def test_userspace_rbd_disks_are_not_converted(self) -> None:
        user = Disk(dev_type="rbd", iv_name="disk/0", params={"access": "userspace", "pool": "rbd"})
        with self.assertRaises(errors.OpPrereqError) as caught:
            disk_convert._check_copyable(user)
        self.assertIn("rbd disk with access=userspace", str(caught.exception))
        disk_convert._check_copyable(Disk(dev_type="rbd", params={"access": "kernelspace"}))
        disk_convert._check_copyable(Disk(dev_type="file", params={}))
