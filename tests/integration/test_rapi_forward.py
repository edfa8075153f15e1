"""RAPI on every master candidate, following the node's role: promoting a
node (gnt-node modify --master-candidate yes) starts its RAPI, demoting it
stops it; a candidate forwards to the master's RAPI, credentials included,
and keeps doing so across a master failover, after which the new master's
RAPI serves locally.  Driven with Ganeti 3.0's own RAPI client (skipped
without it).

A 3-node loopback cluster: node1 master, node2 candidate, node3 a plain
node until promoted; every RAPI listens on its node's address and the same
free port (C{$GANETI_RAPI_PORT}, inherited by the nodes' NodeD).  The
users file is the master's, which its WConfD gives every node.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import attrs
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons
from ganeti.paths import Paths
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, serial_of
from tests.integration.test_failover import gnt_cluster, master_of, stop_master_daemons, with_identities
from tests.integration.test_rapi_client import SYSTEM_PYTHON, needs_ganeti_client

pytestmark = needs_ganeti_client

SCRIPT = r'''
import json, sys
from ganeti.rapi import client as rapi

host, port = sys.argv[1], int(sys.argv[2])
c = rapi.GanetiRapiClient(host, port=port, username="jack", password="abc123")
out = {"info": c.GetInfo()["master"], "nodes": sorted(c.GetNodes())}
job = c.AddClusterTags(["via-%s" % host])
for _ in range(100):
    r = c.WaitForJobChange(job, ["status"], None, None)
    if r and r["job_info"][0] in ("success", "error", "canceled"):
        break
out["job_status"] = c.GetJobStatus(job)["status"]
out["tags"] = c.GetClusterTags()
try:
    rapi.GanetiRapiClient(host, port=port, username="jack", password="wrong").AddClusterTags(["x"])
except rapi.GanetiApiError as e:
    out["bad_password"] = e.code
print(json.dumps(out))
'''


def ganeti_client(host: str, port: int) -> dict:
    done = subprocess.run([SYSTEM_PYTHON, "-c", SCRIPT, host, str(port)], capture_output=True, text=True,
                          timeout=120, cwd=tempfile.gettempdir())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def rapi_up(paths: Paths, address: str, port: int) -> bool:
    """RAPI runs on this node (holds its pid file) and accepts connections."""
    return daemons.running_pid(paths, daemons.BY_NAME["ganeti-rapi"]) is not None and daemons.accepts_tcp(address,
                                                                                                        port)


def rapi_down(paths: Paths, address: str, port: int) -> bool:
    return daemons.running_pid(paths, daemons.BY_NAME["ganeti-rapi"]) is None and not daemons.accepts_tcp(address,
                                                                                                        port)


def modify_node(paths: Paths, *args: str) -> None:
    done = gnt(paths, "gnt-node", "modify", *args)
    assert done.returncode == 0, (done.stdout, done.stderr)


@pytest_twisted.ensureDeferred
async def test_rapi_follows_roles_and_serves_from_any_candidate_across_a_failover(root, monkeypatch):
    users = "jack {CLEARTEXT}abc123 write\n"
    port = daemons.free_port("127.0.1.1")
    monkeypatch.setenv(daemons.RAPI_PORT_ENV, str(port))  # every NodeD (and what it starts) inherits it
    config = loopback_config(3, candidate_pool_size=2, candidates=["node2.test"])
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, max_running_jobs=1))
    async with LoopbackCluster(reactor, root, config, rapi_users=users, prefix="gntr") as cluster:
        roots = cluster.roots
        n1, n2, n3 = cluster.nodes.values()
        try:
            with_identities(cluster)
            # the master's WConfD gives every node RAPI's certificate and users file
            await cluster.until(lambda: serial_of(roots[1]) and all(master_of(p) == "node1.test" for p in roots)
                                and all(os.path.exists(p.rapi_pem) and os.path.exists(p.rapi_users) for p in roots),
                                timeout=30)
            for paths in roots[1:]:
                with open(paths.rapi_users) as handle:
                    assert handle.read() == users
            cluster.rapi.stop()  # the master's and node2's RAPI as ganeti-daemons starts them
            for paths in roots[:2]:
                assert daemons.start(paths, ["ganeti-rapi"], out=lambda _line: None) == 0
            assert rapi_down(roots[2], n3, port), "node3 is no candidate: no RAPI"

            # a candidate forwards to the master
            seen = await threads.deferToThread(ganeti_client, n2, port)
            assert seen["info"] == "node1.test" and seen["job_status"] == "success"
            assert "via-%s" % n2 in seen["tags"] and seen["bad_password"] == 401
            assert seen["nodes"] == ["node1.test", "node2.test", "node3.test"]

            # promoting node3 starts its RAPI, which forwards too
            modify_node(cluster.master, "--master-candidate", "yes", "node3.test")
            await cluster.until(lambda: rapi_up(roots[2], n3, port), timeout=30)
            seen = await threads.deferToThread(ganeti_client, n3, port)
            assert seen["info"] == "node1.test" and seen["job_status"] == "success"

            # the old master's RAPI, down before the failover, runs again after it
            daemons.stop(roots[0], ["ganeti-rapi"], out=lambda _line: None)
            done = gnt_cluster(cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert master_of(roots[0]) == "node2.test"
            # the old master steps down in the background once the new one accepts jobs
            await cluster.until(lambda: rapi_up(roots[0], n1, port), timeout=30)
            # node2's RAPI serves locally now; the old master's forwards to node2
            for address in (n2, n1):
                seen = await threads.deferToThread(ganeti_client, address, port)
                assert seen["info"] == "node2.test" and seen["job_status"] == "success", (address, seen)
                assert seen["bad_password"] == 401
            assert {"via-%s" % n1, "via-%s" % n2, "via-%s" % n3} <= set(seen["tags"])

            # demoting node3 (on the new master) stops its RAPI; draining node1 stops the old master's
            modify_node(roots[1], "--master-candidate", "no", "node3.test")
            await cluster.until(lambda: rapi_down(roots[2], n3, port), timeout=30)
            modify_node(roots[1], "--drained", "yes", "--auto-promote", "node1.test")
            await cluster.until(lambda: rapi_down(roots[0], n1, port), timeout=30)
            assert rapi_up(roots[1], n2, port), "the master's RAPI is untouched"
            await cluster.until(lambda: rapi_up(roots[2], n3, port), timeout=30)  # node3 was auto-promoted
        finally:
            for paths in roots:
                stop_master_daemons(paths)
