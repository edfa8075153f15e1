"""Automatic failover: the election decisions, the vote record, the candidate's tick, the master's step-down."""

from __future__ import annotations

import os

import pytest
from treq.testing import StubTreq
from twisted.internet.task import Clock

from ganeti import serializer
from ganeti.ha import epoch
from ganeti.ha import params as ha_params
from ganeti.ha.election import (
    PROCEED,
    TAKEOVER_ALLOWANCE,
    WAIT,
    NodeView,
    StepDownClock,
    aged,
    decide,
    elected,
    lead,
    lost_for,
    majority_lost_in,
    refusal,
)
from ganeti.ha.elector import ElectionService
from ganeti.ha.stepdown import StepDown, reachable_count
from ganeti.heartbeat import roster as rost
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import NodeRpcResource
from ganeti.rpc import wire


def view(name: str, lost: float | None = 20.0, *, master: str = "n1", candidate: bool = True, epoch_: int = 0,
         config: int = 10, queue: int = 5, config_epoch: int = 0) -> NodeView:
    return NodeView(name, lost, master, candidate, epoch_, config, queue, config_epoch)


# --- who proceeds -------------------------------------------------------------------------------


def test_the_most_up_to_date_candidate_proceeds_with_the_next_epoch():
    views = {"n2": view("n2", config=11), "n3": view("n3", epoch_=4), "n4": view("n4", candidate=False, config=12)}
    assert decide("n2", views, 5, 10).action == PROCEED
    assert decide("n2", views, 5, 10).epoch == 5
    waiting = decide("n3", views, 5, 10)
    assert waiting.action == WAIT and "n2 is more up to date" in waiting.reason
    assert decide("n4", views, 5, 10).action == WAIT  # not a candidate


def test_a_candidate_losing_the_master_a_moment_later_still_goes_first():
    """No split vote: n3 waits for n2 (first by name) although n2 is short of the timeout yet."""
    views = {"n2": view("n2", 9.8), "n3": view("n3", 10.1), "n4": view("n4", candidate=False),
             "n5": view("n5", candidate=False)}
    decision = decide("n3", views, 5, 10)
    assert decision.action == WAIT and decision.soon and "n2" in decision.reason


def test_queue_serial_then_name_break_ties():
    assert decide("n3", {"n2": view("n2"), "n3": view("n3", queue=6)}, 3, 10).action == PROCEED
    views = {"n2": view("n2"), "n3": view("n3")}
    assert decide("n2", views, 3, 10).action == PROCEED
    assert decide("n3", views, 3, 10).action == WAIT


def test_no_election_without_a_majority_that_lost_the_master():
    # n3 still hears the master, n4 lost it too recently: 2 of 5
    views = {"n2": view("n2"), "n3": view("n3", None), "n4": view("n4", 3.0), "n5": view("n5")}
    decision = decide("n2", views, 5, 10)
    assert decision.action == WAIT and "only 2 of 5 nodes lost the master" in decision.reason
    # the nodes that did not answer count as not having lost it
    assert decide("n2", {"n2": view("n2")}, 3, 10).action == WAIT
    assert decide("n2", {"n2": view("n2"), "n3": view("n3")}, 3, 10).action == PROCEED


def test_a_node_that_hears_the_master_or_is_it_does_not_proceed():
    assert decide("n2", {"n2": view("n2", 9.9), "n3": view("n3")}, 3, 10).action == WAIT
    assert decide("n1", {"n1": view("n1"), "n3": view("n3")}, 3, 10).action == WAIT
    assert decide("n2", {"n3": view("n3")}, 3, 10).action == WAIT  # its own NodeD did not answer
    # a more up-to-date candidate that still hears the master does not stop the others
    views = {"n2": view("n2"), "n3": view("n3"), "n4": view("n4", None, config=99), "n5": view("n5")}
    assert decide("n2", views, 5, 10).action == PROCEED


# --- votes --------------------------------------------------------------------------------------


def test_vote_refusals():
    mine = view("n3", config=10, queue=5)
    assert refusal(mine, "n2", 10, 5, 10) is None
    assert refusal(mine, "n2", 11, 6, 10) is None
    assert "behind" in refusal(mine, "n2", 9, 9, 10)
    assert "behind" in refusal(mine, "n2", 10, 4, 10)
    # as the candidates are ranked: the config first, the job queue serial only between equal configs
    # (a node holding a newer config gets the vote, the take-over fetches the highest queue serial)
    assert refusal(mine, "n2", 12, 4, 10) is None
    assert "behind" in refusal(view("n3", config=10, config_epoch=2), "n2", 12, 9, 10, config_epoch=1)
    assert refusal(view("n3", None), "n2", 10, 5, 10) == "this node still hears the master"
    assert "only 4.0 s ago" in refusal(view("n3", 4.0), "n2", 10, 5, 10)


