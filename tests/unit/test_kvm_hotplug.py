"""Hotplug of disks and NICs into a running kvm guest
(L{ganeti.backend.hypervisor.kvm_hotplug}) against the fake qemu of
L{tests.unit.test_kvm_hypervisor}, taught the hotplug commands: the QMP and
HMP commands sent, the runtime record kept, and the refusals."""

from __future__ import annotations

from typing import Any

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm_hotplug, kvm_ifup, kvm_pci
from ganeti.objects import NIC, Instance
from tests.unit.test_kvm_hypervisor import NAME, UUID, FakeMonitor, FakeQemu, KVMTestCase, instance

DISK_UUID = "11111111-2222-3333-4444-555555555555"
NIC_UUID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


class HotplugQemu:
    """What the fake qemu's monitor answers to the hotplug commands."""

    def __init__(self, qemu: FakeQemu, disks: list[str]) -> None:
        self.qemu = qemu
        #: drive id -> [file, qdev path or None]
        self.blocks: dict[str, list[Any]] = {
            "disk%d" % i: [path, "/machine/peripheral/disk%d/virtio-backend" % i] for i, path in enumerate(disks)}
        self.peripherals: set[str] = set()
        self.netdevs: set[str] = set()
        self.releases = True
        self.hmp_errors: dict[str, str] = {}
        self._answer = qemu.answer
        qemu.answer = self.answer

    def answer(self, message: dict[str, Any], server: FakeMonitor) -> None:
        command, args = message["execute"], message.get("arguments") or {}
        result: Any = {}
        if command == "human-monitor-command":
            self.qemu.received.append(message)
            line = args["command-line"]
            verb = line.split(" ")[0]
            result = self.hmp_errors.get(verb, "")
            if not result and verb == "drive_add":
                opts = dict(o.split("=", 1) for o in line.split(" ", 2)[2].split(","))
                self.blocks[opts["id"]] = [opts["file"], None]
            elif not result and verb == "drive_del":
                drive = line.split(" ")[1]
                result = "" if self.blocks.pop(drive, None) else "Device '%s' not found\r\n" % drive
        elif command == "device_add":
            self.qemu.received.append(message)
            self.peripherals.add(args["id"])
            if "drive" in args:
                self.blocks[args["drive"]][1] = "/machine/peripheral/%s/virtio-backend" % args["id"]
        elif command == "device_del":
            self.qemu.received.append(message)
            if self.releases:
                self.peripherals.discard(args["id"])
                for drive, (_file, qdev) in list(self.blocks.items()):
                    if qdev and qdev.startswith(args["id"] + "/") or qdev == args["id"]:
                        del self.blocks[drive]  # qemu drops the drive with its device
        elif command == "query-block":
            self.qemu.received.append(message)
            result = [{"device": d, "qdev": q, "inserted": {"file": f}} for d, (f, q) in self.blocks.items()]
        elif command == "qom-list":
            self.qemu.received.append(message)
            result = [{"name": p, "type": "child<virtio-net-pci>"} for p in sorted(self.peripherals)]
        elif command in ("netdev_add", "netdev_del"):
            self.qemu.received.append(message)
            (self.netdevs.add if command == "netdev_add" else self.netdevs.discard)(args["id"])
        else:
            self._answer(message, server)
            return
        server.send({"return": result, "id": message.get("id")})


def disk(mode: str = "rw") -> dict[str, Any]:
    return {"uuid": DISK_UUID, "mode": mode, "dev_type": "file"}


def nic(mac: str = "aa:00:00:44:55:66") -> dict[str, Any]:
    return {"uuid": NIC_UUID, "mac": mac, "nicparams": {"mode": "bridged", "link": "br0"}}


