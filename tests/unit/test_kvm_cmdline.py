"""Tests for the qemu command line built from KVM hvparams."""

from __future__ import annotations

import json
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti.backend.hypervisor.kvm_cmdline import (
    KVMParameterError,
    RuntimePaths,
    build_command,
    detect_accel,
    escape_opt,
    incoming_tcp,
    migration_parameters,
)
from tests.testdata import TESTDATA

CONFIG = str(TESTDATA / "config.data")
UUID = "6b9a3b3e-7f2c-4d5e-9a1b-2c3d4e5f6a7b"
PATHS = RuntimePaths(
    qmp_socket="/run/ganeti/kvm/ctrl/inst1.qmp",
    serial_socket="/run/ganeti/kvm/ctrl/inst1.serial",
    pidfile="/run/ganeti/kvm/pid/inst1",
)
MAC0 = "aa:00:00:11:22:33"
MAC1 = "aa:00:00:11:22:34"

# The kvm hvparams of a Ganeti 3.0 cluster (as in config.data), with no
# kernel so that the VM boots from its disks.
BASE: dict[str, Any] = {
    "acpi": True, "boot_order": "disk", "cdrom_image_path": "", "cpu_cores": 0,
    "cpu_sockets": 0, "cpu_threads": 0, "cpu_type": "", "disk_aio": "threads",
    "disk_cache": "default", "disk_discard": "default", "disk_type": "paravirtual",
    "kernel_path": "", "kvm_path": "/usr/bin/kvm", "machine_version": "", "mem_path": "",
    "migration_bandwidth": 32, "migration_downtime": 30, "nic_type": "paravirtual",
    "serial_console": True, "serial_speed": 38400, "vnc_bind_address": "", "vhost_net": False,
    "vnet_hdr": True, "virtio_net_queues": 1, "spice_bind": "", "kvm_extra": "",
}


def params(**overrides: Any) -> dict[str, Any]:
    result = dict(BASE)
    result.update(overrides)
    return result


def build(hvparams: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
    args: dict[str, Any] = {
        "instance_name": "inst1.example.com", "uuid": UUID, "memory_mib": 512, "vcpus": 2,
        "hvparams": params() if hvparams is None else hvparams,
        "disks": [("/srv/ganeti/file-storage/inst1/disk0", "rw")],
        "nics": [(MAC0, "tap0", None)], "paths": PATHS,
    }
    args.update(kwargs)
    return build_command(**args)


def option(argv: list[str], name: str) -> list[str]:
    """Every value given to option C{name}, in order."""
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == name]


def nic_devices(argv: list[str]) -> list[str]:
    """The C{-device} values but the balloon every instance has."""
    return [d for d in option(argv, "-device") if not d.startswith("virtio-balloon,")]


