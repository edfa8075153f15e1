"""Job filter rules: checks, predicates, order, and what the scheduler makes of them."""

from __future__ import annotations

from typing import Any

import pytest

from ganeti import errors
from ganeti.jobs import filtering, scheduler
from ganeti.jobs.filtering import FilterRule, applying_rule, check_action, check_predicates, match_predicate
from ganeti.jobs.model import QueuedJob


def job(job_id: int, op_id: str = "OP_TEST_DELAY", reason: Any = None, **params: Any) -> QueuedJob:
    op = {"OP_ID": op_id, **params}
    if reason is not None:
        op["reason"] = reason
    return QueuedJob.new(job_id, [op], when=1000.0)


def rule(uuid: str, action: Any, *predicates: Any, priority: int = 0, watermark: int = 0) -> FilterRule:
    return FilterRule(uuid=uuid, watermark=watermark, priority=priority, predicates=list(predicates),
                      action=check_action(action))


# --- checks ----------------------------------------------------------------------------


@pytest.mark.parametrize("given,stored", [
    ("ACCEPT", "ACCEPT"), ("PAUSE", "PAUSE"), ("REJECT", "REJECT"), ("CONTINUE", "CONTINUE"),
    (["RATE_LIMIT", 3], ["RATE_LIMIT", 3]), ("RATE_LIMIT 10", ["RATE_LIMIT", 10]), (["RATE_LIMIT", 2.0], ["RATE_LIMIT", 2]),
])
def test_actions_as_ganeti_stores_them(given, stored):
    assert check_action(given) == stored


@pytest.mark.parametrize("bad", ["accept", "DROP", ["RATE_LIMIT", 0], ["RATE_LIMIT", -1], ["RATE_LIMIT"],
                                 ["RATE_LIMIT", "2"], ["RATE_LIMIT", 1.5], "RATE_LIMIT x", None, 3])
def test_bad_actions_are_refused(bad):
    with pytest.raises(errors.OpPrereqError) as raised:
        check_action(bad)
    assert raised.value.args[1] == errors.ECODE_INVAL


def test_predicates_are_checked():
    good = [["jobid", [">", "id", "watermark"]], ["opcode", ["=~", "OP_ID", "^OP_INSTANCE"]],
            ["reason", ["&", ["=", "source", "gnt:user"], ["!", ["<", "timestamp", 5]]]]]
    assert check_predicates(good) == good
    for bad, words in [([["owner", ["=", "id", 1]]], "Unknown filter predicate 'owner'"),
                       ([["jobid"]], "bad parameter list"), (["jobid"], "Malformed filter predicate"),
                       ([["jobid", ["~~", "id", 1]]], "Unknown filter operator '~~'"),
                       ([["opcode", ["=~", "OP_ID", "("]]], "Invalid regular expression"),
                       ([["opcode", ["=", "OP_ID", 1.5]]], "Filter values"),
                       ({"jobid": 1}, "must be a list")]:
        with pytest.raises(errors.OpPrereqError, match=words):
            check_predicates(bad)


def test_stored_rules_are_read_in_ganeti_order():
    stored = {
        "b": {"uuid": "b", "watermark": 5, "priority": 1, "predicates": [], "action": "ACCEPT", "reason_trail": []},
        "a": {"uuid": "a", "watermark": 9, "priority": 1, "predicates": [], "action": "PAUSE", "reason_trail": []},
        "c": {"uuid": "c", "watermark": 9, "priority": 0, "predicates": [], "action": "REJECT", "reason_trail": []},
        "d": {"uuid": "d", "watermark": 5, "priority": 1, "predicates": [], "action": "REJECT", "reason_trail": []},
        "bad": {"uuid": "bad", "watermark": 1, "priority": 0, "predicates": [["who", None]], "action": "ACCEPT"},
    }
    rules, problems = filtering.rules_from_config(stored)
    assert [r.uuid for r in rules] == ["c", "b", "d", "a"]  # priority, watermark, uuid
    assert len(problems) == 1 and "Unknown filter predicate 'who'" in problems[0]


# --- predicates ------------------------------------------------------------------------


def test_jobid_predicate_with_the_watermark():
    newer = ["jobid", [">", "id", "watermark"]]
    assert match_predicate(job(11), 10, newer)
    assert not match_predicate(job(10), 10, newer)
    assert match_predicate(job(3), 10, ["jobid", ["|", ["=", "id", 3], ["=", "id", 4]]])
    assert match_predicate(job(5), 10, ["jobid", ["!=", "id", 4]])
    # only comparisons of the field "id": anything else makes the predicate false
    assert not match_predicate(job(5), 10, ["jobid", ["=", "name", 5]])
    assert not match_predicate(job(5), 10, ["jobid", ["=", "id", "five"]])
    assert not match_predicate(job(5), 10, ["jobid", ["!", ["=~", "id", "5"]]])


