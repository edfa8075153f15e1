"""Tests for L{ganeti.opcodes}: declarations, validation, defaults, summaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.opcodes import validate
from tests.unit.wconfd_helpers import TESTDATA


def _error(op: Any) -> errors.OpPrereqError:
    try:
        validate(op)
    except errors.OpPrereqError as e:
        return e
    raise AssertionError("%r validated" % (op,))


class ValidateTests(SynchronousTestCase):
    def test_defaults_filled(self) -> None:
        op = validate({"OP_ID": "OP_TEST_DELAY", "duration": 2})
        self.assertEqual(
            op,
            {
                "OP_ID": "OP_TEST_DELAY",
                "duration": 2,
                "on_master": True,
                "on_nodes": [],
                "repeat": 0,
                "interruptible": False,
                "no_locks": True,
                "priority": 0,
                "reason": [],
            },
        )

    def test_input_not_changed_and_defaults_not_shared(self) -> None:
        original = {"OP_ID": "OP_TEST_DELAY", "duration": 1.5}
        first = validate(original)
        self.assertEqual(original, {"OP_ID": "OP_TEST_DELAY", "duration": 1.5})
        first["on_nodes"].append("x")
        self.assertEqual(validate(original)["on_nodes"], [])

    def test_missing_required(self) -> None:
        e = _error({"OP_ID": "OP_TEST_DELAY"})
        self.assertEqual(e.args, ("OP_TEST_DELAY: parameter 'duration' is required", errors.ECODE_INVAL))

    def test_null_required_is_missing(self) -> None:
        e = _error({"OP_ID": "OP_GROUP_ADD", "group_name": None})
        self.assertIn("parameter 'group_name' is required", e.args[0])

    def test_wrong_types_name_the_parameter(self) -> None:
        cases = [
            ({"OP_ID": "OP_TEST_DELAY", "duration": "1"}, "duration"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": -1}, "duration"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": True}, "duration"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "repeat": 1.5}, "repeat"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "repeat": -1}, "repeat"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_nodes": "node1"}, "on_nodes"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "no_locks": 1}, "no_locks"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": 5}, "priority"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": True}, "priority"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "depends": [[1, ["done"]]]}, "depends"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "reason": [["a", "b"]]}, "reason"),
            ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "debug_level": -1}, "debug_level"),
            ({"OP_ID": "OP_GROUP_ADD", "group_name": ""}, "group_name"),
            ({"OP_ID": "OP_GROUP_ADD", "group_name": "g", "alloc_policy": "sometimes"}, "alloc_policy"),
            ({"OP_ID": "OP_GROUP_ADD", "group_name": "g", "diskparams": {"plain": 1}}, "diskparams"),
            ({"OP_ID": "OP_TAGS_SET", "kind": "vm", "tags": ["a"]}, "kind"),
            ({"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": "a"}, "tags"),
            ({"OP_ID": "OP_GROUP_RENAME", "group_name": "a", "new_name": ""}, "new_name"),
        ]
        for op, name in cases:
            e = _error(op)
            self.assertTrue(e.args[0].startswith("%s: parameter '%s' " % (op["OP_ID"], name)), e.args[0])
            self.assertEqual(e.args[1], errors.ECODE_INVAL)

    def test_unknown_op_id(self) -> None:
        self.assertEqual(_error({"OP_ID": "OP_FROBNICATE"}).args[0], "OP_FROBNICATE: unknown opcode")
        self.assertIn("OP_ID", _error({"duration": 1}).args[0])
        self.assertIn("JSON object", _error(["OP_TEST_DELAY"]).args[0])

    def test_unknown_keys_refused(self) -> None:
        """Ganeti 3.0's LuxiD refuses keys an opcode does not have, even null ones."""
        self.assertEqual(
            _error({"OP_ID": "OP_CLUSTER_QUERY", "future_param": {"x": 1}, "b": None}).args,
            ("OP_CLUSTER_QUERY: unknown parameter(s) 'b', 'future_param'", errors.ECODE_INVAL),
        )
        self.assertIn("'instance_name'", _error({"OP_ID": "OP_TEST_DELAY", "duration": 1, "instance_name": "x"}).args[0])

    def test_ganeti_cluster_parameters_null_when_unset(self) -> None:
        """Ganeti's clients send every parameter of OP_CLUSTER_SET_PARAMS, null
        when unset; each one is typed as Ganeti's."""
        op = validate({"OP_ID": "OP_CLUSTER_SET_PARAMS", "vg_name": None, "uid_pool": None, "max_running_jobs": 5})
        self.assertEqual(op["max_running_jobs"], 5)
        op = validate({"OP_ID": "OP_CLUSTER_SET_PARAMS", "vg_name": "xenvg", "uid_pool": [[1000, 2000]],
                       "reserved_lvs": []})
        self.assertEqual((op["vg_name"], op["uid_pool"], op["reserved_lvs"]), ("xenvg", [[1000, 2000]], []))
        self.assertIn("parameter 'uid_pool'", _error({"OP_ID": "OP_CLUSTER_SET_PARAMS", "uid_pool": [1000]}).args[0])

    def test_ganeti_empty_dicts_validate(self) -> None:
        """Ganeti's gnt-cluster modify sends {} for the dict parameters it leaves
        alone (diskparams, hv_state, disk_state, ipolicy): valid, and the LU changes nothing for them."""
        op = validate({"OP_ID": "OP_CLUSTER_SET_PARAMS", "diskparams": {}, "disk_state": {},
                       "hv_state": {}, "ipolicy": {}, "candidate_pool_size": 2})
        self.assertEqual(op["candidate_pool_size"], 2)
        self.assertNotIn("diskparams", op)
        for bad in (["lv1"], ""):
            self.assertIn("parameter 'hv_state' must be a dict",
                          _error({"OP_ID": "OP_CLUSTER_SET_PARAMS", "hv_state": bad}).args[0])

    def test_test_delay_bounded(self) -> None:
        """A delay cannot ask to run for ever: duration, repeat and their product are bounded."""
        for bad in (1e308, -1.0, float("inf"), float("nan"), opcodes.MAX_TEST_DELAY + 1, True, "5"):
            e = _error({"OP_ID": "OP_TEST_DELAY", "duration": bad})
            self.assertTrue(e.args[0].startswith("OP_TEST_DELAY: parameter 'duration' must be a number of seconds"), e)
        e = _error({"OP_ID": "OP_TEST_DELAY", "duration": 3600, "repeat": 25})
        self.assertIn("'duration' times 'repeat' must be at most 86400 seconds", e.args[0])
        self.assertIn("'repeat'", _error({"OP_ID": "OP_TEST_DELAY", "duration": 0, "repeat": 10**18}).args[0])
        self.assertEqual(validate({"OP_ID": "OP_TEST_DELAY", "duration": 3600, "repeat": 24})["repeat"], 24)
        self.assertEqual(validate({"OP_ID": "OP_TEST_DELAY", "duration": opcodes.MAX_TEST_DELAY})["duration"], 86400.0)

    def test_timeouts_bounded(self) -> None:
        for op_id, name in (("OP_INSTANCE_SHUTDOWN", "timeout"), ("OP_INSTANCE_REBOOT", "shutdown_timeout")):
            base = {"OP_ID": op_id, "instance_name": "x", **({"reboot_type": "soft"} if op_id == "OP_INSTANCE_REBOOT" else {})}
            self.assertEqual(validate(dict(base, **{name: opcodes.MAX_TIMEOUT}))[name], opcodes.MAX_TIMEOUT)
            for bad in (opcodes.MAX_TIMEOUT + 1, -1, 1.5, 10**30):
                self.assertIn("parameter '%s' must be a whole number of seconds" % name, _error(dict(base, **{name: bad})).args[0])

    def test_optional_without_default_stays_absent(self) -> None:
        op = validate({"OP_ID": "OP_GROUP_ADD", "group_name": "g"})
        for name in ("alloc_policy", "ndparams", "ipolicy", "dry_run", "depends", "comment"):
            self.assertNotIn(name, op)
        op = validate({"OP_ID": "OP_GROUP_ADD", "group_name": "g", "alloc_policy": None, "dry_run": None})
        self.assertIsNone(op["alloc_policy"])

    def test_null_with_default_gets_the_default(self) -> None:
        op = validate({"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": None, "priority": None})
        self.assertEqual((op["on_nodes"], op["priority"]), ([], 0))

    def test_common_params(self) -> None:
        op = validate(
            {
                "OP_ID": "OP_TEST_DELAY",
                "duration": 0.5,
                "priority": -10,
                "depends": [[-1, ["success"]], [12, []]],
                "comment": "hi",
                "dry_run": False,
                "debug_level": 2,
                "reason": [["gnt:client:gnt-debug", "delay", 1700000000000000000]],
            }
        )
        self.assertEqual(op["priority"], -10)

    def test_real_job_inputs_validate(self) -> None:
        """Every opcode in Ganeti 3.0.2's job files that we declare validates."""
        seen = set()
        for path in sorted((TESTDATA / "queue").glob("job-*")):
            for entry in json.loads(Path(path).read_text())["ops"]:
                op = entry["input"]
                if op["OP_ID"] in opcodes.OPCODES:
                    self.assertEqual(validate(op)["OP_ID"], op["OP_ID"])
                    seen.add(op["OP_ID"])
        self.assertEqual(seen, {"OP_TEST_DELAY", "OP_TAGS_SET", "OP_GROUP_ADD", "OP_INSTANCE_CREATE", "OP_INSTANCE_REMOVE"})

    @given(st.dictionaries(st.text(max_size=8), st.none() | st.booleans() | st.integers() | st.text(max_size=5)))
    def test_garbage_never_crashes(self, extra: dict[str, Any]) -> None:
        for op_id in opcodes.OPCODES:
            op = dict(extra, OP_ID=op_id)
            try:
                out = validate(op)
            except errors.OpPrereqError as e:
                message = e.args[0]
                self.assertTrue(
                    message.startswith((op_id + ": parameter '", op_id + ": unknown parameter(s) '")), message
                )
            else:
                for param in opcodes.OPCODES[op_id].all_params:
                    if param.has_default:
                        self.assertIn(param.name, out)


