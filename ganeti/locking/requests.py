"""Lock requests: checking their shape, and the record of a queued one.

A request is a list of C{(lock, mode)} pairs, mode one of C{shared},
C{exclusive} or C{release}; JSON lists of two elements are accepted as
pairs.  Parsing checks the shape and the names, not whether the locks exist
nor the lock order (that needs the state: see L{ganeti.locking.manager}).
"""

from __future__ import annotations

from typing import Any, Iterable

from ganeti.errors import LockError
from ganeti.locking.names import HELD_MODES, LEVELS, REQUEST_MODES, LockName
from ganeti.locking.table import Item


def parse_request(request: Any) -> tuple[Item, ...]:
    """Check a request and parse its lock names.

    @param request: a list (or tuple) of C{(lock, mode)} pairs.
    @return: C{(lock, mode, parsed lock)} triples, in request order.
    @raise LockError: it is malformed, or names a lock twice.
    """
    if not isinstance(request, (list, tuple)):
        raise LockError("A lock request must be a list of [lock, mode] pairs, not %r" % (request,))
    items: list[Item] = []
    seen: set[str] = set()
    for pair in request:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise LockError("A lock request item must be a [lock, mode] pair, not %r" % (pair,))
        name, mode = pair
        if not isinstance(mode, str) or mode not in REQUEST_MODES:
            raise LockError("Invalid lock mode %r for lock %r" % (mode, name))
        parsed = LockName.parse(name)
        if name in seen:
            raise LockError("Inconsistent requests for lock %r" % (name,))
        seen.add(name)
        items.append((name, mode, parsed))
    return tuple(items)


def parse_holdings(holdings: Any) -> tuple[Item, ...]:
    """Like L{parse_request}, but only shared and exclusive are allowed."""
    items = parse_request(holdings)
    for name, mode, _ in items:
        if mode not in HELD_MODES:
            raise LockError("Invalid held mode %r for lock %r" % (mode, name))
    return items


def check_prio(prio: Any) -> int:
    """Return C{prio} if it is an int, else raise L{LockError}."""
    if isinstance(prio, bool) or not isinstance(prio, int):
        raise LockError("Lock priority must be an int, not %r" % (prio,))
    return prio


def check_level(level: Any) -> str:
    """Return C{level} if it is one of L{LEVELS}, else raise L{LockError}."""
    if not isinstance(level, str) or level not in LEVELS:
        raise LockError("Unknown lock level %r" % (level,))
    return level


def check_names(names: Iterable[Any]) -> list[str]:
    """Return C{names} as a list, if it holds strings only."""
    if isinstance(names, (str, bytes)):
        raise LockError("Expected a list of lock names, not %r" % (names,))
    try:
        result = list(names)
    except TypeError:
        raise LockError("Expected a list of lock names, not %r" % (names,)) from None
    for name in result:
        if not isinstance(name, str):
            raise LockError("Lock name must be a string, not %r" % (name,))
    return result


def signature(items: Iterable[Item]) -> frozenset[tuple[str, str]]:
    """What makes two requests the same: their pairs, in any order."""
    return frozenset((name, mode) for name, mode, _ in items)


class Pending:
    """A queued request: its priority, arrival sequence and items."""

    __slots__ = ("prio", "seq", "items", "signature")

    def __init__(self, prio: int, seq: int, items: tuple[Item, ...]) -> None:
        self.prio = prio
        self.seq = seq
        self.items = items
        self.signature = signature(items)

    @property
    def key(self) -> tuple[int, int]:
        """The queue order: lower prio number first, then arrival."""
        return (self.prio, self.seq)

    def request(self) -> list[tuple[str, str]]:
        """The request as C{(lock, mode)} pairs."""
        return [(name, mode) for name, mode, _ in self.items]
