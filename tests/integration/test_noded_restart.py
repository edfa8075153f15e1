"""A NodeD restart does not fail the jobs that call it (issue 23): while
node2's NodeD is stopped and started again, a stream of jobs calls it
(OP_TEST_DELAY on node2, RPC test_delay); every job succeeds, those that
called it while it was down once it is back.  The same for the master's
own NodeD killed with SIGKILL, which its jobs reach over its Unix socket
(L{ganeti.rpc.local}): the socket it leaves behind refuses them until the
new NodeD replaces it."""

from __future__ import annotations

import os
import stat
import threading
import time

import pytest
import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from ganeti.testing.fdcount import wait_final


def on_node(node: str, duration: float) -> list[dict]:
    return [{"OP_ID": "OP_TEST_DELAY", "duration": duration, "on_master": False, "on_nodes": [node],
             "reason": [["gnt:client:test", "", 0]]}]


def stream(socket: str, node: str, stop: threading.Event, out: list[tuple[float, int]]) -> None:
    """Submit a job on C{node} every 0.1 s until C{stop}: C{(submitted at, job id)}."""
    client = LuxiClient(socket, timeout=60)
    while not stop.is_set():
        out.append((time.monotonic(), client.submit_job(on_node(node, 0.2))))
        stop.wait(0.1)


@pytest.mark.parametrize("index, how", [(1, "stop"), (0, "kill")], ids=["node2-over-tls", "master-over-its-socket"])
@pytest_twisted.ensureDeferred
async def test_jobs_ride_through_a_noded_restart(root, index, how):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntnr") as cluster:
        noded = cluster.nodeds[index]
        node = "node%d.test" % (index + 1)
        stop, jobs = threading.Event(), []
        submitting = threads.deferToThread(stream, root.luxi_socket, node, stop, jobs)
        try:
            await deferLater(reactor, 1.5, lambda: None)
            down_at = time.monotonic()
            await threads.deferToThread(noded.stop if how == "stop" else noded.kill)
            if how == "kill":
                assert os.path.exists(noded.paths.noded_socket), "a killed NodeD's socket is left behind"
            await deferLater(reactor, 3.0, lambda: None)  # jobs call it meanwhile: refused
            await cluster.start_daemon(noded)
            up_at = time.monotonic()
            await deferLater(reactor, 1.5, lambda: None)
        finally:
            stop.set()
            await submitting
        while_down = [job for at, job in jobs if down_at <= at <= up_at]
        assert len(while_down) >= 5, (len(jobs), down_at, up_at)
        client = LuxiClient(root.luxi_socket, timeout=60)
        ids = [job for _at, job in jobs]
        statuses = await threads.deferToThread(wait_final, client, ids, 180)
        failed = {job: status for job, status in statuses.items() if status != "success"}
        if failed:
            rows = await threads.deferToThread(client.query_jobs, sorted(failed), ["id", "opresult"])
            raise AssertionError("%d of %d jobs failed: %s" % (len(failed), len(ids), rows))


@pytest_twisted.ensureDeferred
async def test_a_job_after_the_master_noded_restarted_under_a_warm_spare(root):
    """The spare job process connects to its own node's NodeD before its job comes (the handshake off the
    job's path): a NodeD restarted meanwhile closes that connection, and the job that then calls the node
    connects anew and succeeds."""
    def job_on(node: str) -> list[dict]:
        return [{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "on_master": False, "on_nodes": [node],
                 "reason": [["gnt:client:test", "", 0]]}]

    async with LoopbackCluster(reactor, root, loopback_config(2), prefix="gntnw") as cluster:
        client = LuxiClient(root.luxi_socket, timeout=60)
        master = "node1.test"
        first = await threads.deferToThread(client.submit_job, job_on(master))
        assert (await threads.deferToThread(wait_final, client, [first], 60)) == {first: "success"}
        await deferLater(reactor, 1.0, lambda: None)  # the next spare is forked and has connected
        noded = cluster.nodeds[0]
        await threads.deferToThread(noded.stop)
        await cluster.start_daemon(noded)
        ids = []
        for _ in range(3):
            ids.append(await threads.deferToThread(client.submit_job, job_on(master)))
            await threads.deferToThread(wait_final, client, ids[-1:], 60)
        statuses = await threads.deferToThread(wait_final, client, ids, 60)
        rows = await threads.deferToThread(client.query_jobs, ids, ["id", "status", "opresult"])
        assert set(statuses.values()) == {"success"}, rows


def unix_connections(path: str) -> int:
    """Sockets bound to C{path}, as the kernel lists them: the listening one and one per accepted connection."""
    with open("/proc/net/unix") as handle:
        return sum(1 for line in handle if line.rstrip().endswith(" " + path))


def own_unix_sockets() -> int:
    """The Unix sockets this process has open (the cluster's other processes, a spare job process warming
    up its own RPC client among them, connect to NodeD's socket too)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    with open("/proc/net/unix") as handle:
        rows = [line.split() for line in handle]
    return sum(1 for row in rows if len(row) > 6 and row[6] in inodes)


@pytest_twisted.ensureDeferred
async def test_a_node_calls_its_own_noded_over_its_socket(root):
    """The master's RPC client reaches the master's NodeD on its Unix socket (only root may open it), and
    node2's over TCP and TLS; both answer."""
    from ganeti.rpc import RpcClient, procedures

    async with LoopbackCluster(reactor, root, loopback_config(2), prefix="gntnl") as cluster:
        paths = cluster.nodeds[0].paths
        assert stat.S_IMODE(os.stat(paths.noded_socket).st_mode) == 0o600
        before, own = unix_connections(paths.noded_socket), own_unix_sockets()
        client = RpcClient.from_paths(reactor, paths, port=cluster.nodeds[0].tcp[1], epoch=None)
        try:
            results = await client.run({"node1.test": cluster.nodeds[0].tcp[0], "node2.test": cluster.nodeds[1].tcp[0]},
                                       procedures.version.call())
            assert all(not r.failed for r in results.values()), results
            # the client keeps its connection, accepted on NodeD's socket (node2's goes over TCP)
            assert own_unix_sockets() == own + 1
            assert unix_connections(paths.noded_socket) >= before + 1
        finally:
            await client.close()
