"""The HTTP response reader of the commands that ask NodeD directly (``gnt-cluster master-failover``)."""

from __future__ import annotations

import socket

import pytest

from ganeti.luxi.locate import read_http_response


def answer(raw: bytes) -> tuple[int, bytes]:
    """What the reader makes of C{raw}, sent by a peer that then closes the connection."""
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(raw)
        theirs.close()
        return read_http_response(ours)
    finally:
        ours.close()


def test_chunked_body_as_twisted_sends_it() -> None:
    raw = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
           b"5\r\n[true\r\n12\r\n, [[\"done\", \"yes\"]\r\n2\r\n]]\r\n0\r\n\r\n")
    assert answer(raw) == (200, b'[true, [["done", "yes"]]]')


def test_content_length_and_close_delimited_bodies() -> None:
    assert answer(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 7\r\n\r\n[false]") == (400, b"[false]")
    assert answer(b"HTTP/1.0 200 OK\r\n\r\n[true, []]") == (200, b"[true, []]")


@pytest.mark.parametrize("raw", [b"", b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort"])
def test_what_is_not_an_http_response_is_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        answer(raw)
