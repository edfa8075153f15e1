"""Clients ride through a master failover (issue 23), on a real 3-node loopback cluster.

node1 is the master, node2 and node3 master candidates; one job runs at a
time, so a blocker keeps the jobs under test queued across the failover.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.jobs.submission import reason_entry
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.cluster import BIN, LoopbackCluster
from ganeti.testing.fdcount import quick_job
from tests.integration.test_failover import cluster_config, gnt_cluster, job_status, ready_cluster, stop_master_daemons


def named_job(key: str, duration: float = 0.001) -> list[dict]:
    """A job with the submission id C{key}."""
    (op,) = quick_job(duration)
    op["reason"] = op["reason"] + [reason_entry(key, time.time_ns())]
    return [op]


def start_cli(cluster: LoopbackCluster, paths: Paths, tool: str, *args: str) -> subprocess.Popen[str]:
    """A gnt-* command on C{paths}' node, in the background (the cluster's heartbeat port, which
    serves LUXI to the other nodes)."""
    env = dict(os.environ, GANETI_HEARTBEAT_PORT=str(cluster.heartbeat_port))
    return subprocess.Popen([os.path.join(BIN, tool), "--root", paths.root, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def submit_one(paths: Paths, job: list[dict]) -> int:
    with LuxiClient(paths.luxi_socket, timeout=60) as client:
        ((ok, job_id),) = client.submit_many_jobs([job])
    assert ok, job_id
    return int(job_id)


@pytest_twisted.ensureDeferred
async def test_clients_ride_through_a_master_failover(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntcf") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            blocker = await threads.deferToThread(submit_one, roots[0], quick_job(60.0))
            await cluster.until(lambda: job_status(roots[0], blocker) == "running", timeout=60)

            # the CLI on the master submits a tag and follows its job (queued behind the blocker)
            tagger = start_cli(cluster, roots[0], "gnt-cluster", "add-tags", "--print-jobid", "ridethrough")
            tag_job = int(await threads.deferToThread(tagger.stdout.readline))  # type: ignore[union-attr]
            # a CLI on node3, not the master, follows the same job over TLS to the master
            watcher = start_cli(cluster, roots[2], "gnt-job", "watch", str(tag_job))

            # a submission id: the same id answers the same job, also after a LuxiD restart
            first = await threads.deferToThread(submit_one, roots[0], named_job("it-k1"))
            assert await threads.deferToThread(submit_one, roots[0], named_job("it-k1")) == first
            cluster.luxid.stop()
            cluster.luxid.start()
            await cluster.luxid.ready(reactor)
            assert await threads.deferToThread(submit_one, roots[0], named_job("it-k1")) == first
            without_id = [await threads.deferToThread(submit_one, roots[0], quick_job()) for _ in range(2)]
            assert without_id[0] != without_id[1]  # as Ganeti's own clients: no id, no merging

            # the queued jobs reached the candidate that takes over
            await cluster.until(lambda: all(job_status(roots[1], j) == "queued" for j in [tag_job, first]),
                                timeout=60)
            done = await threads.deferToThread(gnt_cluster, cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)

            # both CLIs followed the job on the new master to its end
            out, err = await threads.deferToThread(tagger.communicate, timeout=180)
            assert tagger.returncode == 0, (out, err)
            assert err.count("Waiting for a new master") <= 1, err
            assert "fail" not in err.lower(), err
            out, err = await threads.deferToThread(watcher.communicate, timeout=180)
            assert watcher.returncode == 0, (out, err)
            # the change was made once, on the new master
            tags = await threads.deferToThread(gnt_cluster, cluster, roots[1], "list-tags")
            assert "ridethrough" in tags.stdout.split()
            # the new master answers a resubmission with the first job id (job files replicated)
            assert await threads.deferToThread(submit_one, roots[1], named_job("it-k1")) == first
            # and our CLI on the old master's node reaches the new master
            env = dict(os.environ, GANETI_HEARTBEAT_PORT=str(cluster.heartbeat_port))
            listed = await threads.deferToThread(
                lambda: subprocess.run([os.path.join(BIN, "gnt-job"), "--root", roots[0].root, "list",
                                        "--no-headers", "-o", "id,status"], capture_output=True, text=True,
                                       timeout=120, env=env))
            assert listed.returncode == 0, listed.stderr
            assert "%d success" % tag_job in " ".join(listed.stdout.split())
        finally:
            for paths in roots[1:]:
                stop_master_daemons(paths)
