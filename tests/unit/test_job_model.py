"""The job model reads and writes Ganeti 3.0's job files and computes status like Ganeti."""

import glob
import json
import os

import pytest

from ganeti import serializer
from ganeti.jobs import model
from ganeti.jobs.model import (
    CANCELED,
    CANCELING,
    ERROR,
    QUEUED,
    RUNNING,
    SUCCESS,
    WAITING,
    QueuedJob,
    QueuedOpCode,
)
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = str(_TESTDATA_DIR)
REAL_QUEUE = os.path.join(TESTDATA, "queue")
REAL_JOB_FILES = sorted(glob.glob(os.path.join(REAL_QUEUE, "job-*")))
REAL_STATUSES = {
    1838: ERROR,
    1885: SUCCESS,
    1886: SUCCESS,
    1887: SUCCESS,
    1888: SUCCESS,
    1889: SUCCESS,
    1890: ERROR,
    1891: SUCCESS,
    1892: SUCCESS,
}


def real_job_files():
    assert REAL_JOB_FILES, REAL_QUEUE
    return REAL_JOB_FILES


def job_of(*statuses, priorities=None, depends=None):
    priorities = priorities or [0] * len(statuses)
    ops = [
        QueuedOpCode(input={"OP_ID": "OP_TEST_DELAY", "depends": depends}, status=status, priority=prio)
        for status, prio in zip(statuses, priorities)
    ]
    return QueuedJob(id=1, ops=ops)


# --- real job files ---------------------------------------------------------


def test_all_nine_real_job_files_are_present():
    assert [int(os.path.basename(p)[4:]) for p in real_job_files()] == sorted(REAL_STATUSES)


@pytest.mark.parametrize("path", REAL_JOB_FILES, ids=os.path.basename)
def test_real_job_file_round_trips_byte_for_byte(path):
    """Written back in Ganeti's own JSON formatting, the file is identical."""
    with open(path, "rb") as handle:
        raw = handle.read()
    job = QueuedJob.from_dict(serializer.loads(raw))
    assert (json.dumps(job.to_dict()) + "\n").encode() == raw
    # and our compact encoding loses or reorders nothing either
    assert serializer.dumps(job.to_dict()) == serializer.dumps(serializer.loads(raw))


@pytest.mark.parametrize("path", REAL_JOB_FILES, ids=os.path.basename)
def test_real_job_file_is_understood(path):
    job = QueuedJob.from_dict(serializer.read_json(path))
    assert job.status == REAL_STATUSES[job.id]
    assert job.finalized
    assert job.priority == model.PRIO_DEFAULT
    assert job.depends() == []
    assert job.livelock.startswith("/var/run/ganeti/livelocks/job_%06d_" % job.id)
    assert isinstance(job.process_id, int)


def test_real_job_details():
    job = QueuedJob.from_dict(serializer.read_json(os.path.join(REAL_QUEUE, "job-1838")))
    (op,) = job.ops
    assert op.op_id == "OP_INSTANCE_REMOVE"
    assert op.result == ["OpPrereqError", ["Instance 'big199.example.test' not known", "unknown_entity"]]
    assert op.exec_timestamp is None
    created = QueuedJob.from_dict(serializer.read_json(os.path.join(REAL_QUEUE, "job-1888")))
    assert created.log_serial == 9
    assert [entry[0] for entry in created.log_since(7)] == [8, 9]
    assert created.ops[0].input["reason"][-1][:2] == ["gnt:opcode:instance_create", "job=1888;index=0"]


def test_unknown_keys_are_kept_in_order():
    data = {
        "id": 3,
        "ops": [{"input": {"OP_ID": "OP_TEST_DELAY"}, "status": "queued", "future_op_key": [1]}],
        "received_timestamp": None,
        "start_timestamp": None,
        "end_timestamp": None,
        "future_job_key": {"a": 1},
    }
    out = QueuedJob.from_dict(data).to_dict()
    assert out["future_job_key"] == {"a": 1}
    assert out["ops"][0]["future_op_key"] == [1]
    assert out["ops"][0]["log"] == [] and out["ops"][0]["priority"] == 0
    assert "livelock" not in out and "process_id" not in out


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {"ops": []},
        {"id": "1", "ops": []},
        {"id": 1, "ops": {}},
        {"id": 1, "ops": [{"status": "queued"}]},
        {"id": 1, "ops": [{"input": "OP_TEST_DELAY"}]},
    ],
)
def test_malformed_job_is_rejected(data):
    with pytest.raises(ValueError):
        QueuedJob.from_dict(data)


