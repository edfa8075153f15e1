"""LuxiD's job queue manager: submit, schedule, spawn, follow, recover.

Ownership of a job file: LuxiD writes it while the job has no process (submission, spawning, cancel of a
queued job, failure of a dead job); the job process writes it from the confirmation of its handshake until it
exits.  LuxiD follows every write through inotify and wakes C{WaitForJobChange} callers at once; process exits
come from the C{ProcessProtocol} (or the fork server, L{ganeti.luxid.forkclient}, retired after C{forkserver_idle}
seconds without a job); job processes that outlived a LuxiD restart are followed through their lock files.

A job's final status (success, error, canceled) is shown to clients
(C{WaitForJobChange}, C{QueryJobs}, job queries, hence RAPI and gnt-job)
only once a majority of the master candidates hold its final file
(L{ganeti.luxid.replication.JobReplicator.confirm}); until then they see
the job as it was before (C{shown}).  LuxiD itself (scheduling,
dependencies, cancel) goes by the real state; a job waiting for its
majority is not archived.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import nullcontext
from typing import Any, Callable, ContextManager, cast

import orjson
from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, TimeoutError, maybeDeferred, succeed
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from ganeti import errors, ports
from ganeti.dirwatch import DirectoryWatcher, WatchUnavailable
from ganeti.jobs import blanks, private, scheduler, trace
from ganeti.jobs.model import PRIO_SUBMIT_VALID, QueuedJob
from ganeti.jobs.queue import JobQueueDir
from ganeti.jobs.replicas import job_id_of, not_started
from ganeti.jobs.submission import SubmissionIndex, check_job, plan, submission_id
from ganeti.lockfile import hold as hold_lockfile
from ganeti.lockfile import is_free
from ganeti.logfile import JobsLog
from ganeti.luxid import acks, diskfull, forkclient, recovery
from ganeti.luxid import archive as archiving
from ganeti.luxid.filters import FilterTable
from ganeti.luxid.replication import JobDistributor, JobWrite
from ganeti.luxid.spawner import JobChannel, JobExit, spawn_direct
from ganeti.paths import Paths
from ganeti.query.resources import op_summary

#: WaitForJobChange never waits longer than this (Ganeti's LUXI_WFJC_TIMEOUT)
WFJC_TIMEOUT = 89
DEFAULT_MAX_RUNNING = 20
#: a job whose process dies before the handshake this often is failed
MAX_START_ATTEMPTS = 3
#: while WConfD restarts, calls to it wait (and are sent again) this long at most
WCONFD_RECONNECT_FOR = 30.0
#: CancelJob with kill: seconds between SIGTERM and SIGKILL
KILL_GRACE = 5.0
#: ... and how long it then waits for the process to be gone
KILL_WAIT = 5.0
#: the result and log entry of a job killed with SIGKILL (LuxiD writes it)
KILLED_HARD = "Job canceled by request (killed: the job process %s)"
#: seconds before the scheduler tries again after a job process could not be
#: started at all (no fork, no pipe: e.g. too many open files)
SPAWN_RETRY = 1.0

class LuxidService(Service):
    log = Logger()

    def __init__(
        self,
        paths: Paths,
        reactor: Any,
        queue: JobQueueDir,
        *,
        max_running: int | None = None,
        use_forkserver: bool = True,
        forkserver_idle: float = forkclient.IDLE,
        distributor: JobWrite | None = None,
        replicator: Any = None,
        follow_interval: float = 0.5,
        kill_grace: float = KILL_GRACE,
        rpc_port: int = ports.NODED,
    ) -> None:
        self.paths = paths
        #: the node daemons' port (C{--rpc-port}), handed to the job processes
        self.rpc_port = rpc_port
        self.reactor = reactor
        self.queue = queue
        self.max_running_override = max_running
        self.use_forkserver, self.forkserver_idle = use_forkserver, forkserver_idle
        self.distributor: JobWrite = distributor or JobDistributor()
        self.replicator = replicator
        self.follow_interval = follow_interval
        self.kill_grace = kill_grace
        #: jobs being killed on request (CancelJob with kill)
        self.killing: set[int] = set()
        #: sends a signal to a pid (tests replace it)
        self.os_kill: Callable[[int, int], None] = os.kill
        self.jobs = scheduler.JobTable()
        #: job id -> the state clients see while its final file waits for a majority of candidates
        self.shown: dict[int, QueuedJob] = {}
        self.processes: dict[int, JobChannel] = {}
        #: new jobs the scheduler sees before they are acknowledged (L{ganeti.luxid.acks})
        self.unacked: set[int] = set()
        self.adopted: dict[int, str] = {}  # job id -> lock file (processes we did not start)
        self.start_attempts: dict[int, int] = {}
        self.private: dict[int, dict[str, Any]] = {}  # job id -> clear private values (ganeti.jobs.private)
        self.spawn_times: list[float] = []
        self._watchers: dict[int, list[Deferred]] = {}
        self._exit_waiters: dict[int, list[Deferred]] = {}
        self._scheduling = False
        self._schedule_again = False
        self._max_running_config = DEFAULT_MAX_RUNNING
        self.filters = FilterTable(self.schedule)  # the job filter rules, read once WConfD is there
        self.wconfd: Any = None
        #: the node liveness roster (L{ganeti.heartbeat.server.LivenessService}), if LuxiD listens for heartbeats
        self.liveness: Any = None
        #: the watcher on events (L{ganeti.heartbeat.watcher.Watcher}), if it runs
        self.watcher: Any = None
        #: why this master stepped down (L{ganeti.ha.stepdown}): it accepts no job any more
        self.stepped_down: str | None = None
        #: the stall guard (L{ganeti.ha.guard.MasterGuard}): no job starts while it is unconfirmed
        self.guard: Any = None
        self.forkserver: Any = None
        self.kernel_sync: Any = None  # fsyncs without a thread (L{acks.sync_locally})
        self._queue_watch: DirectoryWatcher | None = None
        self._follow: LoopingCall | None = None
        self._spawn_retry: Any = None
        #: the config serial L{_refresh_limits} read the cluster at
        self._limits_serial: int | None = None
        self._connecting = False  # connected to WConfD, the job limit and the filter rules not read yet
        self._livelock_fd: int | None = None
        self.livelock = os.path.join(paths.lock_dir, "luxi-daemon_%d" % time.time_ns())
        self.jobs_log = JobsLog(paths.log_file("jobs"), reactor)
        #: submission id -> job id (L{ganeti.jobs.submission}), rebuilt from the job files at start
        self.submissions = SubmissionIndex()

    # --- life cycle ---------------------------------------------------------
    def startService(self) -> None:
        super().startService()
        self._livelock_fd = hold_lockfile(self.livelock)
        self.kernel_sync = acks.open_kernel_sync(self)
        self.jobs = scheduler.JobTable(self.queue.load_live_jobs())
        self.submissions.rebuild(self.jobs.values())
        recovery.recover(self)
        if self.replicator is not None:
            self.replicator.start()  # a full resync of every candidate
        self._watch_queue()
        self._blocking(blanks.sweep, self.paths).addErrback(lambda f: self.log.failure("sweeping blanks", f))
        if self.use_forkserver:
            self.forkserver = forkclient.ForkServer(self.reactor, self.paths, self._job_exited,
                                                    self._jobs_orphaned, rpc_port=self.rpc_port,
                                                    idle=self.forkserver_idle)
            try:
                self.forkserver.start()
            except OSError:
                self.log.failure("cannot start the fork server; starting jobs directly")
                self.forkserver = None
        self._follow = LoopingCall(self._follow_adopted)
        self._follow.clock = self.reactor
        self._follow.start(self.follow_interval, now=False)
        self.reactor.callLater(0, self._start_connect)
        self.schedule()

    def stopService(self) -> Any:
        super().stopService()
        if self._follow is not None and self._follow.running:
            self._follow.stop()
        if self._spawn_retry is not None and self._spawn_retry.active():
            self._spawn_retry.cancel()
        if self._queue_watch is not None:
            self._queue_watch.stop()
        if self.replicator is not None:
            self.replicator.stop()
        if self.forkserver is not None:
            self.forkserver.stop()
        acks.close_kernel_sync(self)
        for waiters in self._watchers.values():
            for d in list(waiters):
                if not d.called:
                    d.cancel()
        if self._livelock_fd is not None:
            os.close(self._livelock_fd)
            try:
                os.unlink(self.livelock)
            except OSError:
                pass
        self.queue.close()
        if self.wconfd is not None:
            return self.wconfd.close()
        return None

    def _start_connect(self) -> None:
        d = Deferred.fromCoroutine(self._connect_wconfd())
        d.addErrback(lambda f: self.log.failure("connecting to WConfD failed", f))

    async def _connect_wconfd(self) -> None:
        from twisted.internet.task import deferLater

        from ganeti.wconfd.client import WConfdClient

        while self.running:
            try:
                client = await WConfdClient.connect(
                    self.reactor, self.paths.wconfd_socket, reconnect_for=WCONFD_RECONNECT_FOR, cache_config=True
                )
            except errors.GenericError:
                await deferLater(self.reactor, 0.5, lambda: None)
                continue
            if not self.running:
                client.close()
                return
            self.wconfd, self._connecting = client, True  # queries and submissions go on meanwhile, no job starts
            client.reconnected.append(self._wconfd_back)
            await self._refresh_limits()
            await self.filters.follow(client)
            self.log.info("connected to WConfD")
            self._connecting = False
            self.schedule()
            return

    async def _refresh_limits(self) -> None:
        """Take max_running_jobs from the cluster (a job may just have changed it)."""
        if self.wconfd is None:
            return
        try:
            serial = await self.wconfd.read_serial()
            if serial == self._limits_serial:
                return  # the config did not change since the last read (most jobs change nothing)
            cluster = await self.wconfd.read_cluster()
        except Exception:
            self.log.failure("cannot read the cluster from WConfD")
            return
        self._limits_serial = serial
        if self.liveness is not None:
            from ganeti.heartbeat.server import report_args

            self.liveness.set_report_args(report_args(cluster))
        if cluster.max_running_jobs and cluster.max_running_jobs != self._max_running_config:
            self._max_running_config = cluster.max_running_jobs
            self.schedule()

    def _wconfd_back(self) -> None:
        """WConfD restarted: the client reconnected by itself; catch up."""
        self.log.info("reconnected to WConfD")
        self._limits_serial = None
        Deferred.fromCoroutine(self._refresh_limits())
        self._cleanup_locks()

    @property
    def max_running(self) -> int:
        return self.max_running_override or self._max_running_config

    # --- job file I/O ---------------------------------------------------------
    def _write(self, job: QueuedJob, durable: bool = True, before: QueuedJob | None = None) -> None:
        """Write C{job}'s file; C{before}: a copy of the job before it was
        finalized (shown until a majority holds the final file)."""
        try:  # the disk full: the space reserve's room (L{diskfull})
            content = diskfull.write_job(self, job, durable)
        except OSError as e:
            if not job.finalized:
                raise
            return diskfull.final_not_written(self, job, e)
        if job.finalized:
            self._hold_final(job.id, before, content)
        self._changed(job.id)

    def _finalize(self, job: QueuedJob, change: Callable[[], Any]) -> None:
        """Apply C{change} (it finalizes C{job}) and write the job."""
        before = QueuedJob.from_dict(job.to_dict()) if self.replicator is not None and not job.finalized else None
        change()
        self._write(job, before=before)

    def _fail(self, job: QueuedJob, message: str) -> None:
        self._finalize(job, lambda: job.fail(message))
        self.log.info("job {job} failed: {why}", job=job.id, why=message)

    def _hold_final(self, job_id: int, before: QueuedJob | None, content: bytes) -> None:
        """Show C{before} instead of the final job until a majority of the
        candidates hold the final file C{content}."""
        if self.replicator is None or job_id not in self.jobs:
            return  # (not in the queue: a submission refused for want of a majority)
        held = self.replicator.confirm(self.queue.job_path(job_id), content)
        if held.called:
            return
        if before is not None and not before.finalized:
            self.shown.setdefault(job_id, before)
        held.addCallback(lambda _: self._final_held(job_id))
        held.addErrback(lambda f: self.log.failure("job {job}: waiting for its final file on a majority", f,
                                                  job=job_id))

    def _final_held(self, job_id: int) -> None:
        trace.hop(job_id, "luxid.final_held")
        if self.shown.pop(job_id, None) is not None:
            self._changed(job_id)

    def view(self, job_id: Any) -> QueuedJob:
        """Job C{job_id} as clients see it (its final state once a majority holds it)."""
        job = self.job(job_id)
        return self.shown.get(job.id, job)

    def _watch_queue(self) -> None:
        watch = DirectoryWatcher(self.reactor, self._queue_file_written)
        try:
            watch.watch(self.paths.queue_dir)
        except WatchUnavailable as e:  # the follow timer reloads running jobs instead
            self.log.warn("job files are not watched ({why}); following by timer", why=str(e))
            return
        self._queue_watch = watch

    def _queue_file_written(self, name: str) -> None:
        job_id = job_id_of(name) if name.startswith("job-") else None  # (not the archive's)
        if job_id is not None and (job_id in self.processes or job_id in self.adopted):
            self._reload(job_id, own_skipped=True)

    def _reload(self, job_id: int, own_skipped: bool = False) -> QueuedJob | None:
        try:
            with open(self.queue.job_path(job_id), "rb") as handle:
                content = handle.read()
            if own_skipped and self.queue.is_own_write(job_id, content):  # (what we hold already)
                return self.jobs.get(job_id)
            job = QueuedJob.from_dict(orjson.loads(content))
        except (OSError, ValueError):
            return self.jobs.get(job_id)
        before = self.jobs.get(job_id)
        self.jobs[job_id] = job
        trace.hop(job_id, "luxid.reload_" + job.status)
        if job.finalized and (before is None or not before.finalized):
            self._hold_final(job_id, before, content)
        with self._replicating_later(job_id) if not_started(job) else nullcontext():
            self.distributor(self.queue.job_path(job_id), content)
        self._changed(job_id)
        if job_id in self.adopted and job.finalized and job_id not in self.killing:
            del self.adopted[job_id]
            self.schedule()
        return job

    def _changed(self, job_id: int) -> None:
        job = self.jobs.get(job_id)
        if job is not None:
            self.jobs_log.status(job_id, job.status, job.finalized)
        watchers = self._watchers.pop(job_id, [])
        if watchers and trace.ENABLED:
            trace.hop(job_id, "luxid.notify_" + self.view(job_id).status)
        for d in watchers:
            if not d.called:
                d.callback(None)

    # --- scheduling and spawning ----------------------------------------------
    def schedule(self) -> None:
        if self._scheduling:
            self._schedule_again = True
            return
        self._scheduling = True
        try:
            while True:
                self._schedule_again = False
                self._schedule_once()
                if not self._schedule_again:
                    break
        finally:
            self._scheduling = False

    def _schedule_once(self) -> None:
        if not self.running or self.stepped_down is not None:
            return
        if self.guard is not None and self.guard.blocked() is not None:
            return  # scheduled again once confirmed
        if diskfull.blocked(self):
            return  # the disk is full: the queued jobs ended in error
        busy = set(self.processes) | set(self.adopted)
        decision = scheduler.schedule(self.jobs, busy, self.max_running, self.queue.read_job, self.filters.rules)
        for job_id, reason in decision.fail:
            self._fail(self.jobs[job_id], reason)
        for job, why in ((self.jobs[job_id], why) for job_id, why in decision.cancellations()):
            self._finalize(job, lambda job=job, why=why: job.cancel(reason=why))  # type: ignore[misc]
        if decision.fail or decision.cancel or decision.reject:
            self._schedule_again = True
        if self.wconfd is None or self._connecting:
            return  # jobs need WConfD, the job limit and the filters: started once they are there
        for job_id in decision.start:
            self._spawn(self.jobs[job_id])

    def _spawn(self, job: QueuedJob) -> None:
        forkserver = self.forkserver if self.forkserver is not None and self.forkserver.available else None
        planned = forkserver is not None and forkserver.is_planned(job.id, job.livelock, job.process_id)
        if job.id in self.unacked and not planned:
            return  # its spawn writes the job file: once acknowledged (acks)
        trace.hop(job.id, "luxid.spawn")
        if not planned:
            # step 1 (unless the job file names the spare planned at its submission): our own lock file in
            # it.  Not fsynced: if lost with a power cut, the job looks queued, which recovery makes of it.
            job.livelock, job.process_id = self.livelock, None
            try:
                with self._replicating_later(job.id):
                    self._write(job, durable=False)
            except OSError as e:
                return diskfull.spawn_failed(self, job, e)
        job_channel = JobChannel(job.id, self.paths, self.reactor, self._record_lockfile, private=self.private)
        job_channel.held = job.id in self.unacked
        self.processes[job.id] = job_channel
        started = time.perf_counter()
        job_channel.ready.addCallback(lambda _: self.spawn_times.append(time.perf_counter() - started))
        job_channel.ready.addErrback(lambda f: None)
        if forkserver is not None:
            try:
                forkserver.spawn(job_channel, planned)
                return
            except (OSError, RuntimeError):
                self.log.failure("fork server spawn failed; starting job {job} directly", job=job.id)
        try:
            spawn_direct(self.reactor, self.paths, job_channel, self._job_exited, rpc_port=self.rpc_port)
        except OSError as e:
            self._spawn_failed(job, job_channel, e)

    def _spawn_failed(self, job: QueuedJob, job_channel: JobChannel, why: OSError) -> None:
        """No process at all: the job stays queued and is tried again later
        (this is no start attempt, the job itself is not at fault)."""
        self.log.error("cannot start a process for job {job} ({why}); trying again in {t}s",
                       job=job.id, why=why, t=SPAWN_RETRY)
        if self.processes.get(job.id) is job_channel:
            del self.processes[job.id]
        job_channel.ended()
        job.livelock = job.process_id = None
        try:
            self._write(job, durable=False)
        except OSError:
            self.log.failure("job {job}: cannot write its file", job=job.id)
        if self._spawn_retry is None or not self._spawn_retry.active():
            self._spawn_retry = self.reactor.callLater(SPAWN_RETRY, self._retry_spawns)

    def _retry_spawns(self) -> None:
        self._spawn_retry = None
        self.schedule()

    def _record_lockfile(self, job_id: int, lockfile: str, pid: int) -> Deferred:
        """Step 3: the child's lock file goes into the job file, durably (fires then; the reactor goes on)."""
        trace.hop(job_id, "luxid.lockfile_got")
        job = self.jobs[job_id]
        job.livelock, job.process_id = lockfile, pid
        with self._replicating_later(job_id):
            self._write(job, durable=self.kernel_sync is None)
        durable = acks.sync_locally(self, [job_id]) if self.kernel_sync is not None else succeed(None)
        return durable.addCallback(lambda _: trace.hop(job_id, "luxid.lockfile_recorded"))

    def _replicating_later(self, job_id: int) -> ContextManager[Any]:
        """Versions of job C{job_id}'s file, one not started yet, written in
        this context may wait for the next (L{JobReplicator.later})."""
        if self.replicator is None:
            return nullcontext()
        return cast("ContextManager[Any]", self.replicator.later(self.queue.job_path(job_id)))

    def _job_exited(self, exit: JobExit) -> None:
        trace.hop(exit.job_id, "luxid.exit_seen")
        self.queue.written.pop(exit.job_id, None)
        job_channel = self.processes.pop(exit.job_id, None)
        job = self._reload(exit.job_id) or self.jobs.get(exit.job_id)
        if job is not None and not job.finalized:
            if exit.job_id in self.killing:
                self._killed(job, exit.describe())
            elif exit.confirmed:
                diskfull.process_ended(self, job, exit, getattr(job_channel, "unsaved", None))
                self._cleanup_locks()
            else:
                attempts = self.start_attempts.get(job.id, 0) + 1
                self.start_attempts[job.id] = attempts
                if attempts >= MAX_START_ATTEMPTS:
                    self._fail(job, "the job process could not be started (%s, %d attempts)" % (exit.describe(), attempts))
                else:
                    try:  # queued again (the disk full: the queued jobs end, see diskfull)
                        job.livelock = job.process_id = None
                        self._write(job)
                    except OSError as e:
                        diskfull.spawn_failed(self, job, e)
        self._exit_waiters_fire(exit.job_id)
        self.schedule()
        if exit.confirmed:
            Deferred.fromCoroutine(self._refresh_limits())

    def _exit_waiters_fire(self, job_id: int) -> None:
        for waiter in self._exit_waiters.pop(job_id, []):
            if not waiter.called:
                waiter.callback(None)

    def _killed(self, job: QueuedJob, how: str) -> None:
        """A job killed on request ended before it could record it: record
        it canceled, with why, and have WConfD free its locks."""
        self._finalize(job, lambda: job.cancel(reason=KILLED_HARD % how))
        self.log.info("job {job} killed on request ({how})", job=job.id, how=how)
        self._cleanup_locks()
    def _jobs_orphaned(self, channels: list[JobChannel]) -> None:
        """The fork server died: its jobs' exits will not be reported.  A
        confirmed job is followed through its lock file; an unconfirmed one
        never ran (its pipes are closed: it exits) and is started again."""
        for job_channel in channels:
            if self.processes.get(job_channel.job_id) is not job_channel:
                continue
            lockfile = job_channel.lockfile or (job_channel.prerecorded or (None,))[0]
            if job_channel.may_have_run and lockfile:
                del self.processes[job_channel.job_id]
                self.adopted[job_channel.job_id] = lockfile
            else:
                self._job_exited(JobExit(job_channel.job_id, None, None, False))

    def _follow_adopted(self) -> None:
        """Processes we did not start: their lock file tells if they live."""
        for job_id, lockfile in list(self.adopted.items()):
            # the lock first: a process writes its last job file before its
            # lock goes, so a job read after a dead lock is its final state
            dead = is_free(lockfile)
            job = self._reload(job_id)
            if job is None or job.finalized:
                if dead or job_id not in self.killing:  # a killed one: until its process is gone
                    self.adopted.pop(job_id, None)
                    self._exit_waiters_fire(job_id)
                continue
            if dead:
                self.adopted.pop(job_id, None)
                if job_id in self.killing:
                    self._killed(job, "was killed")
                elif recovery.never_ran(self, job):
                    self._cleanup_locks()  # (and schedules it again)
                else:
                    self._fail(job, "the job process died")
                    self._cleanup_locks()
                self._exit_waiters_fire(job_id)
        if self._queue_watch is None:
            for job_id in list(self.processes):
                self._reload(job_id)

    def _cleanup_locks(self) -> None:
        if self.wconfd is not None:
            d = Deferred.fromCoroutine(self.wconfd.cleanup_locks())
            d.addErrback(lambda f: self.log.failure("CleanupLocks failed", f))
        self.schedule()

    # --- what LUXI methods call -------------------------------------------------
    async def submit(self, jobs_ops: list[Any], *, drained_ok: bool = False) -> list[Any]:
        """Submit several jobs; answers C{[[True, id], ...]} (C{[]} for none).

        Every opcode is checked (L{ganeti.opcodes.validate}) and relative dependencies resolved before any id
        is allocated or file written: one invalid job refuses the whole request (C{OpPrereqError}, naming
        it), nothing is created.  A job with a known submission id is not made again: its first id is
        answered (L{ganeti.jobs.submission}).  A job is acknowledged once its file is durable here and held
        by a majority of the master candidates."""
        received = trace.now()
        if self.stepped_down is not None:
            raise errors.JobQueueError("This master stepped down: %s" % self.stepped_down)
        if not isinstance(jobs_ops, list):
            raise errors.OpPrereqError("A submission needs a list of jobs", errors.ECODE_INVAL)
        known, same_as = plan(self.submissions, jobs_ops)  # a resubmission gets the first submission's ids
        new = [i for i, job_id in enumerate(known) if job_id is None and i not in same_as]
        if (new or not jobs_ops) and not drained_ok and self.queue.is_drained():  # a resubmission is answered
            raise errors.JobQueueDrainError("Queue drained")
        if not jobs_ops:
            return []  # as Ganeti's: nothing submitted (its gnt-group evacuate of an empty group)
        self.queue.check_capacity(len(self.jobs), len(new))
        diskfull.refuse_submission(self)
        first = self.queue.serial() + 1
        checked = [check_job(jobs_ops[i], i, len(jobs_ops), first + n) for n, i in enumerate(new)]
        written: list[tuple[QueuedJob, bytes]] = []
        try:
            # the renames of the job files are made durable by one fsync of the queue directory, here or
            # in sync_jobs, before any of them is acknowledged (the serial is written in place, not fsynced)
            ids = self.queue.allocate_ids(len(checked)) if checked else []
            now = time.time()
            for job_id, ops in zip(ids, checked):
                job = QueuedJob.new(job_id, private.hold(self.private, job_id, scheduler.resolve_relative_depends(
                    ops, job_id)), now)
                if len(checked) == 1 and self.forkserver is not None:  # the spare's lock file named ahead
                    job.livelock, job.process_id = self.forkserver.plan(job_id) or (None, None)
                # written, then fsynced (while the candidates write it too): durable here before we answer
                content = self.queue.write_job(job, durable=False, sync_dir=False)
                written.append((job, content))
        except OSError as e:  # never acknowledged: its files are dropped at the next start, or here
            for job, _content in written:
                self.queue.remove_unacknowledged(job.id)
            if diskfull.is_disk_full(e):
                raise diskfull.submission_failed(self, e) from e
            raise
        for (job, _content), ops in zip(written, checked):
            self.submissions.add(submission_id(ops), job.id)
            trace.hop(job.id, "luxid.received", received)
            trace.hop(job.id, "luxid.written")
        given = dict(zip(new, ids))
        results = [[True, known[i] if known[i] is not None else given[same_as.get(i, i)]] for i in range(len(known))]
        if written:
            # a client that goes away meanwhile does not call the submission off: the job is made (or fails) all
            # the same, and its resubmission (same submission id) is answered with it
            answered: Deferred = Deferred()
            Deferred.fromCoroutine(acks.acknowledge(self, written, ids)).chainDeferred(answered)
            await answered
        return results

    def admit(self, jobs: list[QueuedJob]) -> None:
        """New C{jobs} are acknowledged: the scheduler sees them (with candidates, since their write: acks)."""
        for job in jobs:
            self.jobs[job.id] = job
            self.jobs_log.submitted(job.id, [op_summary(op.input) for op in job.ops])
            trace.hop(job.id, "luxid.acked")
        self.reactor.callLater(0, self.schedule)

    def _blocking(self, function: Callable[..., Any], *args: Any) -> Deferred:
        """C{function(*args)} (fsyncs) in the reactor's thread pool, if it has one."""
        pool = getattr(self.reactor, "getThreadPool", None)
        return maybeDeferred(function, *args) if pool is None else deferToThreadPool(self.reactor, pool(), function, *args)

    def step_down(self, reason: str) -> None:
        """Accept no job from now on (this master steps down for C{reason})."""
        self.stepped_down = reason

    def job(self, job_id: Any) -> QueuedJob:
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            try:
                job_id = int(job_id)
            except (TypeError, ValueError):
                raise errors.OpPrereqError("Invalid job id %r" % (job_id,), errors.ECODE_INVAL) from None
        job = self.jobs.get(job_id) or self.queue.read_job(job_id)
        if job is None:
            raise errors.JobLost("Job %s not found" % job_id)
        return job

    async def wait_for_change(self, job_id: Any, current: Callable[[QueuedJob], Any], previous: Any, timeout: float) -> Any:
        """Answer as soon as C{current(job)} differs from C{previous}."""
        deadline = time.monotonic() + max(0.0, min(float(timeout), WFJC_TIMEOUT))
        while True:
            job = self.view(job_id)
            answer = current(job)
            if answer != previous or job.finalized:
                return answer
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            d: Deferred = Deferred()
            self._watchers.setdefault(job.id, []).append(d)
            d.addTimeout(remaining, self.reactor)
            try:
                await d
            except TimeoutError:
                self._forget_watcher(job.id, d)
                return None
            except CancelledError:  # the client went away
                self._forget_watcher(job.id, d)
                raise

    def _forget_watcher(self, job_id: int, d: Deferred) -> None:
        waiters = self._watchers.get(job_id, [])
        if d in waiters:
            waiters.remove(d)
        if not waiters:
            self._watchers.pop(job_id, None)

    def cancel(self, job_id: Any, kill: bool = False) -> Deferred:
        """Ganeti's C{CancelJob}; fires with C{[success, message]}.

        A job without a process (queued, or whose process has not been told
        to run yet) is canceled at once.  Without C{kill} a job whose
        process runs is asked to cancel, which it does only while no opcode
        runs (waiting for locks), as Ganeti's.  With C{kill} the process gets
        SIGTERM (it stops what runs, records the job canceled, frees its
        locks and exits), and SIGKILL if it still runs after
        C{kill_grace} seconds (LuxiD then records the job canceled and
        WConfD frees the locks of the dead owner); the answer comes once
        the process is gone.
        """
        job = self.job(job_id)
        if job.finalized:
            return succeed([False, "Job %s is finished" % job.id])
        channel = self.processes.get(job.id)
        if channel is None and job.id not in self.adopted:
            self._finalize(job, job.cancel)
            self.schedule()
            return succeed([True, "Job %s canceled" % job.id])
        if channel is not None and channel.abort():

            def cancel() -> None:
                job.cancel()
                job.livelock = job.process_id = None

            self._finalize(job, cancel)
            self.schedule()
            return succeed([True, "Job %s canceled (its process had not started it)" % job.id])
        if kill:
            return Deferred.fromCoroutine(self._kill(job, channel))
        if channel is None:
            return succeed(
                [False, "Job %s is run by a process this LuxiD did not start; only killing it stops it" % job.id]
            )

        def answered(cancelled: bool) -> list[Any]:
            if cancelled:
                return [True, "Job %s will be canceled" % job.id]
            return [False, "Job %s is running, it cannot be canceled (but it can be killed)" % job.id]

        return channel.request_cancel().addCallback(answered)

    async def _kill(self, job: QueuedJob, channel: JobChannel | None) -> list[Any]:
        """SIGTERM, then SIGKILL after C{kill_grace} s; see L{cancel}."""
        self.killing.add(job.id)
        try:
            self.log.info("job {job}: killing its process on request", job=job.id)
            if not self._signal(job, channel, signal.SIGTERM):
                return [False, "Job %s: its process is already gone" % job.id]
            how = "SIGTERM"
            if not await self._process_gone(job.id, self.kill_grace):
                self.log.warn("job {job}: still running {t}s after SIGTERM; SIGKILL", job=job.id, t=self.kill_grace)
                self._signal(job, channel, signal.SIGKILL)
                how = "SIGKILL after %gs" % self.kill_grace
                if not await self._process_gone(job.id, KILL_WAIT):
                    return [False, "Job %s: its process did not end after SIGKILL" % job.id]
        finally:
            self.killing.discard(job.id)
        status = self.job(job.id).status
        return [True, "Job %s killed (%s), status %s" % (job.id, how, status)]

    def _signal(self, job: QueuedJob, channel: JobChannel | None, signum: int) -> bool:
        """Signal the job's process, if it still holds its lock file."""
        if channel is not None:
            return channel.signal(signum)
        lockfile = self.adopted.get(job.id)
        if lockfile is None or job.process_id is None or is_free(lockfile):
            return False
        try:
            self.os_kill(job.process_id, signum)
        except ProcessLookupError:
            return False
        return True

    async def _process_gone(self, job_id: int, timeout: float) -> bool:
        """Wait up to C{timeout} s for the job's process to end."""
        if job_id not in self.processes and job_id not in self.adopted:
            return True
        d: Deferred = Deferred()
        self._exit_waiters.setdefault(job_id, []).append(d)
        d.addTimeout(timeout, self.reactor)
        try:
            await d
        except TimeoutError:
            waiters = self._exit_waiters.get(job_id, [])
            if d in waiters:
                waiters.remove(d)
            return False
        return True

    def change_priority(self, job_id: Any, priority: Any) -> list[Any]:
        job = self.job(job_id)
        if isinstance(priority, bool) or priority not in PRIO_SUBMIT_VALID:
            raise errors.OpPrereqError(
                "Invalid priority %r (valid: %s)" % (priority, sorted(PRIO_SUBMIT_VALID)), errors.ECODE_INVAL
            )
        if job.finalized:
            return [False, "Job %s is finished" % job.id]
        channel = self.processes.get(job.id)
        if channel is not None:
            channel.send({"priority": priority})
            return [True, "Priority of job %s changed to %s" % (job.id, priority)]
        job.set_priority(priority)
        self._write(job)
        self.schedule()
        return [True, "Priority of job %s changed to %s" % (job.id, priority)]

    async def archive(self, job_id: Any) -> bool:
        return await archiving.archive(self, job_id)

    def auto_archive(self, age: float, timeout: float) -> list[int]:
        return archiving.auto_archive(self, age, timeout)

    def set_drained(self, flag: bool) -> bool:
        if not isinstance(flag, bool):
            raise errors.OpPrereqError("The drain flag must be a boolean, not %r" % (flag,), errors.ECODE_INVAL)
        self.queue.set_drained(flag)
        return True

    def live_jobs(self) -> dict[int, QueuedJob]:
        """The live jobs as clients see them (L{view})."""
        return {**self.jobs, **self.shown} if self.shown else self.jobs

    def is_drained(self) -> bool:
        """Whether the queue takes no new jobs."""
        return self.queue.is_drained()

    def archived_job_ids(self) -> list[int]:
        return self.queue.archived_job_ids()

    def read_archived_job(self, job_id: int) -> QueuedJob | None:
        return self.queue.read_archived_job(job_id)

    def wconfd_client(self) -> Any:
        """The connected WConfD client, or C{None} while there is none."""
        return self.wconfd


__all__ = ["LuxidService"]
