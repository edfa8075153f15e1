"""The log files an admin reads: commands.log, jobs.log, daemon log lines
without Twisted's per-connection noise."""

from __future__ import annotations

import io
import os
import re
from typing import Any

import pytest
from twisted.internet import protocol
from twisted.internet.task import Clock
from twisted.logger import ILogObserver, Logger, LogLevel, LogPublisher, globalLogPublisher

from ganeti import daemons, logfile
from ganeti.client.command import Command
from ganeti.client.runner import run
from ganeti.paths import Paths

LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}: (?P<program>.+?) pid=(?P<pid>\d+) (?P<level>[A-Z]+) (?P<message>.*)$")


def _lines(path: str) -> list[str]:
    with open(path) as handle:
        return handle.read().splitlines()


def test_format_line_is_one_record_in_ganetis_layout() -> None:
    line = logfile.format_line("gnt-node list", "INFO", "two\nlines", 0.5, 42)
    assert line.endswith("\n") and line.count("\n") == 1
    match = LINE.match(line.rstrip("\n"))
    assert match is not None
    assert match.group("program", "pid", "level", "message") == ("gnt-node list", "42", "INFO", "two\\nlines")
    assert line.split(": ", 1)[0].endswith(",500")


def test_record_command_appends_who_ran_what(tmp_path: Any) -> None:
    assert logfile.record_command(str(tmp_path), "gnt-instance add", ["add", "-n", "node one", "vm1"], when=10.0)
    assert logfile.record_command(str(tmp_path), "gnt-node list", ["list"], when=11.0)
    first, second = _lines(str(tmp_path / "commands.log"))
    match = LINE.match(first)
    assert match is not None and match.group("program") == "gnt-instance add"
    assert int(match.group("pid")) == os.getpid()
    assert "Command line: gnt-instance add -n 'node one' vm1 (user " in first
    assert "Command line: gnt-node list" in second


def test_record_command_creates_nothing_without_a_log_directory(tmp_path: Any) -> None:
    missing = tmp_path / "var" / "log" / "ganeti"
    assert not logfile.record_command(str(missing), "gnt-node list", ["list"])
    assert not (tmp_path / "var").exists()


def _runner(ran: list[str]) -> dict[str, Command]:
    return {"list": Command(lambda ctx, opts: ran.append(ctx.root or "") or 0, None, "List")}


def test_run_logs_the_command_line_under_its_root(tmp_path: Any) -> None:
    paths = Paths(str(tmp_path))
    os.makedirs(paths.log_dir)
    ran: list[str] = []
    out, err = io.StringIO(), io.StringIO()
    code = run("gnt-test", _runner(ran), ["--root", str(tmp_path), "list"], stdout=out, stderr=err, log_command=True)
    assert (code, ran) == (0, [str(tmp_path)])
    (line,) = _lines(os.path.join(paths.log_dir, "commands.log"))
    assert "gnt-test list pid=" in line
    assert "Command line: gnt-test --root %s list" % tmp_path in line


def test_run_logs_once_the_command_made_the_log_directory(tmp_path: Any) -> None:
    """gnt-cluster init: the directory exists only after the command ran."""
    paths = Paths(str(tmp_path))
    tool = {"init": Command(lambda ctx, opts: os.makedirs(paths.log_dir), None, "Init")}
    assert run("gnt-test", tool, ["--root", str(tmp_path), "init"], stdout=io.StringIO(), log_command=True) == 0
    (line,) = _lines(os.path.join(paths.log_dir, "commands.log"))
    assert "Command line: gnt-test --root %s init" % tmp_path in line


def test_run_does_not_log_an_explicit_argv_by_default(tmp_path: Any) -> None:
    """Only the process's own command line is logged (tests and callers pass argv)."""
    paths = Paths(str(tmp_path))
    os.makedirs(paths.log_dir)
    assert run("gnt-test", _runner([]), ["--root", str(tmp_path), "list"], stdout=io.StringIO()) == 0
    assert not os.path.exists(os.path.join(paths.log_dir, "commands.log"))


def test_run_logging_never_fails_the_command(tmp_path: Any) -> None:
    paths = Paths(str(tmp_path))
    os.makedirs(os.path.join(paths.log_dir, "commands.log"))  # a directory: the append fails
    ran: list[str] = []
    code = run("gnt-test", _runner(ran), ["--root", str(tmp_path), "list"], stdout=io.StringIO(), log_command=True)
    assert (code, ran) == (0, [str(tmp_path)])


