"""Submission checks every opcode before anything is created (issue 12, defect 5;
issue 14: Ganeti's C{gnt-debug test-jobqueue})."""

from __future__ import annotations

import os
import random
import signal
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.jobs.channel import encode
from ganeti.jobs.process import save_job
from ganeti.jobs.processor import KILLED_RESULT
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.luxid.service import LuxidService
from ganeti.luxid.spawner import JobChannel, JobExit
from tests.unit.queue_helpers import open_queue, temp_root

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


class _LuxidCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gntsub")
        self.queue = open_queue(self, self.paths)
        self.service = LuxidService(self.paths, Clock(), self.queue)
        self.service.running = True  # accept submissions without starting processes
        self.handler = LuxiHandler(self.service, self.paths, LiveData.for_node(Clock(), self.paths))

    def call(self, method: str, *args: Any) -> Deferred:
        """C{method} as LuxiD runs a request: the contract's checks, then the handler."""
        return maybeDeferred(self.handler.handle, method, list(args))

    def refused(self, method: str, *args: Any) -> str:
        failure = self.failureResultOf(self.call(method, *args), errors.OpPrereqError)
        self.assertEqual(failure.value.args[1], errors.ECODE_INVAL)
        return str(failure.value.args[0])

    def job_files(self) -> list[str]:
        return sorted(n for n in os.listdir(self.paths.queue_dir) if n.startswith("job-"))

    call_sync = call


class SubmitTests(_LuxidCase):
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

    def test_empty_submit_many_jobs_answers_empty(self) -> None:
        """Issue 26: SubmitManyJobs of no job answers C{[]} and submits
        nothing, as Ganeti's (its gnt-group evacuate of an empty group)."""
        before = self.queue.serial()
        self.assertEqual(self.successResultOf(self.call("SubmitManyJobs", [])), [])
        self.assertEqual((self.queue.serial(), self.job_files(), self.service.jobs), (before, [], {}))
        self.assertEqual(self.successResultOf(self.call("SubmitJob", [dict(DELAY)])), before + 1)
        self.queue.set_drained(True)
        self.failureResultOf(self.call("SubmitManyJobs", []), errors.JobQueueDrainError)

    def test_drained_queue_checked_first(self) -> None:
        self.queue.set_drained(True)
        self.failureResultOf(self.call("SubmitJob", [dict(DELAY)]), errors.JobQueueDrainError)
        self.assertEqual(self.successResultOf(self.call("SubmitJobToDrainedQueue", [dict(DELAY)])), 1)


class FlagTests(_LuxidCase):
    """Flags are JSON booleans only: C{"false"}, C{{"a": 1}}, C{1} change nothing."""

    def test_drain_flag_booleans_only(self) -> None:
        for bad in ("false", "true", {"a": 1}, 1, 0, None, [], "yes"):
            failure = self.failureResultOf(self.call_sync("SetDrainFlag", bad), errors.OpPrereqError)
            self.assertIn("must be a boolean", failure.value.args[0])
            self.assertFalse(self.queue.is_drained())
        self.assertTrue(self.successResultOf(self.call_sync("SetDrainFlag", True)))
        self.assertTrue(self.queue.is_drained())
        for bad in ("false", 0, None):
            self.failureResultOf(self.call_sync("SetDrainFlag", bad), errors.OpPrereqError)
            self.assertTrue(self.queue.is_drained())
        self.successResultOf(self.call_sync("SetDrainFlag", False))
        self.assertFalse(self.queue.is_drained())

    def test_cancel_kill_boolean_only(self) -> None:
        job_id = self.successResultOf(self.call("SubmitJob", [dict(DELAY)]))
        for bad in ("true", 1, {"a": 1}, None):
            self.failureResultOf(self.call_sync("CancelJob", job_id, bad), errors.OpPrereqError)
            self.assertEqual(self.service.jobs[job_id].status, "queued")
        self.assertEqual(self.successResultOf(self.call_sync("CancelJob", job_id, False))[0], True)

    def test_legacy_queries_use_locking_boolean_only(self) -> None:
        for method in ("QueryNodes", "QueryInstances", "QueryGroups"):
            for bad in ("false", 0, {"a": 1}):
                failure = self.failureResultOf(self.call(method, [], ["name"], bad), errors.OpPrereqError)
                self.assertIn("use_locking must be a boolean", failure.value.args[0])
            failure = self.failureResultOf(self.call(method, [], ["name"], True), errors.OpPrereqError)
            self.assertIn("Sync queries are not allowed", failure.value.args[0])

    def test_priority_is_not_a_boolean(self) -> None:
        job_id = self.successResultOf(self.call("SubmitJob", [dict(DELAY, priority=10)]))
        self.failureResultOf(self.call_sync("ChangeJobPriority", job_id, False), errors.OpPrereqError)
        self.assertEqual(self.service.jobs[job_id].priority, 10)


