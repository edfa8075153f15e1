"""The blocking client that rides through a master failover (issue 23):
what it retries, where it goes, when it gives up, what it says."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.jobs.submission import SUBMISSION_SOURCE, submission_id
from ganeti.luxi import locate
from ganeti.luxi.client import CallTimeout, ConnectionLost, NotSent
from ganeti.luxi.master import MasterClient, OutcomeUnknown, retry_safe, with_submission_ids
from ganeti.paths import Paths

OP = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "reason": [["gnt:client:gnt-debug", "delay", 1]]}
HERE = locate.Target("node1.test", None, 0)
THERE = locate.Target("node2.test", "127.0.1.2", 1817)


class Scripted(MasterClient):
    """Each attempt takes the next outcome of C{script}: an exception to raise or a value."""

    def __init__(self, script: list[Any], masters: list[Any], window: float = 20.0) -> None:
        self.now = 0.0
        self.said: list[str] = []
        self.slept: list[float] = []
        super().__init__(Paths("/nonexistent"), on_wait=self.said.append, window=window,
                         clock=lambda: self.now, sleep=self._sleep)
        self.script = list(script)
        self.masters = list(masters)
        self.asked_confd: list[bool] = []
        self.calls: list[tuple[Any, str, tuple[Any, ...]]] = []
        self.locate = self._locate
        self.make_id = iter("id%d" % n for n in range(100)).__next__

    def _sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def _locate(self, paths: Paths, ask_confd: bool) -> locate.Target | None:
        self.asked_confd.append(ask_confd)
        return self.masters.pop(0) if len(self.masters) > 1 else self.masters[0]

    def call_once(self, method: str, *args: Any) -> Any:
        self.calls.append((self.target, method, args))
        outcome = self.script.pop(0)
        self.now += 0.01
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def test_query_follows_the_master_to_another_node() -> None:
    """A refused query goes to the master ssconf names, at once, without a word."""
    client = Scripted([NotSent("cannot connect"), ["cluster.test"]], [THERE])
    assert client.query_config_values(["cluster_name"]) == ["cluster.test"]
    assert [c[0] for c in client.calls] == [None, THERE]
    assert client.said == [] and client.slept == []
    assert client.asked_confd == [False]


def test_waits_once_for_a_new_master_then_asks_confd() -> None:
    """While no master answers, it says once that it waits, backs off, and
    asks the candidates' confd (ssconf may be stale)."""
    lost = ConnectionLost("WaitForJobChange failed: the master daemon closed the connection")
    refused = NotSent("cannot connect")
    answer = [["success"], []]
    client = Scripted([lost, refused, refused, refused, answer], [HERE, HERE, HERE, THERE])
    assert client.wait_for_job_change(7, ["status"], None, None, 60) == answer
    assert len(client.said) == 1 and client.said[0].startswith("Waiting for a new master")
    assert client.asked_confd == [False, True, True, True]
    assert client.calls[-1][0] == THERE
    assert 0 < max(client.slept) <= 1.0


def test_gives_up_after_the_window() -> None:
    """No master for the whole window: the last error, after about the window."""
    client = Scripted([NotSent("cannot connect")] * 1000, [HERE], window=5.0)
    with pytest.raises(NotSent):
        client.query_cluster_info()
    assert 5.0 <= client.now < 7.0
    assert len(client.said) == 1


def test_no_cluster_no_wait() -> None:
    """A root without ssconf names no master: the error at once, as before."""
    client = Scripted([NotSent("cannot connect")], [None])
    with pytest.raises(NotSent):
        client.query_cluster_info()
    assert client.said == [] and client.slept == []


def test_submission_gets_an_id_and_is_sent_again() -> None:
    """The job gets a submission id; the same request (same id) is sent again after a lost connection."""
    client = Scripted([ConnectionLost("SubmitJob failed"), 17], [THERE])
    assert client.submit_job([dict(OP)]) == 17
    (_, _, first), (_, _, second) = client.calls
    assert first == second
    assert submission_id(first[0]) == "id0"
    assert OP["reason"] == [["gnt:client:gnt-debug", "delay", 1]]  # the caller's opcode is not changed


