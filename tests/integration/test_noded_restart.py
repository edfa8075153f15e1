"""A NodeD restart does not fail the jobs that call it (issue 23): while
node2's NodeD is stopped and started again, a stream of jobs calls it
(OP_TEST_DELAY on node2, RPC test_delay); every job succeeds, those that
called it while it was down once it is back."""

from __future__ import annotations

import threading
import time

import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from ganeti.testing.fdcount import wait_final

N2 = "node2.test"


def on_node2(duration: float) -> list[dict]:
    return [{"OP_ID": "OP_TEST_DELAY", "duration": duration, "on_master": False, "on_nodes": [N2],
             "reason": [["gnt:client:test", "", 0]]}]


def stream(socket: str, stop: threading.Event, out: list[tuple[float, int]]) -> None:
    """Submit a job every 0.1 s until C{stop}: C{(submitted at, job id)}."""
    client = LuxiClient(socket, timeout=60)
    while not stop.is_set():
        out.append((time.monotonic(), client.submit_job(on_node2(0.2))))
        stop.wait(0.1)


@pytest_twisted.ensureDeferred
async def test_jobs_ride_through_a_noded_restart(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntnr") as cluster:
        noded = cluster.nodeds[1]
        stop, jobs = threading.Event(), []
        submitting = threads.deferToThread(stream, root.luxi_socket, stop, jobs)
        try:
            await deferLater(reactor, 1.5, lambda: None)
            down_at = time.monotonic()
            await threads.deferToThread(noded.stop)
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
