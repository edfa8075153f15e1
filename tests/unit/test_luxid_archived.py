"""Job queries find archived jobs as Ganeti's do (issue 14): C{gnt-job info}
and C{gnt-job list JOBID} of an archived job, C{gnt-job list --archived}
(the C{archived} field asks for every archived job), C{QueryJobs}."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs.model import QueuedJob, QueuedOpCode
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.luxid.service import LuxidService
from ganeti.objects import ConfigData
from tests.unit.queue_helpers import open_queue, temp_root


def finished(job_id: int) -> QueuedJob:
    op = QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status="success", result=job_id)
    return QueuedJob(id=job_id, ops=[op], received_timestamp=[1, 0], start_timestamp=[2, 0], end_timestamp=[3, 0])


class ArchivedJobQueryTests(SynchronousTestCase):
    def setUp(self) -> None:
        paths = temp_root(self, "gntarch")
        self.queue = open_queue(self, paths)
        for job_id in (1, 2, 3, 10001):
            self.queue.write_job(finished(job_id))
        self.assertEqual(self.queue.archive_jobs([1, 10001]), [1, 10001])
        self.service = LuxidService(paths, Clock(), self.queue)
        self.service.jobs = {2: finished(2), 3: finished(3)}  # what LuxiD holds: the live jobs
        self.handler = LuxiHandler(self.service, paths, LiveData.for_node(Clock(), paths))
        self.handler._config = ConfigData()

    def query(self, fields: list[str], qfilter: Any) -> list[list[Any]]:
        d = Deferred.fromCoroutine(self.handler.luxi_Query("job", fields, qfilter))
        return [[cell[1] for cell in row] for row in self.successResultOf(d)["data"]]

    def query_jobs(self, ids: Any, fields: list[str]) -> Any:
        return self.successResultOf(maybeDeferred(self.handler.luxi_QueryJobs, ids, fields))

    def test_an_archived_job_asked_by_id(self) -> None:
        """gnt-job info 1 / gnt-job list 1: found, with its data."""
        rows = self.query(["id", "status", "opresult", "archived"], ["|", ["=", "id", 1], ["=", "id", 2]])
        self.assertEqual(rows, [[1, "success", [1], True], [2, "success", [2], False]])
        self.assertEqual(self.query(["id", "status"], ["=", "id", "10001"]), [[10001, "success"]])

    def test_list_archived_asks_every_archived_job(self) -> None:
        """gnt-job list --archived adds the 'archived' field: archived jobs are listed too."""
        rows = self.query(["id", "status", "archived"], None)
        self.assertEqual(rows, [[1, "success", True], [2, "success", False], [3, "success", False],
                                [10001, "success", True]])
        self.assertEqual([r[0] for r in self.query(["id", "status"], None)], [2, 3], "without it: live jobs only")

    def test_query_jobs(self) -> None:
        self.assertEqual(self.query_jobs([1, 2, 99], ["id", "status", "archived"]),
                         [[1, "success", True], [2, "success", False], None])
        self.assertEqual([row[0] for row in self.query_jobs(None, ["id", "archived"])], [1, 2, 3, 10001])
        self.assertEqual([row[0] for row in self.query_jobs(None, ["id"])], [2, 3])
