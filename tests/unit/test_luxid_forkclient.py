"""LuxiD's ends of the fork server's job pipes are closed, never leaked.

The fork server itself is replaced by one end of a Unix socket pair (what
it would receive is checked); the job's pipes are real pipes, watched by a
MemoryReactorClock, so the test sees exactly which descriptors stay open.
"""

from __future__ import annotations

import errno
import json
import os
import socket
from typing import Any, cast

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti import forkseed
from ganeti.jobs import channel
from ganeti.jobs.model import QueuedJob
from ganeti.jobs.process import save_job
from ganeti.luxid import forkclient
from ganeti.luxid import service as service_module
from ganeti.luxid.forkclient import EXIT_GRACE, ForkServer
from ganeti.luxid.service import SPAWN_RETRY, LuxidService
from ganeti.luxid.spawner import JobChannel, JobExit
from ganeti.paths import Paths
from tests.unit.queue_helpers import open_queue, temp_root

PATHS = Paths("/tmp/forkclient-test-root")


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class ForkClientPipeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.exits: list[JobExit] = []
        self.server = ForkServer(self.reactor, PATHS, self.exits.append)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        self.server._sock, self.server.running = ours, True
        self.theirs = theirs

    def spawn(self, job_id: int) -> tuple[JobChannel, list[int]]:
        """Spawn through the fake server; the child's ends as it receives them."""
        job_channel = JobChannel(job_id, PATHS, self.reactor, lambda *_: None)
        job_channel.ready.addErrback(lambda _: None)  # it never confirms here
        self.server.spawn(job_channel)
        _msg, child_fds, _flags, _addr = socket.recv_fds(self.theirs, 4096, 2)
        self.addCleanup(lambda: [os.close(fd) for fd in child_fds if is_open(fd)])
        return job_channel, child_fds

    def request(self) -> dict[str, Any]:
        message, child_fds, _flags, _addr = socket.recv_fds(self.theirs, 4096, 2)
        self.addCleanup(lambda: [os.close(fd) for fd in child_fds if is_open(fd)])
        return cast("dict[str, Any]", json.loads(message))

    def test_a_spare_planned_at_submission_is_named_its_lock_file(self) -> None:
        self.assertIsNone(self.server.plan(6))  # no spare reported yet
        self.server.report({"spare": 4242})
        planned = self.server.plan(7)
        assert planned is not None
        lock_path, pid = planned
        self.assertTrue(lock_path.startswith(PATHS.lock_dir + "/job_000007_"), lock_path)
        self.assertEqual(pid, 4242)
        self.assertIsNone(self.server.plan(8))  # that spare is taken
        job_channel = JobChannel(7, PATHS, self.reactor, lambda *_: None)
        self.assertTrue(self.server.is_planned(7, lock_path, 4242))  # what its job file holds
        self.server.spawn(job_channel, planned=True)
        self.assertEqual(self.request(), {"job": 7, "lockfile": lock_path})
        self.assertEqual(job_channel.prerecorded, (lock_path, 4242))

    def test_a_plan_the_job_file_does_not_hold_is_not_used(self) -> None:
        self.server.report({"spare": 4242})
        lock_path, _pid = self.server.plan(7) or ("", 0)
        job_channel = JobChannel(7, PATHS, self.reactor, lambda *_: None)
        self.assertFalse(self.server.is_planned(7, "/run/luxi-daemon_1", None))  # step 1 rewrote it
        self.server.spawn(job_channel)
        self.assertEqual(self.request(), {"job": 7})
        self.assertIsNone(job_channel.prerecorded)
        # another job spawned first: the spare goes to it, the plan is void
        self.server.report({"spare": 4343})
        self.server.plan(8)
        other = JobChannel(9, PATHS, self.reactor, lambda *_: None)
        self.assertFalse(self.server.is_planned(9, None, None))
        self.server.spawn(other)
        self.assertEqual((self.request(), other.prerecorded, self.server.planned), ({"job": 9}, None, None))

    def test_a_spare_taken_before_its_report_is_not_planned(self) -> None:
        self.server.report({"spare": 4242})
        self.server.report({"spawned": 6, "pid": 4242})  # a job sent before the report came took it
        self.assertIsNone(self.server.plan(7))

    def test_a_retired_spare_is_not_planned(self) -> None:
        self.server.report({"spare": 4242})
        self.server.report({"retired": 4141})  # an older one's: the spare waiting stays
        self.server.report({"retired": 4242})
        self.assertIsNone(self.server.plan(7))
        self.server.report({"spare": 4343})
        self.assertEqual(self.server.plan(8)[1], 4343)

    def luxid_fds(self, job_id: int) -> tuple[int, ...]:
        return self.server._pipes[job_id].fds

    def test_pipes_are_closed_when_the_job_closes_its_ends(self) -> None:
        _channel, child_fds = self.spawn(7)
        ours = self.luxid_fds(7)
        self.assertTrue(all(is_open(fd) for fd in ours))
        for fd in child_fds:  # the job process exits: its ends close
            os.close(fd)
        reader = next(r for r in self.reactor.getReaders() if r.fileno() == ours[0])
        why = reader.doRead()  # end of file; the reactor then disconnects it
        self.assertIsNotNone(why)
        reader.connectionLost(Failure(why))
        self.assertEqual([fd for fd in ours if is_open(fd)], [])
        self.assertEqual(self.server.open_pipes, 0)
        self.assertEqual(self.reactor.getReaders(), [])
        self.assertEqual(self.reactor.getWriters(), [])

    def test_pipes_are_closed_after_the_reported_exit_at_the_latest(self) -> None:
        """A grandchild may hold the job's ends: LuxiD closes its own anyway."""
        job_channel, _child_fds = self.spawn(8)
        ours = self.luxid_fds(8)
        self.server.report({"spawned": 8, "pid": 4242})
        self.server.report({"exited": 4242, "job": 8, "code": 0, "signal": None})
        self.assertEqual([e.job_id for e in self.exits], [8])
        self.assertTrue(all(is_open(fd) for fd in ours), "the job's last words are still read")
        self.reactor.advance(EXIT_GRACE)
        self.assertEqual([fd for fd in ours if is_open(fd)], [])
        self.assertEqual(self.server.open_pipes, 0)
        self.assertEqual(self.reactor.getReaders(), [])
        self.assertFalse(job_channel.send({"cancel": True}))

    def test_pipes_are_closed_when_the_server_dies(self) -> None:
        """... and the jobs it ran are handed back (their exits will never come)."""
        orphans: list[list[JobChannel]] = []
        self.server.on_orphaned = orphans.append
        job_channel, _child_fds = self.spawn(9)
        ours = self.luxid_fds(9)
        self.server.server_ended(Failure(ProcessTerminated(signal=9)))
        self.assertEqual([fd for fd in ours if is_open(fd)], [])
        self.assertEqual(orphans, [[job_channel]])
        self.assertEqual(self.exits, [])

    def test_a_failed_spawn_leaves_no_descriptor(self) -> None:
        """Too many open files at the second pipe: the first one is closed."""
        made: list[int] = []
        real_pipe2 = os.pipe2

        def pipe2(flags: int) -> Any:
            if made:
                raise OSError(errno.EMFILE, "Too many open files")
            fds = real_pipe2(flags)
            made.extend(fds)
            return fds

        self.patch(forkclient.os, "pipe2", pipe2)
        job_channel = JobChannel(10, PATHS, self.reactor, lambda *_: None)
        self.assertRaises(OSError, self.server.spawn, job_channel)
        self.assertEqual(len(made), 2)
        self.assertEqual([fd for fd in made if is_open(fd)], [])
        self.assertEqual(self.server.open_pipes, 0)


