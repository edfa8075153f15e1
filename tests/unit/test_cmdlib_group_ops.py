"""OP_GROUP_ASSIGN_NODES and OP_GROUP_SET_PARAMS (L{ganeti.cmdlib.group}):
their locks, the split-instance check, the parameter checks of
L{ganeti.cmdlib.group_params}, and the LUs run through the processor on an
in-memory WConfD."""

from __future__ import annotations

from typing import Any

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.cmdlib import group as cmdgroup
from ganeti.cmdlib import group_params as gparams
from ganeti.cmdlib.base import LEVEL_NODE, LEVEL_NODEGROUP
from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import ConfigData, NodeGroup, new_uuid
from ganeti.opcodes import typed
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

MASTER = "node1.example.test"
N2, N3, N4 = "node2.example.test", "node3.example.test", "node4.example.test"
STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}


def two_groups() -> ConfigData:
    """node1..node4 in "default" with inst1..inst4 (one per node, file disks),
    an empty group "rack2", and inst2 made mirrored over node2 and node3."""
    cfg = grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=3, instances=4)
    rack2 = NodeGroup(name="rack2", uuid=new_uuid(), alloc_policy="preferred", **STAMP)
    inst2 = cfg.find_instance("inst2.example.test")
    n3 = cfg.find_node(N3)
    assert inst2 is not None and n3 is not None
    disk = cfg.disks[inst2.disks[0]]
    mirrored = attrs.evolve(disk, dev_type="drbd", nodes=[inst2.primary_node, n3.uuid])
    return attrs.evolve(cfg, nodegroups=dict(cfg.nodegroups, **{rack2.uuid: rack2}),
                        disks=dict(cfg.disks, **{disk.uuid: mirrored}),
                        instances=dict(cfg.instances, **{inst2.uuid: attrs.evolve(inst2, disk_template="drbd")}))


