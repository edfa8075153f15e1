"""A job submitted alone gets its waiting spare while its file is made
durable (fsynced here, and written by the master candidates), and the spare
is confirmed (runs anything) only once the job is acknowledged; a job that
is not acknowledged never runs (L{ganeti.luxid.acks})."""

from __future__ import annotations

import errno
import json
import os
import socket
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import channel
from ganeti.luxid.forkclient import ForkServer
from ganeti.luxid.service import LuxidService
from tests.unit.queue_helpers import DELAY, ReplicatedLuxidCase, open_queue, temp_root
from tests.unit.test_luxid_final_majority import FreezableCandidates


def with_fork_server(case: Any) -> None:
    """C{case.service} connected to WConfD (as far as the scheduler sees) and to a fork server whose other
    end is C{case.theirs}; C{case.killed} records the job processes killed."""
    case.service.wconfd = object()  # as if connected: the scheduler starts jobs
    case.server = ForkServer(MemoryReactorClock(), case.paths, lambda _exit: None)
    ours, case.theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    case.addCleanup(ours.close)
    case.addCleanup(case.theirs.close)
    case.server._sock, case.server.running = ours, True
    case.service.forkserver = case.server
    case.killed = []


class AcknowledgementTests(ReplicatedLuxidCase):
    prefix = "gnta"

    def make_fake(self, names: list[str]) -> FreezableCandidates:
        return FreezableCandidates(names)

    def setUp(self) -> None:
        super().setUp()
        with_fork_server(self)

    def spawned(self) -> list[int]:
        """The jobs handed to the fork server so far."""
        self.theirs.setblocking(False)
        jobs = []
        while True:
            try:
                message, fds, _flags, _addr = socket.recv_fds(self.theirs, 4096, 2)
            except BlockingIOError:
                return jobs
            for fd in fds:
                os.close(fd)
            jobs.append(json.loads(message)["job"])

    def announce(self, job_id: int) -> Any:
        """The spare announces itself (step 2 of the handshake); its channel, which records kills."""
        job_channel = self.service.processes[job_id]
        job_channel._write = lambda data: None
        job_channel._kill = lambda: self.killed.append(job_id)
        job = self.queue.read_job(job_id)
        job_channel.data_received(channel.encode({"lockfile": job.livelock, "pid": job.process_id}))
        return job_channel

    def thaw(self) -> None:
        for name in self.nodes:
            self.fake.thaw(name)
        self.settle()

    def held_submission(self) -> tuple[Deferred[Any], int]:
        """A job submitted alone while spare 4242 waits and both candidates are frozen."""
        self.server.report({"spare": 4242})
        self.fake.frozen.update(self.nodes)
        d = ensureDeferred(self.service.submit([DELAY]))
        self.settle()
        self.assertNoResult(d)
        job_id = self.queue.serial()
        self.assertEqual(self.spawned(), [job_id], "the spare was not given the job while the candidates wrote it")
        return d, job_id

    def test_the_spare_starts_at_once_and_is_confirmed_when_a_majority_holds_the_job(self) -> None:
        d, job_id = self.held_submission()
        job_channel = self.announce(job_id)
        self.assertFalse(job_channel.confirmed, "confirmed before the job was acknowledged")
        self.thaw()
        ((ok, answered),) = self.successResultOf(d)
        self.assertEqual((ok, answered), (True, job_id))
        self.assertTrue(job_channel.confirmed)
        self.assertEqual(self.killed, [])

    def test_a_spare_that_announces_itself_after_the_acknowledgement_is_confirmed_at_once(self) -> None:
        d, job_id = self.held_submission()
        self.thaw()
        self.successResultOf(d)
        self.assertTrue(self.announce(job_id).confirmed)

    def test_a_job_not_acknowledged_never_runs(self) -> None:
        d, job_id = self.held_submission()
        job_channel = self.announce(job_id)
        self.fake.down.update(self.nodes)  # the frozen candidates come back refusing the call
        self.thaw()
        failure = self.failureResultOf(d)
        self.assertIn("Job(s) %d" % job_id, str(failure.value))
        self.assertFalse(job_channel.confirmed)
        self.assertTrue(job_channel.aborted)
        self.assertEqual(self.killed, [job_id], "the waiting spare was not killed")
        self.assertEqual(self.service.view(job_id).status, "error")
        self.assertNotIn(job_id, self.service.live_jobs())

    def test_jobs_submitted_together_start_only_once_acknowledged(self) -> None:
        """Their spawn writes LuxiD's lock file into the job file: not while it is being made durable."""
        self.fake.frozen.update(self.nodes)
        d = ensureDeferred(self.service.submit([DELAY, DELAY]))
        self.settle()
        self.assertEqual(self.spawned(), [])
        self.thaw()
        ids = [job_id for _ok, job_id in self.successResultOf(d)]
        self.settle()
        self.assertEqual(sorted(self.service.processes), ids)

    def test_a_client_gone_during_the_acknowledgement_leaves_the_job_made(self) -> None:
        """Its resubmission (same submission id, as LUXI clients send after a lost connection) is answered
        with that job, which runs."""
        job = [dict(DELAY[0], reason=[["gnt:submission", "resent", 1]])]
        self.server.report({"spare": 4242})
        self.fake.frozen.update(self.nodes)
        d = ensureDeferred(self.service.submit([job]))
        self.settle()
        (job_id,) = self.spawned()
        d.cancel()
        self.failureResultOf(d)
        self.thaw()
        self.assertTrue(self.announce(job_id).confirmed)
        ((ok, again),) = self.successResultOf(ensureDeferred(self.service.submit([job])))
        self.assertEqual((ok, again), (True, job_id))
        self.assertIn(job_id, self.service.live_jobs())


