"""LuxiD on a full data directory (issue 23): jobs accepted before it filled
end in error at once, saying so, instead of staying queued for ever; no job
is accepted until there is room; a submission that could not be written
leaves no job file."""

from __future__ import annotations

import errno
import os
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.jobs import space
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.luxid.service import LuxidService
from tests.unit.queue_helpers import open_queue, temp_root

DELAY = {"OP_ID": "OP_TEST_DELAY", "duration": 0}


class DiskFullTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gntdf")
        self.queue = open_queue(self, self.paths)
        self.free = 1 << 40
        self.patch(space, "free_bytes", lambda path: self.free)
        self.service = LuxidService(self.paths, Clock(), self.queue)
        self.service.running = True  # accept submissions without starting processes
        self.handler = LuxiHandler(self.service, self.paths, LiveData.for_node(Clock(), self.paths))
        self.full = False
        real = self.queue.write_job

        def write_job(job: Any, durable: bool = True, sync_dir: bool = True) -> bytes:
            reserve = os.path.join(self.paths.data_dir, space.RESERVE_NAME)
            if self.full and os.path.exists(reserve):  # no room but the reserve's
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(job, durable=durable, sync_dir=sync_dir)

        self.patch(self.queue, "write_job", write_job)

    def call(self, method: str, *args: Any) -> Deferred:
        return maybeDeferred(self.handler.handle, method, list(args))

    def test_queued_jobs_end_in_error_and_submissions_are_refused_until_there_is_room(self) -> None:
        ids = [self.successResultOf(self.call("SubmitJob", [dict(DELAY)])) for _ in range(3)]
        self.assertTrue(os.path.exists(os.path.join(self.paths.data_dir, space.RESERVE_NAME)))
        # the disk fills: the next submission fails, saying so, and leaves no file
        self.full, self.free = True, 0
        failure = self.failureResultOf(self.call("SubmitJob", [dict(DELAY)]), errors.JobQueueError)
        self.assertIn("the data directory %s is full" % self.paths.data_dir, str(failure.value))
        self.assertEqual(sorted(n for n in os.listdir(self.paths.queue_dir) if n.startswith("job-")),
                         ["job-%d" % i for i in ids])
        # the queued jobs ended in error at once, on disk too (the reserve's room)
        for job_id in ids:
            job = self.queue.read_job(job_id)
            self.assertTrue(job is not None and job.finalized, job_id)
            self.assertIn("is full", str(job.ops[0].result))
            self.assertEqual(self.service.jobs[job_id].ops[0].status, "error")
        # nothing is accepted while there is no room for the reserve
        failure = self.failureResultOf(self.call("SubmitJob", [dict(DELAY)]), errors.JobQueueError)
        self.assertIn("Cannot accept jobs: the data directory", str(failure.value))
        # room again: the reserve is made, jobs are accepted
        self.full, self.free = False, 1 << 40
        later = self.successResultOf(self.call("SubmitJob", [dict(DELAY)]))
        self.assertGreater(later, max(ids))
        self.assertTrue(os.path.exists(os.path.join(self.paths.data_dir, space.RESERVE_NAME)))

    def test_a_job_process_that_found_the_disk_full_says_so(self) -> None:
        """A job process that exited for want of space fails its job naming the full data directory,
        even while LuxiD's own reserve is intact."""
        from ganeti.luxid import diskfull
        from ganeti.luxid.spawner import JobExit

        full = diskfull.exit_message(self.service, JobExit(4, space.EXIT_DISK_FULL, None, True))
        self.assertIn("the data directory %s is full" % self.paths.data_dir, full)
        other = diskfull.exit_message(self.service, JobExit(4, 1, None, True))
        self.assertEqual(other, "the job process exited with status 1 before the job finished")

    def _ended_with(self, unsaved: Any) -> Any:
        """Job of two opcodes whose confirmed process sent C{unsaved(job dict)} (the
        disk full) over its pipe, then exited for want of space: the job as recorded."""
        from ganeti.jobs import channel
        from ganeti.luxid.spawner import JobChannel, JobExit

        job_id = self.successResultOf(self.call("SubmitJob", [dict(DELAY), dict(DELAY, duration=1)]))
        job_channel = JobChannel(job_id, self.paths, Clock(), lambda *_: None)
        job_channel.confirmed = True
        job_channel.data_received(channel.encode({channel.UNSAVED: unsaved(self.service.jobs[job_id].to_dict())}))
        self.service.processes[job_id] = job_channel
        self.service._job_exited(JobExit(job_id, space.EXIT_DISK_FULL, None, True))
        return self.queue.read_job(job_id)

    def test_an_opcode_that_succeeded_before_the_disk_filled_stays_a_success(self) -> None:
        """The process could not write its first opcode's success (its change made): LuxiD
        records that success from the process's last word and fails only the rest."""
        def first_done(data: dict) -> dict:
            data["ops"][0].update(status="success", result="done")
            data["ops"][1].update(status="running")
            return data

        job = self._ended_with(first_done)
        self.assertEqual([op.status for op in job.ops], ["success", "error"])
        self.assertEqual(job.ops[0].result, "done")
        self.assertIn("is full", str(job.ops[1].result))

    def test_a_job_whose_last_opcode_succeeded_succeeds(self) -> None:
        def all_done(data: dict) -> dict:
            for op in data["ops"]:
                op.update(status="success", result=None)
            return data

        job = self._ended_with(all_done)
        self.assertEqual(job.status, "success")

    def test_a_last_word_that_is_not_the_same_job_is_ignored(self) -> None:
        """Other opcodes than LuxiD recorded: the job fails as any dead process's."""
        def other_ops(data: dict) -> dict:
            data["ops"][0].update(status="success", result=None)
            data["ops"][0]["input"] = {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "name": None, "tags": ["x"]}
            return data

        job = self._ended_with(other_ops)
        self.assertEqual([op.status for op in job.ops], ["error", "error"])