def test_many_jobs_keep_their_ids() -> None:
    """Each job of SubmitManyJobs gets its own id; one it already has is kept."""
    mine = dict(OP, reason=[[SUBMISSION_SOURCE, "mine", 1]])
    ((jobs,),) = [with_submission_ids("SubmitManyJobs", ([[dict(OP)], [mine]],), lambda: "new")]
    assert [submission_id(ops) for ops in jobs] == ["new", "mine"]


def test_unsafe_call_lost_is_outcome_unknown() -> None:
    """A cancel whose connection broke after sending is not sent twice: outcome unknown."""
    client = Scripted([ConnectionLost("CancelJob failed"), [True, "x"]], [THERE])
    with pytest.raises(OutcomeUnknown, match="outcome unknown"):
        client.cancel_job(5)
    assert len(client.calls) == 1


def test_unsafe_call_not_sent_is_retried() -> None:
    """Refused before anything was sent: any call may go again."""
    client = Scripted([NotSent("cannot connect"), [True, "canceled"]], [THERE])
    assert client.cancel_job(5) == [True, "canceled"]


def test_timeout_of_a_query_is_retried() -> None:
    client = Scripted([CallTimeout("timed out"), {"name": "c"}], [THERE])
    assert client.query_cluster_info() == {"name": "c"}


def test_server_errors_are_not_retried() -> None:
    client = Scripted([errors.OpPrereqError("no such node", "unknown_entity")], [THERE])
    with pytest.raises(errors.OpPrereqError):
        client.query_nodes(["x"], ["name"], False)
    assert len(client.calls) == 1


def test_retry_safe() -> None:
    named = [dict(OP, reason=[[SUBMISSION_SOURCE, "k", 1]])]
    assert retry_safe("QueryJobs", ([1], ["status"]))
    assert retry_safe("SubmitJob", (named,))
    assert not retry_safe("SubmitJob", ([dict(OP)],))
    assert not retry_safe("SubmitManyJobs", ([named, [dict(OP)]],))
    assert not retry_safe("ArchiveJob", (1,))


def test_cli_says_outcome_unknown_with_the_job_id() -> None:
    """A job followed while no master answers for the whole window: the CLI
    names the job and says its outcome is unknown, never that it failed."""
    import io

    from ganeti.client.command import Command
    from ganeti.client.jobs import submit_opcodes
    from ganeti.client.runner import run

    client = Scripted([42] + [NotSent("cannot connect to the master daemon")] * 1000, [HERE], window=3.0)

    def add_tag(ctx: Any, opts: Any) -> int:
        submit_opcodes(ctx, [dict(OP)])
        return 0

    def factory(ctx: Any) -> Scripted:
        client.on_wait = ctx.err  # as the CLI's own client
        return client

    out, err = io.StringIO(), io.StringIO()
    code = run("gnt-cluster", {"add-tags": Command(add_tag, None, "x")}, ["add-tags"], stdout=out, stderr=err,
               client_factory=factory, log_command=False)
    assert code == 1
    text = err.getvalue()
    assert "Outcome unknown, job 42: check with gnt-job info 42" in text
    assert "fail" not in text.lower()
    assert text.count("Waiting for a new master") == 1


def test_a_wait_gives_up_on_a_silent_master_after_its_timeout_and_the_window() -> None:
    """A paused master keeps the connection open: a wait of 60 s times out after 60 s plus the window."""
    client = Scripted([[["success"], []]], [THERE], window=30.0)
    timeouts: list[float] = []
    original = client.call_once

    def once(method: str, *args: Any) -> Any:
        timeouts.append(client.timeout)
        return original(method, *args)

    client.call_once = once
    client.wait_for_job_change(7, ["status"], None, None, 60)
    assert timeouts == [90.0] and client.timeout == 180.0


