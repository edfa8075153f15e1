"""Tests for the LUs in L{ganeti.cmdlib}, run by the processor on a WConfD in memory.

Changes are read back through WConfD.  Lock declarations (spec/opcodes.md
section 4) are checked on the LU itself, right after C{expand_names}.
"""

from __future__ import annotations

import os
from typing import Any

import attrs
from twisted.internet.defer import ensureDeferred
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.cmdlib import REGISTRY, lookup
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    LogicalUnit,
    OpContext,
    expand_instance_name,
    expand_node,
    level_members,
    lookup_group,
    match_name,
)
from ganeti.cmdlib.tags import MAX_TAG_LEN, TagError, validate_tag
from ganeti.jobs import model
from ganeti.objects import ConfigData, NodeGroup
from ganeti.opcodes import typed
from tests.unit.test_processor import Env, delay, group_add
from tests.unit.wconfd_helpers import MASTER, make_config

INST1 = "inst1.example.test"


def make_lu(op: dict[str, Any], cfg: ConfigData) -> LogicalUnit:
    """The LU for C{op}, with names expanded (no WConfD involved)."""
    valid = opcodes.validate(op)
    lu = lookup(valid["OP_ID"])(typed.from_dict(valid), OpContext(None, None, None), cfg)
    lu.check_arguments()
    lu.expand_names()
    return lu


class LUTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.env = Env()
        self.next_id = 100

    def run_op(self, op: dict[str, Any]) -> model.QueuedOpCode:
        self.next_id += 1
        job = self.env.execute(self.next_id, [op])
        return job.ops[0]

    def ok(self, op: dict[str, Any]) -> Any:
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.SUCCESS, qop.result)
        return qop.result

    def error(self, op: dict[str, Any]) -> list[Any]:
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.ERROR)
        return qop.result

    def group(self, name: str) -> NodeGroup | None:
        found = [g for g in self.env.read_config().nodegroups.values() if g.name == name]
        return found[0] if found else None

    def default_uuid(self) -> str:
        return self.group("default").uuid


class RegistryTests(SynchronousTestCase):
    def test_every_declared_opcode_has_an_lu(self) -> None:
        self.assertEqual(set(REGISTRY), set(opcodes.OPCODES))

    def test_lookup_unknown(self) -> None:
        e = self.assertRaises(errors.OpPrereqError, lookup, "OP_NO_SUCH_OPCODE")
        self.assertEqual(e.args, ("OP_NO_SUCH_OPCODE: opcode not implemented", errors.ECODE_INVAL))