def test_jobs_log_has_a_line_per_submission_start_and_end(tmp_path: Any) -> None:
    clock = Clock()
    path = str(tmp_path / "jobs.log")
    jobs = logfile.JobsLog(path, clock)
    jobs.submitted(7, ["TEST_DELAY(1.0)", "CLUSTER_QUERY"])
    jobs.status(7, "queued", False)
    jobs.status(7, "waiting", False)
    jobs.status(7, "running", False)
    jobs.status(7, "running", False)
    jobs.status(7, "error", True)
    jobs.status(7, "error", True)  # the job file written again: no second line
    jobs.submitted(8, ["TEST_DELAY(0.5)"])
    jobs.status(8, "canceled", True)
    messages = [LINE.match(line).group("message") for line in _lines(path)]
    assert messages == [
        "job 7 submitted: TEST_DELAY(1.0), CLUSTER_QUERY",
        "job 7 started",
        "job 7 finished: error",
        "job 8 submitted: TEST_DELAY(0.5)",
        "job 8 finished: canceled",
    ]
    jobs.forget(7)
    assert 7 not in jobs._seen


def _event(level: LogLevel, fmt: str, namespace: str = "ganeti", **fields: Any) -> dict[str, Any]:
    return dict(log_level=level, log_format=fmt, log_namespace=namespace, log_time=0.0, **fields)


def test_level_filter_drops_debug_and_amp_connection_lines() -> None:
    seen: list[dict[str, Any]] = []
    quiet = logfile.LevelFilter(seen.append, debug=False)
    quiet(_event(LogLevel.debug, "LUXI request {method}", method="Query"))
    quiet(_event(LogLevel.info, "{cls} connection established (HOST:{host} PEER:{peer})", "twisted.protocols.amp"))
    quiet(_event(LogLevel.info, "{cls} connection lost (HOST:{host} PEER:{peer})", "twisted.protocols.amp"))
    quiet(_event(LogLevel.info, "connected to WConfD"))
    quiet(_event(LogLevel.warn, "lost the connection to WConfD; reconnecting"))
    assert [e["log_format"] for e in seen] == ["connected to WConfD", "lost the connection to WConfD; reconnecting"]
    verbose: list[dict[str, Any]] = []
    logfile.LevelFilter(verbose.append, debug=True)(_event(LogLevel.debug, "LUXI request {method}", method="Query"))
    assert len(verbose) == 1


def test_appending_observer_writes_ganeti_lines() -> None:
    stream = io.BytesIO()
    observe = logfile.AppendingFileObserver("ganeti-luxid", stream, pid=99)
    observe(_event(LogLevel.warn, "job {job} failed", job=3))
    line = stream.getvalue().decode()
    match = LINE.match(line.rstrip("\n"))
    assert match is not None
    assert match.group("program", "pid", "level", "message") == ("ganeti-luxid", "99", "WARNING", "job 3 failed")


def test_observer_appends_to_the_file_named_by_the_environment(tmp_path: Any, monkeypatch: Any) -> None:
    path = tmp_path / "luxi-daemon.log"
    path.write_text("an older line\n")
    monkeypatch.setenv(daemons.LOG_FILE_ENV, str(path))
    monkeypatch.delenv(logfile.DEBUG_ENV, raising=False)
    monkeypatch.setattr("sys.argv", ["twistd", "--pidfile=", "ganeti-luxid", "--root", str(tmp_path)])
    monkeypatch.setattr(protocol.Factory, "noisy", True)
    monkeypatch.setattr(protocol.AbstractDatagramProtocol, "noisy", True)
    observe = logfile.observer()
    assert ILogObserver.providedBy(observe)
    publisher = LogPublisher(observe)
    log = Logger(observer=publisher)
    log.debug("LUXI request {method}", method="Query")
    log.info("job {job} started", job=4)
    lines = _lines(str(path))
    assert lines[0] == "an older line"
    assert len(lines) == 2 and "ganeti-luxid pid=" in lines[1] and lines[1].endswith("INFO job 4 started")
    assert protocol.Factory.noisy is False  # quiet_twisted ran


def test_quiet_twisted_silences_factory_start_and_stop(monkeypatch: Any) -> None:
    monkeypatch.setattr(protocol.Factory, "noisy", True)
    monkeypatch.setattr(protocol.AbstractDatagramProtocol, "noisy", True)
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    try:
        loud = protocol.Factory.forProtocol(protocol.Protocol)
        loud.doStart()
        loud.doStop()
        assert any("Starting factory" in str(e.get("log_format")) for e in events)
        events.clear()
        logfile.quiet_twisted()
        quiet = protocol.Factory.forProtocol(protocol.Protocol)
        quiet.doStart()
        quiet.doStop()
        udp = protocol.DatagramProtocol()
        udp.doStart()
        udp.doStop()
    finally:
        globalLogPublisher.removeObserver(events.append)
    assert [e for e in events if "factory" in str(e.get("log_format")) or "protocol" in str(e.get("log_format"))] == []


def test_daemon_name_is_the_plugin_twistd_runs() -> None:
    assert logfile.daemon_name(["twistd", "-n", "--pidfile=", "ganeti-noded", "--root", "/"]) == "ganeti-noded"
    assert logfile.daemon_name(["twistd"]) == "ganeti"


@pytest.mark.parametrize("when", [0.0, 1234567890.999])
def test_timestamp_has_milliseconds(when: float) -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", logfile.timestamp(when))