class KillTests(_LuxidCase):
    """CancelJob of a job whose process runs: plain (Ganeti's: only while it
    waits) and with kill (SIGTERM, SIGKILL after the grace period)."""

    def setUp(self) -> None:
        super().setUp()
        self.clock: Clock = self.service.reactor
        self.signals: list[int] = []
        self.to_child: list[bytes] = []
        self.hard_kills: list[int] = []
        self.job_id = self.successResultOf(self.call("SubmitJob", [dict(DELAY, duration=3600), dict(DELAY)]))

    def spawn(self, confirm: bool = True) -> JobChannel:
        channel = JobChannel(self.job_id, self.paths, self.clock, self.service._record_lockfile)
        channel.os_kill = lambda pid, signum: self.signals.append(signum)
        channel.ready.addErrback(lambda _: None)  # as LuxidService._spawn does
        channel.attach(self.to_child.append, lambda: self.hard_kills.append(1))
        self.service.processes[self.job_id] = channel
        if confirm:
            lockfile = os.path.join(self.paths.lock_dir, "job_%06d_1" % self.job_id)
            channel.data_received(encode({"lockfile": lockfile, "pid": 4242}))
            self.assertTrue(channel.confirmed)
            self.job_process_writes("running")
        return channel

    def job_process_writes(self, status: str, result: Any = None) -> None:
        job = self.queue.read_job(self.job_id)
        assert job is not None
        for op in job.ops:
            op.status, op.result = status, result
        save_job(self.paths, job)
        self.service._reload(self.job_id)

    def exit(self, channel: JobChannel, signal: int | None) -> None:
        channel.ended()
        self.service._job_exited(JobExit(self.job_id, None if signal else 0, signal, channel.confirmed))

    def test_plain_cancel_of_a_running_job_is_refused(self) -> None:
        channel = self.spawn()
        d = self.call_sync("CancelJob", self.job_id)
        self.assertEqual(self.to_child[-1], encode({"cancel": True}))
        channel.data_received(encode({"cancelled": False}))
        ok, message = self.successResultOf(d)
        self.assertFalse(ok)
        self.assertIn("cannot be canceled", message)
        self.assertEqual((self.signals, self.service.jobs[self.job_id].status), ([], "running"))

    def test_kill_sigterm_the_job_records_canceled(self) -> None:
        channel = self.spawn()
        d = self.call_sync("CancelJob", self.job_id, True)
        self.assertEqual(self.signals, [signal.SIGTERM])
        self.assertNoResult(d)
        self.job_process_writes("canceled", KILLED_RESULT)
        self.exit(channel, None)
        self.assertEqual(self.successResultOf(d), [True, "Job %d killed (SIGTERM), status canceled" % self.job_id])
        self.clock.advance(60)
        self.assertEqual(self.signals, [signal.SIGTERM])
        self.assertEqual(self.queue.read_job(self.job_id).status, "canceled")

    def test_kill_sigkill_after_grace(self) -> None:
        """A process that ignores SIGTERM gets SIGKILL; LuxiD records the job canceled."""
        channel = self.spawn()
        d = self.call_sync("CancelJob", self.job_id, True)
        self.clock.advance(self.service.kill_grace - 0.1)
        self.assertEqual(self.signals, [signal.SIGTERM])
        self.clock.advance(0.1)
        self.assertEqual(self.signals, [signal.SIGTERM, signal.SIGKILL])
        self.exit(channel, 9)
        ok, message = self.successResultOf(d)
        self.assertTrue(ok)
        self.assertIn("SIGKILL after 5s", message)
        job = self.queue.read_job(self.job_id)
        assert job is not None
        reason = "Job canceled by request (killed: the job process killed by signal 9)"
        self.assertEqual([(op.status, op.result) for op in job.ops], [("canceled", reason)] * 2)
        self.assertEqual(job.ops[0].log[-1][3], reason)
        self.assertIsNotNone(job.end_timestamp)

    def test_cancel_before_the_process_was_confirmed(self) -> None:
        """A process not yet told to run never ran anything: cancel (with or
        without kill) stops it and cancels the job at once."""
        channel = self.spawn(confirm=False)
        self.assertEqual(self.successResultOf(self.call_sync("CancelJob", self.job_id))[0], True)
        self.assertEqual(self.hard_kills, [1])
        lockfile = os.path.join(self.paths.lock_dir, "job_%06d_1" % self.job_id)
        channel.data_received(encode({"lockfile": lockfile, "pid": 4242}))
        self.assertFalse(channel.confirmed)
        self.exit(channel, 9)
        self.assertEqual(self.queue.read_job(self.job_id).status, "canceled")
        self.assertEqual(self.service.jobs[self.job_id].status, "canceled")

    def test_kill_of_a_finished_job(self) -> None:
        self.job_process_writes("success")
        self.assertEqual(self.successResultOf(self.call_sync("CancelJob", self.job_id, True))[0], False)
