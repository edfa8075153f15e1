"""LU hooks, the master's side: the environment, the phases around Exec, config-update."""

from __future__ import annotations

from typing import Any

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.cmdlib import hooks, hooks_env
from ganeti.jobs import model
from ganeti.objects import NIC, Disk, Network
from ganeti.rpc import RpcResult
from tests.unit.instance_fakes import FakeNodes
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import DelayNodes, Env
from tests.unit.wconfd_helpers import MASTER, make_config

MASTER_NAME = MASTER


class EnvironmentTests(SynchronousTestCase):
    def test_fixed_variables_and_strings(self) -> None:
        """Every script gets Ganeti's fixed variables; every value is a string."""
        env = hooks.full_env("OP_GROUP_ADD", "group-add", "pre", hooks.prefixed({"GROUP_NAME": "g", "N": 3}, "pre"),
                             htype="GROUP", cluster="c.test", master="m.test")
        self.assertEqual(env, {
            "PATH": "/sbin:/bin:/usr/sbin:/usr/bin", "GANETI_HOOKS_VERSION": "2", "GANETI_OP_CODE": "OP_GROUP_ADD",
            "GANETI_DATA_DIR": "/var/lib/ganeti", "GANETI_HOOKS_PHASE": "pre", "GANETI_HOOKS_PATH": "group-add",
            "GANETI_OBJECT_TYPE": "GROUP", "GANETI_CLUSTER": "c.test", "GANETI_MASTER": "m.test",
            "GANETI_GROUP_NAME": "g", "GANETI_N": "3"})

    def test_post_prefix(self) -> None:
        self.assertEqual(hooks.prefixed({"A": 1}, "post"), {"GANETI_POST_A": 1})
        self.assertRaises(errors.ProgrammerError, hooks.prefixed, {"GANETI_A": 1}, "pre")
        self.assertRaises(errors.ProgrammerError, hooks.full_env, "OP", "p", "pre", {"GANETI_OP_CODE": "x"})

    def test_failures_of_results(self) -> None:
        """Offline nodes count for nothing, a silent node is a note, failed scripts are collected."""
        results = {
            "a": RpcResult("a", True, [["x-pre.d/1", hooks.HKR_SUCCESS, ""], ["x-pre.d/2", hooks.HKR_FAIL, "no"],
                                       ["x-pre.d/3", hooks.HKR_SKIP, ""]]),
            "b": RpcResult.failure("b", "node unreachable: connection refused"),
            "c": RpcResult.failure("c", "node offline", offline=True),
        }
        self.assertEqual(hooks.failures(results), (
            [("a", "x-pre.d/2", "no")], ["Communication failure to node b: node unreachable: connection refused"]))

    def test_instance_environment(self) -> None:
        """Ganeti's INSTANCE_* variables: nodes by name, filled parameters, NICs with their network, disks."""
        cfg = make_config(nodes=2, instances=1)
        inst = next(iter(cfg.instances.values()))
        net = Network(name="net1", uuid="n-uuid", network="10.0.0.0/24", gateway="10.0.0.1", tags=["t1"])
        nic = NIC(mac="aa:00:00:00:00:01", ip="10.0.0.5", network="n-uuid", uuid="nic-uuid",
                  nicparams={"mode": "bridged", "link": "br0"})
        inst = attrs.evolve(inst, nics=[nic], tags=["a", "b"], admin_state="up")
        cfg = attrs.evolve(cfg, networks={"n-uuid": net}, instances={inst.uuid: inst})
        env = hooks_env.instance_env(cfg, inst)
        primary = cfg.nodes[inst.primary_node].name
        disk: Disk = cfg.disks[inst.disks[0]]
        expected = {
            "OP_TARGET": inst.name, "INSTANCE_NAME": inst.name, "INSTANCE_PRIMARY": primary,
            "INSTANCE_STATUS": "up", "INSTANCE_TAGS": "a b", "INSTANCE_NIC_COUNT": 1,
            "INSTANCE_NIC0_IP": "10.0.0.5", "INSTANCE_NIC0_MODE": "bridged", "INSTANCE_NIC0_LINK": "br0",
            "INSTANCE_NIC0_BRIDGE": "br0", "INSTANCE_NIC0_NETWORK_NAME": "net1",
            "INSTANCE_NIC0_NETWORK_SUBNET": "10.0.0.0/24", "INSTANCE_NIC0_NETWORK_GATEWAY": "10.0.0.1",
            "INSTANCE_NIC0_NETWORK_TAGS": "t1", "INSTANCE_DISK_COUNT": 1,
            "INSTANCE_DISK0_SIZE": disk.size, "INSTANCE_DISK0_DEV_TYPE": disk.dev_type,
        }
        self.assertEqual({k: env.get(k) for k in expected}, expected)
        self.assertIn("INSTANCE_BE_maxmem", env)

    def test_every_declared_opcode_has_an_lu(self) -> None:
        """The table only names opcodes that have an LU (and each LU Ganeti gives hooks)."""
        from ganeti import cmdlib

        for op_id in hooks_env.SPECS:
            cmdlib.lookup(op_id)
        self.assertEqual(hooks_env.SPECS["OP_INSTANCE_CREATE"].hpath, "instance-add")
        self.assertEqual(hooks_env.SPECS["OP_BACKUP_EXPORT"].hpath, "instance-export")


