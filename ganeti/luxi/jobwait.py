"""Following a job to its end over LUXI, for any client (pure, no I/O).

The gnt-* tools talk to LuxiD with a blocking client, RAPI with an
asynchronous one; both follow a job the same way.  L{follow} is a
generator: it yields the LUXI calls to make (L{Call}) and is sent their
answers, so it neither blocks nor needs a reactor.  L{run_sync} and
L{run_async} drive it with a caller's C{perform(call)}::

    rows = run_sync(follow(job_id, 60, reporter), perform)             # gnt-*
    rows = await run_async(follow(job_id, 10), perform_async)          # RAPI
    result = outcome(job_id, rows)       # the opcodes' results, statuses, first error

C{WaitForJobChange} answers when the job's status or log changed, or with
C{"nochange"} (or the same values) after its timeout; the job is followed
until its status is one of C{until}.  With a reporter, every log entry is
reported once, in order, also those that arrive with the final status.
"""

from __future__ import annotations

from ganeti import errors
from ganeti.jobs.lifecycle import ERROR, FINALIZED, SUCCESS
from ganeti.lighttyping import Protocol, TypeVar
from ganeti.luxi import methods

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Awaitable, Callable, Generator

#: WaitForJobChange's answer when nothing changed before the timeout
NOT_CHANGED = "nochange"
#: the LUXI methods L{follow} calls
WAIT_FOR_JOB_CHANGE = methods.WaitForJobChange.name
QUERY_JOBS = methods.QueryJobs.name
#: the fields L{outcome} reads
RESULT_FIELDS = ["status", "opstatus", "opresult"]

T = TypeVar("T")


#: one LUXI call L{follow} makes: a request declared in L{ganeti.luxi.methods} ("Any" quoted: L{ganeti.lighttyping})
Call = methods.Request["Any"]


class Reporter(Protocol):
    """Told what a followed job does (the gnt-* tools print it)."""

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None: ...

    def not_changed(self, job_id: int, status: str | None) -> None: ...


class Outcome:
    """How a job ended, from its C{QueryJobs} row (L{RESULT_FIELDS}).

    @ivar failed: the index of the first opcode in error, or C{None}.
    @ivar error: that opcode's result (an encoded error, normally).
    @ivar partial: an opcode before it succeeded.

    A plain immutable class: a dataclass or C{NamedTuple} would cost the
    command-line tools more at every start than this module does.
    """

    __slots__ = ("status", "op_status", "results", "failed", "error", "partial")

    status: str
    op_status: list[Any]
    results: list[Any]
    failed: int | None
    error: Any
    partial: bool

    def __init__(self, status: str, op_status: list[Any], results: list[Any], failed: int | None = None,
                 error: Any = None, partial: bool = False) -> None:
        for name, value in zip(self.__slots__, (status, op_status, results, failed, error, partial)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Outcome is immutable")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        return "Outcome(%s)" % ", ".join("%s=%r" % (n, v) for n, v in zip(self.__slots__, self._values()))

    def replace(self, **changes: Any) -> Outcome:
        """A copy with C{changes}."""
        values = dict(zip(self.__slots__, self._values()))
        values.update(changes)
        return Outcome(**values)


def follow(
    job_id: int,
    timeout: float,
    reporter: Reporter | None = None,
    until: frozenset[str] = FINALIZED,
    lost: str = "Job %s not found",
) -> Generator[Call, Any, Any]:
    """Follow job C{job_id} until its status is in C{until}; returns its
    C{QueryJobs} rows (L{RESULT_FIELDS}).

    @param timeout: seconds each C{WaitForJobChange} may block.
    @param lost: the message (C{%s}: the job id) of the L{errors.JobLost}
        raised when the job is unknown (or was archived).
    """
    prev_info: Any = None
    prev_serial: int | None = None
    status: str | None = None
    while True:
        answer = yield methods.WaitForJobChange.call(job_id, ["status"], prev_info, prev_serial, timeout)
        if not answer:
            raise errors.JobLost(lost % job_id)
        if answer == NOT_CHANGED:
            if reporter is not None:
                reporter.not_changed(job_id, status)
            continue
        job_info, entries = answer
        status = job_info[0] if job_info else None
        fresh = sorted(
            (e for e in entries or [] if _is_entry(e) and (prev_serial is None or e[0] > prev_serial)),
            key=lambda e: e[0],
        )
        if fresh:
            prev_serial = max([e[0] for e in fresh] + ([] if prev_serial is None else [prev_serial]))
            if reporter is not None:
                for serial, timestamp, log_type, message in fresh:
                    reporter.log(job_id, serial, timestamp, log_type, message)
                prev_info = job_info
                continue  # more entries may have come with the final status
        if status in until:
            break
        if reporter is not None and job_info == prev_info:  # LuxiD's answer on timeout: the same values
            reporter.not_changed(job_id, status)
        prev_info = job_info
    return (yield methods.QueryJobs.call([job_id], list(RESULT_FIELDS)))


def _is_entry(entry: Any) -> bool:
    """A log entry C{[serial, timestamp, type, message]}."""
    return (
        isinstance(entry, (list, tuple))
        and len(entry) == 4
        and isinstance(entry[0], int)
        and not isinstance(entry[0], bool)
    )


def outcome(job_id: int, rows: Any, lost: str = "Job %s not found") -> Outcome:
    """How job C{job_id} ended, from the rows L{follow} returned.

    @raise errors.JobLost: there is no such job (any more).
    """
    if not rows or rows[0] is None:
        raise errors.JobLost(lost % job_id)
    status, op_status, results = rows[0]
    op_status, results = list(op_status or []), list(results or [])
    done = Outcome(status=status, op_status=op_status, results=results)
    if status == SUCCESS:
        return done
    for index, (one_status, result) in enumerate(zip(op_status, results)):
        if one_status == ERROR:
            partial = SUCCESS in op_status[:index]
            return done.replace(failed=index, error=result, partial=partial)
    return done


def run_sync(steps: Generator[Call, Any, T], perform: Callable[[Call], Any]) -> T:
    """Drive C{steps} with a blocking C{perform(call) -> answer}."""
    try:
        call = next(steps)
        while True:
            call = steps.send(perform(call))
    except StopIteration as stop:
        value: T = stop.value
        return value


async def run_async(steps: Generator[Call, Any, T], perform: Callable[[Call], Awaitable[Any]]) -> T:
    """Drive C{steps} with an asynchronous C{perform(call) -> answer}."""
    try:
        call = next(steps)
        while True:
            call = steps.send(await perform(call))
    except StopIteration as stop:
        value: T = stop.value
        return value
