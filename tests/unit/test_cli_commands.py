"""gnt-job, gnt-debug, gnt-cluster and gnt-group: option parsing, the LUXI
calls and opcodes each command makes (against a fake client), and what it
prints."""

from __future__ import annotations

import io
import os
import tempfile
from types import ModuleType
from typing import Any

import pytest

from ganeti import errors
from ganeti.client import gnt_cluster, gnt_debug, gnt_group, gnt_job, prompt, runner
from tests.unit.test_cli import FakeClient, log, utc  # noqa: F401  (utc is a fixture)

TOOLS: dict[str, ModuleType] = {
    "gnt-job": gnt_job,
    "gnt-debug": gnt_debug,
    "gnt-cluster": gnt_cluster,
    "gnt-group": gnt_group,
}


class NoClient(FakeClient):
    """Fails the test when a command talks to the master daemon."""

    def _answer(self, method: str, *args: Any) -> Any:
        raise AssertionError("unexpected LUXI call %s%r" % (method, args))


def gnt(tool: str, *argv: str, fake: FakeClient | None = None) -> tuple[int, str, str]:
    """Run C{tool argv} against C{fake}; without a C{--root}, on an empty
    temporary root (never the host's /: its epoch file, its commands.log)."""
    out, err = io.StringIO(), io.StringIO()
    module = TOOLS[tool]
    client = fake if fake is not None else NoClient()
    extra = {"env_override": {"list"}} if tool == "gnt-group" else {}
    with tempfile.TemporaryDirectory(prefix="gntcli") as empty:
        if not any(arg == "--root" or arg.startswith("--root=") for arg in argv):
            argv = ("--root", empty) + argv
        code = runner.run(
            tool, module.COMMANDS, list(argv), aliases=getattr(module, "ALIASES", None),
            client_factory=lambda ctx: client, stdout=out, stderr=err, **extra,
        )
    return code, out.getvalue(), err.getvalue()


def following(job_id: int = 17, status: str = "success", opresult: Any = None, logs: Any = ()) -> FakeClient:
    """A client that accepts a job and reports it ending with C{status}."""
    return FakeClient(
        SubmitJob=job_id,
        WaitForJobChange=[[["running"], list(logs)], [[status], []]],
        QueryJobs=[[[status, [status], [opresult]]]],
    )


def submitted_op(fake: FakeClient) -> dict[str, Any]:
    ((ops,),) = fake.args("SubmitJob")
    assert len(ops) == 1
    return ops[0]


# --- help everywhere -------------------------------------------------------------------
@pytest.mark.parametrize(
    "tool,command",
    [(tool, command) for tool, module in TOOLS.items() for command in module.COMMANDS],
)
def test_every_command_has_help(tool: str, command: str) -> None:
    code, out, err = gnt(tool, command, "--help")
    assert code == 0 and err == ""
    assert out.startswith("usage: %s %s" % (tool, command))
    assert TOOLS[tool].COMMANDS[command].help.split()[0] in out
    assert "--root DIR" in out


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_lists_its_commands(tool: str) -> None:
    code, out, _ = gnt(tool, "--help")
    assert code == 0
    for command in TOOLS[tool].COMMANDS:
        assert "\n %s " % command in out


