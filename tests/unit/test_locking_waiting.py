"""Tests for the waiting queue of L{ganeti.locking.manager.LockManager}: pending requests,
priorities, fairness, grants and the dirty set."""

from __future__ import annotations

import pytest

from ganeti.errors import LockError, PendingRequestError
from ganeti.locking import BGL
from tests.unit.locking_helpers import N1, N2, A, B, C, G, O, R, S, X, make

# Waiting


def test_update_waiting_granted_now() -> None:
    manager = make()
    assert manager.update_waiting(O(1), 0, [(BGL, S), (A, X)]) == []
    assert manager.owned(O(1)) == [(BGL, S), (A, X)]
    assert not manager.has_pending(O(1))
    assert manager.take_granted() == []


def test_update_waiting_satisfied() -> None:
    manager = make({1: [(BGL, S), (A, X)], 2: [(BGL, S)]})
    generation = manager.generation
    assert manager.update_waiting(O(1), 0, [(A, X), (B, R), (BGL, S)]) == []
    assert manager.generation == generation
    assert manager.take_dirty() == set()
    # Not satisfied: exclusive held, shared asked; order rule applies.
    with pytest.raises(LockError, match="Order violation"):
        manager.update_waiting(O(1), 0, [(BGL, X)])


def test_update_waiting_errors_not_queued() -> None:
    manager = make({1: [(B, S)], 2: [(A, X)]})
    with pytest.raises(LockError, match="Order violation"):
        manager.update_waiting(O(1), 0, [(A, S)])
    with pytest.raises(LockError, match="does not exist"):
        manager.update_waiting(O(3), 0, [("instance/zz", S)])
    with pytest.raises(LockError, match="priority"):
        manager.update_waiting(O(3), "0", [(A, S)])
    with pytest.raises(LockError, match="priority"):
        manager.try_update(O(3), [(A, S)], prio=None)
    assert manager.pending() == []


def test_queued() -> None:
    manager = make({1: [(A, X)]})
    request = [(BGL, S), (A, S)]
    assert manager.update_waiting(O(2), 3, request) == [O(1)]
    assert manager.has_pending(O(2))
    assert manager.pending() == [(3, O(2), request)]
    assert manager.owners() == {O(1), O(2)}
    assert manager.owner_state(O(2)) == ([], (3, request))
    assert manager.owned(O(2)) == []
    assert manager.blockers_of(O(2)) == [O(1)]
    assert manager.blockers_of(O(1)) == []


def test_release_grants_most_urgent_waiter() -> None:
    manager = make({1: [(A, X)]})
    assert manager.update_waiting(O(2), 0, [(A, X)]) == [O(1)]
    assert manager.update_waiting(O(3), -10, [(A, X)]) == [O(1)]
    assert manager.update_waiting(O(4), 5, [(A, X)]) == [O(1)]
    assert [(p, o) for p, o, _ in manager.pending()] == [(-10, O(3)), (0, O(2)), (5, O(4))]
    manager.free(O(1))
    assert manager.take_granted() == [O(3)]
    assert manager.owned(O(3)) == [(A, X)]
    assert manager.blockers_of(O(2)) == [O(3)]
    manager.free(O(3))
    assert manager.take_granted() == [O(2)]
    manager.free(O(2))
    assert manager.take_granted() == [O(4)]
    assert manager.pending() == []


def test_equal_priorities_in_arrival_order() -> None:
    manager = make({1: [(A, X)]})
    for ident in (5, 3, 4, 2):
        assert manager.update_waiting(O(ident), 0, [(A, X)]) == [O(1)]
    order = []
    holder = O(1)
    for _ in range(4):
        manager.free(holder)
        granted = manager.take_granted()
        assert len(granted) == 1
        holder = granted[0]
        order.append(holder.ident)
    assert order == [5, 3, 4, 2]


def test_shared_waiters_granted_together() -> None:
    manager = make({1: [(A, X)]})
    for ident in (2, 3, 4):
        assert manager.update_waiting(O(ident), 0, [(A, S)]) == [O(1)]
    manager.try_update(O(1), [(A, S)])
    assert manager.take_granted() == [O(2), O(3), O(4)]


def test_non_conflicting_less_urgent_granted_at_once() -> None:
    manager = make({1: [(A, X), (B, X)]})
    assert manager.update_waiting(O(2), 0, [(A, X)]) == [O(1)]
    # Less urgent, but nothing ahead of it conflicts: granted at once.
    assert manager.update_waiting(O(3), 10, [(C, X)]) == []
    assert manager.owned(O(3)) == [(C, X)]
    assert manager.update_waiting(O(4), 10, [(B, X)]) == [O(1)]
    # Releasing b lets the less urgent waiter in, although 2 still waits.
    manager.try_update(O(1), [(B, R)])
    assert manager.take_granted() == [O(4)]
    assert manager.has_pending(O(2))