class BasicsTests(SynchronousTestCase):
    def test_identity_memory_cpus(self) -> None:
        argv = build()
        self.assertEqual(argv[0], "/usr/bin/kvm")
        self.assertEqual(option(argv, "-name"), ["inst1.example.com"])
        self.assertEqual(option(argv, "-uuid"), [UUID])
        self.assertEqual(option(argv, "-m"), ["512"])
        self.assertIn("virtio-balloon,id=balloon", option(argv, "-device"))  # for runtime memory changes
        self.assertEqual(option(argv, "-smp"), ["2"])
        self.assertEqual(option(argv, "-pidfile"), [PATHS.pidfile])

    def test_foreground_and_no_shutdown(self) -> None:
        """qemu stays in the foreground, and a guest shutdown only stops the VM."""
        argv = build()
        self.assertNotIn("-daemonize", argv)
        self.assertIn("-no-shutdown", argv)
        self.assertIn("-nodefaults", argv)
        self.assertNotIn("-no-reboot", argv)
        self.assertIn("-no-reboot", build(params(reboot_behavior="exit")))

    def test_qmp_socket(self) -> None:
        self.assertEqual(option(build(), "-qmp"), [f"unix:{PATHS.qmp_socket},server=on,wait=off"])

    def test_machine_accel(self) -> None:
        self.assertEqual(option(build(), "-machine"), ["pc,accel=kvm"])
        self.assertEqual(option(build(accel="tcg"), "-machine"), ["pc,accel=tcg"])
        self.assertEqual(option(build(params(machine_version="q35", acpi=False)), "-machine"),
                         ["q35,accel=kvm,acpi=off"])

    def test_detect_accel(self) -> None:
        self.assertEqual(detect_accel(True), "kvm")
        self.assertEqual(detect_accel(False), "tcg")

    def test_binary(self) -> None:
        self.assertEqual(build(binary="/usr/bin/qemu-system-x86_64")[0], "/usr/bin/qemu-system-x86_64")
        self.assertEqual(build(params(kvm_path=""))[0], "qemu-system-x86_64")

    def test_cpu_topology_and_type(self) -> None:
        argv = build(params(cpu_sockets=1, cpu_cores=2, cpu_threads=2, cpu_type="host"), vcpus=4)
        self.assertEqual(option(argv, "-smp"), ["4,sockets=1,cores=2,threads=2"])
        self.assertEqual(option(argv, "-cpu"), ["host"])
        self.assertEqual(option(build(), "-cpu"), [])

    def test_mem_path(self) -> None:
        self.assertEqual(option(build(params(mem_path="/hugepages")), "-mem-path"), ["/hugepages"])

    def test_localtime_and_extra(self) -> None:
        argv = build(params(use_localtime=True, kvm_extra="-device 'virtio-rng-pci' -s"))
        self.assertEqual(option(argv, "-rtc"), ["base=localtime"])
        self.assertEqual(argv[-3:], ["-device", "virtio-rng-pci", "-s"])

    def test_missing_hvparams_take_defaults(self) -> None:
        argv = build({})
        self.assertEqual(argv[0], "qemu-system-x86_64")
        self.assertEqual(option(argv, "-boot"), ["order=c"])
        self.assertEqual(nic_devices(argv)[0].split(",")[0], "virtio-net-pci")

    def test_ganeti_cluster_hvparams(self) -> None:
        """The kvm hvparams of a real Ganeti 3.0.2 cluster build a command line."""
        with open(CONFIG) as f:
            hvparams = json.load(f)["cluster"]["hvparams"]["kvm"]
        argv = build(hvparams)
        self.assertEqual(option(argv, "-kernel"), ["/boot/vmlinuz-3-kvmU"])
        self.assertEqual(option(argv, "-append"), ["root=/dev/vda1 console=ttyS0,38400 ro"])
        self.assertEqual(option(argv, "-boot"), [])


class DiskTests(SynchronousTestCase):
    def test_virtio(self) -> None:
        argv = build(disks=[("/srv/d0", "rw"), ("/srv/d1", "ro")])
        self.assertEqual(option(argv, "-drive"), [
            "file=/srv/d0,format=raw,if=virtio,index=0,aio=threads",
            "file=/srv/d1,format=raw,if=virtio,index=1,aio=threads,readonly=on",
        ])

    def test_emulated_with_cache_and_discard(self) -> None:
        argv = build(params(disk_type="ide", disk_cache="none", disk_aio="native", disk_discard="unmap"),
                     disks=[("/srv/d0", "rw")])
        self.assertEqual(option(argv, "-drive"),
                         ["file=/srv/d0,format=raw,if=ide,index=0,cache=none,aio=native,discard=unmap"])

    def test_comma_in_path_is_doubled(self) -> None:
        self.assertEqual(escape_opt("a,b"), "a,,b")
        argv = build(disks=[("/srv/a,b", "rw")])
        self.assertTrue(option(argv, "-drive")[0].startswith("file=/srv/a,,b,format=raw"))

    def test_diskless(self) -> None:
        self.assertEqual(option(build(disks=[]), "-drive"), [])

    def test_cdrom(self) -> None:
        argv = build(params(cdrom_image_path="/srv/boot.iso", boot_order="cdrom"))
        self.assertEqual(option(argv, "-drive")[-1],
                         "file=/srv/boot.iso,format=raw,media=cdrom,if=ide,index=2,readonly=on")
        self.assertEqual(option(argv, "-boot"), ["order=d"])

    def test_boot_orders(self) -> None:
        self.assertEqual(option(build(params(boot_order="network")), "-boot"), ["order=n"])
        self.assertEqual(option(build(params(boot_order="disk")), "-boot"), ["order=c"])


