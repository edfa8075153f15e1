"""Ganeti's query language: filters of LUXI C{Query} (spec/luxi.md section 4).

A filter is C{None} (everything matches) or a list whose first element is
the operator::

    ["&", f, ...]  ["|", f, ...]  ["!", f]  ["?", field]
    [op, field, value]   op in ==, = (legacy), !=, <, >, <=, >=, =~, =[]

Values are strings or integers.  L{compile_filter} checks a filter once
(operators, arity, value types, field names, regular expressions) and
returns a predicate over one item; anything wrong raises
L{errors.QueryFilterParseError} with C{ECODE_INVAL}.

Evaluation rules:
  - a comparison, C{?}, C{=~} or C{=[]} on a field whose status is not
    C{RS_NORMAL} (no data, unavailable, offline) does not match; C{!=}
    does not match either, but C{["!", ["==", ...]]} does;
  - values of different types never compare equal or ordered (a string
    field never matches an integer value);
  - C{=~} searches (not anchored) in string values; C{=[]} tests list
    membership; C{?} tests truthiness;
  - host name fields (L{fields.QFF_HOSTNAME}) also match the short name
    with C{==} ("node1" matches "node1.example.com", case-insensitively);
  - job id fields accept decimal strings; timestamp fields
    (C{[seconds, microseconds]}) compare by their seconds.

Pure: no Twisted, no I/O.
"""

from __future__ import annotations

import operator
import re
from typing import Any, Callable, Mapping, cast

from ganeti import errors
from ganeti.query.fields import QFF_HOSTNAME, QFF_JOB_ID, QFF_TIMESTAMP, RS_NORMAL, FieldDef

OP_AND = "&"
OP_OR = "|"
OP_NOT = "!"
OP_TRUE = "?"
OP_EQUAL = "=="
OP_EQUAL_LEGACY = "="
OP_NOT_EQUAL = "!="
OP_LT = "<"
OP_LE = "<="
OP_GT = ">"
OP_GE = ">="
OP_REGEXP = "=~"
OP_CONTAINS = "=[]"

BINARY_OPS = frozenset({OP_EQUAL, OP_EQUAL_LEGACY, OP_NOT_EQUAL, OP_LT, OP_LE, OP_GT, OP_GE, OP_REGEXP, OP_CONTAINS})
ALL_OPS = BINARY_OPS | {OP_AND, OP_OR, OP_NOT, OP_TRUE}

#: deeper filters are refused (keeps evaluation off Python's recursion limit)
MAX_DEPTH = 100

#: C{get(field_name) -> (status, value)} for the item being tested
CellGetter = Callable[[str], "tuple[int, Any]"]
Predicate = Callable[[CellGetter], bool]

_ORDER = {OP_LT: operator.lt, OP_LE: operator.le, OP_GT: operator.gt, OP_GE: operator.ge}


def _error(msg: str) -> errors.QueryFilterParseError:
    return errors.QueryFilterParseError(msg, errors.ECODE_INVAL)


def _always(get: CellGetter) -> bool:
    return True


def compile_filter(qfilter: Any, known_fields: Mapping[str, FieldDef]) -> Predicate:
    """Check C{qfilter} against C{known_fields} and return its predicate.

    The predicate takes C{get(field_name) -> (status, value)} for the item
    being tested and returns whether the item matches.

    @raise errors.QueryFilterParseError: a malformed filter, an unknown
        operator or field, a wrong number of arguments, a value that is
        neither a string nor an integer, or a bad regular expression.
    """
    if qfilter is None:
        return _always
    return _compile(qfilter, known_fields, 0)


def _compile(flt: Any, known: Mapping[str, FieldDef], depth: int) -> Predicate:
    if depth > MAX_DEPTH:
        raise _error("Filter nested deeper than %d levels" % MAX_DEPTH)
    if not isinstance(flt, (list, tuple)) or not flt or not isinstance(flt[0], str):
        raise _error("Cannot parse filter: expected a list [operator, arguments...], got %r" % (flt,))
    op, args = flt[0], list(flt[1:])
    if op in (OP_AND, OP_OR):
        subs = [_compile(sub, known, depth + 1) for sub in args]
        if op == OP_AND:
            return lambda get: all(sub(get) for sub in subs)
        return lambda get: any(sub(get) for sub in subs)
    if op == OP_NOT:
        if len(args) != 1:
            raise _error("Operator '!' takes exactly one filter, got %d arguments" % len(args))
        inner = _compile(args[0], known, depth + 1)
        return lambda get: not inner(get)
    if op == OP_TRUE:
        if len(args) != 1:
            raise _error("Operator '?' takes exactly one field name, got %d arguments" % len(args))
        name = _field(args[0], known).name

        def truth(get: CellGetter) -> bool:
            status, value = get(name)
            return status == RS_NORMAL and bool(value)

        return truth
    if op in BINARY_OPS:
        if len(args) != 2:
            raise _error("Operator '%s' takes a field name and a value, got %d arguments" % (op, len(args)))
        fdef = _field(args[0], known)
        value = _value(args[1])
        return _leaf(fdef.name, _test(op, fdef, value))
    raise _error("Unknown filter operator '%s'" % op)


