"""The lock manager of WConfD: pure logic, no I/O, no clock, no Twisted.

L{LockManager} keeps, for every L{Owner}, the locks it holds directly and at
most one pending (waiting) request.  The daemon wraps it: it maps RPCs to
these methods, notifies the owners returned by L{LockManager.take_granted},
and persists the owners returned by L{LockManager.take_dirty}.

Semantics (Ganeti's, see L{ganeti.locking.table} for the conflict table):

  - A request is a list of C{(lock, mode)} pairs, mode one of C{shared},
    C{exclusive}, C{release}; a lock may appear once.  It is applied all at
    once or not at all.
  - Order rule: if the owner holds locks, let H be the highest.  Asking for
    a lock L below H (shared or exclusive) is an order violation unless the
    owner already holds L, or L's group lock, at least as strongly (an
    exclusive request needs an exclusive holding).  Group rule: asking for a
    member exclusively while holding its group lock shared is an order
    violation.  Releases are always fine.  Violations raise L{LockError};
    they are never queued.
  - Shared and exclusive requests need the lock to exist (see
    L{LockManager.add_names}); a name removed while held stays held until it
    is released.

Waiting and fairness:

  - L{LockManager.update_waiting} queues a blocked request, keyed by
    C{(prio, arrival sequence)}; a lower prio number is more urgent.  An
    owner has at most one pending request and cannot change its locks while
    it waits (L{PendingRequestError}), except by re-submitting the same
    request (which keeps its place and may only make its prio more urgent),
    by L{LockManager.free} or by L{LockManager.cancel_pending}.
  - Whenever locks are released or downgraded, or a waiter leaves the queue,
    the queue is retried in C{(prio, seq)} order, granting every request that
    can proceed; a granted request that releases locks triggers another
    pass, so grants cascade.  Granted owners are collected for
    L{LockManager.take_granted}.
  - B{Fairness rule}: a request from an owner that currently holds I{no}
    locks is deferred -- treated as blocked, its blockers being the owners
    of those waiters -- if it conflicts with the pending request of another
    owner that is ahead of it: for a queued request, any entry before it in
    C{(prio, seq)} order; for a new request with priority C{p}
    (L{LockManager.try_update}, L{LockManager.update_waiting},
    L{LockManager.opportunistic_union}, L{LockManager.add_locks}), any
    pending request with prio C{<= p}.  "Conflicts" means one would block
    the other if both were held.  So a stream of fresh shared requests
    cannot starve an exclusive waiter.  Owners that already hold locks are
    never deferred: the waiter ahead may be waiting for them, and deferring
    them could deadlock.  Only when a request has no real blockers are the
    conflicting waiters reported as its blockers.
  - A queued request that has become invalid (a lock it names was removed)
    is dropped and its owner is reported by L{LockManager.take_granted} as
    well: it must look at what it holds.

Queries: L{LockManager.all_owners} lists direct holders only; a group lock
that is held only implicitly, through members, is not listed there (but it
is in L{LockManager.all_locks}).
"""

from __future__ import annotations

import bisect
import sys
from typing import Any, Callable, Iterable, Sequence

from ganeti.errors import LockError, PendingRequestError
from ganeti.locking.names import BUILTIN_LOCKS, EXCLUSIVE, RELEASE, SHARED, LockName
from ganeti.locking.owner import Owner, sort_owners
from ganeti.locking.requests import (
    Pending,
    check_level,
    check_names,
    check_prio,
    parse_holdings,
    parse_request,
    signature,
)
from ganeti.locking.table import Item, LockTable

#: Arrival sequence of a request not yet queued: after every queued one.
_LAST = sys.maxsize

_SATISFIES: dict[str, frozenset[str]] = {
    SHARED: frozenset([SHARED, EXCLUSIVE]),
    EXCLUSIVE: frozenset([EXCLUSIVE]),
}


