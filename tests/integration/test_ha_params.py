"""The HA cluster parameters on a real 3-node loopback cluster: gnt-cluster
modify (and RAPI PUT /2/modify) changes them, WConfD writes ha.data and
every node gets the new serial (a node that was down, once it is back);
LuxiD uses the liveness timeout without a restart (a SIGSTOPped NodeD
becomes unreachable after the new timeout, not the old one); gnt-cluster
info and RAPI /2/info show them; bad values are refused and change nothing.
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

from ganeti.ha import params as ha_params
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from tests.integration.test_liveness import liveness, rapi_get


def ha_of(cluster: LoopbackCluster) -> list[tuple[float, int]]:
    """C{(liveness timeout, serial)} of each node's ha.data."""
    return [(p.liveness_timeout, p.serial_no) for p in map(ha_params.read, cluster.roots)]


def rapi_put(cluster: LoopbackCluster, path: str, body: dict) -> object:
    context = ssl.create_default_context(cadata=cluster.cert_pem.decode())
    context.check_hostname = False
    request = urllib.request.Request(cluster.url + path, data=json.dumps(body).encode(), method="PUT")
    request.add_header("Authorization", "Basic " + base64.b64encode(b"admin:secret").decode())
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, context=context, timeout=30) as answer:
        return json.loads(answer.read())


def luxid_log(cluster: LoopbackCluster) -> str:
    with open(cluster.luxid.log_path, errors="replace") as handle:
        return handle.read()


@pytest_twisted.ensureDeferred
async def test_liveness_timeout_is_a_cluster_parameter(root):
    users = "admin {CLEARTEXT}secret write\n"
    async with LoopbackCluster(reactor, root, loopback_config(3), rapi_users=users, prefix="gnth") as cluster:
        await cluster.until(lambda: set(liveness(cluster).values()) == {"up"}, timeout=30)
        assert ha_of(cluster) == [(2.0, 0)] * 3

        ok(cluster.master, "gnt-cluster", "modify", "--liveness-timeout", "6", "--auto-failover", "yes")
        await cluster.until(lambda: ha_of(cluster) == [(6.0, 1)] * 3, timeout=30)
        assert all(p.auto_failover for p in map(ha_params.read, cluster.roots))

        # bad values: a clear error naming the parameter; nothing changed, not even the other options
        for args, named in ((["--liveness-timeout", "0.1"], "liveness_timeout"),
                            (["--failover-timeout", "5", "--max-running-jobs", "3"], "failover_timeout")):
            refused = gnt(cluster.master, "gnt-cluster", "modify", *args)
            assert refused.returncode != 0 and named in refused.stdout + refused.stderr, refused
        assert ha_of(cluster) == [(6.0, 1)] * 3
        assert "Maximum running jobs: 3\n" not in ok(cluster.master, "gnt-cluster", "info")

        info = ok(cluster.master, "gnt-cluster", "info")
        assert "High availability:\n  Liveness timeout: 6s\n  Automatic failover: yes\n" \
               "  Failover timeout: 10s\n  Master epoch (this node): 0\n  Last failover: none recorded\n" in info, info
        body = await threads.deferToThread(rapi_get, cluster, "/2/info")
        assert (body["ha_liveness_timeout"], body["ha_auto_failover"], body["ha_failover_timeout"]) == (6.0, True, 10.0)

        # RAPI PUT /2/modify carries them too
        await threads.deferToThread(rapi_put, cluster, "/2/modify", {"failover_timeout": 15})
        await cluster.until(lambda: [p.failover_timeout for p in map(ha_params.read, cluster.roots)] == [15.0] * 3,
                            timeout=30)
        assert ha_of(cluster) == [(6.0, 2)] * 3

        # LuxiD took the new timeout without a restart: a silent node stays up past the old 2 s
        await cluster.until(lambda: "liveness timeout now 6.0 s" in luxid_log(cluster), timeout=15)
        node3 = cluster.nodeds[2]
        os.kill(node3.process.pid, signal.SIGSTOP)
        start = time.monotonic()
        try:
            await cluster.until(lambda: time.monotonic() - start > 4, timeout=10)
            assert liveness(cluster)["node3.test"] == "up"
            await cluster.until(lambda: liveness(cluster).get("node3.test") == "unreachable", timeout=30)
            assert time.monotonic() - start > 4  # its last beat was at most 1 s before the stop
        finally:
            os.kill(node3.process.pid, signal.SIGCONT)
        await cluster.until(lambda: liveness(cluster).get("node3.test") == "up", timeout=30)

        # a node that was down when it changed gets it once it is back
        noded3 = cluster.nodeds[2]
        noded3.stop()
        ok(cluster.master, "gnt-cluster", "modify", "--liveness-timeout", "3")
        assert ha_of(cluster)[:2] == [(3.0, 3)] * 2 and ha_of(cluster)[2] == (6.0, 2)
        await cluster.start_daemon(noded3)
        await cluster.until(lambda: ha_of(cluster) == [(3.0, 3)] * 3, timeout=30)
