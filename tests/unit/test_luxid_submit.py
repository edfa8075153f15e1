"""Submission checks every opcode before anything is created (issue 12, defect 5;
issue 14: Ganeti's C{gnt-debug test-jobqueue})."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.jobs.queue import JobQueueDir
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.service import LuxidService
from ganeti.paths import Paths

DELAY = {"OP_ID": "OP_TEST_DELAY", "duration": 0}


def _invalid_op(rng: random.Random) -> Any:
    """One opcode that Ganeti's LuxiD would refuse to decode."""
    choices = [
        {"OP_ID": "OP_NOPE"},
        {"OP_ID": "OP_TEST_DELAY"},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1e308},
        {"OP_ID": "OP_TEST_DELAY", "duration": -1},
        {"OP_ID": "OP_TEST_DELAY", "duration": "1"},
        {"OP_ID": "OP_TEST_DELAY", "duration": True},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "repeat": 10**12},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_master": "false"},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": rng.choice([-20, -11, -9, 1, 9, 11, 19, "0", True])},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "frobnicate": rng.randint(0, 9)},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "depends": "17"},
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "depends": [[1, ["running"]]]},
        {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "x", "timeout": 10**9},
        {"OP_ID": "OP_GROUP_ADD"},
        {"OP_ID": None},
        {"duration": 1},
        rng.choice([None, 7, "OP_TEST_DELAY", [DELAY]]),
    ]
    return rng.choice(choices)


def _invalid_request(rng: random.Random) -> tuple[str, list[Any]]:
    """A LUXI method and its args, one job of which is invalid."""
    method = rng.choice(["SubmitJob", "SubmitJobToDrainedQueue", "SubmitManyJobs"])
    shape = rng.random()
    if shape < 0.1:
        job: Any = rng.choice([[], {}, None, "ops"])
    else:
        job = [dict(DELAY) for _ in range(rng.randint(0, 3))]
        job.insert(rng.randint(0, len(job)), _invalid_op(rng))
    if method != "SubmitManyJobs":
        return method, [job]
    jobs = [[dict(DELAY)] for _ in range(rng.randint(0, 4))]
    jobs.insert(rng.randint(0, len(jobs)), job)
    return method, [jobs]


class SubmitTests(SynchronousTestCase):
    def setUp(self) -> None:
        root = tempfile.mkdtemp(prefix="gntsub")
        self.addCleanup(shutil.rmtree, root, True)
        self.paths = Paths(root)
        self.paths.ensure_dirs()
        self.queue = JobQueueDir(self.paths)
        self.queue.open()
        self.addCleanup(self.queue.close)
        self.service = LuxidService(self.paths, Clock(), self.queue)
        self.service.running = True  # accept submissions without starting processes
        self.handler = LuxiHandler(self.service)

    def call(self, method: str, *args: Any) -> Deferred:
        return Deferred.fromCoroutine(getattr(self.handler, "luxi_" + method)(*args))

    def refused(self, method: str, *args: Any) -> str:
        failure = self.failureResultOf(self.call(method, *args), errors.OpPrereqError)
        self.assertEqual(failure.value.args[1], errors.ECODE_INVAL)
        return str(failure.value.args[0])

    def job_files(self) -> list[str]:
        return sorted(n for n in os.listdir(self.paths.queue_dir) if n.startswith("job-"))

    def test_random_invalid_submissions_create_nothing(self) -> None:
        """300 invalid requests: each refused, no job, no id spent."""
        rng = random.Random(12)
        before = self.queue.serial()
        for _ in range(300):
            method, args = _invalid_request(rng)
            self.refused(method, *args)
        self.assertEqual((self.queue.serial(), self.job_files(), self.service.jobs), (before, [], {}))
        job_id = self.successResultOf(self.call("SubmitJob", [dict(DELAY)]))
        self.assertEqual(job_id, before + 1)

    def test_valid_submissions_still_work(self) -> None:
        self.assertEqual(self.successResultOf(self.call("SubmitJob", [dict(DELAY), dict(DELAY, priority=-10)])), 1)
        answer = self.successResultOf(
            self.call("SubmitManyJobs", [[dict(DELAY)], [dict(DELAY, depends=[[-1, ["success"]]])]])
        )
        self.assertEqual(answer, [[True, 2], [True, 3]])
        self.assertEqual(self.queue.read_job(3).ops[0].input["depends"], [[2, ["success"]]])
        self.assertEqual(self.job_files(), ["job-1", "job-2", "job-3"])

    def test_errors_name_the_job_the_opcode_and_the_parameter(self) -> None:
        self.assertEqual(
            self.refused("SubmitJob", [dict(DELAY), {"OP_ID": "OP_TEST_DELAY", "duration": 1e308}]),
            "opcode 1: OP_TEST_DELAY: parameter 'duration' must be a number of seconds from 0 to 86400, not 1e+308",
        )
        self.assertEqual(self.refused("SubmitJob", [{"OP_ID": "OP_NOPE"}]), "opcode 0: OP_NOPE: unknown opcode")
        self.assertEqual(
            self.refused("SubmitManyJobs", [[dict(DELAY)], [dict(DELAY, on_master="false")]]),
            "Job 1: opcode 0: OP_TEST_DELAY: parameter 'on_master' must be a boolean, not 'false'",
        )
        self.assertIn("Job 0: Invalid 'depends'", self.refused("SubmitManyJobs", [[dict(DELAY, depends=[[-5, []]])]] * 2))

    def test_ganeti_test_jobqueue_wrong_priorities(self) -> None:
        """Ganeti's _TestJobSubmission: a wrong priority in any opcode fails
        SubmitJob and SubmitManyJobs (one of whose jobs is fine)."""
        for priority in (-21, -20, -11, -9, -1, 1, 9, 11, 19, 20):
            for before, after in ((0, 0), (3, 0), (0, 3), (4, 2)):
                ops = [dict(DELAY)] * before + [dict(DELAY, priority=priority)] + [dict(DELAY)] * after
                self.assertIn("parameter 'priority'", self.refused("SubmitJob", ops))
                good = [dict(DELAY), dict(DELAY, dry_run=False), dict(DELAY, dry_run=True)]
                self.assertIn("Job 1: opcode %d:" % before, self.refused("SubmitManyJobs", [good, ops]))
        self.assertEqual((self.queue.serial(), self.job_files()), (0, []))

    def test_drained_queue_checked_first(self) -> None:
        self.queue.set_drained(True)
        self.failureResultOf(self.call("SubmitJob", [dict(DELAY)]), errors.JobQueueDrainError)
        self.assertEqual(self.successResultOf(self.call("SubmitJobToDrainedQueue", [dict(DELAY)])), 1)