# --- status (spec/jobs.md section 1) ---------------------------------------

STATUS_TABLE = [
    ([QUEUED], QUEUED),
    ([QUEUED, QUEUED], QUEUED),
    ([SUCCESS], SUCCESS),
    ([SUCCESS, SUCCESS, SUCCESS], SUCCESS),
    ([SUCCESS, QUEUED], QUEUED),
    ([WAITING, QUEUED], WAITING),
    ([SUCCESS, WAITING, QUEUED], WAITING),
    ([SUCCESS, RUNNING, QUEUED], RUNNING),
    ([RUNNING, WAITING], WAITING),  # the last candidate wins
    ([WAITING, RUNNING], RUNNING),
    ([SUCCESS, ERROR, QUEUED], ERROR),
    ([ERROR, CANCELED], ERROR),  # the first terminal op decides
    ([CANCELING, CANCELING], CANCELING),
    ([RUNNING, CANCELING], CANCELING),
    ([SUCCESS, CANCELED, CANCELED], CANCELED),
    ([CANCELED, ERROR], CANCELED),
    ([WAITING, ERROR], ERROR),
    ([], SUCCESS),  # as Ganeti (Haskell and Python): no op left unsuccessful
]


@pytest.mark.parametrize("statuses,expected", STATUS_TABLE)
def test_job_status_from_op_statuses(statuses, expected):
    job = job_of(*statuses)
    assert job.status == expected
    assert job.finalized == (expected in model.FINALIZED)


def test_status_order_and_sets():
    assert model.STATUS_ORDER == (QUEUED, WAITING, CANCELING, RUNNING, CANCELED, SUCCESS, ERROR)
    assert [model.status_index(s) for s in model.STATUS_ORDER] == list(range(7))
    assert model.PENDING == {QUEUED, WAITING, CANCELING}
    assert model.FINALIZED == {CANCELED, SUCCESS, ERROR}
    assert all(model.status_index(s) > model.status_index(RUNNING) for s in model.FINALIZED)


# --- priority -----------------------------------------------------------------


def test_priority_is_minimum_of_unfinished_ops():
    assert job_of(QUEUED, QUEUED, priorities=[10, -10]).priority == -10
    assert job_of(SUCCESS, QUEUED, priorities=[-20, 10]).priority == 10
    assert job_of(ERROR, CANCELED, priorities=[-10, -10]).priority == model.PRIO_DEFAULT
    assert job_of(SUCCESS, WAITING, QUEUED, priorities=[-10, 19, 0]).priority == 0


def test_priority_constants():
    assert (model.PRIO_HIGHEST, model.PRIO_HIGH, model.PRIO_NORMAL, model.PRIO_LOW, model.PRIO_LOWEST) == (
        -20,
        -10,
        0,
        10,
        19,
    )
    assert model.PRIO_SUBMIT_VALID == {-10, 0, 10}


def test_set_priority_changes_pending_ops_only():
    job = job_of(SUCCESS, QUEUED, QUEUED)
    job.set_priority(-10)
    assert [op.priority for op in job.ops] == [0, -10, -10]
    assert [op.input.get("priority") for op in job.ops] == [None, -10, -10]
    assert job.priority == -10


def test_op_priority_defaults_to_input_priority():
    op = QueuedOpCode.from_dict({"input": {"OP_ID": "OP_TEST_DELAY", "priority": 10}, "status": "queued"})
    assert op.priority == 10


# --- log ----------------------------------------------------------------------


def test_log_since_spans_ops_and_filters_by_serial():
    job = job_of(SUCCESS, RUNNING)
    job.add_log(0, "first", when=100.0)
    job.add_log(0, "second", when=101.0)
    entry = job.add_log(1, {"x": 1}, kind=model.ELOG_REMOTE_IMPORT, when=102.5)
    assert entry == [3, [102, 500000], "remote-import", {"x": 1}]
    assert job.log_serial == 3
    assert [e[0] for e in job.log_since(None)] == [1, 2, 3]
    assert [e[0] for e in job.log_since(0)] == [1, 2, 3]
    assert [e[0] for e in job.log_since(1)] == [2, 3]
    assert [e[3] for e in job.log_since(2)] == [{"x": 1}]
    assert job.log_since(3) == []
    assert job.log_since(99) == []


