"""RAPI on every master candidate: a candidate forwards to the master's RAPI,
credentials included, and keeps doing so across a master failover.  Driven
with Ganeti 3.0's own RAPI client (skipped without it).

A 3-node loopback cluster: node1 master, node2 and node3 candidates; each
node runs ganeti-rapi on its own address and the same (free) port.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import daemons
from ganeti.rapi.testing import RapiDaemon
from ganeti.testing.cluster import LoopbackCluster
from tests.integration.test_failover import cluster_config, gnt_cluster, master_of, ready_cluster, stop_master_daemons
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


@pytest_twisted.ensureDeferred
async def test_any_candidate_serves_rapi_across_a_failover(root):
    users = "jack {CLEARTEXT}abc123 write\n"
    async with LoopbackCluster(reactor, root, cluster_config(), rapi_users=users, prefix="gntr") as cluster:
        roots = cluster.roots
        rapis = []
        try:
            await ready_cluster(cluster)
            await cluster.until(lambda: all(os.path.exists(p.rapi_pem) for p in roots), timeout=30)
            for paths in roots[1:]:  # what the master's wconfd does not push: the users file
                os.makedirs(os.path.dirname(paths.rapi_users), exist_ok=True)
                with open(paths.rapi_users, "w") as handle:
                    handle.write(users)
            cluster.rapi.stop()  # the master's RAPI moves to the master's own address
            port = daemons.free_port("127.0.1.1")
            rapis = [RapiDaemon(paths, address, port) for paths, address in zip(roots, cluster.nodes.values())]
            for rapi in rapis:
                await cluster.start_daemon(rapi)

            seen = await threads.deferToThread(ganeti_client, "127.0.1.3", port)  # a candidate
            assert seen["info"] == "node1.test" and seen["job_status"] == "success"
            assert "via-127.0.1.3" in seen["tags"] and seen["bad_password"] == 401
            assert seen["nodes"] == ["node1.test", "node2.test", "node3.test"]

            done = gnt_cluster(cluster, roots[1], "master-failover")
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert master_of(roots[0]) == "node2.test"
            # the old master's RAPI stayed up and now forwards to node2
            seen = await threads.deferToThread(ganeti_client, "127.0.1.1", port)
            assert seen["info"] == "node2.test" and seen["job_status"] == "success"
            assert {"via-127.0.1.1", "via-127.0.1.3"} <= set(seen["tags"])
        finally:
            for rapi in rapis:
                rapi.stop()
            for paths in roots[1:]:
                stop_master_daemons(paths)