def test_pending_rule() -> None:
    manager = make({1: [(BGL, X)], 2: [(N1, S)]})
    request = [(N2, S), (N1, X)]
    assert manager.update_waiting(O(2), 0, [("node/n2", S)]) == []
    manager = make({1: [(N1, X)], 2: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, request) == [O(1)]
    message = "cannot update locks while having pending requests"
    with pytest.raises(PendingRequestError, match=message):
        manager.try_update(O(2), [(N2, S)])
    with pytest.raises(PendingRequestError, match=message):
        manager.try_update(O(2), [])
    with pytest.raises(PendingRequestError, match=message):
        manager.update_waiting(O(2), 0, [(N1, X)])
    with pytest.raises(PendingRequestError, match=message):
        manager.update_waiting(O(2), 0, [(N2, X), (N1, X)])
    with pytest.raises(PendingRequestError):
        manager.opportunistic_union(O(2), [(N2, S)])
    with pytest.raises(PendingRequestError):
        manager.guarded_opportunistic_union(1, O(2), [(N2, S)])
    with pytest.raises(PendingRequestError):
        manager.intersect(O(2), [])
    with pytest.raises(PendingRequestError):
        manager.free_level(O(2), "cluster")
    with pytest.raises(PendingRequestError):
        manager.downgrade_level(O(2), "cluster")
    with pytest.raises(PendingRequestError):
        manager.add_locks(O(2), ["node/new"])
    assert manager.owned(O(2)) == [(BGL, S)]
    assert manager.pending() == [(0, O(2), request)]


def test_identical_resubmission_keeps_place() -> None:
    manager = make({1: [(A, X)]})
    assert manager.update_waiting(O(2), 0, [(BGL, S), (A, X)]) == [O(1)]
    assert manager.update_waiting(O(3), 0, [(A, X)]) == [O(1)]
    generation = manager.generation
    manager.take_dirty()
    # Same pairs in another order, same or less urgent prio: a no-op.
    assert manager.update_waiting(O(2), 0, [[A, X], [BGL, S]]) == [O(1)]
    assert manager.update_waiting(O(2), 7, [(BGL, S), (A, X)]) == [O(1)]
    assert manager.generation == generation
    assert manager.take_dirty() == set()
    assert [o for _, o, _ in manager.pending()] == [O(2), O(3)]
    # Resubmitting more urgently moves it (priority escalation).
    assert manager.update_waiting(O(3), -1, [(A, X)]) == [O(1)]
    assert [(p, o) for p, o, _ in manager.pending()] == [(-1, O(3)), (0, O(2))]


def test_escalation_can_grant() -> None:
    manager = make({1: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, [(BGL, X)]) == [O(1)]
    assert manager.update_waiting(O(3), 5, [(BGL, S)]) == [O(2)]
    assert manager.update_waiting(O(3), -5, [(BGL, S)]) == []
    assert manager.owned(O(3)) == [(BGL, S)]


def test_free_drops_pending() -> None:
    manager = make({1: [(A, X)], 2: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, [(A, S)]) == [O(1)]
    manager.free(O(2))
    assert not manager.has_pending(O(2))
    assert manager.owned(O(2)) == []
    assert manager.owners() == {O(1)}
    manager.free(O(1))
    assert manager.take_granted() == []
    manager.free(O(9))


def test_cancel_pending() -> None:
    manager = make({1: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, [(BGL, X)]) == [O(1)]
    assert manager.update_waiting(O(3), 0, [(BGL, S)]) == [O(2)]
    assert manager.cancel_pending(O(2)) is True
    assert manager.cancel_pending(O(2)) is False
    # O(3) was only deferred behind O(2): it gets in now.
    assert manager.take_granted() == [O(3)]
    assert manager.owned(O(3)) == [(BGL, S)]


def test_free_of_waiter_lets_deferred_in() -> None:
    manager = make({1: [(BGL, S)]})
    assert manager.update_waiting(O(3), 0, [(BGL, X)]) == [O(1)]
    assert manager.update_waiting(O(4), 0, [(BGL, S)]) == [O(3)]
    manager.free(O(3))
    assert manager.take_granted() == [O(4)]


def test_order_after_releasing_highest() -> None:
    """The highest held lock is recomputed after it is released."""
    manager = make({1: [(A, S), (N1, S)]})
    assert manager.try_update(O(1), [(N1, R)]) == []
    assert manager.try_update(O(1), [(B, X)]) == []
    with pytest.raises(LockError, match="Order violation: requesting 'instance/a' .* while holding 'instance/b'"):
        manager.try_update(O(1), [(A, X)])


def test_no_starvation() -> None:
    """An exclusive BGL waiter is not starved by fresh shared requests."""
    manager = make({1: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, [(BGL, X)]) == [O(1)]
    for ident in (10, 11, 12):
        assert manager.try_update(O(ident), [(BGL, S)]) == [O(2)]
        assert manager.owned(O(ident)) == []
    assert manager.update_waiting(O(13), 0, [(BGL, S)]) == [O(2)]
    assert manager.update_waiting(O(14), 3, [(BGL, S)]) == [O(2)]
    assert manager.blockers_of(O(13)) == [O(2)]
    manager.free(O(1))
    assert manager.take_granted() == [O(2)]
    assert manager.blockers_of(O(13)) == [O(2)]
    manager.free(O(2))
    assert manager.take_granted() == [O(13), O(14)]
    # A more urgent fresh request is not deferred behind a less urgent waiter.
    manager = make({1: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, [(BGL, X)]) == [O(1)]
    assert manager.try_update(O(3), [(BGL, S)], prio=-1) == []
    assert manager.try_update(O(4), [(BGL, S)], prio=0) == [O(2)]
    assert manager.try_update(O(4), [(A, S)], prio=0) == []


def test_holders_are_not_deferred() -> None:
    manager = make({1: [(A, S)], 7: [(BGL, S)]})
    assert manager.update_waiting(O(2), 0, [(G, X)]) == [O(1)]
    # Owner 7 holds a lock: it may take instance/b although it conflicts
    # with the waiter (deferring it could deadlock).
    assert manager.try_update(O(7), [(B, S)]) == []
    # A fresh owner is deferred, with the waiter as blocker.
    assert manager.try_update(O(8), [(C, S)]) == [O(2)]
    assert manager.opportunistic_union(O(8), [(C, S)]) == []
    assert manager.add_locks(O(8), ["instance/new"]) == [O(2)]
    # Real blockers are reported in preference to the waiters.
    assert manager.try_update(O(8), [(B, X)]) == [O(7)]
    # Not conflicting with the waiter: fine.
    assert manager.try_update(O(8), [(N1, X)]) == []


def test_cascading_grants() -> None:
    # The earlier waiter releases what the later one needs: one pass.
    manager = make({1: [(B, X)], 2: [(A, X)]})
    assert manager.update_waiting(O(2), 0, [(B, X), (A, R)]) == [O(1)]
    assert manager.update_waiting(O(3), 0, [(A, S)]) == [O(2)]
    manager.free(O(1))
    assert manager.take_granted() == [O(2), O(3)]
    assert manager.owned(O(2)) == [(B, X)]
    assert manager.owned(O(3)) == [(A, S)]
    # The later waiter releases what the earlier one needs: a second pass.
    manager = make({1: [(B, X)], 2: [(A, X)]})
    assert manager.update_waiting(O(3), 0, [(A, S)]) == [O(2)]
    assert manager.update_waiting(O(2), 0, [(B, X), (A, R)]) == [O(1)]
    manager.free(O(1))
    assert manager.take_granted() == [O(2), O(3)]
    assert manager.pending() == []


def test_take_granted_clears() -> None:
    manager = make({1: [(A, X)]})
    manager.update_waiting(O(2), 0, [(A, X)])
    assert manager.take_granted() == []
    manager.free(O(1))
    assert manager.take_granted() == [O(2)]
    assert manager.take_granted() == []


def test_take_dirty_and_generation() -> None:
    manager = make()
    g0 = manager.generation
    assert manager.try_update(O(1), [(A, X)]) == []
    assert manager.take_dirty() == {O(1)}
    assert manager.take_dirty() == set()
    g1 = manager.generation
    assert g1 > g0
    assert manager.try_update(O(2), [(A, S)]) == [O(1)]
    assert manager.take_dirty() == set()
    assert manager.generation == g1
    assert manager.update_waiting(O(2), 0, [(A, S)]) == [O(1)]
    assert manager.take_dirty() == {O(2)}
    g2 = manager.generation
    assert g2 > g1
    manager.free(O(1))
    assert manager.take_dirty() == {O(1), O(2)}
    assert manager.generation > g2
    g3 = manager.generation
    manager.free(O(1))
    manager.intersect(O(2), [A])
    manager.try_update(O(2), [(A, S)])
    assert manager.generation == g3
    assert manager.take_dirty() == set()
