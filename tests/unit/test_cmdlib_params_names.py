"""Unknown parameters and wrong types refused, one check per family
(hypervisor, backend, NIC, node, disk), by every LU that takes them, and
names of new groups, nodes and instances validated: each refusal is
C{ECODE_INVAL}, names the parameter or the name, and changes nothing."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.cmdlib import group_params as gparams
from ganeti.cmdlib import instance_params as params
from ganeti.cmdlib import names
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_cmdlib_group_ops import two_groups
from tests.unit.test_processor import Env

MASTER = "node1.example.test"


def cluster_modify(**changes: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_CLUSTER_SET_PARAMS"}, **changes)


class FamilyCheckTests(SynchronousTestCase):
    """The pure checks, one per parameter family."""

    def refused(self, call: Any, *args: Any) -> str:
        error = self.assertRaises(errors.OpPrereqError, call, *args)
        self.assertEqual(error.args[1], errors.ECODE_INVAL)
        return str(error.args[0])

    def test_hypervisor(self) -> None:
        self.assertEqual(
            self.refused(params.check_hvparams, "fake", {"nosuchparam": "1"}).split(" (")[0],
            "Unknown hypervisor parameter 'nosuchparam' for hypervisor 'fake'")
        self.assertIn("Hypervisor parameter 'migration_port' for hypervisor 'kvm' must be an integer, got 'x'",
                      self.refused(params.check_hvparams, "kvm", {"migration_port": "x"}))
        self.assertIn("'acpi'", self.refused(params.check_hvparams, "kvm", {"acpi": "maybe"}))
        self.assertEqual(params.check_hvparams("kvm", {"acpi": "false", "migration_port": "8102"}),
                         {"acpi": False, "migration_port": 8102})
        self.assertIn("Unknown hypervisor parameter 'x' for hypervisor 'fake'",
                      self.refused(params.check_hvparams_by_hypervisor, {"kvm": {"acpi": True}, "fake": {"x": 1}}))

    def test_backend(self) -> None:
        self.assertEqual(self.refused(params.check_beparams, {"memory": "abc"}),
                         "Backend parameter 'memory' must be a size (MiB, or a number with unit M, G or T), got 'abc'")
        self.assertIn("Unknown backend parameter 'colour'", self.refused(params.check_beparams, {"colour": 1}))
        self.assertEqual(params.check_beparams({"memory": "1G", "vcpus": "2"}),
                         {"maxmem": 1024, "minmem": 1024, "vcpus": 2})

    def test_nic(self) -> None:
        self.assertIn("Unknown NIC parameter 'speed'", self.refused(params.check_nicparams, {"speed": "fast"}))
        self.assertIn("'mode'", self.refused(params.check_nicparams, {"mode": "tunnel"}))
        self.assertIn("'vlan'", self.refused(params.check_nicparams, {"vlan": "abc"}))
        self.assertEqual(params.check_nicparams({"mode": "routed", "link": "br0", "vlan": ".100"}),
                         {"mode": "routed", "link": "br0", "vlan": ".100"})

    def test_node(self) -> None:
        self.assertIn("Node parameter 'ssh_port' must be an integer, got 'twenty'",
                      self.refused(gparams.check_ndparams, {"ssh_port": "twenty"}))
        self.assertIn("Unknown node parameter 'colour'", self.refused(gparams.check_ndparams, {"colour": "x"}))

    def test_disk(self) -> None:
        self.assertIn("Unknown disk parameter 'stripes' for disk template 'file'",
                      self.refused(gparams.check_diskparams, {"file": {"stripes": 2}}))
        self.assertIn("Disk parameter 'stripes' for disk template 'plain' must be an integer, got 'many'",
                      self.refused(gparams.check_diskparams, {"plain": {"stripes": "many"}}))
        self.assertEqual(gparams.check_diskparams({"plain": {"stripes": "2"}, "gluster": {"port": 24007}}),
                         {"plain": {"stripes": 2}, "gluster": {"port": 24007}})


class NameTests(SynchronousTestCase):
    def test_hostnames(self) -> None:
        self.assertEqual(names.normalize_hostname("Web1.Example.TEST.", "instance name"), "web1.example.test")
        for bad in ("bad name", "a/b", "a..b", ".a", "", "x" * 256, "caf\u00e9", 7):
            error = self.assertRaises(errors.OpPrereqError, names.normalize_hostname, bad, "instance name")
            self.assertEqual(error.args[1], errors.ECODE_INVAL)
            self.assertIn("Invalid instance name", error.args[0])

    def test_group_names(self) -> None:
        for good in ("default", "rack-2", "Rack_2.a", "g+1"):
            self.assertEqual(names.check_group_name(good), good)
        for bad in ("bad group/name", "", " ", "-x", ".x", "a b", "x" * 256, None):
            error = self.assertRaises(errors.OpPrereqError, names.check_group_name, bad)
            self.assertEqual(error.args[1], errors.ECODE_INVAL)


class ParameterLUTests(LUTestCase):
    """Every LU taking parameters refuses bad ones before changing anything."""

    def setUp(self) -> None:
        self.env = Env(two_groups())
        self.rpc = None
        self.next_id = 300

    def refused(self, op: dict[str, Any], text: str) -> None:
        before = self.env.read_config()
        message = self.error(op, code=errors.ECODE_INVAL)
        self.assertIn(text, message)
        after = self.env.read_config()
        self.assertEqual(after.serial_no, before.serial_no)
        self.assertEqual(after, before)

    def test_cluster_set_params(self) -> None:
        self.refused(cluster_modify(hvparams={"fake": {"nosuchparam": "1"}}),
                     "Unknown hypervisor parameter 'nosuchparam' for hypervisor 'fake'")
        self.refused(cluster_modify(hvparams={"fake": {"migration_mode": "teleport"}}), "migration_mode")
        self.refused(cluster_modify(beparams={"memory": "abc"}), "Backend parameter 'memory' must be a size")
        self.refused(cluster_modify(beparams={"vcpus": "2", "colour": "red"}), "Unknown backend parameter 'colour'")
        self.refused(cluster_modify(nicparams={"mode": "tunnel"}), "Invalid NIC parameter 'mode'")
        self.refused(cluster_modify(ndparams={"ssh_port": "x"}), "Node parameter 'ssh_port' must be an integer")
        self.refused(cluster_modify(ndparams={"ssh_port": "default"}), "'ssh_port'")

    def test_cluster_set_params_stores_typed_values(self) -> None:
        self.ok(cluster_modify(hvparams={"fake": {"migration_mode": "non-live"}}, beparams={"vcpus": "2"},
                               nicparams={"link": "br7"}, ndparams={"ssh_port": "2222"}))
        cluster = self.env.read_config().cluster
        self.assertEqual(cluster.hvparams["fake"]["migration_mode"], "non-live")
        self.assertEqual(cluster.beparams["default"]["vcpus"], 2)
        self.assertEqual(cluster.nicparams["default"]["link"], "br7")
        self.assertEqual(cluster.ndparams["ssh_port"], 2222)

    def test_group_add(self) -> None:
        add = {"OP_ID": "OP_GROUP_ADD", "group_name": "g1"}
        self.refused(dict(add, ndparams={"colour": "x"}), "Unknown node parameter 'colour'")
        self.refused(dict(add, diskparams={"plain": {"stripes": "many"}}), "'stripes'")
        self.refused(dict(add, ipolicy={"vcpu-ratio": "fast"}), "vcpu-ratio")
        self.refused(dict(add, hv_state={"fake": {"mem_total": "lots"}}), "mem_total")
        self.ok(dict(add, ndparams={"ssh_port": "2200"}, diskparams={"plain": {"stripes": "3"}}))
        group = self.env.read_config().find_group("g1")
        assert group is not None
        self.assertEqual((group.ndparams, group.diskparams), ({"ssh_port": 2200}, {"plain": {"stripes": 3}}))

    def test_group_set_params(self) -> None:
        self.refused({"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": "rack2", "diskparams": {"file": {"x": 1}}},
                     "Unknown disk parameter 'x' for disk template 'file'")

    def test_node_set_params(self) -> None:
        base = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2.example.test"}
        self.refused(dict(base, ndparams={"spindle_count": "many"}), "Node parameter 'spindle_count'")
        self.refused(dict(base, ndparams={"colour": 1}), "Unknown node parameter 'colour'")
        self.refused(dict(base, disk_state={"file": {"x": {"disk_total": "big"}}}), "disk_total")
        self.assertEqual(self.ok(dict(base, ndparams={"spindle_count": "4"})), [["ndparams", str({"spindle_count": 4})]])
        node = self.env.read_config().find_node("node2.example.test")
        assert node is not None
        self.assertEqual(node.ndparams, {"spindle_count": 4})

    def test_group_names(self) -> None:
        self.refused({"OP_ID": "OP_GROUP_ADD", "group_name": "bad group/name"},
                     "Invalid node group name 'bad group/name'")
        self.refused({"OP_ID": "OP_GROUP_RENAME", "group_name": "rack2", "new_name": "rack 2"},
                     "Invalid node group name 'rack 2'")

    def test_instance_names(self) -> None:
        self.refused({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web/1", "mode": "create",
                      "disk_template": "diskless", "disks": [], "nics": [], "os_type": "noop",
                      "pnode": "node2.example.test", "name_check": False, "ip_check": False},
                     "Invalid instance name 'web/1'")
        self.refused({"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "inst1.example.test", "new_name": "a b",
                      "name_check": False, "ip_check": False}, "Invalid instance name 'a b'")

    def test_node_names(self) -> None:
        self.refused({"OP_ID": "OP_NODE_ADD", "node_name": "node 9", "primary_ip": "192.0.2.9"},
                     "Invalid node name 'node 9'")
