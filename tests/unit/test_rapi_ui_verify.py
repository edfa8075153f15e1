"""The overview's alerts from gnt-cluster verify: the last run read from its jobs."""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rapi.ui import verify
from tests.unit.test_rapi_ui import UiTestCase


class QueueLuxi:
    """QueryJobs over a few jobs: id -> {field: value}."""

    def __init__(self, jobs: dict[int, dict[str, Any]]) -> None:
        self.jobs = jobs

    async def call(self, method: str, ids: Any, fields: list[str]) -> Any:
        assert method == "QueryJobs"
        wanted = sorted(self.jobs) if ids is None else ids
        return [[self.jobs[i].get(f, i if f == "id" else None) for f in fields] if i in self.jobs else None
                for i in wanted]


def log(*messages: str) -> list[list[list[Any]]]:
    return [[[n, [1700000000, 0], "message", m] for n, m in enumerate(messages)]]


class VerifyTests(SynchronousTestCase):
    def test_problem_lines_in_both_formats_and_nothing_else(self) -> None:
        self.assertEqual(verify.parse_line("  - ERROR: node node2.test: ssconf file differs"),
                         {"severity": "error", "text": "node node2.test: ssconf file differs"})
        self.assertEqual(verify.parse_line("  - WARNING:ENODENET:node:node3.test:cannot reach"),
                         {"severity": "warning", "text": "node node3.test: cannot reach", "code": "ENODENET"})
        self.assertEqual(verify.parse_line("  - ERROR:ECLUSTERCFG:cluster::bad config")["text"], "cluster: bad config")
        for other in ("* Verifying node status", "  - NOTICE: 1 offline node(s) found.", None, 42, ["x"]):
            self.assertIsNone(verify.parse_line(other), other)

    def run_(self, jobs: dict[int, dict[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = self.successResultOf(Deferred.fromCoroutine(verify.last_run(QueueLuxi(jobs))))
        return result

    def test_the_newest_run_with_the_findings_of_its_jobs(self) -> None:
        jobs = {
            3: {"summary": ["CLUSTER_VERIFY"], "status": "success", "opresult": [{"jobs": [[True, 4], [True, 5]]}],
                "end_ts": [100, 0]},
            4: {"summary": ["CLUSTER_VERIFY_CONFIG"], "status": "success", "oplog": log("* Verifying cluster config"),
                "end_ts": [101, 0]},
            5: {"summary": ["CLUSTER_VERIFY_GROUP(g1)"], "status": "success", "end_ts": [105, 500000],
                "oplog": log("* Verifying group 'default'", "  - ERROR: node node3.test: node is unreachable",
                             "  - WARNING: instance i1: not running")},
            6: {"summary": ["INSTANCE_STARTUP(i1)"], "status": "error"},
            1: {"summary": ["CLUSTER_VERIFY"], "status": "success", "opresult": [{"jobs": []}]},   # older
            7: {"summary": ["CLUSTER_VERIFY_DISKS"], "status": "success"},                   # not a verify run
        }
        found = self.run_(jobs)
        self.assertEqual((found["job"], found["finished"], found["errors"], found["warnings"], found["time"]),
                         (3, True, 1, 1, 105.5))
        self.assertEqual([a["text"] for a in found["alerts"]], ["node node3.test: node is unreachable",
                                                                "instance i1: not running"])
        jobs[5]["status"] = "running"
        self.assertFalse(self.run_(jobs)["finished"])
        jobs[5]["status"] = "error"
        self.assertIn("verify job 5 failed", [a["text"] for a in self.run_(jobs)["alerts"]])

    def test_no_run_yet(self) -> None:
        self.assertEqual(self.run_({2: {"summary": ["CLUSTER_VERIFY_DISKS"]}})["job"], None)


class VerifyPathTests(UiTestCase):
    def test_a_read_user_sees_the_last_run_only_a_write_user_runs_one(self) -> None:
        reader = self.login("reader", "pw")
        code, _, body = self.request("GET", "/ui/verify", headers={"Cookie": reader["Cookie"]})
        self.assertEqual(code, 200, body)
        self.assertIn("alerts", json.loads(body))
        self.assertEqual(self.request("POST", "/ui/verify", headers=reader)[0], 403)
        jack = self.login("jack", "abc123")
        self.assertEqual(self.request("POST", "/ui/verify", headers={"Cookie": jack["Cookie"]})[0], 403)  # no token
        self.assertNotIn("SubmitJob", self.luxi.methods())
        code, _, body = self.request("POST", "/ui/verify", headers=jack)
        self.assertEqual((code, json.loads(body)), (200, {"job": 42}))
        (submitted,) = [c for c in self.luxi.calls if c[0] == "SubmitJob"]
        self.assertEqual(submitted[1][0]["OP_ID"], "OP_CLUSTER_VERIFY")
        self.assertEqual(self.request("DELETE", "/ui/verify", headers=jack)[0], 405)
