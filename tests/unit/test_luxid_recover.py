"""A job that ends just as LuxiD looks at it is taken as it ended, never as
dead: LuxiD checks the job's lock before it reads the job file (the process
writes its last job file before its lock goes).  Found by the chaos suite's
"every master daemon killed" trial (issue 12)."""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs.model import QueuedJob, QueuedOpCode
from ganeti.jobs.process import save_job
from ganeti.luxid import recovery
from ganeti.luxid import service as service_module
from ganeti.luxid.service import LuxidService
from tests.unit.queue_helpers import open_queue, temp_root


def _job(status: str, lockfile: str) -> QueuedJob:
    op = QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status=status)
    if status == "success":
        op.result = None
    job = QueuedJob(id=7, ops=[op], received_timestamp=[1, 0], start_timestamp=[2, 0], livelock=lockfile,
                    process_id=4242)
    if status == "success":
        job.end_timestamp = [3, 0]
    return job


class EndedMeanwhileTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gntrec")
        self.queue = open_queue(self, self.paths)
        self.service = LuxidService(self.paths, Clock(), self.queue)
        # a lock file nobody holds: the job's process is gone
        self.lockfile = os.path.join(self.paths.lock_dir, "job_7_1")
        os.makedirs(self.paths.lock_dir, exist_ok=True)
        open(self.lockfile, "w").close()

    def status_on_disk(self) -> list[str]:
        job = self.queue.read_job(7)
        assert job is not None
        return [op.status for op in job.ops]

    def test_recovery_takes_a_job_that_ended_after_the_queue_was_loaded(self) -> None:
        """LuxiD loaded the job as running; the process then wrote success
        and exited before LuxiD checked its lock: the job stays a success."""
        self.service.jobs = {7: _job("running", self.lockfile)}
        save_job(self.paths, _job("success", self.lockfile))
        recovery.recover(self.service)
        self.assertEqual(self.status_on_disk(), ["success"])
        self.assertEqual(self.service.jobs[7].ops[0].status, "success")

    def test_recovery_still_fails_a_job_whose_process_died(self) -> None:
        """The same job, still running on disk with its lock gone: failed."""
        running = _job("running", self.lockfile)
        save_job(self.paths, running)
        self.service.jobs = {7: running}
        recovery.recover(self.service)
        self.assertEqual(self.status_on_disk(), ["error"])

    def test_following_takes_a_job_that_ends_while_its_lock_is_checked(self) -> None:
        """An adopted job whose process writes success and exits right as
        LuxiD follows it: success, not "the job process died"."""
        save_job(self.paths, _job("running", self.lockfile))
        self.service.jobs = {7: _job("running", self.lockfile)}
        self.service.adopted = {7: self.lockfile}
        real = service_module.is_free

        def ends_now(path: str) -> Any:
            save_job(self.paths, _job("success", self.lockfile))  # the process's last write, then exit
            return real(path)

        self.patch(service_module, "is_free", ends_now)
        self.patch(self.service, "_cleanup_locks", lambda: None)
        self.service._follow_adopted()
        self.assertEqual(self.status_on_disk(), ["success"])
        self.assertEqual(self.service.adopted, {})


def _recorded_unconfirmed(lockfile: str) -> QueuedJob:
    """A job whose process's lock file LuxiD recorded (handshake step 3)
    but which never got its confirmation: its file is as LuxiD wrote it."""
    op = QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0})
    return QueuedJob(id=7, ops=[op], received_timestamp=[1, 0], livelock=lockfile, process_id=4242)


class RecordedNeverConfirmedTests(SynchronousTestCase):
    """LuxiD killed between recording a job process's lock file and sending
    the confirmation: the child sees the end of the pipe and exits without
    running anything, so the job runs again rather than failing ("the job
    process died while LuxiD was not running"; the chaos suite's
    wconfd+luxid trial, issue 23)."""

    def setUp(self) -> None:
        self.paths = temp_root(self, "gntunc")
        self.queue = open_queue(self, self.paths)
        self.service = LuxidService(self.paths, Clock(), self.queue)
        self.lockfile = os.path.join(self.paths.lock_dir, "job_000007_1")
        os.makedirs(self.paths.lock_dir, exist_ok=True)
        open(self.lockfile, "w").close()

    def on_disk(self) -> QueuedJob:
        job = self.queue.read_job(7)
        assert job is not None
        return job

    def test_recovery_queues_again_a_job_that_never_ran(self) -> None:
        job = _recorded_unconfirmed(self.lockfile)
        save_job(self.paths, job)
        self.service.jobs = {7: job}
        recovery.recover(self.service)
        self.assertEqual([op.status for op in self.on_disk().ops], ["queued"])
        self.assertIsNone(self.on_disk().livelock)
        self.assertIsNone(self.service.jobs[7].livelock)
        self.assertEqual(self.service.adopted, {})

    def test_recovery_queues_again_a_job_whose_planned_spare_never_came(self) -> None:
        # submitted with a spare planned (its lock file named, never created): LuxiD died before the spawn
        job = _recorded_unconfirmed(os.path.join(self.paths.lock_dir, "job_000007_2"))
        save_job(self.paths, job)
        self.service.jobs = {7: job}
        recovery.recover(self.service)
        self.assertEqual(([op.status for op in self.on_disk().ops], self.on_disk().livelock), (["queued"], None))
        self.assertEqual(self.service.adopted, {})

    def test_following_queues_again_a_job_that_never_ran(self) -> None:
        job = _recorded_unconfirmed(self.lockfile)
        save_job(self.paths, job)
        self.service.jobs = {7: job}
        self.service.adopted = {7: self.lockfile}
        self.patch(self.service, "_cleanup_locks", lambda: None)
        self.service._follow_adopted()
        self.assertEqual([op.status for op in self.on_disk().ops], ["queued"])
        self.assertIsNone(self.on_disk().livelock)
        self.assertEqual(self.service.adopted, {})

    def test_a_job_that_waited_for_its_locks_still_fails(self) -> None:
        """Once the process wrote its file (an opcode waiting), the job
        is failed as before."""
        job = _recorded_unconfirmed(self.lockfile)
        job.ops[0].status = "waiting"
        save_job(self.paths, job)
        self.service.jobs = {7: job}
        recovery.recover(self.service)
        self.assertEqual([op.status for op in self.on_disk().ops], ["error"])
