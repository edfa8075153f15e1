"""Tests for L{ganeti.locking.manager.LockManager} and L{ganeti.locking.Owner}."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import pytest

from ganeti.errors import LockError
from ganeti.locking import BGL, CONFIG_LOCK, NAL, LockManager, Owner
from tests.testdata import TESTDATA as _TESTDATA_DIR
from tests.unit.locking_helpers import CG, N1, N2, NAMES, NG, NR1, A, B, C, G, O, R, S, X, make

TESTDATA = str(_TESTDATA_DIR / "locks.data")


class Case(NamedTuple):
    """Owners hold C{holdings}; C{owner} asks C{request}; we expect C{expect}.

    C{expect} is the list of blocking owner idents, or an exception class
    (then C{match} must be in its message).  C{after} is C{owner}'s
    expected holdings when the request is applied.
    """

    id: str
    holdings: dict[Any, list[tuple[str, str]]]
    owner: Any
    request: Any
    expect: Any
    after: list[tuple[str, str]] | None = None
    match: str = ""


CASES = [
    # Blocking table: exclusive on a member.
    Case("x-member/member-shared", {2: [(A, S)]}, 1, [(A, X)], [2]),
    Case("x-member/member-exclusive", {2: [(A, X)]}, 1, [(A, X)], [2]),
    Case("x-member/group-shared", {2: [(G, S)]}, 1, [(A, X)], [2]),
    Case("x-member/group-exclusive", {2: [(G, X)]}, 1, [(A, X)], [2]),
    Case("x-member/sibling-exclusive", {2: [(B, X)]}, 1, [(A, X)], [], [(A, X)]),
    Case("x-member/other-level-group", {2: [(NG, X)]}, 1, [(A, X)], [], [(A, X)]),
    Case("x-member/same-uuid-other-level", {2: [(N1, X)]}, 1, [(NR1, X)], [], [(NR1, X)]),
    Case("x-bgl/bgl-shared", {2: [(BGL, S)]}, 1, [(BGL, X)], [2]),
    Case("x-bgl/cluster-group-shared", {2: [(CG, S)]}, 1, [(BGL, X)], [2]),
    Case("x-nal/nal-group-shared", {2: [("node-alloc/[lockset]", S)]}, 1, [(NAL, X)], [2]),
    Case("x-bgl/config-exclusive", {2: [(CONFIG_LOCK, X)]}, 1, [(BGL, X)], [], [(BGL, X)]),
    # Exclusive on a group lock.
    Case("x-group/group-shared", {2: [(G, S)]}, 1, [(G, X)], [2]),
    Case("x-group/group-exclusive", {2: [(G, X)]}, 1, [(G, X)], [2]),
    Case("x-group/member-shared", {2: [(A, S)]}, 1, [(G, X)], [2]),
    Case("x-group/member-exclusive", {2: [(A, X)]}, 1, [(G, X)], [2]),
    Case("x-group/other-level-member", {2: [(N1, X)]}, 1, [(G, X)], [], [(G, X)]),
    Case("x-group/other-level-group", {2: [(NG, X)]}, 1, [(G, X)], [], [(G, X)]),
    Case("x-cluster-group/bgl-shared", {2: [(BGL, S)]}, 1, [(CG, X)], [2]),
    Case("x-cluster-group/config", {2: [(CONFIG_LOCK, X)]}, 1, [(CG, X)], [], [(CG, X)]),
    Case("x-group/members-of-many", {2: [(A, S)], 3: [(B, X)], 4: [(N1, X)]}, 1, [(G, X)], [2, 3]),
    # Shared on a member.
    Case("s-member/member-shared", {2: [(A, S)]}, 1, [(A, S)], [], [(A, S)]),
    Case("s-member/member-exclusive", {2: [(A, X)]}, 1, [(A, S)], [2]),
    Case("s-member/group-shared", {2: [(G, S)]}, 1, [(A, S)], [], [(A, S)]),
    Case("s-member/group-exclusive", {2: [(G, X)]}, 1, [(A, S)], [2]),
    Case("s-bgl/cluster-group-exclusive", {2: [(CG, X)]}, 1, [(BGL, S)], [2]),
    # Shared on a group lock.
    Case("s-group/group-shared", {2: [(G, S)]}, 1, [(G, S)], [], [(G, S)]),
    Case("s-group/group-exclusive", {2: [(G, X)]}, 1, [(G, S)], [2]),
    Case("s-group/member-shared", {2: [(A, S)]}, 1, [(G, S)], [], [(G, S)]),
    Case("s-group/member-exclusive", {2: [(A, X)]}, 1, [(G, S)], [2]),
    Case("s-group/members-mixed", {2: [(A, X)], 3: [(B, S)], 4: [(C, X)]}, 1, [(G, S)], [2, 4]),
    # The config lock is independent.
    Case("x-config/config-shared", {2: [(CONFIG_LOCK, S)]}, 1, [(CONFIG_LOCK, X)], [2]),
    Case("s-config/config-shared", {2: [(CONFIG_LOCK, S)]}, 1, [(CONFIG_LOCK, S)], [], [(CONFIG_LOCK, S)]),
    Case("x-config/all-groups", {2: [(CG, X)], 3: [(G, X)]}, 1, [(CONFIG_LOCK, X)], [], [(CONFIG_LOCK, X)]),
    # An owner never blocks itself; upgrades and downgrades.
    Case("self/upgrade", {1: [(A, S)]}, 1, [(A, X)], [], [(A, X)]),
    Case("self/upgrade-blocked", {1: [(A, S)], 2: [(A, S)]}, 1, [(A, X)], [2]),
    Case("self/downgrade", {1: [(A, X)]}, 1, [(A, S)], [], [(A, S)]),
    Case("self/group-exclusive-then-member", {1: [(G, X)]}, 1, [(A, X)], [], [(G, X), (A, X)]),
    Case("self/group-shared-then-member-shared", {1: [(G, S)]}, 1, [(A, S)], [], [(G, S), (A, S)]),
    Case("self/group-and-member-at-once", {}, 1, [(G, S), (A, X)], [], [(G, S), (A, X)]),
    # Blockers are sorted: job ids by number, then names.
    Case("sorted-blockers", {10: [(BGL, S)], 2: [(BGL, S)], "luxi": [(BGL, S)], "a": [(BGL, S)]}, 1,
         [(BGL, X)], [2, 10, "a", "luxi"]),
    # All or nothing.
    Case("atomic/one-blocked", {2: [(B, X)]}, 1, [(BGL, S), (A, X), (B, S)], [2]),
    Case("atomic/union-of-blockers", {2: [(A, X)], 3: [(N1, S)]}, 1, [(A, S), (N1, X)], [2, 3]),
    Case("atomic/several", {2: [(BGL, S)]}, 1, [(BGL, S), (A, X), (N1, S), (NR1, X)], [],
         [(BGL, S), (A, X), (N1, S), (NR1, X)]),
    # Releases.
    Case("release/not-held", {}, 1, [(A, R)], [], []),
    Case("release/unknown-name", {}, 1, [("instance/zzz", R)], [], []),
    Case("release/never-blocked", {1: [(BGL, S), (A, S)], 2: [(BGL, S), (A, S)]}, 1, [(A, R), (BGL, R)], [], []),
    Case("release/and-acquire", {1: [(BGL, S), (A, X)]}, 1, [(A, R), (B, X)], [], [(BGL, S), (B, X)]),
    Case("release/blocked-acquire", {1: [(BGL, S), (A, X)], 2: [(B, S)]}, 1, [(A, R), (B, X)], [2]),
    # Order rule.
    Case("order/member-below", {1: [(B, X)]}, 1, [(A, X)], LockError, match="Order violation"),
    Case("order/shared-below", {1: [(B, S)]}, 1, [(A, S)], LockError, match="Order violation"),
    Case("order/level-below", {1: [(N1, S)]}, 1, [(BGL, S)], LockError, match="Order violation"),
    Case("order/group-below-member", {1: [(A, S)]}, 1, [(G, S)], LockError, match="Order violation"),
    Case("order/config-is-last", {1: [(CONFIG_LOCK, X)]}, 1, [("network/net1", S)], LockError,
         match="Order violation"),
    Case("order/above", {1: [(BGL, S)]}, 1, [(CONFIG_LOCK, X)], [], [(BGL, S), (CONFIG_LOCK, X)]),
    Case("order/nothing-held", {}, 1, [("network/net1", X), (BGL, S)], [], [(BGL, S), ("network/net1", X)]),
    Case("order/group-exclusive-covers", {1: [(G, X), (N1, S)]}, 1, [(A, X)], [], [(G, X), (A, X), (N1, S)]),
    Case("order/group-shared-covers-shared", {1: [(G, S), (N1, S)]}, 1, [(A, S)], [], [(G, S), (A, S), (N1, S)]),
    Case("order/group-shared-not-exclusive", {1: [(G, S), (N1, S)]}, 1, [(A, X)], LockError,
         match="Order violation"),
    Case("order/upgrade-below", {1: [(A, S), (B, S)]}, 1, [(A, X)], LockError, match="Order violation"),
    Case("order/upgrade-highest", {1: [(A, S), (B, S)]}, 1, [(B, X)], [], [(A, S), (B, X)]),
    Case("order/upgrade-below-group-exclusive", {1: [(G, X), (A, S), (B, S)]}, 1, [(A, X)], [],
         [(G, X), (A, X), (B, S)]),
    Case("order/downgrade-below", {1: [(A, X), (B, X)]}, 1, [(A, S)], [], [(A, S), (B, X)]),
    Case("order/rerequest-below", {1: [(A, S), (B, S)]}, 1, [(A, S)], [], [(A, S), (B, S)]),
    Case("order/exclusive-covers-shared", {1: [(A, X), (B, S)]}, 1, [(A, S)], [], [(A, S), (B, S)]),
    Case("order/release-below", {1: [(A, S), (B, S)]}, 1, [(A, R)], [], [(B, S)]),
    Case("order/current-holdings", {1: [(B, S)]}, 1, [(B, R), (A, S)], LockError, match="Order violation"),
    Case("order/blocked-is-not-violation", {1: [(A, S)], 2: [(B, X)]}, 1, [(B, S)], [2]),
    # Group rule.
    Case("group-rule/member", {1: [(G, S)]}, 1, [(A, X)], LockError, match="group lock"),
    Case("group-rule/bgl", {1: [(CG, S)]}, 1, [(BGL, X)], LockError, match="group lock"),
    Case("group-rule/exclusive-group", {1: [(G, X)]}, 1, [(A, X)], [], [(G, X), (A, X)]),
    Case("group-rule/other-level", {1: [(G, S)]}, 1, [(N1, X)], [], [(G, S), (N1, X)]),
    # Inconsistent and malformed requests.
    Case("inconsistent/modes", {}, 1, [(A, S), (A, X)], LockError, match="Inconsistent requests for lock 'instance/a'"),
    Case("inconsistent/same", {}, 1, [(A, S), (A, S)], LockError, match="Inconsistent requests"),
    Case("inconsistent/release", {1: [(A, S)]}, 1, [(A, R), (A, S)], LockError, match="Inconsistent requests"),
    Case("malformed/string", {}, 1, "cluster/BGL", LockError, match="must be a list"),
    Case("malformed/dict", {}, 1, {BGL: S}, LockError, match="must be a list"),
    Case("malformed/triple", {}, 1, [(BGL, S, 1)], LockError, match="pair"),
    Case("malformed/bare-name", {}, 1, [BGL], LockError, match="pair"),
    Case("malformed/mode", {}, 1, [(BGL, "bogus")], LockError, match="Invalid lock mode"),
    Case("malformed/mode-none", {}, 1, [(BGL, None)], LockError, match="Invalid lock mode"),
    Case("malformed/mode-list", {}, 1, [(BGL, [S])], LockError, match="Invalid lock mode"),
    Case("malformed/name-int", {}, 1, [(3, S)], LockError, match="must be a string"),
    Case("malformed/name", {}, 1, [("instance/a/b", S)], LockError, match="contains '/'"),
    Case("malformed/level", {}, 1, [("disk/a", S)], LockError, match="Unknown lock level"),
    Case("json-lists", {}, 1, [[BGL, S], [A, X]], [], [(BGL, S), (A, X)]),
    Case("empty-request", {1: [(A, X)]}, 1, [], [], [(A, X)]),
    # Unknown names; group locks and built-in locks always exist.
    Case("unknown/instance", {}, 1, [("instance/x", S)], LockError, match="Lock 'instance/x' does not exist"),
    Case("unknown/node", {2: [(N1, S)]}, 1, [(N1, S), ("node/zz", X)], LockError, match="'node/zz' does not exist"),
    Case("exists/groups", {}, 1, [(CG, S), ("network/[lockset]", X), ("node-res/[lockset]", S)], [],
         [(CG, S), ("node-res/[lockset]", S), ("network/[lockset]", X)]),
    Case("exists/builtin", {}, 1, [(BGL, S), (NAL, X), (CONFIG_LOCK, S)], [],
         [(BGL, S), (NAL, X), (CONFIG_LOCK, S)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_try_update_table(case: Case) -> None:
    manager = make(case.holdings)
    before = manager.to_data()
    generation = manager.generation
    owner = O(case.owner)
    if isinstance(case.expect, type):
        with pytest.raises(case.expect, match=case.match):
            manager.try_update(owner, case.request)
        assert manager.to_data() == before
        assert manager.generation == generation
        return
    blockers = manager.try_update(owner, case.request)
    assert blockers == [O(i) for i in case.expect]
    if blockers:
        assert manager.to_data() == before
        assert manager.generation == generation
        assert manager.take_dirty() == set()
    else:
        assert case.after is not None
        assert manager.owned(owner) == case.after
        for ident, locks in case.holdings.items():
            if ident != case.owner:
                assert manager.owned(O(ident)) == locks
    assert manager.pending() == []


@pytest.mark.parametrize("case", [c for c in CASES if isinstance(c.expect, list) and c.expect],
                         ids=[c.id for c in CASES if isinstance(c.expect, list) and c.expect])
def test_update_waiting_table(case: Case) -> None:
    """A blocked request is queued with the same blockers, and granted when they go."""
    manager = make(case.holdings)
    owner = O(case.owner)
    assert manager.update_waiting(owner, 0, case.request) == [O(i) for i in case.expect]
    assert manager.has_pending(owner)
    assert manager.blockers_of(owner) == [O(i) for i in case.expect]
    for ident in case.expect:
        assert manager.take_granted() == []
        manager.free(O(ident))
    assert manager.take_granted() == [owner]
    assert not manager.has_pending(owner)
    assert manager.pending() == []


# Names


def test_removed_name_still_held() -> None:
    manager = make({2: [(B, X)]})
    manager.remove_names([B])
    assert not manager.exists(B)
    assert manager.owned(O(2)) == [(B, X)]
    assert manager.all_locks() == [G, B]
    with pytest.raises(LockError, match="does not exist"):
        manager.try_update(O(1), [(B, S)])
    with pytest.raises(LockError, match="does not exist"):
        manager.update_waiting(O(1), 0, [(B, S)])
    # The holder may keep it, and re-requesting the same mode is no error.
    assert manager.try_update(O(2), [(B, X)]) == []
    assert manager.update_waiting(O(2), 0, [(B, X)]) == []
    with pytest.raises(LockError, match="does not exist"):
        manager.try_update(O(2), [(B, S)])
    assert manager.try_update(O(2), [(B, R)]) == []
    assert manager.all_locks() == []
    assert manager.all_owners() == []
    with pytest.raises(LockError, match="does not exist"):
        manager.try_update(O(2), [(B, X)])
    manager.add_names([B])
    assert manager.try_update(O(1), [(B, S)]) == []


def test_names_exist() -> None:
    manager = LockManager([A])
    assert manager.exists(A)
    assert not manager.exists(B)
    for name in (BGL, NAL, CONFIG_LOCK, CG, G, NG, "network/[lockset]"):
        assert manager.exists(name)
    assert not manager.exists("instance/a/b")
    assert not manager.exists("bogus")
    manager.add_names([B, BGL])
    assert manager.exists(B)
    manager.remove_names([A])
    assert not manager.exists(A)
    manager.remove_names(["instance/never"])


@pytest.mark.parametrize("name", [BGL, NAL, CONFIG_LOCK, G, CG])
def test_remove_builtin(name: str) -> None:
    with pytest.raises(LockError, match="built-in"):
        LockManager().remove_names([name])


@pytest.mark.parametrize("names", [[G], ["instance/a b"], "instance/a", [3]])
def test_add_names_invalid(names: Any) -> None:
    with pytest.raises(LockError):
        LockManager(names)


def test_removed_name_drops_pending_request() -> None:
    manager = make({1: [(B, X)]})
    assert manager.update_waiting(O(2), 0, [(B, X)]) == [O(1)]
    manager.remove_names([B])
    assert not manager.has_pending(O(2))
    assert manager.take_granted() == [O(2)]
    assert manager.owned(O(2)) == []


# add_locks


def test_add_locks() -> None:
    manager = make({2: [(A, S)]})
    assert manager.add_locks(O(1), ["instance/new", "instance/new2"]) == []
    assert manager.exists("instance/new")
    assert manager.owned(O(1)) == [("instance/new", X), ("instance/new2", X)]
    assert manager.try_update(O(3), [("instance/new", S)]) == [O(1)]
    assert manager.take_dirty() == {O(1)}


def test_add_locks_existing() -> None:
    manager = make()
    for name in (A, BGL, CONFIG_LOCK, G):
        with pytest.raises(LockError, match="already exists"):
            manager.add_locks(O(1), [name])
    manager = make({2: [(B, X)]})
    manager.remove_names([B])
    with pytest.raises(LockError, match="already exists"):
        manager.add_locks(O(1), [B])
    with pytest.raises(LockError, match="Inconsistent"):
        manager.add_locks(O(1), ["instance/n", "instance/n"])
    with pytest.raises(LockError):
        manager.add_locks(O(1), ["instance/"])
    assert manager.owned(O(1)) == []


@pytest.mark.parametrize("mode", [S, X])
def test_add_locks_blocked_by_group(mode: str) -> None:
    manager = make({2: [(G, mode)]})
    generation = manager.generation
    assert manager.add_locks(O(1), ["instance/new"]) == [O(2)]
    assert not manager.exists("instance/new")
    assert manager.owned(O(1)) == []
    assert manager.generation == generation


def test_add_locks_order() -> None:
    manager = make({1: [(N1, S)]})
    with pytest.raises(LockError, match="Order violation"):
        manager.add_locks(O(1), ["instance/new"])
    assert not manager.exists("instance/new")
    assert manager.add_locks(O(1), ["node/new"]) == []
    manager = make({1: [(G, S)]})
    with pytest.raises(LockError, match="group lock"):
        manager.add_locks(O(1), ["instance/new"])
    manager = make({1: [(BGL, S), (G, X)]})
    assert manager.add_locks(O(1), ["instance/new"]) == []


# Opportunistic locking


def test_opportunistic_union() -> None:
    manager = make({1: [(BGL, S), (A, X), (N1, S)], 2: [("node/n2", X)]})
    request = [(NR1, X), (N2, X), (N1, S), ("node-res/n2", X), (B, X), ("node/gone", X)]
    # instance/b is below node/n1 (skipped: order), node/n2 blocked, node/n1
    # held already, node/gone unknown.
    assert manager.opportunistic_union(O(1), request) == [NR1, "node-res/n2"]
    assert manager.owned(O(1)) == [(BGL, S), (A, X), (N1, S), (NR1, X), ("node-res/n2", X)]
    assert manager.pending() == []


def test_opportunistic_union_sorted_and_upgrade() -> None:
    manager = make({1: [(BGL, S)]})
    request = [(N2, X), (N1, X), (BGL, X), (B, S), (A, S)]
    assert manager.opportunistic_union(O(1), request) == [BGL, A, B, N1, N2]
    assert manager.owned(O(1)) == [(BGL, X), (A, S), (B, S), (N1, X), (N2, X)]
    # Held at least as strongly: nothing to do.
    assert manager.opportunistic_union(O(1), [(N1, S), (A, S)]) == []


def test_opportunistic_union_invalid() -> None:
    manager = make()
    with pytest.raises(LockError, match="opportunistic"):
        manager.opportunistic_union(O(1), [(A, R)])
    with pytest.raises(LockError, match="Inconsistent"):
        manager.opportunistic_union(O(1), [(A, S), (A, X)])
    with pytest.raises(LockError):
        manager.opportunistic_union(O(1), [("instance/", S)])


def test_guarded_opportunistic_union() -> None:
    manager = make({1: [(BGL, S), (N1, S)], 2: [(N2, X)]})
    before = manager.to_data()
    request = [(N1, X), (N2, X), ("node-res/n2", X)]
    assert manager.guarded_opportunistic_union(3, O(1), request) == []
    # The upgrade of node/n1 and node-res/n2 were undone exactly.
    assert manager.to_data() == before
    assert manager.guarded_opportunistic_union(3, O(1), request + [(NR1, X)]) == [N1, NR1, "node-res/n2"]
    assert manager.owned(O(1)) == [(BGL, S), (N1, X), (NR1, X), ("node-res/n2", X)]
    assert manager.guarded_opportunistic_union(0, O(3), [(N2, S)]) == []
    with pytest.raises(LockError):
        manager.guarded_opportunistic_union("2", O(1), request)


def test_guarded_undo_grants_nothing_new() -> None:
    """Undoing does not let a waiter in for what was held before."""
    manager = make({1: [(N1, S)], 2: [(N2, X)]})
    assert manager.update_waiting(O(3), 0, [(N1, X)]) == [O(1)]
    assert manager.guarded_opportunistic_union(5, O(1), [(N2, S), ("node-res/n2", S)]) == []
    assert manager.take_granted() == []
    assert manager.has_pending(O(3))


# intersect, free_level, downgrade_level


def test_intersect() -> None:
    manager = make({1: [(BGL, S), (A, X), (N1, S), (N2, S)]})
    assert manager.update_waiting(O(2), 0, [(N2, X)]) == [O(1)]
    manager.intersect(O(1), [BGL, A, N1, "node/unknown", G])
    assert manager.owned(O(1)) == [(BGL, S), (A, X), (N1, S)]
    assert manager.take_granted() == [O(2)]
    manager.intersect(O(1), [])
    assert manager.owned(O(1)) == []
    manager.intersect(O(5), [A])
    with pytest.raises(LockError):
        manager.intersect(O(1), [1])


def test_free_level() -> None:
    manager = make({1: [(CG, S), (BGL, S), (G, S), (A, S), (B, S), (N1, X), (CONFIG_LOCK, S)]})
    manager.free_level(O(1), "instance")
    assert manager.owned(O(1)) == [(CG, S), (BGL, S), (N1, X), (CONFIG_LOCK, S)]
    manager.free_level(O(1), "cluster")
    assert manager.owned(O(1)) == [(N1, X), (CONFIG_LOCK, S)]
    manager.free_level(O(1), "network")
    assert manager.owned(O(1)) == [(N1, X), (CONFIG_LOCK, S)]
    with pytest.raises(LockError, match="Unknown lock level"):
        manager.free_level(O(1), "config")
    with pytest.raises(LockError, match="Unknown lock level"):
        manager.free_level(O(1), None)


def test_downgrade_level() -> None:
    manager = make({1: [(BGL, X), (G, X), (A, X), (B, S), (N1, X), (CONFIG_LOCK, X)]})
    assert manager.update_waiting(O(2), 0, [(A, S)]) == [O(1)]
    manager.downgrade_level(O(1), "instance")
    assert manager.owned(O(1)) == [(BGL, X), (G, S), (A, S), (B, S), (N1, X), (CONFIG_LOCK, X)]
    assert manager.take_granted() == [O(2)]
    manager.downgrade_level(O(1), "cluster")
    assert manager.owned(O(1)) == [(BGL, S), (G, S), (A, S), (B, S), (N1, X), (CONFIG_LOCK, X)]
    generation = manager.generation
    manager.downgrade_level(O(1), "instance")
    assert manager.generation == generation
    with pytest.raises(LockError, match="Unknown lock level"):
        manager.downgrade_level(O(1), "nodes")


# Owners


def test_owner_identity() -> None:
    a = Owner(17, "/var/run/ganeti/livelocks/job_000017_1", 4242)
    b = Owner(17, "/var/run/ganeti/livelocks/job_000017_1", 1)
    assert a == b and hash(a) == hash(b)
    assert a != Owner(17, "/other", 4242)
    assert a != Owner("17", "/var/run/ganeti/livelocks/job_000017_1", 4242)
    assert a.to_wire() == [17, "/var/run/ganeti/livelocks/job_000017_1", 4242]
    assert Owner.from_wire(a.to_wire()).pid == 4242
    assert Owner.from_wire(["luxid-ThreadId 42", "/l"]) == Owner("luxid-ThreadId 42", "/l", 9)
    assert Owner.from_wire(("x", "/l", 3)).pid == 3


@pytest.mark.parametrize(
    "value",
    [None, 17, "17", [], [17], [17, "/l", 1, 2], [17, ""], [17, None], [None, "/l"], [1.5, "/l"],
     [True, "/l"], ["", "/l"], [17, "/l", -1], [17, "/l", "1"], [17, "/l", True], {"ident": 17}],
)
def test_owner_from_wire_invalid(value: Any) -> None:
    with pytest.raises(LockError):
        Owner.from_wire(value)


def test_holders_by_identity_not_pid() -> None:
    manager = make()
    assert manager.try_update(Owner(1, "/l", 10), [(A, X)]) == []
    assert manager.try_update(Owner(1, "/l", 11), [(A, X)]) == []
    assert manager.try_update(Owner(1, "/l2", 10), [(A, S)]) == [Owner(1, "/l")]


# Queries


def test_queries() -> None:
    manager = make({1: [(BGL, S), (A, X), (N1, S)], "luxi": [(BGL, S), (N1, S)], 3: [(CONFIG_LOCK, X)]})
    assert manager.all_locks() == [CG, BGL, G, A, NG, N1, CONFIG_LOCK]
    assert manager.all_owners() == [
        (BGL, [(O(1), S), (O("luxi"), S)]),
        (A, [(O(1), X)]),
        (N1, [(O(1), S), (O("luxi"), S)]),
        (CONFIG_LOCK, [(O(3), X)]),
    ]
    assert manager.owned(O(1)) == [(BGL, S), (A, X), (N1, S)]
    assert manager.owned(O(9)) == []
    assert manager.owners() == {O(1), O("luxi"), O(3)}
    assert manager.owner_state(O(1)) == ([(BGL, S), (A, X), (N1, S)], None)


def test_set_owner_state_rebuilds_indexes() -> None:
    manager = make({1: [(A, X), (N1, S)]})
    manager.set_owner_state(O(1), [(B, S)], (2, [(C, X)]))
    assert manager.owned(O(1)) == [(B, S)]
    assert manager.pending() == [(2, O(1), [(C, X)])]
    assert manager.try_update(O(2), [(G, X)]) == [O(1)]
    assert manager.try_update(O(2), [(A, X), (N1, X)]) == []
    # Fairness sees the restored pending request.
    assert manager.try_update(O(3), [(C, S)]) == [O(1)]
    manager.set_owner_state(O(1), [], None)
    assert manager.owners() == {O(2)}
    assert manager.try_update(O(3), [(G, S)]) == [O(2)]
    manager.set_owner_state(O(5), [("instance/restored", X)], None)
    assert manager.exists("instance/restored")
    with pytest.raises(LockError):
        manager.set_owner_state(O(5), [(A, R)], None)
    with pytest.raises(LockError):
        manager.set_owner_state(O(5), [], (0,))
    with pytest.raises(LockError):
        manager.set_owner_state(O(5), [], ("0", []))


def test_set_owner_state_keeps_place() -> None:
    manager = make({1: [(A, X)]})
    manager.update_waiting(O(2), 0, [(A, X)])
    manager.update_waiting(O(3), 0, [(A, X)])
    manager.set_owner_state(O(2), [], (0, [(A, X)]))
    assert [o for _, o, _ in manager.pending()] == [O(2), O(3)]
    manager.set_owner_state(O(2), [], (0, [(A, S)]))
    assert [o for _, o, _ in manager.pending()] == [O(3), O(2)]
    manager.set_owner_state(O(1), [], None)
    assert manager.take_granted() == []
    manager.retry_pending()
    assert manager.take_granted() == [O(3)]


# Persistence


SPEC_EXAMPLE = [
    [[[17, "/var/run/ganeti/livelocks/job_000017_1700000000", 4242],
      [["cluster/BGL", "shared"], ["instance/web1.example.com", "exclusive"]]]],
    [[0, [18, "/var/run/ganeti/livelocks/job_000018_1700000001", 4250],
      [["cluster/BGL", "shared"], ["instance/web1.example.com", "exclusive"]]]],
]


def test_real_testdata_loads() -> None:
    with open(TESTDATA) as f:
        data = json.load(f)
    manager = LockManager.from_data(data)
    assert manager.to_data() == [[], []]
    assert manager.owners() == set()


def test_spec_example() -> None:
    manager = LockManager.from_data(json.loads(json.dumps(SPEC_EXAMPLE)))
    job17 = Owner(17, "/var/run/ganeti/livelocks/job_000017_1700000000")
    job18 = Owner(18, "/var/run/ganeti/livelocks/job_000018_1700000001")
    assert manager.exists("instance/web1.example.com")
    assert manager.owned(job17) == [(BGL, S), ("instance/web1.example.com", X)]
    assert manager.blockers_of(job18) == [job17]
    assert manager.to_data() == SPEC_EXAMPLE
    assert manager.take_granted() == []
    manager.free(job17)
    assert manager.take_granted() == [job18]
    assert manager.take_granted() == []
    assert manager.to_data()[0] == [[[18, "/var/run/ganeti/livelocks/job_000018_1700000001", 4250],
                                     [["cluster/BGL", "shared"], ["instance/web1.example.com", "exclusive"]]]]


def test_round_trip() -> None:
    manager = make({1: [(BGL, S), (A, X)], "luxi": [(BGL, S), (N1, S)], 3: [(CONFIG_LOCK, X)]})
    manager.update_waiting(O(4), 0, [(BGL, S), (A, X)])
    manager.update_waiting(O(5), -3, [(BGL, X)])
    manager.update_waiting(O(6), 0, [(CONFIG_LOCK, S), (A, R)])
    data = json.loads(json.dumps(manager.to_data()))
    restored = LockManager.from_data(data, NAMES)
    assert restored.to_data() == data
    assert restored.pending() == manager.pending()
    for owner in manager.owners():
        assert restored.owner_state(owner) == manager.owner_state(owner)
        assert restored.blockers_of(owner) == manager.blockers_of(owner)
    assert [o.pid for _, o, _ in restored.pending()] == [o.pid for _, o, _ in manager.pending()]
    assert restored.take_dirty() == set()
    assert restored.take_granted() == []
    assert sorted(restored.all_locks()) == sorted(manager.all_locks())


def test_from_data_grants_what_it_can() -> None:
    data = [[], [[0, [5, "/l5", 1], [[BGL, X]]], [0, [6, "/l6", 1], [[BGL, S]]]]]
    manager = LockManager.from_data(data)
    assert manager.take_granted() == [Owner(5, "/l5")]
    assert manager.blockers_of(Owner(6, "/l6")) == [Owner(5, "/l5")]
    assert manager.take_dirty() == {Owner(5, "/l5")}


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        [[]],
        [[], [], []],
        {"allocation": [], "pending": []},
        [{}, []],
        [[], None],
        [[[[1, "/l"]]], []],
        [[[[1, "/l"], [[BGL, "bogus"]]]], []],
        [[[[1, "/l"], [[BGL, "release"]]]], []],
        [[[[1, "/l"], [[BGL, S], [BGL, X]]]], []],
        [[[[1, "/l"], [["instance/a/b", S]]]], []],
        [[[[1, ""], [[BGL, S]]]], []],
        [[[[1, "/l"], [[BGL, S]]], [[1, "/l", 9], [[A, S]]]], []],
        [[[[1, "/l"], [[BGL, X]]], [[2, "/l"], [[BGL, S]]]], []],
        [[[[1, "/l"], [[A, S]]], [[2, "/l"], [[G, X]]]], []],
        [[], [[0, [1, "/l"]]]],
        [[], [["0", [1, "/l"], [[BGL, S]]]]],
        [[], [[0, [1, "/l"], [[BGL, "bogus"]]]]],
        [[], [[0, [1, "/l"], [[BGL, S]]], [1, [1, "/l"], [[A, S]]]]],
        [[], [[0, "job", [[BGL, S]]]]],
    ],
)
def test_from_data_invalid(data: Any) -> None:
    with pytest.raises(LockError):
        LockManager.from_data(data)
