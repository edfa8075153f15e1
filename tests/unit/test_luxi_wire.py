"""LUXI framing and message encoding (ganeti.luxi.wire): pure, no I/O."""

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganeti import errors
from ganeti.luxi import wire
from ganeti.luxi.wire import ETX, Framer, LuxiProtocolError


def test_request_is_a_json_object_followed_by_etx():
    data = wire.encode_request("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY", "duration": 1}]], 3000000)
    assert data.endswith(ETX) and data.count(ETX) == 1
    assert orjson.loads(data[:-1]) == {
        "method": "SubmitJob",
        "args": [[{"OP_ID": "OP_TEST_DELAY", "duration": 1}]],
        "version": 3000000,
    }
    assert orjson.loads(wire.encode_request("QueryClusterInfo", ())[:-1]) == {"method": "QueryClusterInfo", "args": []}
    assert wire.LUXI_VERSION == 3000000


def test_request_round_trip():
    data = wire.encode_request("QueryTags", ("node", "node1.example.com"))
    assert wire.decode_request(data[:-1]) == ("QueryTags", ["node", "node1.example.com"])
    # A version, and keys we do not know, are ignored.
    assert wire.decode_request(b'{"method": "X", "args": [], "version": 1, "extra": 2}') == ("X", [])


def test_etx_inside_a_string_is_escaped():
    data = wire.encode_request("Echo", ["a\x03b"])
    assert data.count(ETX) == 1
    assert wire.decode_request(data[:-1]) == ("Echo", ["a\x03b"])
    response = wire.encode_response(True, "\x03")
    assert response.count(ETX) == 1 and wire.decode_response(response[:-1]) == (True, "\x03")


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"{not json", "request is not valid JSON"),
        (b"\xff\xfe", "request is not valid JSON"),
        (b"", "request is not valid JSON"),
        (b"[1, 2]", "request is not a JSON object but an array"),
        (b'"SubmitJob"', "request is not a JSON object but a string"),
        (b"null", "request is not a JSON object but null"),
        (b'{"args": []}', "request has no 'method'"),
        (b'{"method": 3, "args": []}', "'method' is a number, not a string"),
        (b'{"method": null, "args": []}', "'method' is null, not a string"),
        (b'{"method": "SubmitJob"}', "request for SubmitJob has no 'args'"),
        (b'{"method": "SubmitJob", "args": {"a": 1}}', "'args' of SubmitJob is an object, not an array"),
        (b'{"method": "SubmitJob", "args": "x"}', "'args' of SubmitJob is a string, not an array"),
        (b'{"method": "SubmitJob", "args": null}', "'args' of SubmitJob is null, not an array"),
    ],
)
def test_malformed_requests_are_refused_with_a_reason(payload, reason):
    with pytest.raises(LuxiProtocolError) as caught:
        wire.decode_request(payload)
    assert str(caught.value).startswith(reason)
    assert isinstance(caught.value, errors.LuxiError)


def test_response_never_carries_a_version():
    assert orjson.loads(wire.encode_response(True, 17)[:-1]) == {"success": True, "result": 17}
    assert wire.decode_response(b'{"success": true, "result": 17}') == (True, 17)
    assert wire.decode_result(b'{"success": true, "result": [1, "a"]}') == [1, "a"]


def test_non_string_dict_keys_become_strings():
    data = wire.encode_response(True, {1: "a"})
    assert wire.decode_response(data[:-1]) == (True, {"1": "a"})


def test_unencodable_result_raises_type_error():
    with pytest.raises(TypeError):
        wire.encode_response(True, {object()})


def test_errors_travel_as_class_name_and_args():
    data = wire.encode_error(errors.OpPrereqError("Instance 'x' not known", errors.ECODE_NOENT))
    assert orjson.loads(data[:-1]) == {"success": False, "result": ["OpPrereqError", ["Instance 'x' not known", "unknown_entity"]]}
    with pytest.raises(errors.OpPrereqError) as caught:
        wire.decode_result(data[:-1])
    assert caught.value.args == ("Instance 'x' not known", "unknown_entity")
    # Not one of ours: a GenericError with the text.
    data = wire.encode_error(ZeroDivisionError("division by zero"))
    assert orjson.loads(data[:-1])["result"] == ["GenericError", ["ZeroDivisionError: division by zero"]]