class GroupTests(LUTestCase):
    def test_add(self) -> None:
        self.assertIsNone(self.ok(group_add("g1", ndparams={"ssh_port": 2222})))
        group = self.group("g1")
        assert group is not None
        self.assertEqual((group.alloc_policy, group.ndparams, group.members), ("preferred", {"ssh_port": 2222}, []))
        self.assertEqual(group.serial_no, 1)
        self.assertTrue(self.env.service.locks.exists("nodegroup/%s" % group.uuid))

    def test_add_with_policy_and_params(self) -> None:
        self.ok(
            group_add("g2", alloc_policy="last_resort", diskparams={"plain": {"stripes": 2}}, ipolicy={"vcpu-ratio": 2})
        )
        group = self.group("g2")
        assert group is not None
        self.assertEqual(group.alloc_policy, "last_resort")
        self.assertEqual(group.diskparams, {"plain": {"stripes": 2}})
        self.assertEqual(group.ipolicy, {"vcpu-ratio": 2})

    def test_add_duplicate_name(self) -> None:
        uuid = self.default_uuid()
        self.assertEqual(
            self.error(group_add("default")),
            [
                "OpPrereqError",
                ["Desired group name 'default' already exists as a node group (UUID: %s)" % uuid, "already_exists"],
            ],
        )

    def test_add_bad_diskparams(self) -> None:
        result = self.error(group_add("g1", diskparams={"floppy": {}}))
        self.assertEqual(result[1][1], errors.ECODE_INVAL)
        self.assertIsNone(self.group("g1"))

    def test_rename(self) -> None:
        self.ok(group_add("g1"))
        uuid = self.group("g1").uuid
        self.assertEqual(self.ok({"OP_ID": "OP_GROUP_RENAME", "group_name": "g1", "new_name": "g9"}), "g9")
        self.assertIsNone(self.group("g1"))
        renamed = self.group("g9")
        assert renamed is not None
        self.assertEqual((renamed.uuid, renamed.serial_no), (uuid, 2))

    def test_rename_by_uuid(self) -> None:
        uuid = self.default_uuid()
        self.ok({"OP_ID": "OP_GROUP_RENAME", "group_name": uuid, "new_name": "main"})
        self.assertEqual(self.group("main").uuid, uuid)

    def test_rename_clash(self) -> None:
        self.ok(group_add("g1"))
        uuid = self.default_uuid()
        self.assertEqual(
            self.error({"OP_ID": "OP_GROUP_RENAME", "group_name": "g1", "new_name": "default"}),
            [
                "OpPrereqError",
                ["Desired new name 'default' clashes with existing node group (UUID: %s)" % uuid, "already_exists"],
            ],
        )

    def test_remove(self) -> None:
        self.ok(group_add("g1"))
        uuid = self.group("g1").uuid
        self.assertIsNone(self.ok({"OP_ID": "OP_GROUP_REMOVE", "group_name": "g1"}))
        self.assertIsNone(self.group("g1"))
        self.assertFalse(self.env.service.locks.exists("nodegroup/%s" % uuid))

    def test_remove_non_empty(self) -> None:
        self.ok(group_add("g1"))
        result = self.error({"OP_ID": "OP_GROUP_REMOVE", "group_name": "default"})
        self.assertEqual(result[0], "OpPrereqError")
        self.assertTrue(result[1][0].startswith("Group 'default' not empty, has the following nodes: "), result)
        self.assertEqual(result[1][1], errors.ECODE_STATE)
        self.assertIsNotNone(self.group("default"))

    def test_remove_unknown(self) -> None:
        self.assertEqual(
            self.error({"OP_ID": "OP_GROUP_REMOVE", "group_name": "nope"}),
            ["OpPrereqError", ["Node group 'nope' not found", "unknown_entity"]],
        )

    def test_remove_last_group(self) -> None:
        cfg = make_config(nodes=0, instances=0)
        (only,) = cfg.nodegroups.values()
        lonely = attrs.evolve(cfg, nodes={})
        lu = make_lu({"OP_ID": "OP_GROUP_REMOVE", "group_name": only.name}, lonely)
        e = self.assertRaises(errors.OpPrereqError, lu.check_prereq)
        self.assertEqual(e.args, ("Group 'default' is the only group, cannot be removed", errors.ECODE_STATE))

    def test_locks_declared(self) -> None:
        cfg = self.env.config
        uuid = next(iter(cfg.nodegroups))
        add = make_lu(group_add("new"), cfg)
        self.assertEqual(add.needed_locks, {})
        self.assertEqual(list(add.add_locks), [LEVEL_NODEGROUP])
        self.assertFalse(add.REQ_BGL)
        for op in ({"OP_ID": "OP_GROUP_REMOVE", "group_name": "default"},
                   {"OP_ID": "OP_GROUP_RENAME", "group_name": "default", "new_name": "x"}):
            lu = make_lu(op, cfg)
            self.assertEqual(lu.needed_locks, {LEVEL_NODEGROUP: [uuid]})
            self.assertFalse(lu.share_locks.get(LEVEL_NODEGROUP))
            self.assertFalse(lu.REQ_BGL)


