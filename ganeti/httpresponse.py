"""The status and body of an HTTP/1.1 response read to the end of its connection.

For the few clients that send one request with C{Connection: close} over a
socket of their own (a node joining, C{gnt-cluster master-failover}) and
need neither Twisted's HTTP client nor the standard library's C{http.client}
(whose import brings C{email}'s parser).  Standard library only.
"""

from __future__ import annotations


def _dechunk(data: bytes) -> bytes:
    out: list[bytes] = []
    while True:
        line, found, rest = data.partition(b"\r\n")
        try:
            size = int(line.split(b";")[0].strip() or b"0", 16)
        except ValueError:
            raise ValueError("a bad chunk size %.40r" % line) from None
        if not found or size < 0 or len(rest) < size:
            raise ValueError("a truncated chunked body")
        if size == 0:
            return b"".join(out)
        out.append(rest[:size])
        data = rest[size + 2:]


def parse(raw: bytes) -> tuple[int, bytes]:
    """C{(status, body)} of the response C{raw}; a chunked body is joined.

    @raise ValueError: not an HTTP response, or a bad chunked body
    """
    head, separator, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split(None, 2)
    if not separator or len(status) < 2 or not status[0].startswith(b"HTTP/") or not status[1].isdigit():
        raise ValueError("not an HTTP response: %.100r" % raw)
    headers = {}
    for line in lines[1:]:
        name, _colon, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().lower()
    if headers.get(b"transfer-encoding") == b"chunked":
        body = _dechunk(body)
    elif b"content-length" in headers:
        body = body[:int(headers[b"content-length"])]
    return int(status[1]), body


__all__ = ["parse"]
