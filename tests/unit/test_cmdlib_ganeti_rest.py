"""The rest of Ganeti's opcodes (issue 26) in jobs: OP_RESTRICTED_COMMAND,
OP_TEST_OS_PARAMS, OP_TEST_DUMMY, OP_CLUSTER_DESTROY, OP_INSTANCE_MULTI_ALLOC
and the LVM/DRBD ones Ganeti refuses without such storage
(L{ganeti.cmdlib.lvm_drbd})."""

from __future__ import annotations

from typing import Any

import attrs

from ganeti.jobs import model
from ganeti.objects import Instance
from tests.unit.instance_fakes import MASTER, N2, FakeNodes, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env


class Nodes(FakeNodes):
    def _restricted_command(self, node: str, cmd: str) -> Any:
        return "%s ran on %s\n" % (cmd, node)

    def _node_deactivate_master_ip(self, node: str, params: Any, external: bool) -> Any:
        return None


def with_instance() -> Any:
    cfg = cluster(nodes=0)
    master = next(iter(cfg.nodes))
    inst = Instance(name="vm1.example.test", uuid="inst-uuid", primary_node=master, disk_template="file",
                    os="noop", hypervisor="fake", admin_state="down", beparams={"maxmem": 128})
    return attrs.evolve(cfg, instances={"inst-uuid": inst})


def create(name: str, **more: Any) -> dict[str, Any]:
    return dict({"instance_name": name, "disk_template": "diskless", "disks": [], "nics": [], "os_type": "noop",
                 "mode": "create", "name_check": False, "ip_check": False}, **more)


