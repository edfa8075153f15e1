"""Compatibility: Ganeti's own Python RAPI client (python3-ganeti-rapi) against our daemon.

The Debian package installs for the system python3, so the client runs in
a /usr/bin/python3 subprocess (scripts/install-rapi-client installs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import opcodes
from ganeti.config.bootstrap import grow, initial_config
from ganeti.rapi.testing import RapiStack

SYSTEM_PYTHON = "/usr/bin/python3"


def _client_available() -> bool:
    if not os.path.exists(SYSTEM_PYTHON):
        return False
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import ganeti.rapi.client"], cwd=tempfile.gettempdir(),
                           capture_output=True)
    return probe.returncode == 0


#: for the tests that run Ganeti's client (also test_rapi_cluster's)
needs_ganeti_client = pytest.mark.skipif(
    not _client_available(),
    reason="Ganeti's RAPI client is not importable by /usr/bin/python3 "
    "(install python3-ganeti-rapi: scripts/install-rapi-client)",
)
pytestmark = needs_ganeti_client

# Runs in /usr/bin/python3 with Ganeti's client; prints one JSON object of results.
SCRIPT = r'''
import json, sys
from ganeti.rapi import client as rapi

host, port, implemented = sys.argv[1], int(sys.argv[2]), set(json.loads(sys.argv[3]))
c = rapi.GanetiRapiClient(host, port=port, username="jack", password="abc123")
out = {}
def attempt(name, fn, *args, **kwargs):
    try:
        out[name] = {"ok": fn(*args, **kwargs)}
    except rapi.GanetiApiError as e:
        out[name] = {"error": str(e), "code": e.code}
out["version"] = c.GetVersion()
out["info"] = c.GetInfo()
out["features"] = c.GetFeatures()
out["nodes"] = c.GetNodes(bulk=True)
out["node_names"] = c.GetNodes()
out["instances"] = c.GetInstances(bulk=True)
out["groups"] = c.GetGroups(bulk=True)
inst = out["instances"][0]["name"]
attempt("create", c.CreateInstance, "create", "web1.test", "diskless", [], [{}], os="debootstrap+default",
        pnode="node1.test")
attempt("shutdown", c.ShutdownInstance, inst)
attempt("startup", c.StartupInstance, inst)
attempt("reboot", c.RebootInstance, inst, reboot_type="soft", dry_run=True)
attempt("instance_info", c.GetInstanceInfo, inst, static=True)
attempt("console", c.GetInstanceConsole, inst)
attempt("node_migrate", c.MigrateNode, "node1.test", mode="live", dry_run=True)
attempt("node_evacuate", c.EvacuateNode, "node1.test", mode="all", iallocator="hail", dry_run=True)
attempt("delete", c.DeleteInstance, inst)
job = c.AddNodeTags("node1.test", ["rack1", "ssd"], reason="compat")
out["tag_job"] = job
prev, serial, status = None, None, None
for _ in range(60):
    r = c.WaitForJobChange(job, ["status"], prev, serial)
    if r is None:
        continue
    prev = r["job_info"]
    if r["log_entries"]:
        serial = r["log_entries"][-1][0]
    status = prev[0]
    if status in ("success", "error", "canceled"):
        break
out["wait_status"] = status
out["job_status"] = c.GetJobStatus(job)
out["node_tags"] = c.GetNodeTags("node1.test")
out["jobs"] = c.GetJobs()
attempt("missing_instance", c.GetInstance, "no-such-instance.test")
# Ganeti's client sends the filter as both 'qfilter' and 'filter'
attempt("query", c.Query, "node", ["name"], qfilter=["=", "name", "node1.test"])
attempt("networks", c.GetNetworks)
try:
    rapi.GanetiRapiClient(host, port=port, username="jack", password="wrong").AddClusterTags(["x"])
except rapi.GanetiApiError as e:
    out["bad_password"] = e.code
print(json.dumps(out))
'''


@pytest_twisted.ensureDeferred
async def test_ganeti_rapi_client(root):
    config = grow(initial_config("cluster.test", "node1.test", "127.0.1.1"), nodes=1, instances=2)
    stack = RapiStack(root, config, "jack abc123 write\n")
    await stack.start(reactor)
    try:
        def run() -> dict:
            done = subprocess.run(
                [SYSTEM_PYTHON, "-c", SCRIPT, stack.host, str(stack.port), json.dumps(sorted(opcodes.OPCODES))],
                cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=120,
                env={"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()},
            )
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout.strip().splitlines()[-1])

        out = await threads.deferToThread(run)
    finally:
        stack.stop()
    assert out["version"] == 2
    assert out["info"]["name"] == "cluster.test"
    assert "instance-create-reqv1" in out["features"]
    assert {n["name"] for n in out["nodes"]} == {"node1.test", "node2.example.test"}
    assert "node1.test" in out["node_names"]
    assert len(out["instances"]) == 2 and all("disk_template" in i for i in out["instances"])
    assert [g["name"] for g in out["groups"]] == ["default"]
    # the operations are submitted: the client gets a job id (the jobs may fail until the LUs exist)
    for name, op_id in [("create", "OP_INSTANCE_CREATE"), ("shutdown", "OP_INSTANCE_SHUTDOWN"),
                        ("startup", "OP_INSTANCE_STARTUP"), ("delete", "OP_INSTANCE_REMOVE"),
                        ("reboot", "OP_INSTANCE_REBOOT"), ("instance_info", "OP_INSTANCE_QUERY_DATA"),
                        ("node_migrate", "OP_NODE_MIGRATE"), ("node_evacuate", "OP_NODE_EVACUATE")]:
        assert op_id in opcodes.OPCODES
        assert isinstance(out[name].get("ok"), int), (name, out[name])
    assert out["console"]["code"] == 503, out["console"]  # no node daemon: the instance is not seen running
    assert isinstance(out["tag_job"], int)
    assert out["wait_status"] == "success"
    assert out["job_status"]["status"] == "success"
    assert out["job_status"]["id"] == out["tag_job"]
    assert sorted(out["node_tags"]) == ["rack1", "ssd"]
    assert out["tag_job"] in [int(j) for j in out["jobs"]]
    assert out["missing_instance"]["code"] == 404
    assert [[cell[1] for cell in row] for row in out["query"]["ok"]["data"]] == [["node1.test"]], out["query"]
    assert out["networks"] == {"ok": []}, out["networks"]
    assert out["bad_password"] == 401
