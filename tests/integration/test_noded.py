"""Real noded processes (twistd) on 127.0.1.x, certificates from crypto.bootstrap_secrets."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import time

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti import crypto
from ganeti.daemons import free_port, write_node_identity
from ganeti.paths import Paths
from ganeti.rpc import Credentials, PinnedPolicy, RpcClient, wire
from ganeti.testing.daemons import Daemon, make_root, remove_root


@pytest.fixture
def cluster():
    """Three node roots sharing server.pem (node 1 made it); daemons not started."""
    roots = [make_root("gntn%d" % i) for i in (1, 2, 3)]
    crypto.bootstrap_secrets(roots[0], "cluster.test", node_name="node1.test")
    for paths in roots[1:]:
        os.makedirs(paths.data_dir, exist_ok=True)
        shutil.copy(roots[0].server_pem, paths.server_pem)
    port = free_port()
    daemons = [
        Daemon(paths, "ganeti-noded", "--access-log", "--bind", "127.0.1.%d" % i, "--port", str(port), tcp=("127.0.1.%d" % i, port))
        for i, paths in enumerate(roots, 1)
    ]
    yield roots, daemons, port
    for daemon in daemons:
        daemon.stop()
    for paths in roots:
        remove_root(paths)


async def start(daemons):
    for daemon in daemons:
        daemon.start()
    for daemon in daemons:
        await daemon.ready(reactor)


@pytest_twisted.ensureDeferred
async def test_fan_out_with_one_node_down(cluster):
    roots, daemons, port = cluster
    await start(daemons[:2])
    client = RpcClient.from_paths(reactor, roots[0], port=port)
    try:
        nodes = {"node1": "127.0.1.1", "node2": "127.0.1.2", "node3": "127.0.1.3"}
        results = await client.call(nodes, "version", [], timeout=10)
        assert list(results) == ["node1", "node2", "node3"]
        assert results["node1"].payload == results["node2"].payload == wire.PROTOCOL_VERSION
        assert results["node3"].failed and "node unreachable" in results["node3"].fail_msg
        ssconf = {"master_node": ["node1.test"], "cluster_name": ["cluster.test"]}
        results = await client.call(nodes, "write_ssconf_files", [ssconf], offline=["node3"])
        assert results["node1"].success and results["node2"].success and results["node3"].offline
        names = await client.call(nodes, "master_node_name", [])
        assert [r.payload for r in names.values()] == ["node1.test", "node1.test", None]
        # per-call timeout: one slow node does not hold the others back
        delays = await client.call(
            {"node1": "127.0.1.1", "node2": "127.0.1.2"}, "test_delay", [], timeout=1,
            node_args={"node1": [0], "node2": [5]},
        )
        assert delays["node1"].success and delays["node2"].payload is None
        assert "timeout after 1s" in delays["node2"].fail_msg
    finally:
        await client.close()


@pytest_twisted.ensureDeferred
async def test_node_verify_reachability(cluster):
    roots, daemons, port = cluster
    await start(daemons[:2])
    client = RpcClient.from_paths(reactor, roots[0], port=port)
    try:
        result = await client.call_one(
            "node1", "127.0.1.1", "node_verify",
            [{"node-net-test": [["node2", "127.0.1.2"], ["node3", "127.0.1.3"]]}, "cluster.test", {}],
        )
        assert result.success
        assert list(result.payload["node-net-test"]) == ["node3"]
    finally:
        await client.close()


@pytest_twisted.ensureDeferred
async def test_upload_file_and_allow_list(cluster):
    roots, daemons, port = cluster
    await start(daemons[:1])
    client = RpcClient.from_paths(reactor, roots[0], port=port)
    try:
        data = b'{"version": 3000000}' * 1000
        details = wire.file_details(wire.virtual_path(roots[0].root, roots[0].config_data), data, mode=0o640)
        result = await client.call_one("node1", "127.0.1.1", "upload_file", [details])
        assert result.success, result.fail_msg
        assert open(roots[0].config_data, "rb").read() == data
        outside = os.path.join(roots[0].root, "evil")
        for vpath in ("/evil", "/var/lib/ganeti/../../../evil", "/var/lib/ganeti/client.pem"):
            refused = await client.call_one("node1", "127.0.1.1", "upload_file", [wire.file_details(vpath, b"x")])
            assert refused.failed and "refused" in refused.fail_msg
        assert not os.path.exists(outside)
        unknown = await client.call_one("node1", "127.0.1.1", "no_such_procedure", [])
        assert unknown.failed and "404" in unknown.fail_msg
    finally:
        await client.close()
    assert '"POST /upload_file HTTP/1.1" 200' in daemons[0].output()


@pytest_twisted.ensureDeferred
async def test_wrong_certificate_is_refused_in_the_handshake(cluster, tmp_path):
    roots, daemons, port = cluster
    await start(daemons[:1])
    key, cert = crypto.generate_key_and_cert("intruder.test")
    _k, cluster_cert = crypto.load_pem_file(roots[0].server_pem)
    # trusts the node (so only the node's check can fail) but presents a foreign certificate
    intruder = RpcClient(reactor, PinnedPolicy(Credentials(key, cert, cluster_cert)), port=port)
    try:
        result = await intruder.call_one("node1", "127.0.1.1", "version", [], timeout=10)
        assert result.failed
        assert "TLS" in result.fail_msg or "connection lost" in result.fail_msg
    finally:
        await intruder.close()
    # a client with no certificate at all
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.1.1", port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(b"POST /version HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]")
                assert tls.recv(100) == b""  # if the alert is not raised, the node closes without answering
                raise ConnectionError("closed")
    # a different cluster's node: the client refuses the server
    other = make_root("gnto")
    try:
        crypto.bootstrap_secrets(other, "other.test", node_name="x")
        stranger = RpcClient.from_paths(reactor, other, port=port)
        result = await stranger.call_one("node1", "127.0.1.1", "version", [], timeout=10)
        await stranger.close()
        assert result.failed and "TLS" in result.fail_msg
    finally:
        remove_root(other)
    output = daemons[0].output()
    assert "TLS: client certificate refused" in output
    assert "POST /version" not in output


@pytest_twisted.ensureDeferred
async def test_node_leave_cluster_stops_the_daemon(cluster):
    roots, daemons, port = cluster
    await start(daemons[1:2])
    client = RpcClient.from_paths(reactor, roots[0], port=port)
    try:
        result = await client.call_one("node2", "127.0.1.2", "node_leave_cluster", [False])
        assert result.success
    finally:
        await client.close()
    daemons[1].process.wait(timeout=10)
    assert not os.path.exists(roots[1].server_pem)


@pytest_twisted.ensureDeferred
async def test_a_root_too_long_for_its_socket_serves_over_tls_only():
    """A root whose socket path would not fit a Unix socket address (108 bytes): NodeD says so and serves over
    TCP and TLS; its own node's client, finding no socket, calls it that way."""
    base = make_root("gntlong")
    paths = Paths(os.path.join(base.root, "r" * 80))
    try:
        crypto.bootstrap_secrets(paths, "cluster.test", node_name="node1.test")
        write_node_identity(paths, "node1.test", "127.0.1.1")
        port = free_port()
        daemon = Daemon(paths, "ganeti-noded", "--bind", "127.0.1.1", "--port", str(port), tcp=("127.0.1.1", port))
        daemon.start()
        try:
            await daemon.ready(reactor)
            assert len(paths.noded_socket.encode()) > 108
            assert not os.path.exists(paths.noded_socket)
            deadline = time.monotonic() + 30  # (its log reaches the file a little after it answers)
            while "this node's own processes call it over TCP and TLS instead" not in daemon.output():
                assert time.monotonic() < deadline, daemon.output()
                await deferLater(reactor, 0.1, lambda: None)
            client = RpcClient.from_paths(reactor, paths, port=port)
            try:
                result = await client.call_one("node1", "127.0.1.1", "version", [], timeout=10)
                assert result.success, result.fail_msg
            finally:
                await client.close()
        finally:
            daemon.stop()
    finally:
        remove_root(base)
