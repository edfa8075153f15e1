"""Every job file write reaches the replication hook (the distributor)."""

from __future__ import annotations

import os

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs.model import QueuedJob
from ganeti.luxid.service import LuxidService
from tests.unit.queue_helpers import open_queue, temp_root


class Recorder:
    def __init__(self) -> None:
        self.writes: list[tuple[str, bytes]] = []

    def __call__(self, path: str, content: bytes) -> None:
        self.writes.append((path, content))


class DistributionTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gntd")
        self.recorder = Recorder()
        self.queue = open_queue(self, self.paths, on_write=self.recorder)
        self.service = LuxidService(self.paths, Clock(), self.queue, distributor=self.recorder)
        self.service.running = True  # accept submissions without starting processes

    def job_writes(self, job_id: int) -> list[bytes]:
        path = self.queue.job_path(job_id)
        return [content for written, content in self.recorder.writes if written == path]

    def test_submission_hands_the_durable_job_file_to_the_distributor(self) -> None:
        ((ok, job_id),) = self.successResultOf(Deferred.fromCoroutine(self.service.submit([[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])))
        self.assertTrue(ok)
        (content,) = self.job_writes(job_id)
        with open(self.queue.job_path(job_id), "rb") as handle:
            self.assertEqual(handle.read(), content)
        self.assertIn(os.path.join(self.paths.queue_dir, "serial"), [p for p, _ in self.recorder.writes])

    def test_writes_by_a_job_process_are_distributed_when_seen(self) -> None:
        ((ok, job_id),) = self.successResultOf(Deferred.fromCoroutine(self.service.submit([[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])))
        self.service.processes[job_id] = object()  # as if a job process owned the file
        job = QueuedJob.from_dict(self.queue.read_job(job_id).to_dict())
        job.ops[0].status = "running"
        # the job process writes its file itself; LuxiD notices (inotify) and reloads
        from ganeti.jobs.process import save_job

        save_job(self.paths, job)
        self.service._reload(job_id)
        self.assertEqual(self.service.jobs[job_id].status, "running")
        self.assertIn(b'"running"', self.job_writes(job_id)[-1])