class HotplugTests(KVMTestCase):
    def boot(self, inst: Instance | None = None) -> HotplugQemu:
        inst = inst or instance()
        self.successResultOf(self.drive(self.kvm.start_instance(inst, [({"mode": "rw"}, "/srv/disk0", None)],
                                                                False)))
        return HotplugQemu(self.node.qemu_of(self.kvm), ["/srv/disk0"])

    def plug(self, action: str, dev_type: str, device: dict[str, Any], path: str | None = None,
             inst: Instance | None = None) -> Any:
        return self.drive(self.kvm.hotplug_device(inst or instance(), action, dev_type, device, path))

    def record(self) -> dict[str, Any]:
        record = self.kvm._read(NAME)
        assert record is not None
        return record

    def test_device_ids_as_ganeti(self) -> None:
        self.assertEqual(kvm_hotplug.device_id("disk", DISK_UUID), "disk-11111111-2222-3333")
        self.assertEqual(kvm_hotplug.device_id("nic", NIC_UUID), "nic-aaaaaaaa-bbbb-cccc")

    def test_disk_add_then_remove(self) -> None:
        qemu = self.boot()
        self.successResultOf(self.plug("hotadd", "disk", disk("ro"), "/srv/disk1"))
        self.assertEqual(qemu.qemu.arguments("human-monitor-command"), [
            {"command-line": "drive_add dummy file=/srv/disk1,if=none,id=disk-11111111-2222-3333,format=raw,"
                             "aio=threads,readonly=on"}])
        # the disk of the start is at slot 12 (0xc, the first after Ganeti's 12 reserved ones)
        self.assertEqual(qemu.qemu.arguments("device_add"), [
            {"driver": "virtio-blk-pci", "drive": "disk-11111111-2222-3333", "id": "disk-11111111-2222-3333",
             "addr": "0xd"}])
        self.assertEqual(self.record()["disks"], [["/srv/disk0", "rw", "disk0", 12],
                                                  ["/srv/disk1", "ro", "disk-11111111-2222-3333", 13]])
        self.successResultOf(self.plug("hotremove", "disk", disk(), "/srv/disk1"))
        self.assertEqual(qemu.qemu.arguments("device_del"), [{"id": "/machine/peripheral/disk-11111111-2222-3333"}])
        self.assertNotIn("disk-11111111-2222-3333", qemu.blocks)
        self.assertEqual(self.record()["disks"], [["/srv/disk0", "rw", "disk0", 12]])

    def test_a_disk_of_the_start_is_removed_by_its_qom_path(self) -> None:
        qemu = self.boot()
        self.successResultOf(self.plug("hotremove", "disk", disk(), "/srv/disk0"))
        self.assertEqual(qemu.qemu.arguments("device_del"), [{"id": "/machine/peripheral/disk0"}])
        self.assertEqual(self.record()["disks"], [])

    def test_a_freed_slot_is_taken_again_and_the_slots_survive_in_the_record(self) -> None:
        """The slots a migration target is started with (L{ganeti.backend.hypervisor.kvm_pci})."""
        inst = Instance(name=NAME, uuid=UUID, hypervisor="kvm", beparams={"maxmem": 256, "vcpus": 2},
                        hvparams={"kvm_path": "/bin/sh", "serial_console": True},
                        nics=[NIC(uuid="boot-nic", mac="aa:00:00:11:22:33",
                                  nicparams={"mode": "bridged", "link": "br0"})])
        qemu = self.boot(inst)
        self.successResultOf(self.plug("hotremove", "disk", disk(), "/srv/disk0", inst=inst))
        self.successResultOf(self.plug("hotadd", "nic", nic(), inst=inst))
        self.successResultOf(self.plug("hotadd", "disk", disk(), "/srv/disk1", inst=inst))
        self.assertEqual([a["addr"] for a in qemu.qemu.arguments("device_add")], ["0xc", "0xe"])
        info = self.kvm.migration_info(inst)
        self.assertEqual(info["disks"], [["/srv/disk1", "rw", "disk-11111111-2222-3333", 14]])
        self.assertEqual([(n["id"], n["pci"]) for n in info["nics"]], [("nic0", 13), ("nic-aaaaaaaa-bbbb-cccc", 12)])
        argv = kvm_pci.command_devices(self.record())
        self.assertEqual(argv, ([("/srv/disk1", "rw", "disk-11111111-2222-3333", 14)],
                                [("aa:00:00:11:22:33", self.record()["nics"][0]["tap"], None, "nic0", 13),
                                 ("aa:00:00:44:55:66", self.record()["nics"][1]["tap"], None,
                                  "nic-aaaaaaaa-bbbb-cccc", 12)]))

    def test_refused_hmp_drive_add(self) -> None:
        qemu = self.boot()
        qemu.hmp_errors["drive_add"] = "Could not open '/srv/nope': No such file or directory\r\n"
        failure = self.failureResultOf(self.plug("hotadd", "disk", disk(), "/srv/nope"), hv.HypervisorError)
        self.assertIn("qemu refused 'drive_add': Could not open '/srv/nope'", str(failure.value))
        self.assertEqual(qemu.qemu.arguments("device_add"), [])
        self.assertEqual(self.record()["disks"], [["/srv/disk0", "rw", "disk0", 12]])

    def test_unknown_disk_and_a_guest_that_keeps_it(self) -> None:
        qemu = self.boot()
        failure = self.failureResultOf(self.plug("hotremove", "disk", disk(), "/srv/other"), hv.HypervisorError)
        self.assertEqual(str(failure.value), "Instance %s has no disk /srv/other attached" % NAME)
        qemu.releases = False
        failure = self.failureResultOf(self.plug("hotremove", "disk", disk(), "/srv/disk0"), hv.HypervisorError)
        self.assertIn("The guest did not release disk /srv/disk0 within 30 seconds", str(failure.value))
        self.assertEqual(self.record()["disks"], [["/srv/disk0", "rw", "disk0", 12]])

    def test_nic_add_modify_remove(self) -> None:
        inst = Instance(name=NAME, uuid=UUID, hypervisor="kvm", beparams={"maxmem": 256, "vcpus": 2},
                        hvparams={"kvm_path": "/bin/sh", "serial_console": True},
                        nics=[NIC(uuid="boot-nic", mac="aa:00:00:11:22:33",
                                  nicparams={"mode": "bridged", "link": "br0"})])
        qemu = self.boot(inst)
        first_tap = self.record()["nics"][0]["tap"]
        self.node.ran.clear()
        self.successResultOf(self.plug("hotadd", "nic", nic(), inst=inst))
        [netdev] = qemu.qemu.arguments("netdev_add")
        tap = netdev.pop("ifname")
        self.assertNotEqual(tap, first_tap)
        self.assertEqual(netdev, {"type": "tap", "id": "nic-aaaaaaaa-bbbb-cccc", "script": "no", "downscript": "no",
                                  "vnet_hdr": True})
        self.assertEqual(self.node.ran[-1], ["ip", "link", "set", "dev", tap, "master", "br0"])  # as at start-up
        self.assertEqual(qemu.qemu.arguments("device_add"), [
            {"driver": "virtio-net-pci", "netdev": "nic-aaaaaaaa-bbbb-cccc", "mac": "aa:00:00:44:55:66",
             "id": "nic-aaaaaaaa-bbbb-cccc-dev", "addr": "0xe"}])
        self.assertEqual([n["mac"] for n in self.record()["nics"]], ["aa:00:00:11:22:33", "aa:00:00:44:55:66"])
        # a modification (new MAC) replaces the device; the NIC of the start is removed by its id
        self.successResultOf(self.plug("hotmod", "nic", nic("aa:00:00:77:88:99"), inst=inst))
        self.successResultOf(self.plug("hotremove", "nic", {"uuid": "boot-nic", "mac": "aa:00:00:11:22:33"},
                                       inst=inst))
        self.assertEqual(qemu.qemu.arguments("device_del"), [{"id": "nic-aaaaaaaa-bbbb-cccc-dev"},
                                                             {"id": "nic0-dev"}])
        self.assertEqual(qemu.qemu.arguments("netdev_del"), [{"id": "nic-aaaaaaaa-bbbb-cccc"}, {"id": "nic0"}])
        self.assertEqual([n["mac"] for n in self.record()["nics"]], ["aa:00:00:77:88:99"])

    def test_hot_added_openvswitch_nic_gets_its_port_and_loses_it(self) -> None:
        """An openvswitch NIC with an access VLAN: its tap becomes a port of the switch with the tag, its
        network script environment as Ganeti's; hot-removed, the port goes from the switch."""
        inst = Instance(name=NAME, uuid=UUID, hypervisor="kvm", beparams={"maxmem": 256}, tags=["web"],
                        hvparams={"kvm_path": "/bin/sh", "serial_console": True})
        self.boot(inst)
        self.node.ran.clear()
        device = {"uuid": NIC_UUID, "mac": "aa:00:00:44:55:66", "ip": "192.0.2.7", "name": "front",
                  "network": "net-uuid", "netinfo": {"name": "net1", "uuid": "net-uuid", "network": "192.0.2.0/24"},
                  "nicparams": {"mode": "openvswitch", "link": "ovs0", "vlan": ".10"}}
        self.successResultOf(self.plug("hotadd", "nic", device, inst=inst))
        tap = self.record()["nics"][0]["tap"]
        self.assertEqual(self.node.ran, [
            ["ovs-vsctl", "--timeout=30", "--if-exists", "del-port", tap], ["ip", "link", "set", "dev", tap, "up"],
            ["ovs-vsctl", "--timeout=30", "add-port", "ovs0", tap],
            ["ovs-vsctl", "--timeout=30", "set", "port", tap, "tag=10"]])
        self.assertEqual(kvm_ifup.environment(NAME, inst.tags, 0, self.record()["nics"][0]), {
            "INSTANCE": NAME, "MAC": "aa:00:00:44:55:66", "MODE": "openvswitch", "INTERFACE": tap,
            "INTERFACE_INDEX": "0", "INTERFACE_UUID": NIC_UUID, "TAGS": "web", "IP": "192.0.2.7",
            "INTERFACE_NAME": "front", "LINK": "ovs0", "VLAN": ".10", "NETWORK_NAME": "net1",
            "NETWORK_UUID": "net-uuid", "NETWORK_TAGS": "", "NETWORK_SUBNET": "192.0.2.0/24"})
        self.node.ran.clear()
        self.node.answers[("ip", "link", "show", "dev", tap)] = (1, "no such device")
        self.successResultOf(self.plug("hotremove", "nic", device, inst=inst))
        self.assertEqual(self.node.ran, [["ovs-vsctl", "--timeout=30", "--if-exists", "del-port", tap],
                                         ["ip", "link", "show", "dev", tap]])
        self.assertEqual(self.record()["nics"], [])

    def test_refusals(self) -> None:
        failure = self.failureResultOf(self.plug("hotadd", "disk", disk(), "/srv/disk1"), hv.HypervisorError)
        self.assertEqual(str(failure.value), "Instance %s is not running: nothing to hotplug into" % NAME)
        self.assertRaises(hv.HypervisorError, self.kvm.hotplug_supported, instance())
        self.boot(instance(disk_type="ide"))
        self.kvm.hotplug_supported(instance())
        failure = self.failureResultOf(self.plug("hotadd", "disk", disk(), "/srv/disk1"), hv.HypervisorError)
        self.assertEqual(str(failure.value), "Disks of disk_type ide cannot be hotplugged (only paravirtual)")
        failure = self.failureResultOf(self.plug("hotmod", "disk", disk(), "/srv/disk0"), hv.HypervisorError)
        self.assertEqual(str(failure.value), "Disks cannot be modified by hotplug")
        failure = self.failureResultOf(self.plug("hotplug", "disk", disk(), "/srv/disk0"), hv.HypervisorError)
        self.assertIn("Unknown hotplug request", str(failure.value))

    def test_a_hot_added_drive_found_by_its_id(self) -> None:
        """qemu may show a URI drive (userspace rbd) under another file name: the device id finds it."""
        qemu = self.boot()
        self.successResultOf(self.plug("hotadd", "disk", disk(), "rbd:pool/vol"))
        qemu.blocks["disk-11111111-2222-3333"][0] = "json:{\"driver\": \"rbd\", \"pool\": \"pool\"}"
        self.successResultOf(self.plug("hotremove", "disk", disk(), "rbd:pool/vol"))
        self.assertEqual(qemu.qemu.arguments("device_del"), [{"id": "/machine/peripheral/disk-11111111-2222-3333"}])
        self.assertEqual(self.record()["disks"], [["/srv/disk0", "rw", "disk0", 12]])
