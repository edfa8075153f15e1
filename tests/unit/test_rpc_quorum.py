"""A node RPC round that has what it needs (a majority) does not wait for the silent nodes."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.task import Clock

from ganeti.ha.failover import answered, fenced, named_by_majority
from ganeti.rpc import client
from ganeti.rpc.client import RpcResult


def round_of(clock: Clock, names: list[str], enough: Any, grace: float = 0.3):
    """Pending calls, one per name: (their deferreds to fire, the results as they end, whether each was cancelled)."""
    cancelled: dict[str, bool] = {}
    raw: dict[str, defer.Deferred] = {}
    for name in names:
        raw[name] = defer.Deferred(lambda d, name=name: cancelled.__setitem__(name, True))
    ended: dict[str, RpcResult] = {}
    out = client._until_enough(clock, names, [raw[n] for n in names], enough, grace, "election_status")
    def keep(result: RpcResult, name: str) -> RpcResult:
        ended[name] = result
        return result

    for name, d in zip(names, out):
        d.addCallback(keep, name)
    return raw, ended, cancelled


def test_a_majority_answered_the_silent_node_is_left_after_the_grace():
    clock = Clock()
    raw, ended, cancelled = round_of(clock, ["a", "b", "c"], answered(3, ["a"]))
    raw["a"].callback(RpcResult("a", True, 1))
    raw["b"].callback(RpcResult("b", True, 2))
    clock.advance(0.29)
    assert "c" not in ended and not cancelled
    clock.advance(0.02)
    assert cancelled == {"c": True}
    assert ended["c"].failed and client.ABANDONED in ended["c"].fail_msg
    assert ended["a"].payload == 1 and ended["b"].payload == 2


def test_a_node_answering_within_the_grace_counts():
    clock = Clock()
    raw, ended, cancelled = round_of(clock, ["a", "b", "c"], answered(3))
    raw["a"].callback(RpcResult("a", True, 1))
    raw["b"].callback(RpcResult("b", True, 2))
    clock.advance(0.1)
    raw["c"].callback(RpcResult("c", True, 3))
    assert ended["c"].payload == 3 and not cancelled
    assert not clock.getDelayedCalls()  # nothing left to cut


def test_failures_do_not_count_towards_the_majority():
    clock = Clock()
    raw, ended, cancelled = round_of(clock, ["a", "b", "c"], answered(3))
    raw["a"].callback(RpcResult("a", True, 1))
    raw["b"].callback(RpcResult.failure("b", "vote refused"))
    clock.advance(10)
    assert "c" not in ended and not cancelled  # the call's own timeout decides
    raw["c"].callback(RpcResult("c", True, 3))
    assert set(ended) == {"a", "b", "c"}


def test_a_required_node_is_waited_for():
    """The caller's own node must be among those answered (its state is what it starts from)."""
    clock = Clock()
    raw, ended, cancelled = round_of(clock, ["a", "b", "c"], answered(3, ["a"]))
    raw["b"].callback(RpcResult("b", True, 2))
    raw["c"].callback(RpcResult("c", True, 3))
    clock.advance(10)
    assert "a" not in ended and not cancelled


def test_a_start_up_vote_is_won_without_the_old_master():
    clock = Clock()
    raw, ended, cancelled = round_of(clock, ["old", "new", "c"], named_by_majority("new", 3))
    raw["new"].callback(RpcResult("new", True, "new"))
    raw["c"].callback(RpcResult("c", True, "old"))  # a node that still names the old master is no vote
    clock.advance(10)
    assert not cancelled and "old" not in ended  # one vote of three: the old master's answer may still count
    clock2 = Clock()
    raw, ended, cancelled = round_of(clock2, ["old", "new", "c"], named_by_majority("new", 3))
    raw["new"].callback(RpcResult("new", True, "new"))
    raw["c"].callback(RpcResult("c", True, "new"))
    clock2.advance(0.3)
    assert cancelled == {"old": True} and ended["old"].failed


def ok(*names):
    return {name: RpcResult(name, True, 1) for name in names}


def test_the_fence_needs_a_majority_of_the_candidates_too():
    """5 nodes, candidates m (the old master), me and x: me and two plain nodes hold a majority of nodes,
    yet m and x together could still acknowledge for the old master; one of them must hold the epoch."""
    enough = fenced(5, ["m", "me", "x"], "me")
    assert not enough(ok("me", "p1", "p2"))
    assert enough(ok("me", "p1", "x"))
    assert enough(ok("me", "m", "p2"))  # x alone is no majority of the candidates
    assert not enough(ok("m", "x", "p1"))  # not without this node


def test_only_the_named_nodes_count():
    enough = answered(3, ["me"], among=["me", "x", "m"])
    assert not enough(ok("me", "p1", "p2"))
    assert enough(ok("me", "x"))
