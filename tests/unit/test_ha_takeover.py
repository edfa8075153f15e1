"""The take-over steps report through a Progress: printed by the command, logged by NodeD."""

from __future__ import annotations

import argparse
import io

import pytest
from twisted.internet.defer import Deferred
from twisted.logger import globalLogPublisher

from ganeti.client.cluster_master import Printed
from ganeti.client.command import Context
from ganeti.ha import takeover
from ganeti.ha.elector import Logged
from ganeti.paths import Paths
from ganeti.rpc.client import RpcResult


class Recorded:
    """A L{takeover.Progress} that keeps what it was told."""

    def __init__(self) -> None:
        self.said: list[tuple[str, str]] = []

    def step(self, text: str) -> None:
        self.said.append(("step", text))

    def warn(self, text: str) -> None:
        self.said.append(("warn", text))

    def fail(self, text: str) -> None:
        self.said.append(("fail", text))


class FakeRpc:
    """Answers by procedure: C{answers[procedure][node]} is a payload, or an
    exception instance for a failed call; C{fenced}: the RPC carries an epoch."""

    def __init__(self, answers: dict[str, dict[str, object]], log: list[tuple[str, int | None]],
                 epoch: int | None) -> None:
        self.answers, self.log, self.epoch = answers, log, epoch

    def _result(self, procedure: str, name: str) -> RpcResult:
        value = self.answers.get(procedure, {}).get(name, RuntimeError("no answer"))
        if isinstance(value, Exception):
            return RpcResult.failure(name, str(value))
        return RpcResult(name, True, value)

    async def run(self, addresses, call, **_options):
        self.log.append((call.procedure, self.epoch))
        return {name: self._result(call.procedure, name) for name in addresses}

    async def run_one(self, name, address, call):
        self.log.append((call.procedure, self.epoch))
        return self._result(call.procedure, name)

    async def close(self):
        pass


def status(epoch: int = 3, config: int = 10, queue: int = 5) -> dict[str, object]:
    return {"epoch": epoch, "config_serial": config, "queue_serial": queue, "jobs": {}}


@pytest.fixture
def view(tmp_path) -> takeover.Cluster:
    return takeover.Cluster(Paths(str(tmp_path)), "n2", "n1", ["n1", "n2", "n3"],
                            {"n1": "127.0.1.1", "n2": "127.0.1.2", "n3": "127.0.1.3"})


def run(monkeypatch, view, answers, *, fenced_answers=None, no_voting=False, won_epoch=None):
    """The steps against fake nodes: (whether this node is master, what was reported, the calls)."""
    calls: list[tuple[str, int | None]] = []

    def rpc(reactor, view_, epoch):
        return FakeRpc(answers if epoch is None else (fenced_answers or answers), calls, epoch)

    monkeypatch.setattr(takeover, "_rpc", rpc)
    progress = Recorded()
    if won_epoch is None:
        coroutine = takeover.failover(None, progress, view, no_voting)
    else:
        coroutine = takeover.elected_failover(None, progress, view, won_epoch)
    outcome: list[object] = []
    Deferred.fromCoroutine(coroutine).addBoth(outcome.append)
    assert len(outcome) == 1
    return outcome[0], progress.said, calls


def test_an_elected_master_that_is_the_master_already_stops_before_any_call(monkeypatch, view):
    done, said, calls = run(monkeypatch, takeover.Cluster(view.paths, "n1", "n1", view.candidates, view.addresses),
                            {}, won_epoch=4)
    assert done is False and calls == []
    assert said == [("fail", "Failure: prerequisites not met for this operation:\nThis commands must be run on the"
                             " node where you want the new master to be. n1 is already the master")]


def test_no_majority_for_the_epoch_is_a_failure_reported_once(monkeypatch, view):
    answers = {"master_node_name": {name: "n1" for name in view.addresses},
               "failover_status": {name: status() for name in view.addresses},
               "epoch_claim": {"n2": None}}
    done, said, calls = run(monkeypatch, view, answers)
    assert done is False
    assert said == [("fail", "Failure: could not raise the master epoch to 4 on a majority of nodes"
                             " (accepted: n2)")]
    assert calls == [("master_node_name", None), ("failover_status", None), ("epoch_claim", 4)]


def test_steps_done_then_why_it_stopped(monkeypatch, view):
    """A malformed status is a warning; the epoch recorded a step; this node
    not answering after the fencing the failure that stops the steps."""
    answers = {"master_node_name": {name: "n1" for name in view.addresses},
               "failover_status": {"n1": status(), "n2": status(), "n3": "garbage"},
               "epoch_claim": {name: None for name in view.addresses}}
    fenced = dict(answers, failover_status={"n3": status()})
    done, said, calls = run(monkeypatch, view, answers, fenced_answers=fenced)
    assert done is False
    assert said == [("warn", "Warning: n3 answered failover_status wrongly: failover_status answered 'garbage'"),
                    ("step", "Master epoch 4 recorded on 3 of 3 nodes"),
                    ("fail", "Failure: this node's ganeti-noded does not answer")]
    assert ("failover_status", 4) in calls


