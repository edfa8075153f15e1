"""Node liveness on a real 3-node loopback cluster: every NodeD beats to
the master's LuxiD over mutual TLS; a killed or stopped NodeD is
unreachable within 3 s (CLI and RAPI), back up when it returns; a LuxiD
restart rebuilds the roster without writing; beats write nothing.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import time
import urllib.request

import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok

NODES = ["node1.test", "node2.test", "node3.test"]


def liveness(cluster: LoopbackCluster) -> dict[str, str]:
    """C{gnt-node list -o name,liveness} as a dict."""
    out = ok(cluster.master, "gnt-node", "list", "--no-headers", "--separator=|", "-o", "name,liveness,last_seen")
    return {line.split("|")[0]: line.split("|")[1] for line in out.splitlines() if line}


def store_writes(cluster: LoopbackCluster) -> int:
    try:
        with open(os.path.join(cluster.master.data_dir, "liveness.log"), "rb") as handle:
            return len(handle.read().splitlines())
    except FileNotFoundError:
        return 0


def rapi_get(cluster: LoopbackCluster, path: str) -> dict:
    """GET C{path} from the cluster's RAPI (trusting its certificate)."""
    context = ssl.create_default_context(cadata=cluster.cert_pem.decode())
    context.check_hostname = False
    request = urllib.request.Request(cluster.url + path)
    request.add_header("Authorization", "Basic " + base64.b64encode(b"admin:secret").decode())
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:
        return json.loads(answer.read())