class TagsTests(LUTestCase):
    def tags(self, kind: str, name: str | None = None, **params: Any) -> list[str]:
        op = dict({"OP_ID": "OP_TAGS_GET", "kind": kind}, **params)
        if name is not None:
            op["name"] = name
        return self.ok(op)

    def change(self, what: str, kind: str, tags: list[str], name: str | None = None) -> model.QueuedOpCode:
        op: dict[str, Any] = {"OP_ID": what, "kind": kind, "tags": tags}
        if name is not None:
            op["name"] = name
        return self.run_op(op)

    def test_cluster_tags(self) -> None:
        self.assertEqual(self.tags("cluster"), [])
        self.assertEqual(self.change("OP_TAGS_SET", "cluster", ["a", "b", "a"]).status, model.SUCCESS)
        self.assertEqual(self.env.read_config().cluster.tags, ["a", "b"])
        self.assertEqual(self.tags("cluster"), ["a", "b"])
        self.change("OP_TAGS_SET", "cluster", ["b", "c"])
        self.assertEqual(self.tags("cluster", use_locking=True), ["a", "b", "c"])
        self.assertEqual(self.change("OP_TAGS_DEL", "cluster", ["a", "c"]).status, model.SUCCESS)
        self.assertEqual(self.env.read_config().cluster.tags, ["b"])

    def test_group_tags(self) -> None:
        self.ok(group_add("g1"))
        self.change("OP_TAGS_SET", "nodegroup", ["web", "prod"], name="g1")
        self.assertEqual(self.group("g1").tags, ["web", "prod"])
        self.assertEqual(self.tags("nodegroup", "g1", use_locking=True), ["web", "prod"])
        self.change("OP_TAGS_DEL", "nodegroup", ["web"], name="g1")
        self.assertEqual(self.tags("nodegroup", "g1"), ["prod"])
        self.assertEqual(self.tags("nodegroup", "default"), [])

    def test_instance_and_node_tags_with_short_names(self) -> None:
        self.change("OP_TAGS_SET", "instance", ["db"], name="inst1")
        inst = [i for i in self.env.read_config().instances.values() if i.name == INST1][0]
        self.assertEqual(inst.tags, ["db"])
        self.assertEqual(self.tags("instance", INST1), ["db"])
        self.change("OP_TAGS_SET", "node", ["rack:1"], name="node1")
        self.assertEqual(self.env.read_config().find_node(MASTER).tags, ["rack:1"])
        self.assertEqual(self.tags("node", MASTER), ["rack:1"])

    def test_delete_missing_tags(self) -> None:
        self.change("OP_TAGS_SET", "cluster", ["a"])
        qop = self.change("OP_TAGS_DEL", "cluster", ["zz", "a", "b"])
        self.assertEqual(qop.result, ["OpPrereqError", ["Tag(s) 'b', 'zz' not found", "unknown_entity"]])
        self.assertEqual(self.env.read_config().cluster.tags, ["a"])

    def test_invalid_tags(self) -> None:
        for bad, message in [
            ("", "Tags cannot be empty"),
            ("x" * (MAX_TAG_LEN + 1), "Tag too long (>128 characters)"),
            ("two words", "Tag contains invalid characters"),
            ("   ", "Tag contains invalid characters"),
        ]:
            qop = self.change("OP_TAGS_SET", "cluster", ["ok", bad])
            self.assertEqual(qop.result, ["TagError", [message]])
        self.assertEqual(self.env.read_config().cluster.tags, [])

    def test_unknown_objects(self) -> None:
        qop = self.change("OP_TAGS_SET", "instance", ["a"], name="nosuch")
        self.assertEqual(qop.result, ["OpPrereqError", ["Instance 'nosuch' not known", "unknown_entity"]])
        qop = self.change("OP_TAGS_SET", "node", ["a"], name="nosuch")
        self.assertEqual(qop.result, ["OpPrereqError", ["Node 'nosuch' not known", "unknown_entity"]])
        qop = self.change("OP_TAGS_SET", "nodegroup", ["a"])
        self.assertEqual(qop.result[1][1], errors.ECODE_INVAL)

    def test_concurrent_cluster_tags_both_kept(self) -> None:
        """Two jobs tag the cluster at once under the shared BGL: no update is lost."""
        runs = [
            self.env.start(50 + i, [{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["t%d" % i]}], settle=False)
            for i in range(3)
        ]
        self.env.settle()
        for run in runs:
            self.env.finish(run)
            self.assertEqual(run.job.status, model.SUCCESS, run.ops[0].result)
        self.assertEqual(sorted(self.env.read_config().cluster.tags), ["t0", "t1", "t2"])

    def test_too_many_tags(self) -> None:
        self.change("OP_TAGS_SET", "cluster", ["t%d" % i for i in range(4096)])
        qop = self.change("OP_TAGS_SET", "cluster", ["one-more"])
        self.assertEqual(qop.result, ["OpExecError", ["Error while setting tag: Too many tags"]])
        self.assertEqual(self.change("OP_TAGS_SET", "cluster", ["t7"]).status, model.SUCCESS)

    def test_locks_declared(self) -> None:
        cfg = self.env.config
        group = next(iter(cfg.nodegroups))
        node = expand_node(cfg, MASTER).uuid
        def tags(what: str, kind: str, name: str | None = None, **params: Any) -> dict[str, Any]:
            op = dict({"OP_ID": what, "kind": kind, "tags": ["a"]}, **params)
            if what == "OP_TAGS_GET":
                del op["tags"]
            if name is not None:
                op["name"] = name
            return op

        table = [
            (tags("OP_TAGS_SET", "cluster"), {}, False),
            (tags("OP_TAGS_SET", "nodegroup", "default"), {LEVEL_NODEGROUP: [group]}, False),
            (tags("OP_TAGS_DEL", "node", MASTER), {LEVEL_NODE: [node]}, False),
            (tags("OP_TAGS_DEL", "instance", "inst1"), {LEVEL_INSTANCE: [INST1]}, False),
            (tags("OP_TAGS_GET", "instance", "inst1"), {}, True),
            (tags("OP_TAGS_GET", "instance", "inst1", use_locking=True), {LEVEL_INSTANCE: [INST1]}, True),
        ]
        for op, locks, shared in table:
            lu = make_lu(op, cfg)
            self.assertEqual(lu.needed_locks, locks, op)
            self.assertFalse(lu.REQ_BGL)
            for level in locks:
                self.assertEqual(bool(lu.share_locks.get(level)), shared, op)

    def test_validate_tag(self) -> None:
        for good in ["a", "web.example:80", "x" * MAX_TAG_LEN, "a+b*c/d@e-f_g"]:
            validate_tag(good)
        self.assertRaises(TagError, validate_tag, 5)


