"""ganeti-rapi under twistd with WConfD and LuxiD: HTTPS, treq and curl."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from typing import Any

import pytest
import pytest_twisted
import treq
from twisted.internet import reactor, threads
from twisted.internet.ssl import Certificate, optionsForClientTLS
from twisted.web.client import Agent, HTTPConnectionPool
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from ganeti import opcodes
from ganeti.config.bootstrap import grow, initial_config
from ganeti.rapi import openapi
from ganeti.rapi.testing import RapiStack
from ganeti.rapi.users import ha1

USERS = "jack abc123 write\nreader %s read\n" % ha1("reader", "pw")
JACK = ("jack", "abc123")
FINAL = ("success", "error", "canceled")


@implementer(IPolicyForHTTPS)
class TrustClusterCert:
    """Verify the server against the cluster's own rapi.pem (CN cluster.test)."""

    def __init__(self, cert_pem: bytes) -> None:
        self.cert = Certificate.loadPEM(cert_pem)

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        return optionsForClientTLS("cluster.test", trustRoot=self.cert)


class Client:
    def __init__(self, stack: RapiStack) -> None:
        self.stack = stack
        self.pool = HTTPConnectionPool(reactor, persistent=True)
        self.http = treq.client.HTTPClient(Agent(reactor, TrustClusterCert(stack.cert_pem), pool=self.pool))

    async def request(self, method: str, path: str, body: Any = None, user: tuple[str, str] | None = None,
                      **kw: Any) -> tuple[int, Any, Any]:
        headers = {"Content-Type": "application/json"}
        if user:
            headers["Authorization"] = "Basic " + base64.b64encode(("%s:%s" % user).encode()).decode()
        data = None if body is None else json.dumps(body).encode()
        response = await self.http.request(method, self.stack.url + path, data=data, headers=headers, **kw)
        content = await response.content()
        return response.code, response.headers, json.loads(content)

    async def ok(self, method: str, path: str, body: Any = None, user: tuple[str, str] | None = None) -> Any:
        code, _, result = await self.request(method, path, body, user)
        assert code == 200, (path, code, result)
        return result

    async def wait_job(self, job_id: int) -> str:
        prev, serial = None, None
        for _ in range(60):
            answer = await self.ok("GET", "/2/jobs/%d/wait" % job_id, {
                "fields": ["status"], "previous_job_info": prev, "previous_log_serial": serial}, user=JACK)
            if answer is None:
                continue
            prev = answer["job_info"]
            if answer["log_entries"]:
                serial = answer["log_entries"][-1][0]
            if prev[0] in FINAL:
                return prev[0]
        raise AssertionError("job %d did not finish" % job_id)

    async def close(self) -> None:
        await self.pool.closeCachedConnections()


@pytest.fixture
def stack_config():
    return grow(initial_config("cluster.test", "node1.test", "127.0.1.1"), nodes=2, instances=3)


async def started(root, config) -> tuple[RapiStack, Client]:
    stack = RapiStack(root, config, USERS)
    await stack.start(reactor)
    return stack, Client(stack)