@pytest.mark.parametrize(
    "argv",
    [
        ("gnt-debug", "delay"),
        ("gnt-debug", "delay", "abc"),
        ("gnt-debug", "delay", "-1"),
        ("gnt-debug", "delay", "1", "2"),
        ("gnt-debug", "delay", "--repeat", "x", "1"),
        ("gnt-debug", "delay", "--priority", "urgent", "1"),
        ("gnt-debug", "locks", "extra"),
        ("gnt-debug", "locks", "--interval", "soon"),
        ("gnt-job", "list", "abc"),
        ("gnt-job", "info", "-3"),
        ("gnt-job", "watch"),
        ("gnt-job", "watch", "1", "2"),
        ("gnt-job", "archive"),
        ("gnt-job", "cancel"),
        ("gnt-job", "cancel", "--pending", "3"),
        ("gnt-job", "change-priority", "3"),
        ("gnt-job", "change-priority", "--priority", "top", "3"),
        ("gnt-job", "autoarchive", "soon"),
        ("gnt-cluster", "queue"),
        ("gnt-cluster", "queue", "flush"),
        ("gnt-cluster", "add-tags"),
        ("gnt-cluster", "remove-tags", "--submit"),
        ("gnt-cluster", "list-tags", "x"),
        ("gnt-group", "add"),
        ("gnt-group", "add", "--alloc-policy", "sometimes", "g"),
        ("gnt-group", "rename", "g"),
        ("gnt-group", "remove", "a", "b"),
        ("gnt-group", "add-tags", "g"),
        ("gnt-group", "nosuch"),
    ],
)
def test_bad_usage_exits_2_without_talking_to_the_master(argv: tuple[str, ...]) -> None:
    code, out, err = gnt(*argv)
    assert code == 2, (code, out, err)
    assert err and out == ""


# --- gnt-debug delay ---------------------------------------------------------------------
def test_delay_submits_test_delay_and_follows_it(utc: Any) -> None:
    fake = following(logs=[log(1, " - INFO: Test delay iteration 0/1"), log(2, " - INFO: Test delay iteration 1/1")])
    code, out, err = gnt("gnt-debug", "delay", "--repeat", "2", "0.5", fake=fake)
    assert (code, err) == (0, "")
    assert out == (
        "Tue Nov 14 22:13:20 2023  - INFO: Test delay iteration 0/1\n"
        "Tue Nov 14 22:13:20 2023  - INFO: Test delay iteration 1/1\n"
    )
    op = submitted_op(fake)
    assert {k: op[k] for k in ("OP_ID", "duration", "on_master", "on_nodes", "repeat", "priority", "dry_run")} == {
        "OP_ID": "OP_TEST_DELAY",
        "duration": 0.5,
        "on_master": True,
        "on_nodes": [],
        "repeat": 2,
        "priority": 0,
        "dry_run": False,
    }
    ((source, command, stamp),) = op["reason"]
    assert (source, command) == ("gnt:client:gnt-debug", "delay") and isinstance(stamp, int)
    assert fake.methods() == ["SubmitJob", "WaitForJobChange", "WaitForJobChange", "QueryJobs"]


def test_delay_options() -> None:
    fake = following()
    code, _, _ = gnt(
        "gnt-debug", "delay", "--no-master", "-n", "node2", "-n", "node3", "--priority", "high",
        "--dry-run", "--reason", "testing", "-d", "0.001", fake=fake,
    )
    assert code == 0
    op = submitted_op(fake)
    assert (op["on_master"], op["on_nodes"], op["priority"], op["dry_run"], op["debug_level"]) == (
        False, ["node2", "node3"], -10, True, 1,
    )
    assert [entry[:2] for entry in op["reason"]] == [["gnt:user", "testing"], ["gnt:client:gnt-debug", "delay"]]
    fake = following()
    gnt("gnt-debug", "delay", "--priority", "low", "1", fake=fake)
    assert submitted_op(fake)["priority"] == 10
    # as Ganeti's client: locks by default, --no-locks; --interruptible
    assert (submitted_op(fake)["no_locks"], submitted_op(fake)["interruptible"]) == (False, False)
    fake = following()
    gnt("gnt-debug", "delay", "-i", "--no-locks", "1", fake=fake)
    assert (submitted_op(fake)["no_locks"], submitted_op(fake)["interruptible"]) == (True, True)


def test_delay_submit_prints_the_job_id_and_does_not_wait() -> None:
    fake = FakeClient(SubmitJob=42)
    assert gnt("gnt-debug", "delay", "--submit", "10", fake=fake) == (0, "", "JobID: 42\n")
    assert fake.methods() == ["SubmitJob"]
    fake = FakeClient(SubmitJob=43)
    assert gnt("gnt-debug", "delay", "--submit", "--print-jobid", "10", fake=fake) == (0, "43\n", "JobID: 43\n")


