"""OP_INSTANCE_GROW_DISK (L{ganeti.cmdlib.instance_disks}) through the
processor on an in-memory WConfD, against fake nodes that keep disk sizes."""

from __future__ import annotations

from typing import Any

from ganeti import errors, opcodes
from ganeti.cmdlib import instance_disks
from ganeti.cmdlib.base import LEVEL_INSTANCE, LEVEL_NODE, LEVEL_NODE_RES
from ganeti.opcodes import typed
from tests.unit.instance_fakes import N2, N3, FakeNodes, _Refused, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

WEB = "web1.example.test"


class SizedNodes(FakeNodes):
    """L{FakeNodes} that also know the size of each disk file (MiB)."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[tuple[str, str], int] = {}

    def _blockdev_create(self, node: str, disk: dict[str, Any], size: int, *args: Any) -> Any:
        path = super()._blockdev_create(node, disk, size, *args)
        self.sizes[(node, path)] = size
        return path

    def _blockdev_grow(self, node: str, disk: dict[str, Any], amount: int, dryrun: bool, backingstore: bool,
                       exclusive: bool) -> Any:
        path = disk["logical_id"][1]
        if (node, path) not in self.sizes:
            raise _Refused("Cannot grow disk: %s does not exist" % path)
        if backingstore and not dryrun:
            self.sizes[(node, path)] += amount
        return None


    def _blockdev_getdimensions(self, node: str, disks: list[dict[str, Any]]) -> Any:
        return [[self.sizes[(node, d["logical_id"][1])] * 1024 * 1024, None]
                if (node, d["logical_id"][1]) in self.sizes else None for d in disks]


def grow(disk: int = 0, amount: int = 1024, name: str = WEB, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": name, "disk": disk, "amount": amount}, **extra)


class GrowDiskTests(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = SizedNodes()
        self.next_id = 100
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": WEB, "mode": "create", "disk_template": "file",
                 "disks": [{"size": 1024}, {"size": 512}], "nics": [{}], "os_type": "noop", "pnode": N2})
        self.rpc.calls.clear()

    def sizes(self, name: str = WEB) -> list[int]:
        cfg = self.env.read_config()
        inst = cfg.find_instance(name)
        assert inst is not None
        return [cfg.disks[d].size for d in inst.disks]

    def file_size(self, index: int, node: str = N2) -> int:
        return self.rpc.sizes[(node, "/srv/ganeti/file-storage/%s/disk%d" % (WEB, index))]

    def test_grow_by_an_amount(self) -> None:
        self.assertIsNone(self.ok(grow(1, 1024)))
        self.assertEqual(self.sizes(), [1024, 1536])
        self.assertEqual(self.file_size(1), 1536)
        grows = [(node, args[1:]) for node, args in self.rpc.calls_of("blockdev_grow")]
        self.assertEqual(grows, [(N2, [1024, True, True, False]), (N2, [1024, False, True, False]),
                                 (N2, [1024, False, False, False])])
        (_node, args), = self.rpc.calls_of("blockdev_grow")[:1]
        self.assertEqual(args[0]["logical_id"][1], "/srv/ganeti/file-storage/%s/disk1" % WEB)
        self.assertIn("Growing disk 1 of instance '%s' by 1.0G to 1.5G" % WEB, self.log)
        self.assertIn(" - INFO: Instance %s sees the new size of disk 1 at its next start" % WEB, self.log)

    def test_grow_to_an_absolute_size(self) -> None:
        self.ok(grow(0, 4096, absolute=True))
        self.assertEqual((self.sizes(), self.file_size(0)), ([4096, 512], 4096))
        message = self.error(grow(0, 2048, absolute=True), code=errors.ECODE_STATE)
        self.assertIn("smaller", message)
        self.assertEqual(self.sizes(), [4096, 512])

    def test_locks(self) -> None:
        cfg = self.env.read_config()
        lu = instance_disks.LUInstanceGrowDisk(typed.from_dict(opcodes.validate(grow())), None, cfg)
        lu.expand_names()
        self.assertEqual(lu.needed_locks, {LEVEL_INSTANCE: [WEB], LEVEL_NODE: [], LEVEL_NODE_RES: []})
        lu.declare_locks(LEVEL_NODE)
        lu.declare_locks(LEVEL_NODE_RES)
        n2 = cfg.find_node(N2).uuid
        self.assertEqual((lu.needed_locks[LEVEL_NODE], lu.needed_locks[LEVEL_NODE_RES]), ([n2], [n2]))
        self.assertEqual(lu.share_locks, {})

    def test_bad_index_and_template(self) -> None:
        self.assertIn("disks 0 to 1", self.error(grow(2), code=errors.ECODE_INVAL))
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "d.example.test", "mode": "create",
                 "disk_template": "diskless", "disks": [], "nics": [{}], "os_type": "noop", "pnode": N3})
        self.assertIn("no disks", self.error(grow(0, name="d.example.test")))
        self.assertIn("not known", self.error(grow(0, name="nosuch"), code=errors.ECODE_NOENT))
        self.assertEqual(self.rpc.calls_of("blockdev_grow"), [])

    def test_not_enough_space(self) -> None:
        self.rpc.free_disk = 100
        self.assertIn("Not enough disk space", self.error(grow(0, 1024), code=errors.ECODE_NORES))
        self.assertEqual((self.rpc.calls_of("blockdev_grow"), self.sizes()), ([], [1024, 512]))

    def test_a_failing_node_changes_nothing(self) -> None:
        self.rpc.fail[("blockdev_grow", None)] = "disk full"
        message = self.error(grow(0, 8), kind="OpExecError")
        self.assertIn("disk full", message)
        self.assertIn("dry run", message)
        self.assertEqual(self.sizes(), [1024, 512])

    def test_sharedfile_grows_once_on_the_primary(self) -> None:
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "s.example.test", "mode": "create",
                 "disk_template": "sharedfile", "disks": [{"size": 256}], "nics": [{}], "os_type": "noop",
                 "pnode": N3})
        self.rpc.calls.clear()
        self.ok(grow(0, 256, name="s.example.test", wait_for_sync=False))
        self.assertEqual(self.sizes("s.example.test"), [512])
        self.assertEqual([n for n, _ in self.rpc.calls_of("blockdev_grow")], [N3, N3, N3])

    def test_dry_run(self) -> None:
        self.ok(grow(0, 1024, dry_run=True))
        self.assertEqual((self.sizes(), self.rpc.calls_of("blockdev_grow")), ([1024, 512], []))
