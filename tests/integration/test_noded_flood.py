"""A real ganeti-noded keeps serving the master while a peer without the cluster
certificate holds connections open and never completes the TLS handshake."""

from __future__ import annotations

import socket
import time

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import crypto
from ganeti.daemons import free_port
from ganeti.rpc import RpcClient, wire
from ganeti.testing.daemons import Daemon
from tests.integration.test_rapi_flood import fd_count, read_until_closed, wait_fds

NODE = "127.0.1.1"
ATTACKER = "127.0.0.5"


def open_silent(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection((NODE, port), timeout=10, source_address=(ATTACKER, 0)) for _ in range(count)]


def closed_within(socks: list[socket.socket], limit: float) -> list[tuple[bytes, float]]:
    try:
        return [read_until_closed(sock, limit) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


@pytest_twisted.ensureDeferred
async def test_unfinished_handshakes_do_not_exhaust_noded(root):
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    port = free_port(NODE)
    noded = Daemon(root, "ganeti-noded", "--bind", NODE, "--port", str(port), "--handshake-timeout", "2",
                   "--max-connections-per-ip", "50", "--max-connections", "200", tcp=(NODE, port))
    noded.start()
    client = RpcClient.from_paths(reactor, root, port=port, persistent=False)
    try:
        await noded.ready(reactor)
        nodes = {"node1": NODE}
        assert (await client.call(nodes, "version", [], timeout=10))["node1"].payload == wire.PROTOCOL_VERSION
        baseline = fd_count(noded.process.pid)
        held = await threads.deferToThread(open_silent, port, 50)
        opened = time.monotonic()
        refused = await threads.deferToThread(open_silent, port, 250)
        refusals = await threads.deferToThread(closed_within, refused, 5)
        assert max(seconds for _, seconds in refusals) < 3
        for _ in range(3):
            started = time.monotonic()
            answer = await client.call(nodes, "version", [], timeout=10)
            assert answer["node1"].payload == wire.PROTOCOL_VERSION
            assert time.monotonic() - started < 3
        closes = await threads.deferToThread(closed_within, held, 8)
        assert {data for data, _ in closes} == {b""}
        assert time.monotonic() - opened < 2 + 4
        assert await threads.deferToThread(wait_fds, noded.process.pid, baseline, 10) <= baseline
    finally:
        await client.close()
        noded.stop()
