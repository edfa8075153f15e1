"""Submitting jobs and following them to their end, one or many at once.

L{opcode} makes an opcode dict with the generic options of the command line
(debug level, dry run, priority, reason trail); L{submit_or_send} submits a
job and follows it (or, with C{--submit}, prints its id); L{poll_job}
follows a job with L{ganeti.luxi.jobwait.follow}, printing its log through
a L{JobReporter}, and returns its results or raises the error it failed with.

L{JobExecutor} does what Ganeti's C{JobExecutor} prints, for the commands
that act on several instances (C{gnt-instance startup --all}) and for the
follow-up jobs of C{gnt-node evacuate|migrate}::

    Submitted jobs 12, 13                       (only when verbose)
    Waiting for job 12 for web1 ...
    <the job's log lines>
    Job 13 for web2 has failed: Failure: ...    (stderr)

With C{--submit} nothing is followed: each job prints as C{12: web1}.
"""

from __future__ import annotations

import os
import time
from functools import partial

from ganeti import errors
from ganeti.client.command import Context
from ganeti.client.errorfmt import JobCanceled, JobOutcomeUnknown, JobSubmitted, decode_error, format_error
from ganeti.client.formatting import format_log_message
from ganeti.client.options import PRIORITIES
from ganeti.jobs import lifecycle
from ganeti.luxi import jobwait

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: the job statuses (Ganeti's names; defined by L{ganeti.jobs.lifecycle})
JOB_STATUS_QUEUED = lifecycle.QUEUED
JOB_STATUS_WAITING = lifecycle.WAITING
JOB_STATUS_CANCELING = lifecycle.CANCELING
JOB_STATUS_RUNNING = lifecycle.RUNNING
JOB_STATUS_CANCELED = lifecycle.CANCELED
JOB_STATUS_SUCCESS = lifecycle.SUCCESS
JOB_STATUS_ERROR = lifecycle.ERROR
JOBS_PENDING = tuple(s for s in lifecycle.STATUS_ORDER if s in lifecycle.PENDING)
JOBS_FINALIZED = tuple(s for s in lifecycle.STATUS_ORDER if s in lifecycle.FINALIZED)
#: a followed job is over for the tools once canceling (Ganeti's C{GenericPollJob})
_FOLLOW_UNTIL = lifecycle.FINALIZED | {lifecycle.CANCELING}
_JOB_LOST = "Job with id %s lost"

#: WaitForJobChange's answer when nothing changed before the timeout
JOB_NOTCHANGED = jobwait.NOT_CHANGED
#: seconds one WaitForJobChange may block (Ganeti's DEFAULT_WFJC_TIMEOUT)
WFJC_TIMEOUT = 60
#: AutoArchiveJobs timeout, as Ganeti's client sends it ((LUXI_DEF_RWTO - 1) // 2)
AUTOARCHIVE_TIMEOUT = 89

REASON_SRC_CLIENT = "gnt:client"
REASON_SRC_USER = "gnt:user"


def reason_trail(ctx: Context) -> list[list[Any]]:
    """Ganeti's first reason entries: the user's C{--reason}, then C{gnt:client:<tool>}."""
    now = time.time_ns()
    trail: list[list[Any]] = []
    if getattr(ctx.opts, "reason", None):
        trail.append([REASON_SRC_USER, ctx.opts.reason, now])
    trail.append(["%s:%s" % (REASON_SRC_CLIENT, os.path.basename(ctx.prog)), ctx.command, now])
    return trail


def opcode(ctx: Context, op_id: str, **params: Any) -> dict[str, Any]:
    """An opcode dict with the generic options (debug level, dry run,
    priority, reason trail) taken from the command line."""
    op: dict[str, Any] = {"OP_ID": op_id}
    op.update(params)
    opts = ctx.opts
    op["debug_level"] = getattr(opts, "debug", 0) or 0
    if hasattr(opts, "dry_run"):
        op["dry_run"] = bool(opts.dry_run)
    prio = getattr(opts, "priority", None)
    op["priority"] = prio if prio is not None else op.get("priority", PRIORITIES["normal"])
    op["reason"] = reason_trail(ctx)
    return op


class JobReporter:
    """Prints what a followed job reports (Ganeti's C{StdioJobPollReportCb})."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._told_queued = False
        self._told_waiting = False

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None:
        seconds = _merge_time(timestamp)
        when = time.ctime(seconds) if seconds is not None else "?"
        self.ctx.out("%s %s" % (when, format_log_message(log_type, message)))

    def not_changed(self, job_id: int, status: str | None) -> None:
        if status == JOB_STATUS_QUEUED and not self._told_queued:
            self.ctx.err("Job %s is waiting in queue" % job_id)
            self._told_queued = True
        elif status == JOB_STATUS_WAITING and not self._told_waiting:
            self.ctx.err("Job %s is trying to acquire all necessary locks" % job_id)
            self._told_waiting = True


class QuietReporter(JobReporter):
    """Follows a job without printing anything (C{gnt-job wait})."""

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None:
        pass

    def not_changed(self, job_id: int, status: str | None) -> None:
        pass


def _merge_time(timestamp: Any) -> float | None:
    if isinstance(timestamp, (list, tuple)) and len(timestamp) == 2:
        try:
            return float(timestamp[0]) + float(timestamp[1]) / 1e6
        except (TypeError, ValueError):
            return None
    return None


def poll_job(client: Any, job_id: int, reporter: JobReporter, update_freq: float = WFJC_TIMEOUT) -> list[Any]:
    """Follow a job until it ends, reporting each log entry once, in order
    (L{ganeti.luxi.jobwait.follow}; a canceling job counts as ended).

    @return: the opcode results of a successful job.
    @raise errors.JobLost: the job is unknown (or was archived).
    @raise JobOutcomeUnknown: no master could be reached for longer than
        the client waits (L{ganeti.luxi.master}).
    @raise JobCanceled: the job was canceled.
    @raise errors.GenericError: the job failed: the error its failed
        opcode recorded, decoded (e.g. L{errors.OpPrereqError}), or
        L{errors.OpExecError}.
    """
    steps = jobwait.follow(job_id, update_freq, reporter, until=_FOLLOW_UNTIL, lost=_JOB_LOST)
    try:
        rows = jobwait.run_sync(steps, partial(_perform, client))
    except errors.LuxiError as e:  # no master for longer than the client waits: the job goes on, or ended
        raise JobOutcomeUnknown(job_id, str(e)) from None
    return _job_result(job_id, rows)


def job_result(client: Any, job_id: int) -> list[Any]:
    """The opcode results of a finished job, or the error it failed with."""
    return _job_result(job_id, client.query_jobs([job_id], list(jobwait.RESULT_FIELDS)))


def _perform(client: Any, call: jobwait.Call) -> Any:
    """One call of L{jobwait.follow} on the blocking LUXI client."""
    if call.method == jobwait.WAIT_FOR_JOB_CHANGE:
        return client.wait_for_job_change(*call.args)
    if call.method == jobwait.QUERY_JOBS:
        return client.query_jobs(*call.args)
    raise errors.ProgrammerError("unexpected LUXI call %s" % call.method)


def _job_result(job_id: int, rows: Any) -> list[Any]:
    ended = jobwait.outcome(job_id, rows, lost=_JOB_LOST)
    if ended.status == JOB_STATUS_SUCCESS:
        return ended.results
    if ended.status in (JOB_STATUS_CANCELING, JOB_STATUS_CANCELED):
        why = next((r for r in ended.results or [] if isinstance(r, str) and r), None)  # (a filter rule's REJECT)
        raise JobCanceled("Job was canceled" + (" (%s)" % why if why else ""))
    if ended.failed is not None:
        decoded = decode_error(ended.error)
        if decoded is not None:
            raise decoded
        if ended.partial:
            raise errors.OpExecError("partial failure (opcode %d): %s" % (ended.failed, ended.error))
        raise errors.OpExecError(str(ended.error))
    raise errors.OpExecError(str(ended.results))


def submit_opcodes(ctx: Context, ops: list[dict[str, Any]], reporter: JobReporter | None = None) -> list[Any]:
    """Submit one job and follow it; C{--print-jobid} prints its id first."""
    client = ctx.client()
    new_id = client.submit_job(ops)
    if getattr(ctx.opts, "print_jobid", False):
        ctx.out("%s" % new_id)
    return poll_job(client, new_id, reporter or JobReporter(ctx))


def report_changes(ctx: Context, what: str, changes: Any) -> bool:
    """Print a SET_PARAMS result (C{[[param, new value], ...]}) as Ganeti's
    modify commands do; False when nothing changed."""
    if not changes:
        return False
    ctx.out("Modified %s" % what)
    for param, data in changes:
        ctx.out(" - %-5s -> %s" % (param, data))
    return True


def submit_or_send(ctx: Context, *ops: dict[str, Any]) -> list[Any]:
    """Ganeti's C{SubmitOrSend}: with C{--submit} send the job and raise
    L{JobSubmitted} (C{JobID: N}, exit 0); else follow it to its end."""
    if getattr(ctx.opts, "submit_only", False):
        new_id = ctx.client().submit_job(list(ops))
        if getattr(ctx.opts, "print_jobid", False):
            ctx.out("%s" % new_id)
        raise JobSubmitted(new_id)
    return submit_opcodes(ctx, list(ops))




class JobExecutor:
    """Queue jobs (or adopt ones already submitted), then wait for them.

    @param verbose: announce the submitted job ids.
    """

    def __init__(self, ctx: Context, verbose: bool = True) -> None:
        self.ctx = ctx
        self.verbose = verbose
        self._queue: list[tuple[str | None, list[dict[str, Any]]]] = []
        #: (name, submitted, job id or error message)
        self.jobs: list[tuple[str | None, bool, Any]] = []

    def queue_job(self, name: str | None, *ops: dict[str, Any]) -> None:
        self._queue.append((name, list(ops)))

    def add_job_id(self, name: str | None, submitted: bool, job_id: Any) -> None:
        """Follow a job submitted elsewhere (C{[ok, id or error]} of a result)."""
        self.jobs.append((name, bool(submitted), job_id))

    def submit_pending(self) -> None:
        """Submit the queued jobs in one C{SubmitManyJobs}."""
        if not self._queue:
            return
        queue, self._queue = self._queue, []
        answers = self.ctx.client().submit_many_jobs([ops for _, ops in queue])
        for (name, _), (ok, value) in zip(queue, answers):
            self.jobs.append((name, bool(ok), value))
            if ok and getattr(self.ctx.opts, "print_jobid", False):
                self.ctx.out("%s" % value)

    @staticmethod
    def _for(name: str | None) -> str:
        return " for %s" % name if name else ""

    def get_results(self) -> list[tuple[bool, Any]]:
        """Follow every job; C{[(success, opcode results or error text), ...]} in order."""
        self.submit_pending()
        if self.verbose:
            ok_ids = [str(value) for _, ok, value in self.jobs if ok]
            if ok_ids:
                self.ctx.out("Submitted jobs %s" % ", ".join(ok_ids))
        results: list[tuple[bool, Any]] = []
        for name, ok, value in self.jobs:
            if not ok:
                self.ctx.err("Failed to submit job%s: %s" % (self._for(name), value))
                results.append((False, value))
                continue
            self.ctx.out("Waiting for job %s%s ..." % (value, self._for(name)))
            try:
                results.append((True, poll_job(self.ctx.client(), value, JobReporter(self.ctx))))
            except errors.JobLost as e:
                self.ctx.err("Job %s%s has been archived, cannot check its result" % (value, self._for(name)))
                results.append((False, format_error(e)[1]))
            except JobOutcomeUnknown as e:
                text = format_error(e)[1]
                self.ctx.err(text)
                results.append((False, text))
            except errors.GenericError as e:
                text = format_error(e)[1]
                self.ctx.err("Job %s%s has failed: %s" % (value, self._for(name), text))
                results.append((False, text))
        return results

    def wait_or_show(self, wait: bool) -> list[tuple[bool, Any]]:
        """Follow the jobs, or (C{--submit}) print C{id: name} for each."""
        if wait:
            return self.get_results()
        self.submit_pending()
        for name, ok, value in self.jobs:
            if ok:
                self.ctx.out("%s: %s" % (value, name) if name else "%s" % value)
            else:
                self.ctx.err("Failure for %s: %s" % (name, value))
        return [(ok, value) for _, ok, value in self.jobs]


def follow_up_jobs(ctx: Context, result: Any) -> list[tuple[bool, Any]]:
    """Wait for the jobs an opcode result lists (C{{"jobs": [[ok, id], ...]}})."""
    executor = JobExecutor(ctx)
    jobs = result.get("jobs") if isinstance(result, dict) else None
    for entry in jobs or []:
        if isinstance(entry, (list, tuple)) and len(entry) == 2:
            executor.add_job_id(None, entry[0], entry[1])
    return executor.get_results()