def test_an_elected_candidate_does_not_vote_on_the_masters_name(monkeypatch, view):
    """Its voters recorded the epoch for it: it claims the epoch at once (no
    vote on the master's name, no state read before the fencing), then
    reads the newest state under it."""
    answers = {"epoch_claim": dict.fromkeys(view.addresses),
               "failover_status": {"n2": status(epoch=5), "n3": status(epoch=6)}}
    done, said, calls = run(monkeypatch, view, answers, won_epoch=5)
    assert done is False and calls == [("epoch_claim", 5), ("failover_status", 5)]
    assert said == [("step", "Master epoch 5 recorded on 3 of 3 nodes"),
                    ("fail", "Failure: a node has seen master epoch 6, above the epoch 5 this node was elected for")]


def test_the_command_prints_steps_on_stdout_and_the_rest_on_stderr():
    out, err = io.StringIO(), io.StringIO()
    printed = Printed(Context("gnt-cluster", "master-failover", argparse.Namespace(), out, err))
    printed.step("Master epoch 4 recorded on 3 of 3 nodes")
    printed.warn("The old master n1 did not answer")
    printed.fail("Failure: prerequisites not met for this operation:\nno")
    assert out.getvalue() == "Master epoch 4 recorded on 3 of 3 nodes\n"
    assert err.getvalue() == ("The old master n1 did not answer\n"
                              "Failure: prerequisites not met for this operation:\nno\n")


def test_noded_logs_each_line():
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    try:
        logged = Logged()
        logged.step("Fetched 2 newer job file(s) from n3")
        logged.warn("Warning: n3 answered failover_status wrongly: x")
        logged.fail("Failure: prerequisites not met for this operation:\n\nthis node is the master")
    finally:
        globalLogPublisher.removeObserver(events.append)
    lines = [(event["log_level"].name, event["line"]) for event in events if event.get("log_format") == "election: {line}"]
    assert lines == [("info", "Fetched 2 newer job file(s) from n3"),
                     ("warn", "Warning: n3 answered failover_status wrongly: x"),
                     ("warn", "Failure: prerequisites not met for this operation:"),
                     ("warn", "this node is the master")]


def test_both_report_to_the_same_interface():
    """The command's and NodeD's reports are both L{takeover.Progress}es (mypy checks the assignments)."""
    out = io.StringIO()
    reports: list[takeover.Progress] = [Printed(Context("p", "c", argparse.Namespace(), out, out)), Logged(),
                                        Recorded()]
    assert all(callable(getattr(report, name)) for report in reports for name in ("step", "warn", "fail"))


class SilentStop(FakeRpc):
    """Nodes that answer everything at once, but the old master's
    C{node_stop_master} only when C{stopped} fires."""

    stopped: Deferred = Deferred()

    async def run_one(self, name, address, call):
        if call.procedure == "node_stop_master":
            self.log.append((call.procedure, self.epoch))
            return await self.stopped
        return await super().run_one(name, address, call)


def take_over_with_a_slow_stop(monkeypatch, tmp_path):
    """node2's take-over from node1 on a Clock: (the clock, what was reported, the outcome)."""
    from twisted.internet.task import Clock

    from ganeti import serializer
    from ganeti.testing.cluster import loopback_config, node_addresses

    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    serializer.write_file(paths.config_data, loopback_config(3, candidates=["node2.test", "node3.test"]).to_json())
    addresses = node_addresses(3)
    here = takeover.Cluster(paths, "node2.test", "node1.test", list(addresses), addresses)
    everyone = dict.fromkeys(addresses)
    answers = {"master_node_name": dict.fromkeys(addresses, "node1.test"),
               "failover_status": {name: status() for name in addresses},
               "epoch_claim": everyone, "upload_file": everyone, "write_ssconf_files": everyone,
               "node_deactivate_master_ip": {"node1.test": None},
               "node_start_master_daemons": {"node2.test": []},
               "node_activate_master_ip": {"node2.test": None}}
    SilentStop.stopped = Deferred()
    monkeypatch.setattr(takeover, "_rpc", lambda reactor, view_, epoch: SilentStop(answers, [], epoch))
    clock, progress, outcome = Clock(), Recorded(), []
    Deferred.fromCoroutine(takeover.failover(clock, progress, here, False)).addBoth(outcome.append)
    return clock, progress, outcome


