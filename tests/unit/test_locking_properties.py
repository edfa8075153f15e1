"""Property tests for L{ganeti.locking.manager.LockManager}.

A hypothesis state machine drives a manager with five owners over a small
name space and checks it, after every step, against a brute-force model of
Ganeti's rules written independently here: safety (no two owners hold
conflicting locks), index consistency, the outcome of each request, and that
the queue is at a fixpoint (no pending request could proceed).  At the end,
owners holding locks are freed again and again, as if their jobs finished,
and every pending request must be granted.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ganeti.errors import LockError, PendingRequestError
from ganeti.locking import BGL, LockManager, Owner
from ganeti.locking.names import LockName

S, X, R = "shared", "exclusive", "release"
CG, G, NG = "cluster/[lockset]", "instance/[lockset]", "node/[lockset]"
MEMBERS = ["instance/a", "instance/b", "instance/c", "node/n1", "node/n2"]
LOCKS = [CG, BGL, G, NG] + MEMBERS
OWNERS = [Owner(i, "/var/run/ganeti/livelocks/job_%d" % i, 100 + i) for i in range(1, 6)]
LEVELS = ["cluster", "instance", "node", "network"]

owners = st.sampled_from(OWNERS)
prios = st.sampled_from([-2, 0, 0, 3])
modes = st.sampled_from([S, X, X, R])
requests = st.lists(st.tuples(st.sampled_from(LOCKS), modes), max_size=3, unique_by=lambda p: p[0]) | st.lists(
    st.tuples(st.sampled_from(LOCKS), modes), min_size=2, max_size=2
)
acquisitions = st.lists(st.tuples(st.sampled_from(LOCKS), st.sampled_from([S, X])), max_size=4, unique_by=lambda p: p[0])


def key(name: str) -> tuple[int, int, str]:
    return LockName.parse(name).sort_key


def group(name: str) -> str | None:
    return LockName.parse(name).group_name


def conflict(lock1: str, mode1: str, lock2: str, mode2: str) -> bool:
    """Whether holding both (by different owners) is forbidden."""
    if X not in (mode1, mode2):
        return False
    return lock1 == lock2 or group(lock1) == lock2 or group(lock2) == lock1


def conflicts(request: list[tuple[str, str]], holdings: list[tuple[str, str]]) -> bool:
    return any(
        conflict(l1, m1, l2, m2) for l1, m1 in request if m1 != R for l2, m2 in holdings if m2 != R
    )


class Model:
    """A snapshot of the manager, read through its public queries."""

    def __init__(self, manager: LockManager) -> None:
        self.held = {o: dict(manager.owned(o)) for o in OWNERS}
        self.pending = manager.pending()

    def blockers(self, owner: Owner, request: list[tuple[str, str]]) -> list[Owner]:
        return [o for o in OWNERS if o != owner and conflicts(request, list(self.held[o].items()))]

    def waiters_ahead(self, owner: Owner, request: list[tuple[str, str]], position: int | None, prio: int) -> list[Owner]:
        """Owners of earlier pending requests conflicting with C{request}."""
        if self.held[owner]:
            return []
        ahead = self.pending[:position] if position is not None else [e for e in self.pending if e[0] <= prio]
        return [o for _, o, r in ahead if o != owner and conflicts(request, r)]

    def obstacles(self, owner: Owner, request: list[tuple[str, str]], position: int | None, prio: int) -> list[Owner]:
        found = self.blockers(owner, request) or self.waiters_ahead(owner, request, position, prio)
        return sorted(set(found), key=lambda o: o.sort_key)

    def violation(self, owner: Owner, request: list[tuple[str, str]]) -> bool:
        """The order rule and the group rule."""
        held = self.held[owner]
        if len({name for name, _ in request}) != len(request):
            return True
        top = max((key(n) for n in held), default=None)
        for name, mode in request:
            if mode == R:
                continue
            enough = {X} if mode == X else {S, X}
            if top is not None and key(name) < top:
                if held.get(name) not in enough and held.get(group(name) or "") not in enough:
                    return True
            if mode == X and group(name) and held.get(group(name) or "") == S:
                return True
        return False

    def applied(self, owner: Owner, request: list[tuple[str, str]]) -> dict[str, str]:
        held = dict(self.held[owner])
        for name, mode in request:
            if mode == R:
                held.pop(name, None)
            else:
                held[name] = mode
        return held


class LockMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.manager = LockManager(MEMBERS)

    def check_outcome(self, model: Model, owner: Owner, request: list[tuple[str, str]], prio: int,
                      result: list[Owner], queued: bool) -> None:
        expected = model.obstacles(owner, request, None, prio)
        assert result == expected
        if not result:
            event("applied")
        elif model.blockers(owner, request):
            event("blocked, queued" if queued else "blocked")
        else:
            event("deferred, queued" if queued else "deferred")
        now = Model(self.manager)
        if result:
            if queued:
                assert self.manager.has_pending(owner)
            else:
                assert now.held == model.held and now.pending == model.pending
        else:
            assert now.held[owner] == model.applied(owner, request)
            for other in OWNERS:
                if other != owner and not any(o == other for _, o, _ in model.pending):
                    assert now.held[other] == model.held[other]

    @rule(owner=owners, request=requests, prio=prios)
    def try_update(self, owner: Owner, request: list[tuple[str, str]], prio: int) -> None:
        model = Model(self.manager)
        has_pending = self.manager.has_pending(owner)
        try:
            result = self.manager.try_update(owner, request, prio)
        except PendingRequestError:
            assert has_pending
            return
        except LockError:
            event("violation")
            assert not has_pending and model.violation(owner, request)
            assert Model(self.manager).held == model.held
            return
        assert not has_pending and not model.violation(owner, request)
        self.check_outcome(model, owner, request, prio, result, queued=False)

    @rule(owner=owners, request=requests, prio=prios)
    def update_waiting(self, owner: Owner, request: list[tuple[str, str]], prio: int) -> None:
        model = Model(self.manager)
        pending = [e for e in model.pending if e[1] == owner]
        try:
            result = self.manager.update_waiting(owner, prio, request)
        except PendingRequestError:
            assert pending and set(pending[0][2]) != set(request)
            return
        except LockError:
            assert model.violation(owner, request)
            return
        if pending:
            assert set(pending[0][2]) == set(request)
            assert result == self.manager.blockers_of(owner)
            return
        held = model.held[owner]
        if all(held.get(n) == m if m != R else n not in held for n, m in request):
            assert result == []
            assert Model(self.manager).held == model.held
            return
        assert not model.violation(owner, request)
        self.check_outcome(model, owner, request, prio, result, queued=True)

    @rule(owner=owners, request=requests, prio=prios, wait=st.booleans())
    def new_job(self, owner: Owner, request: list[tuple[str, str]], prio: int, wait: bool) -> None:
        """An owner finishes and starts afresh (this exercises fairness)."""
        self.manager.free(owner)
        if wait:
            self.update_waiting(owner, request, prio)
        else:
            self.try_update(owner, request, prio)

    @rule(owner=owners)
    def free(self, owner: Owner) -> None:
        self.manager.free(owner)
        assert self.manager.owned(owner) == [] and not self.manager.has_pending(owner)

    @rule(owner=owners)
    def cancel(self, owner: Owner) -> None:
        had = self.manager.has_pending(owner)
        assert self.manager.cancel_pending(owner) == had
        assert not self.manager.has_pending(owner)

    @rule(owner=owners, level=st.sampled_from(LEVELS), downgrade=st.booleans())
    def level_op(self, owner: Owner, level: str, downgrade: bool) -> None:
        try:
            if downgrade:
                self.manager.downgrade_level(owner, level)
            else:
                self.manager.free_level(owner, level)
        except PendingRequestError:
            assert self.manager.has_pending(owner)
            return
        at_level = [(n, m) for n, m in self.manager.owned(owner) if LockName.parse(n).level == level]
        assert all(m == S for _, m in at_level) if downgrade else not at_level

    @rule(owner=owners, keep=st.lists(st.sampled_from(LOCKS), max_size=4))
    def intersect(self, owner: Owner, keep: list[str]) -> None:
        before = dict(self.manager.owned(owner))
        try:
            self.manager.intersect(owner, keep)
        except PendingRequestError:
            assert self.manager.has_pending(owner)
            return
        assert dict(self.manager.owned(owner)) == {n: m for n, m in before.items() if n in keep}

    @rule(owner=owners, request=acquisitions, count=st.none() | st.integers(0, 3))
    def opportunistic(self, owner: Owner, request: list[tuple[str, str]], count: int | None) -> None:
        model = Model(self.manager)
        try:
            if count is None:
                got = self.manager.opportunistic_union(owner, request)
            else:
                got = self.manager.guarded_opportunistic_union(count, owner, request)
        except PendingRequestError:
            assert self.manager.has_pending(owner)
            return
        assert not self.manager.has_pending(owner)
        held = dict(self.manager.owned(owner))
        wanted = dict(request)
        assert got == sorted(got, key=key)
        for name in got:
            assert held[name] in ({S, X} if wanted[name] == S else {X})
            assert model.held[owner].get(name) not in ({S, X} if wanted[name] == S else {X})
        if count is not None and not got:
            assert held == model.held[owner]

    @invariant()
    def note_grants(self) -> None:
        if self.manager.take_granted():
            event("granted from the queue")

    @invariant()
    def safe(self) -> None:
        manager = self.manager
        holdings = {o: manager.owned(o) for o in OWNERS}
        for i, a in enumerate(OWNERS):
            for b in OWNERS[i + 1:]:
                assert not conflicts(holdings[a], holdings[b]), (a, holdings[a], b, holdings[b])

    @invariant()
    def queue_at_fixpoint(self) -> None:
        """No pending request could proceed; blockers_of agrees with the model."""
        model = Model(self.manager)
        for position, (prio, owner, request) in enumerate(model.pending):
            expected = model.obstacles(owner, request, position, prio)
            assert expected, "pending request of %r could proceed" % (owner,)
            assert self.manager.blockers_of(owner) == expected

    @invariant()
    def indexes_consistent(self) -> None:
        """The internal indexes match a recomputation from the holdings."""
        manager = self.manager
        direct: dict[str, dict[Owner, str]] = {}
        exclusive: dict[str, set[Owner]] = {}
        members: dict[str, dict[Owner, int]] = {}
        exclusive_members: dict[str, dict[Owner, int]] = {}
        for owner in OWNERS:
            for name, mode in manager.owned(owner):
                direct.setdefault(name, {})[owner] = mode
                if mode == X:
                    exclusive.setdefault(name, set()).add(owner)
                g = group(name)
                if g:
                    counts = members.setdefault(g, {})
                    counts[owner] = counts.get(owner, 0) + 1
                    if mode == X:
                        counts = exclusive_members.setdefault(g, {})
                        counts[owner] = counts.get(owner, 0) + 1
        table = manager._held_table
        assert (table.direct, table.exclusive) == (direct, exclusive)
        assert (table.members, table.exclusive_members) == (members, exclusive_members)
        assert set(manager._held) == {o for o in OWNERS if manager.owned(o)}
        wanted: dict[str, dict[Owner, str]] = {}
        for _, owner, request in manager.pending():
            for name, mode in request:
                if mode != R:
                    wanted.setdefault(name, {})[owner] = mode
        assert manager._wanted_table.direct == wanted
        assert manager._queue == sorted(manager._queue)
        assert len(manager._queue) == len(manager._pending) == len(manager._queue_owner)
        for owner, top in manager._top.items():
            assert top == max(key(n) for n, _ in manager.owned(owner))
        assert manager.to_data() == LockManager.from_data(manager.to_data(), MEMBERS).to_data()

    def teardown(self) -> None:
        """Liveness: as jobs finish, every waiter gets its locks."""
        manager = self.manager
        manager.take_granted()
        waiting = {o for _, o, _ in manager.pending()}
        granted: set[Owner] = set()
        dropped: set[Owner] = set()
        for _ in range(2 * len(OWNERS) + 2):
            if not manager.pending():
                break
            for owner in OWNERS:
                if manager.owned(owner):
                    if manager.has_pending(owner):
                        dropped.add(owner)
                    manager.free(owner)
            granted.update(manager.take_granted())
            event("liveness: granted after frees") if granted else None
            self.safe()
            self.queue_at_fixpoint()
        assert manager.pending() == []
        assert waiting - dropped <= granted


TestLockMachine = LockMachine.TestCase
TestLockMachine.settings = settings(
    max_examples=300,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_model_conflict_table() -> None:
    """The model's conflict relation itself, on a few known cases."""
    assert conflict("instance/a", X, "instance/a", S)
    assert not conflict("instance/a", S, "instance/a", S)
    assert conflict("instance/a", S, G, X)
    assert conflict(G, S, "instance/a", X)
    assert not conflict(G, S, "instance/a", S)
    assert not conflict("instance/a", X, "instance/b", X)
    assert not conflict(G, X, NG, X)
    assert conflict(BGL, S, CG, X)
    assert not conflict("cluster/config", X, CG, X)