def test_delay_print_jobid_while_following() -> None:
    fake = following(job_id=9)
    assert gnt("gnt-debug", "delay", "--print-jobid", "0", fake=fake) == (0, "9\n", "")


def test_delay_failure_prints_the_decoded_error() -> None:
    fake = following(status="error", opresult=["OpPrereqError", ["Interruptible test delays are not supported", "wrong_input"]])
    code, out, err = gnt("gnt-debug", "delay", "1", fake=fake)
    assert code == 1 and out == ""
    assert err == (
        "Failure: prerequisites not met for this operation:\n"
        "error type: wrong_input, error details:\n"
        "Interruptible test delays are not supported\n"
    )


def test_delay_on_a_drained_queue() -> None:
    fake = FakeClient(SubmitJob=errors.JobQueueDrainError("Queue drained"))
    code, _, err = gnt("gnt-debug", "delay", "1", fake=fake)
    assert code == 1 and "marked for drain" in err


def test_luxid_down_is_a_clear_error(tmp_path: Any) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = runner.run("gnt-debug", gnt_debug.COMMANDS, ["--root", str(tmp_path), "delay", "0"], stdout=out, stderr=err)
    assert code == 1 and out.getvalue() == ""
    text = err.getvalue()
    assert text.startswith("Cannot communicate with the master daemon.\nIs the process running and listening")
    assert os.path.join(str(tmp_path), "var/run/ganeti/socket/ganeti-query") in text


def test_main_uses_sys_argv(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setattr("sys.argv", ["gnt-debug", "--help"])
    assert gnt_debug.main() == 0
    assert "delay" in capsys.readouterr().out


# --- gnt-debug locks ---------------------------------------------------------------------
LOCKS = {
    "fields": [
        {"name": "name", "title": "Name", "kind": "other", "doc": ""},
        {"name": "mode", "title": "Mode", "kind": "other", "doc": ""},
        {"name": "owner", "title": "Owner", "kind": "other", "doc": ""},
        {"name": "pending", "title": "Pending", "kind": "other", "doc": ""},
    ],
    "data": [
        [[0, "cluster/BGL"], [0, "shared"], [0, ["17", "18"]], [0, [["exclusive", ["19"]]]]],
        [[0, "node/abc"], [0, None], [0, []], [0, [["shared", ["20", "21"]], ["exclusive", ["22"]]]]],
    ],
}


def test_locks_table() -> None:
    fake = FakeClient(Query=LOCKS)
    code, out, err = gnt("gnt-debug", "locks", fake=fake)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "Name        Mode   Owner Pending",
        "cluster/BGL shared 17,18 exclusive:19",
        "node/abc    -      -     shared:20,21, exclusive:22",
    ]
    assert fake.args("Query") == [("lock", ["name", "mode", "owner", "pending"], None)]


def test_locks_output_options() -> None:
    fake = FakeClient(Query=LOCKS)
    code, out, _ = gnt("gnt-debug", "locks", "--no-headers", "--separator=|", "-o", "name,owner", fake=fake)
    assert code == 0 and out == "cluster/BGL|shared|17,18|exclusive:19\nnode/abc|-|-|shared:20,21, exclusive:22\n"
    assert fake.args("Query")[0][1] == ["name", "owner"]


# --- gnt-job list / list-fields ------------------------------------------------------------
def _jobs_response(rows: list[list[Any]], fields: tuple[str, ...] = ("id", "status", "summary")) -> dict[str, Any]:
    kinds = {"id": ("ID", "number"), "status": ("Status", "text"), "summary": ("Summary", "other"),
             "priority": ("Priority", "number"), "received_ts": ("Received", "other"),
             "foo": ("foo", "unknown")}
    return {
        "fields": [{"name": f, "title": kinds[f][0], "kind": kinds[f][1], "doc": ""} for f in fields],
        "data": rows,
    }


