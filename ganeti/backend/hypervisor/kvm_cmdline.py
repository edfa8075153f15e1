"""The qemu command line for a KVM instance, built from its hvparams.

Pure: no I/O, no Twisted.  L{build_command} turns an instance's memory,
vcpus, disks, NICs and hvparams into the argv of C{qemu-system-x86_64}
(or the configured C{kvm_path}).  qemu runs in the foreground under our
supervision (no C{-daemonize}), with a QMP monitor on a Unix socket, no
default devices (C{-nodefaults}) and C{-no-shutdown}, so that a guest
shutdown stops the VM and reports a C{SHUTDOWN} event instead of exiting.

Options that take comma-separated key=value lists get their commas doubled,
as qemu expects, so paths with commas stay one value.
"""

from __future__ import annotations

import re
import shlex
import uuid as uuid_module
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ganeti.backend.hypervisor import HypervisorError

DEFAULT_BINARY = "qemu-system-x86_64"
VNC_BASE_PORT = 5900

DISK_RDWR = "rw"
DISK_RDONLY = "ro"

# hvparams we read, with the value used when the dict lacks the key.
DEFAULTS: dict[str, Any] = {
    "kvm_path": "",
    "acpi": True,
    "boot_order": "disk",
    "cdrom_image_path": "",
    "cpu_cores": 0,
    "cpu_sockets": 0,
    "cpu_threads": 0,
    "cpu_type": "",
    "disk_aio": "threads",
    "disk_cache": "default",
    "disk_discard": "default",
    "disk_type": "paravirtual",
    "floppy_image_path": "",
    "initrd_path": "",
    "kernel_args": "ro",
    "kernel_path": "",
    "keymap": "",
    "kvm_extra": "",
    "machine_version": "",
    "mem_path": "",
    "nic_type": "paravirtual",
    "reboot_behavior": "reboot",
    "root_path": "/dev/vda1",
    "security_model": "none",
    "serial_console": True,
    "serial_speed": 38400,
    "spice_bind": "",
    "use_chroot": False,
    "use_localtime": False,
    "vga": "",
    "vhost_net": False,
    "virtio_net_queues": 1,
    "vnc_bind_address": "",
    "vnc_password_file": "",
    "vnc_tls": False,
    "vnet_hdr": True,
}

# Ganeti's disk_type -> qemu's -drive if=
DISK_INTERFACES = {"paravirtual": "virtio", "ide": "ide"}
# Ganeti's nic_type -> qemu device model
NIC_MODELS = {
    "paravirtual": "virtio-net-pci",
    "e1000": "e1000",
    "rtl8139": "rtl8139",
    "ne2k_pci": "ne2k_pci",
    "ne2k_isa": "ne2k_isa",
    "i82551": "i82551",
    "i82557b": "i82557b",
    "i82559er": "i82559er",
    "pcnet": "pcnet",
}
DISK_CACHES = {"default", "none", "writethrough", "writeback"}
DISK_AIOS = {"threads", "native", "io_uring"}
DISK_DISCARDS = {"default", "ignore", "unmap"}
# Ganeti's boot_order -> qemu's -boot order= letter
#: a userspace rbd disk: qemu opens the image through librbd
RBD_URI_PREFIX = "rbd:"
BOOT_DEVICES = {"floppy": "a", "cdrom": "d", "disk": "c", "network": "n"}
REBOOT_BEHAVIORS = {"reboot", "exit"}
SERIAL_SPEEDS = {9600, 19200, 38400, 57600, 115200}
ACCELS = {"kvm", "tcg"}
INCOMING_PREFIXES = ("tcp:", "unix:", "fd:", "exec:")

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$", re.IGNORECASE)
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
#: qemu's ids of devices and drives (a letter first)
_DEVID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


class KVMParameterError(HypervisorError):
    """An hvparam or an instance property cannot be turned into a qemu option."""


