"""A temporary node root, an open job queue in it, and a LuxiD service that
replicates it to fake candidates, for LuxiD's unit tests."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs.model import QueuedJob
from ganeti.jobs.process import save_job
from ganeti.jobs.queue import JobQueueDir
from ganeti.luxid.replication import JobDistributor, JobReplicator
from ganeti.luxid.service import LuxidService
from ganeti.paths import Paths


def temp_root(case: SynchronousTestCase, prefix: str = "gntq") -> Paths:
    """A fresh root with Ganeti's directories, removed after C{case}."""
    root = tempfile.mkdtemp(prefix=prefix)
    case.addCleanup(shutil.rmtree, root, True)
    paths = Paths(root)
    paths.ensure_dirs()
    return paths


def open_queue(case: SynchronousTestCase, paths: Paths, **hooks: Any) -> JobQueueDir:
    """The job queue of C{paths}, open (with C{hooks}: C{on_write}, ...) until C{case} ends."""
    queue = JobQueueDir(paths, **hooks)
    queue.open()
    case.addCleanup(queue.close)
    return queue


#: one opcode that does nothing: the job every replication test submits
DELAY = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]


class ReplicatedLuxidCase(SynchronousTestCase):
    """A LuxiD service whose job files go to two candidates through C{self.fake}
    (made by L{make_fake}), on a L{Clock}: submissions, and the job process's
    writes seen as inotify would report them."""

    prefix = "gntr"

    def make_fake(self, names: list[str]) -> Any:
        """The fake node RPC the candidates answer through."""
        raise NotImplementedError

    def setUp(self) -> None:
        self.paths = temp_root(self, self.prefix)
        self.clock = Clock()
        self.nodes = {"node2.test": "127.0.1.2", "node3.test": "127.0.1.3"}
        self.fake = self.make_fake(list(self.nodes))
        self.replicator = JobReplicator(self.paths, self.clock, rpc=self.fake, candidates=lambda: dict(self.nodes))
        distributor = JobDistributor(self.replicator.written)
        self.queue = open_queue(self, self.paths, on_write=distributor, on_rename=self.replicator.renamed)
        self.service = LuxidService(self.paths, self.clock, self.queue, distributor=distributor,
                                    replicator=self.replicator)
        self.service.running = True  # accept submissions without starting processes
        self.replicator.start()
        self.addCleanup(self.replicator.stop)
        self.settle()

    def settle(self, seconds: float = 0.0) -> None:
        """Run what is due now, then (with C{seconds}) what is due that much later."""
        for _ in range(3):
            self.clock.advance(0)
        if seconds:
            self.clock.advance(seconds)
            for _ in range(3):
                self.clock.advance(0)

    def submit(self) -> int:
        ((ok, job_id),) = self.successResultOf(ensureDeferred(self.service.submit([DELAY])))
        self.assertTrue(ok)
        self.settle()
        return job_id

    def write(self, job_id: int, status: str, message: str | None = None) -> None:
        """The job's process writes its file with C{status} (a final C{success}
        with a result); LuxiD sees it (inotify)."""
        self.service.processes[job_id] = object()
        job = QueuedJob.from_dict(self.queue.read_job(job_id).to_dict())
        job.ops[0].status = status
        if status == "success":
            job.ops[0].result = "done"
        if message is not None:
            job.add_log(0, message, "message", when=1.0)
        save_job(self.paths, job)
        self.service._reload(job_id)