def _field(name: Any, known: Mapping[str, FieldDef]) -> FieldDef:
    if not isinstance(name, str):
        raise _error("Field names must be strings, not %r" % (name,))
    fdef = known.get(name)
    if fdef is None:
        raise _error("Unknown field '%s' in filter" % name)
    return fdef


def _value(value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _error("Filter values must be strings or integers, not %r" % (value,))
    return value


def _leaf(name: str, test: Callable[[Any], bool]) -> Predicate:
    def leaf(get: CellGetter) -> bool:
        status, actual = get(name)
        return status == RS_NORMAL and test(actual)

    return leaf


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_kind(actual: Any, value: str | int) -> bool:
    if isinstance(value, str):
        return isinstance(actual, str)
    return _is_number(actual)


def _test(op: str, fdef: FieldDef, value: str | int) -> Callable[[Any], bool]:
    """The test C{op} makes on a (normal) field value."""
    if op == OP_REGEXP:
        if not isinstance(value, str):
            raise _error("Operator '=~' needs a regular expression string, not %r" % (value,))
        try:
            regex = re.compile(value)
        except (re.error, OverflowError, RecursionError) as e:
            raise _error("Invalid regular expression '%s': %s" % (value, e)) from None
        return lambda actual: isinstance(actual, str) and regex.search(actual) is not None
    if op == OP_CONTAINS:
        return lambda actual: isinstance(actual, (list, tuple)) and any(
            _same_kind(item, value) and item == value for item in actual
        )
    if fdef.qff == QFF_JOB_ID and isinstance(value, str):
        if not value.isdigit():
            return lambda actual: False
        value = int(value)
    convert = _seconds if fdef.qff == QFF_TIMESTAMP else None
    if op in (OP_EQUAL, OP_EQUAL_LEGACY, OP_NOT_EQUAL):
        if fdef.qff == QFF_HOSTNAME and isinstance(value, str):
            equal = _hostname_equal(value)
        else:
            equal = _typed_equal(value, convert)
        if op == OP_NOT_EQUAL:
            return lambda actual: not equal(actual)
        return equal
    compare = _ORDER[op]

    def ordered(actual: Any) -> bool:
        if convert is not None:
            actual = convert(actual)
        return _same_kind(actual, value) and compare(actual, value)

    return ordered


def _seconds(actual: Any) -> Any:
    if isinstance(actual, (list, tuple)) and len(actual) == 2:
        return actual[0]
    return actual


def _typed_equal(value: str | int, convert: Callable[[Any], Any] | None) -> Callable[[Any], bool]:
    def equal(actual: Any) -> bool:
        if convert is not None:
            actual = convert(actual)
        return _same_kind(actual, value) and actual == value

    return equal


def _hostname_equal(value: str) -> Callable[[Any], bool]:
    wanted = value.lower()
    prefix = wanted + "."

    def equal(actual: Any) -> bool:
        if not isinstance(actual, str):
            return False
        actual = actual.lower()
        return cast("bool", actual == wanted or actual.startswith(prefix))

    return equal


def names_from_filter(qfilter: Any, namefield: str) -> list[str | int] | None:
    """The names a filter asks for, if it only asks for names.

    That is the case for C{["==", namefield, name]} and for an OR (nested
    ORs included) of such filters; the names come in filter order.  Any
    other filter, and C{None}, give C{None}.  Callers use this to report
    unknown names instead of returning nothing.
    """
    if qfilter is None:
        return None
    names: list[str | int] = []
    if not _collect_names(qfilter, namefield, names, 0):
        return None
    return names


def _collect_names(flt: Any, namefield: str, out: list[str | int], depth: int) -> bool:
    if depth > MAX_DEPTH or not isinstance(flt, (list, tuple)) or not flt:
        return False
    op = flt[0]
    if op == OP_OR:
        return all(_collect_names(sub, namefield, out, depth + 1) for sub in flt[1:])
    if op in (OP_EQUAL, OP_EQUAL_LEGACY) and len(flt) == 3 and flt[1] == namefield:
        value = flt[2]
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return False
        out.append(value)
        return True
    return False


def make_simple_filter(namefield: str, values: list[str | int] | None) -> list[Any] | None:
    """C{["|", ["==", namefield, v], ...]}, or C{None} for no values (Ganeti's MakeSimpleFilter)."""
    if not values:
        return None
    return [OP_OR] + [[OP_EQUAL, namefield, v] for v in values]
