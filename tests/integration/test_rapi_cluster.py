"""RAPI instance operations end to end on a real 2-node loopback cluster.

Two ganeti-noded (127.0.1.1 and 127.0.1.2, one free port, the fake
hypervisor, the shipped C{noop} OS, one shared sharedfile directory),
WConfD, LuxiD and ganeti-rapi.  Three clients drive it and the tests check
the job results and the state RAPI reads back afterwards:

  - Ganeti's own RAPI client (python3-ganeti-rapi, for the system
    python3), in a subprocess that runs one client call per line of input;
  - treq, our own HTTPS client (L{tests.integration.test_rapi.Client});
  - curl.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.paths import Paths
from ganeti.rapi.testing import RapiDaemon
from ganeti.rapi.users import ha1
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from tests.integration.test_rapi import Client
from tests.integration.test_rapi_client import SYSTEM_PYTHON, needs_ganeti_client

NODES = {"node1.test": "127.0.1.1", "node2.test": "127.0.1.2"}
N1, N2 = NODES
USERS = "jack abc123 write\nreader %s read\n" % ha1("reader", "pw")
JACK, READER = ("jack", "abc123"), ("reader", "pw")


async def started(root: Paths) -> tuple[LoopbackCluster, Client]:
    """The noded of each node, WConfD, LuxiD and ganeti-rapi of the master; a treq client."""
    cluster = LoopbackCluster(reactor, root, loopback_config(2), shared_file_storage=True, rapi_users=USERS,
                              prefix="gntr")
    await cluster.start()
    return cluster, Client(cluster)  # type: ignore[arg-type]


def create_body(name: str, node: str, template: str = "sharedfile", **extra: Any) -> dict[str, Any]:
    """A version 1 creation request: fake hypervisor, C{noop} OS, no name or IP check."""
    body = {"__version__": 1, "mode": "create", "name": name, "disk_template": template,
            "disks": [] if template == "diskless" else [{"size": 8}], "nics": [{}], "os": "noop",
            "hypervisor": "fake", "beparams": {"memory": 64}, "pnode": node, "name_check": False,
            "ip_check": False}
    body.update(extra)
    return body


# --- Ganeti's own client -------------------------------------------------------------------------

#: Runs in /usr/bin/python3: one JSON C{[method, args, kwargs]} per input
#: line, one JSON C{{"ok": result}} or C{{"error", "code"}} per output line.
BRIDGE = r'''
import json, sys
from ganeti.rapi import client as rapi
host, port, cafile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = rapi.GanetiRapiClient(host, port=port, username="jack", password="abc123",
                          curl_config_fn=rapi.GenericCurlConfig(cafile=cafile, timeout=60))
for line in sys.stdin:
    method, args, kwargs = json.loads(line)
    try:
        out = {"ok": getattr(c, method)(*args, **kwargs)}
    except rapi.GanetiApiError as e:
        out = {"error": str(e), "code": e.code}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
'''


class GanetiClient:
    """Ganeti's GanetiRapiClient in a system-python3 subprocess, one call at a time."""

    def __init__(self, rapi: RapiDaemon) -> None:
        self.process = subprocess.Popen(
            [SYSTEM_PYTHON, "-c", BRIDGE, rapi.host, str(rapi.port), rapi.paths.rapi_pem],
            cwd=tempfile.gettempdir(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()})
        self._lock = threading.Lock()

    def _call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        with self._lock:
            self.process.stdin.write(json.dumps([method, args, kwargs]) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        assert line, "the client process died (exit %s)" % self.process.poll()
        return json.loads(line)  # type: ignore[no-any-return]

    async def attempt(self, method: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return await threads.deferToThread(self._call, method, args, kwargs)

    async def ok(self, method: str, *args: Any, **kwargs: Any) -> Any:
        answer = await self.attempt(method, *args, **kwargs)
        assert "ok" in answer, (method, args, kwargs, answer)
        return answer["ok"]

    async def wait(self, job_id: Any) -> dict[str, Any]:
        """Follow a job with WaitForJobChange until it ends; its GetJobStatus."""
        prev, serial = None, None
        for _ in range(30):
            change = await self.ok("WaitForJobChange", job_id, ["status"], prev, serial)
            if change is None:
                continue
            prev = change["job_info"]
            if change["log_entries"]:
                serial = change["log_entries"][-1][0]
            if prev[0] in ("success", "error", "canceled"):
                status = await self.ok("GetJobStatus", job_id)
                assert status["id"] == int(job_id) and status["status"] == prev[0], status
                return status  # type: ignore[no-any-return]
        raise AssertionError("job %s did not end" % job_id)

    async def succeeds(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Submit through C{method}, wait; the opcodes' results of the successful job."""
        status = await self.wait(await self.ok(method, *args, **kwargs))
        assert status["status"] == "success", (method, status)
        return status["opresult"]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@needs_ganeti_client
@pytest_twisted.ensureDeferred
async def test_ganeti_client_instance_lifecycle(root):
    cluster, _ = await started(root)
    assert cluster.rapi is not None
    gc = GanetiClient(cluster.rapi)

    async def instance(name: str) -> dict[str, Any]:
        (row,) = [i for i in await gc.ok("GetInstances", bulk=True) if i["name"] == name]
        return row  # type: ignore[no-any-return]

    async def followed(result: dict[str, Any]) -> list[tuple[str, str]]:
        """Wait for the follow-up jobs of a node operation: C{[(status, OP_ID)]}."""
        out = []
        for ok, job_id in result["jobs"]:
            assert ok is True, result
            status = await gc.wait(job_id)
            out.append((status["status"], status["ops"][0]["OP_ID"]))
        return out

    try:
        info = await gc.ok("GetInfo")
        assert info["name"] == "cluster.test" and info["master"] == N1
        assert {"instance-create-reqv1", "node-evac-res1"} <= set(await gc.ok("GetFeatures"))
        nodes = await gc.ok("GetNodes", bulk=True)
        assert sorted(n["name"] for n in nodes) == [N1, N2]
        assert all(n["pinst_cnt"] == 0 and not n["offline"] for n in nodes), nodes

        # create: a sharedfile instance on node1, running
        assert await gc.succeeds("CreateInstance", "create", "web1.test", "sharedfile", [{"size": 8}], [{}],
                                 os="noop", pnode=N1, hypervisor="fake", beparams={"memory": 64},
                                 name_check=False, ip_check=False) == [[N1]]
        row = await instance("web1.test")
        assert (row["pnode"], row["status"], row["admin_state"], row["oper_state"]) == (N1, "running", "up", True)
        assert row["disk_template"] == "sharedfile" and row["disk.sizes"] == [8] and row["os"] == "noop"
        assert await cluster.running() == {N1: ["web1.test"], N2: []}

        await gc.succeeds("ShutdownInstance", "web1.test", timeout=5)
        row = await instance("web1.test")
        assert (row["status"], row["admin_state"], row["oper_state"]) == ("ADMIN_down", "down", False)
        assert await cluster.running() == {N1: [], N2: []}
        console = await gc.attempt("GetInstanceConsole", "web1.test")
        assert console["code"] == 503, console

        await gc.succeeds("StartupInstance", "web1.test")
        assert (await instance("web1.test"))["status"] == "running"
        await gc.succeeds("RebootInstance", "web1.test", reboot_type="soft")
        await gc.succeeds("RebootInstance", "web1.test", reboot_type="hard")
        assert (await instance("web1.test"))["status"] == "running"
        assert await cluster.running() == {N1: ["web1.test"], N2: []}

        changes = await gc.succeeds("ModifyInstance", "web1.test", beparams={"memory": 96, "vcpus": 2})
        assert ["be/maxmem", 96] in changes[0] and ["be/vcpus", 2] in changes[0], changes
        row = await instance("web1.test")
        assert row["beparams"]["maxmem"] == 96 and row["beparams"]["vcpus"] == 2
        assert row["custom_beparams"]["vcpus"] == 2

        console = await gc.ok("GetInstanceConsole", "web1.test")
        assert (console["instance"], console["kind"]) == ("web1.test", "msg"), console  # the fake hypervisor

        # rename: only a stopped instance
        await gc.succeeds("ShutdownInstance", "web1.test")
        assert await gc.succeeds("RenameInstance", "web1.test", "web2.test", ip_check=False,
                                 name_check=False) == ["web2.test"]
        names = await gc.ok("GetInstances")
        assert "web2.test" in names and "web1.test" not in names
        assert (await gc.attempt("GetInstance", "web1.test"))["code"] == 404
        await gc.succeeds("StartupInstance", "web2.test")

        # a live migration to the other node
        await gc.succeeds("MigrateInstance", "web2.test", mode="live", target_node=N2)
        row = await instance("web2.test")
        assert (row["pnode"], row["status"]) == (N2, "running")
        assert await cluster.running() == {N1: [], N2: ["web2.test"]}
        nodes = {n["name"]: n for n in await gc.ok("GetNodes", bulk=True)}
        assert nodes[N2]["pinst_list"] == ["web2.test"] and nodes[N1]["pinst_cnt"] == 0

        # back by a failover, then the node operations with their follow-up jobs
        await gc.succeeds("FailoverInstance", "web2.test", target_node=N1)
        assert (await instance("web2.test"))["pnode"] == N1
        (result,) = await gc.succeeds("MigrateNode", N1, mode="live", target_node=N2)
        assert await followed(result) == [("success", "OP_INSTANCE_MIGRATE")]
        assert (await instance("web2.test"))["pnode"] == N2
        (result,) = await gc.succeeds("EvacuateNode", N2, mode="all", remote_node=N1)
        assert await followed(result) == [("success", "OP_INSTANCE_MIGRATE")]
        assert (await instance("web2.test"))["pnode"] == N1
        assert await cluster.running() == {N1: ["web2.test"], N2: []}

        # reinstall (shutdown, reinstall, startup in one job) and the instance's details
        assert await gc.succeeds("ReinstallInstance", "web2.test") == [None, None, None]
        (details,) = await gc.succeeds("GetInstanceInfo", "web2.test", static=False)
        data = details["web2.test"]
        assert (data["pnode"], data["run_state"], data["os"]) == (N1, "up", "noop"), data
        assert data["be_actual"]["maxmem"] == 96

        await gc.succeeds("AddNodeTags", N1, ["rack1", "ssd"], reason="compat")
        assert sorted(await gc.ok("GetNodeTags", N1)) == ["rack1", "ssd"]

        await gc.succeeds("DeleteInstance", "web2.test")
        assert await gc.ok("GetInstances") == []
        assert (await gc.attempt("GetInstance", "web2.test"))["code"] == 404
        assert await cluster.running() == {N1: [], N2: []}
        assert os.listdir(cluster.roots[0].shared_file_storage_dir) == []
    finally:
        gc.close()
        await cluster.stop()


# --- treq ---------------------------------------------------------------------------------------

@pytest_twisted.ensureDeferred
async def test_treq_instance_operations(root):
    cluster, client = await started(root)

    async def job(method: str, path: str, body: Any = None) -> dict[str, Any]:
        """Submit as jack, wait; the job as C{GET /2/jobs/<id>} shows it."""
        job_id = await client.ok(method, path, body, user=JACK)
        assert isinstance(job_id, int), (path, job_id)
        await client.wait_job(job_id)
        return await client.ok("GET", "/2/jobs/%d" % job_id)  # type: ignore[no-any-return]

    async def succeeds(method: str, path: str, body: Any = None) -> list[Any]:
        done = await job(method, path, body)
        assert done["status"] == "success", (path, done)
        return done["opresult"]  # type: ignore[no-any-return]

    async def follow_ups(result: dict[str, Any]) -> dict[str, tuple[str, str]]:
        """The jobs an evacuation or node migration submitted: C{{instance: (status, OP_ID)}}."""
        out = {}
        for ok, job_id in result["jobs"]:
            assert ok is True, result
            await client.wait_job(job_id)
            done = await client.ok("GET", "/2/jobs/%d" % job_id)
            (op,) = done["ops"]
            out[op["instance_name"]] = (done["status"], op["OP_ID"])
        return out

    async def instance(name: str) -> dict[str, Any]:
        return await client.ok("GET", "/2/instances/" + name)  # type: ignore[no-any-return]

    async def node_uuid(name: str) -> str:
        return (await client.ok("GET", "/2/nodes/" + name))["uuid"]  # type: ignore[no-any-return]

    try:
        assert await succeeds("POST", "/2/instances", create_body("a1.test", N1)) == [[N1]]
        assert await succeeds("POST", "/2/instances", create_body("b1.test", N1, "diskless")) == [[N1]]
        row = await instance("a1.test")
        assert (row["pnode"], row["status"], row["disk_template"]) == (N1, "running", "sharedfile")
        listed = await client.ok("GET", "/2/instances")
        assert sorted(listed, key=lambda i: i["id"]) == [{"id": "a1.test", "uri": "/2/instances/a1.test"},
                                                         {"id": "b1.test", "uri": "/2/instances/b1.test"}]

        # a dry run checks and creates nothing; its result is the node list (Ganeti: uuids)
        (dry,) = await succeeds("POST", "/2/instances?dry-run=1", create_body("dry.test", N2))
        assert dry == [await node_uuid(N2)], dry
        assert (await client.request("GET", "/2/instances/dry.test"))[0] == 404

        await succeeds("PUT", "/2/instances/a1.test/shutdown", {"timeout": 5})
        assert (await instance("a1.test"))["status"] == "ADMIN_down"
        await succeeds("PUT", "/2/instances/a1.test/startup")
        assert (await instance("a1.test"))["status"] == "running"
        await succeeds("POST", "/2/instances/a1.test/reboot?type=soft")
        assert await cluster.running() == {N1: ["a1.test", "b1.test"], N2: []}

        # the instance's own moves: a migration and a failover to node2
        await succeeds("PUT", "/2/instances/a1.test/migrate", {"mode": "live", "target_node": N2})
        await succeeds("PUT", "/2/instances/b1.test/failover", {"target_node": N2})
        assert [(await instance(name))["pnode"] for name in ("a1.test", "b1.test")] == [N2, N2]
        assert await cluster.running() == {N1: [], N2: ["a1.test", "b1.test"]}

        changes = await succeeds("PUT", "/2/instances/a1.test/modify", {"custom_beparams": {"memory": 80}})
        assert ["be/maxmem", 80] in changes[0], changes
        assert (await instance("a1.test"))["beparams"]["maxmem"] == 80

        # reinstall, the legacy query form without startup: stopped afterwards
        done = await job("POST", "/2/instances/a1.test/reinstall?nostartup=1")
        assert (done["status"], [op["OP_ID"] for op in done["ops"]]) == (
            "success", ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL"]), (done["opresult"], done["oplog"])
        assert (await instance("a1.test"))["status"] == "ADMIN_down"
        await succeeds("PUT", "/2/instances/a1.test/startup")
        # a diskless one cannot be reinstalled (as in Ganeti): the shutdown ran, the job failed at op 2
        done = await job("POST", "/2/instances/b1.test/reinstall", {"start": True})
        assert done["status"] == "error" and done["opstatus"] == ["success", "error", "error"], done
        assert done["opresult"][:2] == [None, ["OpPrereqError", ["Instance 'b1.test' has no disks", "wrong_input"]]]
        assert (await instance("b1.test"))["status"] == "ADMIN_down"
        await succeeds("PUT", "/2/instances/b1.test/startup")
        (details,) = await succeeds("GET", "/2/instances/b1.test/info?static=1")
        assert (details["b1.test"]["pnode"], details["b1.test"]["config_state"]) == (N2, "up"), details

        # the instance's tags
        await succeeds("PUT", "/2/instances/a1.test/tags?tag=web&tag=prod")
        assert sorted(await client.ok("GET", "/2/instances/a1.test/tags")) == ["prod", "web"]
        await succeeds("DELETE", "/2/instances/a1.test/tags?tag=prod")
        assert (await instance("a1.test"))["tags"] == ["web"]

        # refused by the LU: renaming a running instance, removing an unknown one
        done = await job("PUT", "/2/instances/a1.test/rename", {"new_name": "a2.test", "name_check": False,
                                                                 "ip_check": False})
        assert done["status"] == "error" and done["opresult"][0][0] == "OpPrereqError", done
        assert (await instance("a1.test"))["name"] == "a1.test"
        done = await job("DELETE", "/2/instances/nosuch.test")
        assert done["status"] == "error" and done["opresult"][0][1][1] == "unknown_entity", done

        # methods Ganeti's resources do not have: 501, no job
        for method, path in [("POST", "/2/instances/a1.test/migrate"), ("POST", "/2/instances/a1.test/failover"),
                             ("PUT", "/2/instances/a1.test/reboot"), ("PUT", "/2/nodes/%s/evacuate" % N1)]:
            code, _, err = await client.request(method, path, {}, user=JACK)
            assert (code, err["code"]) == (501, 501), (method, path, err)

        # node operations answer follow-up jobs, which move the instances
        (result,) = await succeeds("POST", "/2/nodes/%s/evacuate" % N2, {"mode": "all", "remote_node": N1})
        assert await follow_ups(result) == {"a1.test": ("success", "OP_INSTANCE_MIGRATE"),
                                            "b1.test": ("success", "OP_INSTANCE_MIGRATE")}
        assert [(await instance(name))["pnode"] for name in ("a1.test", "b1.test")] == [N1, N1]
        (result,) = await succeeds("POST", "/2/nodes/%s/migrate" % N1, {"mode": "live"})
        assert await follow_ups(result) == {"a1.test": ("success", "OP_INSTANCE_MIGRATE"),
                                            "b1.test": ("success", "OP_INSTANCE_MIGRATE")}
        assert [(await instance(name))["pnode"] for name in ("a1.test", "b1.test")] == [N2, N2]
        assert await cluster.running() == {N1: [], N2: ["a1.test", "b1.test"]}
        nodes = {n["name"]: n for n in await client.ok("GET", "/2/nodes?bulk=1")}
        assert (nodes[N1]["pinst_cnt"], sorted(nodes[N2]["pinst_list"])) == (0, ["a1.test", "b1.test"])

        # a creation on a node that does not exist: the job fails with Ganeti's error shape
        # ([class name, [message, error code]]; ECODE_NOENT as in ExpandNodeUuidAndName)
        done = await job("POST", "/2/instances", create_body("x.test", "nosuchnode.test"))
        assert done["status"] == "error" and done["opstatus"] == ["error"], done
        ((kind, (message, code)),) = done["opresult"]
        assert (kind, code) == ("OpPrereqError", "unknown_entity") and "nosuchnode.test" in message, done
        assert (await client.request("GET", "/2/instances/x.test"))[0] == 404

        # authentication and authorisation: nothing is submitted
        jobs_before = await client.ok("GET", "/2/jobs")
        code, headers, err = await client.request("PUT", "/2/instances/a1.test/shutdown", {},
                                                  user=("jack", "wrong"))
        assert (code, err["code"]) == (401, 401)
        assert headers.getRawHeaders("www-authenticate") == ['Basic realm="Ganeti Remote API"']
        code, _, err = await client.request("DELETE", "/2/instances/a1.test", user=READER)
        assert (code, err["code"]) == (403, 403) and "write" in err["message"], err
        assert await client.ok("GET", "/2/jobs") == jobs_before
        assert (await instance("a1.test"))["status"] == "running"

        await succeeds("DELETE", "/2/instances/a1.test")
        await succeeds("DELETE", "/2/instances/b1.test")
        assert await client.ok("GET", "/2/instances") == []
        assert await cluster.running() == {N1: [], N2: []}
    finally:
        await client.close()
        await cluster.stop()


# --- curl ---------------------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest_twisted.ensureDeferred
async def test_curl_instance_operations(root):
    cluster, client = await started(root)
    assert cluster.rapi is not None
    host, port = cluster.rapi.host, cluster.rapi.port
    base = "https://cluster.test:%d" % port

    def curl(*args: str) -> tuple[int, Any]:
        out = subprocess.run(["curl", "-sS", "--cacert", root.rapi_pem, "--resolve",
                              "cluster.test:%d:%s" % (port, host), "-w", "\n%{http_code}", *args],
                             capture_output=True, text=True, check=True, timeout=30).stdout
        body, _, code = out.rpartition("\n")
        return int(code), json.loads(body)

    async def run(method: str, path: str, body: Any = None, user: str = "jack:abc123") -> tuple[int, Any]:
        args = ["-u", user, "-X", method, base + path]
        if body is not None:
            args += ["-H", "Content-Type: application/json", "--data", json.dumps(body)]
        return await threads.deferToThread(curl, *args)

    async def succeeds(method: str, path: str, body: Any = None) -> Any:
        code, job_id = await run(method, path, body)
        assert code == 200 and isinstance(job_id, int), (path, code, job_id)
        assert await client.wait_job(job_id) == "success", await client.ok("GET", "/2/jobs/%d" % job_id)
        return (await client.ok("GET", "/2/jobs/%d" % job_id))["opresult"]

    async def get(path: str) -> Any:
        code, answer = await threads.deferToThread(curl, base + path)
        assert code == 200, (path, answer)
        return answer

    try:
        assert await succeeds("POST", "/2/instances", create_body("c1.test", N2, "diskless")) == [[N2]]
        row = await get("/2/instances/c1.test")
        assert (row["pnode"], row["status"]) == (N2, "running")
        await succeeds("PUT", "/2/instances/c1.test/shutdown", {})
        assert (await get("/2/instances/c1.test"))["status"] == "ADMIN_down"
        await succeeds("PUT", "/2/instances/c1.test/startup")
        await succeeds("POST", "/2/instances/c1.test/reboot")
        await succeeds("PUT", "/2/instances/c1.test/failover", {"target_node": N1})
        await succeeds("PUT", "/2/instances/c1.test/migrate", {"target_node": N2})
        assert (await get("/2/instances/c1.test"))["pnode"] == N2
        await succeeds("PUT", "/2/instances/c1.test/modify", {"beparams": {"vcpus": 2}})
        assert (await get("/2/instances/c1.test?bulk=1"))["beparams"]["vcpus"] == 2
        assert await cluster.running() == {N1: [], N2: ["c1.test"]}
        (result,) = await succeeds("POST", "/2/nodes/%s/evacuate" % N2, {"mode": "primary-only", "remote_node": N1})
        ((ok, follow_up),) = result["jobs"]
        assert ok is True and await client.wait_job(follow_up) == "success"
        (result,) = await succeeds("POST", "/2/nodes/%s/migrate?live=1" % N1)
        ((ok, follow_up),) = result["jobs"]
        assert ok is True and await client.wait_job(follow_up) == "success"
        assert (await get("/2/instances/c1.test"))["pnode"] == N2
        code, err = await run("PUT", "/2/instances/c1.test/shutdown", {}, user="jack:wrong")
        assert (code, err["code"]) == (401, 401)
        code, err = await run("PUT", "/2/instances/c1.test/shutdown", {}, user="reader:pw")
        assert (code, err["code"]) == (403, 403)
        await succeeds("DELETE", "/2/instances/c1.test")
        assert await get("/2/instances") == []
        assert await cluster.running() == {N1: [], N2: []}
    finally:
        await client.close()
        await cluster.stop()