def test_parse_failure_is_a_plain_string_and_decodes_as_luxi_error():
    data = wire.encode_parse_failure("request is not valid JSON")
    assert orjson.loads(data[:-1]) == {"success": False, "result": "Failed to parse request: request is not valid JSON"}
    with pytest.raises(errors.LuxiError, match="Failed to parse request"):
        wire.decode_result(data[:-1])


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"nope", "response is not valid JSON"),
        (b"[true, 1]", "response is not a JSON object"),
        (b'{"result": 1}', "response lacks 'success' or 'result'"),
        (b'{"success": true}', "response lacks 'success' or 'result'"),
        (b'{"success": 1, "result": 1}', "'success' is a number, not a boolean"),
    ],
)
def test_malformed_responses_are_refused(payload, reason):
    with pytest.raises(LuxiProtocolError) as caught:
        wire.decode_response(payload)
    assert str(caught.value).startswith(reason)


def test_a_response_naming_another_version_is_refused():
    payload = b'{"success": true, "result": 1, "version": 2}'
    assert wire.decode_response(payload) == (True, 1)
    assert wire.decode_response(payload, 2) == (True, 1)
    with pytest.raises(LuxiProtocolError, match="version mismatch"):
        wire.decode_response(payload, 3000000)


# --- framing ---------------------------------------------------------------
MESSAGES = [
    wire.encode_request("SubmitJob", [[{"OP_ID": "OP_TEST_DELAY", "duration": 1}]], 3000000),
    wire.encode_request("QueryClusterInfo", []),
    wire.encode_response(True, {"name": "cluster", "ünïcödé": "✓"}),
]
STREAM = b"".join(MESSAGES)
PAYLOADS = [m[:-1] for m in MESSAGES]


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_framing_split_at_every_byte_boundary(cut):
    framer = Framer()
    got = list(framer.feed(STREAM[:cut]))
    got += list(framer.feed(STREAM[cut:]))
    assert got == PAYLOADS
    assert framer.buffered == 0


def test_framing_byte_by_byte():
    framer = Framer()
    got = [payload for byte in STREAM for payload in framer.feed(bytes([byte]))]
    assert got == PAYLOADS


def test_several_messages_in_one_chunk_and_a_partial_one():
    framer = Framer()
    assert list(framer.feed(STREAM + MESSAGES[0][:5])) == PAYLOADS
    assert framer.buffered == 5
    assert list(framer.feed(MESSAGES[0][5:])) == [PAYLOADS[0]]
    assert list(framer.feed(b"")) == []


def test_unconsumed_messages_are_kept_for_the_next_feed():
    framer = Framer()
    iterator = framer.feed(STREAM)
    assert next(iterator) == PAYLOADS[0]
    del iterator
    assert list(framer.feed(b"")) == PAYLOADS[1:]


def test_empty_message():
    assert list(Framer().feed(ETX + ETX)) == [b"", b""]


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(ETX, b"")), max_size=8), st.data())
def test_framing_any_chunking(payloads, data):
    stream = b"".join(p + ETX for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    framer, got, last = Framer(), [], 0
    for cut in cuts + [len(stream)]:
        got += list(framer.feed(stream[last:cut]))
        last = cut
    assert got == payloads


def test_a_complete_message_over_the_limit_is_refused():
    framer = Framer(max_message_size=10)
    assert list(framer.feed(b"0123456789" + ETX)) == [b"0123456789"]
    with pytest.raises(LuxiProtocolError, match=r"message too large \(11 bytes, the limit is 10\)"):
        list(framer.feed(b"0123456789A" + ETX))


def test_an_incomplete_message_over_the_limit_is_refused_before_its_end():
    framer = Framer(max_message_size=10)
    assert list(framer.feed(b"0123456789")) == []
    with pytest.raises(LuxiProtocolError, match=r"message too large \(at least 11 bytes"):
        list(framer.feed(b"A"))
    assert framer.buffered == 0  # the buffer is freed


def test_messages_before_an_oversized_one_are_delivered_first():
    framer = Framer(max_message_size=10)
    got = []
    with pytest.raises(LuxiProtocolError):
        for payload in framer.feed(b"ok" + ETX + b"fine" + ETX + b"x" * 20):
            got.append(payload)
    assert got == [b"ok", b"fine"]


def test_default_limit_is_16_mib():
    assert Framer().max_message_size == 16 * 1024 * 1024 == wire.DEFAULT_MAX_MESSAGE_SIZE