def test_opcode_predicate_matches_any_opcode_and_nested_fields():
    two = QueuedJob.new(4, [{"OP_ID": "OP_TEST_DELAY", "duration": 2},
                            {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1", "beparams": {"memory": 512}}])
    assert match_predicate(two, 0, ["opcode", ["=", "OP_ID", "OP_INSTANCE_STARTUP"]])
    assert match_predicate(two, 0, ["opcode", ["=~", "instance_name", "^web"]])
    assert match_predicate(two, 0, ["opcode", [">=", "beparams.memory", 512]])
    assert not match_predicate(two, 0, ["opcode", ["&", ["=", "OP_ID", "OP_TEST_DELAY"], ["=", "instance_name", "web1"]]])
    assert not match_predicate(two, 0, ["opcode", ["=", "missing.field", 1]])
    # the common parameters (priority, reason, ...) are not fields of the opcode
    assert not match_predicate(two, 0, ["opcode", ["=", "priority", 0]])


def test_reason_predicate():
    submitted = job(7, reason=[["gnt:user", "maintenance pink bunny", 42]])
    assert match_predicate(submitted, 0, ["reason", ["=", "reason", "maintenance pink bunny"]])
    assert match_predicate(submitted, 0, ["reason", ["&", ["=", "source", "gnt:user"], ["<", "timestamp", 43]]])
    assert not match_predicate(submitted, 0, ["reason", ["=", "source", "gnt:other"]])
    # as Ganeti's scheduler: a regular expression is no comparison, the predicate is false
    assert not match_predicate(submitted, 0, ["reason", ["=~", "reason", "pink"]])


def test_applying_rule_skips_continue_and_takes_the_first_match():
    delay = ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]
    rules = [rule("1", "CONTINUE", delay), rule("2", "PAUSE", ["jobid", [">", "id", 100]]),
             rule("3", "REJECT", delay), rule("4", "ACCEPT")]
    assert applying_rule(rules, job(5)).uuid == "3"
    assert applying_rule(rules, job(101)).uuid == "2"
    assert applying_rule(rules, job(5, "OP_CLUSTER_VERIFY")).uuid == "4"
    assert applying_rule([rule("1", "CONTINUE")], job(5)) is None


# --- the scheduler ----------------------------------------------------------------------


def jobs_of(*queued: QueuedJob) -> dict[int, QueuedJob]:
    return {j.id: j for j in queued}


def test_paused_jobs_stay_queued_and_others_run():
    queue = jobs_of(job(1), job(2, "OP_CLUSTER_VERIFY"), job(3))
    pause = rule("p", "PAUSE", ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]])
    decision = scheduler.schedule(queue, [], 10, rules=[pause])
    assert decision.start == [2] and decision.reject == [] and decision.cancel == []
    assert scheduler.schedule(queue, [], 10, rules=[]).start == [1, 2, 3]


def test_rejected_jobs_are_named_with_their_rule():
    queue = jobs_of(job(1), job(2, "OP_CLUSTER_VERIFY"))
    reject = rule("r", "REJECT", ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]])
    decision = scheduler.schedule(queue, [], 10, rules=[reject])
    assert decision.start == [2]
    assert [(job_id, r.uuid) for job_id, r in decision.reject] == [(1, "r")]


def test_an_accept_rule_of_higher_priority_wins():
    queue = jobs_of(job(1, reason=[["gnt:user", "maint", 0]]), job(2))
    rules = [rule("a", "ACCEPT", ["reason", ["=", "reason", "maint"]], priority=0),
             rule("p", "PAUSE", priority=1)]
    assert scheduler.schedule(queue, [], 10, rules=rules).start == [1]


def test_rate_limit_counts_running_and_admitted_jobs():
    """A fake scheduler loop: jobs start as the decision says, end one by one."""
    limit = rule("l", ["RATE_LIMIT", 2], ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]])
    queue = jobs_of(*(job(i) for i in range(1, 6)), job(6, "OP_CLUSTER_VERIFY"))
    running: list[int] = []
    started: list[list[int]] = []
    for _round in range(4):
        decision = scheduler.schedule(queue, running, 10,
                                      rules=[limit])
        started.append(decision.start)
        running += decision.start
        assert sum(1 for i in running if i != 6) <= 2
        finished = min(i for i in running if i != 6)  # the oldest delay job ends
        running.remove(finished)
        del queue[finished]
    assert started == [[1, 2, 6], [3], [4], [5]]


def test_rate_limit_ignores_jobs_another_rule_applies_to():
    limit = rule("l", ["RATE_LIMIT", 1], priority=1)
    accept = rule("a", "ACCEPT", ["jobid", ["<", "id", 3]], priority=0)
    queue = jobs_of(job(1), job(2), job(3), job(4))
    assert scheduler.schedule(queue, [], 10, rules=[accept, limit]).start == [1, 2, 3]


def test_max_running_still_bounds_after_filtering():
    queue = jobs_of(job(1), job(2), job(3))
    assert scheduler.schedule(queue, [], 2, rules=[rule("a", "ACCEPT")]).start == [1, 2]


def test_ad_hoc_reason_rate_limit():
    bucket = [["gnt:user", "rate-limit:1:evacuation", 0]]
    queue = jobs_of(job(1, reason=bucket), job(2, reason=bucket), job(3))
    assert scheduler.schedule(queue, [], 10).start == [1, 3]
    assert scheduler.schedule({2: queue[2], 1: queue[1]}, [1], 10).start == []


def test_odd_values_in_a_job_make_a_predicate_false_not_an_error():
    odd = job(8, beparams={"memory": {"x": 1}})
    odd.ops[0].input["reason"] = [[None, {"a": 1}, "soon"]]
    assert not match_predicate(odd, 0, ["reason", ["<", "source", "x"]])
    assert not match_predicate(odd, 0, ["reason", ["<", "source", 5]])  # None < 5: no order
    assert not match_predicate(odd, 0, ["reason", [">", "timestamp", 5]])
    assert not match_predicate(odd, 0, ["opcode", ["<", "beparams.memory", 5]])
    assert not match_predicate(odd, 0, ["opcode", ["=~", "beparams", "x"]])