def test_a_strict_majority_of_all_nodes_elects():
    assert elected(2, 3) and elected(3, 5) and elected(3, 4)
    assert not elected(1, 3) and not elected(2, 4) and not elected(0, 1 - 1)


def test_a_vote_gives_the_winner_time_to_take_over():
    assert lost_for(100.0, None, None) is None
    assert lost_for(100.0, 80.0, None) == 20.0
    # voted at 85, no master heard since: lost only from 85 + 10
    assert lost_for(100.0, 80.0, 85.0, 10.0) == 5.0
    assert lost_for(100.0, 80.0, 95.0, 10.0) == 0.0
    # a master heard after the vote (connection lost again at 90): the vote no longer matters
    assert lost_for(100.0, 90.0, 85.0, 10.0) == 10.0


def test_node_view_payload_round_trip_and_validation():
    one = view("n2", 3.5, epoch_=2)
    assert NodeView.from_payload(one.to_payload()) == one
    for bad in (None, [], {"name": ""}, dict(one.to_payload(), lost_for=-1), dict(one.to_payload(), epoch=True),
                dict(one.to_payload(), config_serial="3"), dict(one.to_payload(), master=3)):
        with pytest.raises(ValueError):
            NodeView.from_payload(bad)


# --- the vote record (NodeD) ----------------------------------------------------------------------


class InlineClock(Clock):
    def getThreadPool(self):
        return None


@pytest.fixture
def inline_threads(monkeypatch):
    from twisted.internet import defer, threads

    monkeypatch.setattr(threads, "deferToThreadPool", lambda _reactor, _pool, f, *a: defer.maybeDeferred(f, *a))


def voter(root, *, lost_since: float | None = 0.0, auto: bool = True, now: float = 100.0):
    root.ensure_dirs()
    os.makedirs(root.queue_dir, exist_ok=True)
    serializer.write_file(root.config_data, b'{"serial_no": 10}')
    serializer.write_file(os.path.join(root.queue_dir, "serial"), b"5\n")
    for key, value in {"master_node": "n1", "master_candidates": "n1\nn2\nn3", "node_list": "n1\nn2\nn3"}.items():
        with open(root.ssconf(key), "w") as handle:
            handle.write(value + "\n")
    from ganeti import daemons

    daemons.write_node_identity(root, "n3", "127.0.1.3")
    ha_params.write(root, ha_params.HaParams().changed(auto_failover=auto, failover_timeout=10.0))
    clock = InlineClock()
    clock.advance(now)
    return NodeProcedures(root, clock, lost_since=lambda: lost_since), clock


def call(procedures, procedure, *args):
    stub = StubTreq(NodeRpcResource(procedures))
    d = stub.request("POST", "https://node/" + procedure, data=wire.encode_request(list(args)))
    stub.flush()
    out = []
    d.addCallback(lambda response: response.content()).addBoth(out.append)
    stub.flush()
    return serializer.loads(out[0])


def test_election_status(root, inline_threads):
    procedures, _clock = voter(root, lost_since=88.0)
    ok, payload = call(procedures, "election_status", "n2")
    assert ok and NodeView.from_payload(payload) == NodeView("n3", 12.0, "n1", True, 0, 10, 5)
    ok, message = call(procedures, "election_status", 3)
    assert not ok and "node name" in message


def test_one_vote_per_epoch_recorded_durably_before_the_answer(root, inline_threads):
    procedures, _clock = voter(root)
    assert call(procedures, "election_vote", 1, "n2", 10, 5) == [True, 1]
    # on disk already: a NodeD restarted from the disk (a crash after the answer) refuses n4 for epoch 1
    assert epoch.read_record(root) == (1, "n2")
    again, _clock = voter(root)
    ok, message = call(again, "election_vote", 1, "n4", 10, 5)
    assert not ok and "voted for n2" in message
    assert call(again, "election_vote", 1, "n2", 10, 5) == [True, 1]  # the same vote again: fine


def test_a_vote_that_cannot_be_recorded_is_not_given(root, inline_threads, monkeypatch):
    procedures, _clock = voter(root)

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(epoch, "write_epoch", full_disk)
    ok, _message = call(procedures, "election_vote", 1, "n2", 10, 5)
    assert not ok
    assert procedures.election.voted_at is None and epoch.read_record(root) == (0, None)