def test_the_old_masters_slow_stop_does_not_hold_up_the_take_over(monkeypatch, tmp_path):
    """The old master stays fenced; its daemons' stop (a kill timeout, a
    job still running there) is not waited for: the take-over says it is
    under way, and the late answer goes to the log."""
    clock, progress, outcome = take_over_with_a_slow_stop(monkeypatch, tmp_path)
    clock.advance(takeover.STOP_GRACE)
    assert outcome == [True]
    assert progress.said[-1] == ("step", "The old master node1.test is stopping its master daemons (fenced, they"
                                 " can change nothing; check there with 'ganeti-daemons status')")
    assert not [kind for kind, _text in progress.said if kind != "step"]
    SilentStop.stopped.callback(RpcResult("node1.test", True, []))  # a late answer is logged, nothing more
    assert outcome == [True]


def test_the_old_masters_answer_before_the_check_is_reported(monkeypatch, tmp_path):
    clock, progress, outcome = take_over_with_a_slow_stop(monkeypatch, tmp_path)
    SilentStop.stopped.callback(RpcResult.failure("node1.test", "ganeti-wconfd: cannot stop"))
    assert outcome == [True]
    assert progress.said[-1] == ("warn", "Could not disable the master role on the old master node1.test, please"
                                 " disable manually: ganeti-wconfd: cannot stop")
    assert not clock.getDelayedCalls()


def test_settling_fails_the_jobs_that_ran_on_the_old_master_and_leaves_the_rest(tmp_path):
    import os

    import orjson

    from ganeti import serializer

    paths = Paths(str(tmp_path))
    paths.ensure_dirs()
    os.makedirs(paths.queue_dir, exist_ok=True)

    def job(job_id: int, *statuses: str, **more: object) -> str:
        path = os.path.join(paths.queue_dir, "job-%d" % job_id)
        ops = [{"input": {"OP_ID": "OP_TEST_DELAY", "duration": 1.0}, "status": s} for s in statuses]
        serializer.write_file(path, orjson.dumps({"id": job_id, "ops": ops, **more}))
        return path

    files = {1: job(1, "success"), 2: job(2, "success", "running", livelock="/x/job_2", process_id=42),
             3: job(3, "queued"), 4: job(4, "queued", livelock="/x/job_4", process_id=43), 5: job(5, "error")}
    before = {i: serializer.read_file(p) for i, p in files.items()}
    takeover._settle_local_state(paths, b"{}")
    after = {i: orjson.loads(serializer.read_file(p)) for i, p in files.items()}
    assert {i: serializer.read_file(files[i]) for i in (1, 3, 5)} == {i: before[i] for i in (1, 3, 5)}
    assert [op["status"] for op in after[2]["ops"]] == ["success", "error"]
    assert "master failover" in str(after[2]["ops"][1]["result"])
    assert after[2].get("livelock") is None and after[2].get("process_id") is None
    assert [op["status"] for op in after[4]["ops"]] == ["queued"]  # spawned, never confirmed: it runs here
    assert after[4].get("livelock") is None and after[4].get("process_id") is None


def test_no_step_waits_long_on_another_node(monkeypatch, tmp_path):
    """Every call to another node carries a short time limit (a frozen or cut-off node answers nothing):
    the quick rounds 5 s, the newest state's fetch and the pushes of config and ssconf tens of seconds, the
    old master's stop awaited only for the grace; only this node's own daemons' start may take longer."""
    limits: list[tuple[str, list[str], float | None]] = []
    run, run_one = FakeRpc.run, FakeRpc.run_one

    async def timed_run(self, addresses, call, **options):
        limits.append((call.procedure, sorted(addresses), call.timeout))
        return await run(self, addresses, call, **options)

    async def timed_run_one(self, name, address, call):
        limits.append((call.procedure, [name], call.timeout))
        return await run_one(self, name, address, call)

    monkeypatch.setattr(FakeRpc, "run", timed_run)
    monkeypatch.setattr(FakeRpc, "run_one", timed_run_one)
    clock, progress, outcome = take_over_with_a_slow_stop(monkeypatch, tmp_path)
    clock.advance(takeover.STOP_GRACE)
    assert outcome == [True], progress.said
    others = [(procedure, nodes, limit) for procedure, nodes, limit in limits if nodes != ["node2.test"]]
    assert {procedure for procedure, _nodes, _limit in others} >= {
        "master_node_name", "failover_status", "epoch_claim", "upload_file", "write_ssconf_files",
        "node_deactivate_master_ip"}
    for procedure, nodes, limit in others:
        bound = takeover.DAEMONS_TIMEOUT if procedure == "node_stop_master" else takeover.FETCH_TIMEOUT
        assert limit is not None and limit <= bound, (procedure, nodes, limit)
