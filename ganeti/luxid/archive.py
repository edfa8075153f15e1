"""Archiving finished jobs (LUXI C{ArchiveJob}, C{AutoArchiveJobs}, the
watcher's periodic archive): a job is archived only once it is final, its
process has exited and a majority of the candidates hold it.

Functions of the L{ganeti.luxid.service.LuxidService} (not imported: it
imports this module).
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, TimeoutError

from ganeti import errors

#: seconds C{ArchiveJob} waits for the process of a finished job to exit (Ganeti: 2*5+1)
ARCHIVE_EXIT_WAIT = 11.0


async def archive(service: Any, job_id: Any) -> bool:
    """Archive a finished job, waiting up to L{ARCHIVE_EXIT_WAIT} s for its process to exit."""
    try:
        job = service.job(job_id)
    except errors.JobLost:
        return False
    if not job.finalized or job.id in service.shown:
        return False  # not finished, or not yet on a majority of candidates
    if job.id in service.processes:
        d: Deferred = Deferred()
        service._exit_waiters.setdefault(job.id, []).append(d)
        d.addTimeout(ARCHIVE_EXIT_WAIT, service.reactor)
        try:
            await d
        except TimeoutError:
            return False
    if service.queue.archive_job(job.id):
        service.jobs.pop(job.id, None)
        service.jobs_log.forget(job.id)
        return True
    return False


def auto_archive(service: Any, age: float, timeout: float) -> list[int]:
    """Archive the jobs finished more than C{age} seconds ago, for at most
    C{timeout} seconds: C{[archived, left]}."""
    busy = set(service.processes) | set(service.shown)
    archived, left = service.queue.archive_finished(service.jobs, busy, age, timeout)
    for job_id in archived:
        service.jobs.pop(job_id, None)
        service.jobs_log.forget(job_id)
    return [len(archived), left]


__all__ = ["ARCHIVE_EXIT_WAIT", "archive", "auto_archive"]
