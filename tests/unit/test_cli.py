"""The gnt-* machinery: tables and query results, nested info, error texts,
following a job through scripted WaitForJobChange answers, the runner."""

from __future__ import annotations

import io
import os
import time
from typing import Any

import pytest

from ganeti import errors
from ganeti.client import prompt
from ganeti.client.command import Command, Context
from ganeti.client.errorfmt import JobCanceled, JobSubmitted, RemoteError, decode_error, format_error
from ganeti.client.formatting import (
    QR_INCOMPLETE,
    QR_NORMAL,
    QR_UNKNOWN,
    format_generic_info,
    format_log_message,
    format_query_result,
    format_table,
    format_time,
    format_timestamp,
    format_unit,
    safe_encode,
)
from ganeti.client.jobs import WFJC_TIMEOUT, JobReporter, QuietReporter, opcode, poll_job
from ganeti.client.options import and_filters, make_simple_filter, parse_fields, parse_timespec
from ganeti.client.runner import run
from ganeti.client.tags import list_tags


class FakeClient:
    """Answers LUXI calls from a script and records them.

    C{answers[method]} is a value, a list of values given one per call
    (the last one repeats), or a function of the call's arguments.  An
    exception as a value is raised.
    """

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.closed = False

    def _answer(self, method: str, *args: Any) -> Any:
        self.calls.append((method, args))
        answer = self.answers.get(method)
        if isinstance(answer, list):
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
        if callable(answer) and not isinstance(answer, type):
            answer = answer(*args)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]

    def args(self, method: str) -> list[tuple[Any, ...]]:
        return [args for name, args in self.calls if name == method]

    def close(self) -> None:
        self.closed = True

    def submit_job(self, ops: list[dict[str, Any]]) -> Any:
        return self._answer("SubmitJob", ops)

    def wait_for_job_change(self, job_id: int, fields: list[str], prev: Any, serial: Any, timeout: float) -> Any:
        return self._answer("WaitForJobChange", job_id, fields, prev, serial, timeout)

    def query_jobs(self, job_ids: Any, fields: list[str]) -> Any:
        return self._answer("QueryJobs", job_ids, fields)

    def query(self, what: str, fields: list[str], qfilter: Any = None) -> Any:
        return self._answer("Query", what, fields, qfilter)

    def query_fields(self, what: str, fields: Any = None) -> Any:
        return self._answer("QueryFields", what, fields)

    def cancel_job(self, job_id: int, kill: bool = False) -> Any:
        return self._answer("CancelJob", job_id, kill)

    def change_job_priority(self, job_id: int, priority: int) -> Any:
        return self._answer("ChangeJobPriority", job_id, priority)

    def archive_job(self, job_id: int) -> Any:
        return self._answer("ArchiveJob", job_id)

    def auto_archive_jobs(self, age: float, timeout: float) -> Any:
        return self._answer("AutoArchiveJobs", age, timeout)

    def query_config_values(self, names: list[str]) -> Any:
        return self._answer("QueryConfigValues", names)

    def query_tags(self, kind: str, name: str) -> Any:
        return self._answer("QueryTags", kind, name)

    def set_drain_flag(self, flag: bool) -> Any:
        return self._answer("SetDrainFlag", flag)


def log(serial: int, message: str, sec: int = 1700000000, usec: int = 0, kind: str = "message") -> list[Any]:
    return [serial, [sec, usec], kind, message]


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make_ctx(fake: FakeClient | None = None, **opts: Any) -> tuple[Context, io.StringIO, io.StringIO]:
    import argparse

    out, err = io.StringIO(), io.StringIO()
    namespace = argparse.Namespace(**{"debug": 0, "reason": None, "root": None, **opts})
    ctx = Context("gnt-debug", "delay", namespace, out, err, (lambda c: fake) if fake else None)
    return ctx, out, err


# --- tables ----------------------------------------------------------------------
def test_table_pads_columns_and_right_aligns_numbers() -> None:
    rows = [["1", "success", "TEST_DELAY(1.0)"], ["10", "error", "GROUP_ADD(g)"]]
    lines = format_table(rows, ["ID", "Status", "Summary"], [True, False, False], None)
    assert lines == [
        "ID Status  Summary",
        " 1 success TEST_DELAY(1.0)",
        "10 error   GROUP_ADD(g)",
    ]


