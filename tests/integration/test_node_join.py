"""A real noded in unjoined mode, joined by join_node (ganeti.rpc.join)."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import time
import urllib.request

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from ganeti import crypto, daemons, errors, ssconf
from ganeti.daemons import free_port
from ganeti.rpc import RpcClient, join, wire
from ganeti.testing import procs
from ganeti.testing.daemons import Daemon, make_root, remove_root

TOKEN = "correct-horse-battery-staple-42"
ADDRESS = "127.0.1.2"


@pytest.fixture
def master():
    paths = make_root("gntm")
    crypto.bootstrap_secrets(paths, "cluster.test", node_name="node1.test")
    ssconf.write_files(paths, {"cluster_name": ["cluster.test"], "master_node": ["node1.test"],
                               "node_list": ["node1.test"]})
    yield paths
    remove_root(paths)


@pytest.fixture
def node():
    """An unjoined node root and its noded (not started), token in a file."""
    paths = make_root("gntj")
    port = free_port(ADDRESS)
    token_file = os.path.join(paths.root, "join-token")
    with open(token_file, "w") as handle:
        handle.write(TOKEN + "\n")
    mond_port = free_port(ADDRESS)
    daemon = Daemon(paths, "ganeti-noded", "--access-log", "--bind", ADDRESS, "--port", str(port),
                    "--join-token-file", token_file, "--mond-port", str(mond_port), tcp=(ADDRESS, port))
    daemon.mond_port = mond_port
    yield paths, daemon, port, token_file
    daemon.stop()
    daemons.stop(paths, ["ganeti-mond"], out=lambda line: None)  # started by the join
    remove_root(paths)


def data_files(paths) -> list[str]:
    return sorted(os.listdir(paths.data_dir)) if os.path.isdir(paths.data_dir) else []


def raw_post(port: int, path: str, body: bytes) -> tuple[int, bytes]:
    """An HTTPS POST without any certificate or token (stdlib ssl)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ADDRESS, port), timeout=10) as raw:
        with ctx.wrap_socket(raw) as tls:
            tls.sendall(b"POST /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                        % (path.encode(), len(body)) + body)
            data = b""
            while True:
                try:
                    chunk = tls.recv(65536)
                except (ssl.SSLEOFError, ConnectionError):
                    break
                if not chunk:
                    break
                data += chunk
    return join.parse_http_response(data)


def test_refuses_to_start_without_certificate_or_token(node):
    paths, _daemon, port, _token_file = node
    daemon = Daemon(paths, "ganeti-noded", "--bind", ADDRESS, "--port", str(port), tcp=(ADDRESS, port))
    daemon.start()
    assert daemon.process.wait(timeout=30) != 0
    assert "no cluster certificate" in daemon.output() and "--join-token" in daemon.output()


def test_short_token_is_refused(node):
    paths, _daemon, port, _token_file = node
    daemon = Daemon(paths, "ganeti-noded", "--bind", ADDRESS, "--port", str(port), "--join-token", "short",
                    tcp=(ADDRESS, port))
    daemon.start()
    assert daemon.process.wait(timeout=30) != 0
    assert "at least 16 characters" in daemon.output()


@pytest_twisted.ensureDeferred
async def test_join_then_normal_rpc(master, node):
    paths, daemon, port, token_file = node
    daemon.start()
    await daemon.ready(reactor)
    before = data_files(paths)
    # unjoined: the cluster's RPC client cannot talk to it (throw-away certificate) ...
    client = RpcClient.from_paths(reactor, master, port=port)
    try:
        result = await client.call_one("node2", ADDRESS, "version", [], timeout=10)
        assert result.failed and "TLS" in result.fail_msg
    finally:
        await client.close()
    # ... and a client without certificate gets only refusals
    status, body = raw_post(port, "version", b"[]")
    assert status == 404 and b"node_join" in body
    assert data_files(paths) == before
    assert not os.path.exists(paths.noded_socket), "an unjoined NodeD serves its own node's socket"

    await join.join_node_async(reactor, master, ADDRESS, TOKEN, "node2.test", port=port, timeout=20)

    assert not os.path.exists(token_file)
    assert os.stat(paths.server_pem).st_mode & 0o777 == 0o440
    assert crypto.load_pem_file(paths.server_pem) == crypto.load_pem_file(master.server_pem)
    _key, client_cert = crypto.load_pem_file(paths.client_pem)
    assert crypto.is_issued_by(client_cert, crypto.load_pem_file(master.server_pem)[1])
    assert ssconf.SimpleStore(paths).get_cluster_name() == "cluster.test"
    assert ssconf.SimpleStore(paths).get_master_node() == "node1.test"
    assert daemons.read_node_identity(paths) == {"name": "node2.test", "address": ADDRESS}
    # the join ran in a child process: its pyOpenSSL and cryptography (10 MiB) never entered NodeD
    with open("/proc/%d/maps" % daemon.process.pid) as handle:
        assert "cryptography" not in handle.read()

    client = RpcClient.from_paths(reactor, master, port=port)
    try:
        result = await client.call_one("node2", ADDRESS, "version", [], timeout=10)
        assert result.success, result.fail_msg
        assert result.payload == wire.PROTOCOL_VERSION
        names = await client.call_one("node2", ADDRESS, "master_node_name", [], timeout=10)
        assert names.payload == "node1.test"
    finally:
        await client.close()
    # a second join is impossible: the node now wants the cluster certificate
    with pytest.raises(errors.OpExecError):
        await join.join_node_async(reactor, master, ADDRESS, TOKEN, "node2.test", port=port, timeout=10)
    assert "joined; serving node RPC with the cluster certificate" in daemon.output()
    # like Ganeti's node setup, the joined node starts its monitoring daemon
    deadline = time.monotonic() + 30
    while not daemons.accepts_tcp(ADDRESS, daemon.mond_port):
        assert time.monotonic() < deadline, "ganeti-mond did not start after the join"
        await deferLater(reactor, 0.1, lambda: None)
    assert daemons.running_pid(paths, daemons.MOND) is not None
    with urllib.request.urlopen("http://%s:%d/" % (ADDRESS, daemon.mond_port), timeout=10) as answer:
        assert json.load(answer) == [1]
    # joined, it serves its own node's processes on its Unix socket (ganeti.rpc.local), which only root opens
    assert os.stat(paths.noded_socket).st_mode & 0o777 == 0o600
    own = RpcClient.from_paths(reactor, paths, port=port)
    try:
        result = await own.call_one("node2", ADDRESS, "version", [], timeout=10)
        assert result.success, result.fail_msg
    finally:
        await own.close()


@pytest_twisted.ensureDeferred
async def test_wrong_token_writes_nothing_and_burns_after_five(master, node):
    paths, daemon, port, token_file = node
    daemon.start()
    await daemon.ready(reactor)
    before = data_files(paths)
    for _ in range(4):
        with pytest.raises(errors.OpExecError, match="the node refused the join token"):
            await join.join_node_async(reactor, master, ADDRESS, "x" * 20, "node2.test", port=port, timeout=10)
    # a forged request without the token: refused too, nothing written
    forged = {"proof": "00" * 32, "nonce": "AAAAAAAAAAAAAAAA", "payload": "AAAA"}
    status, _body = raw_post(port, "node_join", json.dumps(forged).encode())
    assert status == 403
    assert data_files(paths) == before
    assert daemon.process.wait(timeout=10) is not None  # fifth wrong proof: the token is burnt
    assert "the join token is burnt" in daemon.output()
    assert not os.path.exists(token_file)
    assert not os.path.exists(paths.server_pem)


@pytest_twisted.ensureDeferred
async def test_token_survives_a_few_wrong_proofs(master, node):
    paths, daemon, port, _token_file = node
    daemon.start()
    await daemon.ready(reactor)
    with pytest.raises(errors.OpExecError, match="the node refused the join token"):
        await join.join_node_async(reactor, master, ADDRESS, "y" * 16, "node2.test", port=port, timeout=10)
    status, _body = raw_post(port, "node_join", b"not json")
    assert status == 400
    await join.join_node_async(reactor, master, ADDRESS, TOKEN, "node2.test", port=port, timeout=20)
    assert os.path.exists(paths.server_pem)


def test_unreachable_node(master):
    port = free_port(ADDRESS)
    with pytest.raises(errors.OpExecError, match="node unreachable"):
        join.join_node(master, ADDRESS, TOKEN, "node2.test", port=port, timeout=5)


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as handle:
            found.extend(int(child) for child in handle.read().split())
    return found


def _gone(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


@pytest_twisted.ensureDeferred
async def test_a_killed_unjoined_noded_leaves_nothing_listening(master, node):
    """The join is served by a child process on NodeD's socket: NodeD killed, the child ends too, and NodeD
    started again listens on its port and can be joined."""
    paths, daemon, port, _token_file = node
    daemon.start()
    await daemon.ready(reactor)
    deadline = time.monotonic() + 20
    while True:  # spawned once NodeD listens (a loaded machine: later)
        found = [pid for pid in _children(daemon.process.pid)
                 if "ganeti.noded.joinchild" in procs.argv(pid)]
        if found or time.monotonic() > deadline:
            break
        await deferLater(reactor, 0.05, lambda: None)
    [child] = found
    os.kill(daemon.process.pid, signal.SIGKILL)  # NodeD alone, not its process group
    daemon.process.wait(timeout=10)
    deadline = time.monotonic() + 30
    while not _gone(child) and time.monotonic() < deadline:
        await deferLater(reactor, 0.05, lambda: None)
    assert _gone(child)
    daemon.start()
    await daemon.ready(reactor)
    await join.join_node_async(reactor, master, ADDRESS, TOKEN, "node2.test", port=port, timeout=20)
    assert crypto.load_pem_file(paths.server_pem) == crypto.load_pem_file(master.server_pem)
