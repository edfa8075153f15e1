"""Automatic failover on a real 3-node loopback cluster (auto_failover on, short timeout).

node1 is the master, node2 and node3 master candidates.  The master dies
(C{kill -9} of every process of its root) during a stream of tag jobs: a
candidate is elected and accepts jobs.  A partition (every node in a
network namespace the test creates, the master's link cut): the minority
master steps down, the majority elects, and after healing there is one
master and one config everywhere.  Where namespaces cannot be made, a
master left alone (the other NodeDs frozen) steps down instead, and once
they are back one master is elected.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.ha import epoch
from ganeti.heartbeat.client import BEAT_INTERVAL
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.auto_failover import enable_auto_failover, kill_root, try_submit
from ganeti.testing.cluster import LoopbackCluster, serial_of
from ganeti.testing.fdcount import wait_final
from ganeti.testing.jobstream import JobStream
from ganeti.testing.netns import Namespaces, NetnsCluster
from tests.integration.test_failover import (
    cluster_config,
    cluster_tags,
    liveness_on,
    master_of,
    ready_cluster,
    stop_master_daemons,
)

#: the failover timeout of these tests (seconds)
TIMEOUT = 3.0
#: what a loaded CI machine may add to timeout + election + failover
SLACK = 30.0
#: the master is counted lost from the last beat heard, which may come up to a beat interval before the fault
#: (docs/ha.md): the earliest a new master may appear after it
FLOOR = TIMEOUT - BEAT_INTERVAL


async def new_master(cluster: LoopbackCluster, candidates: list[Paths], timeout: float) -> tuple[Paths, int]:
    """Wait until one of C{candidates} accepts a job: that node and the job id."""
    found: list[tuple[Paths, int]] = []

    def accepted() -> bool:
        for paths in candidates:
            job_id = try_submit(paths)
            if job_id is not None:
                found.append((paths, job_id))
                return True
        return False

    await cluster.until(accepted, timeout=timeout)
    return found[0]


def client_stream(cluster: LoopbackCluster, home: Paths) -> JobStream:
    """A stream of tag jobs from a client on C{home}'s node that rides through failovers."""
    return JobStream(home, env={"GANETI_HEARTBEAT_PORT": str(cluster.heartbeat_port)})


async def all_connected(cluster: LoopbackCluster) -> None:
    """Wait until every node's heartbeat reached the master (before automatic failover is on)."""
    everyone = {name: "up" for name in cluster.nodes}
    await cluster.until(lambda: liveness_on(cluster.roots[0]) == everyone, timeout=SLACK)