def test_table_last_column_is_not_padded_unless_right_aligned() -> None:
    assert format_table([["a", "x"], ["bbb", "yyyy"]], None, [False, False], None) == ["a   x", "bbb yyyy"]
    assert format_table([["a", "1"], ["bbb", "100"]], None, [False, True], None) == ["a     1", "bbb 100"]


def test_table_with_separator_joins_cells_as_they_are() -> None:
    rows = [["1", "a b"], ["22", ""]]
    assert format_table(rows, ["ID", "Name"], [True, False], ":") == ["ID:Name", "1:a b", "22:"]
    assert format_table(rows, None, [True, False], "%") == ["1%a b", "22%"]


def _response(fields: list[tuple[str, str, str]], data: list[list[list[Any]]]) -> dict[str, Any]:
    return {"fields": [{"name": n, "title": t, "kind": k, "doc": ""} for n, t, k in fields], "data": data}


def test_query_result_renders_cell_statuses() -> None:
    response = _response(
        [("name", "Node", "text"), ("mfree", "MFree", "unit"), ("foo", "foo", "unknown")],
        [
            [[0, "node1"], [2, None], [1, None]],
            [[0, "node2"], [3, None], [1, None]],
            [[0, "node3"], [4, None], [1, None]],
        ],
    )
    status, lines = format_query_result(response)
    assert status == QR_UNKNOWN
    assert lines == ["Node  MFree foo", "node1     ? ??", "node2     - ??", "node3     * ??"]
    _, lines = format_query_result(response, verbose=True, header=False, separator="|")
    assert lines == ["node1|(nodata)|(unknown)", "node2|(unavail)|(unknown)", "node3|(offline)|(unknown)"]


def test_query_result_status() -> None:
    fields = [("name", "Node", "text")]
    assert format_query_result(_response(fields, [[[0, "a"]]]))[0] == QR_NORMAL
    assert format_query_result(_response(fields, [[[2, None]]]))[0] == QR_INCOMPLETE
    unknown = [("nosuch", "nosuch", "unknown")]
    assert format_query_result(_response(unknown, []))[0] == QR_UNKNOWN


def test_query_result_formats_by_kind_and_units(utc: Any) -> None:
    response = _response(
        [
            ("name", "Name", "text"),
            ("mem", "Memory", "unit"),
            ("ok", "OK", "bool"),
            ("n", "N", "number"),
            ("ctime", "CTime", "timestamp"),
            ("tags", "Tags", "other"),
        ],
        [[[0, "x"], [0, 1536], [0, True], [0, 3], [0, 0], [0, ["a", "b"]]]],
    )
    _, lines = format_query_result(response, header=False)
    assert lines == ["x 1.5G Y 3 1970-01-01 00:00:00 ['a', 'b']"]
    _, lines = format_query_result(response, header=False, separator=",")
    assert lines[0].split(",")[:4] == ["x", "1536", "Y", "3"]
    _, lines = format_query_result(response, header=False, unit="g", overrides={"tags": (",".join, False)})
    assert lines == ["x 1.5 Y 3 1970-01-01 00:00:00 a,b"]


@pytest.mark.parametrize(
    "value,unit,text",
    [
        (512, "h", "512M"),
        (1023, "h", "1023M"),
        (1024, "h", "1.0G"),
        (1536, "h", "1.5G"),
        (2 * 1024 * 1024, "h", "2.0T"),
        (1536, "m", "1536"),
        (1536, "g", "1.5"),
        (3 * 1024 * 1024, "t", "3.0"),
        ("n/a", "h", "n/a"),
    ],
)
def test_format_unit(value: Any, unit: str, text: str) -> None:
    assert format_unit(value, unit) == text


def test_timestamps(utc: Any) -> None:
    assert format_timestamp([1700000000, 123456]) == "2023-11-14 22:13:20.123456"
    assert format_timestamp(None) == "?"
    assert format_timestamp([1]) == "?"
    assert format_time(None) == "N/A"
    assert format_time(1700000000) == "2023-11-14 22:13:20"