class OneNodeAcknowledgementTests(SynchronousTestCase):
    """Without candidates, a job submitted alone gets its spare while its file
    is fsynced here (LuxiD's thread pool), and is confirmed once it is durable."""

    def setUp(self) -> None:
        self.paths = temp_root(self, "gnt1")
        self.clock = Clock()
        self.queue = open_queue(self, self.paths)
        self.service = LuxidService(self.paths, self.clock, self.queue)
        self.service.running = True
        with_fork_server(self)
        self.fsyncs: list[tuple[Deferred[Any], Any]] = []
        run_now = self.service._blocking

        def blocking(function: Any, *args: Any) -> Deferred[Any]:
            if function != self.queue.sync_jobs:
                return run_now(function, *args)
            d: Deferred[Any] = Deferred()
            self.fsyncs.append((d, lambda: function(*args)))
            return d

        self.service._blocking = blocking

    spawned = AcknowledgementTests.spawned
    announce = AcknowledgementTests.announce

    def settle(self) -> None:
        for _ in range(3):
            self.clock.advance(0)

    def submitted(self) -> tuple[Deferred[Any], int]:
        self.server.report({"spare": 4242})
        d = ensureDeferred(self.service.submit([DELAY]))
        self.settle()
        self.assertNoResult(d)
        job_id = self.queue.serial()
        self.assertEqual(self.spawned(), [job_id], "the spare was not given the job while its file was fsynced")
        self.assertEqual(len(self.fsyncs), 1)
        return d, job_id

    def test_the_spare_is_confirmed_once_the_job_file_is_durable(self) -> None:
        d, job_id = self.submitted()
        job_channel = self.announce(job_id)
        self.assertFalse(job_channel.confirmed, "confirmed before the job file was durable")
        fsynced, fsync = self.fsyncs.pop()
        fsync()
        fsynced.callback(None)
        self.settle()
        self.assertEqual(self.successResultOf(d), [[True, job_id]])
        self.assertTrue(job_channel.confirmed)
        self.assertEqual(self.killed, [])

    def test_a_job_whose_file_cannot_be_made_durable_never_runs(self) -> None:
        d, job_id = self.submitted()
        job_channel = self.announce(job_id)
        fsynced, _fsync = self.fsyncs.pop()
        fsynced.errback(OSError(errno.EIO, "Input/output error"))
        self.settle()
        failure = self.failureResultOf(d)
        self.assertIn("not written durably on the master", str(failure.value))
        self.assertFalse(job_channel.confirmed)
        self.assertEqual(self.killed, [job_id], "the waiting spare was not killed")
        self.assertEqual(self.service.view(job_id).status, "error")