class RestOfGanetiTests(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = Nodes()
        self.next_id = 0

    def failed(self, op: dict[str, Any], message: str) -> None:
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.ERROR)
        self.assertIn(message, str(qop.result))

    def test_restricted_command_answers_per_node_in_order(self) -> None:
        self.rpc.fail[("restricted_command", N2)] = "Executing command 'hello' failed"
        result = self.ok({"OP_ID": "OP_RESTRICTED_COMMAND", "command": "hello", "nodes": [N2, MASTER]})
        self.assertEqual(result, [[False, "Command 'hello' on node '%s' failed: Executing command 'hello' failed"
                                   % N2], [True, "hello ran on %s\n" % MASTER]])
        self.failed({"OP_ID": "OP_RESTRICTED_COMMAND", "command": "hello", "nodes": ["nosuch"]}, "nosuch")

    def test_test_os_params_logs_the_secrets_or_fails_without(self) -> None:
        self.ok({"OP_ID": "OP_TEST_OS_PARAMS", "osparams_secret": {"password": "x"}})
        self.assertIn("Secret OS parameters: {'password': 'x'}", self.log)
        self.failed({"OP_ID": "OP_TEST_OS_PARAMS"}, "Opcode needs secret parameters")

    def test_test_dummy(self) -> None:
        self.assertEqual(self.ok({"OP_ID": "OP_TEST_DUMMY", "result": [1, 2], "messages": ["a", "b"]}), [1, 2])
        self.assertEqual(self.log, ["a", "b"])
        self.failed({"OP_ID": "OP_TEST_DUMMY", "fail": True}, "failed as requested")
        self.failed({"OP_ID": "OP_TEST_DUMMY", "messages": "a"}, "'messages' must be a list")
        self.follow({"OP_ID": "OP_TEST_DUMMY", "submit_jobs": [[{"OP_ID": "OP_TEST_DUMMY", "result": 3}]]})
        self.assertEqual([[(op["OP_ID"], op["result"]) for op in job] for job in self.submitted],
                         [[("OP_TEST_DUMMY", 3)]])

    def test_cluster_destroy_refused_while_nodes_or_instances_remain(self) -> None:
        others = len(cluster().nodes) - 1
        self.failed({"OP_ID": "OP_CLUSTER_DESTROY"}, "There are still %d node(s) in this cluster." % others)
        self.env = Env(with_instance())
        self.failed({"OP_ID": "OP_CLUSTER_DESTROY"}, "There are still 1 instance(s) in this cluster.")
        alone = cluster(nodes=0)
        self.env = Env(alone)
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_DESTROY"}), alone.cluster.master_node)
        self.assertEqual([n for n, _ in self.rpc.calls_of("node_deactivate_master_ip")], [MASTER])

    def test_multi_alloc_submits_one_creation_job_each(self) -> None:
        self.follow({"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": [
            create("a.example.test", pnode=MASTER), dict(create("b.example.test", pnode=N2), OP_ID="OP_INSTANCE_CREATE")]})
        self.assertEqual([[op["OP_ID"], op["instance_name"], op["pnode"]] for (op,) in self.submitted],
                         [["OP_INSTANCE_CREATE", "a.example.test", MASTER], ["OP_INSTANCE_CREATE", "b.example.test", N2]])
        result = self.ok({"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "dry_run": True,
                          "instances": [create("a.example.test"), create("b.example.test")]})
        self.assertEqual(result, {"allocatable": ["a.example.test", "b.example.test"], "failed": [], "jobs": []})

    def test_multi_alloc_refusals_submit_nothing(self) -> None:
        for instances, message in (
            ([create("a.example.test", pnode=MASTER), create("b.example.test")], "providing pnode/snode"),
            ([create("a.example.test"), create("a.example.test")], "duplicate instance names: a.example.test"),
            ([create("a.example.test", iallocator="hail")], "iallocator are not allowed"),
            ([create("a.example.test", frobnicate=1)], "Instance definition 0"),
            ([dict(create("a.example.test"), OP_ID="OP_INSTANCE_REMOVE")], "not an OP_INSTANCE_CREATE"),
            ([], "No instances to allocate"),
        ):
            self.failed({"OP_ID": "OP_INSTANCE_MULTI_ALLOC", "instances": instances}, message)

    def test_lvm_and_drbd_opcodes_are_refused_as_ganeti_refuses_them(self) -> None:
        node = {"node_name": MASTER}
        self.failed(dict(node, OP_ID="OP_NODE_MODIFY_STORAGE", storage_type="file", name="/srv", changes={}),
                    "Storage units of type 'file' can not be modified")
        self.failed(dict(node, OP_ID="OP_NODE_MODIFY_STORAGE", storage_type="lvm-pv", name="/dev/sda",
                         changes={"size": 1}), "can not be modified for storage units of type 'lvm-pv': ['size']")
        self.failed(dict(node, OP_ID="OP_NODE_MODIFY_STORAGE", storage_type="lvm-pv", name="/dev/sda",
                         changes={"allocatable": False}), "No disk template of storage type 'lvm-vg' is enabled")
        self.failed(dict(node, OP_ID="OP_REPAIR_NODE_STORAGE", storage_type="file", name="/srv"),
                    "Storage units of type 'file' can not be repaired")
        self.failed(dict(node, OP_ID="OP_REPAIR_NODE_STORAGE", storage_type="lvm-vg", name="xenvg"),
                    "No disk template of storage type 'lvm-vg' is enabled")
        self.assertEqual(self.ok({"OP_ID": "OP_NODE_QUERYVOLS", "output_fields": ["node", "name"]}), [])
        self.failed({"OP_ID": "OP_NODE_QUERYVOLS", "output_fields": ["colour"]}, "Unknown output fields selected")
        self.env = Env(with_instance())
        self.failed({"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "vm1", "mode": "replace_on_secondary"},
                    "Can only run replace disks for DRBD8-based instances")
        self.failed({"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "vm1", "mode": "replace_new_secondary"},
                    "either an iallocator script must be used or the new node given")
        self.failed({"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "vm1", "mode": "replace_auto",
                     "remote_node": N2}, "can only be used when changing the secondary node")
        self.assertEqual(self.rpc.calls, [])