def test_votes_refused(root, inline_threads):
    procedures, _clock = voter(root, lost_since=95.0)  # lost 5 s ago, timeout 10 s
    ok, message = call(procedures, "election_vote", 1, "n2", 10, 5)
    assert not ok and "only 5.0 s ago" in message
    procedures, _clock = voter(root)
    for args, why in (([1, "n2", 9, 5], "behind"), ([1, "n1", 10, 5], "the master this node lost"),
                      ([0, "n2", 10, 5], "positive"), ([1, "n 2", 10, 5], "node name"), ([1, "n2", -1, 5], "serial")):
        ok, message = call(procedures, "election_vote", *args)
        assert not ok and why in message, (args, message)
    procedures, _clock = voter(root, auto=False)
    ok, message = call(procedures, "election_vote", 1, "n2", 10, 5)
    assert not ok and "automatic failover is off" in message
    assert epoch.read_record(root) == (0, None)  # nothing recorded by any refusal


def test_after_a_vote_the_winner_has_time_to_take_over(root, inline_threads):
    procedures, clock = voter(root)
    assert call(procedures, "election_vote", 1, "n2", 10, 5)[0]
    clock.advance(TAKEOVER_ALLOWANCE + 9)
    ok, message = call(procedures, "election_vote", 2, "n4", 10, 5)
    assert not ok and "only 9.0 s ago" in message
    clock.advance(1)
    assert call(procedures, "election_vote", 2, "n4", 10, 5) == [True, 2]
    clock.advance(TAKEOVER_ALLOWANCE + 10)
    ok, message = call(procedures, "election_vote", 1, "n4", 10, 5)  # an older epoch
    assert not ok and "stale master epoch 1" in message


def test_the_candidate_voted_for_may_ask_again_at_once(root, inline_threads):
    """Its first election failed (split votes): the allowance holds back only the others."""
    procedures, clock = voter(root)
    assert call(procedures, "election_vote", 1, "n2", 10, 5)[0]
    clock.advance(1)
    assert not call(procedures, "election_vote", 2, "n4", 10, 5)[0]
    assert call(procedures, "election_vote", 2, "n2", 10, 5) == [True, 2]
    ok, payload = call(procedures, "election_status", "n2")
    assert NodeView.from_payload(payload).lost(10)
    ok, payload = call(procedures, "election_status", "n4")
    assert not NodeView.from_payload(payload).lost(10)


def test_a_node_without_heartbeat_never_votes(root, inline_threads):
    procedures, _clock = voter(root)
    procedures.election._lost_since = None
    ok, message = call(procedures, "election_vote", 1, "n2", 10, 5)
    assert not ok and "still hears the master" in message


# --- the candidate's tick -------------------------------------------------------------------------


def test_the_candidate_starts_a_round_only_near_the_timeout_with_auto_failover_on(root, inline_threads):
    """It looks at the others from lead() seconds before the timeout (its votes wait for the timeout:
    test_votes_are_asked_the_moment_a_majority_lost_the_master_for_the_timeout)."""
    procedures, clock = voter(root, lost_since=95.0)
    service = ElectionService(root, clock, 1811)
    service.procedures = procedures.election
    rounds = []

    async def round_(_procedures, timeout):
        rounds.append(timeout)

    service.round = round_
    service.startService()
    clock.advance(3)
    assert rounds == []  # lost for 8 s at most
    clock.advance(1)
    assert rounds == [10.0]
    ha_params.write(root, ha_params.HaParams().changed(auto_failover=False))
    clock.advance(5)
    assert rounds == [10.0]
    service.stopService()


class FakeElectionRpc:
    """The nodes n1 (the master, dead), n2 and n3 (the most up to date) as the candidate's RPC sees them."""

    def __init__(self, clock, lost_since, calls):
        self.clock, self.lost_since, self.calls = clock, lost_since, calls

    def _lost(self, name):
        since = self.lost_since[name]
        return None if since is None else self.clock.seconds() - since

    async def run(self, addresses, call, **_options):
        from ganeti.rpc.client import RpcResult

        self.calls.append((call.procedure, self.clock.seconds()))
        answers = {"n1": RpcResult.failure("n1", "node unreachable: connection refused")}
        for name in ("n2", "n3"):
            lost = self._lost(name)
            if call.procedure == "election_status":
                answers[name] = RpcResult(name, True, NodeView(name, lost, "n1", True, 0, 11 if name == "n3" else 10,
                                                               5).to_payload())
            elif lost is not None and lost >= 10.0:
                answers[name] = RpcResult(name, True, call.args[0])
            else:
                answers[name] = RpcResult.failure(name, "vote refused: lost only %s s ago" % lost)
        return answers

    async def close(self):
        pass


