"""The life of a job and its opcodes: statuses and their transitions (pure).

This module is the one definition of the statuses a job and its opcodes go
through (spec/jobs.md section 1), of which changes of status are allowed,
and of the functions that apply them to a job record.  It imports only the
standard library, so that LuxiD, the job process, the command-line tools,
RAPI and the logical units can all use it without pulling in each other::

    queued ──▶ waiting ──▶ running ──▶ success
      │          │  ▲         │
      │          │  └─(again) ├──────▶ error     (any unfinished opcode)
      ▼          ▼            ▼
    canceling ─────────────▶ canceled           (any unfinished opcode)

An opcode's status only moves along L{TRANSITIONS}; a final status
(L{FINALIZED}) never changes.  A job's status is derived from its
opcodes' (L{job_status}).  The functions below change an opcode or a job
record in place; a change the table does not allow raises
L{IllegalTransition} before anything is changed.

It also holds what a logical unit hands to the job around it without
importing the job machinery: the log entry types (C{ELOG_*}) of its
feedback and L{ResultWithJobs}, the result that has more jobs submitted.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Protocol, Sequence

# --- statuses (jobs and opcodes share them; the order matters) -------------
QUEUED = "queued"
WAITING = "waiting"
CANCELING = "canceling"
RUNNING = "running"
CANCELED = "canceled"
SUCCESS = "success"
ERROR = "error"
#: every status, in Ganeti's order (queries sort by it)
STATUS_ORDER: tuple[str, ...] = (QUEUED, WAITING, CANCELING, RUNNING, CANCELED, SUCCESS, ERROR)
#: not started running yet (a job in one of these may still be canceled)
PENDING = frozenset({QUEUED, WAITING, CANCELING})
#: final: an opcode or job in one of these never changes again
FINALIZED = frozenset({CANCELED, SUCCESS, ERROR})

#: the allowed changes of an opcode's status: old -> possible new ones.
#: C{waiting -> waiting} is a job process taking up again an opcode that
#: waited for locks when its predecessor stopped.
TRANSITIONS: dict[str, frozenset[str]] = {
    QUEUED: frozenset({WAITING, CANCELING, CANCELED, ERROR}),
    WAITING: frozenset({WAITING, RUNNING, CANCELING, CANCELED, ERROR}),
    CANCELING: frozenset({CANCELED, ERROR}),
    RUNNING: frozenset({SUCCESS, CANCELED, ERROR}),
    CANCELED: frozenset(),
    SUCCESS: frozenset(),
    ERROR: frozenset(),
}

# --- priorities (lower = more urgent) ---------------------------------------
PRIO_HIGHEST = -20
PRIO_HIGH = -10
PRIO_NORMAL = PRIO_DEFAULT = 0
PRIO_LOW = 10
PRIO_LOWEST = 19
#: the priorities a client may submit a job with
PRIO_SUBMIT_VALID = frozenset({PRIO_HIGH, PRIO_NORMAL, PRIO_LOW})

# --- log entry types ----------------------------------------------------------
#: a line of text for the user
ELOG_MESSAGE = "message"
#: the connection details of a remote import (backup import with a remote source)
ELOG_REMOTE_IMPORT = "remote-import"
#: OP_TEST_JQUEUE's checkpoints
ELOG_JQUEUE_TEST = "jqueue-test"
#: OP_TEST_DELAY's notification socket
ELOG_DELAY_TEST = "delay-test"


class IllegalTransition(ValueError):
    """A change of status the job lifecycle does not allow."""


if TYPE_CHECKING:  # types for mypy: typing is not imported at run time (ganeti.lighttyping)

    class OpRecord(Protocol):
        """What the transitions change of an opcode (L{ganeti.jobs.model.QueuedOpCode})."""

        status: str
        result: Any
        start_timestamp: Any
        exec_timestamp: Any
        end_timestamp: Any


    class JobRecord(Protocol):
        """What the transitions change of a job (L{ganeti.jobs.model.QueuedJob})."""

        start_timestamp: Any
        end_timestamp: Any

        @property
        def ops(self) -> Sequence[OpRecord]: ...


class ResultWithJobs:
    """What a logical unit returns to have C{jobs} submitted after it
    (Ganeti's C{ResultWithJobs}; see L{ganeti.jobs.followup}).

    @ivar jobs: the jobs, each a list of opcode dicts (C{{"OP_ID": ...}}).
    @ivar other: more keys for the opcode's result dict.

    A plain class, not a dataclass: this module is on the command line's
    import path, and C{dataclasses} costs more to import than all of it.
    """

    __slots__ = ("jobs", "other")

    jobs: list[list[dict[str, Any]]]
    other: dict[str, Any]

    def __init__(self, jobs: list[list[dict[str, Any]]], other: dict[str, Any] | None = None) -> None:
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "other", {} if other is None else other)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ResultWithJobs is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResultWithJobs):
            return NotImplemented
        return (self.jobs, self.other) == (other.jobs, other.other)

    def __repr__(self) -> str:
        return "ResultWithJobs(jobs=%r, other=%r)" % (self.jobs, self.other)


# --- the state machine ----------------------------------------------------------
def is_status(value: object) -> bool:
    """Whether C{value} is one of the statuses."""
    return isinstance(value, str) and value in TRANSITIONS


def allowed(old: str, new: str) -> bool:
    """Whether an opcode may go from C{old} to C{new}."""
    return new in TRANSITIONS.get(old, frozenset())


def check(old: str, new: str) -> None:
    """@raise IllegalTransition: an opcode may not go from C{old} to C{new}."""
    if not is_status(old):
        raise IllegalTransition("unknown opcode status %r" % (old,))
    if not is_status(new):
        raise IllegalTransition("unknown opcode status %r" % (new,))
    if not allowed(old, new):
        raise IllegalTransition("an opcode cannot go from %s to %s" % (old, new))


def status_index(status: str) -> int:
    """The place of C{status} in L{STATUS_ORDER}."""
    return STATUS_ORDER.index(status)


def job_status(op_statuses: Iterable[str]) -> str:
    """The status of a job whose opcodes have C{op_statuses} (spec/jobs.md 1):
    the first error, canceling or canceled one; else success when all
    succeeded; else the last one neither queued nor successful; else queued."""
    candidate = QUEUED
    all_success = True
    for status in op_statuses:
        if status in (ERROR, CANCELING, CANCELED):
            return status
        if status != SUCCESS:
            all_success = False
        if status not in (SUCCESS, QUEUED):
            candidate = status
    return SUCCESS if all_success else candidate


def _unfinished(job: JobRecord, start: int) -> list[OpRecord]:
    if not 0 <= start <= len(job.ops):
        raise IndexError("job has no opcode %d" % start)
    return [op for op in job.ops[start:] if op.status not in FINALIZED]


def _check_all(ops: Iterable[OpRecord], new: str) -> None:
    for op in ops:
        check(op.status, new)


# --- one opcode -----------------------------------------------------------------
def wait(job: JobRecord, index: int, now: Any) -> None:
    """Opcode C{index} starts: it waits for its locks (C{start_timestamp}
    is C{now}, and the job's start too if it has none)."""
    op = job.ops[index]
    check(op.status, WAITING)
    op.status = WAITING
    op.start_timestamp = now
    if job.start_timestamp is None:
        job.start_timestamp = now


def run(op: OpRecord, now: Any) -> None:
    """C{op} holds its locks and runs (C{exec_timestamp} is C{now})."""
    check(op.status, RUNNING)
    op.status = RUNNING
    op.exec_timestamp = now


def succeed(op: OpRecord, result: Any, now: Any) -> None:
    """C{op} ran to its end with C{result}."""
    check(op.status, SUCCESS)
    op.status = SUCCESS
    op.result = result
    op.end_timestamp = now


# --- the whole job -------------------------------------------------------------
def fail(job: JobRecord, result: Any, now: Any, start: int = 0, later: Any = None) -> None:
    """End every unfinished opcode from C{start} on in error; the job ends.

    @param result: the result (an encoded error) of the first of them.
    @param later: the result of the others (default: C{result} as well),
        e.g. C{["OpExecError", ["Preceding opcode failed"]]}.
    """
    ops = _unfinished(job, start)
    _check_all(ops, ERROR)
    for position, op in enumerate(ops):
        op.status = ERROR
        if position == 0:
            op.result = result
        else:  # each its own copy, as if each had failed alone
            import copy  # here: the gnt-* tools import this module, and copy's import costs each 1 ms

            op.result = copy.deepcopy(result if later is None else later)
        op.end_timestamp = now
    job.end_timestamp = now


def cancel(job: JobRecord, now: Any, start: int = 0, reason: str | None = None) -> list[int]:
    """End every unfinished opcode from C{start} on canceled; the job ends.

    @param reason: C{None} leaves the opcodes' results as they are (a job
        that never started, as Ganeti's LuxiD leaves it); otherwise the
        result of every canceled opcode.
    @return: the indexes of the opcodes canceled.
    """
    ops = _unfinished(job, start)
    _check_all(ops, CANCELED)
    indexes = [i for i, op in enumerate(job.ops) if i >= start and op.status not in FINALIZED]
    for op in ops:
        if reason is not None:
            op.result = reason
        op.status = CANCELED
        op.end_timestamp = now
    job.end_timestamp = now
    return indexes


def request_cancel(job: JobRecord) -> bool:
    """Mark the opcodes that have not started running C{canceling} (the job
    process ends them C{canceled} at its next step).  Returns whether any
    changed; an opcode that runs is not touched."""
    pending = [op for op in job.ops if op.status in (QUEUED, WAITING)]
    for op in pending:
        op.status = CANCELING
    return bool(pending)


def finalize(job: JobRecord, now: Any) -> bool:
    """Give a job that has just become final its end timestamp (a job file
    never shows a final status without one); returns whether it did."""
    if job.end_timestamp is None and job_status(op.status for op in job.ops) in FINALIZED:
        job.end_timestamp = now
        return True
    return False
