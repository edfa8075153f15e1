"""RAPI instance and node operations: the request becomes exactly this opcode (fake LuxiD)."""

from __future__ import annotations

from typing import Any

from ganeti import opcodes
from tests.unit.test_rapi_server import JACK, RapiTestCase, auth

NOW_NS = 1700000000 * 10**9


def reason(resource: str, text: str | None = None) -> list[list[Any]]:
    trail: list[list[Any]] = [] if text is None else [["gnt:user", text, NOW_NS]]
    return trail + [["gnt:library:rlib2:%s" % resource, "", NOW_NS]]


class OperationsTestCase(RapiTestCase):
    def job(self, method: str, path: str, body: Any = None) -> list[dict[str, Any]]:
        """The opcodes of the one job the request submitted (its answer is the job id)."""
        before = len(self.luxi.calls)
        self.assertEqual(self.ok(method, path, body, user=JACK), 42)
        submitted = [c for c in self.luxi.calls[before:] if c[0] == "SubmitJob"]
        self.assertEqual(len(submitted), 1)
        ops = submitted[0][1]
        for op in ops:
            self.assertEqual(opcodes.validate(op)["OP_ID"], op["OP_ID"])  # a valid opcode
        return ops

    def op(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        (op,) = self.job(method, path, body)
        return op

    def refused(self, code: int, method: str, path: str, body: Any = None, raw: bytes | None = None) -> str:
        headers = auth(*JACK)
        if raw is not None:
            headers["Content-Type"] = "application/json"
        _, result = self.error(code, method, path, body, headers=headers, raw=raw)
        self.assertNotIn("SubmitJob", self.luxi.methods(), path)
        return str(result["message"])


class InstanceOperationTests(OperationsTestCase):
    def test_create(self) -> None:
        body = {"__version__": 1, "name": "web1.test", "mode": "create", "os": "debootstrap+default",
                "disk_template": "plain", "disks": [{"size": 10240}], "nics": [{}], "pnode": "node1.test",
                "beparams": {"maxmem": 512}, "hvparams": {"usb_devices": "mouse tablet"}, "start": False}
        op = self.op("POST", "/2/instances?dry-run=1&reason=new%20web", body)
        self.assertEqual(op, {
            "OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1.test", "mode": "create",
            "os_type": "debootstrap+default", "disk_template": "plain", "disks": [{"size": 10240}], "nics": [{}],
            "pnode": "node1.test", "beparams": {"maxmem": 512}, "hvparams": {"usb_devices": "mouse,tablet"},
            "start": False, "dry_run": True, "reason": reason("r_2_instances", "new web"),
        })
        # what Ganeti's RAPI client sends, with a dependency passed through
        op = self.op("POST", "/2/instances", {"__version__": 1, "mode": "create", "name": "web2.test",
                                              "disk_template": "diskless", "disks": [], "nics": [{}],
                                              "depends": [[7, ["success"]]]})
        self.assertEqual(op["depends"], [[7, ["success"]]])
        self.assertNotIn("dry_run", op)

    def test_create_bad_bodies(self) -> None:
        good = {"__version__": 1, "name": "web1.test", "mode": "create", "disks": [], "nics": []}
        for body, why in [
            (dict(good, __version__=0), "no longer supported"),
            ({k: v for k, v in good.items() if k != "__version__"}, "no longer supported"),
            (dict(good, __version__=2), "version 2"),
            (dict(good, instance_name="other.test"), "renamed"),
            (dict(good, os_type="a", os="b"), "renamed"),
            (dict(good, bogus=1), "bogus"),
            (dict(good, disks="big"), "disks"),
            ({k: v for k, v in good.items() if k != "mode"}, "mode"),
            (dict(good, mode="clone"), "mode"),
            (dict(good, reason=[["x", "y", 1]]), "reason"),
            (dict(good, OP_ID="OP_TEST_DELAY"), "OP_ID"),
            (["not", "a", "dict"], "JSON object"),
        ]:
            self.assertIn(why, self.refused(400, "POST", "/2/instances", body), body)
        self.assertIn("dry_run", self.refused(400, "POST", "/2/instances?dry-run=1", dict(good, dry_run=True)))
        self.refused(400, "POST", "/2/instances", raw=b'{"__version__": 1,')

    def test_remove(self) -> None:
        op = self.op("DELETE", "/2/instances/inst1.test?dry-run=1")
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "inst1.test", "ignore_failures": False,
                              "dry_run": True, "reason": reason("r_2_instances_name")})

    def test_startup_shutdown_reboot(self) -> None:
        op = self.op("PUT", "/2/instances/inst1.test/startup?force=1&no_remember=1", {"ignored": True})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "inst1.test", "force": True,
                              "no_remember": True, "reason": reason("r_2_instances_name_startup")})
        op = self.op("PUT", "/2/instances/inst1.test/startup")
        self.assertEqual((op["force"], op["no_remember"]), (False, False))
        op = self.op("PUT", "/2/instances/inst1.test/shutdown?no_remember=1&dry-run=0", {"timeout": 30})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "inst1.test", "timeout": 30,
                              "no_remember": True, "dry_run": False, "reason": reason("r_2_instances_name_shutdown")})
        op = self.op("POST", "/2/instances/inst1.test/reboot?type=soft&ignore_secondaries=1")
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "inst1.test", "reboot_type": "soft",
                              "ignore_secondaries": True, "reason": reason("r_2_instances_name_reboot")})
        self.assertEqual(self.op("POST", "/2/instances/inst1.test/reboot")["reboot_type"], "hard")

    def test_modify_rename_failover_migrate(self) -> None:
        op = self.op("PUT", "/2/instances/inst1.test/modify", {
            "custom_beparams": {"maxmem": 1024}, "custom_hvparams": {"usb_devices": "a b"},
            "nics": [["add", -1, {"mode": "bridged"}]], "offline": False})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "inst1.test",
                              "beparams": {"maxmem": 1024}, "hvparams": {"usb_devices": "a,b"},
                              "nics": [["add", -1, {"mode": "bridged"}]], "offline": False,
                              "reason": reason("r_2_instances_name_modify")})
        op = self.op("PUT", "/2/instances/inst1.test/rename", {"new_name": "inst2.test", "name_check": False,
                                                               "ip_check": False})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "inst1.test", "new_name": "inst2.test",
                              "name_check": False, "ip_check": False, "reason": reason("r_2_instances_name_rename")})
        op = self.op("PUT", "/2/instances/inst1.test/failover?dry-run=1", {"target_node": "node2.test",
                                                                           "ignore_consistency": True})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "inst1.test",
                              "target_node": "node2.test", "ignore_consistency": True, "dry_run": True,
                              "reason": reason("r_2_instances_name_failover")})
        op = self.op("PUT", "/2/instances/inst1.test/migrate", {"mode": "live", "cleanup": True})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "inst1.test", "mode": "live",
                              "cleanup": True, "reason": reason("r_2_instances_name_migrate")})
        op = self.op("PUT", "/2/instances/inst1.test/migrate")
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "inst1.test",
                              "reason": reason("r_2_instances_name_migrate")})

    def test_reinstall(self) -> None:
        ops = self.job("POST", "/2/instances/inst1.test/reinstall?reason=fresh",
                       {"os": "debootstrap+default", "start": False, "osparams": {"dhcp": "yes"}})
        self.assertEqual(ops, [
            {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "inst1.test",
             "reason": reason("r_2_instances_name_reinstall", "fresh")},
            {"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "inst1.test", "os_type": "debootstrap+default",
             "osparams": {"dhcp": "yes"}, "reason": reason("r_2_instances_name_reinstall", "fresh")},
        ])
        ops = self.job("POST", "/2/instances/inst1.test/reinstall?os=debian")
        self.assertEqual([op["OP_ID"] for op in ops],
                         ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP"])
        self.assertEqual(ops[1]["os_type"], "debian")
        self.assertEqual(ops[2], {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "inst1.test", "force": False,
                                  "reason": reason("r_2_instances_name_reinstall")})
        ops = self.job("POST", "/2/instances/inst1.test/reinstall?nostartup=1")
        self.assertEqual([op["OP_ID"] for op in ops], ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL"])
        self.assertNotIn("os_type", ops[1])

    def test_info(self) -> None:
        op = self.op("GET", "/2/instances/inst1.test/info?static=1")
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["inst1.test"], "static": True,
                              "use_locking": False, "reason": reason("r_2_instances_name_info")})
        self.assertFalse(self.op("GET", "/2/instances/inst1.test/info")["static"])

    def test_bad_operation_requests(self) -> None:
        base = "/2/instances/inst1.test"
        for method, path, body, why in [
            ("POST", base + "/reboot?type=cold", None, "cold"),
            ("POST", base + "/reinstall?os=x", {"os": "y"}, "not both"),
            ("POST", base + "/reinstall", {"os": "y", "bogus": 1}, "bogus"),
            ("POST", base + "/reinstall", {"start": "no"}, "start"),
            ("POST", base + "/reinstall", {"osparams": "x"}, "osparams"),
            ("PUT", base + "/rename", {}, "new_name"),
            ("PUT", base + "/rename", {"new_name": 5}, "new_name"),
            ("PUT", base + "/rename", {"new_name": "x", "instance_name": "y"}, "instance_name"),
            ("PUT", base + "/modify", {"custom_beparams": {}, "beparams": {}}, "renamed"),
            ("PUT", base + "/modify", {"nics": [["add"]]}, "nics"),
            ("PUT", base + "/shutdown", {"timeout": "soon"}, "timeout"),
            ("PUT", base + "/shutdown?no_remember=1", {"no_remember": False}, "no_remember"),
            ("PUT", base + "/migrate", {"mode": "fast"}, "mode"),
            ("PUT", base + "/failover", {"target_node": ""}, "target_node"),
            ("PUT", base + "/failover", "node2", "JSON object"),
            ("PUT", base + "/startup?force=yes", None, "force"),
            ("GET", base + "/info?static=maybe", None, "static"),
        ]:
            self.assertIn(why, self.refused(400, method, path, body), path)

    def test_console(self) -> None:
        console = {"instance": "inst1.test", "kind": "ssh", "host": "node1.test", "user": "root",
                   "command": ["xm", "console", "inst1.test"]}
        self.luxi.values.update(console=console, oper_state=True)
        self.assertEqual(self.ok("GET", "/2/instances/inst1.test/console", user=("reader", "pw")), console)
        self.assertEqual(self.luxi.calls[-1], ("QueryInstances", ["inst1.test"], ["console", "oper_state"], False))
        self.luxi.values.update(oper_state=False)
        _, result = self.error(503, "GET", "/2/instances/inst1.test/console", headers=auth("reader", "pw"))
        self.assertIn("unavailable", result["message"])
        del self.luxi.values["oper_state"]  # no live data
        self.error(503, "GET", "/2/instances/inst1.test/console", headers=auth("reader", "pw"))
        self.error(404, "GET", "/2/instances/nope.test/console", headers=auth("reader", "pw"))
        self.error(401, "GET", "/2/instances/inst1.test/console")
        self.assertNotIn("SubmitJob", self.luxi.methods())