def test_log_messages_are_escaped() -> None:
    assert format_log_message("message", "plain text é") == "plain text é"
    assert format_log_message("message", "a\nb\tc\x01") == "a\\nb\\tc\\x01"
    assert format_log_message("remote-import", {"x": 1}) == "{'x': 1}"
    assert safe_encode("ok") == "ok"


def test_generic_info_layout() -> None:
    data = [
        [
            ("Job ID", 1),
            ("Received", "t1", "ts"),
            ("Processing start", "t2", "ts"),
            ("Opcodes", [[("Opcode", "OP_X"), ("Input fields", {"b": [], "a": 1}), ("Log", [])]]),
            ("Content", (1, "message", "hi")),
        ],
        "Job ID 5 not found",
    ]
    assert format_generic_info(data) == (
        "- Job ID: 1\n"
        "  Received:         t1\n"
        "  Processing start: t2\n"
        "  Opcodes: \n"
        "    - Opcode: OP_X\n"
        "      Input fields: \n"
        "        a: 1\n"
        "        b: \n"
        "      Log: \n"
        "  Content: [1, message, hi]\n"
        "- Job ID 5 not found"
    )


def test_generic_info_nested_lists() -> None:
    assert format_generic_info({"reason": [["src", "text", 1]]}) == "reason: \n  - - src\n    - text\n    - 1"


# --- small helpers -------------------------------------------------------------------
def test_parse_fields() -> None:
    assert parse_fields(None, ["a", "b"]) == ["a", "b"]
    assert parse_fields("c,d", ["a"]) == ["c", "d"]
    assert parse_fields("+c", ["a"]) == ["a", "c"]


@pytest.mark.parametrize("text,seconds", [("30", 30), ("30s", 30), ("5m", 300), ("2h", 7200), ("1d", 86400), ("1w", 604800)])
def test_parse_timespec(text: str, seconds: int) -> None:
    assert parse_timespec(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "1x", "-1", "1.5h"])
def test_parse_timespec_rejects(text: str) -> None:
    with pytest.raises(errors.OpPrereqError):
        parse_timespec(text)


def test_filters() -> None:
    assert make_simple_filter("id", []) is None
    assert make_simple_filter("id", [1, 2]) == ["|", ["==", "id", 1], ["==", "id", 2]]
    assert and_filters(None, None) is None
    assert and_filters(["?", "x"], None) == ["?", "x"]
    assert and_filters(["?", "x"], ["?", "y"]) == ["&", ["?", "x"], ["?", "y"]]


def test_opcode_carries_generic_options() -> None:
    ctx, _, _ = make_ctx(priority=-10, dry_run=True, reason="maintenance")
    ctx.opts.debug = 2
    before = time.time_ns()
    op = opcode(ctx, "OP_TEST_DELAY", duration=1.0)
    assert op["OP_ID"] == "OP_TEST_DELAY" and op["duration"] == 1.0
    assert (op["priority"], op["dry_run"], op["debug_level"]) == (-10, True, 2)
    (user, user_text, ts1), (source, command, ts2) = op["reason"]
    assert (user, user_text, source, command) == ("gnt:user", "maintenance", "gnt:client:gnt-debug", "delay")
    assert before <= ts1 == ts2 <= time.time_ns()


def test_opcode_defaults() -> None:
    ctx, _, _ = make_ctx()
    op = opcode(ctx, "OP_GROUP_REMOVE", group_name="g")
    assert op["priority"] == 0 and op["debug_level"] == 0 and "dry_run" not in op
    assert [entry[:2] for entry in op["reason"]] == [["gnt:client:gnt-debug", "delay"]]


def test_ask_user_without_a_terminal_takes_the_last_choice(tmp_path: Any) -> None:
    assert prompt.ask_user("Really?", tty=str(tmp_path / "missing")) is False
    assert prompt.ask_user("?", [("y", 1, "yes"), ("v", 2, "view")], tty=str(tmp_path / "missing")) == 2