class IdleRetirementTests(SynchronousTestCase):
    """A fork server without a job for C{idle} seconds is ended (its memory comes back); the next job starts
    a new one.  Each server is a seed (its socket and report pipe), as L{ForkServer.start} adopts it."""

    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.exits: list[JobExit] = []
        self.server = ForkServer(self.reactor, PATHS, self.exits.append, idle=60.0)
        self.servers: list[socket.socket] = []  # the server's end of each seed, in the order started
        self.patch(forkclient.forkseed, "take", self.new_seed)
        self.addCleanup(self.server.stop)

    def new_seed(self) -> forkseed.Seed:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        reports, report_w = os.pipe()
        for closing in (ours.close, theirs.close, lambda: os.close(report_w)):
            self.addCleanup(closing)
        self.servers.append(theirs)
        return forkseed.Seed(2**22 + len(self.servers), ours, reports)  # (no such child: never reaped)

    def received(self, server: socket.socket) -> list[bytes]:
        """What the server end holds: the adoption message, the job requests, b"" once LuxiD closed it."""
        server.setblocking(False)
        messages = []
        while True:
            try:
                message, fds, _flags, _addr = socket.recv_fds(server, 1 << 20, 2)
            except BlockingIOError:
                return messages
            for fd in fds:
                os.close(fd)
            messages.append(message if not message else (b"job" if b'"job"' in message else b"adopt"))
            if not message:
                return messages

    def run_job(self, job_id: int) -> JobChannel:
        job_channel = JobChannel(job_id, PATHS, self.reactor, lambda *_: None)
        job_channel.ready.addErrback(lambda _: None)
        self.server.spawn(job_channel)
        self.server.report({"spawned": job_id, "pid": 4000 + job_id})
        return job_channel

    def end_job(self, job_id: int) -> None:
        self.server.report({"exited": 4000 + job_id, "job": job_id, "code": 0, "signal": None})
        self.server._forget_pipes(job_id)  # (the job closed its ends)

    def test_the_server_is_retired_after_idle_seconds_and_started_again_for_the_next_job(self) -> None:
        self.server.start()
        self.run_job(1)
        self.end_job(1)
        self.reactor.advance(59.9)
        self.assertTrue(self.server.running)
        self.assertEqual(self.received(self.servers[0]), [b"adopt", b"job"])
        self.reactor.advance(0.1)
        self.assertEqual((self.server.running, self.server.retired, self.server.available), (False, True, True))
        self.assertEqual(self.received(self.servers[0]), [b""])  # closed: the server exits
        self.assertEqual(self.reactor.getReaders(), [])
        self.run_job(2)  # a new server, and the job sent to it
        self.assertEqual((self.server.running, self.server.retired, len(self.servers)), (True, False, 2))
        self.assertEqual(self.received(self.servers[1]), [b"adopt", b"job"])
        self.end_job(2)
        self.assertEqual([e.job_id for e in self.exits], [1, 2])
        self.reactor.advance(60)
        self.assertTrue(self.server.retired)

    def test_a_server_that_ran_no_job_is_retired_too(self) -> None:
        self.server.start()
        self.reactor.advance(60)
        self.assertTrue(self.server.retired)

    def test_no_retirement_while_a_job_runs_or_its_pipes_are_open(self) -> None:
        self.server.start()
        self.run_job(1)
        self.run_job(2)
        self.end_job(1)
        self.reactor.advance(600)  # job 2 still runs
        self.assertTrue(self.server.running)
        self.server.idle = EXIT_GRACE / 2
        self.server.report({"exited": 4002, "job": 2, "code": 0, "signal": None})  # its pipes not closed yet
        self.reactor.advance(EXIT_GRACE * 0.9)
        self.assertTrue(self.server.running)
        self.reactor.advance(EXIT_GRACE * 0.6)  # closed after the grace, the idle time counted again since
        self.assertTrue(self.server.retired)

    def test_a_job_in_the_idle_time_counts_it_again(self) -> None:
        self.server.start()
        self.reactor.advance(50)
        self.run_job(1)
        self.reactor.advance(20)
        self.end_job(1)
        self.reactor.advance(59)
        self.assertTrue(self.server.running)
        self.reactor.advance(1)
        self.assertTrue(self.server.retired)

    def test_idle_zero_never_retires(self) -> None:
        self.server.idle = 0
        self.server.start()
        self.run_job(1)
        self.end_job(1)
        self.reactor.advance(10 ** 6)
        self.assertTrue(self.server.running)
        self.assertEqual(self.reactor.getDelayedCalls(), [])

    def test_a_new_server_that_cannot_start_is_tried_again_by_the_next_job(self) -> None:
        """(Too many open files, say: the job is started directly; the fork server is not given up.)"""
        self.server.start()
        self.reactor.advance(60)
        self.patch(forkclient.forkseed, "take", lambda: None)
        self.patch(forkclient.forkseed, "fork_running", lambda: None)
        self.patch(forkclient.socket, "socketpair", lambda *_: (_ for _ in ()).throw(OSError(errno.EMFILE, "no")))
        job_channel = JobChannel(1, PATHS, self.reactor, lambda *_: None)
        self.assertRaises(OSError, self.server.spawn, job_channel)
        self.assertEqual((self.server.running, self.server.available), (False, True))

    def test_the_new_server_is_forked_from_luxid_as_it_runs(self) -> None:
        self.server.start()  # (the seed forked at LuxiD's start)
        self.reactor.advance(60)
        forked = self.new_seed()
        self.patch(forkclient.forkseed, "take", lambda: None)  # taken already
        self.patch(forkclient.forkseed, "fork_running", lambda: forked)
        self.run_job(1)
        self.assertEqual((self.server.running, self.server._seed), (True, forked))
        self.assertEqual(self.received(self.servers[-1]), [b"adopt", b"job"])

    def test_a_server_that_died_is_started_again_after_a_wait_that_grows_while_they_die_young(self) -> None:
        """LuxiD starts its jobs directly meanwhile: a server that dies at once is not started for each job."""
        self.server.start()
        self.reactor.advance(5)
        self.server.server_ended(Failure(ProcessTerminated(signal=9)))
        self.assertFalse(self.server.available)
        self.reactor.advance(forkclient.COMEBACK_AFTER * 0.9)
        self.assertFalse(self.server.available)
        self.reactor.advance(forkclient.COMEBACK_AFTER * 0.1)
        self.assertEqual((self.server.available, self.server.running), (True, False))
        self.run_job(1)  # the next job starts a new one
        self.assertEqual((self.server.running, len(self.servers)), (True, 2))
        self.assertEqual(self.received(self.servers[1]), [b"adopt", b"job"])
        self.server.server_ended(Failure(ProcessTerminated(signal=9)))  # it died young: the wait doubles
        self.reactor.advance(forkclient.COMEBACK_AFTER * 1.9)
        self.assertFalse(self.server.available)
        self.reactor.advance(forkclient.COMEBACK_AFTER * 0.1)
        self.assertTrue(self.server.available)
        self.run_job(2)
        self.reactor.advance(forkclient.COMEBACK_MAX)  # this one runs long enough: the next death waits little
        self.server.idle = 0
        self.server.server_ended(Failure(ProcessTerminated(signal=9)))
        self.reactor.advance(forkclient.COMEBACK_AFTER)
        self.assertTrue(self.server.available)

    def test_a_stopped_server_is_not_started_again(self) -> None:
        self.server.start()
        self.server.server_ended(Failure(ProcessTerminated(signal=9)))
        self.server.stop()
        self.reactor.advance(forkclient.COMEBACK_MAX)
        self.assertFalse(self.server.available)


