"""Lock-step planning alone: what an opcode asks WConfD for, level by level,
and how its attempts time out and grow more urgent."""

from __future__ import annotations

import pytest

from ganeti import errors
from ganeti.jobs.lifecycle import PRIO_HIGHEST, PRIO_LOW, PRIO_NORMAL
from ganeti.jobs.lockplan import (
    ACQUIRE,
    ADD,
    OPPORTUNISTIC,
    LevelNeeds,
    LevelPlan,
    Step,
    attempt_timeouts,
    escalate,
    plan_bgl,
    plan_level,
)
from ganeti.locking.names import group_lock


def test_attempts_end_with_one_that_waits_as_long_as_it_takes() -> None:
    assert attempt_timeouts((1.0, 2, 4.0, 8.0)) == (1.0, 2.0, 4.0, 8.0, None)
    assert attempt_timeouts(()) == (None,)


@pytest.mark.parametrize("bad", [0, -1.0, "1", True, None])
def test_bad_timeouts_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="positive numbers of seconds"):
        attempt_timeouts((1.0, bad))


def test_each_attempt_is_one_more_urgent_up_to_the_highest() -> None:
    assert escalate(PRIO_LOW) == PRIO_LOW - 1
    assert escalate(PRIO_NORMAL) == -1
    assert escalate(PRIO_HIGHEST + 1) == PRIO_HIGHEST
    assert escalate(PRIO_HIGHEST) == PRIO_HIGHEST


def test_the_bgl_shared_or_exclusive_or_not_at_all() -> None:
    assert plan_bgl(True, False) == LevelPlan("cluster", (Step(ACQUIRE, ("cluster/BGL",), "shared"),), ("BGL",))
    assert plan_bgl(True, True).steps == (Step(ACQUIRE, ("cluster/BGL",), "exclusive"),)
    assert plan_bgl(False, True).steps == ()


def test_a_level_not_needed_has_no_steps() -> None:
    assert plan_level("instance", LevelNeeds()) == LevelPlan("instance")
    # needed, but with no members: nothing to ask for, nothing recorded as held
    assert plan_level("node", LevelNeeds(acquiring=True)).steps == ()


def test_existing_members_sorted_once_in_the_level_mode() -> None:
    plan = plan_level("node", LevelNeeds(acquiring=True, wanted=("n2", "n1", "n2"), shared=True))
    assert plan.steps == (Step(ACQUIRE, ("node/n1", "node/n2"), "shared"),)
    assert plan.held == ("n1", "n2")
    assert not plan.held_all and not plan.opportunistic


def test_the_whole_level_is_its_group_lock() -> None:
    plan = plan_level("instance", LevelNeeds(acquiring=True, all_members=True))
    assert plan.steps == (Step(ACQUIRE, (group_lock("instance"),), "exclusive"),)
    assert plan.held_all


@pytest.mark.parametrize(
    "added,wanted,kinds",
    [
        # new names sorting before every existing one are created first
        (("a-new",), ("b-old",), [(ADD, ("node/a-new",)), (ACQUIRE, ("node/b-old",))]),
        # otherwise the existing ones are acquired first
        (("z-new",), ("b-old",), [(ACQUIRE, ("node/b-old",)), (ADD, ("node/z-new",))]),
        (("b", "a"), (), [(ADD, ("node/a", "node/b"))]),
    ],
)
def test_new_and_existing_names_in_lock_order(
    added: tuple[str, ...], wanted: tuple[str, ...], kinds: list[tuple[str, tuple[str, ...]]]
) -> None:
    plan = plan_level("node", LevelNeeds(adding=True, added=added, acquiring=bool(wanted), wanted=wanted))
    assert [(s.kind, s.names) for s in plan.steps] == kinds
    assert plan.held == tuple(sorted(set(added) | set(wanted)))


def test_names_added_only_after_declare_are_held_but_not_created() -> None:
    # the level was not in add_locks before declare_locks: Ganeti creates nothing there
    plan = plan_level("node", LevelNeeds(adding=False, added=("late",), acquiring=True, wanted=("n1",)))
    assert plan.steps == (Step(ACQUIRE, ("node/n1",), "exclusive"),)
    assert plan.held == ("late", "n1")


def test_adding_at_a_level_wanted_whole_is_a_programming_error() -> None:
    with pytest.raises(errors.ProgrammerError, match="LUInstanceCreate adds locks at level instance"):
        plan_level("instance", LevelNeeds(adding=True, added=("i1",), acquiring=True, all_members=True),
                   who="LUInstanceCreate")


def test_opportunistic_levels_are_one_step_and_ignore_additions() -> None:
    plan = plan_level("node", LevelNeeds(adding=True, added=("x",), acquiring=True, wanted=("n2", "n1"),
                                         opportunistic=True, shared=True))
    assert plan.steps == (Step(OPPORTUNISTIC, ("n1", "n2"), "shared"),)
    assert plan.opportunistic and not plan.held_all
    whole = plan_level("node", LevelNeeds(acquiring=True, all_members=True, opportunistic=True))
    assert whole.steps == (Step(OPPORTUNISTIC, (), "exclusive"),) and whole.held_all
