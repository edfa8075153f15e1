"""How an opcode takes its locks: the plan of each step (pure).

The processor (L{ganeti.jobs.processor}) takes a logical unit's locks
level by level, in lock order, and retries a whole attempt at a more urgent
priority when one runs out of time.  This module decides what to ask for;
the processor asks WConfD and waits::

    for timeout in attempt_timeouts(DEFAULT_LOCK_TIMEOUTS):   # 1, 2, 4, 8, None
        plan = plan_bgl(uses_bgl=True, exclusive=False)        # the BGL first
        for level in LEVELS[1:]:
            lu.declare_locks(level)                            # may look at what is held
            plan = plan_level(level, LevelNeeds(...))          # then take plan.steps
        priority = escalate(priority)                          # ran out: give back, retry

No I/O and no Twisted here: inputs are the LU's needs for one level, the
output a L{LevelPlan}.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from ganeti import errors
from ganeti.jobs.lifecycle import PRIO_HIGHEST
from ganeti.locking.names import BGL, EXCLUSIVE, LEVEL_CLUSTER, SHARED, group_lock

#: a step that creates new locks (and holds them)
ADD = "add"
#: a step that acquires existing locks (waits for them)
ACQUIRE = "acquire"
#: a step that takes whatever of the members is free (at least a count)
OPPORTUNISTIC = "opportunistic"


@dataclasses.dataclass(frozen=True)
class LevelNeeds:
    """What a logical unit needs at one level (after its C{declare_locks}).

    @ivar adding: the level is in the LU's C{add_locks}.
    @ivar added: the names in its C{add_locks} for the level: created when
        C{adding}, and held afterwards in any case.
    @ivar acquiring: the level is in the LU's C{needed_locks}.
    @ivar wanted: the existing members it needs (ignored with C{all_members}).
    @ivar all_members: it needs the whole level (C{ALL_SET}).
    @ivar shared: C{share_locks} of the level.
    @ivar opportunistic: the level is in C{opportunistic_locks}.
    """

    adding: bool = False
    added: tuple[str, ...] = ()
    acquiring: bool = False
    wanted: tuple[str, ...] = ()
    all_members: bool = False
    shared: bool = False
    opportunistic: bool = False


@dataclasses.dataclass(frozen=True)
class Step:
    """One request to WConfD.

    @ivar kind: L{ADD}, L{ACQUIRE} or L{OPPORTUNISTIC}.
    @ivar names: full lock names (C{"<level>/<member>"}) for L{ADD} and
        L{ACQUIRE}; the candidate members for L{OPPORTUNISTIC} (none
        with C{all_members}: the processor lists the level's members).
    @ivar mode: C{shared} or C{exclusive}.
    """

    kind: str
    names: tuple[str, ...]
    mode: str


@dataclasses.dataclass(frozen=True)
class LevelPlan:
    """The steps of one level, in order, and what the LU holds after them.

    @ivar held: the members acquired once every step is taken (for
        C{lu.acquired}; meaningless with C{held_all} or for an
        opportunistic step, whose answer says what was got).
    @ivar held_all: the whole level is held.
    """

    level: str
    steps: tuple[Step, ...] = ()
    held: tuple[str, ...] = ()
    held_all: bool = False

    @property
    def opportunistic(self) -> bool:
        return any(step.kind == OPPORTUNISTIC for step in self.steps)


def attempt_timeouts(timeouts: Iterable[float]) -> tuple[float | None, ...]:
    """The timeouts of the successive attempts: C{timeouts}, then one
    without a timeout (waits as long as it takes)."""
    out: list[float | None] = []
    for timeout in timeouts:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError("lock timeouts are positive numbers of seconds, not %r" % (timeout,))
        out.append(float(timeout))
    out.append(None)
    return tuple(out)


def escalate(priority: int) -> int:
    """The priority of the attempt after one that ran out of time: one
    more urgent, at most L{PRIO_HIGHEST}."""
    return priority - 1 if priority > PRIO_HIGHEST else priority


def plan_bgl(uses_bgl: bool, exclusive: bool) -> LevelPlan:
    """The cluster level: the Big Ganeti Lock, shared unless C{exclusive}."""
    if not uses_bgl:
        return LevelPlan(level=LEVEL_CLUSTER)
    step = Step(ACQUIRE, (BGL,), EXCLUSIVE if exclusive else SHARED)
    return LevelPlan(level=LEVEL_CLUSTER, steps=(step,), held=("BGL",))


def plan_level(level: str, needs: LevelNeeds, who: str = "the LU") -> LevelPlan:
    """The steps that take C{needs} at C{level}.

    New names and existing ones are taken together in lock order: the
    new ones first when the smallest of them sorts before every existing
    one, else after them.  A level needed whole is one request for the
    level's group lock.

    @raise errors.ProgrammerError: the LU creates locks at a level it also
        wants whole.
    """
    if not needs.adding and not needs.acquiring:
        return LevelPlan(level=level)
    mode = SHARED if needs.shared else EXCLUSIVE
    added = sorted(set(needs.added)) if needs.adding else []
    whole = needs.acquiring and needs.all_members
    if whole and added:
        raise errors.ProgrammerError("%s adds locks at level %s and wants all of it" % (who, level))
    members = [] if whole or not needs.acquiring else sorted(set(needs.wanted))
    if needs.acquiring and needs.opportunistic:
        step = Step(OPPORTUNISTIC, tuple(members), mode)
        return LevelPlan(level=level, steps=(step,), held_all=whole)
    steps: list[Step] = []
    if whole:
        steps.append(Step(ACQUIRE, (group_lock(level),), mode))
    else:
        if added and members and min(added) < min(members):
            steps.append(Step(ADD, _names(level, added), mode))
            added_later: list[str] = []
        else:
            added_later = added
        if members:
            steps.append(Step(ACQUIRE, _names(level, members), mode))
        added = added_later
    if added:
        steps.append(Step(ADD, _names(level, added), mode))
    if not steps:
        return LevelPlan(level=level)
    if whole:
        return LevelPlan(level=level, steps=tuple(steps), held_all=True)
    held = sorted(set(members) | set(needs.added))
    return LevelPlan(level=level, steps=tuple(steps), held=tuple(held))


def _names(level: str, members: Iterable[str]) -> tuple[str, ...]:
    return tuple("%s/%s" % (level, member) for member in members)
