"""Which jobs LuxiD starts, fails or cancels next (pure, no I/O).

L{schedule} looks at the live jobs and the ones already running and
returns a L{Decision}; LuxiD carries it out (spawns, writes job files).
Dependencies follow spec/jobs.md section 3; job filter rules and ad-hoc
reason rate limits (L{ganeti.jobs.filtering}) apply in Ganeti's order:
jobs whose dependencies are met, by priority, then the reason rate limits,
then the filter rules, then C{max_running}.  L{resolve_relative_depends}
turns the relative job ids of a submission into absolute ones.
"""

from __future__ import annotations

from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import attrs

from ganeti import errors
from ganeti.jobs import filtering
from ganeti.jobs.model import CANCELED, FINALIZED, QUEUED, STATUS_ORDER, WAITING, QueuedJob

Lookup = Callable[[int], "QueuedJob | None"]

_SCHEDULABLE = frozenset({QUEUED, WAITING})

# Outcomes of checking one job's dependencies.
_OK = "ok"
_WAIT = "wait"
_FAIL = "fail"
_CANCEL = "cancel"


@attrs.frozen
class Decision:
    """What to do now.

    @ivar start: job ids to start, most urgent first.
    @ivar fail: C{(job id, message)} for jobs whose dependencies cannot be
        met; the job fails with C{OpExecError(message)}.
    @ivar cancel: job ids to cancel because a dependency was canceled.
    @ivar reject: C{(job id, filter rule)} for queued jobs a C{REJECT} rule
        applies to; they are canceled.
    """

    start: list[int] = attrs.field(factory=list)
    fail: list[tuple[int, str]] = attrs.field(factory=list)
    cancel: list[int] = attrs.field(factory=list)
    reject: list[tuple[int, filtering.FilterRule]] = attrs.field(factory=list)

    def cancellations(self) -> list[tuple[int, str | None]]:
        """C{(job id, why)} for every job to cancel: C{why} is C{None} for a
        canceled dependency (the job's results stay as they are), the rule's
        message for a rejected job (its result and log name the rule)."""
        return [(job_id, None) for job_id in self.cancel] + [
            (job_id, filtering.reject_message(rule)) for job_id, rule in self.reject]


class JobTable(dict[int, QueuedJob]):
    """LuxiD's live jobs by id.  It also keeps the ids of the jobs that may not be finalized
    (L{pending}), so that a scheduling pass costs what is queued, waiting or running, not the
    thousands of finished jobs a busy master keeps until they are archived (0.9 us each)."""

    def __init__(self, jobs: Mapping[int, QueuedJob] | None = None) -> None:
        super().__init__(jobs or {})
        self.unfinished = set(self)

    def __setitem__(self, job_id: int, job: QueuedJob) -> None:
        super().__setitem__(job_id, job)
        self.unfinished.add(job_id)

    def pending(self) -> dict[int, QueuedJob]:
        """The jobs not finalized; the ids of finalized or removed ones are forgotten as they are found
        (a finalized job never runs again; one put back, e.g. a state restored, is set anew)."""
        found = {}
        for job_id in list(self.unfinished):
            job = self.get(job_id)
            if job is None or job.finalized:
                self.unfinished.discard(job_id)
            else:
                found[job_id] = job
        return found


def schedule(
    jobs: Mapping[int, QueuedJob],
    running: Collection[int],
    max_running: int,
    lookup: Lookup | None = None,
    rules: Sequence[filtering.FilterRule] = (),
) -> Decision:
    """Decide which queued or waiting jobs to start, fail, cancel or reject.

    Candidates are the jobs of C{jobs} that are queued or waiting and not
    in C{running}, taken by (priority, id).  A candidate a C{REJECT} rule
    applies to is rejected; one whose dependencies are all met is started
    while fewer than C{max_running} jobs run, unless an ad-hoc reason rate
    limit or a filter rule holds it (C{PAUSE}, a full C{RATE_LIMIT}); one
    with an unfinished dependency stays; failures, cancellations and
    rejections take no slot.

    @param running: ids of jobs that have a job process.
    @param lookup: finds jobs not in C{jobs} (the archive), or C{None}.
    @param rules: the job filter rules in evaluation order
        (L{filtering.rules_from_config}).
    """
    running_ids = set(running)
    pending = jobs.pending() if isinstance(jobs, JobTable) else jobs  # (finished ones are no candidates)
    candidates = sorted(
        (job.priority, job_id)
        for job_id, job in pending.items()
        if job_id not in running_ids and job.status in _SCHEDULABLE
    )
    free = max(0, max_running - len(running_ids))
    eligible: list[QueuedJob] = []
    fail: list[tuple[int, str]] = []
    cancel: list[int] = []
    reject: list[tuple[int, filtering.FilterRule]] = []
    applying: dict[int, filtering.FilterRule | None] = {}
    for _priority, job_id in candidates:
        job = jobs[job_id]
        if rules:
            rule = applying[job_id] = filtering.applying_rule(rules, job)
            if rule is not None and rule.action == filtering.REJECT:
                reject.append((job_id, rule))
                continue
        outcome, message = _check_dependencies(job_id, job, jobs, lookup)
        if outcome == _OK:
            eligible.append(job)
        elif outcome == _FAIL:
            fail.append((job_id, message))
        elif outcome == _CANCEL:
            cancel.append(job_id)
    start: list[int] = []
    if eligible and free:
        running_jobs = [jobs[i] for i in sorted(running_ids) if i in jobs]
        eligible = filtering.reason_rate_limit(running_jobs, eligible)
        eligible = filtering.filter_jobs(rules, running_jobs, eligible, applying)
        start = [job.id for job in eligible[:free]]
    return Decision(start=start, fail=fail, cancel=cancel, reject=reject)