class LockManager:
    """Locks of every owner, pending requests, and the rules between them."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._known: set[str] = set()
        self._held: dict[Owner, dict[str, str]] = {}
        self._top: dict[Owner, tuple[int, int, str]] = {}
        self._held_table = LockTable()
        self._wanted_table = LockTable()
        self._pending: dict[Owner, Pending] = {}
        self._queue: list[tuple[int, int]] = []
        self._queue_owner: dict[int, Owner] = {}
        self._seq = 0
        self._granted: list[Owner] = []
        self._dirty: set[Owner] = set()
        self._generation = 0
        self._recheck = False
        self.add_names(names)

    # Names

    def add_names(self, names: Iterable[str]) -> None:
        """Make member locks known, so they can be requested.

        @raise LockError: a name is malformed or a group lock.
        """
        for name in check_names(names):
            parsed = LockName.parse(name)
            if parsed.is_group:
                raise LockError("Cannot add group lock %r: it always exists" % (name,))
            if name not in BUILTIN_LOCKS:
                self._known.add(name)

    def remove_names(self, names: Iterable[str]) -> None:
        """Forget member locks: new requests for them fail.

        Owners holding one keep it until they release it.  Pending requests
        naming one are dropped (see the module docstring).

        @raise LockError: a name is malformed, a group lock or built in.
        """
        for name in check_names(names):
            parsed = LockName.parse(name)
            if parsed.is_group or name in BUILTIN_LOCKS:
                raise LockError("Cannot remove built-in lock %r" % (name,))
            self._known.discard(name)
        if self._queue:
            self._recheck = True
            self._settle()

    def exists(self, name: str) -> bool:
        """Whether C{name} can be requested now (malformed names: no)."""
        try:
            parsed = LockName.parse(name)
        except LockError:
            return False
        return self._exists(name, parsed)

    def _exists(self, name: str, parsed: LockName) -> bool:
        return parsed.is_group or name in self._known or name in BUILTIN_LOCKS

    # Requests

    def try_update(self, owner: Owner, request: Sequence[Any], prio: int = 0) -> list[Owner]:
        """Apply C{request} at once, or change nothing.

        @param prio: the priority for the fairness rule.
        @return: C{[]} if applied, else the owners in the way (sorted).
        @raise LockError: malformed request, unknown lock, order violation.
        @raise PendingRequestError: C{owner} has a pending request.
        """
        check_prio(prio)
        self._no_pending(owner)
        items = parse_request(request)
        self._validate(owner, items)
        obstacles = self._obstacles(owner, items, (prio, _LAST))
        if obstacles:
            return obstacles
        self._apply(owner, items)
        self._settle()
        return []

    def update_waiting(self, owner: Owner, prio: int, request: Sequence[Any]) -> list[Owner]:
        """Apply C{request} now, or queue it as C{owner}'s pending request.

        Re-submitting the pending request is idempotent: it keeps its place
        in the queue (a more urgent C{prio} is taken over) and returns its
        current blockers.

        @return: C{[]} if satisfied already or applied now, else the blockers
            of the request, which is now pending.
        @raise LockError: malformed request, unknown lock, order violation.
        @raise PendingRequestError: C{owner} waits for another request.
        """
        check_prio(prio)
        items = parse_request(request)
        entry = self._pending.get(owner)
        if entry is not None:
            if entry.signature != signature(items):
                raise PendingRequestError("cannot update locks while having pending requests")
            if prio < entry.prio:
                self._requeue(owner, entry, prio)
                self._recheck = True
                self._settle()
            return self.blockers_of(owner)
        if self._satisfied(owner, items):
            return []
        self._validate(owner, items)
        obstacles = self._obstacles(owner, items, (prio, _LAST))
        if not obstacles:
            self._apply(owner, items)
            self._settle()
            return []
        self._enqueue(owner, prio, items)
        return obstacles

    def add_locks(self, owner: Owner, names: Iterable[str], prio: int = 0) -> list[Owner]:
        """Create member locks and give them to C{owner} exclusively.

        @return: C{[]} if done, else the owners in the way (holders of the
            level's group lock), and nothing changed.
        @raise LockError: a name exists or is malformed, or order violation.
        @raise PendingRequestError: C{owner} has a pending request.
        """
        check_prio(prio)
        self._no_pending(owner)
        items = parse_request([(name, EXCLUSIVE) for name in check_names(names)])
        for name, _, parsed in items:
            if parsed.is_group or self._exists(name, parsed) or name in self._held_table.direct:
                raise LockError("Lock %r already exists" % (name,))
        self._validate(owner, items, check_exists=False)
        obstacles = self._obstacles(owner, items, (prio, _LAST))
        if obstacles:
            return obstacles
        self._known.update(name for name, _, _ in items)
        self._apply(owner, items)
        self._settle()
        return []

    def opportunistic_union(self, owner: Owner, request: Sequence[Any], prio: int = 0) -> list[str]:
        """Acquire what can be acquired now of C{request}, lock by lock.

        Pairs are tried in lock order; those held at least as strongly
        already are skipped, and so are those that are blocked, unknown or
        an order violation given what is held at that moment.  Never queues.

        @return: the names acquired (or upgraded), in lock order.
        @raise LockError: the request is malformed or asks for a release.
        @raise PendingRequestError: C{owner} has a pending request.
        """
        got = self._opportunistic(owner, request, prio)
        self._settle()
        return [name for name, _, _ in got]

    def guarded_opportunistic_union(
        self, count: int, owner: Owner, request: Sequence[Any], prio: int = 0
    ) -> list[str]:
        """Like L{opportunistic_union}, but all or nothing below C{count}.

        @return: the names acquired, or C{[]} (and what this call acquired is
            undone, leaving L{generation} as it was) if that would be fewer
            than C{count}.
        """
        if isinstance(count, bool) or not isinstance(count, int):
            raise LockError("Lock count must be an int, not %r" % (count,))
        generation, dirty = self._generation, owner in self._dirty
        got = self._opportunistic(owner, request, prio)
        if len(got) < count:
            for name, old, parsed in reversed(got):
                self._set(owner, name, parsed, old or RELEASE)
            # nothing changed in the end: waiters for changes stay asleep
            self._generation = generation
            if not dirty:
                self._dirty.discard(owner)
            got = []
        self._settle()
        return [name for name, _, _ in got]

    def _opportunistic(
        self, owner: Owner, request: Sequence[Any], prio: int
    ) -> list[tuple[str, str | None, LockName]]:
        check_prio(prio)
        self._no_pending(owner)
        items = parse_request(request)
        for name, mode, _ in items:
            if mode == RELEASE:
                raise LockError("Cannot release %r in an opportunistic request" % (name,))
        got: list[tuple[str, str | None, LockName]] = []
        for item in sorted(items, key=lambda i: i[2].sort_key):
            name, mode, parsed = item
            held = self._held.get(owner)
            old = held.get(name) if held else None
            if old == EXCLUSIVE or old == mode:
                continue
            one = (item,)
            try:
                self._validate(owner, one)
            except LockError:
                continue
            if self._obstacles(owner, one, (prio, _LAST)):
                continue
            self._apply(owner, one)
            got.append((name, old, parsed))
        return got

    # Releasing

    def free(self, owner: Owner) -> None:
        """Release everything C{owner} holds and drop its pending request."""
        if self._dequeue(owner) is not None:
            self._recheck = True
        held = self._held.get(owner)
        if held:
            for name in list(held):
                self._set(owner, name, LockName.parse(name), RELEASE)
            self._changed(owner)
        self._settle()

    def cancel_pending(self, owner: Owner) -> bool:
        """Drop C{owner}'s pending request; say whether there was one."""
        if self._dequeue(owner) is None:
            return False
        self._recheck = True
        self._settle()
        return True

    def intersect(self, owner: Owner, names: Iterable[str]) -> None:
        """Release every lock C{owner} holds directly that is not in C{names}.

        @raise PendingRequestError: C{owner} has a pending request.
        """
        self._no_pending(owner)
        keep = set(check_names(names))
        self._release_where(owner, lambda name, parsed: name not in keep)

    def free_level(self, owner: Owner, level: str) -> None:
        """Release C{owner}'s locks at C{level}, group lock included.

        The config lock is not part of the C{cluster} level here.

        @raise LockError: unknown level.
        @raise PendingRequestError: C{owner} has a pending request.
        """
        check_level(level)
        self._no_pending(owner)
        self._release_where(owner, lambda name, parsed: parsed.level == level and not parsed.is_config)

    def downgrade_level(self, owner: Owner, level: str) -> None:
        """Make every exclusive lock of C{owner} at C{level} shared.

        @raise LockError: unknown level.
        @raise PendingRequestError: C{owner} has a pending request.
        """
        check_level(level)
        self._no_pending(owner)
        held = self._held.get(owner)
        changed = False
        for name, mode in list(held.items()) if held else ():
            parsed = LockName.parse(name)
            if mode == EXCLUSIVE and parsed.level == level and not parsed.is_config:
                changed = self._set(owner, name, parsed, SHARED) or changed
        if changed:
            self._changed(owner)
        self._settle()

    def _release_where(self, owner: Owner, condition: Callable[[str, LockName], bool]) -> None:
        held = self._held.get(owner)
        changed = False
        for name in list(held) if held else ():
            parsed = LockName.parse(name)
            if condition(name, parsed):
                changed = self._set(owner, name, parsed, RELEASE) or changed
        if changed:
            self._changed(owner)
        self._settle()

    # Queries

    def owned(self, owner: Owner) -> list[tuple[str, str]]:
        """C{owner}'s direct holdings C{(lock, mode)}, in lock order."""
        held = self._held.get(owner)
        if not held:
            return []
        return sorted(held.items(), key=_item_key)

    def all_locks(self) -> list[str]:
        """Every lock held by anyone, with group locks held through members."""
        names = set(self._held_table.direct)
        names.update(self._held_table.implied_groups())
        return sorted(names, key=_name_key)

    def all_owners(self) -> list[tuple[str, list[tuple[Owner, str]]]]:
        """Every directly held lock with its direct owners and their modes."""
        result = []
        for name in sorted(self._held_table.direct, key=_name_key):
            holders = self._held_table.direct[name]
            result.append((name, [(o, holders[o]) for o in sort_owners(list(holders))]))
        return result

    def pending(self) -> list[tuple[int, Owner, list[tuple[str, str]]]]:
        """The pending requests C{(prio, owner, request)} in queue order."""
        result = []
        for prio, seq in self._queue:
            owner = self._queue_owner[seq]
            result.append((prio, owner, self._pending[owner].request()))
        return result

    def is_held(self, name: str) -> bool:
        """Whether anybody holds C{name} directly."""
        return name in self._held_table.direct

    def has_pending(self, owner: Owner) -> bool:
        """Whether C{owner} has a pending request."""
        return owner in self._pending

    def owners(self) -> set[Owner]:
        """Every owner that holds a lock or waits for one."""
        return set(self._held) | set(self._pending)

    def blockers_of(self, owner: Owner) -> list[Owner]:
        """What C{owner}'s pending request waits for (C{[]} if none)."""
        entry = self._pending.get(owner)
        if entry is None:
            return []
        return self._obstacles(owner, entry.items, entry.key)

    # Notification and persistence hooks

    def take_granted(self) -> list[Owner]:
        """Owners whose pending request was granted (or dropped) since the last call."""
        granted = list(dict.fromkeys(self._granted))
        self._granted = []
        return granted

    def take_dirty(self) -> set[Owner]:
        """Owners whose holdings or pending request changed since the last call."""
        dirty = self._dirty
        self._dirty = set()
        return dirty

    @property
    def generation(self) -> int:
        """A counter increased on every change of holdings or of the queue."""
        return self._generation

    def owner_state(self, owner: Owner) -> tuple[list[tuple[str, str]], tuple[int, list[tuple[str, str]]] | None]:
        """C{owner}'s holdings and pending C{(prio, request)} (or C{None})."""
        entry = self._pending.get(owner)
        return self.owned(owner), None if entry is None else (entry.prio, entry.request())

    def set_owner_state(self, owner: Owner, holdings: Sequence[Any], pending: Sequence[Any] | None) -> None:
        """Replace C{owner}'s holdings and pending request (journal replay).

        No rule is checked and the queue is not retried: call
        L{retry_pending} once the whole state is restored.  Unknown names
        become known.  A pending request equal to the current one keeps its
        place in the queue; another one goes to the end.

        @param holdings: C{(lock, mode)} pairs, mode shared or exclusive.
        @param pending: C{None}, or C{(prio, request)}.
        @raise LockError: malformed holdings or pending request.
        """
        items = parse_holdings(holdings)
        wanted: tuple[int, tuple[Item, ...]] | None = None
        if pending is not None:
            if not isinstance(pending, (list, tuple)) or len(pending) != 2:
                raise LockError("Pending request must be [prio, request], not %r" % (pending,))
            wanted = (check_prio(pending[0]), parse_request(pending[1]))
        old = self._dequeue(owner)
        held = self._held.get(owner)
        for name in list(held) if held else ():
            self._set(owner, name, LockName.parse(name), RELEASE)
        self._learn(items)
        self._apply(owner, items)
        if wanted is not None:
            prio, request = wanted
            self._learn(request)
            seq = None
            if old is not None and old.signature == signature(request):
                seq = old.seq
            self._enqueue(owner, prio, request, seq)
        self._changed(owner)
        self._recheck = True

    def retry_pending(self) -> None:
        """Retry every pending request now (after a journal replay)."""
        self._recheck = True
        self._settle()

    def to_data(self) -> list[Any]:
        """Return Ganeti's locks.data content C{[allocation, pending]}."""
        allocation = [
            [owner.to_wire(), [[name, mode] for name, mode in self.owned(owner)]]
            for owner in sort_owners(list(self._held))
        ]
        pending = [
            [prio, owner.to_wire(), [[name, mode] for name, mode in request]]
            for prio, owner, request in self.pending()
        ]
        return [allocation, pending]

    @classmethod
    def from_data(cls, data: Any, names: Iterable[str] = ()) -> LockManager:
        """Restore a manager from L{to_data}'s format (Ganeti's locks.data).

        Names in C{data} that are not in C{names} are added.  The queue is
        retried once the state is loaded.

        @raise LockError: C{data} is malformed or its holdings conflict.
        """
        manager = cls(names)
        if not isinstance(data, (list, tuple)) or len(data) != 2:
            raise LockError("Lock data must be [allocation, pending], not %r" % (data,))
        allocation, pending = data
        if not isinstance(allocation, (list, tuple)) or not isinstance(pending, (list, tuple)):
            raise LockError("Lock data must be [allocation, pending] lists")
        for entry in allocation:
            if not isinstance(entry, (list, tuple)) or len(entry) != 2:
                raise LockError("Lock allocation entry must be [owner, locks], not %r" % (entry,))
            owner = Owner.from_wire(entry[0])
            if owner in manager._held:
                raise LockError("Owner %r appears twice in lock data" % (entry[0],))
            items = parse_holdings(entry[1])
            clash = manager._held_table.conflicts(owner, items, set())
            if clash:
                raise LockError(
                    "Inconsistent lock data: locks of %r conflict with those of %r"
                    % (entry[0], [o.to_wire() for o in sort_owners(clash)])
                )
            manager._learn(items)
            manager._apply(owner, items)
        for entry in pending:
            if not isinstance(entry, (list, tuple)) or len(entry) != 3:
                raise LockError("Pending lock entry must be [prio, owner, request], not %r" % (entry,))
            prio = check_prio(entry[0])
            owner = Owner.from_wire(entry[1])
            if owner in manager._pending:
                raise LockError("Owner %r has two pending requests in lock data" % (entry[1],))
            items = parse_request(entry[2])
            manager._learn(items)
            manager._enqueue(owner, prio, items)
        manager._dirty.clear()
        manager.retry_pending()
        return manager

    # Internals

    def _no_pending(self, owner: Owner) -> None:
        if owner in self._pending:
            raise PendingRequestError("cannot update locks while having pending requests")

    def _learn(self, items: Iterable[Item]) -> None:
        for name, _, parsed in items:
            if not parsed.is_group and name not in BUILTIN_LOCKS:
                self._known.add(name)

    def _satisfied(self, owner: Owner, items: tuple[Item, ...]) -> bool:
        held = self._held.get(owner) or {}
        for name, mode, _ in items:
            if mode == RELEASE:
                if name in held:
                    return False
            elif held.get(name) != mode:
                return False
        return True

    def _validate(self, owner: Owner, items: tuple[Item, ...], check_exists: bool = True) -> None:
        """Raise L{LockError} for unknown locks and order violations."""
        held = self._held.get(owner)
        if check_exists:
            for name, mode, parsed in items:
                if mode != RELEASE and not self._exists(name, parsed) and not (held and held.get(name) == mode):
                    raise LockError("Lock %r does not exist" % (name,))
        if not held:
            return
        top = self._top.get(owner)
        if top is None:
            top = self._top[owner] = max(LockName.parse(name).sort_key for name in held)
        for name, mode, parsed in items:
            if mode == RELEASE:
                continue
            group = parsed.group_name
            if parsed.sort_key < top:
                enough = _SATISFIES[mode]
                if held.get(name) not in enough and (group is None or held.get(group) not in enough):
                    raise LockError(
                        "Order violation: requesting %r (%s) while holding %r" % (name, mode, _top_name(held, top))
                    )
            if mode == EXCLUSIVE and group is not None and held.get(group) == SHARED:
                raise LockError(
                    "Order violation: requesting %r exclusively while holding its group lock %r shared"
                    % (name, group)
                )

    def _obstacles(self, owner: Owner, items: tuple[Item, ...], key: tuple[int, int]) -> list[Owner]:
        """Owners blocking C{items}; if none, waiters deferring them."""
        found = self._held_table.conflicts(owner, items, set())
        if not found and self._pending and owner not in self._held:
            pending = self._pending
            for other in self._wanted_table.conflicts(owner, items, set()):
                if pending[other].key < key:
                    found.add(other)
        if not found:
            return []
        return sort_owners(found)

    def _set(self, owner: Owner, name: str, parsed: LockName, mode: str) -> bool:
        """Set C{owner}'s hold on one lock; say whether anything changed."""
        held = self._held.get(owner)
        old = held.get(name) if held else None
        if old == mode or (old is None and mode == RELEASE):
            return False
        group = parsed.group_name
        if old is not None:
            self._held_table.remove(owner, name, group, old)
            if mode == RELEASE or old == EXCLUSIVE:
                self._recheck = True
        if mode == RELEASE:
            assert held is not None
            del held[name]
            if not held:
                del self._held[owner]
        else:
            if held is None:
                held = self._held[owner] = {}
            held[name] = mode
            self._held_table.add(owner, name, group, mode)
        self._top.pop(owner, None)
        return True

    def _apply(self, owner: Owner, items: Iterable[Item]) -> None:
        changed = False
        for name, mode, parsed in items:
            changed = self._set(owner, name, parsed, mode) or changed
        if changed:
            self._changed(owner)

    def _changed(self, owner: Owner) -> None:
        self._dirty.add(owner)
        self._generation += 1

    def _enqueue(self, owner: Owner, prio: int, items: tuple[Item, ...], seq: int | None = None) -> None:
        if seq is None:
            seq = self._seq
            self._seq += 1
        entry = Pending(prio, seq, items)
        self._pending[owner] = entry
        bisect.insort(self._queue, entry.key)
        self._queue_owner[seq] = owner
        for name, mode, parsed in items:
            if mode != RELEASE:
                self._wanted_table.add(owner, name, parsed.group_name, mode)
        self._changed(owner)

    def _dequeue(self, owner: Owner) -> Pending | None:
        entry = self._pending.pop(owner, None)
        if entry is None:
            return None
        index = bisect.bisect_left(self._queue, entry.key)
        del self._queue[index]
        del self._queue_owner[entry.seq]
        for name, mode, parsed in entry.items:
            if mode != RELEASE:
                self._wanted_table.remove(owner, name, parsed.group_name, mode)
        self._changed(owner)
        return entry

    def _requeue(self, owner: Owner, entry: Pending, prio: int) -> None:
        self._dequeue(owner)
        self._enqueue(owner, prio, entry.items, entry.seq)

    def _settle(self) -> None:
        """Retry the queue while something may have become grantable."""
        while self._recheck:
            self._recheck = False
            if not self._queue:
                return
            for key in list(self._queue):
                owner = self._queue_owner.get(key[1])
                if owner is None:
                    continue
                entry = self._pending[owner]
                try:
                    self._validate(owner, entry.items)
                except LockError:
                    self._dequeue(owner)
                    self._granted.append(owner)
                    continue
                if self._obstacles(owner, entry.items, key):
                    continue
                self._dequeue(owner)
                self._apply(owner, entry.items)
                self._granted.append(owner)


def _name_key(name: str) -> tuple[int, int, str]:
    return LockName.parse(name).sort_key


def _item_key(item: tuple[str, str]) -> tuple[int, int, str]:
    return LockName.parse(item[0]).sort_key


def _top_name(held: dict[str, str], top: tuple[int, int, str]) -> str:
    for name in held:
        if LockName.parse(name).sort_key == top:
            return name
    return "?"
