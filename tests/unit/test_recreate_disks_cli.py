"""gnt-instance recreate-disks (fake LUXI client) and RAPI POST
/2/instances/NAME/recreate-disks (fake LuxiD): the opcodes they submit."""

from __future__ import annotations

from tests.unit.test_gnt_os_group_disk import following, gnt, submitted
from tests.unit.test_rapi_instances import OperationsTestCase, reason


def test_recreate_disks_options() -> None:
    fake = following()
    assert gnt("gnt-instance", "recreate-disks", "web1", fake=fake) == (0, "", "")
    assert submitted(fake) == {"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "web1", "disks": [],
                               "nodes": []}
    fake = following()
    assert gnt("gnt-instance", "recreate-disks", "--disk", "1:size=2G,mode=ro", "--disk", "0", "web1",
               fake=fake)[0] == 0
    assert submitted(fake)["disks"] == [[1, {"size": 2048, "mode": "ro"}], [0, {}]]
    fake = following()
    gnt("gnt-instance", "recreate-disks", "-n", "node3", "web1", fake=fake)
    assert submitted(fake)["nodes"] == ["node3"]
    fake = following()
    gnt("gnt-instance", "recreate-disks", "-I", "hail", "web1", fake=fake)
    assert submitted(fake)["iallocator"] == "hail"


def test_recreate_disks_bad_input() -> None:
    for argv, message in ((("-n", "a", "-I", "hail"), "At most one of either --nodes or --iallocator"),
                          (("--disk", "x:size=1G"), "Invalid disk index: 'x'"),
                          (("--disk", "0:size=lots"), "Invalid disk size for disk 0")):
        fake = following()
        code, out, err = gnt("gnt-instance", "recreate-disks", *argv, "web1", fake=fake)
        assert code != 0 and message in err, (argv, err)
        assert fake.args("SubmitJob") == [], argv
    code, out, err = gnt("gnt-instance", "recreate-disks", "--help")
    assert code == 0 and "--iallocator" in out and "--disk" in out


class RapiRecreateDisksTests(OperationsTestCase):
    def test_recreate_disks(self) -> None:
        op = self.op("POST", "/2/instances/inst1.test/recreate-disks", {"disks": [[0, {"size": 1024}]],
                                                                        "nodes": ["node2.test"]})
        self.assertEqual(op, {"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": "inst1.test",
                              "disks": [[0, {"size": 1024}]], "nodes": ["node2.test"],
                              "reason": reason("r_2_instances_name_recreate_disks")})

    def test_bad_body_submits_nothing(self) -> None:
        self.luxi.calls.clear()
        self.refused(400, "POST", "/2/instances/inst1.test/recreate-disks", {"disks": [["x", {}]]})
        self.refused(400, "POST", "/2/instances/inst1.test/recreate-disks", {"bogus": 1})

    def test_documented_as_implemented(self) -> None:
        op = self.ok("GET", "/openapi.json")["paths"]["/2/instances/{name}/recreate-disks"]["post"]
        self.assertEqual(op["x-ganeti-opcodes"], ["OP_INSTANCE_RECREATE_DISKS"])
        self.assertNotIn("501", op["responses"])