def test_votes_are_asked_the_moment_a_majority_lost_the_master_for_the_timeout(root, inline_threads, monkeypatch):
    """n3 (this node) lost the master at 95, n2 at 95.6: the status is asked a second early, the
    votes at 105.6 (n2's timeout, not the next tick, nor before n2 may give its vote), and n3 takes over."""
    import ganeti.rpc

    procedures, clock = voter(root, lost_since=95.0)
    with open(root.ssconf("node_primary_ips"), "w") as handle:
        handle.write("n1 127.0.1.1\nn2 127.0.1.2\nn3 127.0.1.3\n")
    calls = []
    rpc = FakeElectionRpc(clock, {"n1": None, "n2": 95.6, "n3": 95.0}, calls)
    monkeypatch.setattr(ganeti.rpc, "RpcClient", type("R", (), {"from_paths": staticmethod(lambda *a, **k: rpc)}))
    service = ElectionService(root, clock, 1811, interval=0.25)
    service.procedures = procedures.election
    took_over = []

    async def take_over(epoch_, timeout):
        took_over.append((epoch_, clock.seconds()))
        return 0

    service._take_over = take_over
    service.startService()
    clock.pump([0.25] * 16)  # up to 104
    assert calls == [("election_status", 104.0)]
    clock.pump([0.25] * 6)  # up to 105.5
    assert [c for c in calls if c[0] == "election_vote"] == []
    clock.pump([0.01] * 12)
    votes = [when for procedure, when in calls if procedure == "election_vote"]
    assert len(votes) == 1 and 105.6 <= votes[0] < 105.65
    assert took_over == [(1, votes[0])]
    assert service.rounds == [(PROCEED, True, 0)]
    service.stopService()


def test_a_candidate_still_short_of_the_timeout_looks_again_at_the_next_tick(root, inline_threads, monkeypatch):
    """Looking early never makes it wait long: the other node lost the master only now."""
    import ganeti.rpc

    procedures, clock = voter(root, lost_since=95.0)
    with open(root.ssconf("node_primary_ips"), "w") as handle:
        handle.write("n1 127.0.1.1\nn2 127.0.1.2\nn3 127.0.1.3\n")
    calls = []
    rpc = FakeElectionRpc(clock, {"n1": None, "n2": None, "n3": 95.0}, calls)
    monkeypatch.setattr(ganeti.rpc, "RpcClient", type("R", (), {"from_paths": staticmethod(lambda *a, **k: rpc)}))
    service = ElectionService(root, clock, 1811, interval=0.25)
    service.procedures = procedures.election
    service.startService()
    clock.pump([0.25] * 16)  # 104: n2 still hears the master
    rpc.lost_since["n2"] = 104.0
    clock.pump([0.25] * 4)  # 105: the round at 104.25 sees n2 due at 114.25: too far to wait for
    statuses = [when for procedure, when in calls if procedure == "election_status"]
    assert statuses == [104.0, 104.25, 104.5, 104.75, 105.0]
    assert [c for c in calls if c[0] == "election_vote"] == []
    service.stopService()


# --- the master's step-down -----------------------------------------------------------------------


def test_step_down_clock():
    clock = StepDownClock()
    assert not clock.update(0, 1, 3, 10)
    assert not clock.update(9.9, 1, 3, 10)
    assert not clock.update(10, 2, 3, 10)  # a majority again: the count restarts
    assert not clock.update(11, 1, 3, 10)
    assert clock.update(21, 1, 3, 10)
    assert clock.without_majority_for(21) == 10


def test_reachable_count():
    snapshot = {"n1": {"liveness": rost.UNREACHABLE}, "n2": {"liveness": rost.UP}, "n3": {"liveness": rost.UNKNOWN},
                "n4": {"liveness": rost.UNREACHABLE}, "n5": {"liveness": rost.OFFLINE}}
    assert reachable_count(snapshot, "n1") == 3  # itself, n2, n3 (not heard of yet)


class Liveness:
    def __init__(self, states: dict[str, str]) -> None:
        self.members = frozenset(states)
        self.states = states

    def snapshot(self):
        return {name: {"liveness": state} for name, state in self.states.items()}


