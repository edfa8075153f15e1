"""The job lifecycle alone: the statuses, every transition allowed or refused,
and the functions that end, cancel and advance a job record."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import sys
from typing import Any

import pytest

from ganeti.client.jobs import JOBS_FINALIZED, JOBS_PENDING
from ganeti.jobs import lifecycle
from ganeti.jobs.lifecycle import (
    CANCELED,
    CANCELING,
    ERROR,
    FINALIZED,
    QUEUED,
    RUNNING,
    STATUS_ORDER,
    SUCCESS,
    WAITING,
    IllegalTransition,
)

#: every (old, new) pair the lifecycle allows; every other pair is refused
ALLOWED = {
    (QUEUED, WAITING), (QUEUED, CANCELING), (QUEUED, CANCELED), (QUEUED, ERROR),
    (WAITING, WAITING), (WAITING, RUNNING), (WAITING, CANCELING), (WAITING, CANCELED), (WAITING, ERROR),
    (CANCELING, CANCELED), (CANCELING, ERROR),
    (RUNNING, SUCCESS), (RUNNING, CANCELED), (RUNNING, ERROR),
}
NOW = [100, 0]
LATER = [200, 5]


@dataclasses.dataclass
class Op:
    status: str = QUEUED
    result: Any = None
    start_timestamp: Any = None
    exec_timestamp: Any = None
    end_timestamp: Any = None


@dataclasses.dataclass
class Job:
    ops: list[Op]
    start_timestamp: Any = None
    end_timestamp: Any = None


def job(*statuses: str) -> Job:
    return Job(ops=[Op(status=s) for s in statuses])


def statuses(j: Job) -> list[str]:
    return [op.status for op in j.ops]


def test_the_module_imports_only_the_standard_library() -> None:
    assert lifecycle.__file__ is not None
    with open(lifecycle.__file__, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names)


def test_statuses_in_ganetis_order() -> None:
    assert STATUS_ORDER == ("queued", "waiting", "canceling", "running", "canceled", "success", "error")
    assert FINALIZED == {"canceled", "success", "error"}
    assert lifecycle.PENDING == {"queued", "waiting", "canceling"}
    assert set(lifecycle.TRANSITIONS) == set(STATUS_ORDER)


@pytest.mark.parametrize("old,new", list(itertools.product(STATUS_ORDER, repeat=2)))
def test_exhaustive_transition_table(old: str, new: str) -> None:
    assert lifecycle.allowed(old, new) == ((old, new) in ALLOWED)
    if (old, new) in ALLOWED:
        lifecycle.check(old, new)
    else:
        with pytest.raises(IllegalTransition, match="cannot go from %s to %s" % (old, new)):
            lifecycle.check(old, new)


@pytest.mark.parametrize("old,new", [("bogus", QUEUED), (QUEUED, "bogus"), (None, ERROR)])
def test_unknown_statuses_are_refused(old: Any, new: Any) -> None:
    with pytest.raises(IllegalTransition, match="unknown opcode status"):
        lifecycle.check(old, new)


def test_final_statuses_never_change() -> None:
    for final in FINALIZED:
        assert not lifecycle.TRANSITIONS[final]


@pytest.mark.parametrize(
    "ops,expected",
    [
        ((), SUCCESS),
        ((QUEUED, QUEUED), QUEUED),
        ((SUCCESS, QUEUED), QUEUED),
        ((SUCCESS, WAITING, QUEUED), WAITING),
        ((SUCCESS, RUNNING), RUNNING),
        ((SUCCESS, ERROR, ERROR), ERROR),
        ((CANCELING, CANCELING), CANCELING),
        ((SUCCESS, CANCELED), CANCELED),
        ((SUCCESS, SUCCESS), SUCCESS),
    ],
)
def test_job_status_from_its_opcodes(ops: tuple[str, ...], expected: str) -> None:
    assert lifecycle.job_status(ops) == expected


def test_an_opcode_waits_runs_and_succeeds() -> None:
    j = job(QUEUED, QUEUED)
    lifecycle.wait(j, 0, NOW)
    assert (j.ops[0].status, j.ops[0].start_timestamp, j.start_timestamp) == (WAITING, NOW, NOW)
    lifecycle.run(j.ops[0], LATER)
    assert (j.ops[0].status, j.ops[0].exec_timestamp) == (RUNNING, LATER)
    lifecycle.succeed(j.ops[0], {"ok": 1}, LATER)
    assert (j.ops[0].status, j.ops[0].result, j.ops[0].end_timestamp) == (SUCCESS, {"ok": 1}, LATER)
    lifecycle.wait(j, 1, LATER)
    assert j.start_timestamp == NOW  # the job started with its first opcode
    lifecycle.wait(j, 1, [300, 0])  # a job process taking up a waiting opcode again
    assert j.ops[1].start_timestamp == [300, 0]


def test_illegal_steps_raise_and_change_nothing() -> None:
    j = job(QUEUED, SUCCESS, CANCELING)
    with pytest.raises(IllegalTransition):
        lifecycle.run(j.ops[0], NOW)  # not without waiting for its locks first
    with pytest.raises(IllegalTransition):
        lifecycle.succeed(j.ops[0], "x", NOW)
    with pytest.raises(IllegalTransition):
        lifecycle.wait(j, 1, NOW)  # a finished opcode does not start again
    with pytest.raises(IllegalTransition):
        lifecycle.wait(j, 2, NOW)  # nor a canceling one
    assert statuses(j) == [QUEUED, SUCCESS, CANCELING]
    assert j.ops[0] == Op(status=QUEUED)
    assert j.start_timestamp is None


def test_fail_from_an_opcode_gives_the_later_ones_their_own_result() -> None:
    j = job(SUCCESS, RUNNING, QUEUED, QUEUED)
    first = ["OpPrereqError", ["disk gone", "wrong_state"]]
    later = ["OpExecError", ["Preceding opcode failed"]]
    lifecycle.fail(j, first, NOW, start=1, later=later)
    assert statuses(j) == [SUCCESS, ERROR, ERROR, ERROR]
    assert [op.result for op in j.ops[1:]] == [first, later, later]
    assert j.ops[2].result is not j.ops[3].result
    assert [op.end_timestamp for op in j.ops] == [None, NOW, NOW, NOW]
    assert j.end_timestamp == NOW


def test_fail_everything_unfinished_with_one_result() -> None:
    j = job(SUCCESS, WAITING, CANCELING)
    lifecycle.fail(j, ["OpExecError", ["process died"]], NOW)
    assert statuses(j) == [SUCCESS, ERROR, ERROR]
    assert j.ops[0].result is None
    assert j.ops[1].result == j.ops[2].result == ["OpExecError", ["process died"]]


def test_cancel_with_and_without_a_reason() -> None:
    j = job(SUCCESS, RUNNING, QUEUED)
    j.ops[2].result = "kept"
    assert lifecycle.cancel(j, NOW) == [1, 2]
    assert statuses(j) == [SUCCESS, CANCELED, CANCELED]
    assert [op.result for op in j.ops] == [None, None, "kept"]
    assert j.end_timestamp == NOW
    j = job(SUCCESS, CANCELING, CANCELING)
    assert lifecycle.cancel(j, NOW, start=2, reason="killed") == [2]
    assert statuses(j) == [SUCCESS, CANCELING, CANCELED]
    assert j.ops[2].result == "killed"


def test_cancel_or_fail_a_finished_job_changes_nothing_but_an_illegal_start_raises() -> None:
    j = job(SUCCESS, ERROR)
    assert lifecycle.cancel(j, NOW) == []
    assert statuses(j) == [SUCCESS, ERROR]
    with pytest.raises(IndexError):
        lifecycle.fail(job(QUEUED), ["OpExecError", ["x"]], NOW, start=5)


def test_request_cancel_marks_only_what_has_not_started_running() -> None:
    j = job(SUCCESS, RUNNING, WAITING, QUEUED)
    assert lifecycle.request_cancel(j)
    assert statuses(j) == [SUCCESS, RUNNING, CANCELING, CANCELING]
    assert not lifecycle.request_cancel(j)


def test_finalize_gives_a_final_job_its_end_once() -> None:
    j = job(SUCCESS, QUEUED)
    assert not lifecycle.finalize(j, NOW)
    j.ops[1].status = ERROR
    assert lifecycle.finalize(j, NOW)
    assert not lifecycle.finalize(j, LATER)
    assert j.end_timestamp == NOW


def test_result_with_jobs_is_a_plain_value() -> None:
    from ganeti.jobs import followup

    result = lifecycle.ResultWithJobs([[{"OP_ID": "OP_TEST_DELAY"}]])
    assert followup.ResultWithJobs is lifecycle.ResultWithJobs
    assert result.other == {}
    assert result == lifecycle.ResultWithJobs([[{"OP_ID": "OP_TEST_DELAY"}]], {})
    with pytest.raises(AttributeError):  # immutable
        result.jobs = []


def test_the_other_modules_share_the_one_definition() -> None:
    from ganeti.client.formatting import ELOG_MESSAGE
    from ganeti.cmdlib import rie
    from ganeti.jobs import model

    assert (model.SUCCESS, model.FINALIZED, model.PRIO_HIGHEST) == (SUCCESS, FINALIZED, lifecycle.PRIO_HIGHEST)
    assert JOBS_FINALIZED == (CANCELED, SUCCESS, ERROR)
    assert JOBS_PENDING == (QUEUED, WAITING, CANCELING)
    assert ELOG_MESSAGE == model.ELOG_MESSAGE == lifecycle.ELOG_MESSAGE
    assert rie.ELOG_REMOTE_IMPORT == lifecycle.ELOG_REMOTE_IMPORT


def test_a_job_file_with_an_unknown_opcode_status_is_rejected() -> None:
    from ganeti.jobs.model import QueuedJob

    with pytest.raises(ValueError, match="unknown opcode status 'paused'"):
        QueuedJob.from_dict({"id": 1, "ops": [{"input": {"OP_ID": "OP_TEST_DELAY"}, "status": "paused"}]})
