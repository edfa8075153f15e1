"""Idempotent submission: a resubmission with the same submission id gets
the first submission's job ids (issue 23)."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs.model import QueuedJob
from ganeti.jobs.submission import SUBMISSION_SOURCE, SubmissionIndex, plan, reason_entry, submission_id
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.luxid.service import LuxidService
from tests.unit.queue_helpers import open_queue, temp_root


def job(key: str | None = None, duration: float = 0) -> list[dict[str, Any]]:
    op: dict[str, Any] = {"OP_ID": "OP_TEST_DELAY", "duration": duration}
    op["reason"] = [["gnt:client:gnt-debug", "delay", 1]]
    if key is not None:
        op["reason"].append(reason_entry(key, 2))
    return [op]


class PureTests(SynchronousTestCase):
    def test_id_from_first_opcode(self) -> None:
        """The id is the first opcode's C{gnt:submission} entry; anything else is no id."""
        self.assertEqual(submission_id(job("abc")), "abc")
        self.assertIsNone(submission_id(job()))
        self.assertIsNone(submission_id([{"OP_ID": "OP_TEST_DELAY", "reason": [[SUBMISSION_SOURCE, 7, 1]]}]))
        self.assertIsNone(submission_id([{"OP_ID": "OP_TEST_DELAY", "reason": [[SUBMISSION_SOURCE, "", 1]]}]))
        self.assertIsNone(submission_id([{"OP_ID": "OP_TEST_DELAY", "reason": "x"}]))
        self.assertIsNone(submission_id("junk"))
        self.assertIsNone(submission_id([job("x")[0] | {"reason": []}] + job("y")))

    def test_plan(self) -> None:
        """Known ids are answered, the same new id twice in one request makes one job."""
        index = SubmissionIndex()
        index.rebuild([QueuedJob.new(5, job("a")), QueuedJob.new(6, job()), QueuedJob.new(3, job("a"))])
        self.assertEqual(index.get("a"), 3)
        known, same_as = plan(index, [job("a"), job("b"), job(), job("b")])
        self.assertEqual(known, [3, None, None, None])
        self.assertEqual(same_as, {3: 1})


class _Service(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gntsubid")
        self.queue = open_queue(self, self.paths)
        self.service = self.new_service()

    def new_service(self) -> LuxidService:
        service = LuxidService(self.paths, Clock(), self.queue)
        service.running = True  # accept submissions without starting processes
        self.handler = LuxiHandler(service, self.paths, LiveData.for_node(Clock(), self.paths))
        return service

    def call(self, method: str, *args: Any) -> Any:
        d: Deferred = maybeDeferred(self.handler.handle, method, list(args))
        return self.successResultOf(d)

    def job_files(self) -> list[str]:
        return sorted(n for n in __import__("os").listdir(self.queue.queue_dir) if n.startswith("job-"))


class ResubmissionTests(_Service):
    def test_same_id_same_job(self) -> None:
        """SubmitJob twice with one id makes one job and answers its id twice."""
        first = self.call("SubmitJob", job("k1"))
        again = self.call("SubmitJob", job("k1"))
        self.assertEqual(first, again)
        self.assertEqual(self.job_files(), ["job-%d" % first])

    def test_many_jobs(self) -> None:
        """SubmitManyJobs: the known jobs keep their ids, new ones get new ids."""
        first = self.call("SubmitManyJobs", [job("m1"), job("m2")])
        again = self.call("SubmitManyJobs", [job("m1"), job("m3"), job("m2")])
        self.assertEqual([again[0], again[2]], first)
        self.assertTrue(again[1][0])
        self.assertNotIn(again[1][1], [first[0][1], first[1][1]])
        self.assertEqual(len(self.job_files()), 3)

    def test_without_id_as_before(self) -> None:
        """Jobs without an id (Ganeti's own clients) are never merged."""
        a = self.call("SubmitJob", job())
        b = self.call("SubmitJob", job())
        self.assertNotEqual(a, b)

    def test_index_rebuilt_from_job_files(self) -> None:
        """A LuxiD started on the same queue (a restart, or a new master holding
        the replicated files) answers a resubmission with the first id."""
        first = self.call("SubmitJob", job("r1"))
        self.queue.close()
        self.queue = open_queue(self, self.paths)
        self.service = self.new_service()
        self.service.jobs = self.queue.load_live_jobs()  # what startService does
        self.service.submissions.rebuild(self.service.jobs.values())
        self.assertEqual(self.call("SubmitJob", job("r1")), first)
        self.assertEqual(len(self.job_files()), 1)

    def test_resubmission_answered_on_a_drained_queue(self) -> None:
        """The job exists: a resubmission after the queue was drained gets its id, a new job is refused."""
        from ganeti import errors

        first = self.call("SubmitJob", job("d1"))
        self.queue.set_drained(True)
        self.assertEqual(self.call("SubmitJob", job("d1")), first)
        self.failureResultOf(maybeDeferred(self.handler.handle, "SubmitJob", [job("d2")]), errors.JobQueueDrainError)


def test_follow_up_jobs_do_not_inherit_the_submission_id() -> None:
    """Two follow-up jobs of a job with a submission id (gnt-node migrate through RAPI) are two jobs,
    neither taken for the parent."""
    from ganeti.jobs.followup import prepare

    parent = job("parent")[0]
    children = prepare(parent, [[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]] * 2, 19)
    assert [submission_id(ops) for ops in children] == [None, None]
    assert children[0][0]["reason"][0] == ["gnt:client:gnt-debug", "delay", 1]
