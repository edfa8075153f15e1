"""gnt-cluster master-failover on a real 3-node loopback cluster.

node1 is the master, node2 and node3 are master candidates; the cluster
runs one job at a time so that jobs stay queued while one runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import attrs
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons, epoch, ssconf
from ganeti.jobs import replicas
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, serial_of, ssconf_of
from ganeti.testing.fdcount import quick_job, wait_final

CANDIDATES = ["node2.test", "node3.test"]


def cluster_config(count: int = 3, candidates: list[str] = CANDIDATES) -> object:
    config = loopback_config(count, candidate_pool_size=10, candidates=candidates)
    return attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))


def with_identities(cluster: LoopbackCluster) -> None:
    """Each root knows which node it is (what gnt-cluster init / a join writes)."""
    for paths, (name, address) in zip(cluster.roots, cluster.nodes.items()):
        daemons.write_node_identity(paths, name, address)


def gnt_cluster(cluster: LoopbackCluster, paths: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GANETI_RPC_PORT=str(cluster.rpc_port))
    return subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, *args], capture_output=True,
                          text=True, timeout=180, env=env)


def master_of(paths: Paths) -> str | None:
    value = ssconf_of(paths, "master_node")
    return value.strip() if value else None


def job_status(paths: Paths, job_id: int) -> str | None:
    try:
        with open(os.path.join(paths.queue_dir, "job-%d" % job_id), "rb") as handle:
            return replicas.job_status(handle.read())
    except FileNotFoundError:
        return None


async def submit(client: LuxiClient, jobs: list) -> list[int]:
    answers = await threads.deferToThread(client.submit_many_jobs, jobs)
    assert all(ok for ok, _ in answers), answers
    return [job_id for _ok, job_id in answers]


async def ready_cluster(cluster: LoopbackCluster) -> None:
    with_identities(cluster)
    await cluster.until(lambda: all(master_of(p) == "node1.test" and serial_of(p) for p in cluster.roots[1:3]),
                        timeout=30)


def stop_master_daemons(paths: Paths) -> None:
    daemons.stop(paths, ["ganeti-luxid", "ganeti-rapi", "ganeti-wconfd"], out=lambda _line: None)


@pytest_twisted.ensureDeferred
async def test_manual_failover_with_jobs_in_flight(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            old = LuxiClient(roots[0].luxi_socket, timeout=60)
            running = await submit(old, [quick_job(30.0)])
            await cluster.until(lambda: job_status(roots[0], running[0]) == "running")
            queued = await submit(old, [quick_job(0.2) for _ in range(4)])
            assert all(job_status(roots[1], j) == "queued" for j in queued)

            refused = gnt_cluster(cluster, roots[2], "master-failover", "--no-voting", "--yes-do-it")
            started = time.monotonic()
            assert refused.returncode == 0, (refused.stdout, refused.stderr)  # node3 may take over too...
            # ...and node2 takes it back from node3: two failovers in a row
            done = gnt_cluster(cluster, roots[1], "master-failover")
            elapsed = time.monotonic() - started
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert elapsed < 30

            for paths in roots:
                assert master_of(paths) == "node2.test"
                assert epoch.read_epoch(paths) == 2
            # the old masters' daemons are stopped
            assert cluster.luxid.process.wait(timeout=30) is not None
            assert cluster.wconfd.process.wait(timeout=30) is not None
            assert daemons.running_pid(roots[2], daemons.BY_NAME["ganeti-luxid"]) is None

            new = LuxiClient(roots[1].luxi_socket, timeout=60)
            statuses = await threads.deferToThread(wait_final, new, running + queued, 120)
            assert statuses == {running[0]: "error", **{j: "success" for j in queued}}
            (result,) = await threads.deferToThread(new.query_jobs, [running[0]], ["opresult"])
            assert "master failover" in str(result)
            # job ids are never reused
            (later,) = await submit(new, [quick_job()])
            assert later > max(queued)
            await threads.deferToThread(wait_final, new, [later], 60)
            # one config serial everywhere
            await cluster.until(lambda: len({serial_of(p) for p in roots}) == 1, timeout=30)
        finally:
            for paths in roots[1:]:
                stop_master_daemons(paths)


@pytest_twisted.ensureDeferred
async def test_refusals(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntf") as cluster:
        roots = cluster.roots
        await ready_cluster(cluster)
        # on the master itself, and on a node that is not a candidate
        done = gnt_cluster(cluster, roots[0], "master-failover")
        assert done.returncode == 1 and "node1.test is already the master" in done.stderr
        with open(roots[2].ssconf("master_candidates"), "w") as handle:
            handle.write("node1.test\nnode2.test\n")
        done = gnt_cluster(cluster, roots[2], "master-failover")
        assert done.returncode == 1 and "not among the nodes marked as master candidates" in done.stderr
        # outvoted: this node believes in another master than the others
        with open(roots[2].ssconf("master_candidates"), "w") as handle:
            handle.write("node1.test\nnode2.test\nnode3.test\n")
        os.chmod(roots[2].ssconf("master_node"), 0o644)
        with open(roots[2].ssconf("master_node"), "w") as handle:
            handle.write("node2.test\n")
        done = gnt_cluster(cluster, roots[2], "master-failover")
        assert done.returncode == 1
        assert "I believe the master is node2.test but the other nodes voted node1.test" in done.stderr
        # nothing changed: same master, no new epoch
        assert master_of(roots[1]) == "node1.test"
        assert all(epoch.read_epoch(p) == 0 for p in roots)