class DeclarationTests(SynchronousTestCase):
    def test_declared_opcodes(self) -> None:
        for op_id in [
            "OP_TEST_DELAY",
            "OP_CLUSTER_QUERY",
            "OP_CLUSTER_VERIFY_CONFIG",
            "OP_TAGS_GET",
            "OP_TAGS_SET",
            "OP_TAGS_DEL",
            "OP_GROUP_ADD",
            "OP_GROUP_REMOVE",
            "OP_GROUP_RENAME",
        ]:
            self.assertIn(op_id, opcodes.OPCODES)

    def test_define_refuses_duplicates(self) -> None:
        self.assertRaises(errors.ProgrammerError, opcodes.define, "OP_TEST_DELAY", [])
        self.assertRaises(errors.ProgrammerError, opcodes.define, "TEST_X", [])
        self.assertRaises(
            errors.ProgrammerError, opcodes.define, "OP_TEST_X1", [opcodes.Param("priority", opcodes.T_INT)]
        )
        self.assertNotIn("OP_TEST_X1", opcodes.OPCODES)

    def test_new_opcode_in_a_few_lines(self) -> None:
        opdef = opcodes.define(
            "OP_TEST_EXAMPLE_STARTUP",
            [opcodes.P_INSTANCE_NAME, opcodes.P_FORCE, opcodes.P_SHUTDOWN_TIMEOUT],
            summary="instance_name",
        )
        self.addCleanup(opcodes.OPCODES.pop, opdef.op_id)
        op = validate({"OP_ID": "OP_TEST_EXAMPLE_STARTUP", "instance_name": "web1"})
        self.assertEqual((op["force"], op["shutdown_timeout"]), (False, 120))
        self.assertEqual(opcodes.summary(op), "TEST_EXAMPLE_STARTUP(web1)")


