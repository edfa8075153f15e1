"""LuxiD taking a submission: check, write, make durable, acknowledge.

L{submit} is C{SubmitJob} and C{SubmitManyJobs}: every opcode checked
before an id is given out, the job files written, then made durable here
(fsync) and, with master candidates, held by a majority of them; only then
is the submission answered and the job seen by the scheduler.

A job's process is started while its file is being made durable
(L{EarlyStarts}): the fsync and the candidates' writes take milliseconds,
and so does a job process's start (its lock file, its announcement, its
registration with WConfD).  The process is not told to run before the
job is acknowledged: LuxiD holds back its confirmation (L{JobChannel.hold})
until then, and a process never confirmed runs nothing (its pipe closes when
LuxiD dies; it is killed when the submission fails).  Only a single job
whose file names the fork server's spare (L{ganeti.luxid.forkclient}) and
that the scheduler would start at once is started early; any other is
started by the scheduler after its acknowledgement, as before.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from twisted.logger import Logger

from ganeti import errors
from ganeti.jobs import private, scheduler, trace
from ganeti.jobs.model import QueuedJob
from ganeti.jobs.submission import check_job, plan, submission_id
from ganeti.luxid import diskfull
from ganeti.luxid.spawner import JobChannel
from ganeti.query.resources import op_summary

#: L{ganeti.luxid.service.LuxidService} (not imported: it imports this module)
Service = Any


class EarlyStarts:
    """The job processes started before their job was acknowledged
    (L{start}); at the acknowledgement a job's is either told to run, as the
    scheduler would start the job (L{acknowledge}, then L{take}), or called
    off (L{call_off})."""

    log = Logger()

    def __init__(self, service: Service) -> None:
        self.service = service
        #: job id -> the channel of its process, whose confirmation is held back
        self.held: dict[int, JobChannel] = {}

    def start(self, job: QueuedJob) -> None:
        """Start C{job}'s process now if the scheduler would start the job at
        once (its file, written but not durable yet, names the spare planned for
        it); its confirmation waits for L{take}."""
        service = self.service
        forkserver = service.forkserver
        if forkserver is None or not forkserver.running or not self._starts_at_once(job):
            return
        if not forkserver.is_planned(job.id, job.livelock, job.process_id):
            return
        job_channel = JobChannel(job.id, service.paths, service.reactor, service._record_lockfile,
                                 private=service.private)
        job_channel.hold()
        try:
            forkserver.spawn(job_channel, True)
        except (OSError, RuntimeError) as e:  # started as usual once acknowledged
            self.log.warn("job {job}: no early start ({why})", job=job.id, why=e)
            return
        trace.hop(job.id, "luxid.spawn")
        self.held[job.id] = job_channel

    def _starts_at_once(self, job: QueuedJob) -> bool:
        """Whether the scheduler would start C{job} now."""
        service = self.service
        if service.wconfd is None or service._connecting or service.stepped_down is not None:
            return False
        if (service.guard is not None and service.guard.blocked() is not None) or diskfull.blocked(service):
            return False
        busy = (set(service.processes) | set(service.adopted) | set(self.held)) - {job.id}
        jobs = collections.ChainMap({job.id: job}, service.jobs)
        decision = scheduler.schedule(jobs, busy, service.max_running, service.queue.read_job,
                                      service.filters.rules)
        return job.id in decision.start

    def acknowledge(self, job: QueuedJob) -> bool:
        """C{job} is acknowledged: whether its early process is to run it now
        (the scheduler, asked again, would start it: the caller starts the job
        and L{take}s the process); else the process is called off."""
        if job.id not in self.held:
            return False
        if self._starts_at_once(job):
            return True
        self.call_off([job.id])
        return False

    def take(self, job_id: int) -> JobChannel | None:
        """The channel of C{job_id}'s early process, no longer held back (C{None}: it has none)."""
        job_channel = self.held.pop(job_id, None)
        if job_channel is not None:
            job_channel.release()
        return job_channel

    def call_off(self, job_ids: Any) -> None:
        """Kill the early processes of C{job_ids} (never confirmed: nothing
        ran).  Their channels go to LuxiD's processes until the exit is seen, so
        that the job is not started twice meanwhile; a job still queued then is
        started as usual, without counting this as a failed start."""
        for job_id in list(job_ids):
            job_channel = self.held.pop(job_id, None)
            if job_channel is None:
                continue
            job_channel.abandoned = True
            self.service.processes[job_id] = job_channel
            job_channel.abort()