JOB_ROWS = [
    [[0, 1], [0, "success"], [0, ["TEST_DELAY(1.0)"]]],
    [[0, 12], [0, "running"], [0, ["GROUP_ADD(g)", "TAGS_SET"]]],
    [[0, 99], [3, None], [3, None]],
]


def test_job_list() -> None:
    fake = FakeClient(Query=_jobs_response(JOB_ROWS))
    code, out, err = gnt("gnt-job", "list", fake=fake)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "ID Status  Summary",
        " 1 success TEST_DELAY(1.0)",
        "12 running GROUP_ADD(g),TAGS_SET",
        "99 -       -",
    ]
    assert fake.args("Query") == [("job", ["id", "status", "summary"], None)]


def test_job_list_filters() -> None:
    fake = FakeClient(Query=_jobs_response([]))
    gnt("gnt-job", "list", "3", "4", fake=fake)
    assert fake.args("Query")[-1][2] == ["|", ["==", "id", 3], ["==", "id", 4]]
    gnt("gnt-job", "list", "--running", "--error", fake=fake)
    assert fake.args("Query")[-1][2] == ["|", ["==", "status", "running"], ["==", "status", "error"]]
    gnt("gnt-job", "list", "--finished", "7", fake=fake)
    assert fake.args("Query")[-1][2] == [
        "&",
        ["|", ["==", "id", 7]],
        ["|", ["==", "status", "canceled"], ["==", "status", "success"], ["==", "status", "error"]],
    ]
    gnt("gnt-job", "list", "--pending", "--archived", "-o", "+priority", fake=fake)
    what, fields, qfilter = fake.args("Query")[-1]
    assert fields == ["id", "status", "summary", "priority", "archived"]
    assert qfilter == ["|", ["==", "status", "queued"], ["==", "status", "waiting"], ["==", "status", "canceling"]]


def test_job_list_output_options(utc: Any) -> None:
    rows = [[[0, 5], [0, "error"], [0, -10], [0, [1700000000, 5]]]]
    fake = FakeClient(Query=_jobs_response(rows, ("id", "status", "priority", "received_ts")))
    code, out, _ = gnt("gnt-job", "list", "--no-headers", "--separator=:", "-o", "id,status,priority,received_ts", fake=fake)
    assert code == 0 and out == "5:error:-10:2023-11-14 22:13:20.000005\n"


def test_job_list_unknown_field_exits_14() -> None:
    fake = FakeClient(Query=_jobs_response([[[0, 1], [1, None]]], ("id", "foo")))
    code, out, err = gnt("gnt-job", "list", "-o", "id,foo", fake=fake)
    assert code == 14
    assert err == "Warning: Queried for unknown fields foo\n"
    assert out.splitlines() == ["ID foo", " 1 ??"]


def test_job_list_fields() -> None:
    fake = FakeClient(QueryFields={"fields": [
        {"name": "id", "title": "ID", "kind": "number", "doc": "Job ID"},
        {"name": "end_ts", "title": "End", "kind": "other", "doc": "Timestamp of job end"},
    ]})
    code, out, _ = gnt("gnt-job", "list-fields", fake=fake)
    assert code == 0
    assert out.splitlines() == [
        "Name   Type   Title Description",
        "id     Number ID    Job ID",
        "end_ts Custom End   Timestamp of job end",
    ]
    gnt("gnt-job", "list-fields", "--no-headers", "--separator=|", "id", fake=fake)
    assert fake.args("QueryFields")[-1] == ("job", ["id"])