class PhaseTests(LUTestCase):
    """Jobs run by a processor on a WConfD; the node RPC answers the hooks (L{Env.hook_answer})."""

    def setUp(self) -> None:
        self.env = Env(make_config(nodes=2, instances=1))
        self.rpc = DelayNodes(self.env.clock)
        self.next_id = 100

    def calls(self) -> list[tuple[str, str, str]]:
        return [(node, args[0], args[1]) for node, args in self.env.hook_calls]

    def test_pre_and_post_on_the_master_then_config_update(self) -> None:
        """gnt-group add: pre and post on the master, the post environment
        adds GANETI_POST_*, then config-update with the pre environment."""
        self.ok({"OP_ID": "OP_GROUP_ADD", "group_name": "g2"})
        self.assertEqual(self.calls(), [(MASTER_NAME, "group-add", "pre"), (MASTER_NAME, "group-add", "post"),
                                        (MASTER_NAME, "config-update", "post")])
        pre, post, update = (args[2] for _node, args in self.env.hook_calls)
        self.assertEqual((pre["GANETI_GROUP_NAME"], pre["GANETI_OBJECT_TYPE"], pre["GANETI_HOOKS_PHASE"]),
                         ("g2", "GROUP", "pre"))
        self.assertEqual((post["GANETI_POST_GROUP_NAME"], post["GANETI_GROUP_NAME"]), ("g2", "g2"))
        self.assertEqual((update["GANETI_HOOKS_PATH"], update["GANETI_HOOKS_PHASE"]), ("config-update", "post"))
        self.assertNotIn("GANETI_POST_GROUP_NAME", update)

    def test_failing_pre_hook_aborts_before_any_change(self) -> None:
        """A failed pre script: HooksAbort with (node, script, output), nothing changed, no post."""
        self.env.hook_answer = lambda node, hpath, phase, env: (
            [["group-add-pre.d/10-veto", hooks.HKR_FAIL, "not today"]] if phase == "pre" else [])
        qop = self.run_op({"OP_ID": "OP_GROUP_ADD", "group_name": "g2"})
        self.assertEqual(qop.status, model.ERROR)
        self.assertEqual(qop.result, ["HooksAbort", [[[MASTER_NAME, "group-add-pre.d/10-veto", "not today"]]]])
        self.assertEqual(self.calls(), [(MASTER_NAME, "group-add", "pre")])
        self.assertNotIn("g2", [g.name for g in self.env.read_config().nodegroups.values()])

    def test_failing_post_hook_is_a_warning(self) -> None:
        """A failed post script is a warning in the job log; the job succeeds."""
        self.env.hook_answer = lambda node, hpath, phase, env: (
            [["group-add-post.d/x", hooks.HKR_FAIL, ""]] if (hpath, phase) == ("group-add", "post") else [])
        self.ok({"OP_ID": "OP_GROUP_ADD", "group_name": "g2"})
        self.assertIn(" - WARNING: On %s script group-add-post.d/x failed, output: (no output)" % MASTER_NAME,
                      self.log)
        self.assertIn("g2", [g.name for g in self.env.read_config().nodegroups.values()])

    def test_dry_run_stops_after_pre(self) -> None:
        self.ok({"OP_ID": "OP_GROUP_ADD", "group_name": "g2", "dry_run": True})
        self.assertEqual(self.calls(), [(MASTER_NAME, "group-add", "pre")])

    def test_no_hooks_and_no_write_runs_nothing(self) -> None:
        """An LU without hooks that changes nothing runs no hook at all."""
        self.ok({"OP_ID": "OP_TEST_DELAY", "duration": 0.1})
        self.assertEqual(self.calls(), [])

    def test_instance_hooks_on_master_and_instance_nodes(self) -> None:
        """gnt-instance shutdown: the master and the instance's primary, with its variables."""
        cfg = self.env.read_config()
        inst = next(iter(cfg.instances.values()))
        self.rpc = FakeNodes()
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": inst.name, "timeout": 7})
        primary = cfg.nodes[inst.primary_node].name
        pre = [(node, args[2]) for node, args in self.env.hook_calls if args[:2] == ["instance-stop", "pre"]]
        self.assertEqual(sorted(node for node, _ in pre), sorted({MASTER_NAME, primary}))
        env: dict[str, Any] = pre[0][1]
        self.assertEqual((env["GANETI_INSTANCE_NAME"], env["GANETI_TIMEOUT"], env["GANETI_OP_TARGET"]),
                         (inst.name, "7", inst.name))
