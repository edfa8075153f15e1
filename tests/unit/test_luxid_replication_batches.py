"""What the job queue replication sends, and when (L{ganeti.luxid.replication}):
batches per candidate, newer versions superseding queued ones, versions of
jobs that have not started waiting for the next, never two calls carrying
one file in flight to one candidate."""

from __future__ import annotations

import os

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import replicas
from ganeti.jobs.model import QueuedJob
from ganeti.jobs.replicas import not_started
from ganeti.luxid import replication
from ganeti.luxid.replication import LATER, batched
from tests.unit.queue_helpers import DELAY, ReplicatedLuxidCase
from tests.unit.test_queue_replicas import FakeCandidates


class BatchedTests(SynchronousTestCase):
    def test_runs_of_updates_become_batches_in_order(self) -> None:
        ops = [replicas.Rename("job-1", "archive/0/job-1"), replicas.Update("serial"), replicas.Update("job-2"),
               replicas.SetDrain(True), replicas.Update("job-3"), replicas.Remove(("job-9",))]
        self.assertEqual(batched(ops), [ops[0], [ops[1], ops[2]], ops[3], [ops[4]], ops[5]])

    def test_a_batch_has_at_most_batch_files(self) -> None:
        ops = [replicas.Update("job-%d" % n) for n in range(replication.BATCH_FILES + 1)]
        steps = batched(ops)
        self.assertEqual([len(step) for step in steps], [replication.BATCH_FILES, 1])

    def test_only_versions_of_running_jobs_need_no_fsync(self) -> None:
        job = QueuedJob.new(7, DELAY + DELAY)
        self.assertTrue(replicas.needs_durable("job-7", job.to_json()))  # a submission
        job.ops[0].status = "waiting"
        self.assertTrue(replicas.needs_durable("job-7", job.to_json()))
        job.ops[0].status = "running"
        self.assertFalse(replicas.needs_durable("job-7", job.to_json()))
        job.ops[0].status = "success"  # between its opcodes: still running
        self.assertFalse(replicas.needs_durable("job-7", job.to_json()))
        job.ops[1].status = "success"
        self.assertTrue(replicas.needs_durable("job-7", job.to_json()))  # final
        job.ops[1].status = "running"
        self.assertTrue(replicas.needs_durable("archive/0/job-7", job.to_json()))
        self.assertTrue(replicas.needs_durable("serial", b"7\n"))
        self.assertTrue(replicas.needs_durable("job-7", b"garbage"))

    def test_not_started(self) -> None:
        job = QueuedJob.new(1, DELAY + DELAY)
        self.assertTrue(not_started(job))
        job.ops[0].status = "waiting"
        self.assertTrue(not_started(job))
        job.ops[0].status = "running"
        self.assertFalse(not_started(job))
        job.ops[0].status = "success"
        job.ops[1].status = "waiting"  # the first one ran
        self.assertFalse(not_started(job))


