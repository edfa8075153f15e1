"""RAPI resources over treq's StubTreq, with a fake LuxiD."""

from __future__ import annotations

import base64
import json
from typing import Any

from treq.testing import StubTreq
from twisted.trial.unittest import SynchronousTestCase


def _temp_path(case: SynchronousTestCase) -> str:
    """A path in a fresh temporary directory removed after the test."""
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="rapi-test-")
    case.addCleanup(shutil.rmtree, directory, True)
    return directory + "/users"

from ganeti import errors, opcodes
from ganeti.rapi import openapi
from ganeti.rapi.luxi import LuxidUnreachable
from ganeti.rapi.server import RapiResource
from ganeti.rapi.users import UsersFile, ha1

BASE = "https://rapi.test:5080"


class FakeLuxi:
    """Answers LUXI calls from C{answers} (method -> value or callable)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.down = False
        self.answers: dict[str, Any] = {
            "QueryClusterInfo": lambda: {"name": "cluster.test", "master": "node1.test", "software_version": "3.0.2",
                                         "protocol_version": 2030000, "volume_group_name": None,
                                         "drbd_usermode_helper": None},
            "SubmitJob": lambda ops: 42,
            "QueryTags": lambda kind, name: ["t1"],
            "Query": self._query,
            "QueryInstances": lambda names, fields, lock: self._legacy("instance", names, fields, lock),
            "QueryNodes": lambda names, fields, lock: self._legacy("node", names, fields, lock),
            "QueryGroups": lambda names, fields, lock: self._legacy("group", names, fields, lock),
            "QueryFields": lambda what, fields: {"fields": [{"name": "name", "title": "Name", "kind": "text",
                                                             "doc": "Name"}]},
            "QueryJobs": self._jobs,
            "CancelJob": lambda job_id, kill=False: [True, "Job %s canceled" % job_id],
            "WaitForJobChange": lambda *args: [["running"], [[1, [1, 2], "message", "hello"]]],
        }
        self.items = {"node": ["node1.test", "node2.test"], "instance": ["inst1.test"], "group": ["default"],
                      "network": []}
        #: field -> value of every item; other fields have no data
        self.values: dict[str, Any] = {"role": "M", "status": "running", "tags": []}

    def _names(self, what: str, wanted: list[str] | None) -> list[str]:
        names = self.items.get(what, [])
        for name in wanted or []:
            if name not in names:
                raise errors.OpPrereqError("%s '%s' not known" % (what, name), errors.ECODE_NOENT)
        return list(wanted) if wanted else names

    def _cell(self, name: str, field: str) -> list[Any]:
        if field == "name":
            return [0, name]
        return [0, self.values[field]] if field in self.values else [2, None]

    def _query(self, what: str, fields: list[str], qfilter: Any) -> Any:
        wanted = [f[2] for f in qfilter[1:]] if qfilter is not None and qfilter[0] == "|" else None
        return {"fields": [{"name": f} for f in fields],
                "data": [[self._cell(name, f) for f in fields] for name in self._names(what, wanted)]}

    def _legacy(self, what: str, names: list[str], fields: list[str], lock: bool) -> Any:
        if lock:
            raise errors.OpPrereqError("Sync queries are not allowed", errors.ECODE_INVAL)
        return [[cell[1] for cell in (self._cell(name, f) for f in fields)] for name in self._names(what, names)]

    def _jobs(self, ids: Any, fields: list[str]) -> Any:
        known = {1: "success", 2: "running"}
        ids = sorted(known) if ids is None else ids
        return [None if i not in known else [i if f == "id" else known[i] if f == "status" else [] for f in fields]
                for i in ids]

    async def call(self, method: str, *args: Any) -> Any:
        self.calls.append((method, *args))
        if self.down:
            raise LuxidUnreachable("cannot connect to the master daemon at /x: Connection refused")
        answer = self.answers[method]
        return answer(*args) if callable(answer) else answer

    call_alone = call

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]


def auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}


JSON = {"Content-Type": "application/json"}


class RapiTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.users_path = _temp_path(self)
        with open(self.users_path, "w") as handle:
            handle.write("jack abc123 write\nreader %s read\nnobody pw\n" % ha1("reader", "pw"))
        self.luxi = FakeLuxi()
        self.resource = RapiResource(self.luxi, UsersFile(self.users_path), clock=lambda: 1700000000.0,
                                     max_body=4096)
        self.stub = StubTreq(self.resource)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                raw: bytes | None = None) -> tuple[int, Any, Any]:
        hdrs = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        d = self.stub.request(method, BASE + path, data=data, headers=hdrs)
        self.stub.flush()
        response = self.successResultOf(d)
        content = self.successResultOf(response.content())
        self.stub.flush()
        self.assertEqual(response.headers.getRawHeaders("content-type"), ["application/json"])
        return response.code, response.headers, json.loads(content)

    def ok(self, method: str, path: str, body: Any = None, user: tuple[str, str] | None = None) -> Any:
        code, _, result = self.request(method, path, body, auth(*user) if user else None)
        self.assertEqual(code, 200, result)
        return result

    def error(self, code: int, method: str, path: str, body: Any = None, headers: Any = None,
              raw: bytes | None = None) -> tuple[Any, Any]:
        got, hdrs, result = self.request(method, path, body, headers, raw)
        self.assertEqual(got, code, result)
        self.assertEqual(sorted(result), ["code", "explain", "message"])
        self.assertEqual(result["code"], code)
        return hdrs, result


class ReadTests(RapiTestCase):
    def test_basics(self) -> None:
        self.assertIsNone(self.ok("GET", "/"))
        self.assertEqual(self.ok("GET", "/version"), 2)
        self.assertEqual(set(self.ok("GET", "/2/features")),
                         {"instance-create-reqv1", "instance-reinstall-reqv1", "node-migrate-reqv1", "node-evac-res1"})
        info = self.ok("GET", "/2/info")
        self.assertEqual(info["name"], "cluster.test")
        self.assertIn("vg_name", info)
        self.assertIn("drbd_helper", info)
        self.assertEqual(self.ok("GET", "/2/tags"), ["t1"])
        self.assertEqual(self.luxi.calls[-1], ("QueryTags", "cluster", ""))

    def test_lists_and_items(self) -> None:
        self.assertEqual(self.ok("GET", "/2/nodes"), [{"id": "node1.test", "uri": "/2/nodes/node1.test"},
                                                       {"id": "node2.test", "uri": "/2/nodes/node2.test"}])
        bulk = self.ok("GET", "/2/nodes?bulk=1")
        self.assertEqual(bulk[0]["name"], "node1.test")
        self.assertIn("pinst_list", bulk[0])
        self.assertEqual(self.ok("GET", "/2/nodes/node2.test/role"), "master")
        self.assertEqual(self.ok("GET", "/2/groups"), [{"name": "default", "uri": "/2/groups/default"}])
        self.assertEqual(self.ok("GET", "/2/instances/inst1.test")["name"], "inst1.test")
        self.assertEqual(self.luxi.calls[-1][:2], ("QueryInstances", ["inst1.test"]))
        self.assertEqual(self.luxi.calls[-1][3], False)
        self.assertEqual(self.ok("GET", "/2/jobs"), [{"id": 1, "uri": "/2/jobs/1"}, {"id": 2, "uri": "/2/jobs/2"}])
        self.assertEqual(self.ok("GET", "/2/jobs/2")["status"], "running")
        self.assertEqual(self.ok("GET", "/2/instances/inst1.test/tags"), ["t1"])

    def test_unknown_items(self) -> None:
        _, body = self.error(404, "GET", "/2/instances/nope.test")
        self.assertIn("nope.test", body["message"])
        self.error(404, "GET", "/2/jobs/99")
        self.error(404, "GET", "/2/nowhere")
        self.error(404, "GET", "/2/instances/../info")
        self.error(404, "GET", "/2/instances/a/b")
        self.error(404, "GET", "/2/jobs/abc")

    def test_queries(self) -> None:
        result = self.ok("GET", "/2/query/node?fields=name,role", user=("reader", "pw"))
        self.assertEqual(self.luxi.calls[-1], ("Query", "node", ["name", "role"], None))
        self.assertEqual(len(result["data"]), 2)
        self.ok("PUT", "/2/query/instance", {"fields": ["name"], "qfilter": ["=", "name", "x"]}, user=("jack", "abc123"))
        self.assertEqual(self.luxi.calls[-1], ("Query", "instance", ["name"], ["=", "name", "x"]))
        self.assertEqual(self.ok("GET", "/2/query/node/fields")["fields"][0]["name"], "name")
        self.error(401, "GET", "/2/query/node?fields=name")
        self.error(400, "GET", "/2/query/node", headers=auth("reader", "pw"))
        self.error(400, "GET", "/2/query/cluster?fields=name", headers=auth("reader", "pw"))

    def test_lenient_as_ganeti(self) -> None:
        """Ganeti's client sends both 'qfilter' and 'filter'; unknown query
        parameters and extra body keys of reads are ignored, as Ganeti does."""
        body = {"fields": ["name"], "qfilter": ["=", "name", "x"], "filter": ["=", "name", "y"], "extra": 1}
        self.ok("PUT", "/2/query/instance", body, user=JACK)
        self.assertEqual(self.luxi.calls[-1], ("Query", "instance", ["name"], ["=", "name", "x"]))
        self.ok("PUT", "/2/query/instance", dict(body, qfilter=None), user=JACK)
        self.assertEqual(self.luxi.calls[-1], ("Query", "instance", ["name"], ["=", "name", "y"]))
        self.assertEqual(self.ok("GET", "/2/nodes?no-remember=1&whatever=x"),
                         [{"id": "node1.test", "uri": "/2/nodes/node1.test"},
                          {"id": "node2.test", "uri": "/2/nodes/node2.test"}])
        self.ok("GET", "/2/query/node?fields=name&no-remember=1", user=JACK)
        self.ok("GET", "/2/jobs/2/wait", {"fields": ["status"], "other": 1}, user=JACK)
        self.ok("PUT", "/2/instances/inst1.test/shutdown?no-remember=1&dry-run=1", user=JACK)
        self.assertEqual(self.luxi.calls[-1][0], "SubmitJob")

    def test_luxid_down_then_back(self) -> None:
        self.luxi.down = True
        _, body = self.error(502, "GET", "/2/info")
        self.assertIn("LuxiD", body["message"])
        self.luxi.down = False
        self.assertEqual(self.ok("GET", "/2/info")["name"], "cluster.test")


class AuthTests(RapiTestCase):
    def test_write_needs_credentials(self) -> None:
        hdrs, _ = self.error(401, "PUT", "/2/tags?tag=a")
        self.assertEqual(hdrs.getRawHeaders("www-authenticate"), ['Basic realm="Ganeti Remote API"'])
        self.error(401, "PUT", "/2/tags?tag=a", headers=auth("jack", "wrong"))
        self.error(401, "PUT", "/2/tags?tag=a", headers=auth("ghost", "abc123"))
        self.error(401, "PUT", "/2/tags?tag=a", headers={"Authorization": "Basic !!!"})
        self.error(403, "PUT", "/2/tags?tag=a", headers=auth("reader", "pw"))
        self.error(403, "PUT", "/2/tags?tag=a", headers=auth("nobody", "pw"))
        self.assertNotIn("SubmitJob", self.luxi.methods())
        self.assertEqual(self.ok("PUT", "/2/tags?tag=a", user=("jack", "abc123")), 42)

    def test_wait_needs_write(self) -> None:
        self.error(401, "GET", "/2/jobs/2/wait", {"fields": ["status"]})
        self.error(403, "GET", "/2/jobs/2/wait", {"fields": ["status"]}, headers=auth("reader", "pw"))

    def test_require_authentication(self) -> None:
        self.resource.require_authentication = True
        self.error(401, "GET", "/2/info")
        self.assertEqual(self.ok("GET", "/2/info", user=("nobody", "pw"))["name"], "cluster.test")

    def test_users_file_reloaded(self) -> None:
        with open(self.users_path, "w") as handle:
            handle.write("jack newpass write\n")
        self.error(401, "PUT", "/2/tags?tag=a", headers=auth("jack", "abc123"))
        self.assertEqual(self.ok("PUT", "/2/tags?tag=a", user=("jack", "newpass")), 42)


JACK = ("jack", "abc123")


class WriteTests(RapiTestCase):
    def submitted(self) -> dict[str, Any]:
        method, ops = self.luxi.calls[-1]
        self.assertEqual(method, "SubmitJob")
        self.assertEqual(len(ops), 1)
        return ops[0]

    def test_tags(self) -> None:
        self.assertEqual(self.ok("PUT", "/2/nodes/node1.test/tags?tag=a&tag=b&dry-run=1&reason=why", user=JACK), 42)
        op = self.submitted()
        self.assertEqual((op["OP_ID"], op["kind"], op["name"], op["tags"], op["dry_run"]),
                         ("OP_TAGS_SET", "node", "node1.test", ["a", "b"], True))
        self.assertEqual(op["reason"], [["gnt:user", "why", 1700000000 * 10**9],
                                        ["gnt:library:rlib2:r_2_nodes_name_tags", "", 1700000000 * 10**9]])
        self.ok("DELETE", "/2/groups/default/tags?tag=a", user=JACK)
        self.assertEqual((self.submitted()["OP_ID"], self.submitted()["kind"]), ("OP_TAGS_DEL", "nodegroup"))
        self.ok("DELETE", "/2/tags?tag=a", user=JACK)
        self.assertNotIn("name", self.submitted())

    def test_groups(self) -> None:
        self.ok("POST", "/2/groups?dry-run=0", {"name": "g2", "alloc_policy": "preferred"}, user=JACK)
        op = self.submitted()
        self.assertEqual((op["OP_ID"], op["group_name"], op["alloc_policy"], op["dry_run"]),
                         ("OP_GROUP_ADD", "g2", "preferred", False))
        self.ok("PUT", "/2/groups/g2/rename", {"new_name": "g3"}, user=JACK)
        self.assertEqual(self.submitted()["new_name"], "g3")
        self.ok("DELETE", "/2/groups/g3", user=JACK)
        self.assertEqual(self.submitted()["OP_ID"], "OP_GROUP_REMOVE")

    def test_bad_input_submits_nothing(self) -> None:
        h = auth(*JACK)
        self.error(400, "POST", "/2/groups", {"name": "g", "bogus": 1}, headers=h)
        self.error(400, "POST", "/2/groups", {"name": "g", "group_name": "g"}, headers=h)
        self.error(400, "POST", "/2/groups", {"name": 5}, headers=h)
        self.error(400, "POST", "/2/groups", ["not", "a", "dict"], headers=h)
        self.error(400, "PUT", "/2/groups/g/rename", {"new_name": "x", "group_name": "y"}, headers=h)
        self.error(400, "POST", "/2/groups", headers=dict(h, **JSON), raw=b'{"name": ')
        self.error(415, "POST", "/2/groups", headers=dict(h, **{"Content-Type": "text/plain"}), raw=b'{"name": "g"}')
        self.error(413, "POST", "/2/groups", {"name": "g" * 5000}, headers=h)
        self.error(400, "PUT", "/2/tags?tag=a&dry-run=yes", headers=h)
        self.assertNotIn("SubmitJob", self.luxi.methods())

    def test_not_implemented(self) -> None:
        """Resources whose opcode this cluster lacks answer 501 and submit nothing."""
        for op_id, method, path, body in [
            ("OP_OS_DIAGNOSE", "GET", "/2/os", None),
            ("OP_INSTANCE_MULTI_ALLOC", "POST", "/2/instances-multi-alloc", {"instances": []}),
            ("OP_INSTANCE_GROW_DISK", "POST", "/2/instances/i1/disk/0/grow", {"amount": 1024}),
            ("OP_INSTANCE_ACTIVATE_DISKS", "PUT", "/2/instances/i1/activate-disks", None),
            ("OP_NODE_POWERCYCLE", "POST", "/2/nodes/node1.test/powercycle", None),
            ("OP_GROUP_SET_PARAMS", "PUT", "/2/groups/default/modify", {}),
        ]:
            if op_id in opcodes.OPCODES:  # implemented meanwhile: not this test's business
                continue
            _, body_ = self.error(501, method, path, body, headers=auth(*JACK))
            self.assertIn("not implemented", body_["message"], path)
            self.assertIn(op_id, body_["message"], path)
        self.assertNotIn("SubmitJob", self.luxi.methods())
        self.error(400, "POST", "/2/instances", {"__version__": 0}, headers=auth(*JACK))
        self.assertNotIn("SubmitJob", self.luxi.methods())
        self.error(400, "PUT", "/2/nodes/node1.test/role", "king", headers=auth(*JACK))
        self.error(403, "PUT", "/2/modify", {"compression_tools": []}, headers=auth(*JACK))
        self.error(501, "PATCH", "/2/info")
        self.error(501, "POST", "/2/info", headers=auth(*JACK))

    def test_jobs(self) -> None:
        self.assertEqual(self.ok("DELETE", "/2/jobs/2", user=JACK), [True, "Job 2 canceled"])
        result = self.ok("GET", "/2/jobs/2/wait", {"fields": ["status"], "previous_job_info": None,
                                                   "previous_log_serial": None}, user=JACK)
        self.assertEqual(result, {"job_info": ["running"], "log_entries": [[1, [1, 2], "message", "hello"]]})
        self.assertEqual(self.luxi.calls[-1], ("WaitForJobChange", 2, ["status"], None, None, 10))
        self.luxi.answers["WaitForJobChange"] = "nochange"
        self.assertIsNone(self.ok("GET", "/2/jobs/2/wait", {"fields": ["status"]}, user=JACK))

        def lost(*args: Any) -> Any:
            raise errors.JobLost("Job 9 not found")

        self.luxi.answers["WaitForJobChange"] = lost
        self.error(404, "GET", "/2/jobs/9/wait", {"fields": ["status"]}, headers=auth(*JACK))
        self.error(400, "GET", "/2/jobs/2/wait", {"fields": "status"}, headers=auth(*JACK))


class OpenApiTests(RapiTestCase):
    def test_document_lists_routes(self) -> None:
        doc = self.ok("GET", "/openapi.json")
        self.assertEqual(doc["openapi"], "3.0.3")
        for path in ("/2/info", "/2/instances", "/2/jobs/{job_id}/wait", "/2/query/{name}/fields"):
            self.assertIn(path, doc["paths"])
        self.assertIn("security", doc["paths"]["/2/tags"]["put"])

    def test_answers_match_document(self) -> None:
        doc = self.ok("GET", "/openapi.json")
        for template, path in [("/", "/"), ("/version", "/version"), ("/2/info", "/2/info"),
                               ("/2/features", "/2/features"), ("/2/nodes", "/2/nodes"),
                               ("/2/nodes", "/2/nodes?bulk=1"), ("/2/nodes/{name}", "/2/nodes/node1.test"),
                               ("/2/instances", "/2/instances?bulk=1"), ("/2/groups", "/2/groups?bulk=1"),
                               ("/2/jobs", "/2/jobs"), ("/2/jobs/{job_id}", "/2/jobs/1")]:
            schema = doc["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            self.assertEqual(openapi.check(schema, self.ok("GET", path)), [], path)
        _, err = self.error(404, "GET", "/2/nowhere")
        self.assertEqual(openapi.check(openapi.ERROR, err), [])
        self.assertEqual(openapi.check({"type": "integer"}, "x"), ["$: 'x' is not integer"])

    def test_operations_document_their_opcodes(self) -> None:
        """Writes name the opcodes they submit; 501 is documented exactly for those this cluster lacks."""
        paths = self.ok("GET", "/openapi.json")["paths"]
        for template, method, op_ids in [
            ("/2/instances", "post", ["OP_INSTANCE_CREATE"]),
            ("/2/instances/{name}", "delete", ["OP_INSTANCE_REMOVE"]),
            ("/2/instances/{name}/startup", "put", ["OP_INSTANCE_STARTUP"]),
            ("/2/instances/{name}/shutdown", "put", ["OP_INSTANCE_SHUTDOWN"]),
            ("/2/instances/{name}/reboot", "post", ["OP_INSTANCE_REBOOT"]),
            ("/2/instances/{name}/reinstall", "post",
             ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP"]),
            ("/2/instances/{name}/modify", "put", ["OP_INSTANCE_SET_PARAMS"]),
            ("/2/instances/{name}/rename", "put", ["OP_INSTANCE_RENAME"]),
            ("/2/instances/{name}/failover", "put", ["OP_INSTANCE_FAILOVER"]),
            ("/2/instances/{name}/migrate", "put", ["OP_INSTANCE_MIGRATE"]),
            ("/2/instances/{name}/info", "get", ["OP_INSTANCE_QUERY_DATA"]),
            ("/2/nodes/{name}/evacuate", "post", ["OP_NODE_EVACUATE"]),
            ("/2/nodes/{name}/migrate", "post", ["OP_NODE_MIGRATE"]),
        ]:
            op = paths[template][method]
            self.assertEqual(op["x-ganeti-opcodes"], op_ids, template)
            self.assertNotIn("501", op["responses"], template)
            self.assertEqual(op["responses"]["200"]["content"]["application/json"]["schema"], openapi.JOB_ID)
            names = {p["name"] for p in op["parameters"] if p["in"] == "query"}
            self.assertTrue({"dry-run", "reason"} <= names, template)
        startup = paths["/2/instances/{name}/startup"]["put"]
        self.assertEqual({p["name"] for p in startup["parameters"] if p["in"] == "query"},
                         {"force", "no_remember", "dry-run", "reason"})
        self.assertIn("ignored", startup["description"])
        create = paths["/2/instances"]["post"]
        self.assertTrue(create["requestBody"]["required"])
        self.assertEqual(create["requestBody"]["content"]["application/json"]["schema"]["properties"]
                         ["__version__"]["enum"], [1])
        console = paths["/2/instances/{name}/console"]["get"]
        self.assertNotIn("x-ganeti-opcodes", console)
        self.assertIn("503", console["responses"])
        if "OP_OS_DIAGNOSE" not in opcodes.OPCODES:
            self.assertIn("501", paths["/2/os"]["get"]["responses"])
        self.assertNotIn("bulk", {p["name"] for p in startup["parameters"]})
        self.assertIn("bulk", {p["name"] for p in paths["/2/instances"]["get"]["parameters"]})

    def test_console_matches_document(self) -> None:
        doc = self.ok("GET", "/openapi.json")
        self.luxi.values.update(oper_state=True, console={"instance": "inst1.test", "kind": "vnc",
                                                          "host": "node1.test", "port": 11000, "display": 5100})
        schema = doc["paths"]["/2/instances/{name}/console"]["get"]["responses"]["200"]["content"][
            "application/json"]["schema"]
        console = self.ok("GET", "/2/instances/inst1.test/console", user=("reader", "pw"))
        self.assertEqual(openapi.check(schema, console), [])