class SummaryTests(SynchronousTestCase):
    def test_summaries(self) -> None:
        self.assertEqual(opcodes.summary({"OP_ID": "OP_TEST_DELAY", "duration": 0.001}), "TEST_DELAY(0.001)")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_TEST_DELAY", "duration": 2}), "TEST_DELAY(2)")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_GROUP_ADD", "group_name": "g1"}), "GROUP_ADD(g1)")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_GROUP_REMOVE", "group_name": "g1"}), "GROUP_REMOVE(g1)")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_GROUP_RENAME", "group_name": "g1"}), "GROUP_RENAME")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_CLUSTER_QUERY"}), "CLUSTER_QUERY")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_TAGS_GET", "kind": "cluster"}), "TAGS_GET(None)")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_TAGS_GET", "kind": "node", "name": "n1"}), "TAGS_GET(n1)")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_TAGS_SET", "kind": "node", "name": "n1"}), "TAGS_SET")

    def test_unknown_and_broken(self) -> None:
        self.assertEqual(opcodes.summary({"OP_ID": "OP_NODE_FROB", "node_name": "x"}), "NODE_FROB")
        self.assertEqual(opcodes.summary({"no": "id"}), "INVALID")
        self.assertEqual(opcodes.summary(None), "INVALID")
        self.assertEqual(opcodes.summary({"OP_ID": "OP_GROUP_ADD"}), "GROUP_ADD")
