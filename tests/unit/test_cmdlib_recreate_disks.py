"""OP_INSTANCE_RECREATE_DISKS (L{ganeti.cmdlib.disk_recreate}) through the
processor on an in-memory WConfD, against fake nodes that hold disk files."""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from tests.unit.instance_fakes import N2, N3, FakeNodes, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

WEB = "web1.example.test"
FILES = "/srv/ganeti/file-storage/%s/disk%d"


def recreate(name: str = WEB, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": name}, **extra)


class RecreateDisksTests(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = FakeNodes()
        self.next_id = 100
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": WEB, "mode": "create", "disk_template": "file",
                 "disks": [{"size": 1024}, {"size": 512}], "nics": [{}], "os_type": "noop", "pnode": N2,
                 "start": False})
        self.rpc.calls.clear()

    def disks(self, name: str = WEB) -> list[Any]:
        cfg = self.env.read_config()
        inst = cfg.find_instance(name)
        assert inst is not None
        return [cfg.disks[u] for u in inst.disks]

    def primary(self, name: str = WEB) -> str:
        cfg = self.env.read_config()
        inst = cfg.find_instance(name)
        assert inst is not None
        return cfg.nodes[inst.primary_node].name

    def created(self) -> list[tuple[str, str]]:
        return [(node, args[0]["logical_id"][1]) for node, args in self.rpc.calls_of("blockdev_create")]

    def test_missing_disks_are_made_again(self) -> None:
        self.rpc.disks[N2].clear()
        self.assertIsNone(self.ok(recreate()))
        self.assertEqual(self.created(), [(N2, FILES % (WEB, 0)), (N2, FILES % (WEB, 1))])
        self.assertEqual(self.rpc.disks[N2], {FILES % (WEB, 0), FILES % (WEB, 1)})

    def test_one_disk_with_a_new_size_and_mode(self) -> None:
        self.rpc.disks[N2].discard(FILES % (WEB, 1))
        self.ok(recreate(disks=[[1, {"size": 2048, "mode": "ro"}]]))
        self.assertEqual(self.created(), [(N2, FILES % (WEB, 1))])
        (_node, args), = self.rpc.calls_of("blockdev_create")
        self.assertEqual(args[1], 2048)
        self.assertEqual([(d.size, d.mode) for d in self.disks()], [(1024, "rw"), (2048, "ro")])

    def test_deprecated_list_of_indices(self) -> None:
        self.rpc.disks[N2].discard(FILES % (WEB, 0))
        self.ok(recreate(disks=[0]))
        self.assertEqual(self.created(), [(N2, FILES % (WEB, 0))])

    def test_onto_another_node(self) -> None:
        self.ok(recreate(nodes=[N3]))
        self.assertEqual(self.primary(), N3)
        self.assertEqual(self.created(), [(N3, FILES % (WEB, 0)), (N3, FILES % (WEB, 1))])
        cfg = self.env.read_config()
        self.assertEqual({tuple(d.nodes) for d in self.disks()}, {(cfg.find_node(N3).uuid,)})
        self.assertIn(" - WARNING: Changing the instance's nodes, you will have to remove any disks left on the"
                      " older nodes manually", self.log)

    def test_allocator_chooses_the_node(self) -> None:
        self.rpc.disks[N2].clear()
        self.ok(recreate(iallocator="builtin"))
        self.assertEqual(len(self.created()), 2)
        self.assertTrue(any("via iallocator builtin" in line for line in self.log), self.log)

    def test_existing_disk_fails_and_the_made_ones_are_removed(self) -> None:
        self.rpc.disks[N2].discard(FILES % (WEB, 0))
        message = self.error(recreate(), kind="OpExecError")
        self.assertIn("Could not create disk disk/1 of instance %s on node %s: File %s exists already"
                      % (WEB, N2, FILES % (WEB, 1)), message)
        self.assertEqual(self.rpc.disks[N2], {FILES % (WEB, 1)})  # disk 0 made, then removed again

    def test_bad_input_changes_nothing(self) -> None:
        cases = [
            (recreate(disks=[[2, {}]]), "Invalid disk index '2' (instance %s has 2 disks)" % WEB),
            (recreate(disks=[[0, {}], [0, {"size": 10}]]), "Some disks have been specified more than once: 0"),
            (recreate(disks=[[0, {"name": "x"}]]),
             "Parameters for disk 0 try to change unmodifyable parameter(s): name"),
            (recreate(disks=[[0, {"size": "lots"}]]), "size"),
            (recreate(nodes=[N2, N3]), "Instance %s currently has 1 nodes, but 2 replacement nodes were specified"
             % WEB),
            (recreate(nodes=[N3], disks=[[0, {}]]),
             "Can't recreate disks partially and change the nodes at the same time"),
            (recreate(nodes=[N3], iallocator="builtin"), "Give either an allocator or nodes, not both"),
            (recreate("nosuch"), "not known"),
            (recreate(nodes=["nosuch"]), "not known"),
        ]
        before = self.env.read_config()
        for op, expected in cases:
            message = self.error(op)
            self.assertIn(expected, message)
        self.assertEqual(self.rpc.calls, [])
        after = self.env.read_config()
        self.assertEqual(after.instances, before.instances)
        self.assertEqual(after.disks, before.disks)

    def test_running_instance_is_refused(self) -> None:
        self.ok({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": WEB})
        self.rpc.calls.clear()
        message = self.error(recreate(), code=errors.ECODE_STATE)
        self.assertEqual(message, "Instance %s is marked to be up, cannot recreate disks" % WEB)
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": WEB})
        self.rpc.start(N2, WEB)
        self.rpc.calls.clear()
        message = self.error(recreate(), code=errors.ECODE_STATE)
        self.assertEqual(message, "Instance %s is running, cannot recreate disks" % WEB)
        self.assertEqual(self.rpc.calls_of("blockdev_create"), [])

    def test_diskless_is_refused(self) -> None:
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "d.example.test", "mode": "create",
                 "disk_template": "diskless", "disks": [], "nics": [{}], "os_type": "noop", "pnode": N3,
                 "start": False})
        self.assertEqual(self.error(recreate("d.example.test")), "Instance 'd.example.test' has no disks")

    def test_offline_target_is_refused(self) -> None:
        cfg = self.env.read_config()
        node = cfg.find_node(N3)
        from tests.unit.wconfd_helpers import job

        self.env.call(self.env.admin.client.lock_config(job(1)))
        self.env.call(self.env.admin.client.write_config_and_unlock(
            job(1), attrs.evolve(cfg, nodes=dict(cfg.nodes, **{node.uuid: attrs.evolve(node, offline=True)}))))
        self.assertIn("offline node", self.error(recreate(nodes=[N3]), code=errors.ECODE_STATE))
        self.assertEqual(self.rpc.calls, [])
        self.assertEqual(self.primary(), N2)
