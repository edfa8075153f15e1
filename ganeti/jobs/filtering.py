"""Job filter rules: their format, their checks and what they do to jobs (pure, no I/O).

A rule (Ganeti's C{FilterRule}, kept in config.data under C{filters}) is::

    {"uuid": ..., "watermark": 17, "priority": 0,
     "predicates": [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
     "action": "PAUSE", "reason_trail": [["gnt:user", "maintenance", 1700000000000000000]]}

Facts from Ganeti 3.0's design (design-optables.rst) and its scheduler
(C{JQScheduler/Filtering.hs}):

  - rules are taken by (priority, watermark, uuid), lowest first; the rule
    that I{applies} to a job is the first whose predicates all match it
    and whose action is not C{CONTINUE} (no predicate: always matches);
  - a predicate is C{[name, filter]}: C{jobid} (field C{id}; the string
    C{"watermark"} stands for the rule's watermark), C{opcode} (any field
    of the opcode, dotted paths reach into nested objects; true when one
    opcode of the job matches) or C{reason} (fields C{source}, C{reason},
    C{timestamp} of the reason trail entries of the job's opcodes);
  - C{jobid} and C{reason} filters only compare: a regular expression,
    C{=[]}, C{?} or an unknown field makes the whole predicate false;
  - actions: C{ACCEPT} and C{CONTINUE} let a job run, C{PAUSE} keeps it
    queued, C{REJECT} cancels it while queued, C{["RATE_LIMIT", n]} lets it
    start only while fewer than C{n} running jobs have this rule applying;
  - a reason text C{rate-limit:<n>:<label>} puts a job in an ad-hoc bucket
    of at most C{n} running jobs (design-optables, "Ad-Hoc Rate Limiting").

L{check_rule} refuses what Ganeti's LuxiD cannot decode (an unknown
predicate or action, a malformed filter, a negative priority) with
C{OpPrereqError}; L{rules_from_config} reads the stored rules.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, Sequence

import attrs

from ganeti import errors
from ganeti.jobs.model import QueuedJob

ACCEPT, PAUSE, REJECT, CONTINUE, RATE_LIMIT = "ACCEPT", "PAUSE", "REJECT", "CONTINUE", "RATE_LIMIT"
#: the actions that take no argument (case-sensitive, as Ganeti's)
SIMPLE_ACTIONS = (ACCEPT, PAUSE, REJECT, CONTINUE)
#: the predicate names, in Ganeti's order
PREDICATES = ("jobid", "opcode", "reason")
#: the fields of a rule, in the order of Ganeti's query fields and RAPI
RULE_FIELDS = ("watermark", "priority", "predicates", "action", "reason_trail", "uuid")
#: opcode parameters that are not part of the opcode for C{opcode} predicates (Ganeti's CommonOpParams)
META_PARAMS = frozenset({"dry_run", "debug_level", "priority", "depends", "comment", "reason"})
#: deeper filters are refused
MAX_DEPTH = 100

_BINARY = ("=", "==", "!=", "<", "<=", ">", ">=", "=~", "=[]")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_RATE_LIMIT_REASON = re.compile(r"^rate-limit:([0-9]+):")


def _bad(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


# --- the format ------------------------------------------------------------------


def is_uuid(value: Any) -> bool:
    """Whether C{value} is a UUID string (Ganeti's C{isUUID})."""
    return isinstance(value, str) and _UUID.match(value) is not None


def check_action(action: Any) -> Any:
    """C{action} as stored: one of L{SIMPLE_ACTIONS} or C{["RATE_LIMIT", n]}
    (C{n} a positive integer).  The text C{"RATE_LIMIT n"} of the command line
    is taken too."""
    if isinstance(action, str):
        if action in SIMPLE_ACTIONS:
            return action
        words = action.split()
        if len(words) == 2 and words[0] == RATE_LIMIT:
            try:
                action = [RATE_LIMIT, int(words[1])]
            except ValueError:
                raise _bad("RATE_LIMIT argument must be a positive integer, not %r" % words[1]) from None
    if isinstance(action, (list, tuple)) and action and action[0] == RATE_LIMIT:
        if len(action) != 2 or isinstance(action[1], bool) or not isinstance(action[1], (int, float)) \
                or action[1] != int(action[1]) or action[1] <= 0:
            raise _bad("RATE_LIMIT argument must be a positive integer, not %s" % _show(action[1:]))
        return [RATE_LIMIT, int(action[1])]
    raise _bad("Unknown filter action %s (expected one of %s, or [\"RATE_LIMIT\", n])"
               % (_show(action), ", ".join(SIMPLE_ACTIONS)))


def check_predicates(predicates: Any) -> list[Any]:
    """The predicates as stored, checked: a list of C{[name, filter]}."""
    if not isinstance(predicates, (list, tuple)):
        raise _bad("Filter predicates must be a list, not %s" % _show(predicates))
    out = []
    for predicate in predicates:
        if not isinstance(predicate, (list, tuple)) or not predicate or not isinstance(predicate[0], str):
            raise _bad("Malformed filter predicate %s: must be a list whose first entry names the predicate"
                       " (one of %s)" % (_show(predicate), ", ".join(PREDICATES)))
        name = predicate[0]
        if name not in PREDICATES:
            raise _bad("Unknown filter predicate '%s' (expected one of %s)" % (name, ", ".join(PREDICATES)))
        if len(predicate) != 2:
            raise _bad("Malformed filter predicate: bad parameter list for '%s' predicate: %s"
                       % (name, _show(list(predicate[1:]))))
        _check_filter(predicate[1], 0)
        out.append([name, predicate[1]])
    return out


def _check_filter(flt: Any, depth: int) -> None:
    """Refuse what Ganeti's query language parser refuses."""
    if flt is None:
        return
    if depth > MAX_DEPTH:
        raise _bad("Filter nested deeper than %d levels" % MAX_DEPTH)
    if not isinstance(flt, (list, tuple)) or not flt or not isinstance(flt[0], str):
        raise _bad("Cannot parse filter %s: expected [operator, arguments...]" % _show(flt))
    op, args = flt[0], flt[1:]
    if op in ("&", "|"):
        for sub in args:
            _check_filter(sub, depth + 1)
    elif op == "!":
        if len(args) != 1:
            raise _bad("Operator '!' takes exactly one filter, got %d arguments" % len(args))
        _check_filter(args[0], depth + 1)
    elif op == "?":
        if len(args) != 1 or not isinstance(args[0], str):
            raise _bad("Operator '?' takes exactly one field name, got %s" % _show(list(args)))
    elif op in _BINARY:
        if len(args) != 2 or not isinstance(args[0], str):
            raise _bad("Operator '%s' takes a field name and a value, got %s" % (op, _show(list(args))))
        value = args[1]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise _bad("Filter values must be strings or integers, not %s" % _show(value))
        if op == "=~":
            if not isinstance(value, str):
                raise _bad("Operator '=~' needs a regular expression string, not %s" % _show(value))
            try:
                re.compile(value)
            except (re.error, OverflowError, RecursionError) as e:
                raise _bad("Invalid regular expression '%s': %s" % (value, e)) from None
    else:
        raise _bad("Unknown filter operator '%s'" % op)


def check_reason(reason: Any) -> list[list[Any]]:
    """A reason trail: a list of C{[source, text, timestamp]}."""
    if not isinstance(reason, (list, tuple)):
        raise _bad("A reason trail must be a list, not %s" % _show(reason))
    out = []
    for entry in reason:
        if (not isinstance(entry, (list, tuple)) or len(entry) != 3 or not isinstance(entry[0], str)
                or not isinstance(entry[1], str) or isinstance(entry[2], bool)
                or not isinstance(entry[2], (int, float))):
            raise _bad("Reason trail entries must be [source, text, timestamp], not %s" % _show(entry))
        out.append([entry[0], entry[1], int(entry[2])])
    return out


def check_priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise _bad("Filter priority must be a non-negative integer, not %s" % _show(priority))
    return priority


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


@attrs.frozen
class FilterRule:
    """One rule as the scheduler uses it (see the module docstring)."""

    uuid: str
    watermark: int
    priority: int
    predicates: list[Any]
    action: Any
    reason_trail: list[Any] = attrs.field(factory=list)
    _tests: list[JobTest] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_tests", [compile_predicate(p, self.watermark) for p in self.predicates])

    def matches(self, job: QueuedJob) -> bool:
        """Whether every predicate holds for C{job} (no predicate: always)."""
        return all(test(job) for test in self._tests)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FilterRule:
        """A stored rule, checked (L{errors.OpPrereqError} if malformed)."""
        if not isinstance(data, Mapping):
            raise _bad("A filter rule must be an object, not %s" % _show(data))
        watermark = data.get("watermark")
        if isinstance(watermark, bool) or not isinstance(watermark, int):
            raise _bad("A filter rule's watermark must be a job id, not %s" % _show(watermark))
        uuid = data.get("uuid")
        if not isinstance(uuid, str):
            raise _bad("A filter rule's uuid must be a string, not %s" % _show(uuid))
        return cls(uuid=uuid, watermark=watermark, priority=check_priority(data.get("priority")),
                   predicates=check_predicates(data.get("predicates")), action=check_action(data.get("action")),
                   reason_trail=check_reason(data.get("reason_trail", [])))

    def to_dict(self) -> dict[str, Any]:
        return {"watermark": self.watermark, "priority": self.priority, "predicates": self.predicates,
                "action": self.action, "reason_trail": self.reason_trail, "uuid": self.uuid}

    @property
    def order(self) -> tuple[int, int, str]:
        """Ganeti's order of evaluation: priority, then watermark, then uuid."""
        return (self.priority, self.watermark, self.uuid)

    @property
    def rate_limit(self) -> int | None:
        """C{n} of a C{RATE_LIMIT n} rule, else C{None}."""
        if isinstance(self.action, list) and self.action[0] == RATE_LIMIT:
            return int(self.action[1])
        return None


def rules_from_config(filters: Mapping[str, Any]) -> tuple[list[FilterRule], list[str]]:
    """The rules of config.data's C{filters} in evaluation order, and a
    problem per stored rule that cannot be read (it is left out)."""
    rules, problems = [], []
    for key, data in filters.items():
        try:
            rules.append(FilterRule.from_dict(data))
        except errors.OpPrereqError as e:
            problems.append("filter rule %s: %s" % (key, e.args[0]))
    rules.sort(key=lambda rule: rule.order)
    return rules, problems


# --- predicates ----------------------------------------------------------------------
#
# A predicate is compiled once (per rule) into a function of the job.  Its
# filter becomes a tree of closures; a leaf that cannot be evaluated (a
# regular expression in a jobid predicate, a missing opcode field) raises
# _Invalid when it is reached, which makes the predicate (for opcode: that
# opcode) false, as Ganeti's evaluation in its Maybe/Result monad does.


class _Invalid(Exception):
    """A leaf the predicate cannot evaluate: the predicate is false."""


#: a compiled filter over one item (a job id, a reason entry, an opcode)
Test = Callable[[Any], bool]
#: compiles one leaf: (operator, field, value) -> test
LeafCompiler = Callable[[str, str, Any], Test]
#: a compiled predicate: job -> bool
JobTest = Callable[[QueuedJob], bool]


def _compile(flt: Any, leaf: LeafCompiler) -> Test:
    """The test of filter C{flt}: C{&} and C{|} short-circuit left to right, as Ganeti's C{allM}/C{anyM}."""
    if flt is None:
        return lambda item: True
    op, args = flt[0], flt[1:]
    if op in ("&", "|"):
        subs = [_compile(sub, leaf) for sub in args]
        if op == "&":
            return lambda item: all(sub(item) for sub in subs)
        return lambda item: any(sub(item) for sub in subs)
    if op == "!":
        inner = _compile(args[0], leaf)
        return lambda item: not inner(item)
    if op == "?":
        return leaf("?", args[0], None)
    if op == "!=":
        equal = leaf("==", args[0], args[1])
        return lambda item: not equal(item)
    return leaf("==" if op == "=" else op, args[0], args[1])


def _invalid(item: Any) -> bool:
    raise _Invalid()


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: bool(a == b), "<": lambda a, b: bool(a < b), "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b), ">=": lambda a, b: bool(a >= b),
}


