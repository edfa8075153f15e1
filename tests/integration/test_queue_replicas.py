"""The job queue's replicas on the master candidates converge to the master's
queue: after a candidate was down, after LuxiD was killed while jobs ran,
for archived jobs and the drain flag; gnt-cluster verify reports a replica
that differs, and passes once LuxiD resynced it.

A real 3-node L{LoopbackCluster}: node2 and node3 are master candidates.
"""

from __future__ import annotations

import os
import signal

import orjson
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.jobs import replicas
from ganeti.jobs.model import QueuedJob
from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config
from ganeti.testing.fdcount import quick_job, wait_final


def queue_of(paths) -> dict[str, str]:
    return replicas.ListingCache(paths.queue_dir).listing()


def converged(cluster: LoopbackCluster) -> bool:
    master = queue_of(cluster.roots[0])
    return all(queue_of(paths) == master for paths in cluster.roots[1:])


def status_on(paths, job_id: int) -> str | None:
    for name in ("job-%d" % job_id, "archive/%d/job-%d" % (job_id // 10000, job_id)):
        try:
            with open(os.path.join(paths.queue_dir, name), "rb") as handle:
                return replicas.job_status(handle.read())
        except FileNotFoundError:
            continue
    return None


async def run(client: LuxiClient, jobs: list[list[dict]]) -> list[int]:
    answers = await threads.deferToThread(client.submit_many_jobs, jobs)
    assert all(ok for ok, _ in answers), answers
    return [job_id for _ok, job_id in answers]


@pytest_twisted.ensureDeferred
async def test_replicas_converge(root):
    config = loopback_config(3, candidate_pool_size=10, candidates=["node2.test", "node3.test"])
    async with LoopbackCluster(reactor, root, config, prefix="gntq") as cluster:
        roots, nodeds = cluster.roots, cluster.nodeds
        client = LuxiClient(roots[0].luxi_socket, timeout=60)
        try:
            first = await run(client, [quick_job()])
            await threads.deferToThread(wait_final, client, first)
            await cluster.until(lambda: converged(cluster))

            # a candidate that is down misses jobs (some finishing); back, it converges
            nodeds[2].stop()
            quick = await run(client, [quick_job() for _ in range(4)])
            slow = await run(client, [quick_job(1.5)])
            await threads.deferToThread(wait_final, client, quick)
            assert status_on(roots[2], quick[0]) is None
            await cluster.start_daemon(nodeds[2])
            await threads.deferToThread(wait_final, client, slow)
            await cluster.until(lambda: converged(cluster), timeout=40)
            assert status_on(roots[2], slow[0]) == "success"

            # LuxiD killed while jobs run: they finish without it; restarted, it pushes them
            running = await run(client, [quick_job(2.0) for _ in range(2)])
            await cluster.until(lambda: all(status_on(roots[0], j) == "running" for j in running))
            cluster.luxid.kill(signal.SIGKILL)
            await cluster.until(lambda: all(status_on(roots[0], j) == "success" for j in running), timeout=30)
            assert status_on(roots[1], running[0]) in ("queued", "waiting", "running"), \
                "nobody pushed the final state meanwhile"
            await cluster.start_daemon(cluster.luxid)
            await cluster.until(lambda: converged(cluster), timeout=30)
            assert all(status_on(r, j) == "success" for r in roots for j in running)

            # archive and drain flag
            client.close()
            client = LuxiClient(roots[0].luxi_socket, timeout=60)
            assert await threads.deferToThread(client.archive_job, running[0])
            await threads.deferToThread(client.set_drain_flag, True)
            name = "archive/0/job-%d" % running[0]
            await cluster.until(lambda: all(name in queue_of(r) and "drain" in queue_of(r) for r in roots[1:]))
            await cluster.until(lambda: converged(cluster))
            await threads.deferToThread(client.set_drain_flag, False)
            await cluster.until(lambda: all("drain" not in queue_of(r) for r in roots[1:]))
            await cluster.until(lambda: converged(cluster))

            # verify: a tampered replica is an error naming the job; a resync repairs it
            done = await threads.deferToThread(gnt, root, "gnt-cluster", "verify")
            assert done.returncode == 0, done.stdout + done.stderr
            path = os.path.join(roots[1].queue_dir, "job-%d" % quick[1])
            with open(path, "rb") as handle:
                job = QueuedJob.from_dict(orjson.loads(handle.read()))
            job.ops[0].status = "running"
            with open(path, "wb") as handle:
                handle.write(job.to_json())
            failed = await threads.deferToThread(gnt, root, "gnt-cluster", "verify")
            assert failed.returncode == 1, failed.stdout
            assert ("ERROR: node node2.test: job queue replica differs from the master's for 1 job(s): "
                    "%d stale (status running, master: success)" % quick[1]) in failed.stdout
            client.close()
            cluster.luxid.stop()
            await cluster.start_daemon(cluster.luxid)  # resync on start
            await cluster.until(lambda: converged(cluster), timeout=30)
            done = await threads.deferToThread(gnt, root, "gnt-cluster", "verify")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "* Verifying the job queue replicas (2 candidates)" in done.stdout
        finally:
            client.close()