def test_log_serial_of_a_job_without_log_is_zero():
    assert job_of(QUEUED).log_serial == 0


# --- transitions ---------------------------------------------------------------


def test_cancel_marks_unfinished_ops_and_leaves_results():
    job = job_of(SUCCESS, QUEUED, QUEUED)
    job.ops[0].result = "kept"
    job.ops[0].end_timestamp = [1, 0]
    job.cancel(when=1000.25)
    assert [op.status for op in job.ops] == [SUCCESS, CANCELED, CANCELED]
    assert [op.result for op in job.ops] == ["kept", None, None]
    assert [op.end_timestamp for op in job.ops] == [[1, 0], [1000, 250000], [1000, 250000]]
    assert job.end_timestamp == [1000, 250000]
    assert job.status == CANCELED and job.finalized


def test_fail_encodes_the_error_on_unfinished_ops():
    job = job_of(SUCCESS, RUNNING, QUEUED)
    job.fail("job process died", when=7.0)
    assert [op.status for op in job.ops] == [SUCCESS, ERROR, ERROR]
    assert job.ops[1].result == ["OpExecError", ["job process died"]]
    assert job.ops[0].result is None
    assert job.end_timestamp == [7, 0]
    assert job.status == ERROR
    other = job_of(QUEUED)
    other.fail("no", error_class="JobLost")
    assert other.ops[0].result == ["JobLost", ["no"]]


def test_depends_of_the_first_unfinished_op():
    job = QueuedJob(
        id=9,
        ops=[
            QueuedOpCode(input={"OP_ID": "A", "depends": [[1, ["success"]]]}, status=SUCCESS),
            QueuedOpCode(input={"OP_ID": "B", "depends": [[2, []], [3, None]]}),
            QueuedOpCode(input={"OP_ID": "C", "depends": [[4, []]]}),
        ],
    )
    assert job.depends() == [(2, []), (3, [])]
    assert job_of(QUEUED, depends=None).depends() == []
    assert job_of(SUCCESS, depends=[[1, []]]).depends() == []


def test_new_extends_the_reason_trail():
    inputs = [
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "reason": [["gnt:client:gnt-debug", "delay", 5]]},
        {"OP_ID": "OP_INSTANCE_STARTUP", "priority": -10},
    ]
    job = QueuedJob.new(42, inputs, when=1700000000.123456)
    assert job.id == 42
    assert job.received_timestamp == [1700000000, 123456]
    assert job.start_timestamp is None and job.end_timestamp is None
    assert [op.status for op in job.ops] == [QUEUED, QUEUED]
    assert job.status == QUEUED
    first, second = (op.input["reason"] for op in job.ops)
    assert first[0] == ["gnt:client:gnt-debug", "delay", 5]
    assert first[1][:2] == ["gnt:opcode:test_delay", "job=42;index=0"]
    assert second == [["gnt:opcode:instance_startup", "job=42;index=1", first[1][2]]]
    assert abs(first[1][2] - 1700000000123456000) < 1000  # nanoseconds
    assert [op.priority for op in job.ops] == [0, -10]
    assert job.priority == -10
    assert inputs[0]["reason"] == [["gnt:client:gnt-debug", "delay", 5]]  # caller's dict untouched
    assert "reason" not in inputs[1]


# --- timestamps ---------------------------------------------------------------


@pytest.mark.parametrize(
    "when,expected",
    [
        (0.0, [0, 0]),
        (1.5, [1, 500000]),
        (1700000000.123456, [1700000000, 123456]),
        (5.9999999, [6, 0]),  # rounding carries into the seconds
        (1795315656.999999, [1795315656, 999999]),
    ],
)
def test_timestamp_split(when, expected):
    assert model.timestamp(when) == expected
    assert abs(model.ts_seconds(expected) - when) < 1e-6


def test_ts_seconds_of_none():
    assert model.ts_seconds(None) is None
