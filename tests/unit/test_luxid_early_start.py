"""A job submitted alone while the fork server's spare waits is handed to
the spare while its file is made durable (L{ganeti.luxid.intake.EarlyStarts});
the process is told to run only once the job is acknowledged, is killed
when the submission fails, and is called off when the scheduler would not
start the job after all.

The fork server is one end of a Unix socket pair (what it receives is
read back); the candidates' replication is a Deferred the test fires.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import nullcontext
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.jobs import channel
from ganeti.luxid.forkclient import ForkServer
from ganeti.luxid.service import LuxidService
from ganeti.luxid.spawner import JobExit
from tests.unit.queue_helpers import open_queue, temp_root

OP = {"OP_ID": "OP_TEST_DELAY", "duration": 0}


class HeldReplication:
    """Candidates whose answer to a new job file comes when the test says."""

    def __init__(self) -> None:
        self.pending: list[Deferred] = []

    def replicate(self, _files: Any) -> Deferred:
        d: Deferred = Deferred()
        self.pending.append(d)
        return d

    def later(self, _path: str) -> Any:
        return nullcontext()

    def confirm(self, _path: str, _content: bytes) -> Deferred:
        d: Deferred = Deferred()
        d.callback(None)
        return d


class Guard:
    def __init__(self) -> None:
        self.why: str | None = None

    def blocked(self) -> str | None:
        return self.why


class EarlyStartTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gnte")
        self.queue = open_queue(self, self.paths)
        self.reactor = MemoryReactorClock()
        self.service = LuxidService(self.paths, self.reactor, self.queue, use_forkserver=False)
        self.service.running = True
        self.service.wconfd = object()  # as if connected: the scheduler starts jobs
        self.service.guard = self.guard = Guard()
        self.server = ForkServer(self.reactor, self.paths, lambda _exit: None)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        theirs.setblocking(False)
        self.server._sock, self.server.running, self.theirs = ours, True, theirs
        self.killed: list[int] = []
        # pid 4242 is no process of ours: kills are recorded, not sent
        self.server.kill = self.killed.append
        self.service.forkserver = self.server
        self.server.report({"spare": 4242})

    def replicated(self) -> HeldReplication:
        self.service.replicator = replication = HeldReplication()
        return replication

    def requests(self) -> list[dict[str, Any]]:
        """What the fork server received since the last call."""
        received = []
        while True:
            try:
                message, fds, _flags, _addr = socket.recv_fds(self.theirs, 4096, 2)
            except BlockingIOError:
                return received
            for fd in fds:
                os.close(fd)
            received.append(json.loads(message))

    def announce(self, job_id: int) -> Any:
        """The spare's announcement of the lock file LuxiD named for it; its channel."""
        job = self.queue.read_job(job_id)
        job_channel = self.service.early.held.get(job_id) or self.service.processes[job_id]
        job_channel.data_received(channel.encode({"lockfile": job.livelock, "pid": 4242}))
        return job_channel

    def test_the_spare_starts_while_the_candidates_write_and_runs_once_acknowledged(self) -> None:
        replication = self.replicated()
        submitted = Deferred.fromCoroutine(self.service.submit([[OP]]))
        self.assertNoResult(submitted)
        (request,) = self.requests()
        job_id = request["job"]
        self.assertEqual(request["lockfile"], self.queue.read_job(job_id).livelock)
        job_channel = self.announce(job_id)
        self.assertFalse(job_channel.confirmed, "told to run before its job is acknowledged")
        self.assertNotIn(job_id, self.service.jobs)
        replication.pending[0].callback((3, 3))
        self.assertEqual(self.successResultOf(submitted), [[True, job_id]])
        self.assertTrue(job_channel.confirmed)
        self.assertIs(self.service.processes[job_id], job_channel)
        self.reactor.advance(0)  # the scheduler: the job has its process, no second one
        self.assertEqual(self.requests(), [])
        self.assertEqual(self.killed, [])

    def test_without_candidates_the_spare_runs_the_job_once_the_file_is_durable(self) -> None:
        ((_ok, job_id),) = self.successResultOf(Deferred.fromCoroutine(self.service.submit([[OP]])))
        self.assertEqual([r["job"] for r in self.requests()], [job_id])
        self.assertTrue(self.announce(job_id).confirmed)

    def test_a_submission_without_a_majority_kills_its_early_process(self) -> None:
        replication = self.replicated()
        submitted = Deferred.fromCoroutine(self.service.submit([[OP]]))
        (request,) = self.requests()
        job_id = request["job"]
        job_channel = self.announce(job_id)
        replication.pending[0].callback((1, 3))
        self.failureResultOf(submitted, errors.JobQueueError)
        self.assertEqual(self.killed, [job_id])
        self.assertFalse(job_channel.confirmed)
        self.assertTrue(job_channel.aborted)
        self.assertEqual(self.queue.read_job(job_id).status, "error")
        self.service._job_exited(JobExit(job_id, None, 9, False))
        self.reactor.advance(0)
        self.assertEqual(self.requests(), [], "a failed submission is not started")

    def test_a_job_the_scheduler_holds_at_its_acknowledgement_is_called_off_then_started(self) -> None:
        replication = self.replicated()
        submitted = Deferred.fromCoroutine(self.service.submit([[OP]]))
        (request,) = self.requests()
        job_id = request["job"]
        job_channel = self.announce(job_id)
        self.guard.why = "the master's stall guard waits for its confirmation"
        replication.pending[0].callback((3, 3))
        self.successResultOf(submitted)
        self.assertFalse(job_channel.confirmed)
        self.assertEqual(self.killed, [job_id])
        self.service._job_exited(JobExit(job_id, None, 9, False))
        job = self.queue.read_job(job_id)
        self.assertEqual((job.status, job.livelock), ("queued", None))
        self.assertEqual(self.service.start_attempts, {}, "an early start called off is no failed start")
        self.guard.why = None
        self.service.schedule()
        self.assertEqual([r["job"] for r in self.requests()], [job_id])
        self.assertIsNot(self.service.processes[job_id], job_channel)

    def test_no_early_start_while_another_job_waits_for_a_free_slot(self) -> None:
        self.service.max_running_override = 1
        self.service.adopted[999] = "/nonexistent/lock"  # the one job running
        replication = self.replicated()
        submitted = Deferred.fromCoroutine(self.service.submit([[OP]]))
        self.assertEqual(self.requests(), [])
        replication.pending[0].callback((3, 3))
        self.successResultOf(submitted)
        self.assertEqual(self.requests(), [])
        self.assertEqual(self.service.early.held, {})