@attrs.frozen
class RuntimePaths:
    """Where one instance's runtime files live on the node.

    @ivar qmp_socket: Unix socket of the QMP monitor (qemu listens).
    @ivar serial_socket: Unix socket of the serial console (qemu listens).
    @ivar pidfile: file qemu writes its pid to.
    @ivar events_socket: Unix socket of a second QMP monitor, for NodeD's
        event watcher (Ganeti's kvmd socket); None: no second monitor.
    """

    qmp_socket: str
    serial_socket: str
    pidfile: str
    events_socket: str | None = None


def escape_opt(value: str) -> str:
    """Double the commas of C{value}, so qemu reads it as one option value."""
    return value.replace(",", ",,")


def migration_parameters(hvparams: Mapping[str, Any]) -> dict[str, int]:
    """The QMP C{migrate-set-parameters} arguments from Ganeti's hvparams.

    C{migration_bandwidth} is in MiB/s and C{migration_downtime} in ms.
    """
    bandwidth = _positive_int(hvparams, "migration_bandwidth", 32)
    downtime = _positive_int(hvparams, "migration_downtime", 30)
    return {"max-bandwidth": bandwidth * 1024 * 1024, "downtime-limit": downtime}


def incoming_tcp(address: str, port: int) -> str:
    """The C{-incoming} URI for a migration target listening on C{address:port}."""
    if not 0 < port < 65536:
        raise KVMParameterError(f"bad migration port {port!r}")
    host = f"[{address}]" if ":" in address else address
    return f"tcp:{host}:{port}"


def _get(hvparams: Mapping[str, Any], key: str) -> Any:
    value = hvparams.get(key, DEFAULTS.get(key))
    return DEFAULTS.get(key) if value is None else value


def _positive_int(hvparams: Mapping[str, Any], key: str, default: int) -> int:
    value = hvparams.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KVMParameterError(f"hvparam {key} must be a positive integer, not {value!r}")
    return value


def _choice(hvparams: Mapping[str, Any], key: str, allowed: Any) -> Any:
    value = _get(hvparams, key)
    if value not in allowed:
        raise KVMParameterError(
            f"hvparam {key}={value!r} is not supported; use one of {', '.join(sorted(map(str, allowed)))}")
    return value


def _bool(hvparams: Mapping[str, Any], key: str) -> bool:
    value = _get(hvparams, key)
    if not isinstance(value, bool):
        raise KVMParameterError(f"hvparam {key} must be a boolean, not {value!r}")
    return value


