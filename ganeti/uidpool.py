"""Ganeti's user-id pool: a sorted list of C{[lower, higher]} ranges, read from and shown as
C{1000-2000, 3000} (pure: L{ganeti.errors} only, for the command line as for the logical units).

C{add_uids} adds ranges not already there, C{remove_uids} refuses a range that is not in the pool
(L{uid_pool_changed}); each bound lies within Ganeti's (L{check_uid_pool}).
"""

from __future__ import annotations

from ganeti import errors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Ganeti's bounds of a user id in the pool
UID_MIN, UID_MAX = 0, 4294967295


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def parse_uid_pool(text: str, separator: str = ",") -> list[list[int]]:
    """Ganeti's C{1000-2000,3000} syntax as C{[[1000, 2000], [3000, 3000]]}.
    @raise errors.OpPrereqError: not a list of integer ranges"""
    ranges = []
    for item in text.split(separator):
        item = item.strip()
        if not item:
            continue
        bounds = item.split("-")
        if len(bounds) > 2:
            raise _invalid("Invalid user-id range definition. Only one hyphen allowed: %s" % bounds)
        try:
            lower = int(bounds[0])
            higher = int(bounds[-1])
        except ValueError:
            raise _invalid("Invalid user-id range %r: the boundaries must be integers" % item) from None
        ranges.append([lower, higher])
    ranges.sort()
    return ranges


def format_uid_pool(pool: Any, separator: str = ", ") -> str:
    """The pool as Ganeti shows it (C{1000-2000, 3000})."""
    return separator.join(str(low) if low == high else "%s-%s" % (low, high) for low, high in pool or [])


def check_uid_pool(pool: Any) -> list[list[int]]:
    """Each range ordered and within Ganeti's bounds (its messages)."""
    out = []
    for low, high in pool:
        if low > high:
            raise _invalid("Lower user-id range boundary value (%s) is larger than higher boundary value (%s)"
                           % (low, high))
        if low < UID_MIN:
            raise _invalid("Lower user-id range boundary value (%s) is smaller than UIDPOOL_UID_MIN (%s)."
                           % (low, UID_MIN))
        if high > UID_MAX:
            raise _invalid("Higher user-id boundary value (%s) is larger than UIDPOOL_UID_MAX (%s)."
                           % (high, UID_MAX))
        out.append([int(low), int(high)])
    return out


def uid_pool_changed(current: Any, add: Any, remove: Any, replace: Any) -> list[list[int]]:
    """The pool after C{add}, C{remove} then C{replace} (Ganeti's order)."""
    pool = [list(r) for r in current or []]
    for item in add or []:
        if list(item) not in pool:
            pool.append(list(item))
    pool.sort()
    for item in remove or []:
        if list(item) not in pool:
            raise _invalid("User-id range to be removed is not found in the current user-id pool: %s"
                           % str(tuple(item)))
        pool.remove(list(item))
    if replace is not None:
        pool = sorted(list(r) for r in replace)
    return pool


__all__ = ["UID_MAX", "UID_MIN", "check_uid_pool", "format_uid_pool", "parse_uid_pool", "uid_pool_changed"]
