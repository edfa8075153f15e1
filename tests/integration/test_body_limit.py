"""A real ganeti-rapi and ganeti-noded refuse a request declaring a 1 GiB body
at once, with 413, without reading it: the client sends only the head and
waits for the answer (a daemon that waited for the body would answer 408
after its body timeout, or never)."""

from __future__ import annotations

import socket
import ssl

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import crypto
from ganeti.config.bootstrap import initial_config
from ganeti.daemons import free_port
from ganeti.rapi.testing import RapiStack
from ganeti.rpc import RpcClient, wire
from ganeti.testing.daemons import Daemon
from tests.integration.test_rapi_flood import CONTEXT, read_until_closed

NODE = "127.0.1.1"
GIB = 1 << 30


def head(path: str) -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: node\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), GIB))


def declare_gib(host: str, port: int, context: ssl.SSLContext, path: str) -> bytes:
    """Send only the head of a 1 GiB POST; everything the daemon answers until it closes."""
    sock = context.wrap_socket(socket.create_connection((host, port), timeout=30))
    try:
        sock.sendall(head(path))
        return read_until_closed(sock, 30)[0]
    finally:
        sock.close()


@pytest_twisted.ensureDeferred
async def test_rapi_refuses_a_gib_body_unread(root):
    stack = RapiStack(root, initial_config("cluster.test", "node1.test", NODE), "",
                      rapi_args=("--body-timeout", "60"))
    await stack.start(reactor)
    try:
        answer = await threads.deferToThread(declare_gib, stack.host, stack.port, CONTEXT, "/2/instances")
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"%d bytes declared" % GIB in answer
    finally:
        stack.stop()


@pytest_twisted.ensureDeferred
async def test_noded_refuses_a_gib_body_unread(root):
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    port = free_port(NODE)
    noded = Daemon(root, "ganeti-noded", "--bind", NODE, "--port", str(port), "--body-timeout", "60",
                   tcp=(NODE, port))
    noded.start()
    client = RpcClient.from_paths(reactor, root, port=port, persistent=False)
    try:
        await noded.ready(reactor)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(root.server_pem)  # the cluster certificate: NodeD requires it
        answer = await threads.deferToThread(declare_gib, NODE, port, context, "/version")
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        version = await client.call({"node1": NODE}, "version", [], timeout=30)
        assert version["node1"].payload == wire.PROTOCOL_VERSION, "the daemon serves on"
    finally:
        await client.close()
        noded.stop()