# --- gnt-job info ----------------------------------------------------------------------------
def test_job_info(utc: Any) -> None:
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 1.0, "on_nodes": []}
    row = [
        [0, 3], [0, "error"], [0, [op]], [0, [["OpExecError", ["boom"]]]], [0, ["error"]],
        [0, [[log(1, "hello", usec=250000)]]], [0, [[1700000000, 0]]], [0, [[1700000000, 100]]], [0, [None]],
        [0, [1700000000, 0]], [0, [1700000000, 500000]], [0, None],
    ]
    missing = [[0, 4]] + [[3, None]] * 11
    fake = FakeClient(Query={"fields": [], "data": [row, missing]})
    code, out, _ = gnt("gnt-job", "show", "3", "4", fake=fake)
    assert code == 0
    assert out == (
        "- Job ID: 3\n"
        "  Status: error\n"
        "  Received:         2023-11-14 22:13:20.000000\n"
        "  Processing start: 2023-11-14 22:13:20.500000 (delta 0.500000s)\n"
        "  Processing end:   unknown (None)\n"
        "  Total processing time: N/A\n"
        "  Opcodes: \n"
        "    - Opcode: OP_TEST_DELAY\n"
        "      Status: error\n"
        "      Processing start: 2023-11-14 22:13:20.000000\n"
        "      Execution start:  2023-11-14 22:13:20.000100\n"
        "      Processing end:   N/A\n"
        "      Input fields: \n"
        "        OP_ID: OP_TEST_DELAY\n"
        "        duration: 1.0\n"
        "        on_nodes: \n"
        "      Result: \n"
        "        - OpExecError\n"
        "        - - boom\n"
        "      Execution log: \n"
        "        - Time: 2023-11-14 22:13:20.250000\n"
        "          Content: [1, message, hello]\n"
        "- Job ID 4 not found\n"
    )
    what, fields, qfilter = fake.args("Query")[0]
    assert what == "job" and qfilter == ["|", ["==", "id", 3], ["==", "id", 4]]
    assert fields[:2] == ["id", "status"] and "oplog" in fields


# --- gnt-job watch / wait --------------------------------------------------------------------
def test_job_watch(utc: Any) -> None:
    fake = FakeClient(WaitForJobChange=[[["running"], [log(1, "working")]], [["success"], []]],
                      QueryJobs=[[["success", ["success"], [None]]]])
    code, out, err = gnt("gnt-job", "watch", "5", fake=fake)
    assert (code, err) == (0, "")
    assert out == "Output from job 5 follows\n-------------------------\nTue Nov 14 22:13:20 2023 working\n"
    assert fake.args("WaitForJobChange")[0][0] == 5


def test_job_watch_failure() -> None:
    fake = FakeClient(WaitForJobChange=[[["error"], []]],
                      QueryJobs=[[["error", ["error"], [["OpExecError", ["disk failed"]]]]]])
    code, _, err = gnt("gnt-job", "watch", "5", fake=fake)
    assert code == 1
    assert err == "Job 5 failed: Failure: command execution error:\ndisk failed\n"


def test_job_wait_is_quiet() -> None:
    fake = FakeClient(WaitForJobChange=[[["running"], [log(1, "x")]], [["success"], []]],
                      QueryJobs=[[["success", ["success"], [None]]]])
    assert gnt("gnt-job", "wait", "5", fake=fake) == (0, "", "")
    fake = FakeClient(WaitForJobChange=[errors.JobLost("Job 5 not found")])
    code, _, err = gnt("gnt-job", "wait", "5", fake=fake)
    assert code == 1 and err == "Job 5 failed: Error checking job status: Job 5 not found\n"


# --- gnt-job cancel / change-priority / archive ----------------------------------------------
def test_job_cancel_ids() -> None:
    answers = {3: [True, "Job 3 canceled"], 4: [False, "Job 4 is running, it cannot be canceled"]}
    fake = FakeClient(CancelJob=lambda job_id, kill: answers[job_id])
    code, out, _ = gnt("gnt-job", "cancel", "3", "4", fake=fake)
    assert code == 1
    assert out == "Job 3 canceled\nJob 4 is running, it cannot be canceled\n"
    assert fake.args("CancelJob") == [(3, False), (4, False)]
    fake = FakeClient(CancelJob=[[True, "Job 3 canceled"]])
    assert gnt("gnt-job", "cancel", "3", fake=fake)[0] == 0


