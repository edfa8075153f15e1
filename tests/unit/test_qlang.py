"""The query language: every operator, nesting, statuses and bad filters."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganeti import errors
from ganeti.query import qlang
from ganeti.query.fields import (
    QFF_HOSTNAME,
    QFF_JOB_ID,
    QFF_TIMESTAMP,
    QFT_OTHER,
    RS_NODATA,
    RS_NORMAL,
    RS_OFFLINE,
    RS_UNAVAIL,
    FieldDef,
    field_table,
)


def _field(name: str, qff: str = "normal") -> FieldDef:
    return FieldDef(name, name.title(), QFT_OTHER, "doc", lambda item, ctx: None, qff)


FIELDS = field_table(
    [
        _field("name", QFF_HOSTNAME),
        _field("id", QFF_JOB_ID),
        _field("ts", QFF_TIMESTAMP),
        _field("text"),
        _field("num"),
        _field("flag"),
        _field("tags"),
        _field("other"),
    ]
)


def matches(flt: Any, **cells: Any) -> bool:
    """Compile C{flt} and test one item whose fields have C{cells}.

    A cell is a plain value (status normal) or a C{(status, value)} tuple;
    fields not given have no data.
    """
    predicate = qlang.compile_filter(flt, FIELDS)

    def get(name: str) -> tuple[int, Any]:
        value = cells.get(name, (RS_NODATA, None))
        return value if isinstance(value, tuple) else (RS_NORMAL, value)

    return predicate(get)


def parse_error(flt: Any) -> errors.QueryFilterParseError:
    with pytest.raises(errors.QueryFilterParseError) as info:
        qlang.compile_filter(flt, FIELDS)
    return info.value


# --- operators --------------------------------------------------------------------


def test_no_filter_matches_everything():
    assert matches(None)
    assert matches(None, text="x")


@pytest.mark.parametrize("op", ["==", "="])
def test_equal_and_legacy_equal(op):
    assert matches([op, "text", "web"], text="web")
    assert not matches([op, "text", "web"], text="db")
    assert matches([op, "num", 5], num=5)
    assert not matches([op, "num", 5], num=6)


def test_equal_never_matches_across_types():
    assert not matches(["==", "num", "5"], num=5)
    assert not matches(["==", "text", 5], text="5")
    assert not matches(["==", "flag", 1], flag=True)


def test_not_equal():
    assert matches(["!=", "text", "web"], text="db")
    assert not matches(["!=", "text", "web"], text="web")
    assert matches(["!=", "num", 1], num=2)


@pytest.mark.parametrize(
    "op, value, expected",
    [("<", 5, False), ("<", 6, True), ("<=", 5, True), ("<=", 4, False), (">", 4, True), (">", 5, False), (">=", 5, True), (">=", 6, False)],
)
def test_ordering_numbers(op, value, expected):
    assert matches([op, "num", value], num=5) is expected


def test_ordering_strings_and_floats():
    assert matches(["<", "text", "b"], text="a")
    assert not matches([">", "text", "b"], text="a")
    assert matches([">", "num", 1], num=1.5)
    assert not matches(["<", "text", 3], text="a")


def test_regexp_searches_strings():
    assert matches(["=~", "text", "eb"], text="web1")
    assert matches(["=~", "text", "^web[0-9]+$"], text="web12")
    assert not matches(["=~", "text", "^eb"], text="web1")
    assert not matches(["=~", "num", "5"], num=5)


def test_regexp_is_compiled_once(monkeypatch):
    calls = []
    real = qlang.re.compile

    def counting(pattern: str, *args: Any) -> Any:
        calls.append(pattern)
        return real(pattern, *args)

    monkeypatch.setattr(qlang.re, "compile", counting)
    predicate = qlang.compile_filter(["=~", "text", "^a"], FIELDS)
    for value in ("a", "b", "ab"):
        predicate(lambda name, value=value: (RS_NORMAL, value))
    assert calls == ["^a"]


def test_contains():
    assert matches(["=[]", "tags", "prod"], tags=["prod", "web"])
    assert not matches(["=[]", "tags", "db"], tags=["prod", "web"])
    assert matches(["=[]", "tags", 3], tags=[1, 2, 3])
    assert not matches(["=[]", "tags", 1], tags=[True])
    assert not matches(["=[]", "tags", "p"], tags="prod")


def test_true():
    assert matches(["?", "flag"], flag=True)
    assert not matches(["?", "flag"], flag=False)
    assert matches(["?", "tags"], tags=["x"])
    assert not matches(["?", "tags"], tags=[])


def test_and_or_not_and_nesting():
    assert matches(["&", ["==", "text", "a"], ["==", "num", 1]], text="a", num=1)
    assert not matches(["&", ["==", "text", "a"], ["==", "num", 2]], text="a", num=1)
    assert matches(["|", ["==", "text", "b"], ["==", "num", 1]], text="a", num=1)
    assert not matches(["|", ["==", "text", "b"], ["==", "num", 2]], text="a", num=1)
    assert matches(["!", ["==", "text", "b"]], text="a")
    nested = ["&", ["=~", "text", "^web"], ["!", ["?", "flag"]], ["|", ["<", "num", 3], ["=[]", "tags", "x"]]]
    assert matches(nested, text="web1", flag=False, num=5, tags=["x"])
    assert not matches(nested, text="web1", flag=True, num=1, tags=[])
    assert not matches(nested, text="db1", flag=False, num=1, tags=[])


def test_empty_and_is_true_empty_or_is_false():
    assert matches(["&"])
    assert not matches(["|"])


def test_tuples_are_accepted_like_lists():
    assert matches(("&", ("==", "text", "a")), text="a")


# --- statuses ------------------------------------------------------------------------


@pytest.mark.parametrize("status", [RS_NODATA, RS_UNAVAIL, RS_OFFLINE])
def test_non_normal_status_never_matches_a_comparison(status):
    cell = (status, None)
    for flt in (
        ["==", "num", 1],
        ["!=", "num", 1],
        ["<", "num", 1],
        [">=", "num", 1],
        ["=~", "text", ""],
        ["=[]", "tags", "x"],
        ["?", "flag"],
    ):
        field = flt[1]
        assert not matches(flt, **{field: cell}), flt
    assert matches(["!", ["==", "num", 1]], num=cell)


def test_non_normal_status_with_a_value_still_does_not_match():
    assert not matches(["==", "num", 1], num=(RS_UNAVAIL, 1))


# --- field flags -----------------------------------------------------------------------


def test_hostname_fields_match_short_names():
    assert matches(["==", "name", "node1"], name="node1.example.com")
    assert matches(["==", "name", "NODE1.example.com"], name="node1.example.com")
    assert matches(["==", "name", "node1.example"], name="node1.example.com")
    assert not matches(["==", "name", "node1"], name="node10.example.com")
    assert not matches(["==", "name", "node"], name="node1")
    assert matches(["!=", "name", "node2"], name="node1.example.com")


def test_job_id_fields_accept_decimal_strings():
    assert matches(["==", "id", "12"], id=12)
    assert matches(["==", "id", 12], id=12)
    assert not matches(["==", "id", "x12"], id=12)
    assert matches([">", "id", "11"], id=12)


def test_timestamp_fields_compare_seconds():
    assert matches(["==", "ts", 100], ts=[100, 500000])
    assert matches([">=", "ts", 100], ts=[100, 999999])
    assert not matches([">", "ts", 100], ts=[100, 999999])
    assert matches(["<", "ts", 101], ts=[100, 0])


# --- bad filters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flt",
    [
        ["~~", "text", "a"],
        ["AND", ["==", "text", "a"]],
        ["in", "tags", "a"],
    ],
)
def test_unknown_operator(flt):
    assert "Unknown filter operator" in str(parse_error(flt))


@pytest.mark.parametrize(
    "flt",
    [
        ["!"],
        ["!", ["?", "flag"], ["?", "flag"]],
        ["?"],
        ["?", "flag", "extra"],
        ["==", "text"],
        ["==", "text", "a", "b"],
        ["<"],
        ["=~", "text"],
        ["=[]", "tags", "a", "b"],
    ],
)
def test_wrong_arity(flt):
    parse_error(flt)


@pytest.mark.parametrize("value", [1.5, 2.0, True, False, None, ["a"], {"a": 1}])
def test_values_must_be_strings_or_integers(value):
    parse_error(["==", "num", value])


def test_unknown_field():
    assert "nosuch" in str(parse_error(["==", "nosuch", 1]))
    parse_error(["?", "nosuch"])
    parse_error(["&", ["==", "text", "a"], ["!", ["=~", "nosuch", "x"]]])


def test_field_name_must_be_a_string():
    parse_error(["==", 1, 1])
    parse_error(["?", ["text"]])


@pytest.mark.parametrize("regex", ["(", "[a-", "*x", "a{2,1}"])
def test_bad_regex(regex):
    assert "regular expression" in str(parse_error(["=~", "text", regex]))


def test_regex_must_be_a_string():
    parse_error(["=~", "text", 5])


@pytest.mark.parametrize("flt", ["text", 5, {}, [], [1, "text"], [None], [["==", "text", "a"]], True])
def test_malformed_filters(flt):
    parse_error(flt)


def test_malformed_subfilter():
    parse_error(["&", ["==", "text", "a"], "oops"])
    parse_error(["|", ["==", "text", "a"], ["??", "flag"]])


def test_too_deep_filter():
    flt: Any = ["?", "flag"]
    for _ in range(qlang.MAX_DEPTH + 5):
        flt = ["!", flt]
    parse_error(flt)


def test_parse_errors_are_opprereq_wrong_input():
    err = parse_error(["==", "nosuch", 1])
    assert isinstance(err, errors.OpPrereqError)
    assert err.args[1] == errors.ECODE_INVAL
    assert errors.encode(err)[0] == "QueryFilterParseError"


# --- names_from_filter -----------------------------------------------------------------


def test_names_from_filter():
    assert qlang.names_from_filter(None, "name") is None
    assert qlang.names_from_filter(["==", "name", "a"], "name") == ["a"]
    assert qlang.names_from_filter(["=", "name", "a"], "name") == ["a"]
    assert qlang.names_from_filter(["|", ["==", "name", "a"], ["==", "name", "b"]], "name") == ["a", "b"]
    assert qlang.names_from_filter(["|", ["==", "name", "a"], ["|", ["==", "name", "b"]]], "name") == ["a", "b"]
    assert qlang.names_from_filter(["|"], "name") == []
    assert qlang.names_from_filter(["|", ["==", "id", 3], ["==", "id", "4"]], "id") == [3, "4"]


@pytest.mark.parametrize(
    "flt",
    [
        ["==", "text", "a"],
        ["|", ["==", "name", "a"], ["==", "uuid", "b"]],
        ["&", ["==", "name", "a"]],
        ["!", ["==", "name", "a"]],
        ["=~", "name", "a"],
        ["!=", "name", "a"],
        ["|", ["==", "name", "a"], ["?", "name"]],
        ["==", "name", 1.5],
        ["==", "name"],
        "name",
    ],
)
def test_names_from_filter_other_filters(flt):
    assert qlang.names_from_filter(flt, "name") is None


@given(st.lists(st.one_of(st.text(max_size=8), st.integers(min_value=0, max_value=10**6)), min_size=1, max_size=6))
def test_simple_filter_round_trip(values):
    flt = qlang.make_simple_filter("name", values)
    assert qlang.names_from_filter(flt, "name") == values
    predicate = qlang.compile_filter(flt, FIELDS)
    for value in values:
        if isinstance(value, str) and value:
            assert predicate(lambda name, value=value: (RS_NORMAL, value))


def test_make_simple_filter_without_values():
    assert qlang.make_simple_filter("name", []) is None
    assert qlang.make_simple_filter("name", None) is None