class NICTests(SynchronousTestCase):
    def test_tap_virtio(self) -> None:
        argv = build(nics=[(MAC0, "tap0", None)])
        self.assertEqual(option(argv, "-netdev"), ["tap,id=nic0,ifname=tap0,script=no,downscript=no,vnet_hdr=on"])
        self.assertEqual(nic_devices(argv), [f"virtio-net-pci,netdev=nic0,mac={MAC0},id=nic0-dev"])

    def test_vhost_and_multiqueue(self) -> None:
        argv = build(params(vhost_net=True, vnet_hdr=False, virtio_net_queues=4))
        self.assertEqual(option(argv, "-netdev"),
                         ["tap,id=nic0,ifname=tap0,script=no,downscript=no,vnet_hdr=off,vhost=on,queues=4"])
        self.assertEqual(nic_devices(argv),
                         [f"virtio-net-pci,netdev=nic0,mac={MAC0},id=nic0-dev,mq=on,vectors=10"])

    def test_user_mode_and_models(self) -> None:
        """No tap means user-mode networking; a NIC's own model beats nic_type."""
        argv = build(params(nic_type="rtl8139"), nics=[(MAC0, None, "e1000"), (MAC1.upper(), "tap1", None)])
        self.assertEqual(option(argv, "-netdev"),
                         ["user,id=nic0", "tap,id=nic1,ifname=tap1,script=no,downscript=no"])
        self.assertEqual(nic_devices(argv), [
            f"e1000,netdev=nic0,mac={MAC0},id=nic0-dev",
            f"rtl8139,netdev=nic1,mac={MAC1},id=nic1-dev",
        ])

    def test_no_nics(self) -> None:
        argv = build(nics=[])
        self.assertEqual(option(argv, "-netdev"), [])
        self.assertEqual(nic_devices(argv), [])


class ConsoleTests(SynchronousTestCase):
    def test_serial_console(self) -> None:
        self.assertEqual(option(build(), "-serial"), [f"unix:{PATHS.serial_socket},server=on,wait=off"])
        self.assertEqual(option(build(params(serial_console=False)), "-serial"), ["none"])

    def test_no_vnc(self) -> None:
        argv = build()
        self.assertEqual(option(argv, "-display"), ["none"])
        self.assertEqual(option(argv, "-vnc"), [])

    def test_vnc(self) -> None:
        argv = build(params(vnc_bind_address="0.0.0.0", keymap="de"), vnc_port=5903)
        self.assertEqual(option(argv, "-vnc"), ["0.0.0.0:3"])
        self.assertEqual(option(argv, "-vga"), ["std"])
        self.assertEqual(option(argv, "-k"), ["de"])
        self.assertEqual(option(argv, "-display"), [])

    def test_vnc_ipv6_and_password(self) -> None:
        argv = build(params(vnc_bind_address="::1", vnc_password_file="/etc/ganeti/vnc", vga="cirrus"),
                     vnc_port=5900)
        self.assertEqual(option(argv, "-vnc"), ["[::1]:0,password=on"])
        self.assertEqual(option(argv, "-vga"), ["cirrus"])


class MigrationTests(SynchronousTestCase):
    def test_incoming(self) -> None:
        self.assertEqual(option(build(), "-incoming"), [])
        argv = build(incoming=incoming_tcp("192.0.2.7", 8102))
        self.assertEqual(option(argv, "-incoming"), ["tcp:192.0.2.7:8102"])
        self.assertEqual(option(build(incoming="defer"), "-incoming"), ["defer"])

    def test_incoming_tcp(self) -> None:
        self.assertEqual(incoming_tcp("::", 8102), "tcp:[::]:8102")
        self.assertRaises(KVMParameterError, incoming_tcp, "0.0.0.0", 0)

    def test_migration_parameters(self) -> None:
        self.assertEqual(migration_parameters(params()),
                         {"max-bandwidth": 32 * 1024 * 1024, "downtime-limit": 30})
        self.assertRaises(KVMParameterError, migration_parameters, params(migration_bandwidth=0))