@pytest_twisted.ensureDeferred
async def test_the_master_dies_a_candidate_is_elected(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gnta") as cluster:
        roots = cluster.roots
        stream = client_stream(cluster, roots[-1])
        try:
            await ready_cluster(cluster)
            await all_connected(cluster)
            enable_auto_failover(roots, TIMEOUT)
            stream.start()
            await cluster.until(lambda: len(stream.acknowledged) >= 5, timeout=60)
            kill_root(roots[0])  # while the stream submits
            died = time.monotonic()
            before = list(stream.ids)
            master, probe = await new_master(cluster, roots[1:], TIMEOUT + SLACK)
            elapsed = time.monotonic() - died
            assert elapsed >= FLOOR  # nobody moved before the timeout (since the last beat)
            name = "node2.test" if master is roots[1] else "node3.test"
            survivors = roots[1:]
            assert all(master_of(p) == name for p in survivors)
            assert all(epoch.read_epoch(p) == 1 for p in survivors)
            # the stream's client (on a node that lives on) rode through to the new master
            await cluster.until(lambda: len(stream.acknowledged) >= len(before) + 5, timeout=60)
            await threads.deferToThread(stream.stop)

            client = LuxiClient(master.luxi_socket, timeout=60)
            acknowledged = sorted(stream.acknowledged)
            statuses = await threads.deferToThread(wait_final, client, acknowledged + [probe], 120)
            # every acknowledged job is there and final; no id given twice
            assert set(statuses) == set(acknowledged + [probe])
            assert len(stream.ids) == len(set(stream.ids))
            # queued ones ran on the new master; only those running on the old one ended in error, saying so
            assert set(statuses.values()) <= {"success", "error"}
            failed = [job_id for job_id, status in statuses.items() if status == "error"]
            if failed:
                results = await threads.deferToThread(client.query_jobs, failed, ["opresult"])
                assert all("master failover" in str(row) for row in results), results
            # job ids are never reused
            assert probe > max(before)
            assert statuses[probe] == "success" and "probe" in cluster_tags(master)
            # one config serial on the survivors
            await cluster.until(lambda: len({serial_of(p) for p in survivors}) == 1, timeout=30)
        finally:
            stream.kill()
            for paths in roots[1:]:
                stop_master_daemons(paths)


@pytest_twisted.ensureDeferred
async def test_a_master_left_alone_steps_down_then_one_master_is_elected(root):
    """The other nodes' NodeDs frozen (SIGSTOP): the master reaches no majority.

    Where network namespaces can be made, the partition test below covers
    this (and more): this one runs only where they cannot (suite time)."""
    if Namespaces.unavailable() is None:
        pytest.skip("covered by the partition test in network namespaces")
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gnta") as cluster:
        roots, others = cluster.roots, cluster.nodeds[1:]
        try:
            await ready_cluster(cluster)
            await all_connected(cluster)
            enable_auto_failover(roots, TIMEOUT)
            assert try_submit(roots[0]) is not None
            for daemon in others:
                daemon.process.send_signal(signal.SIGSTOP)
            # the master steps down: LuxiD and WConfD stop, and say why
            await threads.deferToThread(cluster.luxid.process.wait, TIMEOUT + SLACK)
            await threads.deferToThread(cluster.wconfd.process.wait, SLACK)
            assert "it steps down" in cluster.luxid.output()
            assert try_submit(roots[0]) is None
            for daemon in others:
                daemon.process.send_signal(signal.SIGCONT)
            # healed: the majority elects one master, known everywhere, one config everywhere
            master, _probe = await new_master(cluster, roots[1:], TIMEOUT + SLACK)
            name = "node2.test" if master is roots[1] else "node3.test"
            await cluster.until(lambda: all(master_of(p) == name for p in roots), timeout=SLACK)
            await cluster.until(lambda: len({serial_of(p) for p in roots}) == 1, timeout=SLACK)
            assert {epoch.read_epoch(p) for p in roots} == {1}
            await cluster.until(lambda: {epoch.read_config_epoch(p) for p in roots} == {1}, timeout=SLACK)
            assert try_submit(roots[0]) is None
        finally:
            for daemon in others:
                if daemon.process is not None and daemon.process.poll() is None:
                    daemon.process.send_signal(signal.SIGCONT)
            for paths in roots[1:]:
                stop_master_daemons(paths)


@pytest_twisted.ensureDeferred
async def test_partition_the_minority_master_steps_down_and_the_majority_elects(root):
    """Every node in a network namespace of its own; the master's link is cut, then restored."""
    why = Namespaces.unavailable()
    if why is not None:
        pytest.skip(why)
    spaces = Namespaces.create("gntp%d" % os.getpid(), 3)
    try:
        async with NetnsCluster(reactor, root, cluster_config(), spaces, prefix="gnta") as cluster:
            roots = cluster.roots
            try:
                await ready_cluster(cluster)
                await all_connected(cluster)
                enable_auto_failover(roots, TIMEOUT)
                assert try_submit(roots[0]) is not None
                spaces.cut(0)
                # the minority master steps down; the majority elects one of its own
                await threads.deferToThread(cluster.luxid.process.wait, TIMEOUT + SLACK)
                assert "it steps down" in cluster.luxid.output()
                await threads.deferToThread(cluster.wconfd.process.wait, SLACK)
                # the others notice the silence after the heartbeat's TCP user timeout (5 s), calls to the
                # old master in the failover and the master daemons' start-up votes wait for its timeouts
                master, probe = await new_master(cluster, roots[1:], TIMEOUT + 2 * SLACK)
                name = "node2.test" if master is roots[1] else "node3.test"
                assert try_submit(roots[0]) is None
                spaces.heal(0)
                # healed: one master and one config everywhere, the old master fenced
                await cluster.until(lambda: all(master_of(p) == name for p in roots), timeout=SLACK)
                await cluster.until(lambda: len({serial_of(p) for p in roots}) == 1, timeout=SLACK)
                await cluster.until(lambda: {epoch.read_epoch(p) for p in roots} == {1}, timeout=SLACK)
                client = LuxiClient(master.luxi_socket, timeout=60)
                assert await threads.deferToThread(wait_final, client, [probe], 60) == {probe: "success"}
                assert try_submit(roots[0]) is None
            finally:
                for paths in roots[1:]:
                    stop_master_daemons(paths)
    finally:
        spaces.destroy()


@pytest_twisted.ensureDeferred
async def test_five_nodes_lose_the_master_and_a_candidate(root):
    """node1 (the master) and node2 (the candidate first by name) die together during a job stream:
    the three left are a majority of five and elect one of them; nothing acknowledged is lost."""
    names = ["node%d.test" % n for n in range(1, 6)]
    async with LoopbackCluster(reactor, root, cluster_config(5, names[1:]), prefix="gnt5") as cluster:
        roots = cluster.roots
        stream = client_stream(cluster, roots[-1])
        try:
            await ready_cluster(cluster)
            await cluster.until(lambda: all(master_of(p) == names[0] and serial_of(p) for p in roots[1:]),
                                timeout=SLACK)
            await all_connected(cluster)
            enable_auto_failover(roots, TIMEOUT)
            stream.start()
            await cluster.until(lambda: len(stream.acknowledged) >= 5, timeout=60)
            kill_root(roots[0])
            kill_root(roots[1])
            died = time.monotonic()
            before = list(stream.ids)
            survivors = roots[2:]
            master, probe = await new_master(cluster, survivors, TIMEOUT + SLACK)
            assert time.monotonic() - died >= FLOOR  # nobody moved before the timeout (since the last beat)
            name = names[roots.index(master)]
            await cluster.until(lambda: all(master_of(p) == name for p in survivors), timeout=SLACK)
            assert all(epoch.read_epoch(p) == 1 for p in survivors)
            # the stream's client (on a node that lives on) rode through to the new master
            await cluster.until(lambda: len(stream.acknowledged) >= len(before) + 5, timeout=60)
            await threads.deferToThread(stream.stop)
            client = LuxiClient(master.luxi_socket, timeout=60)
            acknowledged = sorted(stream.acknowledged)
            statuses = await threads.deferToThread(wait_final, client, acknowledged + [probe], 120)
            assert set(statuses) == set(acknowledged + [probe])  # every acknowledged job is there, and final
            assert set(statuses.values()) <= {"success", "error"}
            assert len(stream.ids) == len(set(stream.ids))
            assert statuses[probe] == "success" and "probe" in cluster_tags(master)
            succeeded = {stream.acknowledged[i] for i, s in statuses.items() if s == "success" and i != probe}
            assert succeeded <= set(cluster_tags(master))  # a success has its effect
            await cluster.until(lambda: len({serial_of(p) for p in survivors}) == 1, timeout=SLACK)
        finally:
            stream.kill()
            for paths in roots[2:]:
                stop_master_daemons(paths)
