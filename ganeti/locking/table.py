"""An index of who holds (or wants) which lock, for fast conflict checks.

This is the data structure under L{ganeti.locking.manager.LockManager}; it
knows the conflict rules but nothing about requests, order or waiting.

Conflicts (Ganeti's blocking table; an owner never conflicts with itself):

  - exclusive on a member C{L}: any other direct owner of C{L}, any other
    owner of C{L}'s group lock (any mode);
  - exclusive on a group lock C{G}: any other direct owner of C{G}, any
    other owner of a member of C{G} (any mode);
  - shared on a member C{L}: another exclusive owner of C{L}, another
    exclusive owner of C{L}'s group lock;
  - shared on a group lock C{G}: another exclusive owner of C{G}, other
    owners holding members of C{G} exclusively.

The relation is symmetric, so the same check answers both "would this
request be blocked by these holdings" and "do these two requests conflict".
"""

from __future__ import annotations

from typing import Collection, Iterable, Mapping

from ganeti.locking.names import EXCLUSIVE, SHARED, LockName
from ganeti.locking.owner import Owner

#: A parsed request item: (lock name, mode, parsed name).
Item = tuple[str, str, LockName]


class LockTable:
    """Direct holdings per lock, and per-group counts of member holdings.

    C{direct} maps a lock name to C{{owner: mode}} and C{exclusive} to the
    owners holding it exclusively; C{members} maps a group lock name to
    C{{owner: count}} over the members of that group the owner holds, and
    C{exclusive_members} likewise counts exclusive holdings only.  Empty
    entries are removed.  So a shared request looks at exclusive holders
    only, and a group lock costs one step per owner holding members of the
    level, never one per member.
    """

    __slots__ = ("direct", "exclusive", "members", "exclusive_members")

    def __init__(self) -> None:
        self.direct: dict[str, dict[Owner, str]] = {}
        self.exclusive: dict[str, set[Owner]] = {}
        self.members: dict[str, dict[Owner, int]] = {}
        self.exclusive_members: dict[str, dict[Owner, int]] = {}

    def add(self, owner: Owner, name: str, group: str | None, mode: str) -> None:
        """Record that C{owner} holds C{name} (in C{group}) in C{mode}."""
        holders = self.direct.get(name)
        if holders is None:
            holders = self.direct[name] = {}
        holders[owner] = mode
        exclusive = mode == EXCLUSIVE
        if exclusive:
            owners = self.exclusive.get(name)
            if owners is None:
                owners = self.exclusive[name] = set()
            owners.add(owner)
        if group is not None:
            counts = self.members.get(group)
            if counts is None:
                counts = self.members[group] = {}
            counts[owner] = counts.get(owner, 0) + 1
            if exclusive:
                counts = self.exclusive_members.get(group)
                if counts is None:
                    counts = self.exclusive_members[group] = {}
                counts[owner] = counts.get(owner, 0) + 1

    def remove(self, owner: Owner, name: str, group: str | None, mode: str) -> None:
        """Forget that C{owner} holds C{name} (in C{group}) in C{mode}."""
        holders = self.direct[name]
        del holders[owner]
        if not holders:
            del self.direct[name]
        exclusive = mode == EXCLUSIVE
        if exclusive:
            owners = self.exclusive[name]
            owners.discard(owner)
            if not owners:
                del self.exclusive[name]
        if group is not None:
            _decrement(self.members, group, owner)
            if exclusive:
                _decrement(self.exclusive_members, group, owner)

    def conflicts(self, owner: Owner, items: Iterable[Item], found: set[Owner]) -> set[Owner]:
        """Add to C{found} every other owner conflicting with C{items}.

        Release items are ignored.  Returns C{found}.
        """
        direct: Mapping[str, Collection[Owner]]
        members: Mapping[str, Collection[Owner]]
        others: Collection[Owner] | None
        for name, mode, parsed in items:
            if mode == EXCLUSIVE:
                direct, members = self.direct, self.members
            elif mode == SHARED:
                direct, members = self.exclusive, self.exclusive_members
            else:
                continue
            others = direct.get(name)
            if others:
                found.update(others)
            group = parsed.group_name
            if group is not None:
                others = direct.get(group)
                if others:
                    found.update(others)
            elif parsed.is_group:
                others = members.get(name)
                if others:
                    found.update(others)
        found.discard(owner)
        return found

    def implied_groups(self) -> list[str]:
        """Group locks some owner holds implicitly through a member."""
        return list(self.members)


def _decrement(table: dict[str, dict[Owner, int]], group: str, owner: Owner) -> None:
    counts = table[group]
    value = counts[owner] - 1
    if value:
        counts[owner] = value
    else:
        del counts[owner]
        if not counts:
            del table[group]