def test_the_wait_window_is_the_nodes_failover_timeout_plus_the_margin(tmp_path):
    # read with the standard library (no ganeti.ha import on the CLI's path), as ganeti.ha.params writes it
    from ganeti.ha import params as ha_params
    from ganeti.luxi.master import MARGIN, wait_window
    from ganeti.paths import Paths

    paths = Paths(str(tmp_path))
    assert wait_window(paths) == ha_params.DEFAULT_FAILOVER_TIMEOUT + MARGIN  # no copy: the default
    ha_params.write(paths, ha_params.HaParams(liveness_timeout=5.0, failover_timeout=42.0))
    assert wait_window(paths) == 42.0 + MARGIN
    with open(ha_params.params_path(paths), "w") as handle:
        handle.write("{damaged")
    assert wait_window(paths) == ha_params.DEFAULT_FAILOVER_TIMEOUT + MARGIN


def test_no_wait_where_no_other_candidate_could_take_over(tmp_path):
    """A one-node cluster (ssconf names one master candidate): a client whose master does not
    answer fails at once instead of waiting for a master that cannot come."""
    import os

    from ganeti.luxi.master import MARGIN, wait_window
    from ganeti.paths import Paths

    paths = Paths(str(tmp_path))
    os.makedirs(paths.data_dir, exist_ok=True)
    with open(paths.ssconf("master_candidates"), "w") as handle:
        handle.write("node1.test\n")
    assert wait_window(paths) == 0.0
    with open(paths.ssconf("master_candidates"), "w") as handle:
        handle.write("node1.test\nnode2.test\n")
    assert wait_window(paths) == 10.0 + MARGIN


def test_a_submission_the_old_master_could_not_replicate_goes_to_the_next_master() -> None:
    """During a failover the old master refuses a submission whose file a majority of candidates
    did not take (it made no job): with its submission id the same request goes to the next
    master; the user sees no error (the bench's client errors)."""
    refused = errors.JobQueueError("Job(s) 41 not replicated to a majority of the master candidates (1 of 3 hold it)")
    client = Scripted([refused, errors.JobQueueError("This master stepped down: no majority"), 17], [HERE, THERE])
    assert client.submit_job([dict(OP)]) == 17
    assert [c[0] for c in client.calls] == [None, HERE, THERE]
    assert len({submission_id(c[2][0]) for c in client.calls}) == 1


def test_a_resumed_old_masters_guard_refusal_goes_to_the_next_master() -> None:
    """A master paused past the failover timeout, once resumed, refuses every call before its handler runs
    ("not confirmed as master"): a submission with its id, and a query, go to the next master (the bench
    saw two client errors)."""
    guard = "ganeti-luxid: not confirmed as master by a majority of nodes (this master did not run for 10.5 s)"
    client = Scripted([errors.JobQueueError(guard), 17], [THERE])
    assert client.submit_job([dict(OP)]) == 17
    assert [c[0] for c in client.calls] == [None, THERE]
    client = Scripted([errors.JobQueueError(guard), [["success"]]], [THERE])
    assert client.call("QueryJobs", [17], ["status"]) == [["success"]]
    client = Scripted([errors.JobQueueError(guard)], [THERE])
    with pytest.raises(errors.JobQueueError):
        client.call("CancelJob", 41)   # not read-only: the user's to see
    assert len(client.calls) == 1


def test_other_refusals_are_the_users_to_see() -> None:
    """A drained queue, a full disk, a submission without an id: raised at once, not sent again."""
    client = Scripted([errors.JobQueueError("Cannot accept jobs: the data directory is full")], [THERE])
    with pytest.raises(errors.JobQueueError):
        client.submit_job([dict(OP)])
    assert len(client.calls) == 1
    client = Scripted([errors.JobQueueError("Job(s) 41 not replicated to a majority of the master candidates")],
                      [THERE])
    with pytest.raises(errors.JobQueueError):
        client.call("CancelJob", 41)
    assert len(client.calls) == 1
