"""ganeti.lightjson: the CLI's JSON is the standard library's, without importing the json package."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ganeti import lightjson

VALUES = [0, -7, 10**30, 2.5, -0.0, 1e300, "", "plain", "é ünï\u2028\x00\x1f\"\\/", None, True, False, [], {},
          [1, [2, [3, {"a": None}]]], {"OP_ID": "OP_TEST_DELAY", "duration": 0.001, "on_nodes": ["n1", "n2"]}]


@pytest.mark.parametrize("value", VALUES)
def test_encodes_and_decodes_as_json_does(value):
    text = lightjson.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"), allow_nan=False)
    assert lightjson.loads(text) == json.loads(text) == value
    assert lightjson.loads(text.encode("utf-8")) == value


def test_keys_that_are_not_strings_become_strings_as_json_makes_them():
    value = {2: "a", True: "b", None: "c", 1.5: "d"}
    assert lightjson.dumps(value) == json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), object(), {1j: 1}, {(1,): 2}, b"bytes"])
def test_what_json_refuses_to_encode_is_refused_with_its_error(value):
    with pytest.raises(Exception) as ours:
        lightjson.dumps(value)
    with pytest.raises(Exception) as theirs:
        json.dumps(value, separators=(",", ":"), allow_nan=False)
    assert (type(ours.value), str(ours.value)) == (type(theirs.value), str(theirs.value))


def test_a_failed_encoding_leaves_no_trace_in_the_next():
    shared = [1]
    with pytest.raises(TypeError):
        lightjson.dumps([shared, object()])
    assert lightjson.dumps([shared, shared]) == "[[1],[1]]"  # not a "circular reference"


@pytest.mark.parametrize("text", ["", " ", "[1,", "1 2", '{"a":}', "tru", '{"a" 1}', "[1]]", '"\\x"'])
def test_what_is_not_json_is_refused_with_jsons_error(text):
    with pytest.raises(json.JSONDecodeError) as ours:
        lightjson.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert (ours.value.msg, ours.value.pos) == (theirs.value.msg, theirs.value.pos)


def test_a_byte_order_mark_is_refused():
    with pytest.raises(json.JSONDecodeError):
        lightjson.loads("\ufeff[1]")


@pytest.mark.parametrize("text", [" [1] \n", "\t{}\r\n", "NaN", "-Infinity", '"\\ud800"', "1E400"])
def test_blanks_constants_and_odd_strings_read_as_json_reads_them(text):
    assert repr(lightjson.loads(text)) == repr(json.loads(text))


def test_importing_it_imports_no_json_package_nor_re():
    code = "import sys; from ganeti import lightjson; lightjson.loads(lightjson.dumps([1])); print(sorted(" \
           "m for m in ('json', 're', 'json.decoder') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