def test_job_cancel_by_status_with_force() -> None:
    fake = FakeClient(Query=_jobs_response(JOB_ROWS[:2]), CancelJob=[[True, "ok"]])
    code, out, _ = gnt("gnt-job", "cancel", "--queued", "--waiting", "--force", fake=fake)
    assert code == 0 and out == "ok\nok\n"
    assert fake.args("Query") == [
        ("job", ["id", "status", "summary"], ["|", ["==", "status", "queued"], ["==", "status", "waiting"]])
    ]
    assert fake.args("CancelJob") == [(1, False), (12, False)]


def test_job_cancel_by_status_asks_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompt, "ask_user", lambda question: False)
    fake = FakeClient(Query=_jobs_response(JOB_ROWS[:1]))
    code, out, _ = gnt("gnt-job", "cancel", "--pending", fake=fake)
    assert code == 13 and out.splitlines()[0] == "ID Status  Summary"
    assert "CancelJob" not in fake.methods()


def test_job_cancel_by_status_without_matches() -> None:
    fake = FakeClient(Query=_jobs_response([]))
    code, _, err = gnt("gnt-job", "cancel", "--pending", "--force", fake=fake)
    assert code == 1 and "No jobs with the requested status have been found" in err


def test_job_kill_needs_confirmation() -> None:
    code, _, err = gnt("gnt-job", "cancel", "--kill", "3")
    assert code == 1 and "--yes-do-it" in err
    fake = FakeClient(CancelJob=[[True, "Job 3 will be killed"]])
    assert gnt("gnt-job", "cancel", "--kill", "--yes-do-it", "3", fake=fake)[0] == 0
    assert fake.args("CancelJob") == [(3, True)]


def test_job_change_priority() -> None:
    fake = FakeClient(ChangeJobPriority=[[True, "Priority of job 3 changed to -10"]])
    code, out, _ = gnt("gnt-job", "change-priority", "--priority", "high", "3", fake=fake)
    assert (code, out) == (0, "Priority of job 3 changed to -10\n")
    assert fake.args("ChangeJobPriority") == [(3, -10)]


def test_job_archive() -> None:
    fake = FakeClient(ArchiveJob=lambda job_id: job_id != 9)
    code, out, err = gnt("gnt-job", "archive", "3", "9", fake=fake)
    assert (code, out, err) == (1, "", "Failed to archive job with ID '9'\n")
    assert fake.args("ArchiveJob") == [(3,), (9,)]


@pytest.mark.parametrize("age,seconds", [("all", -1), ("1d", 86400), ("3600", 3600)])
def test_job_autoarchive(age: str, seconds: int) -> None:
    fake = FakeClient(AutoArchiveJobs=[[5, 0]])
    assert gnt("gnt-job", "autoarchive", age, fake=fake) == (0, "Archived 5 jobs, 0 unchecked left\n", "")
    assert fake.args("AutoArchiveJobs") == [(seconds, 89)]


# --- gnt-cluster ----------------------------------------------------------------------------
def test_cluster_queue() -> None:
    fake = FakeClient(SetDrainFlag=True, QueryConfigValues=[[True], [False]])
    assert gnt("gnt-cluster", "queue", "drain", fake=fake) == (0, "", "")
    assert gnt("gnt-cluster", "queue", "undrain", fake=fake) == (0, "", "")
    assert fake.args("SetDrainFlag") == [(True,), (False,)]
    assert gnt("gnt-cluster", "queue", "info", fake=fake)[1] == "The drain flag is set\n"
    assert gnt("gnt-cluster", "queue", "info", fake=fake)[1] == "The drain flag is unset\n"
    assert fake.args("QueryConfigValues")[0] == (["drain_flag"],)


