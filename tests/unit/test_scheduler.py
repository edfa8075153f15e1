"""The scheduler: order, capacity, dependencies (spec/jobs.md section 3), relative ids."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ganeti import errors
from ganeti.jobs.model import (
    CANCELED,
    CANCELING,
    ERROR,
    FINALIZED,
    QUEUED,
    RUNNING,
    STATUS_ORDER,
    SUCCESS,
    WAITING,
    QueuedJob,
    QueuedOpCode,
)
from ganeti.jobs.scheduler import Decision, resolve_relative_depends, schedule


def job(job_id, status=QUEUED, priority=0, depends=None, ops=1):
    """A job whose first unfinished op has C{depends}."""
    made = [
        QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "depends": depends}, status=status, priority=priority)
        for _ in range(ops)
    ]
    return QueuedJob(id=job_id, ops=made)


def jobs_of(*jobs):
    return {j.id: j for j in jobs}


# --- order and capacity -------------------------------------------------------


ORDER_TABLE = [
    # (jobs as (id, priority), running, max_running, expected start)
    ([(1, 0), (2, 0), (3, 0)], [], 20, [1, 2, 3]),
    ([(3, 0), (1, 0), (2, 0)], [], 20, [1, 2, 3]),
    ([(1, 10), (2, 0), (3, -10)], [], 20, [3, 2, 1]),
    ([(1, 0), (2, -20), (3, 19), (4, -10)], [], 2, [2, 4]),
    ([(5, 0), (4, 0), (6, -10)], [], 1, [6]),
    ([(1, 0), (2, 0), (3, 0)], [], 2, [1, 2]),
    ([(1, 0), (2, 0), (3, 0)], [], 0, []),
    ([(1, 0), (2, 0), (3, 0)], [99], 3, [1, 2]),
    ([(1, 0), (2, 0), (3, 0)], [97, 98, 99], 3, []),
    ([(1, 0), (2, 0), (3, 0)], [97, 98, 99, 100], 3, []),  # over capacity already
    ([(1, 0), (2, 0), (3, 0)], [1], 3, [2, 3]),  # a running job is not started again
    ([], [], 5, []),
]


@pytest.mark.parametrize("specs,running,max_running,expected", ORDER_TABLE)
def test_priority_then_id_up_to_capacity(specs, running, max_running, expected):
    jobs = jobs_of(*(job(i, priority=p) for i, p in specs))
    decision = schedule(jobs, running, max_running)
    assert decision == Decision(start=expected, fail=[], cancel=[])


def test_job_priority_is_that_of_its_pending_ops():
    urgent_later = QueuedJob(
        id=1,
        ops=[
            QueuedOpCode(input={"OP_ID": "A"}, status=SUCCESS, priority=10),
            QueuedOpCode(input={"OP_ID": "B"}, status=QUEUED, priority=-10),
        ],
    )
    jobs = jobs_of(job(0, priority=0), urgent_later)
    assert schedule(jobs, [], 1).start == [1]


@pytest.mark.parametrize("status", [CANCELING, RUNNING, CANCELED, SUCCESS, ERROR])
def test_only_queued_and_waiting_jobs_are_candidates(status):
    jobs = jobs_of(job(1, status=status), job(2, status=WAITING), job(3))
    assert schedule(jobs, [], 10).start == [2, 3]


def test_repeated_scheduling_never_starts_a_job_twice():
    jobs = jobs_of(*(job(i) for i in range(1, 8)))
    running: list[int] = []
    started: list[int] = []
    for _ in range(5):
        decision = schedule(jobs, running, 3)
        started.extend(decision.start)
        running.extend(decision.start)
        if running:
            jobs[running.pop(0)].ops[0].status = SUCCESS  # one finishes per round
    assert len(started) == len(set(started))
    assert started[:3] == [1, 2, 3]


# --- dependencies ------------------------------------------------------------------

DEPENDENCY_TABLE = [
    # (dependency status or None if unknown, wanted statuses, outcome)
    (SUCCESS, [SUCCESS], "start"),
    (SUCCESS, [], "start"),
    (ERROR, [], "start"),
    (ERROR, [ERROR, SUCCESS], "start"),
    (CANCELED, [CANCELED], "start"),
    (CANCELED, [CANCELED, SUCCESS], "start"),
    (CANCELED, [], "cancel"),
    (CANCELED, [SUCCESS], "cancel"),
    (CANCELED, [ERROR, SUCCESS], "cancel"),
    (ERROR, [SUCCESS], "fail"),
    (SUCCESS, [ERROR], "fail"),
    (SUCCESS, [CANCELED], "fail"),
    (QUEUED, [SUCCESS], "wait"),
    (WAITING, [], "wait"),
    (CANCELING, [CANCELED], "wait"),
    (RUNNING, [SUCCESS], "wait"),
    (None, [SUCCESS], "fail"),
    (None, [], "fail"),
]


def outcome(decision, job_id):
    found = [name for name, ids in (("start", decision.start), ("cancel", decision.cancel)) if job_id in ids]
    found += ["fail" for failed, _msg in decision.fail if failed == job_id]
    assert len(found) <= 1
    return found[0] if found else "wait"


@pytest.mark.parametrize("dep_status,wanted,expected", DEPENDENCY_TABLE)
def test_dependency_rules(dep_status, wanted, expected):
    jobs = jobs_of(job(10, depends=[[5, wanted]]))
    if dep_status is not None:
        jobs[5] = job(5, status=dep_status)
    decision = schedule(jobs, running=[5] if dep_status == RUNNING else [], max_running=10)
    assert outcome(decision, 10) == expected


def test_dependency_messages():
    jobs = jobs_of(
        job(1, status=ERROR),
        job(2, status=CANCELED),
        job(10, depends=[[10, []]]),
        job(11, depends=[[999, [SUCCESS]]]),
        job(12, depends=[[1, [SUCCESS, CANCELED]]]),
        job(13, depends=[[2, [SUCCESS]]]),
    )
    decision = schedule(jobs, [], 10)
    assert decision.fail == [
        (10, "Job can't depend on itself"),
        (11, "Dependency job 999 is not known"),
        (12, "Dependency job 1 finished with status 'error', not one of 'success, canceled' as required"),
    ]
    assert decision.cancel == [13]
    assert decision.start == []


def test_archived_dependencies_are_looked_up():
    archive = {3: job(3, status=SUCCESS), 4: job(4, status=ERROR)}
    asked = []

    def lookup(job_id):
        asked.append(job_id)
        return archive.get(job_id)

    jobs = jobs_of(job(10, depends=[[3, [SUCCESS]]]), job(11, depends=[[4, [SUCCESS]]]), job(12, depends=[[5, []]]))
    decision = schedule(jobs, [], 10, lookup=lookup)
    assert decision.start == [10]
    assert [j for j, _ in decision.fail] == [11, 12]
    assert sorted(asked) == [3, 4, 5]
    # without the archive the same dependencies are unknown
    assert [j for j, _ in schedule(jobs, [], 10).fail] == [10, 11, 12]


def test_live_job_wins_over_lookup():
    jobs = jobs_of(job(3, status=RUNNING), job(10, depends=[[3, []]]))
    decision = schedule(jobs, [3], 10, lookup=lambda i: job(i, status=SUCCESS))
    assert decision == Decision(start=[], fail=[], cancel=[])


def test_dependencies_are_checked_in_order_first_unmet_decides():
    jobs = jobs_of(
        job(1, status=SUCCESS),
        job(2, status=QUEUED),
        job(3, status=CANCELED),
        job(10, depends=[[1, [SUCCESS]], [2, []], [999, []]]),  # waits for 2 before 999 is checked
        job(11, depends=[[1, [SUCCESS]], [3, []], [999, []]]),  # canceled by 3
        job(12, depends=[[999, []], [2, []]]),  # unknown first
        job(13, depends=[[1, [ERROR]], [3, []]]),  # wrong status first
    )
    decision = schedule(jobs, [2], 10)
    assert outcome(decision, 10) == "wait"
    assert decision.cancel == [11]
    assert [j for j, _ in decision.fail] == [12, 13]
    assert decision.start == []


def test_only_the_first_unfinished_op_counts():
    later = QueuedJob(
        id=10,
        ops=[
            QueuedOpCode(input={"OP_ID": "A", "depends": [[999, []]]}, status=SUCCESS),
            QueuedOpCode(input={"OP_ID": "B", "depends": [[1, [SUCCESS]]]}, status=QUEUED),
        ],
    )
    jobs = jobs_of(job(1, status=SUCCESS), later)
    assert schedule(jobs, [], 10).start == [10]


def test_failures_and_cancellations_take_no_slot():
    jobs = jobs_of(
        job(1, status=CANCELED),
        job(2, priority=-10, depends=[[1, [SUCCESS]]]),  # cancel
        job(3, priority=-10, depends=[[77, []]]),  # fail
        job(4, priority=-10, depends=[[5, []]]),  # waits for 5
        job(5),
        job(6),
    )
    decision = schedule(jobs, [], 2)
    assert decision.start == [5, 6]
    assert decision.cancel == [2]
    assert [j for j, _ in decision.fail] == [3]


def test_dependencies_are_resolved_even_beyond_capacity():
    jobs = jobs_of(job(1), job(2), job(3, depends=[[404, []]]), job(4, depends=[[4, []]]))
    decision = schedule(jobs, [], 1)
    assert decision.start == [1]
    assert [j for j, _ in decision.fail] == [3, 4]


def test_dependency_on_a_job_started_in_the_same_round_waits():
    jobs = jobs_of(job(1), job(2, depends=[[1, [SUCCESS]]]))
    assert schedule(jobs, [], 10) == Decision(start=[1], fail=[], cancel=[])


def test_garbled_depends_in_a_job_file_fails_the_job():
    jobs = jobs_of(job(1, depends=[["x", []]]), job(2))
    decision = schedule(jobs, [], 10)
    assert decision.start == [2]
    assert [j for j, _ in decision.fail] == [1]


# --- relative dependencies at submission -----------------------------------------------


RELATIVE_TABLE = [
    (None, None),
    ([], []),
    ([[-1, [SUCCESS]]], [[99, [SUCCESS]]]),
    ([[-1, [SUCCESS]], [1234, []]], [[99, [SUCCESS]], [1234, []]]),
    ([(-100, (ERROR, CANCELED))], [[0, [ERROR, CANCELED]]]),
    ([[0, []]], [[0, []]]),
    ([[7.0, []]], [[7, []]]),
    ([["42", [SUCCESS]]], [[42, [SUCCESS]]]),
]


@pytest.mark.parametrize("depends,expected", RELATIVE_TABLE)
def test_relative_depends_are_made_absolute(depends, expected):
    ops = [{"OP_ID": "OP_TEST_DELAY", "depends": depends, "duration": 1}]
    (out,) = resolve_relative_depends(ops, 100)
    assert out["depends"] == expected
    assert out["duration"] == 1
    assert ops[0]["depends"] is depends  # the input is not changed


def test_op_without_depends_is_untouched():
    (out,) = resolve_relative_depends([{"OP_ID": "OP_TEST_DELAY"}], 5)
    assert out == {"OP_ID": "OP_TEST_DELAY"}


def test_submit_many_jobs_chain():
    """C{-1} in each job of a batch names the job just before it."""
    batch = [
        [{"OP_ID": "OP_A"}],
        [{"OP_ID": "OP_B", "depends": [[-1, [SUCCESS]]]}],
        [{"OP_ID": "OP_C", "depends": [[-2, []], [-1, [SUCCESS, ERROR]]]}],
    ]
    ids = [50, 51, 52]
    resolved = [resolve_relative_depends(ops, job_id) for ops, job_id in zip(batch, ids)]
    assert resolved[1][0]["depends"] == [[50, [SUCCESS]]]
    assert resolved[2][0]["depends"] == [[50, []], [51, [SUCCESS, ERROR]]]


@pytest.mark.parametrize(
    "depends",
    [
        "1",
        5,
        {"1": []},
        [5],
        [[5]],
        [[5, [], 1]],
        [[5, "success"]],
        [[5, None]],
        [[5, [RUNNING]]],
        [[5, [QUEUED]]],
        [[5, ["bogus"]]],
        [[5, [["success"]]]],
        [[True, []]],
        [[None, []]],
        [[1.5, []]],
        [["-1", []]],
        [[-101, []]],  # resolves below zero
    ],
)
def test_malformed_depends_are_refused(depends):
    with pytest.raises(errors.OpPrereqError) as caught:
        resolve_relative_depends([{"OP_ID": "OP_TEST_DELAY", "depends": depends}], 100)
    assert caught.value.args[1] == errors.ECODE_INVAL


def test_non_object_opcode_is_refused():
    with pytest.raises(errors.OpPrereqError):
        resolve_relative_depends(["OP_TEST_DELAY"], 1)


# --- property ---------------------------------------------------------------------------------

STATUSES = st.sampled_from(STATUS_ORDER)


@st.composite
def queues(draw):
    ids = draw(st.lists(st.integers(min_value=1, max_value=40), unique=True, max_size=25))
    jobs = {}
    for job_id in ids:
        deps = draw(
            st.lists(
                st.tuples(
                    st.integers(min_value=0, max_value=45),
                    st.lists(st.sampled_from(sorted(FINALIZED)), unique=True, max_size=3),
                ),
                max_size=3,
            )
        )
        jobs[job_id] = job(
            job_id,
            status=draw(STATUSES),
            priority=draw(st.sampled_from([-20, -10, 0, 10, 19])),
            depends=[[d, w] for d, w in deps] or None,
        )
    running = draw(st.lists(st.integers(min_value=1, max_value=45), unique=True, max_size=10))
    return jobs, running, draw(st.integers(min_value=0, max_value=12))


@settings(max_examples=300, deadline=None)
@given(queues())
def test_start_respects_capacity_and_never_restarts(case):
    jobs, running, max_running = case
    decision = schedule(jobs, running, max_running)
    started = decision.start
    assert len(started) == len(set(started))
    assert len(running) + len(started) <= max(max_running, len(running))
    assert len(started) <= max(0, max_running - len(running))
    failed = [j for j, _ in decision.fail]
    touched = started + failed + decision.cancel
    assert len(touched) == len(set(touched))  # one verdict per job
    for job_id in touched:
        assert job_id not in running
        assert jobs[job_id].status in (QUEUED, WAITING)
        assert jobs[job_id].status not in FINALIZED
    # started jobs have every dependency finalized in an accepted way
    for job_id in started:
        for dep_id, wanted in jobs[job_id].depends():
            assert dep_id != job_id and dep_id in jobs
            status = jobs[dep_id].status
            assert status in FINALIZED
            assert not wanted or status in wanted
    # and the order is (priority, id)
    keys = [(jobs[j].priority, j) for j in started]
    assert keys == sorted(keys)
    # a job left alone either lacks a slot or waits for an unfinished dependency
    if len(started) < max_running - len(running):
        for job_id, candidate in jobs.items():
            if job_id in running or job_id in touched or candidate.status not in (QUEUED, WAITING):
                continue
            deps = candidate.depends()
            assert any(d in jobs and jobs[d].status not in FINALIZED for d, _w in deps)


# --- LuxiD's job table: finished jobs cost a scheduling pass nothing -------------------------


def test_a_job_table_schedules_as_a_plain_mapping_and_looks_at_finished_jobs_once():
    from ganeti.jobs.scheduler import JobTable

    done = [job(i, SUCCESS) for i in range(1, 1001)]
    table = JobTable(jobs_of(*done, job(1001), job(1002, depends=[[1000, [SUCCESS]]]), job(1003, RUNNING)))
    plain = dict(table)
    assert schedule(table, [1003], 20) == schedule(plain, [1003], 20) == Decision(start=[1001, 1002])
    assert table.unfinished == {1001, 1002, 1003}  # the finished ones are forgotten, not looked at again
    table[1001].ops[0].status = SUCCESS  # finalized in place (LuxiD's own cancel or failure)
    assert schedule(table, [1003], 20) == Decision(start=[1002]) and table.unfinished == {1002, 1003}
    table[1001] = job(1001)  # a state put back (e.g. one the disk could not take): scheduled again
    table[1004] = job(1004)  # a submission
    del table[1002]  # archived or removed
    assert schedule(table, [1003], 20) == Decision(start=[1001, 1004])
    assert table.unfinished == {1001, 1003, 1004}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([QUEUED, WAITING, RUNNING, SUCCESS, ERROR, CANCELED]),
                          st.integers(-2, 2)), max_size=30),
       st.integers(0, 5))
def test_a_job_table_decides_what_a_plain_mapping_does(specs, max_running):
    from ganeti.jobs.scheduler import JobTable

    jobs = {i: job(i, status, priority) for i, (status, priority) in enumerate(specs, 1)}
    running = [i for i, j in jobs.items() if j.status == RUNNING]
    table = JobTable(jobs)
    assert schedule(table, running, max_running) == schedule(dict(jobs), running, max_running)
    assert schedule(table, running, max_running) == schedule(dict(jobs), running, max_running)  # (again)