class RefusedTests(SynchronousTestCase):
    def assertRefused(self, fragment: str, hvparams: dict[str, Any] | None = None, **kwargs: Any) -> None:
        e = self.assertRaises(KVMParameterError, build, hvparams, **kwargs)
        self.assertIn(fragment, str(e))

    def test_bad_hvparams(self) -> None:
        self.assertRefused("disk_type", params(disk_type="floppy"))
        self.assertRefused("nic_type", params(nic_type="bogus"))
        self.assertRefused("disk_cache", params(disk_cache="unsafe-ish"))
        self.assertRefused("boot_order", params(boot_order="usb"))
        self.assertRefused("cdrom_image_path", params(boot_order="cdrom"))
        self.assertRefused("disk_cache=none", params(disk_aio="native"))
        self.assertRefused("serial_speed", params(serial_speed=1234))
        self.assertRefused("serial_console", params(serial_console="yes"))
        self.assertRefused("cpu_cores", params(cpu_cores=-1))
        self.assertRefused("fewer than", params(cpu_sockets=1, cpu_cores=1, cpu_threads=1), vcpus=2)
        self.assertRefused("virtio_net_queues", params(virtio_net_queues=0))
        self.assertRefused("kvm_extra", params(kvm_extra="-foo 'unbalanced"))
        self.assertRefused("machine_version", params(machine_version="pc,accel=tcg"))
        self.assertRefused("kernel_path", params(kernel_path="vmlinuz"))

    def test_unsupported_features(self) -> None:
        self.assertRefused("SPICE", params(spice_bind="0.0.0.0"))
        self.assertRefused("vnc_tls", params(vnc_tls=True))
        self.assertRefused("use_chroot", params(use_chroot=True))
        self.assertRefused("security_model", params(security_model="user"))
        self.assertRefused("cpu_type=host", params(cpu_type="host"), accel="tcg")

    def test_bad_instance(self) -> None:
        self.assertRefused("instance name", instance_name="")
        self.assertRefused("instance name", instance_name="a b")
        self.assertRefused("UUID", uuid="not-a-uuid")
        self.assertRefused("memory", memory_mib=0)
        self.assertRefused("memory", memory_mib="512")
        self.assertRefused("vcpus", vcpus=0)
        self.assertRefused("accel", accel="xen")

    def test_bad_disks(self) -> None:
        self.assertRefused("absolute", disks=[("disk0", "rw")])
        self.assertRefused("mode", disks=[("/srv/d0", "rx")])
        self.assertRefused("(path, mode[, id, PCI slot]) tuple", disks=["/srv/d0"])
        self.assertRefused("read-only", params(disk_type="ide"), disks=[("/srv/d0", "ro")])
        self.assertRefused("limited to 4", params(disk_type="ide"), disks=[(f"/srv/d{i}", "rw") for i in range(5)])
        self.assertRefused("PCI slot 32", disks=[("/srv/d0", "rw", "disk0", 32)])
        self.assertRefused("device id 'disk0,addr=3'", disks=[("/srv/d0", "rw", "disk0,addr=3", 12)])

    def test_bad_nics(self) -> None:
        self.assertRefused("MAC", nics=[("aa:bb", None, None)])
        self.assertRefused("repeats", nics=[(MAC0, None, None), (MAC0.upper(), None, None)])
        self.assertRefused("tap interface", nics=[(MAC0, "tap0,script=/bin/evil", None)])
        self.assertRefused("model", nics=[(MAC0, None, "virtio")])
        self.assertRefused("(mac, tap, model[, id, PCI slot]) tuple", nics=[(MAC0, None)])
        self.assertRefused("PCI slot True", nics=[(MAC0, "tap0", None, "nic0", True)])
        self.assertRefused("bad id ''", nics=[(MAC0, "tap0", None, "", 12)])


    def test_bad_consoles(self) -> None:
        self.assertRefused("vnc_bind_address", vnc_port=5901)
        self.assertRefused("VNC port", params(vnc_bind_address="0.0.0.0"), vnc_port=5800)
        self.assertRefused("incoming", incoming="http://example.com/")
        self.assertRefused("pidfile", paths=RuntimePaths("/run/q", "/run/s", "relative.pid"))


class PciSlotTests(SynchronousTestCase):
    """Disks and NICs at the PCI slots the runtime record gives (L{ganeti.backend.hypervisor.kvm_pci})."""

    def test_placed_devices(self) -> None:
        argv = build(disks=[("/srv/d0", "rw", "disk0", 12), ("/srv/d1", "ro", "disk-1111-22-33", 15)],
                     nics=[(MAC0, "tap0", None, "nic-aaaa-bb-cc", 13)])
        joined = " ".join(argv)
        self.assertIn("-drive file=/srv/d0,format=raw,if=none,id=disk0,aio=threads "
                      "-device virtio-blk-pci,drive=disk0,id=disk0,addr=0xc", joined)
        self.assertIn("-drive file=/srv/d1,format=raw,if=none,id=disk-1111-22-33,aio=threads,readonly=on "
                      "-device virtio-blk-pci,drive=disk-1111-22-33,id=disk-1111-22-33,addr=0xf", joined)
        self.assertIn("-netdev tap,id=nic-aaaa-bb-cc,ifname=tap0,script=no,downscript=no,vnet_hdr=on "
                      "-device virtio-net-pci,netdev=nic-aaaa-bb-cc,mac=aa:00:00:11:22:33,id=nic-aaaa-bb-cc-dev,"
                      "addr=0xd", joined)

    def test_emulated_disks_and_isa_nics_have_no_slot(self) -> None:
        argv = build(params(disk_type="ide", nic_type="ne2k_isa"), disks=[("/srv/d0", "rw", "disk0", 12)],
                     nics=[(MAC0, "tap0", None, "nic0", 13)])
        self.assertIn("file=/srv/d0,format=raw,if=ide,index=0,aio=threads", argv)
        self.assertFalse([a for a in argv if "addr=" in a], argv)
