"""Instance creation with templates ext and blockdev (L{ganeti.cmdlib.ext_disks})
through the processor against fake nodes: what the primary is asked, the
disk records, and refusals before anything is made."""

from __future__ import annotations

from typing import Any

from ganeti.jobs import model
from tests.unit.instance_fakes import N2, FakeNodes, cluster
from tests.unit.test_cmdlib_instance import InstanceTestCase, create

LOOPBACK = ["loopback", "/usr/lib/x/loopback", True, "", [["dir", "Where"]]]
BROKEN = ["broken", "/srv/ganeti/extstorage/broken", False, "File 'parameters.list' is missing", []]


class ExtNodes(FakeNodes):
    def __init__(self) -> None:
        super().__init__()
        self.providers = [LOOPBACK, BROKEN]
        self.devices = {"/dev/loop7": 48}

    def _extstorage_diagnose(self, node: str) -> Any:
        return self.providers

    def _bdev_sizes(self, node: str, devices: list[str]) -> Any:
        return {d: self.devices[d] for d in devices if d in self.devices}


class ExtCreateTests(InstanceTestCase):
    config = cluster(enabled_disk_templates=["file", "ext", "blockdev"])

    def setUp(self) -> None:
        super().setUp()
        self.rpc = ExtNodes()

    def refused(self, opcode: dict[str, Any], text: str) -> None:
        before = len(self.rpc.calls)
        qop = self.run_op(opcode)
        self.assertEqual(qop.status, model.ERROR, qop.result)
        self.assertIn(text, str(qop.result))
        self.assertNotIn("blockdev_create", [c[0] for c in self.rpc.calls[before:]])
        self.assertIsNone(self.instance(opcode["instance_name"]))

    def test_ext_disk(self) -> None:
        self.ok(create(pnode="node2", disk_template="ext", no_install=True, start=False,
                       disks=[{"size": 64, "provider": "loopback", "dir": "/vol", "access": "userspace"}]))
        self.assertEqual(self.rpc.procedures(), ["os_diagnose", "os_validate", "extstorage_diagnose",
                                                 "blockdev_create"])
        ((node, args),) = self.rpc.calls_of("blockdev_create")
        self.assertEqual(node, N2)
        (disk,) = self.disks()
        self.assertEqual(disk.dev_type, "ext")
        self.assertEqual(disk.logical_id[0], "loopback")
        self.assertTrue(disk.logical_id[1].endswith(".ext.disk0"))
        self.assertEqual(disk.params, {"provider": "loopback", "dir": "/vol", "access": "userspace"})
        self.assertEqual((disk.nodes, disk.size), ([], 64))
        self.assertEqual(args[0]["logical_id"], disk.logical_id)

    def test_ext_refusals_change_nothing(self) -> None:
        for disk, text in [({"size": 64, "provider": "nope"}, "ExtStorage provider nope not found on node node2"),
                           ({"size": 64, "provider": "broken"}, "ExtStorage provider broken is invalid on node"),
                           ({"size": 64, "provider": "loopback", "pool": "x"}, "does not take the parameter(s) pool"),
                           ({"size": 64}, "needs an ExtStorage provider")]:
            self.refused(create(pnode="node2", disk_template="ext", disks=[disk]), text)

    def test_blockdev_adoption(self) -> None:
        self.ok(create(pnode="node2", disk_template="blockdev", no_install=True, start=False,
                       disks=[{"adopt": "/dev/loop7"}]))
        (disk,) = self.disks()
        self.assertEqual((disk.dev_type, disk.logical_id, disk.size), ("blockdev", ["manual", "/dev/loop7"], 48))
        self.refused(create("web2.example.test", pnode="node2", disk_template="blockdev",
                            disks=[{"adopt": "/dev/loop7"}]), "already adopted")

    def test_blockdev_refusals_change_nothing(self) -> None:
        self.refused(create(pnode="node2", disk_template="blockdev", disks=[{"adopt": "/dev/nope"}]),
                     "Missing block device(s) on node node2")
        self.refused(create(pnode="node2", disk_template="blockdev", disks=[{"adopt": "/dev/loop7"},
                                                                          {"adopt": "/dev/loop7"}]),
                     "adopted twice")
        self.refused(create(iallocator="builtin", disk_template="blockdev", disks=[{"adopt": "/dev/loop7"}]),
                     "not possible with an allocator")
