"""LuxiD's start: the jobs an earlier LuxiD left (L{recover}).

A job whose process is alive is followed (adopted); one whose process is
gone is failed, unless it never ran anything (L{never_ran}): LuxiD was
killed between recording its process and confirming it, and the process
exited without running it, so the job is queued again.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from ganeti.jobs import lifecycle
from ganeti.lockfile import is_free

if TYPE_CHECKING:
    from ganeti.jobs.model import QueuedJob

#: the service (not imported: it imports this module, and the import-circle
#: test counts type-only imports too)
Service = Any

log = Logger(namespace="ganeti.luxid.service.LuxidService")


def recover(service: Service) -> None:
    """Jobs left by an earlier LuxiD: follow the live, settle the dead."""
    for job in sorted(service.jobs.values(), key=lambda j: j.id):
        if job.finalized or not job.livelock:
            continue
        name = os.path.basename(job.livelock)
        if name.startswith("luxi-daemon_"):
            # spawned but never confirmed: the job never ran; run it again
            job.livelock = job.process_id = None
            service._write(job)
        elif not is_free(job.livelock):
            log.info("job {job} still runs (pid {pid}); following it", job=job.id, pid=job.process_id)
            service.adopted[job.id] = job.livelock
        else:
            # The process writes its last job file before its lock goes:
            # read it again, it may have ended after the queue was loaded.
            job = service._reload(job.id) or job
            if never_ran(service, job):
                continue
            if not job.finalized:
                service._fail(job, "the job process died while LuxiD was not running")


def never_ran(service: Service, job: QueuedJob) -> bool:
    """Requeue C{job}, whose process is gone, if it never wrote its job file (every
    opcode queued): LuxiD recorded its lock file, then died before confirming it."""
    if not job.ops or any(op.status != lifecycle.QUEUED for op in job.ops):
        return False
    log.info("job {job}: its process ended before it ran anything; queued again", job=job.id)
    job.livelock = job.process_id = None
    service._write(job)
    return True
