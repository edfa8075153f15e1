"""A paused master on a real 3-node loopback cluster (automatic failover on, short timeout).

node1 is the master, node2 and node3 master candidates.  SIGSTOP of every
process of the master's root (NodeD, WConfD, LuxiD, confd, RAPI, job
processes): its kernel keeps every TCP connection open, yet the nodes hear
nothing from its LuxiD and a candidate is elected.  On SIGCONT the old
master accepts no job, writes no config, answers nothing as master and
steps down; the cluster ends with one master.  Then the same with the
master's LuxiD alone stopped.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.ha import epoch
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.auto_failover import enable_auto_failover, root_pids, try_submit
from ganeti.testing.cluster import LoopbackCluster, serial_of
from ganeti.testing.fdcount import wait_final
from tests.integration.test_auto_failover import FLOOR, SLACK, TIMEOUT, all_connected, new_master
from tests.integration.test_failover import cluster_config, master_of, ready_cluster, stop_master_daemons


def signal_pids(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def config_bytes(paths: Paths) -> bytes:
    with open(paths.config_data, "rb") as handle:
        return handle.read()


def master_in(config: bytes) -> str:
    """The name of the master node a config.data names."""
    data = json.loads(config)
    return data["nodes"][data["cluster"]["master_node"]]["name"]


def answers_as_master(paths: Paths) -> bool:
    """Whether C{paths}' LuxiD answers a query (any answer claims mastership)."""
    try:
        client = LuxiClient(paths.luxi_socket, timeout=5)
        try:
            client.query_cluster_info()
        finally:
            client.close()
    except Exception:
        return False
    return True


async def paused_master_is_replaced(cluster: LoopbackCluster, pids: list[int], what: str) -> None:
    roots = cluster.roots
    assert try_submit(roots[0]) is not None
    before = config_bytes(roots[0])
    signal_pids(pids, signal.SIGSTOP)
    stopped = time.monotonic()
    resumed = False
    try:
        master, probe = await new_master(cluster, roots[1:], TIMEOUT + SLACK)
        elapsed = time.monotonic() - stopped
        print("\n%s: SIGSTOP to a new master accepting a job: %.1f s (failover timeout %g s)"
              % (what, elapsed, TIMEOUT))
        assert elapsed >= FLOOR  # nobody moved before the timeout (since the last beat heard)
        name = "node2.test" if master is roots[1] else "node3.test"
        if os.environ.get("GANETI_TEST_TRACE"):
            for daemon in cluster.nodeds[1:]:
                print("\n".join(line for line in daemon.output().splitlines() if "election" in line
                                 or "heartbeat" in line)[-3000:])
        signal_pids(pids, signal.SIGCONT)
        resumed = True
        # the resumed old master: no job accepted, nothing answered as master, no config written
        assert try_submit(roots[0], "resumed") is None
        assert not answers_as_master(roots[0])
        # whatever config it holds now is its own from before or the new master's (pushed to it)
        # (the config file names its master: ssconf, written after it, may still lag)
        now = config_bytes(roots[0])
        assert now == before or master_in(now) == name, master_in(now)
        await threads.deferToThread(cluster.luxid.process.wait, SLACK)  # it steps down (or is fenced)
        # one master, known everywhere; one config; the new epoch
        await cluster.until(lambda: all(master_of(p) == name for p in roots), timeout=SLACK)
        await cluster.until(lambda: len({serial_of(p) for p in roots}) == 1, timeout=SLACK)
        assert {epoch.read_epoch(p) for p in roots[1:]} == {1}
        # the config everywhere, the resumed old master's included, is the one written under the new epoch
        await cluster.until(lambda: {epoch.read_config_epoch(p) for p in roots} == {1}, timeout=SLACK)
        client = LuxiClient(master.luxi_socket, timeout=60)
        assert await threads.deferToThread(wait_final, client, [probe], 60) == {probe: "success"}
        assert try_submit(roots[0]) is None
        assert "resumed" not in config_bytes(master).decode()
    finally:
        if not resumed:
            signal_pids(pids, signal.SIGCONT)


@pytest_twisted.ensureDeferred
async def test_a_paused_master_is_replaced_and_serves_nothing_when_resumed(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntz") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            await all_connected(cluster)
            enable_auto_failover(roots, TIMEOUT)
            await paused_master_is_replaced(cluster, root_pids(roots[0]), "whole master root")
        finally:
            for paths in roots[1:]:
                stop_master_daemons(paths)


@pytest_twisted.ensureDeferred
async def test_a_paused_luxid_alone_is_replaced(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntz") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            await all_connected(cluster)
            enable_auto_failover(roots, TIMEOUT)
            await paused_master_is_replaced(cluster, [cluster.luxid.process.pid], "LuxiD alone")
        finally:
            for paths in roots[1:]:
                stop_master_daemons(paths)