def transition(cluster: LoopbackCluster, node: str, state: str, since: float) -> dict | None:
    """The first change of C{node} to C{state} that LuxiD recorded (liveness.log,
    with the time LuxiD saw it) at or after C{since} (epoch seconds)."""
    try:
        with open(os.path.join(cluster.master.data_dir, "liveness.log")) as handle:
            records = [json.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return None
    return next((r for r in records if r.get("node") == node and r.get("state") == state
                 and r.get("time", 0) >= since), None)


async def detected(cluster: LoopbackCluster, node: str, state: str, since: float) -> float:
    """Seconds from C{since} until LuxiD recorded C{node} as C{state} (waits up to 60 s
    for the record: on a loaded machine the test's own commands are slow, LuxiD's
    decision is what is measured)."""
    await cluster.until(lambda: transition(cluster, node, state, since) is not None, timeout=60)
    found = transition(cluster, node, state, since)
    assert found is not None
    return float(found["time"]) - since


async def wait_state(cluster: LoopbackCluster, node: str, state: str, within: float) -> float:
    """Seconds until C{node} shows C{state} in gnt-node list (fails after C{within})."""
    start = time.monotonic()
    await cluster.until(lambda: liveness(cluster).get(node) == state, timeout=within)
    return time.monotonic() - start


@pytest_twisted.ensureDeferred
async def test_liveness_kill_stop_restart(root):
    users = "admin {CLEARTEXT}secret write\n"
    async with LoopbackCluster(reactor, root, loopback_config(3), rapi_users=users, prefix="gntl") as cluster:
        await cluster.until(lambda: set(liveness(cluster).values()) == {"up"}, timeout=30)
        node3 = cluster.nodeds[2]

        # kill -9: the connection closes; unreachable within 3 s
        start = time.time()
        node3.kill(signal.SIGKILL)
        assert await detected(cluster, "node3.test", "unreachable", start) <= 3.5
        await wait_state(cluster, "node3.test", "unreachable", 30)
        assert liveness(cluster)["node2.test"] == "up"

        # the RAPI node resource shows it too
        body = await threads.deferToThread(rapi_get, cluster, "/2/nodes/node3.test")
        assert body["liveness"] == "unreachable" and body["last_seen"] > 0, body

        # back: up again
        await cluster.start_daemon(node3)
        await wait_state(cluster, "node3.test", "up", 30)

        # SIGSTOP: connected but silent
        start = time.time()
        os.kill(node3.process.pid, signal.SIGSTOP)
        try:
            assert await detected(cluster, "node3.test", "unreachable", start) <= 3.5
        finally:
            os.kill(node3.process.pid, signal.SIGCONT)
        await wait_state(cluster, "node3.test", "up", 30)

        # gnt-cluster verify names the unreachable node as an error
        node3.kill(signal.SIGKILL)
        await wait_state(cluster, "node3.test", "unreachable", 30)
        # a job that calls it says so in its log
        delay = gnt(cluster.master, "gnt-debug", "delay", "--no-master", "-n", "node3.test", "0.1")
        assert "Node node3.test is unreachable (no heartbeat for" in delay.stdout + delay.stderr, delay
        verify = gnt(cluster.master, "gnt-cluster", "verify")
        assert verify.returncode != 0, verify
        assert "node node3.test: node is unreachable: no heartbeat" in verify.stdout, verify.stdout
        await cluster.start_daemon(node3)
        await wait_state(cluster, "node3.test", "up", 30)

        # LuxiD restart: the roster rebuilds from reconnections, nothing written
        before = store_writes(cluster)
        cluster.luxid.stop()
        await cluster.start_daemon(cluster.luxid)
        await cluster.until(lambda: set(liveness(cluster).values()) == {"up"}, timeout=30)
        assert store_writes(cluster) == before


@pytest_twisted.ensureDeferred
async def test_beats_write_nothing_and_redirect(root):
    """15 s of beats from 3 nodes (45 beats, 60 sweeps, 7 membership looks): no durable write.  A node whose ssconf names
    a non-master is told who the master is and goes there."""
    from ganeti.heartbeat.server import LivenessService, heartbeat_listener
    from ganeti.heartbeat.store import LivenessStore

    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntm") as cluster:
        await cluster.until(lambda: set(liveness(cluster).values()) == {"up"}, timeout=30)
        before = store_writes(cluster)
        # one "up" per node, once (a node in its backoff when LuxiD started is not "never connected")
        assert before == 3, open(os.path.join(cluster.master.data_dir, "liveness.log")).read()
        await deferLater(reactor, 15, lambda: None)
        assert store_writes(cluster) == before
        assert set(liveness(cluster).values()) == {"up"}

        # a LuxiD that is not the master (node2's files: its ssconf names node1)
        node2 = cluster.roots[1]
        service = LivenessService(node2, reactor, LivenessStore(os.path.join(node2.root, "not-master.log")),
                                  port=cluster.heartbeat_port)
        listener = heartbeat_listener(service, "127.0.1.2", cluster.heartbeat_port, max_connections=10,
                                      reactor=reactor)
        listener.startService()
        hellos: list[str] = []
        original = service.master

        def master():
            hellos.append("hello")
            return original()

        service.master = master
        try:
            node3 = cluster.nodeds[2]
            node3.kill(signal.SIGKILL)
            await wait_state(cluster, "node3.test", "unreachable", 30)
            with open(cluster.roots[2].ssconf("master_node"), "w") as handle:
                handle.write("node2.test\n")
            await cluster.start_daemon(node3)
            await wait_state(cluster, "node3.test", "up", 30)
            assert hellos, "node3 never asked node2"
            assert service.store.writes == 0
        finally:
            await listener.stopService()

        # a peer without the cluster certificate is refused in the TLS handshake
        from ganeti import crypto
        from ganeti.heartbeat import wire
        from ganeti.heartbeat.client import Backoff, HeartbeatClient
        from ganeti.rpc.tls import Credentials, PinnedPolicy

        key_pem, cert_pem = crypto.generate_key_and_cert("intruder.test")
        cluster_cert = crypto.load_pem_file(cluster.master.server_pem)[1]
        creator = PinnedPolicy(Credentials(key_pem, cert_pem, cluster_cert)).creatorForNetloc(b"", 0)

        async def lookup(_failed: bool):
            return ("node1.test", "127.0.1.1", cluster.heartbeat_port)

        intruder = HeartbeatClient(reactor, lambda: wire.hello("node2.test", "", "forged", None, "0"), lookup,
                                   lambda: creator, backoff=Backoff(initial=0.2, maximum=0.2))
        intruder.startService()
        try:
            await deferLater(reactor, 3, lambda: None)
            assert intruder.connects == 0
            roster = liveness(cluster)
            assert roster["node2.test"] == "up"
        finally:
            intruder.stopService()
        records = [json.loads(line) for line in open(os.path.join(cluster.master.data_dir, "liveness.log"))]
        assert not any(r.get("boot_id") == "forged" for r in records)


def test_luxid_exits_when_the_heartbeat_port_is_taken(root):
    """A LuxiD that cannot listen for heartbeats does not run: exit 1, one line naming the address."""
    import socket
    import subprocess

    from ganeti import crypto
    from ganeti.daemons import free_port, write_node_identity
    from ganeti.testing.daemons import TWISTD

    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    write_node_identity(root, "node1.test", "127.0.1.1")
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.1.1", port))
        holder.listen(1)
        done = subprocess.run([TWISTD, "-n", "--pidfile=", "--logfile=-", "ganeti-luxid", "--root", root.root,
                               "--heartbeat-port", str(port)], capture_output=True, text=True, timeout=60,
                              cwd=root.root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "ganeti-luxid cannot listen on 127.0.1.1 port %d (TCP)" % port in done.stdout + done.stderr