# --- error texts ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "error,code,text",
    [
        (
            errors.OpPrereqError("Group 'g' already exists", "already_exists"),
            1,
            "Failure: prerequisites not met for this operation:\nerror type: already_exists, error details:\n"
            "Group 'g' already exists",
        ),
        (errors.OpPrereqError("bad"), 1, "Failure: prerequisites not met for this operation:\nbad"),
        (errors.OpExecError("boom"), 1, "Failure: command execution error:\nboom"),
        (errors.JobLost("Job with id 3 lost"), 1, "Error checking job status: Job with id 3 lost"),
        (errors.GenericError("Queue drained"), 1, "Unhandled Ganeti error: Queue drained"),
        (errors.ConfigurationError("bad"), 2, "Corrupt configuration file: bad\nAborting."),
        (errors.ParameterError("x"), 1, "Failure: unknown/wrong parameter name 'x'"),
        (JobCanceled("Job was canceled"), 1, "Unhandled Ganeti error: Job was canceled"),
        (JobSubmitted(17), 0, "JobID: 17"),
        (RemoteError("TagError", "Tag too long"), 1, "Failure: invalid tag(s) given:\nTag too long"),
        (
            RemoteError("JobQueueDrainError", "drained"),
            1,
            "Failure: the job queue is marked for drain and doesn't accept new requests",
        ),
        (
            errors.JobQueueFull(),
            1,
            "Failure: the job queue is full and doesn't accept new job submissions until old jobs are archived",
        ),
        (
            RemoteError("HooksAbort", [["node1", "script", "out"], ["node2", "s2", ""]]),
            1,
            "Failure: hooks execution failed:\n  node: node1, script: script, output: out\n"
            "  node: node2, script: s2 (no output)",
        ),
        (ValueError("odd"), 1, "Unhandled exception: odd"),
    ],
)
def test_format_error(error: BaseException, code: int, text: str) -> None:
    assert format_error(error) == (code, text)


def test_format_error_for_the_master_daemon() -> None:
    down = errors.LuxiError("cannot connect to the master daemon at /s: No such file or directory")
    code, text = format_error(down)
    assert code == 1
    assert text.startswith("Cannot communicate with the master daemon.\nIs the process running")
    assert "/s: No such file or directory" in text
    _, text = format_error(errors.LuxiError("Query timed out after 180s waiting for the master daemon at /s"))
    assert text.startswith("Timeout while talking to the master daemon.")
    _, text = format_error(errors.LuxiError("garbage"))
    assert text == "Unhandled protocol error while talking to the master daemon:\ngarbage"


def test_decode_error() -> None:
    exc = decode_error(["OpPrereqError", ["msg", "wrong_input"]])
    assert type(exc) is errors.OpPrereqError and exc.args == ("msg", "wrong_input")
    exc = decode_error(["TagError", ["bad tag"]])
    assert isinstance(exc, RemoteError) and exc.ganeti_name == "TagError" and exc.args == ("bad tag",)
    assert decode_error("plain text") is None
    assert decode_error(None) is None


# --- following a job -------------------------------------------------------------------
def _done(status: str = "success", opstatus: Any = None, opresult: Any = None) -> list[Any]:
    return [[status, opstatus or [status], opresult if opresult is not None else [None]]]


def test_poll_job_prints_each_log_entry_once_in_order(utc: Any) -> None:
    fake = FakeClient(
        WaitForJobChange=[
            [["queued"], []],
            "nochange",
            [["running"], [log(1, "first"), log(2, "second", usec=500000)]],
            [["running"], [log(2, "second"), log(3, "third")]],  # a repeated entry
            [["success"], []],
        ],
        QueryJobs=[_done(opresult=["result"])],
    )
    ctx, out, err = make_ctx(fake)
    assert poll_job(fake, 7, JobReporter(ctx)) == ["result"]
    assert out.getvalue() == (
        "Tue Nov 14 22:13:20 2023 first\nTue Nov 14 22:13:20 2023 second\nTue Nov 14 22:13:20 2023 third\n"
    )
    assert err.getvalue() == "Job 7 is waiting in queue\n"
    waits = fake.args("WaitForJobChange")
    assert [w[2:4] for w in waits] == [
        (None, None),
        (["queued"], None),
        (["queued"], None),
        (["running"], 2),
        (["running"], 3),
    ]
    assert all(w[0] == 7 and w[1] == ["status"] and w[4] == WFJC_TIMEOUT for w in waits)
    assert fake.args("QueryJobs") == [([7], ["status", "opstatus", "opresult"])]


