"""Lock owners: Ganeti's C{ClientId}."""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from ganeti.errors import LockError


def _check_ident(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise LockError("Owner identifier must be an int or a string, not %r" % (value,))
    if isinstance(value, str) and not value:
        raise LockError("Owner identifier must not be empty")


def _check_lockfile(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise LockError("Owner lock file must be a non-empty string, not %r" % (value,))


def _check_pid(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LockError("Owner pid must be a non-negative int, not %r" % (value,))


@attrs.frozen(cache_hash=True)
class Owner:
    """Who holds or waits for locks: a job or another client of WConfD.

    Two owners are the same if their C{ident} and C{lockfile} are equal;
    C{pid} only says which process to notify.

    @ivar ident: the job id (int), or a name for clients that are not jobs.
    @ivar lockfile: the livelock file the owner keeps locked while alive.
    @ivar pid: the process to signal when a waiting request is granted.
    """

    ident: int | str = attrs.field(validator=_check_ident)
    lockfile: str = attrs.field(validator=_check_lockfile)
    pid: int = attrs.field(default=0, eq=False, validator=_check_pid)

    @property
    def sort_key(self) -> tuple[int, int, str, str]:
        """A key ordering owners deterministically: job ids first, by number."""
        if isinstance(self.ident, int):
            return (0, self.ident, "", self.lockfile)
        return (1, 0, self.ident, self.lockfile)

    def to_wire(self) -> list[Any]:
        """Return Ganeti's JSON form C{[ident, lockfile, pid]}."""
        return [self.ident, self.lockfile, self.pid]

    @classmethod
    def from_wire(cls, value: Any) -> Owner:
        """Read C{[ident, lockfile]} or C{[ident, lockfile, pid]}.

        @raise LockError: C{value} has another shape or wrong types.
        """
        if not isinstance(value, (list, tuple)) or len(value) not in (2, 3):
            raise LockError("Owner must be a list [ident, lockfile, pid], not %r" % (value,))
        return cls(*value)


def sort_owners(owners: Iterable[Owner]) -> list[Owner]:
    """Return C{owners} in the deterministic L{Owner.sort_key} order."""
    return sorted(owners, key=_owner_key)


def _owner_key(owner: Owner) -> tuple[int, int, str, str]:
    return owner.sort_key
