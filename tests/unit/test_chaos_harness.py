"""The pure parts of the chaos and fuzz harness: the job stream, the
ran-twice detectors, the classification of failed jobs, the fuzz cases."""

from __future__ import annotations

import json
import random

from twisted.trial.unittest import SynchronousTestCase

from ganeti import opcodes
from ganeti.testing import chaos_checks, fuzz
from ganeti.testing.chaos import JobStream, Ledger, Submitted, TrialResult, job_status, summarize, totals


def _job(status: str, end: list[int] | None = None, livelock: str = "") -> dict[str, object]:
    return {"ops": [{"status": status}], "end_timestamp": end, "livelock": livelock}


class JobStreamTests(SynchronousTestCase):
    def test_jobs_are_valid_and_names_unique(self) -> None:
        """Every generated opcode passes validation (a job fails only by a
        fault) and every effect has a name of its own."""
        stream = JobStream(random.Random(7), "t")
        jobs = [stream.next() for _ in range(300)]
        for job in jobs:
            for op in job.ops:
                opcodes.validate(dict(op))
        self.assertEqual(len({job.name for job in jobs}), len(jobs))
        self.assertEqual({job.kind for job in jobs}, {"delay", "delay-nodes", "tag", "group", "instance"})

    def test_nothing_touches_the_master_node(self) -> None:
        stream = JobStream(random.Random(3), "t")
        for _ in range(200):
            text = json.dumps(stream.next().ops)
            self.assertNotIn("node1.test", text)


class DetectorTests(SynchronousTestCase):
    def test_two_job_processes_mean_ran_twice(self) -> None:
        ledger = Ledger()
        ledger.observe(5, _job("running", livelock="/x/job_000005_1"))
        ledger.observe(5, _job("running", livelock="/x/job_000005_2"))
        ledger.observe(6, _job("running", livelock="/x/job_000006_1"))
        ledger.observe(6, _job("running", livelock="/x/luxi-daemon_1"))
        result = TrialResult("luxid", 1)
        chaos_checks.check_ledger(ledger, result)
        self.assertEqual(list(result.ran_twice), [5])
        self.assertEqual(len(result.violations), 1)

    def test_a_process_recorded_but_never_confirmed_did_not_run(self) -> None:
        """LuxiD killed between recording a job process and confirming it: the
        process exits unrun, the job is queued again and run by a second
        process; that is one run (chaos wconfd+luxid, 'not confirmed by LuxiD'
        in jobs.log), not two."""
        ledger = Ledger()
        ledger.observe(7, _job("queued", livelock="/x/job_000007_1"))
        ledger.observe(7, _job("running", livelock="/x/job_000007_2"))
        ledger.observe(7, _job("success", [1, 2], livelock="/x/job_000007_2"))
        result = TrialResult("wconfd+luxid", 1)
        chaos_checks.check_ledger(ledger, result)
        self.assertEqual(result.ran_twice, {})

    def test_a_final_state_that_changes_means_ran_twice(self) -> None:
        ledger = Ledger()
        ledger.observe(3, _job("success", [1, 2]))
        ledger.observe(3, _job("running"))
        ledger.observe(4, _job("success", [1, 2]))
        ledger.observe(4, _job("success", [1, 2]))
        result = TrialResult("wconfd", 1)
        chaos_checks.check_ledger(ledger, result)
        self.assertEqual(list(result.ran_twice), [3])

    def test_job_status(self) -> None:
        self.assertEqual(job_status({"ops": [{"status": "success"}, {"status": "error"}]}), "error")
        self.assertEqual(job_status({"ops": [{"status": "success"}, {"status": "running"}]}), "running")
        self.assertEqual(job_status({"ops": [{"status": "success"}] * 2}), "success")
        self.assertEqual(job_status({"ops": [{"status": "queued"}]}), "queued")


class CheckJobsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.acked = {
            1: Submitted("delay", "a", [], 1),
            2: Submitted("group", "b", [], 2),
            3: Submitted("delay", "c", [], 3),
            4: Submitted("tag", "d", [], 4),
        }
        self.rows = {
            1: ["success", [None]],
            2: ["error", [["OpPrereqError", ["Group 'b' already exists", "already_exists"]]]],
            3: ["error", [["OpExecError", ["the job process died"]]]],
            4: None,
        }

    def test_classification(self) -> None:
        """A lost job, a unique name met twice, a job failed by a fault
        that took nothing from it: each a broken promise."""
        result = TrialResult("luxid", 1)
        chaos_checks.check_jobs(self.acked, self.rows, result)
        self.assertEqual(result.lost, [4])
        self.assertEqual(list(result.ran_twice), [2])
        self.assertEqual(list(result.failed), [3])
        self.assertEqual(len(result.violations), 3)

    def test_the_killed_job_may_fail(self) -> None:
        result = TrialResult("job", 1, killed_job=3)
        chaos_checks.check_jobs(self.acked, self.rows, result)
        self.assertEqual(result.failed, {})
        self.assertEqual(len(result.violations), 2)  # job 4 lost, job 2 ran twice

    def test_a_candidate_noded_may_fail_jobs(self) -> None:
        result = TrialResult("noded-candidate", 1)
        chaos_checks.check_jobs(self.acked, self.rows, result)
        self.assertEqual(list(result.failed), [3])
        self.assertEqual(len(result.violations), 2)

    def test_totals(self) -> None:
        first = TrialResult("wconfd", 1, acknowledged=10, failed={3: "x"}, recovery={"wconfd": 1.5})
        second = TrialResult("noded-candidate", 2, acknowledged=5, failed={4: "y"}, lost=[9])
        figures = totals([first, second])
        self.assertEqual(figures["trials"], 2)
        self.assertEqual(figures["lost_jobs"], 1)
        self.assertEqual(figures["jobs_failed_by_wconfd_restart"], 1)
        self.assertEqual(figures["jobs_failed_by_fault"], 2)
        self.assertEqual(figures["max_seconds_to_answer"], 1.5)
        self.assertEqual(summarize([first, second])["wconfd"].acknowledged, 10)


class FuzzCaseTests(SynchronousTestCase):
    def test_changing_methods_never_get_a_right_argument(self) -> None:
        """Bad input must change nothing, so the cases for methods that
        change state never carry a right value by chance."""
        for label, data in fuzz.luxi_cases(random.Random(1), 200):
            try:
                request = json.loads(data[:-1])
            except (ValueError, RecursionError):
                continue
            if not isinstance(request, dict) or request.get("method") not in ("SetDrainFlag", "SetWatcherPause"):
                continue
            args = request.get("args")
            if request["method"] == "SetDrainFlag" and isinstance(args, list) and len(args) == 1:
                self.assertFalse(isinstance(args[0], bool), label)
            if request["method"] == "SetWatcherPause" and isinstance(args, list) and len(args) == 1:
                self.assertFalse(isinstance(args[0], (int, float)) and not isinstance(args[0], bool), label)

    def test_submitted_opcodes_are_all_invalid(self) -> None:
        for ops in fuzz.WRONG["ops"]:
            if isinstance(ops, list) and ops and all(isinstance(op, dict) for op in ops):
                with self.assertRaises(Exception):
                    for op in ops:
                        opcodes.validate(dict(op))

    def test_amp_box_layout(self) -> None:
        self.assertEqual(fuzz.amp_box([(b"_ask", b"1")]), b"\x00\x04_ask\x00\x011\x00\x00")


class StaleReplicaTests(SynchronousTestCase):
    def test_only_this_trials_jobs_and_every_difference(self) -> None:
        """A replica missing or behind the master's file is stale; jobs
        before the trial's first are left to the trial that ran them."""
        import os
        import shutil
        import tempfile
        import types

        from ganeti.paths import Paths

        roots = [Paths(tempfile.mkdtemp(prefix="gchu")) for _ in range(3)]
        for paths in roots:
            self.addCleanup(shutil.rmtree, paths.root, True)
        for paths in roots:
            os.makedirs(paths.queue_dir)

        def write(paths: Paths, job_id: int, status: str) -> None:
            with open(os.path.join(paths.queue_dir, "job-%d" % job_id), "w") as handle:
                json.dump(_job(status, [1, 0] if status == "success" else None), handle)

        for job_id in (1, 5, 6, 7):
            write(roots[0], job_id, "success")
        for paths in roots[1:]:
            write(paths, 1, "running")  # an earlier trial's: not counted again
            write(paths, 5, "success")
        write(roots[1], 6, "running")
        write(roots[2], 6, "success")
        write(roots[1], 7, "success")
        cluster = types.SimpleNamespace(master=roots[0], roots=roots,
                                        cluster=types.SimpleNamespace(nodes={"n1": "", "n2": "", "n3": ""}))
        stale = chaos_checks.stale_replicas(cluster, since=5)
        self.assertEqual([line.split(":")[0] for line in stale], ["job-6 on n2", "job-7 on n3"])