class ClusterTests(LUTestCase):
    def test_query(self) -> None:
        info = self.ok({"OP_ID": "OP_CLUSTER_QUERY"})
        self.assertEqual(info["name"], self.env.config.cluster.cluster_name)
        self.assertEqual(info["master"], MASTER)
        self.assertEqual(info["uuid"], self.env.config.cluster.uuid)
        self.assertEqual(info["enabled_hypervisors"], ["fake"])
        self.assertIn("software_version", info)

    def test_verify_config_sound(self) -> None:
        qop = self.run_op({"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"})
        self.assertEqual((qop.status, qop.result), (model.SUCCESS, True))
        self.assertEqual([e[3] for e in qop.log], ["* Verifying cluster config"])

    def test_verify_config_simulated_errors(self) -> None:
        qop = self.run_op({"OP_ID": "OP_CLUSTER_VERIFY_CONFIG", "debug_simulate_errors": True})
        self.assertIs(qop.result, False)
        self.assertEqual(qop.log[-1][3], "  - ERROR: cluster: simulated error (debug_simulate_errors)")
        qop = self.run_op({"OP_ID": "OP_CLUSTER_VERIFY_CONFIG", "debug_simulate_errors": True, "error_codes": True})
        self.assertEqual(qop.log[-1][3], "  - ERROR:ECLUSTERCFG:cluster::simulated error (debug_simulate_errors)")
        qop = self.run_op(
            {"OP_ID": "OP_CLUSTER_VERIFY_CONFIG", "debug_simulate_errors": True, "ignore_errors": ["ECLUSTERCFG"]}
        )
        self.assertIs(qop.result, True)
        self.assertTrue(qop.log[-1][3].startswith("  - WARNING: cluster: "))

    def test_verify_config_locks_everything_shared(self) -> None:
        lu = make_lu({"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"}, self.env.config)
        self.assertFalse(lu.REQ_BGL)
        self.assertIn(LEVEL_INSTANCE, lu.needed_locks)
        self.assertTrue(all(v is ALL_SET for v in lu.needed_locks.values()))
        self.assertTrue(all(lu.share_locks[level] for level in lu.needed_locks))

    def test_verify_config_reports_problems(self) -> None:
        """A broken snapshot (WConfD never stores one) is reported line by line."""
        cfg = self.env.config
        broken = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, master_node="no-such-node"))
        lu = make_lu({"OP_ID": "OP_CLUSTER_VERIFY_CONFIG"}, broken)
        lines: list[str] = []

        async def no_problems() -> list[str]:
            return []

        class FakeWConfd:
            verify_config = staticmethod(no_problems)

        lu.ctx = OpContext(FakeWConfd(), None, None, feedback=lambda message, kind: lines.append(message))
        self.assertIs(self.successResultOf(ensureDeferred(lu.exec_(None))), False)
        self.assertTrue(any("no-such-node" in line for line in lines), lines)


