"""A submission's acknowledgement.

A new job is acknowledged once its file is durable on the master (an
fsync in LuxiD's thread pool) and held by a majority of the candidates
(L{ganeti.luxid.replication.JobReplicator.replicate}; on a cluster
without candidates, the master alone); only an acknowledged job may run.
Waiting for the candidates took 5 ms of a job's 25 (C{scripts/bench jobs
--candidates 2}), the fsync alone 1.5-2.5 ms of a job's 15 on one node,
and the job's process took as long again to start after it.  So the two
overlap: the scheduler sees the job as soon as its file is written here,
and a job whose spare was named in that file at its submission
(L{ganeti.luxid.forkclient}: nothing else is written before its
confirmation) gets its process at once.  The process connects, registers
and reads the config while the file is fsynced and the candidates write
it, and waits for its confirmation, the step of
the handshake (L{ganeti.jobs.channel}) before which it runs nothing:
LuxiD withholds it (L{JobChannel.held}) until the job is acknowledged.
Any other job is spawned once acknowledged, as before (its spawn writes
LuxiD's lock file into the job file, which must not race the fsync).

A job that is not acknowledged (no majority, no durable write here)
never runs: its waiting process is killed unconfirmed (it removes its
lock file and exits, as on any unconfirmed handshake), the job fails with
why, and the client gets C{JobQueueError}, as before.  If LuxiD dies
meanwhile, the process sees its channel close before any confirmation
and exits without running anything.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed

from ganeti import errors, kernelsync
from ganeti.jobs import blanks, trace
from ganeti.jobs.model import QueuedJob

#: files LuxiD keeps made for the next submissions' job files (L{ganeti.jobs.blanks}), made in its thread pool
BLANKS = 4

#: LuxiD's service (not imported: it imports this module, and the import-circle test counts type-only imports)
Service = Any


async def acknowledge(service: Service, written: list[tuple[QueuedJob, bytes]], ids: list[int]) -> None:
    """Wait until the jobs C{written} (new, ids C{ids}) are durable here and
    held by a majority of the candidates, their processes starting
    meanwhile (see the module docstring).
    @raise errors.JobQueueError: not acknowledged (the jobs failed)"""
    replicated = succeed((1, 1)) if service.replicator is None else Deferred.fromCoroutine(  # (1, 1): the master alone
        service.replicator.replicate([(service.queue.job_path(job.id), content) for job, content in written]))
    local = sync_locally(service, ids)
    service._blocking(blanks.make_blanks, service.queue.queue_dir, BLANKS).addErrback(lambda _: None)  # (the next)
    for job, _content in written:
        service.jobs[job.id] = job  # the scheduler sees it; its process is confirmed once it is acknowledged
        service.unacked.add(job.id)
    service.reactor.callLater(0, service.schedule)  # (as the acknowledgement does: a scheduler's error is logged)
    why = None
    try:
        holders, total = await replicated
    except Exception as e:  # (replicate answers for every candidate; anything else is a failure to say)
        holders, total, why = 0, 0, "not replicated to the master candidates (%s)" % (e,)
    for job_id in ids if service.replicator is not None else ():
        trace.hop(job_id, "luxid.replicated")
    try:
        await local
    except OSError as e:
        why = "not written durably on the master (%s)" % (e,)
    for job_id in ids:
        trace.hop(job_id, "luxid.fsynced")
    if why is None and holders < total // 2 + 1:
        why = "not replicated to a majority of the master candidates (%d of %d hold it)" % (holders, total)
    if why is not None:
        # never acknowledged: a resubmission with the same submission id makes the job anew (here, or at
        # the next master, which indexes the copy a candidate may hold); it is not answered with this one
        service.submissions.forget(job.id for job, _content in written)
    for job, _content in written:
        service.unacked.discard(job.id)
        job_channel = service.processes.get(job.id)
        if why is None:
            if job_channel is not None:
                job_channel.release()
            continue
        if job_channel is not None:
            job_channel.abort()  # never confirmed: it runs nothing
        if service.jobs.get(job.id) is job:
            del service.jobs[job.id]  # shown from its file, as a job never acknowledged
        if not job.finalized:
            service._fail(job, why)
    if why is None:
        service.admit([job for job, _content in written])
        return
    raise errors.JobQueueError("Job(s) %s %s" % (", ".join(str(j.id) for j, _ in written), why))


def sync_locally(service: Service, ids: list[int]) -> Deferred:
    """Make the files of the jobs C{ids} durable here (their renames too: the queue directory): fsyncs the
    kernel runs side by side (L{ganeti.kernelsync}), else in the thread pool."""
    if service.kernel_sync is None:
        blocking: Deferred = service._blocking(service.queue.sync_jobs, ids)
        return blocking
    paths = [service.queue.job_path(job_id) for job_id in ids] + [service.queue.queue_dir]
    return kernelsync.fsync_paths(service.kernel_sync, paths, service._blocking)


def open_kernel_sync(service: Service) -> kernelsync.KernelSync | None:
    """The service's L{kernelsync.KernelSync}, on a reactor with a thread pool (a real one: not a test's)."""
    if getattr(service.reactor, "getThreadPool", None) is None:
        return None
    return kernelsync.KernelSync.open(service.reactor, service._blocking)


def close_kernel_sync(service: Service) -> None:
    if service.kernel_sync is not None:
        service.kernel_sync.close()
        service.kernel_sync = None


__all__ = ["acknowledge", "close_kernel_sync", "open_kernel_sync", "sync_locally"]