def dependency_status(dep_id: int, jobs: Mapping[int, QueuedJob], lookup: Lookup | None) -> str | None:
    """The status of job C{dep_id}, or C{None} if it is not known."""
    job = jobs.get(dep_id)
    if job is None and lookup is not None:
        job = lookup(dep_id)
    return None if job is None else job.status


def _check_dependencies(
    job_id: int, job: QueuedJob, jobs: Mapping[int, QueuedJob], lookup: Lookup | None
) -> tuple[str, str]:
    """Check the dependencies in order; the first one not met decides."""
    try:
        depends = job.depends()
    except (TypeError, ValueError, IndexError, KeyError, AttributeError) as e:
        return _FAIL, "Invalid dependencies: %s" % (e,)
    for dep_id, wanted in depends:
        if dep_id == job_id:
            return _FAIL, "Job can't depend on itself"
        status = dependency_status(dep_id, jobs, lookup)
        if status is None:
            return _FAIL, "Dependency job %d is not known" % dep_id
        if status not in FINALIZED:
            return _WAIT, "Need to wait for job %d" % dep_id
        if status == CANCELED and CANCELED not in wanted:
            return _CANCEL, "Dependency job %d was cancelled" % dep_id
        if wanted and status not in wanted:
            return _FAIL, "Dependency job %d finished with status '%s', not one of '%s' as required" % (
                dep_id,
                status,
                ", ".join(map(str, wanted)),
            )
    return _OK, ""


# --- submission ----------------------------------------------------------


def resolve_relative_depends(ops_inputs: Iterable[Mapping[str, Any]], job_id: int) -> list[dict[str, Any]]:
    """Copies of C{ops_inputs} with every C{depends} entry made absolute.

    A negative dependency id is relative to C{job_id} (C{-1} is the job
    submitted just before in the same C{SubmitManyJobs}).  Status lists
    must hold finalized statuses only; an empty list accepts any.

    @raise errors.OpPrereqError: (with C{ECODE_INVAL}) a malformed
        C{depends} or a relative id that resolves below zero.
    """
    resolved = []
    for index, op in enumerate(ops_inputs):
        if not isinstance(op, Mapping):
            raise errors.OpPrereqError("Opcode %d is not an object" % index, errors.ECODE_INVAL)
        out = dict(op)
        depends = op.get("depends")
        if depends is not None:
            out["depends"] = _resolve_depends(depends, job_id, index)
        resolved.append(out)
    return resolved


def _resolve_depends(depends: Any, job_id: int, index: int) -> list[list[Any]]:
    def invalid(why: str) -> errors.OpPrereqError:
        return errors.OpPrereqError("Invalid 'depends' of opcode %d: %s" % (index, why), errors.ECODE_INVAL)

    if not isinstance(depends, (list, tuple)):
        raise invalid("expected a list of [job id, [status, ...]], got %r" % (depends,))
    out = []
    for entry in depends:
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise invalid("expected [job id, [status, ...]], got %r" % (entry,))
        raw_id, statuses = entry
        dep_id = _job_id(raw_id)
        if dep_id is None:
            raise invalid("%r is not a job id" % (raw_id,))
        if dep_id < 0:
            absolute = job_id + dep_id
            if absolute < 0:
                raise invalid("unable to resolve relative job id %d" % dep_id)
            dep_id = absolute
        if not isinstance(statuses, (list, tuple)):
            raise invalid("expected a list of statuses, got %r" % (statuses,))
        for status in statuses:
            if not isinstance(status, str) or status not in FINALIZED:
                raise invalid(
                    "status %r is not one of %s"
                    % (status, ", ".join(s for s in STATUS_ORDER if s in FINALIZED))
                )
        out.append([dep_id, list(statuses)])
    return out


def _job_id(value: Any) -> int | None:
    """An integer job id as Ganeti accepts it (int, integral float, digits)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


__all__ = ["Decision", "dependency_status", "resolve_relative_depends", "schedule"]
