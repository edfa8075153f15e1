"""Tests for OP_TEST_ALLOCATOR (L{ganeti.cmdlib.iallocator_debug}): the
request of each mode, the built-in allocator's answer, the LU in a job."""

from __future__ import annotations

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.cmdlib import allocator, iallocator_debug
from ganeti.cmdlib.allocator import NodeState
from ganeti.objects import Instance
from ganeti.opcodes.typed import OpTestAllocator
from tests.unit.instance_fakes import MASTER, N2, FakeNodes, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env


def op_dict(**params: object) -> dict:
    base = {"OP_ID": "OP_TEST_ALLOCATOR", "direction": "in", "mode": "allocate", "name": "new.example.test",
            "memory": 512, "vcpus": 2, "disks": [{"size": 1024, "mode": "rw"}], "disk_template": "file",
            "nics": [{"mac": "aa:00:00:00:00:01", "ip": None, "bridge": None}], "os": "noop", "tags": ["t"],
            "spindle_use": 1, "count": 1}
    base.update(params)
    return base


def op(**params: object) -> OpTestAllocator:
    return OpTestAllocator.from_dict(op_dict(**params))


def with_instance(template: str = "sharedfile") -> object:
    cfg = cluster()
    master = next(u for u, n in cfg.nodes.items() if n.name == MASTER)
    inst = Instance(name="vm1.example.test", uuid="inst-uuid", primary_node=master, disk_template=template,
                    os="noop", hypervisor="fake", admin_state="up", beparams={"maxmem": 128})
    return attrs.evolve(cfg, instances={"inst-uuid": inst})


class RequestTests(SynchronousTestCase):
    def test_allocate(self) -> None:
        placeable = iallocator_debug.build_request(cluster(), op())
        request = placeable.to_dict()
        self.assertEqual(request["type"], "allocate")
        self.assertEqual((request["name"], request["memory"], request["vcpus"], request["disk_space_total"]),
                         ("new.example.test", 512, 2, 1024))
        self.assertEqual(request["nics"], [{"mac": "aa:00:00:00:00:01", "ip": None, "bridge": None}])
        self.assertEqual((request["os"], request["tags"], request["hypervisor"]), ("noop", ["t"], "fake"))
        self.assertEqual(placeable.memory, 512)

    def test_multi_allocate_names_each_instance(self) -> None:
        request = iallocator_debug.build_request(cluster(), op(mode="multi-allocate", count=3)).to_dict()
        self.assertEqual(request["type"], "multi-allocate")
        self.assertEqual([r["name"] for r in request["instances"]],
                         ["new.example.test0", "new.example.test1", "new.example.test2"])
        self.assertTrue(all("type" not in r for r in request["instances"]))

    def test_relocate(self) -> None:
        cfg = with_instance()
        request = iallocator_debug.build_request(cfg, op(mode="relocate", name="vm1")).to_dict(cfg)
        self.assertEqual(request, {"type": "relocate", "name": "vm1.example.test", "disk_space_total": 0,
                                   "required_nodes": 1, "relocate_from": []})

    def test_refusals(self) -> None:
        cases = [
            (with_instance("file"), op(mode="relocate", name="vm1"), "Can't relocate non-mirrored instances"),
            (with_instance(), op(name="vm1.example.test"), "Instance 'vm1.example.test' already in the cluster"),
            (cluster(), op(disks=[{"size": "big", "mode": "rw"}]), "Invalid contents of the 'disks' parameter"),
            (cluster(), op(disks=[{"size": 1, "mode": "wx"}]), "Invalid contents of the 'disks' parameter"),
            (cluster(), op(mode="node-evacuate", instances=None), "Missing instances"),
            (cluster(), op(mode="allocate-secondary"), "Invalid test allocator mode 'allocate-secondary'"),
        ]
        for cfg, opcode, message in cases:
            with self.assertRaises(errors.OpPrereqError) as caught:
                iallocator_debug.build_request(cfg, opcode)
            self.assertEqual(caught.exception.args[0], message)

    def test_evacuate_and_change_group(self) -> None:
        cfg = with_instance()
        request = iallocator_debug.build_request(cfg, op(mode="node-evacuate", instances=["vm1"],
                                                         evac_mode="all")).to_dict(cfg)
        self.assertEqual(request, {"type": "node-evacuate", "instances": ["vm1.example.test"], "evac_mode": "all"})
        request = iallocator_debug.build_request(cfg, op(mode="change-group", instances=["vm1"],
                                                         target_groups=["g2"])).to_dict(cfg)
        self.assertEqual(request, {"type": "change-group", "instances": ["vm1.example.test"], "target_groups": ["g2"]})

    def test_builtin_output(self) -> None:
        placeable = iallocator_debug.build_request(cluster(), op())
        states = [NodeState("a", "a.test", free_memory=256), NodeState("b", "b.test", free_memory=4096)]
        self.assertEqual(serializer.loads(iallocator_debug.builtin_output(placeable, states)),
                         {"success": True, "info": "allocation successful", "result": ["b.test"]})
        answer = serializer.loads(iallocator_debug.builtin_output(placeable, states[:1]))
        self.assertEqual((answer["success"], answer["result"]), (False, []))
        self.assertIn("not enough memory", answer["info"])
        relocate = iallocator_debug.build_request(with_instance(), op(mode="relocate", name="vm1"))
        self.assertFalse(serializer.loads(iallocator_debug.builtin_output(relocate, states))["success"])


class LUTests(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = FakeNodes(memory={N2: 8192})
        self.next_id = 100

    def test_direction_in_is_the_input_with_live_figures(self) -> None:
        data = serializer.loads(self.ok(op_dict()))
        self.assertEqual(data["request"]["type"], "allocate")
        self.assertEqual(data["nodes"][N2]["free_memory"], 8192)
        self.assertEqual(data["nodes"][MASTER]["free_memory"], 4096)
        self.assertEqual(data["cluster_name"], "cluster.example.test")

    def test_direction_out_with_the_builtin_allocator(self) -> None:
        answer = serializer.loads(self.ok(op_dict(direction="out", iallocator=allocator.BUILTIN)))
        self.assertEqual(answer, {"success": True, "info": "allocation successful", "result": [N2]})

    def test_direction_out_needs_an_allocator(self) -> None:
        self.assertEqual(self.error(op_dict(direction="out")), "Missing allocator name")
        self.assertIn("Can't find allocator 'hail'", self.error(op_dict(direction="out", iallocator="hail")))