class NodeOperationTests(OperationsTestCase):
    def test_evacuate(self) -> None:
        op = self.op("POST", "/2/nodes/node1.test/evacuate?dry-run=1&reason=maintenance",
                     {"mode": "all", "iallocator": "hail", "early_release": True})
        self.assertEqual(op, {"OP_ID": "OP_NODE_EVACUATE", "node_name": "node1.test", "mode": "all",
                              "iallocator": "hail", "early_release": True, "dry_run": True,
                              "reason": reason("r_2_nodes_name_evacuate", "maintenance")})
        op = self.op("POST", "/2/nodes/node1.test/evacuate", {"mode": "secondary-only", "remote_node": "node2.test"})
        self.assertEqual((op["mode"], op["remote_node"]), ("secondary-only", "node2.test"))

    def test_migrate(self) -> None:
        op = self.op("POST", "/2/nodes/node1.test/migrate", {"mode": "non-live", "target_node": "node2.test"})
        self.assertEqual(op, {"OP_ID": "OP_NODE_MIGRATE", "node_name": "node1.test", "mode": "non-live",
                              "target_node": "node2.test", "reason": reason("r_2_nodes_name_migrate")})
        op = self.op("POST", "/2/nodes/node1.test/migrate?live=0", {"mode": "live", "target_node": "node2.test"})
        self.assertEqual((op["mode"], "target_node" in op), ("non-live", False))  # legacy form: body ignored
        self.assertEqual(self.op("POST", "/2/nodes/node1.test/migrate?live=1")["mode"], "live")
        self.assertEqual(self.op("POST", "/2/nodes/node1.test/migrate?mode=non-live")["mode"], "non-live")
        self.assertNotIn("mode", self.op("POST", "/2/nodes/node1.test/migrate"))

    def test_bad_requests(self) -> None:
        for method, path, body, why in [
            ("POST", "/2/nodes/node1.test/evacuate", {}, "mode"),
            ("POST", "/2/nodes/node1.test/evacuate", {"mode": "everything"}, "mode"),
            ("POST", "/2/nodes/node1.test/evacuate", {"mode": "all", "node_name": "node2.test"}, "node_name"),
            ("POST", "/2/nodes/node1.test/evacuate?iallocator=hail", {"mode": "all"}, "body"),
            ("POST", "/2/nodes/node1.test/migrate?live=1&mode=live", None, "Only one"),
            ("POST", "/2/nodes/node1.test/migrate?mode=fast", None, "mode"),
            ("POST", "/2/nodes/node1.test/migrate", {"mode": "live", "bogus": 1}, "bogus"),
            ("POST", "/2/nodes/node1.test/migrate?target_node=node2.test", None, "body"),
        ]:
            self.assertIn(why, self.refused(400, method, path, body), path)