@pytest_twisted.ensureDeferred
async def test_reads_writes_and_openapi(root, stack_config):
    stack, client = await started(root, stack_config)
    try:
        doc = await client.ok("GET", "/openapi.json")
        info = await client.ok("GET", "/2/info")
        assert info["name"] == "cluster.test" and info["master"] == "node1.test"
        instances = await client.ok("GET", "/2/instances?bulk=1")
        assert len(instances) == 3 and all("admin_state" in i for i in instances)
        name = instances[0]["name"]
        nodes = await client.ok("GET", "/2/nodes")
        assert {"id": "node1.test", "uri": "/2/nodes/node1.test"} in nodes
        checked = [
            ("/", "/"), ("/version", "/version"), ("/2/info", "/2/info"), ("/2/features", "/2/features"),
            ("/2/nodes", "/2/nodes"), ("/2/nodes", "/2/nodes?bulk=1"), ("/2/nodes/{name}", "/2/nodes/node1.test"),
            ("/2/nodes/{name}/role", "/2/nodes/node1.test/role"), ("/2/groups", "/2/groups?bulk=1"),
            ("/2/groups/{name}", "/2/groups/default"), ("/2/instances", "/2/instances"),
            ("/2/instances", "/2/instances?bulk=1"), ("/2/instances/{name}", "/2/instances/" + name),
            ("/2/instances/{name}/tags", "/2/instances/%s/tags" % name), ("/2/tags", "/2/tags"),
            ("/2/jobs", "/2/jobs"), ("/2/query/node/fields", "/2/query/node/fields"),
        ]
        for template, path in checked:
            template = "/2/query/{name}/fields" if template.startswith("/2/query") else template
            schema = doc["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            result = await client.ok("GET", path)
            assert openapi.check(schema, result) == [], (path, result)
        assert await client.ok("GET", "/2/nodes/node1.test/role") == "master"
        query = await client.ok("GET", "/2/query/instance?fields=name,status", user=("reader", "pw"))
        assert [row[0][1] for row in query["data"]] == sorted(i["name"] for i in instances)

        # writes answer a job id; the job runs; the result is visible
        job_id = await client.ok("PUT", "/2/nodes/node1.test/tags?tag=rack1&tag=ssd&reason=test", user=JACK)
        assert isinstance(job_id, int)
        assert await client.wait_job(job_id) == "success"
        assert sorted(await client.ok("GET", "/2/nodes/node1.test/tags")) == ["rack1", "ssd"]
        job = await client.ok("GET", "/2/jobs/%d" % job_id)
        assert openapi.check(doc["paths"]["/2/jobs/{job_id}"]["get"]["responses"]["200"]["content"]
                             ["application/json"]["schema"], job) == []
        assert job["status"] == "success" and job["ops"][0]["OP_ID"] == "OP_TAGS_SET"
        assert job["ops"][0]["reason"][0][:2] == ["gnt:user", "test"]
        job_id = await client.ok("POST", "/2/groups", {"name": "group2"}, user=JACK)
        assert await client.wait_job(job_id) == "success"
        assert (await client.ok("GET", "/2/groups/group2"))["name"] == "group2"
        job_id = await client.ok("PUT", "/2/groups/group2/rename", {"new_name": "group3"}, user=JACK)
        assert await client.wait_job(job_id) == "success"
        job_id = await client.ok("DELETE", "/2/groups/group3", user=JACK)
        assert await client.wait_job(job_id) == "success"
        code, _, _ = await client.request("GET", "/2/groups/group3")
        assert code == 404

        # instance operations submit their job (whether it succeeds is the LUs' business)
        for method, path, body, op_ids in [
            ("PUT", "/2/instances/%s/startup?dry-run=1" % name, None, ["OP_INSTANCE_STARTUP"]),
            ("PUT", "/2/instances/%s/shutdown?dry-run=1" % name, {"timeout": 5}, ["OP_INSTANCE_SHUTDOWN"]),
            ("POST", "/2/instances/%s/reinstall?nostartup=1&dry-run=1" % name, None,
             ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL"]),
            ("POST", "/2/instances?dry-run=1", {"__version__": 1, "name": "new1.test", "mode": "create",
                                                "disk_template": "diskless", "disks": [], "nics": [],
                                                "os": "noop", "pnode": "node1.test"}, ["OP_INSTANCE_CREATE"]),
        ]:
            job_id = await client.ok(method, path, body, user=JACK)
            assert isinstance(job_id, int), (path, job_id)
            job = await client.ok("GET", "/2/jobs/%d" % job_id)
            assert [op["OP_ID"] for op in job["ops"]] == op_ids, (path, job)
            assert all(op["dry_run"] is True for op in job["ops"]), job
            assert any(r[0].startswith("gnt:library:rlib2:r_2_instances") for r in job["ops"][0]["reason"]), job

        # bad input and missing opcodes submit nothing
        jobs_before = await client.ok("GET", "/2/jobs")
        missing = [] if "OP_INSTANCE_GROW_DISK" in opcodes.OPCODES else [
            ("POST", "/2/instances/%s/disk/0/grow" % name, {"amount": 1}, JACK, 501)]
        for method, path, body, user, expected in missing + [
            ("POST", "/2/groups", {"name": "g", "bogus": 1}, JACK, 400),
            ("POST", "/2/instances", {"__version__": 1, "name": "x", "mode": "create"}, JACK, 400),
            ("POST", "/2/instances", {"__version__": 0, "name": "x"}, JACK, 400),
            ("PUT", "/2/instances/%s/rename" % name, {}, JACK, 400),
            ("PUT", "/2/tags?tag=x", None, ("reader", "pw"), 403),
            ("PUT", "/2/tags?tag=x", None, ("jack", "nope"), 401),
            ("GET", "/2/instances/%2e%2e/tags", None, None, 404),
            ("GET", "/2/jobs/999999", None, None, 404),
        ]:
            code, headers, result = await client.request(method, path, body, user)
            assert (code, result["code"]) == (expected, expected), (path, result)
            if code == 401:
                assert headers.getRawHeaders("www-authenticate") == ['Basic realm="Ganeti Remote API"']
        code, _, result = await client.request("POST", "/2/groups", {"name": "g" * 2_000_000}, JACK)
        assert code == 413
        assert await client.ok("GET", "/2/jobs") == jobs_before
    finally:
        await client.close()
        stack.stop()
    with open(stack.rapi.log_path) as handle:
        log = handle.read()
    assert "jack PUT /2/nodes/node1.test/tags?tag=rack1&tag=ssd&reason=test 200" in log
    assert "- GET /2/info 200" in log


@pytest_twisted.ensureDeferred
async def test_luxid_down_gives_502_then_recovers(root, stack_config):
    stack, client = await started(root, stack_config)
    try:
        assert (await client.ok("GET", "/2/info"))["name"] == "cluster.test"
        stack.luxid.stop()
        code, _, result = await client.request("GET", "/2/info")
        assert code == 502 and "LuxiD" in result["message"], result
        code, _, result = await client.request("PUT", "/2/tags?tag=a", user=JACK)
        assert code == 502
        stack.luxid.start()
        await stack.luxid.ready(reactor)
        assert (await client.ok("GET", "/2/info"))["name"] == "cluster.test"
    finally:
        await client.close()
        stack.stop()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
@pytest_twisted.ensureDeferred
async def test_curl(root, stack_config):
    stack, client = await started(root, stack_config)
    try:
        def curl(*args: str) -> tuple[int, Any]:
            out = subprocess.run(["curl", "-sS", "--cacert", root.rapi_pem, "--resolve",
                                  "cluster.test:%d:127.0.0.1" % stack.port, "-w", "\n%{http_code}", *args],
                                 capture_output=True, text=True, check=True, timeout=30).stdout
            body, _, code = out.rpartition("\n")
            return int(code), json.loads(body)

        base = "https://cluster.test:%d" % stack.port
        assert (await threads.deferToThread(curl, base + "/2/info"))[1]["name"] == "cluster.test"
        assert (await threads.deferToThread(curl, base + "/version")) == (200, 2)
        code, job_id = await threads.deferToThread(curl, "-u", "jack:abc123", "-X", "PUT", base + "/2/tags?tag=c1")
        assert code == 200 and isinstance(job_id, int)
        assert await client.wait_job(job_id) == "success"
        assert (await threads.deferToThread(curl, base + "/2/tags")) == (200, ["c1"])
        code, err = await threads.deferToThread(curl, "-X", "PUT", base + "/2/tags?tag=c2")
        assert code == 401 and err["message"] == "Unauthorized"
    finally:
        await client.close()
        stack.stop()