def _filter_value_key(value: Any) -> tuple[int, Any]:
    """Ganeti's C{FilterValue} order: every string before every number."""
    return (0, value) if isinstance(value, str) else (1, value)


def _jobid_leaf(watermark: int) -> LeafCompiler:
    """Leaves over a job id: comparisons of the field C{id} only."""

    def leaf(op: str, field: str, value: Any) -> Test:
        compare = _COMPARE.get(op)
        if compare is None or field != "id" or (isinstance(value, str) and value != "watermark"):
            return _invalid
        wanted = watermark if isinstance(value, str) else value
        return lambda job_id: compare(job_id, wanted)

    return leaf


_REASON_FIELDS = {"source": 0, "reason": 1, "timestamp": 2}


def _reason_leaf(op: str, field: str, value: Any) -> Test:
    """Leaves over a reason entry C{(source, text, timestamp)}: comparisons only."""
    compare, index = _COMPARE.get(op), _REASON_FIELDS.get(field)
    if compare is None or index is None:
        return _invalid
    key = _filter_value_key(value)
    return lambda entry: compare(_filter_value_key(entry[index]), key)


def _opcode_leaf(op: str, field: str, value: Any) -> Test:
    """Leaves over an opcode's JSON; C{a.b.c} reaches into nested objects."""
    path = field.split(".")
    if path[0] in META_PARAMS:
        return _invalid  # the common parameters are not part of the opcode

    def get(opcode: Any) -> Any:
        for part in path:
            if not isinstance(opcode, Mapping) or part not in opcode:
                raise _Invalid()
            opcode = opcode[part]
        return opcode

    if op == "?":
        def truth(opcode: Any) -> bool:
            actual = get(opcode)
            if not isinstance(actual, bool):
                raise _Invalid()
            return actual

        return truth
    if op == "=~":
        regex = re.compile(value)

        def search(opcode: Any) -> bool:
            actual = get(opcode)
            if not isinstance(actual, str):
                raise _Invalid()
            return regex.search(actual) is not None

        return search
    if op == "=[]":
        def contains(opcode: Any) -> bool:
            actual = get(opcode)
            if not isinstance(actual, list):
                raise _Invalid()
            return any(_json_kind(item) == _json_kind(value) and item == value for item in actual)

        return contains
    compare, kind = _COMPARE[op], _json_kind(value)

    def compared(opcode: Any) -> bool:
        actual = get(opcode)
        if _json_kind(actual) != kind:  # values of different kinds order by kind
            return compare(_json_kind(actual), kind)
        return compare(actual, value)

    return compared