def _nonneg_int(hvparams: Mapping[str, Any], key: str) -> int:
    value = _get(hvparams, key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise KVMParameterError(f"hvparam {key} must be a non-negative integer, not {value!r}")
    return value


def _string(hvparams: Mapping[str, Any], key: str) -> str:
    value = _get(hvparams, key)
    if not isinstance(value, str):
        raise KVMParameterError(f"hvparam {key} must be a string, not {value!r}")
    return value


def _refuse_unsupported(hvparams: Mapping[str, Any]) -> None:
    if _string(hvparams, "spice_bind"):
        raise KVMParameterError("hvparam spice_bind: SPICE consoles are not supported; use VNC")
    if _bool(hvparams, "vnc_tls"):
        raise KVMParameterError("hvparam vnc_tls: VNC over TLS is not supported")
    if _bool(hvparams, "use_chroot"):
        raise KVMParameterError("hvparam use_chroot: running qemu in a chroot is not supported")
    if _string(hvparams, "security_model") not in ("", "none"):
        raise KVMParameterError("hvparam security_model: only 'none' is supported")
    if _string(hvparams, "floppy_image_path"):
        raise KVMParameterError("hvparam floppy_image_path: floppy images are not supported")


def _check_path(what: str, path: str) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise KVMParameterError(f"{what} must be an absolute path, not {path!r}")
    if "\n" in path or "\0" in path:
        raise KVMParameterError(f"{what} contains a newline or NUL: {path!r}")
    return path


def _machine(hvparams: Mapping[str, Any], accel: str) -> list[str]:
    if accel not in ACCELS:
        raise KVMParameterError(f"accel must be one of {', '.join(sorted(ACCELS))}, not {accel!r}")
    machine = _string(hvparams, "machine_version") or "pc"
    if "," in machine:
        raise KVMParameterError(f"hvparam machine_version={machine!r} must be a machine type only")
    parts = [machine, f"accel={accel}"]
    if not _bool(hvparams, "acpi"):
        parts.append("acpi=off")
    return ["-machine", ",".join(parts)]


def _cpu(hvparams: Mapping[str, Any], vcpus: int, accel: str) -> list[str]:
    if isinstance(vcpus, bool) or not isinstance(vcpus, int) or vcpus < 1:
        raise KVMParameterError(f"vcpus must be a positive integer, not {vcpus!r}")
    smp = [str(vcpus)]
    topology = {name: _nonneg_int(hvparams, f"cpu_{name}") for name in ("sockets", "cores", "threads")}
    for name, count in topology.items():
        if count:
            smp.append(f"{name}={count}")
    if all(topology.values()):
        total = topology["sockets"] * topology["cores"] * topology["threads"]
        if total < vcpus:
            raise KVMParameterError(
                f"cpu_sockets*cpu_cores*cpu_threads = {total} is fewer than the {vcpus} vcpus")
    args = ["-smp", ",".join(smp)]
    cpu_type = _string(hvparams, "cpu_type")
    if cpu_type:
        if cpu_type == "host" and accel != "kvm":
            raise KVMParameterError("hvparam cpu_type=host needs KVM acceleration (accel=kvm)")
        args += ["-cpu", cpu_type]
    return args


def _memory(hvparams: Mapping[str, Any], memory_mib: int) -> list[str]:
    if isinstance(memory_mib, bool) or not isinstance(memory_mib, int) or memory_mib < 1:
        raise KVMParameterError(f"memory must be a positive number of MiB, not {memory_mib!r}")
    args = ["-m", str(memory_mib)]
    mem_path = _string(hvparams, "mem_path")
    if mem_path:
        args += ["-mem-path", _check_path("hvparam mem_path", mem_path)]
    return args


def _drives(hvparams: Mapping[str, Any], disks: Sequence[Sequence[Any]]) -> list[str]:
    interface = DISK_INTERFACES[_choice(hvparams, "disk_type", DISK_INTERFACES)]
    cache = _choice(hvparams, "disk_cache", DISK_CACHES)
    aio = _choice(hvparams, "disk_aio", DISK_AIOS)
    discard = _choice(hvparams, "disk_discard", DISK_DISCARDS)
    if aio == "native" and cache != "none":
        raise KVMParameterError("hvparam disk_aio=native needs disk_cache=none")
    if interface == "ide" and len(disks) > 4:
        raise KVMParameterError(f"emulated (ide) disks are limited to 4, not {len(disks)}")
    args: list[str] = []
    for index, disk in enumerate(disks):
        try:
            path, mode, devid, slot = _padded(disk, 2, (None, None))
        except (TypeError, ValueError):
            raise KVMParameterError(f"disk {index} must be a (path, mode[, id, PCI slot]) tuple, not {disk!r}") \
                from None
        if not (isinstance(path, str) and path.startswith(RBD_URI_PREFIX)):  # rbd:<pool>/<image>[:opts]
            _check_path(f"disk {index} path", path)
        elif "\n" in path or "\0" in path:
            raise KVMParameterError(f"disk {index} URI contains a newline or NUL: {path!r}")
        if mode not in (DISK_RDWR, DISK_RDONLY):
            raise KVMParameterError(f"disk {index} mode must be {DISK_RDWR!r} or {DISK_RDONLY!r}, not {mode!r}")
        if mode == DISK_RDONLY and interface == "ide":
            raise KVMParameterError(f"disk {index} is read-only, which emulated (ide) hard disks cannot be")
        placed = interface == "virtio" and devid is not None and slot is not None
        if placed and not (isinstance(devid, str) and _DEVID_RE.match(devid) and _slot(slot)):
            raise KVMParameterError(f"disk {index} has a bad device id {devid!r} or PCI slot {slot!r}")
        where = ["if=none", f"id={devid}"] if placed else [f"if={interface}", f"index={index}"]
        opts = [f"file={escape_opt(path)}", "format=raw"] + where
        if cache != "default":
            opts.append(f"cache={cache}")
        opts.append(f"aio={aio}")
        if discard != "default":
            opts.append(f"discard={discard}")
        if mode == DISK_RDONLY:
            opts.append("readonly=on")
        args += ["-drive", ",".join(opts)]
        if placed:  # an explicit slot (L{ganeti.backend.hypervisor.kvm_pci}), so a hotplug can be migrated
            args += ["-device", f"virtio-blk-pci,drive={devid},id={devid},addr={slot:#x}"]
    cdrom = _string(hvparams, "cdrom_image_path")
    if cdrom:
        _check_path("hvparam cdrom_image_path", cdrom)
        args += ["-drive", f"file={escape_opt(cdrom)},format=raw,media=cdrom,if=ide,index=2,readonly=on"]
    return args


def _padded(entry: Sequence[Any], short: int, tail: tuple[Any, ...]) -> tuple[Any, ...]:
    """C{entry}, given C{short} or C{short + len(tail)} long, padded with C{tail}."""
    items = tuple(entry)
    if len(items) == short:
        return items + tail
    if len(items) != short + len(tail):
        raise ValueError("wrong length")
    return items


def _slot(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 < value < 32


def _nics(hvparams: Mapping[str, Any], nics: Sequence[Sequence[Any]]) -> list[str]:
    default_type = _choice(hvparams, "nic_type", NIC_MODELS)
    vhost = _bool(hvparams, "vhost_net")
    vnet_hdr = _bool(hvparams, "vnet_hdr")
    queues = _get(hvparams, "virtio_net_queues")
    if isinstance(queues, bool) or not isinstance(queues, int) or not 1 <= queues <= 8:
        raise KVMParameterError(f"hvparam virtio_net_queues must be 1 to 8, not {queues!r}")
    args: list[str] = []
    macs: set[str] = set()
    for index, nic in enumerate(nics):
        try:
            mac, tap, nic_type, netdev_id, slot = _padded(nic, 3, (f"nic{index}", None))
        except (TypeError, ValueError):
            raise KVMParameterError(f"NIC {index} must be a (mac, tap, model[, id, PCI slot]) tuple, not {nic!r}") \
                from None
        if not (isinstance(netdev_id, str) and _DEVID_RE.match(netdev_id)) or not (slot is None or _slot(slot)):
            raise KVMParameterError(f"NIC {index} has a bad id {netdev_id!r} or PCI slot {slot!r}")
        if not isinstance(mac, str) or not _MAC_RE.match(mac):
            raise KVMParameterError(f"NIC {index} has a bad MAC address {mac!r}")
        if mac.lower() in macs:
            raise KVMParameterError(f"NIC {index} repeats MAC address {mac}")
        macs.add(mac.lower())
        nic_type = nic_type or default_type
        if nic_type not in NIC_MODELS:
            raise KVMParameterError(
                f"NIC {index} model {nic_type!r} is not supported; use one of {', '.join(sorted(NIC_MODELS))}")
        model = NIC_MODELS[nic_type]
        multiqueue = model == "virtio-net-pci" and queues > 1
        if tap is None:
            netdev = f"user,id={netdev_id}"
        else:
            if not isinstance(tap, str) or not _IFNAME_RE.match(tap):
                raise KVMParameterError(f"NIC {index} has a bad tap interface name {tap!r}")
            netdev = f"tap,id={netdev_id},ifname={tap},script=no,downscript=no"
            if model == "virtio-net-pci":
                netdev += ",vnet_hdr=" + ("on" if vnet_hdr else "off")
                if vhost:
                    netdev += ",vhost=on"
                if multiqueue:
                    netdev += f",queues={queues}"
        device = f"{model},netdev={netdev_id},mac={mac.lower()},id={netdev_id}-dev"
        if multiqueue and tap is not None:
            device += f",mq=on,vectors={2 * queues + 2}"
        if slot is not None and model != "ne2k_isa":
            device += f",addr={slot:#x}"
        args += ["-netdev", netdev, "-device", device]
    return args


def _boot(hvparams: Mapping[str, Any]) -> list[str]:
    kernel = _string(hvparams, "kernel_path")
    if kernel:
        _check_path("hvparam kernel_path", kernel)
        args = ["-kernel", kernel]
        initrd = _string(hvparams, "initrd_path")
        if initrd:
            args += ["-initrd", _check_path("hvparam initrd_path", initrd)]
        append = []
        root = _string(hvparams, "root_path")
        if root:
            append.append(f"root={root}")
        if _bool(hvparams, "serial_console"):
            append.append(f"console=ttyS0,{_get(hvparams, 'serial_speed')}")
        kernel_args = _string(hvparams, "kernel_args")
        if kernel_args:
            append.append(kernel_args)
        if append:
            args += ["-append", " ".join(append)]
        return args
    order = _choice(hvparams, "boot_order", BOOT_DEVICES)
    if order == "cdrom" and not _string(hvparams, "cdrom_image_path"):
        raise KVMParameterError("hvparam boot_order=cdrom needs cdrom_image_path")
    return ["-boot", f"order={BOOT_DEVICES[order]}"]


def _console(hvparams: Mapping[str, Any], paths: RuntimePaths, vnc_port: int | None) -> list[str]:
    args: list[str] = []
    if _bool(hvparams, "serial_console"):
        speed = _get(hvparams, "serial_speed")
        if speed not in SERIAL_SPEEDS:
            raise KVMParameterError(
                f"hvparam serial_speed={speed!r} is not supported; use one of "
                f"{', '.join(map(str, sorted(SERIAL_SPEEDS)))}")
        args += ["-serial", f"unix:{escape_opt(_check_path('serial socket', paths.serial_socket))},server=on,wait=off"]
    else:
        args += ["-serial", "none"]
    vga = _string(hvparams, "vga")
    if vnc_port is None:
        args += ["-display", "none"]
        if vga:
            args += ["-vga", vga]
        return args
    if isinstance(vnc_port, bool) or not isinstance(vnc_port, int) or not VNC_BASE_PORT <= vnc_port < 65536:
        raise KVMParameterError(f"VNC port must be from {VNC_BASE_PORT} to 65535, not {vnc_port!r}")
    bind = _string(hvparams, "vnc_bind_address")
    if not bind:
        raise KVMParameterError("a VNC console needs hvparam vnc_bind_address")
    if ":" in bind and not bind.startswith("["):
        bind = f"[{bind}]"
    vnc = f"{bind}:{vnc_port - VNC_BASE_PORT}"
    if _string(hvparams, "vnc_password_file"):
        vnc += ",password=on"            # the password itself is set over QMP
    args += ["-vnc", vnc, "-vga", vga or "std"]
    keymap = _string(hvparams, "keymap")
    if keymap:
        args += ["-k", keymap]
    return args


def build_command(
    instance_name: str,
    uuid: str,
    memory_mib: int,
    vcpus: int,
    hvparams: Mapping[str, Any],
    disks: Sequence[Sequence[Any]],
    nics: Sequence[Sequence[Any]],
    paths: RuntimePaths,
    vnc_port: int | None = None,
    incoming: str | None = None,
    accel: str = "kvm",
    binary: str | None = None,
) -> list[str]:
    """The argv that runs one instance under qemu, in the foreground.

    @param instance_name: the instance's name (qemu's C{-name}).
    @param uuid: the instance's UUID.
    @param memory_mib: guest memory in MiB.
    @param vcpus: number of virtual CPUs.
    @param hvparams: the instance's filled kvm hvparams; missing keys take
        L{DEFAULTS}, keys this module does not know are ignored.
    @param disks: C{(path, mode)} per disk, mode L{DISK_RDWR} or L{DISK_RDONLY};
        or C{(path, mode, id, PCI slot)}: a paravirtual disk then is a
        C{virtio-blk-pci} device with that id at that slot.
    @param nics: C{(mac, tap interface or None, nic_type or None)} per NIC;
        no tap means qemu's user-mode networking, no nic_type means the
        hvparam C{nic_type}; or C{(mac, tap, nic_type, netdev id, PCI slot
        or None)}.
    @param paths: the instance's L{RuntimePaths}.
    @param vnc_port: the TCP port of the VNC console, or C{None} for none.
    @param incoming: C{-incoming} URI when this is a migration target
        (C{tcp:host:port}, C{unix:path}, ... or C{defer}).
    @param accel: C{"kvm"} when /dev/kvm is usable, else C{"tcg"}.
    @param binary: overrides the hvparam C{kvm_path}.
    @raise KVMParameterError: for any value qemu could not be given.
    """
    if not isinstance(instance_name, str) or not instance_name or any(c.isspace() for c in instance_name):
        raise KVMParameterError(f"bad instance name {instance_name!r}")
    try:
        canonical_uuid = str(uuid_module.UUID(uuid))
    except (TypeError, ValueError, AttributeError):
        raise KVMParameterError(f"bad instance UUID {uuid!r}") from None
    _refuse_unsupported(hvparams)
    reboot = _choice(hvparams, "reboot_behavior", REBOOT_BEHAVIORS)
    argv = [binary or _string(hvparams, "kvm_path") or DEFAULT_BINARY]
    argv += ["-name", escape_opt(instance_name), "-uuid", canonical_uuid]
    argv += _machine(hvparams, accel)
    argv += _cpu(hvparams, vcpus, accel)
    argv += _memory(hvparams, memory_mib)
    argv += ["-nodefaults", "-no-user-config", "-no-shutdown"]
    argv += ["-device", "virtio-balloon,id=balloon"]  # runtime memory changes (QMP balloon)
    if reboot == "exit":
        argv.append("-no-reboot")
    argv += ["-pidfile", _check_path("pidfile", paths.pidfile)]
    argv += ["-qmp", f"unix:{escape_opt(_check_path('QMP socket', paths.qmp_socket))},server=on,wait=off"]
    if paths.events_socket:
        argv += ["-qmp", f"unix:{escape_opt(_check_path('QMP event socket', paths.events_socket))},server=on,wait=off"]
    argv += _console(hvparams, paths, vnc_port)
    if _bool(hvparams, "use_localtime"):
        argv += ["-rtc", "base=localtime"]
    argv += _drives(hvparams, disks)
    argv += _nics(hvparams, nics)
    argv += _boot(hvparams)
    if incoming is not None:
        if not isinstance(incoming, str) or not (incoming == "defer" or incoming.startswith(INCOMING_PREFIXES)):
            raise KVMParameterError(f"bad incoming migration URI {incoming!r}")
        argv += ["-incoming", incoming]
    extra = _string(hvparams, "kvm_extra")
    if extra:
        try:
            argv += shlex.split(extra)
        except ValueError as e:
            raise KVMParameterError(f"hvparam kvm_extra cannot be split: {e}") from None
    return argv


def detect_accel(kvm_usable: bool) -> str:
    """C{"kvm"} when the caller found /dev/kvm usable, else software C{"tcg"}."""
    return "kvm" if kvm_usable else "tcg"