def test_poll_job_reads_logs_arriving_with_the_final_status() -> None:
    fake = FakeClient(
        WaitForJobChange=[[["success"], [log(1, "last words")]], [["success"], []]],
        QueryJobs=[_done()],
    )
    ctx, out, _ = make_ctx(fake)
    poll_job(fake, 1, JobReporter(ctx))
    assert out.getvalue().endswith(" last words\n")
    assert len(fake.args("WaitForJobChange")) == 2


def test_poll_job_reports_waiting_once_for_unchanged_answers() -> None:
    fake = FakeClient(
        WaitForJobChange=[[["waiting"], []], [["waiting"], []], [["waiting"], []], [["error"], []]],
        QueryJobs=[_done("error", ["error"], [["OpExecError", ["it broke"]]])],
    )
    ctx, _, err = make_ctx(fake)
    with pytest.raises(errors.OpExecError) as caught:
        poll_job(fake, 4, JobReporter(ctx))
    assert caught.value.args == ("it broke",)
    assert err.getvalue() == "Job 4 is trying to acquire all necessary locks\n"


def test_poll_job_raises_the_decoded_opcode_error() -> None:
    fake = FakeClient(
        WaitForJobChange=[[["error"], []]],
        QueryJobs=[_done("error", ["error"], [["OpPrereqError", ["exists", "already_exists"]]])],
    )
    ctx, _, _ = make_ctx(fake)
    with pytest.raises(errors.OpPrereqError) as caught:
        poll_job(fake, 1, JobReporter(ctx))
    assert caught.value.args == ("exists", "already_exists")


def test_poll_job_partial_failure_and_plain_results() -> None:
    fake = FakeClient(
        WaitForJobChange=[[["error"], []]],
        QueryJobs=[_done("error", ["success", "error", "error"], [None, "disk gone", "disk gone"])],
    )
    ctx, _, _ = make_ctx(fake)
    with pytest.raises(errors.OpExecError, match=r"^partial failure \(opcode 1\): disk gone$"):
        poll_job(fake, 1, JobReporter(ctx))
    fake = FakeClient(WaitForJobChange=[[["error"], []]], QueryJobs=[_done("error", ["error"], ["plain"])])
    with pytest.raises(errors.OpExecError, match="^plain$"):
        poll_job(fake, 1, JobReporter(ctx))


def test_poll_job_canceled_and_lost() -> None:
    ctx, _, _ = make_ctx()
    fake = FakeClient(WaitForJobChange=[[["canceled"], []]], QueryJobs=[_done("canceled", ["canceled"])])
    with pytest.raises(JobCanceled):
        poll_job(fake, 1, JobReporter(ctx))
    fake = FakeClient(WaitForJobChange=[[["success"], []]], QueryJobs=[[None]])
    with pytest.raises(errors.JobLost, match="Job with id 1 lost"):
        poll_job(fake, 1, JobReporter(ctx))
    fake = FakeClient(WaitForJobChange=[None])
    with pytest.raises(errors.JobLost):
        poll_job(fake, 1, JobReporter(ctx))
    fake = FakeClient(WaitForJobChange=[errors.JobLost("Job 1 not found")])
    with pytest.raises(errors.JobLost):
        poll_job(fake, 1, JobReporter(ctx))


def test_quiet_reporter_prints_nothing() -> None:
    fake = FakeClient(WaitForJobChange=[[["queued"], []], "nochange", [["success"], [log(1, "x")]], [["success"], []]],
                      QueryJobs=[_done()])
    ctx, out, err = make_ctx(fake)
    poll_job(fake, 1, QuietReporter(ctx))
    assert out.getvalue() == err.getvalue() == ""


# --- the runner ----------------------------------------------------------------------
def _hello(ctx: Context, opts: Any) -> int:
    ctx.out("hello %s root=%s" % (" ".join(opts.names), ctx.root))
    return 3