def test_cluster_tags(tmp_path: Any) -> None:
    fake = FakeClient(QueryTags=[["zeta", "alpha"]])
    assert gnt("gnt-cluster", "list-tags", fake=fake) == (0, "alpha\nzeta\n", "")
    assert fake.args("QueryTags") == [("cluster", "")]
    fake = following()
    assert gnt("gnt-cluster", "add-tags", "a", "b:c", fake=fake)[0] == 0
    op = submitted_op(fake)
    assert (op["OP_ID"], op["kind"], op["name"], op["tags"]) == ("OP_TAGS_SET", "cluster", "", ["a", "b:c"])
    source = tmp_path / "tags"
    source.write_text("x\n y \n")
    fake = following()
    assert gnt("gnt-cluster", "remove-tags", "--from", str(source), "a", fake=fake)[0] == 0
    op = submitted_op(fake)
    assert (op["OP_ID"], op["tags"]) == ("OP_TAGS_DEL", ["a", "x", "y"])
    fake = FakeClient(SubmitJob=5)
    assert gnt("gnt-cluster", "add-tags", "--submit", "t", fake=fake) == (0, "", "JobID: 5\n")


def test_cluster_bad_tag() -> None:
    fake = following(status="error", opresult=["TagError", ["Tag contains invalid characters"]])
    code, _, err = gnt("gnt-cluster", "add-tags", "bad tag", fake=fake)
    assert (code, err) == (1, "Failure: invalid tag(s) given:\nTag contains invalid characters\n")


def test_cluster_tags_from_an_empty_file(tmp_path: Any) -> None:
    source = tmp_path / "tags"
    source.write_text("")
    code, _, err = gnt("gnt-cluster", "add-tags", "--from", str(source))
    assert code == 1 and "No tags to be added" in err


# --- gnt-group ------------------------------------------------------------------------------
def test_group_add_remove_rename() -> None:
    fake = following()
    assert gnt("gnt-group", "add", "--alloc-policy", "last_resort", "g2", fake=fake) == (0, "", "")
    op = submitted_op(fake)
    assert (op["OP_ID"], op["group_name"], op["alloc_policy"]) == ("OP_GROUP_ADD", "g2", "last_resort")
    assert op["reason"][0][:2] == ["gnt:client:gnt-group", "add"]
    fake = following()
    gnt("gnt-group", "add", "g3", fake=fake)
    assert "alloc_policy" not in submitted_op(fake)
    fake = following()
    gnt("gnt-group", "remove", "g2", fake=fake)
    op = submitted_op(fake)
    assert (op["OP_ID"], op["group_name"]) == ("OP_GROUP_REMOVE", "g2")
    fake = following()
    gnt("gnt-group", "rename", "--dry-run", "g2", "g4", fake=fake)
    op = submitted_op(fake)
    assert (op["OP_ID"], op["group_name"], op["new_name"], op["dry_run"]) == ("OP_GROUP_RENAME", "g2", "g4", True)


def test_group_add_existing() -> None:
    message = "Desired group name 'g2' already exists as a node group (UUID: 1234)"
    fake = following(status="error", opresult=["OpPrereqError", [message, "already_exists"]])
    code, out, err = gnt("gnt-group", "add", "g2", fake=fake)
    assert (code, out) == (1, "")
    assert err == (
        "Failure: prerequisites not met for this operation:\nerror type: already_exists, error details:\n%s\n" % message
    )


def test_group_submit() -> None:
    fake = FakeClient(SubmitJob=8)
    assert gnt("gnt-group", "remove", "--submit", "g", fake=fake) == (0, "", "JobID: 8\n")


GROUPS = {
    "fields": [
        {"name": "name", "title": "Group", "kind": "text", "doc": ""},
        {"name": "node_cnt", "title": "Nodes", "kind": "number", "doc": ""},
        {"name": "pinst_cnt", "title": "Instances", "kind": "number", "doc": ""},
        {"name": "alloc_policy", "title": "AllocPolicy", "kind": "text", "doc": ""},
        {"name": "ndparams", "title": "NDParams", "kind": "other", "doc": ""},
    ],
    "data": [
        [[0, "default"], [0, 3], [0, 12], [0, "preferred"], [0, {"ssh_port": 22, "spindle_count": 1}]],
        [[0, "g2"], [0, 0], [0, 0], [0, "last_resort"], [0, {}]],
    ],
}


