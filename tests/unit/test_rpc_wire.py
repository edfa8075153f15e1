"""Node RPC wire format: bodies, answers, COMPRESS, virtual paths."""

from __future__ import annotations

import base64
import zlib

import pytest

from ganeti.rpc import wire


def test_request_round_trip():
    body = wire.encode_request(["a", 1, {"k": [None, True]}])
    assert body == b'["a",1,{"k":[null,true]}]'
    assert wire.decode_request(body) == ["a", 1, {"k": [None, True]}]


def test_no_arguments_is_an_empty_array():
    assert wire.encode_request([]) == b"[]"
    assert wire.decode_request(b"[]") == []
    assert wire.decode_request(b" [ ] \n") == []


@pytest.mark.parametrize("body", [b"", b" ", b"\r\n\t "])
def test_empty_body_refused(body):
    with pytest.raises(wire.RpcWireError, match="Empty request body"):
        wire.decode_request(body)


@pytest.mark.parametrize("body", [b"{", b'{"a": 1}', b"17", b'"x"', b"\xff\xfe"])
def test_malformed_request(body):
    with pytest.raises(wire.RpcWireError):
        wire.decode_request(body)


def test_response_round_trip():
    assert wire.encode_response(True, 3000000) == b"[true,3000000]"
    assert wire.decode_response(b'[false, "no"]') == (False, "no")
    assert wire.decode_response(wire.encode_response(True, {"a": [1]})) == (True, {"a": [1]})


@pytest.mark.parametrize("body", [b"[1, 2]", b"[true]", b"[true, 1, 2]", b"{}", b"nope", b'["true", 1]'])
def test_malformed_response(body):
    with pytest.raises(wire.RpcWireError):
        wire.decode_response(body)


def test_small_data_is_sent_raw():
    assert wire.compress(b"hello") == [wire.ENCODING_NONE, "hello"]
    assert wire.decompress([0, "hello"]) == b"hello"


def test_large_data_is_zlib_base64_as_ganeti():
    data = b"x" * 10000
    encoded = wire.compress(data)
    assert encoded[0] == wire.ENCODING_ZLIB_BASE64
    assert zlib.decompress(base64.b64decode(encoded[1])) == data
    assert wire.decompress(encoded) == data


def test_binary_round_trip():
    data = bytes(range(256)) * 10
    assert wire.decompress(wire.compress(data)) == data
    assert wire.decompress(wire.compress(b"\xff\x00")) == b"\xff\x00"


@pytest.mark.parametrize("value", [[2, "x"], [1, "!!!"], [1, base64.b64encode(b"not zlib").decode()], "x", [0], [0, 5]])
def test_bad_compressed_data(value):
    with pytest.raises(wire.RpcWireError):
        wire.decompress(value)


def test_file_details():
    details = wire.file_details("/var/lib/ganeti/config.data", b"{}", mode=0o640, mtime=5.0, atime=4.0)
    assert details == ["/var/lib/ganeti/config.data", [0, "{}"], 0o640, "", "", 4.0, 5.0]


def test_virtual_paths():
    assert wire.virtual_path("/tmp/r", "/tmp/r/var/lib/ganeti/config.data") == "/var/lib/ganeti/config.data"
    assert wire.virtual_path("/", "/var/lib/x") == "/var/lib/x"
    assert wire.localize("/tmp/r", "/var/lib/ganeti/config.data") == "/tmp/r/var/lib/ganeti/config.data"
    assert wire.localize("/tmp/r", "//var/./lib") == "/tmp/r/var/lib"
    with pytest.raises(ValueError):
        wire.virtual_path("/tmp/r", "/tmp/other/x")


@pytest.mark.parametrize("bad", ["relative/path", "/var/../../etc/passwd", "/var/lib/ganeti/..", "", "/a\0b", None, 5, ["/x"]])
def test_localize_refuses_escapes(bad):
    with pytest.raises(wire.RpcWireError):
        wire.localize("/tmp/r", bad)


def test_procedure_names():
    assert wire.valid_procedure("node_info")
    for bad in ("", "../x", "Version", "a/b", "x" * 65, "1abc"):
        assert not wire.valid_procedure(bad)