def assign(group: str, *nodes: str, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": group, "nodes": list(nodes)}, **extra)


def modify(group: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": group}, **params)


class GroupTestCase(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(two_groups())
        self.rpc = None  # these LUs do not talk to the nodes
        self.next_id = 100

    def group_of(self, node: str) -> str | None:
        cfg = self.env.read_config()
        found = cfg.find_node(node)
        assert found is not None
        return cfg.nodegroups[found.group].name

    def group(self, name: str) -> NodeGroup:
        found = self.env.read_config().find_group(name)
        assert found is not None
        return found


class AssignNodesTests(GroupTestCase):
    def test_locks_target_and_current_groups_and_the_nodes(self) -> None:
        cfg = self.env.read_config()
        lu = cmdgroup.LUGroupAssignNodes(typed.from_dict(opcodes.validate(assign("rack2", "node2", N4))), None, cfg)
        lu.expand_names()
        rack2 = cfg.find_group("rack2").uuid
        default = cfg.find_group("default").uuid
        n2, n4 = cfg.find_node(N2).uuid, cfg.find_node(N4).uuid
        self.assertEqual(lu.needed_locks, {LEVEL_NODEGROUP: [rack2], LEVEL_NODE: [n2, n4]})
        self.assertEqual(lu.share_locks, {})
        self.assertEqual(lu.op.nodes, [N2, N4], "short names are expanded")
        self.assertEqual(lu.op.node_uuids, [n2, n4])
        lu.declare_locks(LEVEL_NODEGROUP)
        self.assertEqual(sorted(lu.needed_locks[LEVEL_NODEGROUP]), sorted([rack2, default]))

    def test_move_and_move_back(self) -> None:
        self.assertIsNone(self.ok(assign("rack2", N4)))
        self.assertEqual((self.group_of(N4), self.group_of(N2)), ("rack2", "default"))
        self.assertEqual(self.env.read_config().find_node(N4).serial_no, 2)
        self.ok(assign("rack2", N4))  # already there: nothing changes
        self.assertEqual(self.env.read_config().find_node(N4).serial_no, 2)
        self.ok(assign("default", N4))
        self.assertEqual(self.group_of(N4), "default")

    def test_instances_move_with_their_node(self) -> None:
        self.ok(assign("rack2", MASTER))
        self.assertEqual(self.group_of(MASTER), "rack2")

    def test_refuses_to_split_a_mirrored_instance_unless_forced(self) -> None:
        message = self.error(assign("rack2", N2), code=errors.ECODE_STATE)
        self.assertIn("inst2.example.test", message)
        self.assertIn("--force", message)
        self.assertEqual(self.group_of(N2), "default")
        self.ok(assign("rack2", N2, N3))  # both its nodes: not split
        self.assertEqual((self.group_of(N2), self.group_of(N3)), ("rack2", "rack2"))
        self.ok(assign("default", N3, force=True))
        self.assertIn(" - WARNING: This operation will split the following instances: inst2.example.test",
                      self.log)
        self.assertEqual(self.group_of(N3), "default")

    def test_split_instances(self) -> None:
        cfg = self.env.read_config()
        rack2 = cfg.find_group("rack2").uuid
        n2, n3 = cfg.find_node(N2).uuid, cfg.find_node(N3).uuid
        self.assertEqual(cmdgroup.split_instances(cfg, {n2: rack2}), (["inst2.example.test"], []))
        self.assertEqual(cmdgroup.split_instances(cfg, {n2: rack2, n3: rack2}), ([], []))
        moved = attrs.evolve(cfg, nodes=dict(cfg.nodes, **{n2: attrs.evolve(cfg.nodes[n2], group=rack2)}))
        self.assertEqual(cmdgroup.split_instances(moved, {}), ([], ["inst2.example.test"]))

    def test_unknown_group_or_node(self) -> None:
        self.assertIn("nosuch", self.error(assign("nosuch", N2), code=errors.ECODE_NOENT))
        self.assertIn("nosuch", self.error(assign("rack2", "nosuch"), code=errors.ECODE_NOENT))

    def test_dry_run_changes_nothing(self) -> None:
        self.ok(assign("rack2", N4, dry_run=True))
        self.assertEqual(self.group_of(N4), "default")


class SetParamsTests(GroupTestCase):
    def test_alloc_policy_and_node_parameters(self) -> None:
        result = self.ok(modify("rack2", alloc_policy="last_resort", ndparams={"ssh_port": "2222", "ovs": "yes"}))
        group = self.group("rack2")
        self.assertEqual((group.alloc_policy, group.ndparams), ("last_resort", {"ssh_port": 2222, "ovs": True}))
        self.assertEqual(result, [["alloc_policy", "last_resort"], ["ndparams", str({"ssh_port": 2222, "ovs": True})]])
        self.assertEqual(group.serial_no, 2)
        self.ok(modify("rack2", ndparams={"ssh_port": "default", "cpu_speed": "1.5"}))
        self.assertEqual(self.group("rack2").ndparams, {"ovs": True, "cpu_speed": 1.5})

    def test_empty_dicts_change_nothing(self) -> None:
        """Ganeti's gnt-group modify sends {} for what it leaves alone: not shown as a change."""
        result = self.ok(modify("rack2", alloc_policy="last_resort", ndparams={}, diskparams={}, ipolicy={},
                                hv_state={}, disk_state={}))
        self.assertEqual(result, [["alloc_policy", "last_resort"]])
        group = self.group("rack2")
        self.assertEqual((group.diskparams, group.hv_state_static, group.disk_state_static), ({}, None, None))

    def test_disk_parameters_and_policy(self) -> None:
        self.ok(modify("default", diskparams={"plain": {"stripes": 2}, "file": {}},
                       ipolicy={"vcpu-ratio": "2.5", "disk-templates": ["file", "sharedfile"],
                                "minmax": [{"min": {"memory-size": 128}, "max": {"memory-size": "4096"}}]}))
        group = self.group("default")
        self.assertEqual(group.diskparams, {"plain": {"stripes": 2}, "file": {}})
        self.assertEqual(group.ipolicy, {"vcpu-ratio": 2.5, "disk-templates": ["file", "sharedfile"],
                                         "minmax": [{"min": {"memory-size": 128}, "max": {"memory-size": 4096}}]})
        self.ok(modify("default", diskparams={"plain": {"stripes": "default"}}, ipolicy={"vcpu-ratio": "default"}))
        group = self.group("default")
        self.assertEqual((group.diskparams["plain"], "vcpu-ratio" in group.ipolicy), ({}, False))

    def test_static_state(self) -> None:
        self.ok(modify("rack2", hv_state={"fake": {"mem_total": "4096"}},
                       disk_state={"file": {"/srv": {"disk_total": 100}}}))
        group = self.group("rack2")
        self.assertEqual(group.hv_state_static, {"fake": {"mem_total": 4096}})
        self.assertEqual(group.disk_state_static, {"file": {"/srv": {"disk_total": 100}}})
        self.ok(modify("rack2", hv_state={"fake": {"cpu_total": 4}}))
        self.assertEqual(self.group("rack2").hv_state_static, {"fake": {"mem_total": 4096, "cpu_total": 4}})

    def test_refused(self) -> None:
        for params, why in [
            ({}, "at least one modification"),
            ({"ndparams": {"colour": "red"}}, "colour"),
            ({"ndparams": {"ssh_port": "many"}}, "ssh_port"),
            ({"diskparams": {"floppy": {}}}, "floppy"),
            ({"diskparams": {"plain": {"stripes": [1]}}}, "stripes"),
            ({"ipolicy": {"std": {"memory-size": 128}}}, "std"),
            ({"ipolicy": {"vcpu-ratio": 0}}, "vcpu-ratio"),
            ({"ipolicy": {"disk-templates": ["floppy"]}}, "floppy"),
            ({"ipolicy": {"minmax": [{"min": {"cpu-count": 4}, "max": {"cpu-count": 2}}]}}, "cpu-count"),
            ({"ipolicy": {"minmax": [{"min": {}}]}}, "min"),
            ({"hv_state": {"vmware": {}}}, "vmware"),
            ({"disk_state": {"file": {"/srv": {"disk_free": 1}}}}, "disk_free"),
        ]:
            self.assertIn(why, self.error(modify("rack2", **params), code=errors.ECODE_INVAL), params)
        self.assertIn("nosuch", self.error(modify("nosuch", alloc_policy="preferred"), code=errors.ECODE_NOENT))
        self.assertEqual(self.group("rack2").serial_no, 1)

    def test_locks_the_group_only(self) -> None:
        cfg = self.env.read_config()
        opcode = typed.from_dict(opcodes.validate(modify("rack2", alloc_policy="preferred")))
        lu = cmdgroup.LUGroupSetParams(opcode, None, cfg)
        lu.check_arguments()
        lu.expand_names()
        self.assertEqual(lu.needed_locks, {LEVEL_NODEGROUP: [cfg.find_group("rack2").uuid]})


class GroupParamsTests(SynchronousTestCase):
    def test_merging(self) -> None:
        self.assertEqual(gparams.merged_nested({"plain": {"a": 1}, "drbd": {"b": 2}},
                                               {"plain": {"a": gparams.DEFAULT, "c": 3}, "file": {"d": 4}}),
                         {"plain": {"c": 3}, "drbd": {"b": 2}, "file": {"d": 4}})
        self.assertEqual(gparams.merged_disk_state({"file": {"/a": {"disk_total": 1}}},
                                                   {"file": {"/a": {"disk_reserved": 2}, "/b": {"disk_total": 3}}}),
                         {"file": {"/a": {"disk_total": 1, "disk_reserved": 2}, "/b": {"disk_total": 3}}})
        self.assertEqual(gparams.check_ipolicy({"disk-templates": "default", "minmax": ["default"]}),
                         {"disk-templates": gparams.DEFAULT, "minmax": gparams.DEFAULT})
