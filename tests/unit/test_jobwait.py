"""Following a job over LUXI, alone: the calls made for given answers, the
same for a blocking and an asynchronous caller, and how a job's end is read."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred, succeed

from ganeti import errors
from ganeti.jobs.lifecycle import CANCELING, FINALIZED
from ganeti.luxi import jobwait
from ganeti.luxi.jobwait import Call, outcome

ROWS = [["success", ["success"], ["done"]]]


def entry(serial: int, message: str = "m") -> list[Any]:
    return [serial, [1700000000, 0], "message", message]


class Script:
    """Answers the calls of a follow in turn and records them."""

    def __init__(self, *waits: Any, rows: Any = ROWS) -> None:
        self.waits = list(waits)
        self.rows = rows
        self.calls: list[Call] = []

    def __call__(self, call: Call) -> Any:
        self.calls.append(call)
        if call.method == jobwait.QUERY_JOBS:
            return self.rows
        return self.waits.pop(0)

    def waited(self) -> list[tuple[Any, Any]]:
        return [c.args[2:4] for c in self.calls if c.method == jobwait.WAIT_FOR_JOB_CHANGE]


class Reporter:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None:
        self.seen.append((job_id, serial, message))

    def not_changed(self, job_id: int, status: str | None) -> None:
        self.seen.append(("unchanged", status))


def test_without_a_reporter_the_final_status_ends_the_wait_at_once() -> None:
    script = Script([["running"], [entry(1), entry(2)]], "nochange", [["success"], [entry(3)]])
    assert jobwait.run_sync(jobwait.follow(5, 10), script) == ROWS
    assert script.waited() == [(None, None), (["running"], 2), (["running"], 2)]
    assert script.calls[0] == Call("WaitForJobChange", (5, ["status"], None, None, 10))
    assert script.calls[-1] == Call("QueryJobs", ([5], ["status", "opstatus", "opresult"]))


def test_a_reporter_gets_every_entry_once_also_with_the_final_status() -> None:
    reporter = Reporter()
    script = Script(
        [["waiting"], []], [["waiting"], []], "nochange",
        [["success"], [entry(2, "b"), entry(1, "a"), ["garbage"]]], [["success"], [entry(2, "b")]],
    )
    jobwait.run_sync(jobwait.follow(5, 60, reporter), script)
    assert reporter.seen == [("unchanged", "waiting"), ("unchanged", "waiting"), (5, 1, "a"), (5, 2, "b")]
    assert script.waited()[-1] == (["success"], 2)


@pytest.mark.parametrize("until,waits", [(FINALIZED, 2), (FINALIZED | {CANCELING}, 1)])
def test_canceling_ends_the_wait_only_when_asked(until: frozenset[str], waits: int) -> None:
    script = Script([["canceling"], []], [["canceled"], []])
    jobwait.run_sync(jobwait.follow(5, 10, until=until), script)
    assert len(script.waited()) == waits


def test_an_unknown_job_is_lost_with_the_callers_message() -> None:
    with pytest.raises(errors.JobLost, match="^Job with id 8 lost$"):
        jobwait.run_sync(jobwait.follow(8, 10, lost="Job with id %s lost"), Script(None))
    with pytest.raises(errors.JobLost, match="^Job 8 not found$"):
        outcome(8, [None])


def test_blocking_and_asynchronous_callers_make_the_same_calls() -> None:
    answers = ([["queued"], []], "nochange", [["running"], [entry(1)]], [["error"], []])
    blocking, later = Script(*answers), Script(*answers)
    pending: list[tuple[Call, Deferred[Any]]] = []

    def perform(call: Call) -> Deferred[Any]:
        d: Deferred[Any] = Deferred()
        pending.append((call, d))
        return d

    done = Deferred.fromCoroutine(jobwait.run_async(jobwait.follow(3, 10), perform))
    while pending:  # answer each call only after it was made, as a reactor would
        call, d = pending.pop(0)
        d.callback(later(call))
    assert jobwait.run_sync(jobwait.follow(3, 10), blocking) == ROWS
    assert later.calls == blocking.calls
    assert len(blocking.calls) == 5
    assert done.result == ROWS


def test_run_async_passes_answers_and_errors_through() -> None:
    def perform(call: Call) -> Deferred[Any]:
        if call.method == jobwait.QUERY_JOBS:
            return succeed(ROWS)
        return succeed([["success"], []])

    d = Deferred.fromCoroutine(jobwait.run_async(jobwait.follow(1, 10), perform))
    assert d.result == ROWS

    def refuse(call: Call) -> Deferred[Any]:
        raise errors.LuxiError("connection lost")

    failed = Deferred.fromCoroutine(jobwait.run_async(jobwait.follow(1, 10), refuse))
    caught: list[Any] = []
    failed.addErrback(caught.append)
    assert len(caught) == 1 and caught[0].check(errors.LuxiError)


def test_outcome_of_each_end() -> None:
    assert outcome(1, ROWS).results == ["done"]
    ended = outcome(1, [["error", ["success", "error", "error"], [1, ["OpExecError", ["x"]], "later"]]])
    assert (ended.failed, ended.error, ended.partial) == (1, ["OpExecError", ["x"]], True)
    ended = outcome(1, [["error", ["error"], ["alone"]]])
    assert (ended.failed, ended.partial) == (0, False)
    ended = outcome(1, [["canceled", ["canceled"], [None]]])
    assert (ended.status, ended.failed) == ("canceled", None)
    assert outcome(1, [["success", None, None]]).results == []