def _setup_hello(parser: Any) -> None:
    parser.add_argument("names", nargs="*")


TOOL = {
    "hello": Command(_hello, _setup_hello, "Say hello"),
    "lazy": Command("tests.unit.test_cli:_hello", _setup_hello, "Say hello, imported late"),
    "fail": Command(lambda ctx, opts: (_ for _ in ()).throw(errors.OpExecError("nope")), None, "Fail"),
    "interrupt": Command(lambda ctx, opts: (_ for _ in ()).throw(KeyboardInterrupt()), None, "Interrupt"),
    "quiet": Command(lambda ctx, opts: None, None, "Return nothing"),
}


def run_tool(*argv: str, **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run("gnt-test", TOOL, list(argv), stdout=out, stderr=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def test_run_dispatches_and_returns_the_status() -> None:
    assert run_tool("hello", "a", "b") == (3, "hello a b root=None\n", "")
    assert run_tool("lazy", "x")[:2] == (3, "hello x root=None\n")
    assert run_tool("quiet") == (0, "", "")


def test_run_global_root_before_or_after_the_command() -> None:
    assert run_tool("--root", "/r1", "hello")[1] == "hello  root=/r1\n"
    assert run_tool("--root=/r2", "hello")[1] == "hello  root=/r2\n"
    assert run_tool("hello", "--root", "/r3", "x")[1] == "hello x root=/r3\n"
    assert run_tool("--root", "/r1", "hello", "--root=/r4")[1] == "hello  root=/r4\n"


def test_run_usage() -> None:
    code, out, err = run_tool()
    assert code == 2 and out == "" and "Usage: gnt-test {command}" in err and " hello     - Say hello" in err
    code, out, err = run_tool("--help")
    assert code == 0 and err == "" and out.startswith("Usage: gnt-test {command} [options...] [argument...]\n")
    code, out, err = run_tool("nosuch")
    assert code == 2 and "unknown command 'nosuch'" in err
    code, out, err = run_tool("hello", "--bogus")
    assert code == 2 and "unrecognized arguments: --bogus" in err and out == ""
    code, out, err = run_tool("hello", "--help")
    assert code == 0 and out.startswith("usage: gnt-test hello") and "--root DIR" in out
    code, out, _ = run_tool("--version")
    assert code == 0 and out.startswith("gnt-test (ganeti-twisted ")


def test_run_prints_errors_the_ganeti_way() -> None:
    assert run_tool("fail") == (1, "", "Failure: command execution error:\nnope\n")
    code, _, err = run_tool("interrupt")
    assert code == 1 and err.startswith("Aborted. Note that if the operation created any jobs")


def test_run_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNT_TEST_HELLO", "--root /env 'a b'")
    out, err = io.StringIO(), io.StringIO()
    run("gnt-test", TOOL, ["hello", "c"], env_override={"hello"}, stdout=out, stderr=err)
    assert out.getvalue() == "hello a b c root=/env\n"
    assert run_tool("hello", "c")[1] == "hello c root=None\n"


def test_run_closes_the_client() -> None:
    fake = FakeClient(QueryTags=["x"])
    tool = {"tags": Command(lambda ctx, opts: list_tags(ctx, "cluster", ""), None, "Tags")}
    out = io.StringIO()
    assert run("gnt-test", tool, ["tags"], client_factory=lambda ctx: fake, stdout=out) == 0
    assert fake.closed and out.getvalue() == "x\n"


def test_help_formatter_keeps_paragraphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    tool = {"x": Command(lambda ctx, opts: 0, None, "First line.", "Second paragraph " * 8)}
    out = io.StringIO()
    assert run("gnt-test", tool, ["x", "--help"], stdout=out) == 0
    text = out.getvalue()
    assert "First line.\n\nSecond paragraph" in text
    assert max(len(line) for line in text.splitlines()) <= 58


def test_default_client_uses_the_root(tmp_path: Any) -> None:
    ctx, _, _ = make_ctx()
    ctx.opts.root = str(tmp_path)
    client = ctx.client()
    assert client.address == os.path.join(str(tmp_path), "var", "run", "ganeti", "socket", "ganeti-query")
    ctx.close()