class TestDelayTests(LUTestCase):
    def test_on_unknown_nodes_refused(self) -> None:
        result = self.error(delay(1, on_nodes=["no-such-node.example.test"]))
        self.assertEqual(result[0], "OpPrereqError")
        self.assertIn("not known", result[1][0])

    def test_locks(self) -> None:
        self.assertFalse(make_lu(delay(1), self.env.config).uses_bgl())
        self.assertTrue(make_lu(delay(1, no_locks=False), self.env.config).uses_bgl())
        self.assertFalse(make_lu(delay(1, no_locks=False), self.env.config).REQ_BGL)

    def test_repeat_zero_sleeps_once_without_log(self) -> None:
        run = self.env.start(1, [delay(2)])
        self.env.advance(1.5)
        self.assertFalse(run.done.called)
        self.env.advance(0.5)
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].log, [])

    def test_without_nodes_the_job_process_sleeps(self) -> None:
        # as Ganeti: neither on_master nor on_nodes still sleeps, in the job process
        run = self.env.start(1, [delay(100, on_master=False, repeat=3)])
        for _ in range(299):
            self.env.advance(1)
        self.assertFalse(run.done.called)
        self.assertEqual(len(run.ops[0].log), 3)
        self.env.advance(1)
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].status, model.SUCCESS)

    def test_zero_duration_refused(self) -> None:
        for op in (delay(0), delay(0.0, on_master=False), delay(0, repeat=2)):
            self.assertEqual(self.error(op), ["OpPrereqError", ["Duration must be greater than zero", "wrong_input"]])

    def _socket(self, index: int) -> tuple[str, Any]:
        """The path the delay named in its log and the factory listening there."""
        server = self.env.clock.unixServers[index]
        return server[0], server[1]

    def test_interruptible_delay_interrupted_ends_the_repetitions(self) -> None:
        from twisted.internet.testing import StringTransport

        run = self.env.start(1, [delay(10, interruptible=True, repeat=3)])
        self.env.advance(0)
        (entry_0, entry_1) = run.ops[0].log
        self.assertEqual(entry_1[2], "delay-test")
        path, factory = self._socket(0)
        self.assertEqual(entry_1[3], [path])
        self.assertFalse(run.done.called)
        client = factory.buildProtocol(None)
        client.makeConnection(StringTransport())
        self.env.advance(1)
        client.dataReceived(b"x")
        self.env.advance(0)
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].status, model.SUCCESS)
        messages = [entry[3] for entry in run.ops[0].log]
        self.assertEqual(messages[0], " - INFO: Test delay iteration 0/2")
        self.assertEqual(messages[2], "Received connection, time to go is 10")
        self.assertEqual(messages[3], "Interrupted, time spent waiting: 1")
        self.assertEqual(len(messages), 4)  # no second iteration
        self.assertFalse(os.path.exists(os.path.dirname(path)))

    def test_interruptible_delay_without_client_runs_out(self) -> None:
        run = self.env.start(1, [delay(5, interruptible=True, repeat=2)])
        self.env.advance(0)
        self.env.advance(5)
        self.assertFalse(run.done.called)
        self.env.advance(5)
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].status, model.SUCCESS)
        kinds = [entry[2] for entry in run.ops[0].log]
        self.assertEqual(kinds, ["message", "delay-test", "message", "delay-test"])
        self.assertEqual(len(self.env.clock.unixServers), 2)


