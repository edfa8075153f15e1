"""gnt-instance activate-disks/deactivate-disks (fake LUXI client) and RAPI
PUT /2/instances/NAME/activate-disks and /deactivate-disks (fake LuxiD):
the opcodes they submit and what they print."""

from __future__ import annotations

from tests.unit.test_gnt_os_group_disk import following, gnt, submitted
from tests.unit.test_rapi_instances import OperationsTestCase, reason
from tests.unit.test_rapi_server import auth

N1 = "node1.test"


def test_activate_disks_prints_ganetis_lines() -> None:
    fake = following([[N1, "disk/0", "/dev/loop3"], [N1, "disk/1", None]])
    assert gnt("gnt-instance", "activate-disks", "web1", fake=fake) == (
        0, "node1.test:disk/0:/dev/loop3\nnode1.test:disk/1:None\n", "")
    assert submitted(fake) == {"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "web1",
                               "ignore_size": False, "wait_for_sync": False}
    fake = following([])
    assert gnt("gnt-instance", "activate-disks", "--ignore-size", "--wait-for-sync", "web1", fake=fake) == (0, "", "")
    assert submitted(fake)["ignore_size"] is True and submitted(fake)["wait_for_sync"] is True


def test_deactivate_disks() -> None:
    fake = following()
    assert gnt("gnt-instance", "deactivate-disks", "web1", fake=fake) == (0, "", "")
    assert submitted(fake) == {"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": "web1", "force": False}
    fake = following()
    gnt("gnt-instance", "deactivate-disks", "-f", "web1", fake=fake)
    assert submitted(fake)["force"] is True


def test_usage() -> None:
    for argv in (("activate-disks",), ("deactivate-disks",), ("activate-disks", "a", "b"),
                 ("deactivate-disks", "--bogus", "a")):
        code, out, err = gnt("gnt-instance", *argv)
        assert code == 2 and out == "" and err, argv
    code, out, err = gnt("gnt-instance", "activate-disks", "--help")
    assert (code, err) == (0, "") and "--ignore-size" in out and "--wait-for-sync" in out


class RapiDiskActivationTests(OperationsTestCase):
    def test_activate_disks(self) -> None:
        op = self.op("PUT", "/2/instances/inst1.test/activate-disks")
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": "inst1.test",
                              "reason": reason("r_2_instances_name_activate_disks")})
        op = self.op("PUT", "/2/instances/inst1.test/activate-disks?ignore_size=1")
        self.assertTrue(op["ignore_size"])
        op = self.op("PUT", "/2/instances/inst1.test/activate-disks", {"wait_for_sync": True})
        self.assertTrue(op["wait_for_sync"])

    def test_deactivate_disks(self) -> None:
        op = self.op("PUT", "/2/instances/inst1.test/deactivate-disks?force=1")
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": "inst1.test", "force": True,
                              "reason": reason("r_2_instances_name_deactivate_disks")})
        self.assertNotIn("force", self.op("PUT", "/2/instances/inst1.test/deactivate-disks"))

    def test_bad_input_submits_nothing(self) -> None:
        self.luxi.calls.clear()
        self.refused(400, "PUT", "/2/instances/inst1.test/activate-disks", {"bogus": 1})
        self.refused(400, "PUT", "/2/instances/inst1.test/activate-disks?ignore_size=yes")
        self.refused(400, "PUT", "/2/instances/inst1.test/deactivate-disks", {"instance_name": "other"})
        self.assertNotIn("SubmitJob", self.luxi.methods())
        self.error(403, "PUT", "/2/instances/inst1.test/deactivate-disks", headers=auth("reader", "pw"))

    def test_documented_as_implemented(self) -> None:
        paths = self.ok("GET", "/openapi.json")["paths"]
        for template, op_id, arg in [("/2/instances/{name}/activate-disks", "OP_INSTANCE_ACTIVATE_DISKS",
                                      "ignore_size"),
                                     ("/2/instances/{name}/deactivate-disks", "OP_INSTANCE_DEACTIVATE_DISKS",
                                      "force")]:
            op = paths[template]["put"]
            self.assertEqual(op["x-ganeti-opcodes"], [op_id])
            self.assertNotIn("501", op["responses"], template)
            self.assertIn(arg, {p["name"] for p in op["parameters"]})
