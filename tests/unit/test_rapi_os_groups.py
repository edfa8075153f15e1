"""RAPI /2/os (a job run to its end), group modify and assign-nodes, and
disk grow: the request becomes exactly this opcode (fake LuxiD)."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.rapi import openapi
from tests.unit.test_rapi_instances import OperationsTestCase, reason
from tests.unit.test_rapi_server import JACK, auth

ROWS = [["debootstrap", ["default", "minimal"]], ["noop", []]]


class OsTests(OperationsTestCase):
    def finish_jobs(self, result: Any, status: str = "success", waits: int = 1) -> None:
        """Jobs run for C{waits} WaitForJobChange calls, then end with C{result}."""
        answers = [[["running"], [[1, [1, 2], "message", "working"]]]] * waits + [[[status], []]]
        self.luxi.answers["WaitForJobChange"] = lambda *args: answers.pop(0) if len(answers) > 1 else answers[0]
        self.luxi.answers["QueryJobs"] = lambda ids, fields: [[status, [status], [result]]]

    def test_names_with_variants(self) -> None:
        self.finish_jobs(ROWS)
        self.assertEqual(self.ok("GET", "/2/os"), ["debootstrap+default", "debootstrap+minimal", "noop"])
        (submit,) = [c for c in self.luxi.calls if c[0] == "SubmitJob"]
        self.assertEqual(submit[1], [{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": ["name", "variants"], "names": [],
                                      "reason": reason("r_2_os")}])
        waits = [c for c in self.luxi.calls if c[0] == "WaitForJobChange"]
        self.assertEqual(waits[0], ("WaitForJobChange", 42, ["status"], None, None, 10))
        self.assertEqual(waits[1], ("WaitForJobChange", 42, ["status"], ["running"], 1, 10))
        self.assertEqual(self.luxi.calls[-1], ("QueryJobs", [42], ["status", "opstatus", "opresult"]))

    def test_bulk(self) -> None:
        self.finish_jobs([["noop", True, [], [["size", "disk size"]], [20], False, False, True]])
        self.assertEqual(self.ok("GET", "/2/os?bulk=1"), [{
            "name": "noop", "valid": True, "variants": [], "parameters": [{"name": "size", "description": "disk size"}],
            "api_versions": [20], "blacklisted": False, "hidden": False, "trusted": True}])
        (submit,) = [c for c in self.luxi.calls if c[0] == "SubmitJob"]
        self.assertEqual(submit[1][0]["output_fields"], ["name", "valid", "variants", "parameters", "api_versions",
                                                         "blacklisted", "hidden", "trusted"])

    def test_matches_the_document(self) -> None:
        doc = self.ok("GET", "/openapi.json")
        schema = doc["paths"]["/2/os"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        self.finish_jobs(ROWS)
        self.assertEqual(openapi.check(schema, self.ok("GET", "/2/os")), [])
        self.finish_jobs([["noop", True, [], [["size", "disk size"]], [20], False, False, True]])
        self.assertEqual(openapi.check(schema, self.ok("GET", "/2/os?bulk=1")), [])
        op = doc["paths"]["/2/os"]["get"]
        self.assertEqual(op["x-ganeti-opcodes"], ["OP_OS_DIAGNOSE"])
        self.assertNotIn("501", op["responses"])
        self.assertEqual({p["name"] for p in op["parameters"]}, {"bulk", "reason"})

    def test_failed_or_lost_job(self) -> None:
        self.finish_jobs(["OpExecError", ["Cannot list OSes"]], status="error")
        _, body = self.error(500, "GET", "/2/os")
        self.assertIn("Cannot list OSes", body["message"])
        self.finish_jobs(None)
        self.luxi.answers["QueryJobs"] = lambda ids, fields: [None]
        self.error(404, "GET", "/2/os")
        self.finish_jobs("not a list")
        self.assertEqual(self.error(502, "GET", "/2/os")[1]["message"], "Can't get OS list")

    def test_no_dry_run(self) -> None:
        self.finish_jobs(ROWS)
        self.ok("GET", "/2/os?dry-run=1")
        (submit,) = [c for c in self.luxi.calls if c[0] == "SubmitJob"]
        self.assertNotIn("dry_run", submit[1][0])

    def test_queue_drained(self) -> None:
        self.luxi.answers["SubmitJob"] = lambda ops: (_ for _ in ()).throw(errors.JobQueueDrainError("drained"))
        self.error(503, "GET", "/2/os")


class GroupAndDiskTests(OperationsTestCase):
    def test_group_modify(self) -> None:
        op = self.op("PUT", "/2/groups/rack2/modify?reason=tune",
                     {"alloc_policy": "last_resort", "custom_ndparams": {"ssh_port": 2222},
                      "custom_ipolicy": {"vcpu-ratio": 2.0}, "custom_diskparams": {"plain": {"stripes": 2}}})
        self.assertEqual(op, {"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "rack2", "alloc_policy": "last_resort",
                              "ndparams": {"ssh_port": 2222}, "ipolicy": {"vcpu-ratio": 2.0},
                              "diskparams": {"plain": {"stripes": 2}},
                              "reason": reason("r_2_groups_name_modify", "tune")})
        op = self.op("PUT", "/2/groups/rack2/modify", {"ndparams": {"ovs": True}, "hv_state": {"fake": {}}})
        self.assertEqual((op["ndparams"], op["hv_state"]), ({"ovs": True}, {"fake": {}}))
        self.luxi.calls.clear()
        for body, why in [({"custom_ndparams": {}, "ndparams": {}}, "renamed"),
                          ({"group_name": "other"}, "group_name"),
                          ({"alloc_policy": "sometimes"}, "alloc_policy"),
                          ({"colour": "red"}, "colour")]:
            self.assertIn(why, self.refused(400, "PUT", "/2/groups/rack2/modify", body), body)

    def test_group_assign_nodes(self) -> None:
        op = self.op("PUT", "/2/groups/rack2/assign-nodes?force=1&dry-run=1", {"nodes": ["node1.test", "node2.test"]})
        self.assertEqual(op, {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2", "force": True,
                              "nodes": ["node1.test", "node2.test"], "dry_run": True,
                              "reason": reason("r_2_groups_name_assign_nodes")})
        self.assertFalse(self.op("PUT", "/2/groups/rack2/assign-nodes", {"nodes": ["node1.test"]})["force"])
        self.luxi.calls.clear()
        self.assertIn("nodes", self.refused(400, "PUT", "/2/groups/rack2/assign-nodes", {}))
        self.assertIn("force", self.refused(400, "PUT", "/2/groups/rack2/assign-nodes",
                                            {"nodes": ["n"], "force": True}))

    def test_disk_grow(self) -> None:
        op = self.op("POST", "/2/instances/inst1.test/disk/1/grow", {"amount": 1024, "wait_for_sync": False})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": "inst1.test", "disk": 1,
                              "amount": 1024, "wait_for_sync": False,
                              "reason": reason("r_2_instances_name_disk_grow")})
        op = self.op("POST", "/2/instances/inst1.test/disk/0/grow", {"amount": 4096, "absolute": True})
        self.assertEqual((op["disk"], op["absolute"]), (0, True))
        self.luxi.calls.clear()
        for body, why in [({}, "amount"), ({"amount": -1}, "amount"), ({"amount": "1G"}, "amount"),
                          ({"amount": 1, "disk": 2}, "disk")]:
            self.assertIn(why, self.refused(400, "POST", "/2/instances/inst1.test/disk/0/grow", body), body)
        self.error(404, "POST", "/2/instances/inst1.test/disk/x/grow", {"amount": 1}, headers=auth(*JACK))

    def test_documented_as_implemented(self) -> None:
        paths = self.ok("GET", "/openapi.json")["paths"]
        for template, method, op_id in [("/2/groups/{name}/modify", "put", "OP_GROUP_SET_PARAMS"),
                                        ("/2/groups/{name}/assign-nodes", "put", "OP_GROUP_ASSIGN_NODES"),
                                        ("/2/instances/{name}/disk/{disk}/grow", "post", "OP_INSTANCE_GROW_DISK")]:
            op = paths[template][method]
            self.assertEqual(op["x-ganeti-opcodes"], [op_id])
            self.assertNotIn("501", op["responses"], template)
            self.assertEqual(op["responses"]["200"]["content"]["application/json"]["schema"], openapi.JOB_ID)