class HelperTests(SynchronousTestCase):
    def test_match_name(self) -> None:
        names = ["web1.example.com", "web10.example.com", "db.example.com"]
        self.assertEqual(match_name("web1", names), "web1.example.com")
        self.assertEqual(match_name("WEB1.example.com", names), "web1.example.com")
        self.assertEqual(match_name("db.example.com", names), "db.example.com")
        self.assertIsNone(match_name("web", names))
        self.assertIsNone(match_name("x", names))
        self.assertIsNone(match_name("a", ["a.b", "a.c"]))

    def test_lookups(self) -> None:
        cfg = make_config(nodes=1, instances=1)
        inst = next(iter(cfg.instances.values()))
        self.assertEqual(expand_instance_name(cfg, inst.uuid), inst.name)
        self.assertEqual(expand_node(cfg, "node1").name, MASTER)
        group = next(iter(cfg.nodegroups))
        self.assertEqual(lookup_group(cfg, None), group)
        self.assertEqual(lookup_group(cfg, group), group)
        self.assertEqual(sorted(level_members(cfg, LEVEL_NODE)), sorted(cfg.nodes))
        self.assertEqual(level_members(cfg, LEVEL_INSTANCE), [inst.name])

    def test_owned_locks(self) -> None:
        cfg = make_config(nodes=1, instances=0)
        lu = LogicalUnit({}, OpContext(None, None, None), cfg)
        self.assertEqual(lu.owned_locks(LEVEL_NODE), frozenset())
        lu.acquired[LEVEL_NODE] = ALL_SET
        self.assertEqual(lu.owned_locks(LEVEL_NODE), frozenset(cfg.nodes))
        lu.acquired[LEVEL_NODEGROUP] = ["g"]
        self.assertEqual(lu.owned_locks(LEVEL_NODEGROUP), frozenset(["g"]))


class TestJqueueTests(LUTestCase):
    """OP_TEST_JQUEUE against a client that answers every notification as
    C{gnt-debug test-jobqueue} does: connect, then close."""

    def answer_notifications(self, run: Any, seen: list[tuple[str, Any, str]], rounds: int = 50) -> None:
        from twisted.internet.testing import StringTransport

        answered = 0
        for _ in range(rounds):
            self.env.advance(0)
            entries = [e for op in run.ops for e in op.log if e[2] == "jqueue-test"]
            for entry in entries[answered:]:
                path, test, arg = entry[3]
                (factory,) = [f for p, f, *_ in self.env.clock.unixServers if p == path]
                status = next(op.status for op in run.ops if entry in op.log)
                seen.append((test, arg, status))
                client = factory.buildProtocol(None)
                client.makeConnection(StringTransport())
                client.connectionLost(None)
                answered += 1
            if run.done.called:
                return

    def test_notifications_messages_and_result(self) -> None:
        op = {"OP_ID": "OP_TEST_JQUEUE", "notify_waitlock": True, "notify_exec": True, "log_messages": ["A", ""]}
        run = self.env.start(1, [op])
        seen: list[tuple[str, Any, str]] = []
        self.answer_notifications(run, seen)
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].status, model.SUCCESS)
        self.assertIs(run.ops[0].result, True)
        self.assertEqual(seen, [("expandnames", None, model.WAITING), ("exec", None, model.RUNNING),
                                ("startmsg", 2, model.RUNNING), ("logmsg", 1, model.RUNNING),
                                ("logmsg", 2, model.RUNNING)])
        messages = [e[3] for e in run.ops[0].log if e[2] == "message"]
        self.assertEqual([m for m in messages if m.startswith("TESTMSG=")], ["TESTMSG=A", "TESTMSG="])
        for path, *_ in self.env.clock.unixServers:
            self.assertFalse(os.path.exists(os.path.dirname(path)))

    def test_fail_requested(self) -> None:
        run = self.env.start(1, [{"OP_ID": "OP_TEST_JQUEUE", "fail": True}])
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].result, ["OpExecError", ["Opcode failure was requested"]])

    def test_client_that_never_connects_fails_the_opcode(self) -> None:
        run = self.env.start(1, [{"OP_ID": "OP_TEST_JQUEUE", "notify_exec": True}])
        self.env.advance(19)
        self.assertFalse(run.done.called)
        self.env.advance(1)
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].result, ["OpExecError", ["Client didn't connect in time (exec)"]])