class KernelFsyncs:
    """A L{ganeti.kernelsync.KernelSync} whose fsyncs end when the test says: the paths of their descriptors."""

    def __init__(self) -> None:
        self.pending: list[tuple[Deferred[None], list[str]]] = []

    def fsync(self, fds: list[int]) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        self.pending.append((d, [os.readlink("/proc/self/fd/%d" % fd) for fd in fds]))
        return d


class KernelFsyncAcknowledgementTests(OneNodeAcknowledgementTests):
    """With fsyncs by the kernel (L{ganeti.kernelsync}): the job file and the queue directory in one request,
    nothing in the thread pool; the lock file of a job whose spare was not planned is recorded without holding
    the reactor, and confirmed once that write is durable."""

    def setUp(self) -> None:
        super().setUp()
        self.kernel = KernelFsyncs()
        self.service.kernel_sync = self.kernel

    def submitted(self) -> tuple[Deferred[Any], int]:
        self.server.report({"spare": 4242})
        d = ensureDeferred(self.service.submit([DELAY]))
        self.settle()
        job_id = self.queue.serial()
        self.assertEqual(self.fsyncs, [], "nothing fsynced in the thread pool")
        self.assertEqual(len(self.kernel.pending), 1)
        fsynced, paths = self.kernel.pending[0]
        self.assertEqual(paths, [self.queue.job_path(job_id), self.queue.queue_dir])
        self.fsyncs.append((fsynced, lambda: None))
        return d, job_id

    def announced_unplanned(self) -> tuple[int, Any]:
        """Two jobs submitted together (no spare planned), acknowledged; the first one's process announces
        itself: its id and channel."""
        d = ensureDeferred(self.service.submit([DELAY, DELAY]))  # submitted together: no spare planned
        self.settle()
        for fsynced, _paths in self.kernel.pending:
            fsynced.callback(None)
        self.kernel.pending.clear()
        ids = [job_id for _ok, job_id in self.successResultOf(d)]
        self.settle()
        job_channel = self.service.processes[ids[0]]
        job_channel._write, job_channel._kill = (lambda data: None), (lambda: self.killed.append(ids[0]))
        lock = os.path.join(self.paths.lock_dir, "job_%06d_1" % ids[0])
        job_channel.data_received(channel.encode({"lockfile": lock, "pid": 4343}))
        return ids[0], job_channel

    def test_a_lock_file_is_confirmed_once_its_record_is_durable(self) -> None:
        job_id, job_channel = self.announced_unplanned()
        self.assertEqual(self.queue.read_job(job_id).process_id, 4343, "the lock file is in the job file")
        self.assertFalse(job_channel.confirmed, "confirmed before that write was durable")
        ((fsynced, paths),) = self.kernel.pending
        self.assertEqual(paths, [self.queue.job_path(job_id), self.queue.queue_dir])
        fsynced.callback(None)
        self.assertTrue(job_channel.confirmed)

    def test_a_lock_file_whose_record_cannot_be_made_durable_is_never_confirmed(self) -> None:
        job_id, job_channel = self.announced_unplanned()
        ((fsynced, _paths),) = self.kernel.pending
        fsynced.errback(OSError(errno.EIO, "Input/output error"))
        self.assertFalse(job_channel.confirmed)
        self.assertEqual(self.killed, [job_id])
        self.assertEqual(len(self.flushLoggedErrors(OSError)), 1)
