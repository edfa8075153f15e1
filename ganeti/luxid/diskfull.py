"""What LuxiD does when the data directory is full (see L{ganeti.jobs.space}).

  - A job file write of LuxiD that finds the disk full gives back the space
    reserve and is tried once more (L{write_job}); a final status that still
    cannot be written is kept in memory (clients see it) and logged.
  - From then on, until there is room for the reserve again, no job is
    accepted (L{refuse_submission}) or started: the queued jobs end in error
    at once, saying why (L{blocked}); a running job whose process dies
    (it cannot write its job file either) ends in error saying the disk is
    full (L{exit_message}), but keeps what its process sent before it
    exited (L{process_ended}): an opcode that succeeded, its change made,
    stays a success, and a job whose last opcode succeeded succeeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from ganeti import errors
from ganeti.jobs.space import EXIT_DISK_FULL, SpaceReserve, disk_full_message, is_disk_full

if TYPE_CHECKING:
    from ganeti.jobs.model import QueuedJob
    from ganeti.jobs.queue import JobQueueDir
    from ganeti.luxid.spawner import JobExit

#: the service (not imported: it imports this module, and the import-circle
#: test counts type-only imports too)
Service = Any

log = Logger(namespace="ganeti.luxid.diskfull")


def reserve_of(service: Service) -> SpaceReserve:
    """The service's space reserve, made on first use."""
    reserve: SpaceReserve | None = getattr(service, "space_reserve", None)
    if reserve is None:
        reserve = service.space_reserve = SpaceReserve(service.paths.data_dir)
        reserve.ensure()
    return reserve


def write_job(service: Service, job: QueuedJob, durable: bool) -> bytes:
    """C{queue.write_job}, with the reserve's room when the disk is full."""
    queue: JobQueueDir = service.queue
    try:
        return queue.write_job(job, durable=durable)
    except OSError as e:
        if not is_disk_full(e) or not reserve_of(service).release():
            raise
    return queue.write_job(job, durable=durable)


def final_not_written(service: Service, job: QueuedJob, error: OSError) -> None:
    """A final status LuxiD cannot write: clients see it (it is in memory);
    a LuxiD started later fails the job again from its dead process."""
    log.critical("job {job}: cannot write its final status ({e}); it is shown but not recorded",
                 job=job.id, e=error)


def refuse_submission(service: Service) -> None:
    """Raise L{errors.JobQueueError} while the disk is full (the reserve is
    kept for the final statuses of the jobs already accepted)."""
    why = reserve_of(service).check_room()
    if why is not None:
        raise errors.JobQueueError("Cannot accept jobs: %s" % why)


def submission_failed(service: Service, error: OSError) -> errors.JobQueueError:
    """The error for a submission whose files could not be written (the
    disk just filled: the queued jobs end too)."""
    reserve_of(service).release()
    blocked(service)
    return errors.JobQueueError("Cannot accept jobs: %s" % disk_full_message(service.paths.data_dir, error))


def spawn_failed(service: Service, job: QueuedJob, error: OSError) -> None:
    """Step 1 of a start (LuxiD's lock file in the job file) failed."""
    job.livelock = job.process_id = None
    if is_disk_full(error):
        reserve_of(service).release()
        blocked(service)
        return
    log.error("job {job}: cannot write its file before starting it: {e}", job=job.id, e=error)


def blocked(service: Service) -> bool:
    """Whether jobs may not start (the disk is full); the queued jobs then
    end in error, saying why."""
    reserve = reserve_of(service)
    if not reserve.spent or reserve.ensure():
        return False
    message = "not started: %s" % disk_full_message(service.paths.data_dir)
    for job_id in sorted(service.jobs):
        job = service.jobs[job_id]
        if job.finalized or job_id in service.processes or job_id in service.adopted:
            continue
        job.livelock = job.process_id = None
        service._fail(job, message)
    return True


def process_ended(service: Service, job: QueuedJob, exit: JobExit, unsaved: Any) -> None:
    """A confirmed job process ended before its job did: record the job as
    its process last had it (C{unsaved}, when it sent it for want of room:
    the same job, same opcodes), failing what did not end."""
    from ganeti.jobs.model import QueuedJob

    state = None
    if isinstance(unsaved, dict) and unsaved.get("id") == job.id:
        try:
            state = QueuedJob.from_dict(unsaved)
        except (KeyError, TypeError, ValueError):
            state = None
    if state is None or [op.input for op in state.ops] != [op.input for op in job.ops]:
        service._fail(job, exit_message(service, exit))
        return
    log.warn("job {job}: its process could not write the job file ({status}); recording it for the process",
             job=job.id, status=state.status)
    service.jobs[job.id] = state
    if state.finalized:
        service._finalize(state, lambda: None)
    else:
        service._fail(state, exit_message(service, exit))


def exit_message(service: Service, exit: JobExit) -> str:
    """Why a confirmed job process that ended before its job did failed it."""
    message = "the job process %s before the job finished" % exit.describe()
    reserve = reserve_of(service)
    if exit.exit_code == EXIT_DISK_FULL or (reserve.spent and not reserve.ensure()):
        message += "; %s" % disk_full_message(service.paths.data_dir)
    return message


__all__ = ["blocked", "is_disk_full", "exit_message", "final_not_written", "process_ended", "refuse_submission", "reserve_of",
           "spawn_failed", "submission_failed", "write_job"]