def step_down(root, states, auto=True):
    root.ensure_dirs()
    ha_params.write(root, ha_params.HaParams().changed(auto_failover=auto, failover_timeout=5.0))
    clock = InlineClock()
    events = []
    service = StepDown(root, clock, Liveness(states), "n1", lambda why: events.append(("refuse", why)),
                       lambda: events.append(("stop", None)),
                       stop_wconfd=lambda _paths: events.append(("wconfd", None)))
    service.startService()
    return service, clock, events


def test_a_master_without_majority_steps_down(root, inline_threads):
    service, clock, events = step_down(root, {"n1": rost.UP, "n2": rost.UNREACHABLE, "n3": rost.UNREACHABLE})
    clock.pump([0.5] * 10)
    assert events == []
    clock.pump([0.5] * 2)
    assert [kind for kind, _ in events] == ["refuse", "wconfd", "stop"]
    assert "reached only 1 of 3 nodes" in events[0][1] and service.reason == events[0][1]
    clock.pump([0.5] * 10)
    assert len(events) == 3  # once


def test_no_step_down_with_a_majority_or_with_auto_failover_off(root, inline_threads):
    _service, clock, events = step_down(root, {"n1": rost.UP, "n2": rost.UP, "n3": rost.UNREACHABLE})
    clock.pump([0.5] * 40)
    assert events == []
    _service, clock, events = step_down(root, {"n1": rost.UP, "n2": rost.UNREACHABLE, "n3": rost.UNREACHABLE},
                                        auto=False)
    clock.pump([0.5] * 40)
    assert events == []


def test_when_a_majority_will_have_lost_the_master():
    views = {"n2": view("n2", 9.2), "n3": view("n3", 9.5), "n4": view("n4", None)}
    assert majority_lost_in("n2", views, 3, 10) == pytest.approx(0.8)
    assert majority_lost_in("n3", views, 3, 10) == pytest.approx(0.8)  # n3 itself is early, n2 is needed
    assert majority_lost_in("n4", views, 3, 10) is None  # hears the master
    assert majority_lost_in("n2", views, 5, 10) is None  # 2 of 5 lost it
    assert majority_lost_in("n2", {"n2": view("n2", 12), "n3": view("n3", 30)}, 3, 10) == 0.0
    five = {"n2": view("n2", 9.0), "n3": view("n3", 9.9), "n4": view("n4", 9.9), "n5": view("n5", 9.95)}
    assert majority_lost_in("n2", five, 5, 10) == pytest.approx(1.0)  # a majority, but n2 needs a second yet
    assert majority_lost_in("n2", {}, 3, 10) is None
    assert lead(10) == 1.0 and lead(1) == 0.5


def test_aged_views_decide_as_the_nodes_will_vote():
    views = {"n2": view("n2", 9.2), "n3": view("n3", 9.5), "n4": view("n4", None)}
    assert decide("n2", views, 3, 10).action == WAIT
    later = aged(views, 0.8)
    assert later["n2"].lost_for == pytest.approx(10.0) and later["n4"].lost_for is None
    assert decide("n2", later, 3, 10).action == PROCEED
    with pytest.raises(ValueError):
        aged(views, -1)


def test_waiting_for_the_others_to_lose_the_master_looks_again_soon():
    """The other nodes may have lost the master a moment later: no long wait then (the failover's latency)."""
    assert decide("n2", {"n2": view("n2"), "n3": view("n3", 9.9)}, 3, 10).soon
    assert not decide("n3", {"n2": view("n2"), "n3": view("n3")}, 3, 10).soon


def test_a_vote_ranks_configs_by_the_epoch_of_the_master_that_wrote_them(root, inline_threads):
    procedures, _clock = voter(root)
    epoch.write_config_epoch(root, 2)  # this node's config (serial 10) came from the master of epoch 2
    ok, payload = call(procedures, "election_status", "n2")
    assert ok and NodeView.from_payload(payload).config_epoch == 2
    # a replaced master's higher serial, written at epoch 1: refused
    ok, message = call(procedures, "election_vote", 3, "n2", 12, 5, 1)
    assert not ok and "behind" in message
    ok, message = call(procedures, "election_vote", 3, "n2", 12, 5)  # a candidate that sends no config epoch: 0
    assert not ok and "behind" in message
    ok, message = call(procedures, "election_vote", 3, "n2", 12, 5, -1)
    assert not ok and "config_epoch" in message
    assert epoch.read_record(root) == (0, None)  # nothing recorded by any refusal
    assert call(procedures, "election_vote", 3, "n2", 10, 5, 2) == [True, 3]