async def submit(service: Service, jobs_ops: list[Any], drained_ok: bool) -> list[Any]:
    """L{ganeti.luxid.service.LuxidService.submit}."""
    received = trace.now()
    if service.stepped_down is not None:
        raise errors.JobQueueError("This master stepped down: %s" % service.stepped_down)
    if not isinstance(jobs_ops, list):
        raise errors.OpPrereqError("A submission needs a list of jobs", errors.ECODE_INVAL)
    known, same_as = plan(service.submissions, jobs_ops)  # a resubmission gets the first submission's ids
    new = [i for i, job_id in enumerate(known) if job_id is None and i not in same_as]
    if (new or not jobs_ops) and not drained_ok and service.queue.is_drained():  # a resubmission is answered
        raise errors.JobQueueDrainError("Queue drained")
    if not jobs_ops:
        return []  # as Ganeti's: nothing submitted (its gnt-group evacuate of an empty group)
    queue, early = service.queue, service.early
    queue.check_capacity(len(service.jobs), len(new))
    diskfull.refuse_submission(service)
    first = queue.serial() + 1
    checked = [check_job(jobs_ops[i], i, len(jobs_ops), first + n) for n, i in enumerate(new)]
    written: list[tuple[QueuedJob, bytes]] = []
    ids: list[int] = []
    try:
        # the renames of the serial and the job files are made durable by one fsync of the queue
        # directory, with the files' own, before any of them is acknowledged
        ids = queue.allocate_ids(len(checked), sync_dir=False) if checked else []
        now = time.time()
        for job_id, ops in zip(ids, checked):
            job = QueuedJob.new(job_id, private.hold(service.private, job_id, scheduler.resolve_relative_depends(
                ops, job_id)), now)
            if len(checked) == 1 and service.forkserver is not None:  # the spare's lock file named ahead
                job.livelock, job.process_id = service.forkserver.plan(job_id) or (None, None)
            # written, then fsynced (while the candidates write it too): durable here before we answer
            written.append((job, queue.write_job(job, durable=False, sync_dir=False)))
        if len(written) == 1:
            early.start(written[0][0])
        # in the reactor's thread pool: meanwhile an early process's announcement is read, and the
        # candidates' answers
        local = service._blocking(queue.sync_jobs, ids) if written else None
        for job, _content in written:
            trace.hop(job.id, "luxid.received", received)
            trace.hop(job.id, "luxid.written")
        if local is not None and service.replicator is None:
            await local
    except OSError as e:  # never acknowledged: its files are dropped at the next start, or here
        early.call_off(ids)
        for job, _content in written:
            queue.remove_unacknowledged(job.id)
        if diskfull.is_disk_full(e):
            raise diskfull.submission_failed(service, e) from e
        raise
    for (job, _content), ops in zip(written, checked):
        service.submissions.add(submission_id(ops), job.id)
    given = dict(zip(new, ids))
    results = [[True, known[i] if known[i] is not None else given[same_as.get(i, i)]] for i in range(len(known))]
    if local is not None and service.replicator is not None:
        await _replicate(service, written, ids, local)
    for job, _content in written:
        service.jobs[job.id] = job  # only now can the scheduler see it
        service.jobs_log.submitted(job.id, [op_summary(op.input) for op in job.ops])
        trace.hop(job.id, "luxid.acked")
        if early.acknowledge(job):
            service._spawn(job)
    service.reactor.callLater(0, service.schedule)
    return results


async def _replicate(service: Service, written: list[tuple[QueuedJob, bytes]], ids: list[int], local: Any) -> None:
    """Wait for the new job files to be durable here (C{local}: the fsyncs
    under way) and held by a majority of the master candidates, or fail the
    jobs (never acknowledged: a resubmission with the same submission id
    makes the job anew, here or at the next master, which indexes the copy a
    candidate may hold)."""
    holders, total = await service.replicator.replicate([(service.queue.job_path(j.id), c) for j, c in written])
    for job_id in ids:
        trace.hop(job_id, "luxid.replicated")
    why = None
    try:
        await local
    except OSError as e:
        why = "not written durably on the master (%s)" % (e,)
    for job_id in ids:
        trace.hop(job_id, "luxid.fsynced")
    if why is None and holders < total // 2 + 1:
        why = "not replicated to a majority of the master candidates (%d of %d hold it)" % (holders, total)
    if why is not None:
        service.early.call_off(ids)
        service.submissions.forget(job.id for job, _content in written)
        for job, _content in written:
            service._fail(job, why)
        raise errors.JobQueueError("Job(s) %s %s" % (", ".join(str(j.id) for j, _ in written), why))
