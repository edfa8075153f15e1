"""Start-up voting of the master daemons: the gate opens only on a won vote."""

from __future__ import annotations

import pytest
from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.task import Clock

from ganeti.ha import voting
from ganeti.rpc.client import RpcResult
from ganeti.rpc.contract import Runner


class Child(Service):
    pass


class FakeRpc(Runner):
    def __init__(self, rounds):
        self.rounds = list(rounds)
        self.calls = 0

    def call(self, nodes, procedure, args=(), timeout=None, **_options):
        assert procedure == "master_node_name"
        self.calls += 1
        answers = self.rounds.pop(0) if len(self.rounds) > 1 else self.rounds[0]
        return defer.succeed({name: RpcResult(name, True, vote) if vote else RpcResult.failure(name, "down")
                              for name, vote in answers.items()})


NODES = {"a": "127.0.1.1", "b": "127.0.1.2", "c": "127.0.1.3"}


def gate_with(monkeypatch, rounds, **kwargs):
    monkeypatch.setattr(voting, "voters", lambda paths: ("a", NODES))
    clock, stopped, rpc = Clock(), [], FakeRpc(rounds)
    gate = voting.VotingGate(None, clock, "ganeti-luxid", lambda: stopped.append(True), rpc_factory=lambda: rpc,
                             **kwargs)
    child = Child()
    child.setServiceParent(gate)
    gate.privilegedStartService()
    gate.startService()
    return gate, child, clock, stopped, rpc


def test_a_won_vote_opens_the_gate(monkeypatch):
    gate, child, _clock, stopped, _rpc = gate_with(monkeypatch, [{"a": "a", "b": "a", "c": None}])
    assert child.running and not stopped


def test_a_lost_vote_stops_the_daemon_without_serving(monkeypatch):
    gate, child, _clock, stopped, _rpc = gate_with(monkeypatch, [{"a": "a", "b": "b", "c": "b"}])
    assert not child.running and stopped == [True]
    gate.stopService()


def test_too_few_answers_retry_then_win(monkeypatch):
    rounds = [{"a": "a", "b": None, "c": None}, {"a": "a", "b": None, "c": None}, {"a": "a", "b": "a", "c": None}]
    gate, child, clock, stopped, rpc = gate_with(monkeypatch, rounds)
    assert not child.running and rpc.calls == 1
    clock.advance(voting.RETRY_INTERVAL)
    assert not child.running and rpc.calls == 2
    clock.advance(voting.RETRY_INTERVAL)
    assert child.running and not stopped and rpc.calls == 3


def test_too_few_answers_for_too_long_stop_it(monkeypatch):
    gate, child, clock, stopped, rpc = gate_with(monkeypatch, [{"a": "a", "b": None, "c": None}], retries=2)
    clock.advance(voting.RETRY_INTERVAL)
    clock.advance(voting.RETRY_INTERVAL)
    assert not child.running and stopped == [True] and rpc.calls == 3


def test_no_voting_opens_at_once(monkeypatch):
    gate, child, _clock, stopped, rpc = gate_with(monkeypatch, [{"a": "b", "b": "b", "c": "b"}], no_voting=True)
    assert child.running and rpc.calls == 0


def test_no_voting_needs_yes_do_it():
    from twisted.python import usage

    from ganeti.luxid import tap

    with pytest.raises(usage.UsageError, match="--yes-do-it"):
        tap.Options().parseOptions(["--root", "/nonexistent", "--no-voting"])


class ClosingFailsRpc(FakeRpc):
    """Closing the idle connections fails the way it does while the daemon stops."""

    async def close(self):
        raise defer.FirstError(__import__("twisted.python.failure", fromlist=["Failure"]).Failure(
            defer.CancelledError()), 0)


def test_a_lost_vote_reports_the_vote_not_a_traceback(monkeypatch):
    """The admin reads why (the vote), not a failure of closing connections on the way out."""
    from twisted.logger import globalLogPublisher

    events = []
    globalLogPublisher.addObserver(events.append)
    try:
        monkeypatch.setattr(voting, "voters", lambda paths: ("a", NODES))
        stopped, rpc = [], ClosingFailsRpc([{"a": "a", "b": "b", "c": "b"}])
        gate = voting.VotingGate(None, Clock(), "ganeti-luxid", lambda: stopped.append(True),
                                 rpc_factory=lambda: rpc)
        gate.privilegedStartService()
        gate.startService()
    finally:
        globalLogPublisher.removeObserver(events.append)
    texts = [e.get("log_format", "") for e in events]
    assert stopped == [True]
    assert any("Voting cannot be won" in t for t in texts), texts
    assert not any("start-up vote failed" in t for t in texts), texts


def test_voters_without_config_data_come_from_ssconf(tmp_path):
    """A master daemon on a node without config.data asks the nodes ssconf names (no crash)."""
    from ganeti import crypto, ssconf
    from ganeti.daemons import write_node_identity
    from ganeti.paths import Paths

    paths = Paths(str(tmp_path))
    crypto.bootstrap_secrets(paths, "cluster.test", node_name="a")
    write_node_identity(paths, "a", "127.0.1.1")
    ssconf.write_files(paths, {"master_node": "a", "node_list": ["a", "b"], "online_nodes": ["a", "b"],
                               "node_primary_ips": ["a 127.0.1.1", "b 127.0.1.2"]}, max_size=None)
    assert voting.voters(paths) == ("a", {"a": "127.0.1.1", "b": "127.0.1.2"})