class SpawnFailureTests(SynchronousTestCase):
    """A job whose process cannot be started at all stays queued and runs later."""

    def setUp(self) -> None:
        self.paths = temp_root(self, "gntf")
        self.queue = open_queue(self, self.paths)
        self.clock = Clock()
        self.service = LuxidService(self.paths, self.clock, self.queue, use_forkserver=False)
        self.service.running = True
        self.service.wconfd = object()  # as if connected: the scheduler starts jobs
        self.spawned: list[int] = []
        self.failing = True

        def spawn_direct(reactor: Any, paths: Paths, job_channel: JobChannel, on_exit: Any, rpc_port: int = 0) -> None:
            if self.failing:
                raise OSError(errno.EMFILE, "Too many open files")
            self.spawned.append(job_channel.job_id)

        self.patch(service_module, "spawn_direct", spawn_direct)

    def test_jobs_of_a_dead_fork_server_are_followed_or_started_again(self) -> None:
        self.failing = False
        ids = []
        for _ in range(2):
            ((ok, job_id),) = self.successResultOf(
                Deferred.fromCoroutine(self.service.submit([[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])))
            ids.append(job_id)
        self.service.max_running_override = 1
        self.clock.advance(0)
        confirmed = self.service.processes[ids[0]]
        confirmed.confirmed, confirmed.lockfile = True, self.paths.lock_dir + "/job-lock"
        unconfirmed = JobChannel(ids[1], self.paths, self.clock, lambda *_: None)
        unconfirmed.ready.addErrback(lambda _: None)
        self.service.processes[ids[1]] = unconfirmed
        self.service._jobs_orphaned([confirmed, unconfirmed])
        self.assertEqual(self.service.adopted, {ids[0]: self.paths.lock_dir + "/job-lock"})
        self.assertNotIn(ids[0], self.service.processes, "no longer counted as a process that will report")
        self.assertEqual(self.queue.read_job(ids[1]).livelock, None, "queued again: it never ran")

    def test_the_job_is_started_once_processes_can_be_made_again(self) -> None:
        ((ok, job_id),) = self.successResultOf(
            Deferred.fromCoroutine(self.service.submit([[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])))
        self.clock.advance(0)  # the scheduler runs
        self.assertNotIn(job_id, self.service.processes, "not stuck as if it had a process")
        job = self.queue.read_job(job_id)
        self.assertEqual((job.status, job.livelock), ("queued", None))
        self.failing = False
        self.clock.advance(SPAWN_RETRY)
        self.assertEqual(self.spawned, [job_id])
        self.assertIn(job_id, self.service.processes)


class PlannedSpareTests(SynchronousTestCase):
    """A job submitted alone while a spare waits names the spare's lock file and pid in the job file it
    makes durable before the acknowledgement; the spare's announcement of them is confirmed without the
    handshake's own durable write."""

    def setUp(self) -> None:
        self.paths = temp_root(self, "gntp")
        self.writes: list[str] = []
        self.queue = open_queue(self, self.paths, on_write=lambda path, _content: self.writes.append(path))
        self.reactor = MemoryReactorClock()
        self.service = LuxidService(self.paths, self.reactor, self.queue, use_forkserver=False)
        self.service.running = True
        self.service.wconfd = object()  # as if connected: the scheduler starts jobs
        self.server = ForkServer(self.reactor, self.paths, lambda _exit: None)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.addCleanup(ours.close)
        self.addCleanup(theirs.close)
        self.server._sock, self.server.running, self.theirs = ours, True, theirs
        self.service.forkserver = self.server

    def submit(self, *jobs: list[dict[str, Any]]) -> list[int]:
        answer = self.successResultOf(Deferred.fromCoroutine(self.service.submit([list(ops) for ops in jobs])))
        return [job_id for _ok, job_id in answer]

    def request(self) -> tuple[dict[str, Any], list[int]]:
        message, fds, _flags, _addr = socket.recv_fds(self.theirs, 4096, 2)
        self.addCleanup(lambda: [os.close(fd) for fd in fds if is_open(fd)])
        return json.loads(message), fds

    def test_the_spare_is_recorded_with_the_submission_and_confirmed_at_once(self) -> None:
        self.server.report({"spare": 4242})
        (job_id,) = self.submit([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        recorded = self.queue.read_job(job_id)
        assert recorded.livelock is not None
        self.assertTrue(recorded.livelock.startswith(self.paths.lock_dir + "/job_%06d_" % job_id))
        self.assertEqual(recorded.process_id, 4242)
        writes = len(self.writes)
        self.reactor.advance(0)  # the scheduler starts it: no step 1 over the recorded lock file
        request, _fds = self.request()
        self.assertEqual(request, {"job": job_id, "lockfile": recorded.livelock})
        job_channel = self.service.processes[job_id]
        job_channel.data_received(channel.encode({"lockfile": recorded.livelock, "pid": 4242}))
        self.assertTrue(job_channel.confirmed)
        self.assertEqual(len(self.writes), writes, "confirmed without writing the job file again")

    def started(self) -> int:
        """A job submitted alone while spare 4242 waits, sent to the fork server; its id."""
        self.server.report({"spare": 4242})
        (job_id,) = self.submit([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        self.reactor.advance(0)
        self.request()
        return job_id

    def test_another_process_is_recorded_before_it_is_confirmed(self) -> None:
        job_id = self.started()
        job_channel = self.service.processes[job_id]
        lock_path = self.paths.lock_dir + "/job_%06d_1" % job_id
        job_channel.data_received(channel.encode({"lockfile": lock_path, "pid": 4343}))  # the spare died: forked
        self.assertTrue(job_channel.confirmed)
        self.assertEqual((self.queue.read_job(job_id).livelock, self.queue.read_job(job_id).process_id),
                         (lock_path, 4343))

    def test_jobs_submitted_together_plan_no_spare(self) -> None:
        self.server.report({"spare": 4242})
        ids = self.submit([{"OP_ID": "OP_TEST_DELAY", "duration": 0}], [{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        self.assertEqual([self.queue.read_job(job_id).livelock for job_id in ids], [None, None])
        self.assertEqual(self.server.spare, 4242)

    def test_the_watcher_skips_luxids_own_writes_not_the_job_process(self) -> None:
        job_id = self.started()
        held = self.service.jobs[job_id]
        self.service._queue_file_written("job-%d" % job_id)  # the event of LuxiD's own submission write
        self.assertIs(self.service.jobs[job_id], held, "not read back and parsed again")
        running = QueuedJob.from_dict(held.to_dict())
        running.ops[0].status = "running"
        save_job(self.paths, running)  # what the job process writes
        self.service._queue_file_written("job-%d" % job_id)
        self.assertEqual(self.service.jobs[job_id].ops[0].status, "running")


class ConnectingTests(SynchronousTestCase):
    """Jobs submitted while LuxiD connects to WConfD start only once the cluster's job limit and the filter
    rules are read (before, a restarted LuxiD could run them all at once under the default limit of 20)."""

    def test_no_job_starts_before_the_job_limit_is_known(self) -> None:
        from ganeti.config.bootstrap import initial_config
        from ganeti.wconfd import client as wconfd_client

        paths = temp_root(self, "gntw")
        queue = open_queue(self, paths)
        clock = Clock()
        service = LuxidService(paths, clock, queue, use_forkserver=False)
        service.running = True
        spawned: list[int] = []
        self.patch(service_module, "spawn_direct", lambda _r, _p, job_channel, _e, rpc_port=0:
                   spawned.append(job_channel.job_id))
        config = initial_config("c.test", "node1.test", "127.0.1.1")
        config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))
        serial: Deferred[int] = Deferred()

        class Client:
            reconnected: list[Any] = []

            def read_serial(self) -> Deferred[int]:
                return serial

            async def read_cluster(self) -> Any:
                return config.cluster

            async def read_config(self) -> Any:
                return config

        async def connect(*_args: Any, **_kwargs: Any) -> Client:
            return Client()

        self.patch(wconfd_client.WConfdClient, "connect", staticmethod(connect))
        service._start_connect()
        self.assertIsNotNone(service.wconfd, "connected: queries and submissions are served")
        for _ in range(3):
            self.successResultOf(Deferred.fromCoroutine(service.submit([[{"OP_ID": "OP_TEST_DELAY",
                                                                           "duration": 1.0}]])))
        clock.advance(1)
        self.assertEqual(spawned, [], "no job started while the limit is unknown")
        serial.callback(5)
        self.assertEqual(service.max_running, 1)
        self.assertEqual(len(spawned), 1, "one job at a time, as the cluster says")
