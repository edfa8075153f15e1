"""A real ganeti-rapi under slowloris, idle-connection, oversized-head and garbage floods.

The attackers connect from 127.0.0.1 and 127.0.0.3, the good client from
127.0.0.2 (source addresses bound on loopback).  The daemon runs with short
deadlines (2 s) so that the test sees them fire.  Client work is blocking
socket code run in a thread, so the daemons (separate processes) are
measured, not this test's reactor.
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import ssl
import time
from typing import Any

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.config.bootstrap import initial_config
from ganeti.rapi.testing import RapiStack

# 60 + 40 attacking connections and 50 idle ones fill the 150 places: every good request takes one
ARGS = ("--header-timeout", "2", "--handshake-timeout", "2", "--max-connections-per-ip", "100",
        "--max-connections", "150")
ATTACKER, GOOD, IDLER = "127.0.0.1", "127.0.0.2", "127.0.0.3"


def tls_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


CONTEXT = tls_context()


def connect(stack: RapiStack, source: str, tls: bool = True, timeout: float = 10.0) -> Any:
    sock = socket.create_connection((stack.host, stack.port), timeout=timeout, source_address=(source, 0))
    if tls:
        return CONTEXT.wrap_socket(sock)
    return sock


def good_request(stack: RapiStack, path: str = "/2/info") -> tuple[int, float]:
    """One GET from the good client's address on a new connection: status and seconds."""
    started = time.monotonic()
    conn = http.client.HTTPSConnection(stack.host, stack.port, timeout=10, source_address=(GOOD, 0),
                                       context=CONTEXT)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def read_until_closed(sock: Any, limit: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes (or C{limit} seconds): data and seconds."""
    started = time.monotonic()
    sock.settimeout(0.2)
    data = b""
    while time.monotonic() - started < limit:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except (ConnectionError, ssl.SSLError, OSError):
            break
        if not chunk:
            break
        data += chunk
    return data, time.monotonic() - started


def fd_count(pid: int) -> int:
    return len(os.listdir("/proc/%d/fd" % pid))


def wait_fds(pid: int, baseline: int, limit: float) -> int:
    deadline = time.monotonic() + limit
    count = fd_count(pid)
    while count > baseline and time.monotonic() < deadline:
        time.sleep(0.2)
        count = fd_count(pid)
    return count


async def started(root: Any) -> RapiStack:
    stack = RapiStack(root, initial_config("cluster.test", "node1.test", "127.0.1.1"), "", rapi_args=ARGS)
    await stack.start(reactor)
    return stack


def slowloris(stack: RapiStack) -> dict[str, Any]:
    """The attack and the good client's experience of it (blocking; run in a thread)."""
    result: dict[str, Any] = {}
    assert good_request(stack)[0] == 200
    # 60 TLS connections that trickle a request head, 40 TCP ones that never start TLS
    trickling = [connect(stack, ATTACKER) for _ in range(60)]
    silent = [connect(stack, ATTACKER, tls=False) for _ in range(40)]
    idle = [connect(stack, IDLER) for _ in range(50)]
    opened = time.monotonic()
    # the same address's 101st and later connections are closed at once
    refused = [connect(stack, ATTACKER, tls=False) for _ in range(200)]
    result["refused_after"] = max(read_until_closed(sock, 5)[1] for sock in refused)
    for sock in refused:
        sock.close()
    head = b"GET /2/info HTTP/1.1\r\nHost: rapi\r\nX-Slow: " + b"a" * 1000
    latencies, statuses = [], []
    position = 0
    # good requests for 1.5 s while the attack goes on, and at least three (on a loaded machine the
    # refused connections above may take longer than that already)
    trickle_from = time.monotonic()
    while len(statuses) < 3 or time.monotonic() - trickle_from < 1.5:
        for sock in trickling:
            try:
                sock.sendall(head[position:position + 1])
            except (ConnectionError, ssl.SSLError):
                pass  # closed to make room for a good request
        position += 1
        status, seconds = good_request(stack)
        statuses.append(status)
        latencies.append(seconds)
    result["statuses"], result["latencies"] = statuses, latencies
    # every slow connection is closed by the server within its deadline (2 s) plus slack: with a
    # 408, or without a word when a good request needed its place
    closed = [read_until_closed(sock, 6) for sock in trickling + idle]
    result["slow_answers"] = [data.split(b"\r\n", 1)[0] for data, _ in closed]
    result["slow_closed_after"] = time.monotonic() - opened
    result["silent_closed"] = [read_until_closed(sock, 6)[0] for sock in silent]
    for sock in trickling + idle + silent:
        sock.close()
    return result


@pytest_twisted.ensureDeferred
async def test_good_client_served_during_slowloris(root):
    stack = await started(root)
    try:
        result = await threads.deferToThread(slowloris, stack)
        assert result["refused_after"] < 3
        assert len(result["statuses"]) >= 3 and set(result["statuses"]) == {200}
        assert max(result["latencies"]) < 3, result["latencies"]
        answers = result["slow_answers"]
        assert set(answers) <= {b"HTTP/1.1 408 Request Timeout", b""}
        assert answers.count(b"") <= len(result["statuses"]) + 1, answers
        assert result["slow_closed_after"] < 8
        assert result["silent_closed"] == [b""] * 40
    finally:
        stack.stop()


def oddities(stack: RapiStack) -> dict[str, Any]:
    result: dict[str, Any] = {}
    sock = connect(stack, ATTACKER)
    started_at = time.monotonic()
    try:
        sock.sendall(b"GET /2/info HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    except (ConnectionError, ssl.SSLError):
        pass
    answer, _ = read_until_closed(sock, 10)
    result["big"] = (answer.split(b"\r\n", 1)[0], time.monotonic() - started_at)
    sock.close()
    sock = connect(stack, ATTACKER)
    started_at = time.monotonic()
    sock.sendall(b"GET /2/info HTTP/1.1\nHost: rapi\nConnection: close\n\n")
    answer, _ = read_until_closed(sock, 10)
    result["bare_lf"] = (answer.split(b"\r\n", 1)[0], time.monotonic() - started_at)
    sock.close()
    return result


def fuzz(stack: RapiStack) -> dict[str, Any]:
    """Hundreds of garbage requests, TLS and not, then a good one; the fds come back."""
    rng = random.Random(12)
    assert good_request(stack)[0] == 200
    pid = stack.rapi.process.pid
    baseline = fd_count(pid)
    junk = [
        lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600))),
        lambda: b"GET /" + bytes(rng.randrange(32, 127) for _ in range(rng.randrange(200))) + b" HTTP/1.1\r\n\r\n",
        lambda: b"POST /2/instances HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        lambda: b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        lambda: b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 600 + b"\r\n",
        lambda: b"\x00\r\n\r\n",
        lambda: b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n12",
    ]
    for i in range(300):
        tls = i % 3 != 0
        try:
            sock = connect(stack, "127.0.0.%d" % (10 + i % 5), tls=tls)
            sock.sendall(junk[i % len(junk)]())
            if i % 2:
                sock.settimeout(0.2)
                try:
                    sock.recv(4096)
                except (OSError, ssl.SSLError):
                    pass
            sock.close()
        except (OSError, ssl.SSLError):
            pass
    status, seconds = good_request(stack)
    return {"status": status, "seconds": seconds, "baseline": baseline, "after": wait_fds(pid, baseline, 10),
            "alive": stack.rapi.process.poll() is None}


@pytest_twisted.ensureDeferred
async def test_oversized_head_bare_lf_and_garbage(root):
    stack = await started(root)
    try:
        result = await threads.deferToThread(oddities, stack)
        assert result["big"][0] == b"HTTP/1.1 431 Request Header Fields Too Large" and result["big"][1] < 5
        assert result["bare_lf"][0] == b"HTTP/1.1 200 OK" and result["bare_lf"][1] < 5
        fuzzed = await threads.deferToThread(fuzz, stack)
        assert fuzzed["alive"] and fuzzed["status"] == 200 and fuzzed["seconds"] < 3
        assert fuzzed["after"] <= fuzzed["baseline"], fuzzed
    finally:
        stack.stop()
