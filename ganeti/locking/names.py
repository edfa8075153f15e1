"""Lock names, levels and their total order.

A lock is named C{"<level>/<member>"}:

  - C{cluster/BGL}, the big Ganeti lock, the only member of C{cluster};
  - C{node-alloc/NAL}, the only member of C{node-alloc} (Ganeti 3.0 dropped
    this level; our design keeps it);
  - C{instance/<instance name>}, C{nodegroup/<uuid>}, C{node/<uuid>},
    C{node-res/<uuid>} and C{network/<uuid>};
  - C{<level>/[lockset]}, the level-wide I{group} lock.  Holding a member
    implies holding its group lock in the same mode, so a member and its
    group lock conflict as described in L{ganeti.locking.manager};
  - C{cluster/config}, the config lock, which is independent of every other
    lock (it implies nothing and nothing implies it).

Locks are acquired in increasing L{LockName.sort_key} order: level by level
in the order of L{LEVELS}, the group lock before the members of its level,
members in string order, and the config lock after everything else.
"""

from __future__ import annotations

import functools
from typing import Iterable

import attrs

from ganeti.errors import LockError

#: Lock levels, in acquisition order.
LEVELS: tuple[str, ...] = (
    "cluster",
    "instance",
    "node-alloc",
    "nodegroup",
    "node",
    "node-res",
    "network",
)

LEVEL_CLUSTER = "cluster"
LEVEL_INSTANCE = "instance"
LEVEL_NODE_ALLOC = "node-alloc"
LEVEL_NODEGROUP = "nodegroup"
LEVEL_NODE = "node"
LEVEL_NODE_RES = "node-res"
LEVEL_NETWORK = "network"

#: The member name of every level-wide group lock.
GROUP_MEMBER = "[lockset]"

#: The big Ganeti lock.
BGL = "cluster/BGL"
#: The node allocation lock.
NAL = "node-alloc/NAL"
#: The config lock: independent of every other lock, last in the order.
CONFIG_LOCK = "cluster/config"

#: Lock modes.  A request pairs a lock name with one of these.
SHARED = "shared"
EXCLUSIVE = "exclusive"
RELEASE = "release"

#: The states in which a lock can be held.
HELD_MODES: frozenset[str] = frozenset([SHARED, EXCLUSIVE])
#: Everything a request may ask for.
REQUEST_MODES: frozenset[str] = frozenset([SHARED, EXCLUSIVE, RELEASE])

_LEVEL_INDEX: dict[str, int] = {level: i for i, level in enumerate(LEVELS)}

#: Levels whose members are fixed, and those members.
_FIXED_MEMBERS: dict[str, frozenset[str]] = {
    LEVEL_CLUSTER: frozenset(["BGL", "config"]),
    LEVEL_NODE_ALLOC: frozenset(["NAL"]),
}

#: Locks that always exist, besides the group locks.
BUILTIN_LOCKS: frozenset[str] = frozenset([BGL, NAL, CONFIG_LOCK])

#: The sort key of the config lock: after every level.
_CONFIG_KEY = (len(LEVELS), 0, "")


def group_lock(level: str) -> str:
    """Return the name of the group lock of C{level}.

    @raise LockError: C{level} is not one of L{LEVELS}.
    """
    if level not in _LEVEL_INDEX:
        raise LockError("Unknown lock level %r" % (level,))
    return "%s/%s" % (level, GROUP_MEMBER)


def _check_member(level: str, member: str) -> None:
    """Raise L{LockError} unless C{member} may be named at C{level}."""
    if level not in _LEVEL_INDEX:
        raise LockError("Unknown lock level %r in lock name %r" % (level, "%s/%s" % (level, member)))
    if not member:
        raise LockError("Empty member in lock name %r" % ("%s/" % (level,),))
    if "/" in member:
        raise LockError("Lock member %r of level %r contains '/'" % (member, level))
    if any(c.isspace() or not c.isprintable() for c in member):
        raise LockError("Lock member %r of level %r contains blanks or control characters" % (member, level))
    fixed = _FIXED_MEMBERS.get(level)
    if fixed is not None and member != GROUP_MEMBER and member not in fixed:
        raise LockError(
            "Level %r has no lock %r (it only has %s)"
            % (level, member, ", ".join(repr(m) for m in sorted(fixed)))
        )


@attrs.frozen
class LockName:
    """A parsed lock name.

    @ivar level: one of L{LEVELS}.
    @ivar member: the member within the level, or L{GROUP_MEMBER}.
    @ivar sort_key: a tuple giving the total lock order (compare the keys).
    """

    level: str
    member: str
    sort_key: tuple[int, int, str] = attrs.field(init=False, eq=False, repr=False)
    _text: str = attrs.field(init=False, eq=False, repr=False)
    _group: str | None = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        _check_member(self.level, self.member)
        text = "%s/%s" % (self.level, self.member)
        if text == CONFIG_LOCK:
            key, group = _CONFIG_KEY, None
        elif self.member == GROUP_MEMBER:
            key, group = (_LEVEL_INDEX[self.level], 0, ""), None
        else:
            key = (_LEVEL_INDEX[self.level], 1, self.member)
            group = "%s/%s" % (self.level, GROUP_MEMBER)
        object.__setattr__(self, "sort_key", key)
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_group", group)

    @staticmethod
    def parse(text: str) -> LockName:
        """Parse C{"<level>/<member>"}; the member is all after the first C{/}.

        @raise LockError: the name is malformed (not a string, no C{/},
            unknown level, empty member, member with C{/} or blanks, or a
            member that a fixed level does not have).
        """
        if not isinstance(text, str):
            raise LockError("Lock name must be a string, not %r" % (text,))
        return _parse(text)

    def __str__(self) -> str:
        return self._text

    @property
    def is_group(self) -> bool:
        """Whether this is a level-wide group lock C{<level>/[lockset]}."""
        return self.member == GROUP_MEMBER

    @property
    def is_config(self) -> bool:
        """Whether this is the config lock."""
        return self._text == CONFIG_LOCK

    @property
    def group_name(self) -> str | None:
        """The name of the group lock this lock implies, or C{None}."""
        return self._group

    @property
    def implied(self) -> LockName | None:
        """The group lock that holding this lock implies, or C{None}.

        C{cluster/BGL} implies C{cluster/[lockset]}, any member C{X/m}
        implies C{X/[lockset]}; group locks and the config lock imply
        nothing.
        """
        if self._group is None:
            return None
        return _parse(self._group)


@functools.lru_cache(maxsize=1 << 16)
def _parse(text: str) -> LockName:
    level, sep, member = text.partition("/")
    if not sep:
        raise LockError("Malformed lock name %r: expected '<level>/<member>'" % (text,))
    return LockName(level, member)


def parse(text: str) -> LockName:
    """Parse a lock name; see L{LockName.parse}."""
    return LockName.parse(text)


def sort_key(text: str) -> tuple[int, int, str]:
    """Return the order key of the lock named C{text}.

    @raise LockError: the name is malformed.
    """
    return LockName.parse(text).sort_key


def sorted_names(names: Iterable[str]) -> list[str]:
    """Return C{names} sorted in lock order."""
    return sorted(names, key=sort_key)