class ReplicationTimingTests(ReplicatedLuxidCase):
    prefix = "gntb"

    def make_fake(self, names: list[str]) -> FakeCandidates:
        return FakeCandidates(names)

    def pushed(self, node: str, name: str) -> list[str]:
        """The names C{node} was sent, of C{name} only."""
        return [n for where, n in self.fake.pushed if where == node and n == name]

    def held_status(self, node: str, job_id: int) -> str | None:
        return replicas.job_status(self.fake.queues[node]["job-%d" % job_id])

    def test_versions_of_a_job_not_started_wait_for_the_next(self) -> None:
        job_id = self.submit()
        name = "job-%d" % job_id
        self.fake.pushed.clear()
        self.service._record_lockfile(job_id, os.path.join(self.paths.lock_dir, "job-lock"), 4242)
        self.write(job_id, "waiting")
        self.settle()
        self.assertEqual(self.fake.pushed, [], "the spawned and waiting versions wait")
        self.write(job_id, "running")
        self.settle()
        for node in self.nodes:
            self.assertEqual(self.pushed(node, name), [name], "the running version goes at once, alone")
            self.assertEqual(self.held_status(node, job_id), "running")
        self.assertEqual(self.replicator.status()["node2.test"]["in_sync"], True)
        self.assertEqual(sorted(self.fake.volatile), [(node, name) for node in sorted(self.nodes)], "not fsynced")
        self.write(job_id, "success")
        self.settle()
        self.assertEqual(len(self.fake.volatile), 2, "the final version is fsynced")
        self.assertEqual(self.service.view(job_id).status, "success")

    def test_a_submission_is_fsynced_on_the_candidates(self) -> None:
        self.fake.pushed.clear()
        self.submit()
        self.submit()
        self.assertEqual(len(self.fake.pushed), 8)  # per candidate: each job with the serial file
        self.assertEqual(self.fake.volatile, [])

    def test_a_version_that_may_wait_is_pushed_after_later_seconds(self) -> None:
        job_id = self.submit()
        self.write(job_id, "waiting")  # e.g. waiting a long time for its locks
        self.settle()
        self.assertEqual(self.held_status("node2.test", job_id), "queued")
        self.settle(LATER)
        for node in self.nodes:
            self.assertEqual(self.held_status(node, job_id), "waiting")

    def test_a_version_written_during_a_push_is_superseded_by_the_newest(self) -> None:
        job_id = self.submit()
        name = "job-%d" % job_id
        self.fake.pushed.clear()
        self.fake.hold = Deferred()  # node2's push of the running version stays in flight
        held = self.fake.hold
        self.write(job_id, "running")
        self.settle()
        self.write(job_id, "running", "step 1")
        self.write(job_id, "running", "step 2")
        self.write(job_id, "success")
        self.settle()
        self.assertEqual(self.service.view(job_id).status, "success")  # node3 and this node: a majority
        self.assertEqual(len(self.pushed("node2.test", name)), 1)
        held.callback(None)
        self.settle()
        # node2 gets the newest version next: none of those written in between
        self.assertEqual(len(self.pushed("node2.test", name)), 2)
        self.assertEqual(self.held_status("node2.test", job_id), "success")
        with open(self.queue.job_path(job_id), "rb") as handle:
            self.assertEqual(self.fake.queues["node2.test"][name], handle.read())

    def test_a_submission_not_made_durable_here_is_refused(self) -> None:
        """The master writes the job files, then fsyncs them while the
        candidates write them: the answer waits for both."""
        synced: list[list[int]] = []

        def sync_jobs(job_ids: list[int]) -> None:
            synced.append(list(job_ids))
            raise OSError(5, "Input/output error")

        self.patch(self.queue, "sync_jobs", sync_jobs)
        d = ensureDeferred(self.service.submit([DELAY, DELAY]))
        why = str(self.failureResultOf(d).value)
        self.assertIn("Job(s) 1, 2 not written durably on the master", why)
        self.assertEqual(synced, [[1, 2]])
        self.assertEqual(self.service.live_jobs(), {})
        self.assertEqual(self.queue.read_job(1).status, "error")

    def test_one_file_is_never_in_two_calls_to_one_candidate_at_once(self) -> None:
        """Two calls in flight could land in either order: a candidate would
        go back to an older version of the file (here, the serial)."""
        self.fake.pushed.clear()
        self.fake.hold = Deferred()  # node2's push of the first job stays in flight
        held = self.fake.hold
        first = self.submit()  # node3 and this node hold it: acknowledged
        second = self.submit()
        node2 = [n for where, n in self.fake.pushed if where == "node2.test"]
        self.assertEqual(node2, ["job-%d" % first, "serial", "job-%d" % second], "no second serial in flight")
        node3 = [n for where, n in self.fake.pushed if where == "node3.test"]
        self.assertEqual(node3, ["job-%d" % first, "serial", "job-%d" % second, "serial"])
        held.callback(None)
        self.settle()
        self.assertEqual(self.fake.queues["node2.test"]["serial"], b"%d\n" % second)