def test_group_list() -> None:
    fake = FakeClient(Query=GROUPS)
    code, out, _ = gnt("gnt-group", "list", fake=fake)
    assert code == 0
    assert out.splitlines() == [
        "Group   Nodes Instances AllocPolicy NDParams",
        "default     3        12 preferred   ssh_port=22, spindle_count=1",
        "g2          0         0 last_resort (empty)",
    ]
    assert fake.args("Query") == [("group", ["name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"], None)]
    gnt("gnt-group", "list", "--no-headers", "-o", "name", "default", "g2", fake=fake)
    assert fake.args("Query")[-1] == ("group", ["name"], ["|", ["==", "name", "default"], ["==", "name", "g2"]])


def test_group_list_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNT_GROUP_LIST", "--no-headers --separator=,")
    fake = FakeClient(Query=GROUPS)
    code, out, _ = gnt("gnt-group", "list", fake=fake)
    assert code == 0 and out.splitlines()[0] == "default,3,12,preferred,ssh_port=22, spindle_count=1"


def test_group_tags() -> None:
    fake = FakeClient(QueryTags=[["b", "a"]])
    assert gnt("gnt-group", "list-tags", "g2", fake=fake)[1] == "a\nb\n"
    assert fake.args("QueryTags") == [("nodegroup", "g2")]
    fake = following()
    gnt("gnt-group", "add-tags", "g2", "t1", fake=fake)
    op = submitted_op(fake)
    assert (op["OP_ID"], op["kind"], op["name"], op["tags"]) == ("OP_TAGS_SET", "nodegroup", "g2", ["t1"])


def test_cluster_destroy_refused_while_instances_or_nodes_remain(tmp_path: Any) -> None:
    """As Ganeti: gnt-cluster destroy refuses, and removes nothing, while the
    configuration still has instances or nodes other than the master."""
    from ganeti import serializer
    from ganeti.config.bootstrap import grow, initial_config
    from ganeti.paths import Paths

    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    single = initial_config("cluster.test", "node1.test", "127.0.1.1")

    def destroy(config: Any) -> tuple[int, str]:
        serializer.write_json(paths.config_data, config)
        out, err = io.StringIO(), io.StringIO()
        code = runner.run("gnt-cluster", gnt_cluster.COMMANDS,
                                   ["--root", str(tmp_path), "destroy", "--yes-do-it"], stdout=out, stderr=err)
        return code, err.getvalue()

    with_instance = grow(single, instances=1).to_dict()
    code, err = destroy(with_instance)
    assert code == 1 and "There are still 1 instance(s) in this cluster." in err
    assert os.path.exists(paths.config_data)
    code, err = destroy(grow(single, nodes=2).to_dict())
    assert code == 1 and "There are still 2 node(s) in this cluster." in err
    assert os.path.exists(paths.config_data)
    code, err = destroy(single.to_dict())
    assert code == 0, err
    assert not os.path.exists(paths.config_data)


def test_getmaster_reads_this_nodes_ssconf_as_ganeti(tmp_path: Any) -> None:
    """On any node (a non-master has no LuxiD), the master named by ssconf."""
    from ganeti.paths import Paths

    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    with open(paths.ssconf("master_node"), "w") as handle:
        handle.write("node2.test\n")
    code, out, _err = gnt("gnt-cluster", "--root", str(tmp_path), "getmaster")
    assert (code, out) == (0, "node2.test\n")


def test_getmaster_asks_the_master_daemon_without_ssconf(tmp_path: Any) -> None:
    code, out, _err = gnt("gnt-cluster", "--root", str(tmp_path), "getmaster",
                          fake=FakeClient(QueryConfigValues=[["node1.test"]]))
    assert (code, out) == (0, "node1.test\n")
