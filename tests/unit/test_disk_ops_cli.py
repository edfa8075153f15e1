"""gnt-instance recreate-disks and modify --disk/--net/--hotplug (fake LUXI client), RAPI
POST recreate-disks and PUT modify (fake LuxiD): the opcodes they submit, what they print."""

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


def test_modify_disk_and_hotplug_syntax() -> None:
    cases = [
        (["--disk", "add:size=1G,provider=loopback,dir=/x"], [["add", -1, {"size": 1024, "provider": "loopback",
                                                                          "dir": "/x"}]]),
        (["--disk", "add:adopt=/dev/loop3"], [["add", -1, {"adopt": "/dev/loop3"}]]),
        (["--disk", "attach:name=data"], [["attach", -1, {"name": "data"}]]),
        (["--disk", "1:detach"], [["detach", 1, {}]]),
        (["--disk", "1:remove", "--hotplug"], [["remove", 1, {}]]),
    ]
    for argv, disks in cases:
        fake = following([])
        assert gnt("gnt-instance", "modify", *argv, "web1", fake=fake)[0] == 0, argv
        assert submitted(fake)["disks"] == disks, argv
    fake = following([])
    gnt("gnt-instance", "modify", "--hotplug", "--net", "add:link=br0", "web1", fake=fake)
    assert submitted(fake)["hotplug"] is True and submitted(fake)["nics"] == [["add", -1, {"link": "br0"}]]
    fake = following([])
    gnt("gnt-instance", "modify", "--hotplug-if-possible", "--disk", "add:size=1G", "web1", fake=fake)
    assert submitted(fake)["hotplug_if_possible"] is True and "hotplug" not in submitted(fake)
    code, _out, err = gnt("gnt-instance", "modify", "--disk", "add:mode=ro", "web1", fake=following([]))
    assert code != 0 and "Missing size of the new disk" in err


def test_modify_prints_no_next_start_after_a_hotplug() -> None:
    fake = following([["disk/1", "add:size=1024,mode=rw"], ["disk/1", "hotplug:done"]])
    code, out, _err = gnt("gnt-instance", "modify", "--hotplug", "--disk", "add:size=1G", "web1", fake=fake)
    assert code == 0 and "disk/1 -> hotplug:done" in out and "next starts" not in out
    fake = following([["disk/1", "add:size=1024,mode=rw"]])
    code, out, _err = gnt("gnt-instance", "modify", "--disk", "add:size=1G", "web1", fake=fake)
    assert "next starts" in out


class RapiModifyTests(OperationsTestCase):
    def test_modify_with_disk_operations_and_hotplug(self) -> None:
        body = {"disks": [["add", -1, {"size": 1024}], ["detach", 0, {}]], "nics": [["remove", 0, {}]],
                "hotplug": True}
        op = self.op("PUT", "/2/instances/inst1.test/modify", body)
        self.assertEqual((op["OP_ID"], op["disks"], op["nics"], op["hotplug"]),
                         ("OP_INSTANCE_SET_PARAMS", body["disks"], body["nics"], True))
        op = self.ok("GET", "/openapi.json")["paths"]["/2/instances/{name}/modify"]["put"]
        self.assertNotIn("501", op["responses"])
