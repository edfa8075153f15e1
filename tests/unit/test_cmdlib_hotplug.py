"""OP_INSTANCE_SET_PARAMS with C{hotplug}/C{hotplug_if_possible}
(L{ganeti.cmdlib.instance_hotplug}) through the processor on an in-memory
WConfD, against fake nodes that model a hypervisor able to hotplug."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from tests.unit.instance_fakes import N2, FakeNodes, _Refused, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

WEB = "web1.example.test"
FILES = "/srv/ganeti/file-storage/%s/disk%d"


class HotplugNodes(FakeNodes):
    """Fake nodes whose running instances take hotplugged devices."""

    def __init__(self) -> None:
        super().__init__()
        self.plugged: list[tuple[str, str, Any]] = []

    def _hotplug_supported(self, node: str, inst: dict[str, Any]) -> Any:
        if inst["name"] not in self.running.get(node, {}):
            raise _Refused("Instance %s is not running: nothing to hotplug into" % inst["name"])
        return None

    def _hotplug_device(self, node: str, inst: dict[str, Any], action: str, dev_type: str, device: dict[str, Any],
                        extra: Any, seq: int) -> Any:
        key = device["logical_id"][1] if dev_type == "disk" else device["mac"]
        self.plugged.append((action, dev_type, key))
        return None

    def _blockdev_assemble(self, node: str, disk: dict[str, Any], inst: dict[str, Any], primary: bool,
                           idx: int) -> Any:
        return [disk["logical_id"][1], None, None]

    def _blockdev_shutdown(self, node: str, disk: dict[str, Any]) -> Any:
        return None


def modify(**extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": WEB}, **extra)


class HotplugTests(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = HotplugNodes()
        self.next_id = 100
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": WEB, "mode": "create", "disk_template": "file",
                 "disks": [{"size": 1024}], "nics": [{"mac": "aa:00:00:00:00:01"}], "os_type": "noop",
                 "pnode": N2, "start": False})
        self.rpc.calls.clear()

    def instance(self) -> Any:
        inst = self.env.read_config().find_instance(WEB)
        assert inst is not None
        return inst

    def disk_count(self) -> int:
        return len(self.instance().disks)

    def run_it(self) -> None:
        self.ok({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": WEB})
        self.rpc.calls.clear()

    def test_hotplug_into_a_stopped_instance_is_refused(self) -> None:
        message = self.error(modify(hotplug=True, disks=[["add", -1, {"size": 512}]]), code=errors.ECODE_STATE)
        self.assertEqual(message, "Hotplug is not possible: Instance %s is not running: nothing to hotplug into"
                         % WEB)
        self.assertEqual(self.disk_count(), 1)
        self.assertEqual(self.rpc.procedures(), ["hotplug_supported"])

    def test_if_possible_falls_back_to_a_plain_change(self) -> None:
        self.ok(modify(hotplug_if_possible=True, disks=[["add", -1, {"size": 512}]]))
        self.assertIn(" - WARNING: Instance %s is not running: nothing to hotplug into" % WEB, self.log)
        self.assertIn(" - INFO: Modification will take place without hotplugging.", self.log)
        self.assertEqual(self.disk_count(), 2)
        self.assertEqual(self.rpc.plugged, [])

    def test_disk_add_and_remove_into_a_running_instance(self) -> None:
        self.run_it()
        result = self.ok(modify(hotplug=True, disks=[["add", -1, {"size": 512}]]))
        self.assertEqual(result, [["disk/1", "add:size=512,mode=rw"], ["disk/1", "hotplug:done"]])
        self.assertEqual(self.rpc.plugged, [("hotadd", "disk", FILES % (WEB, 1))])
        self.assertEqual(self.rpc.procedures(), ["hotplug_supported", "blockdev_create", "blockdev_assemble",
                                                 "hotplug_device"])
        self.rpc.calls.clear()
        result = self.ok(modify(hotplug=True, disks=[["remove", 1, {}]]))
        self.assertEqual(result, [["disk/1", "remove"], ["disk/1", "hotplug:done"]])
        self.assertEqual(self.rpc.procedures(), ["hotplug_supported", "hotplug_device", "blockdev_shutdown",
                                                 "blockdev_remove"])
        self.assertEqual(self.disk_count(), 1)

    def test_removal_from_a_running_instance_needs_hotplug(self) -> None:
        self.run_it()
        message = self.error(modify(disks=[["remove", 0, {}]]), code=errors.ECODE_STATE)
        self.assertIn("stop it before removing disks, or remove them with --hotplug", message)
        self.ok(modify(disks=[["add", -1, {"size": 512}]]))
        self.rpc.calls.clear()
        # marked up but not running: --hotplug-if-possible falls back, and the removal is refused then
        self.rpc.running[N2].pop(WEB)
        message = self.error(modify(hotplug_if_possible=True, disks=[["remove", 1, {}]]), code=errors.ECODE_STATE)
        self.assertIn("stop it before removing disks", message)
        self.assertEqual(self.disk_count(), 2)
        self.assertNotIn("blockdev_remove", self.rpc.procedures())

    def test_last_disk_and_unknown_index(self) -> None:
        self.run_it()
        self.assertIn("Cannot remove the last disk", self.error(modify(hotplug=True, disks=[["remove", 0, {}]])))
        self.assertEqual(self.error(modify(hotplug=True, disks=[["remove", 7, {}]])), "Invalid disk index 7 (there are 1)")
        self.assertEqual(self.rpc.plugged, [])
        self.assertEqual(self.disk_count(), 1)

    def test_nics(self) -> None:
        self.run_it()
        result = self.ok(modify(hotplug=True, nics=[["add", -1, {"mac": "aa:00:00:00:00:02", "link": "br0"}]]))
        self.assertEqual(result[-1], ["nic.1", "hotplug:done"])
        result = self.ok(modify(hotplug=True, nics=[["modify", 1, {"mac": "aa:00:00:00:00:03"}]]))
        self.assertEqual(result[-1], ["nic/1", "hotplug:done"])
        result = self.ok(modify(hotplug=True, nics=[["remove", 0, {}]]))
        self.assertEqual(result[-1], ["nic/0", "hotplug:done"])
        self.assertEqual(self.rpc.plugged, [("hotadd", "nic", "aa:00:00:00:00:02"),
                                            ("hotmod", "nic", "aa:00:00:00:00:03"),
                                            ("hotremove", "nic", "aa:00:00:00:00:01")])
        self.assertEqual([n.mac for n in self.instance().nics], ["aa:00:00:00:00:03"])

    def test_a_failed_hotplug_is_a_warning(self) -> None:
        self.run_it()
        self.rpc.fail[("hotplug_device", None)] = "qemu refused 'drive_add': boom"
        result = self.ok(modify(hotplug=True, disks=[["add", -1, {"size": 512}]]))
        self.assertEqual(result[-1], ["disk/1", "hotplug:failed"])
        self.assertIn(" - WARNING: Could not hotplug device: qemu refused 'drive_add': boom", self.log)
        self.assertEqual(self.disk_count(), 2)

    def test_legacy_format_takes_one_addition_or_removal(self) -> None:
        message = self.error(modify(disks=[["add", {"size": 512}], ["add", {"size": 256}]]))
        self.assertEqual(message, "Only one disk add/attach/remove/detach operation is supported at a time")
        self.assertEqual(self.disk_count(), 1)
        self.ok(modify(disks=[["add", {"size": 512}]]))
        self.assertEqual(self.disk_count(), 2)