def _json_kind(value: Any) -> int:
    """The order of JSON value kinds in Ganeti's (derived) C{JSValue} order."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return 1
    if isinstance(value, (int, float)):
        return 2
    if isinstance(value, str):
        return 3
    if isinstance(value, (list, tuple)):
        return 4
    return 5


def _holds(test: Test, item: Any) -> bool:
    try:
        return test(item)
    except (_Invalid, TypeError):  # (TypeError: values a job carries that do not order, e.g. two objects)
        return False


def _inputs(job: QueuedJob) -> list[dict[str, Any]]:
    return [op.input for op in job.ops if isinstance(op.input, dict)]


def reasons_of(job: QueuedJob) -> list[Sequence[Any]]:
    """Every reason trail entry of every opcode of the job."""
    out: list[Sequence[Any]] = []
    for op in _inputs(job):
        trail = op.get("reason")
        for entry in trail if isinstance(trail, list) else []:
            if isinstance(entry, (list, tuple)) and len(entry) == 3:
                out.append(entry)
    return out


def compile_predicate(predicate: Sequence[Any], watermark: int) -> JobTest:
    """Predicate C{[name, filter]} (checked by L{check_predicates}) as a test of a job."""
    name, flt = predicate[0], predicate[1]
    if name == "jobid":
        test = _compile(flt, _jobid_leaf(watermark))
        return lambda job: _holds(test, job.id)
    if name == "opcode":
        test = _compile(flt, _opcode_leaf)
        return lambda job: any(_holds(test, op) for op in _inputs(job))
    if name == "reason":
        test = _compile(flt, _reason_leaf)
        return lambda job: any(_holds(test, entry) for entry in reasons_of(job))
    return lambda job: False


def match_predicate(job: QueuedJob, watermark: int, predicate: Sequence[Any]) -> bool:
    """Whether one predicate holds for C{job}."""
    return compile_predicate(predicate, watermark)(job)


def matches(job: QueuedJob, rule: FilterRule) -> bool:
    """Whether every predicate of C{rule} holds for C{job}."""
    return rule.matches(job)


def applying_rule(rules: Sequence[FilterRule], job: QueuedJob) -> FilterRule | None:
    """The rule that applies to C{job}: the first one (C{rules} are in
    evaluation order) that matches it and is not C{CONTINUE}."""
    for rule in rules:
        if rule.action != CONTINUE and rule.matches(job):
            return rule
    return None


# --- scheduling --------------------------------------------------------------------


def reject_message(rule: FilterRule) -> str:
    """The result of a job canceled because C{REJECT} rule C{rule} applies to it."""
    return "Job canceled: rejected by job filter rule %s" % rule.uuid


def filter_jobs(rules: Sequence[FilterRule], running: Iterable[QueuedJob], candidates: Iterable[QueuedJob],
                known: Mapping[int, FilterRule | None] | None = None) -> list[QueuedJob]:
    """The candidates (in order) the rules let start now (Ganeti's C{jobFiltering}).

    A C{RATE_LIMIT n} rule admits a job while fewer than C{n} jobs it
    applies to run, counting the jobs admitted before it in this pass.

    @param known: job id -> its applying rule, where already found.
    """
    candidates = list(candidates)
    if not rules:
        return candidates
    known = known or {}

    def applying(job: QueuedJob) -> FilterRule | None:
        return known[job.id] if job.id in known else applying_rule(rules, job)

    used: dict[str, int] = {}
    if any(rule.rate_limit is not None for rule in rules):
        for job in running:
            rule = applying(job)
            if rule is not None and rule.rate_limit is not None:
                used[rule.uuid] = used.get(rule.uuid, 0) + 1
    out = []
    for job in candidates:
        rule = applying(job)
        if rule is None or rule.action in (ACCEPT, CONTINUE):
            out.append(job)
            continue
        limit = rule.rate_limit
        if limit is not None and used.get(rule.uuid, 0) < limit:
            used[rule.uuid] = used.get(rule.uuid, 0) + 1
            out.append(job)
    return out


def reason_buckets(job: QueuedJob) -> dict[str, int]:
    """The ad-hoc rate limit buckets of a job: C{"<n>:<label>"} -> C{n}."""
    out = {}
    for entry in reasons_of(job):
        text = entry[1]
        found = _RATE_LIMIT_REASON.match(text) if isinstance(text, str) else None
        if found is not None and int(found.group(1)) > 0:
            out[text[len("rate-limit:"):]] = int(found.group(1))
    return out


def reason_rate_limit(running: Iterable[QueuedJob], candidates: Iterable[QueuedJob]) -> list[QueuedJob]:
    """The candidates (in order) their ad-hoc buckets let start now: at most
    C{n} running jobs per bucket C{rate-limit:<n>:<label>}."""
    used: dict[str, int] = {}
    for job in running:
        for bucket in reason_buckets(job):
            used[bucket] = used.get(bucket, 0) + 1
    out = []
    for job in candidates:
        buckets = reason_buckets(job)
        if all(used.get(bucket, 0) < limit for bucket, limit in buckets.items()):
            for bucket in buckets:
                used[bucket] = used.get(bucket, 0) + 1
            out.append(job)
    return out


__all__ = [
    "ACCEPT", "CONTINUE", "PAUSE", "PREDICATES", "RATE_LIMIT", "REJECT", "RULE_FIELDS", "SIMPLE_ACTIONS",
    "FilterRule", "applying_rule", "check_action", "check_predicates", "check_priority", "check_reason",
    "compile_predicate", "filter_jobs", "is_uuid", "match_predicate", "matches", "reason_rate_limit", "reject_message",
    "rules_from_config",
]
