"""Hotplug of disks and NICs into a running kvm guest, through QMP.

As Ganeti 3.0's kvm hypervisor, each device at the free PCI slot
L{ganeti.backend.hypervisor.kvm_pci} picks (kept in the runtime record, so
a migration target gets the device at the same slot):

  - disk add: HMP C{drive_add dummy file=<path or URI>,if=none,id=<id>,
    format=raw[,readonly=on][,cache,aio,discard]} (through QMP
    C{human-monitor-command}), then QMP C{device_add} of a
    C{virtio-blk-pci} with that drive and id;
  - disk remove: the drive is found by its file in C{query-block}, its
    device removed with C{device_del} (the guest must let go of it: the
    removal is awaited up to L{UNPLUG_TIMEOUT}), then HMP C{drive_del}
    (qemu may have dropped the drive with its device already);
  - NIC add: QMP C{netdev_add} of a tap device qemu opens by name, the tap
    connected to its link as at start-up (L{kvm_ifup}), then C{device_add}
    of the NIC model with the MAC; NIC remove: C{device_del}, C{netdev_del},
    then what the tap left (an Open vSwitch port, policy rules) is removed.

Device ids are C{disk-}/C{nic-} plus the Ganeti UUID up to its third
C{-} (Ganeti's naming).  Hotpluggable: disks with C{disk_type}
C{paravirtual}, NICs of every model but C{ne2k_isa}.  The instance's
runtime record follows every change (its C{disks} and C{nics}), so a
later hot-remove finds what was hot-added.
"""

from __future__ import annotations

from typing import Any

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm_cmdline as cmdline
from ganeti.backend.hypervisor import kvm_ifup, kvm_pci
from ganeti.backend.hypervisor.kvm_runtime import check_name

#: the kvm hypervisor object (L{ganeti.backend.hypervisor.kvm.KVMHypervisor}; not imported: it imports this)
KVMHypervisor = Any

ACTION_ADD, ACTION_REMOVE, ACTION_MODIFY = "hotadd", "hotremove", "hotmod"
ACTIONS = (ACTION_ADD, ACTION_REMOVE, ACTION_MODIFY)
DEV_DISK, DEV_NIC = "disk", "nic"
DEV_TYPES = (DEV_DISK, DEV_NIC)
#: seconds the guest has to release a device after C{device_del}
UNPLUG_TIMEOUT = 30.0
UNPLUG_POLL = 0.2


def device_id(kind: str, uuid: str | None) -> str:
    """Ganeti's hotplug device id: C{disk-}/C{nic-} and the UUID up to its third C{-}."""
    if not uuid:
        raise hv.HypervisorError("A %s without a UUID cannot be hotplugged" % kind)
    return "%s-%s" % (kind, "-".join(uuid.split("-")[:3]))


def check_supported(hyper: KVMHypervisor, name: str, dev_type: str | None = None,
                    hvparams: dict[str, Any] | None = None, nic_type: str | None = None) -> dict[str, Any]:
    """The runtime record of running instance C{name}, if what is asked can be hotplugged."""
    record: dict[str, Any] | None = hyper._live(check_name(name))
    if record is None or record.get("state") == "incoming":
        raise hv.HypervisorError("Instance %s is not running: nothing to hotplug into" % name)
    params = dict(cmdline.DEFAULTS, **(hvparams if hvparams is not None else record.get("hvparams") or {}))
    if dev_type == DEV_DISK and params.get("disk_type") != "paravirtual":
        raise hv.HypervisorError("Disks of disk_type %s cannot be hotplugged (only paravirtual)"
                                 % params.get("disk_type"))
    if dev_type == DEV_NIC and (nic_type or params.get("nic_type")) == "ne2k_isa":
        raise hv.HypervisorError("NICs of type ne2k_isa cannot be hotplugged")
    return record


async def _hmp(hyper: KVMHypervisor, protocol: Any, command: str) -> str:
    """Run HMP C{command}; its output, which must not report an error."""
    answer = await hyper._execute(protocol, "human-monitor-command", {"command-line": command})
    text = answer if isinstance(answer, str) else ""
    lowered = text.lower()
    if "error" in lowered or "could not" in lowered or "not found" in lowered or "invalid" in lowered:
        raise hv.HypervisorError("qemu refused '%s': %s" % (command.split(" ", 1)[0], text.strip()))
    return text


async def _wait_unplugged(hyper: KVMHypervisor, protocol: Any, gone: Any, what: str) -> None:
    deadline = hyper._reactor.seconds() + UNPLUG_TIMEOUT
    while not gone(await hyper._execute(protocol, "qom-list", {"path": "/machine/peripheral"}),
                   await hyper._execute(protocol, "query-block")):
        if hyper._reactor.seconds() >= deadline:
            raise hv.HypervisorError("The guest did not release %s within %d seconds (is its OS up and does"
                                     " it support ACPI hotplug?)" % (what, UNPLUG_TIMEOUT))
        await hyper._sleep(UNPLUG_POLL)


def _ids(qom: Any) -> set[str]:
    return {str(entry.get("name")) for entry in qom or [] if isinstance(entry, dict)}


async def add_disk(hyper: KVMHypervisor, name: str, disk: dict[str, Any], path: str) -> None:
    """Hot-add C{disk} (its C{uuid}, C{mode}) whose device or URI is C{path}."""
    record = check_supported(hyper, name, DEV_DISK)
    params = dict(cmdline.DEFAULTS, **(record.get("hvparams") or {}))
    devid = device_id(DEV_DISK, disk.get("uuid"))
    if any(entry[0] == path for entry in record.get("disks") or []):
        raise hv.HypervisorError("Disk %s is already attached to instance %s" % (path, name))
    mode = cmdline.DISK_RDONLY if disk.get("mode") == cmdline.DISK_RDONLY else cmdline.DISK_RDWR
    opts = ["file=%s" % cmdline.escape_opt(path), "if=none", "id=%s" % devid, "format=raw"]
    if params.get("disk_cache") not in (None, "", "default"):
        opts.append("cache=%s" % params["disk_cache"])
    if params.get("disk_aio"):
        opts.append("aio=%s" % params["disk_aio"])
    if params.get("disk_discard") not in (None, "", "default"):
        opts.append("discard=%s" % params["disk_discard"])
    if mode == cmdline.DISK_RDONLY:
        opts.append("readonly=on")
    slot = kvm_pci.free_slot(record)
    async with hyper._qmp(name) as protocol:
        await _hmp(hyper, protocol, "drive_add dummy %s" % ",".join(opts))
        try:
            await hyper._execute(protocol, "device_add", {"driver": "virtio-blk-pci", "drive": devid, "id": devid,
                                                          "addr": kvm_pci.address(slot)})
        except Exception:
            await _drop_drive(hyper, protocol, devid)
            raise
    record.setdefault("disks", []).append([path, mode, devid, slot])
    hyper._write(name, record)


async def _drop_drive(hyper: KVMHypervisor, protocol: Any, drive: str) -> None:
    try:
        await _hmp(hyper, protocol, "drive_del %s" % drive)
    except hv.HypervisorError as e:
        if "not found" not in str(e).lower():
            raise


def _block_entry(blocks: Any, path: str) -> dict[str, Any] | None:
    for entry in blocks or []:
        inserted = entry.get("inserted") if isinstance(entry, dict) else None
        if isinstance(inserted, dict) and path in (inserted.get("file"), inserted.get("image", {}).get("filename")):
            found: dict[str, Any] = entry
            return found
    return None


async def remove_disk(hyper: KVMHypervisor, name: str, disk: dict[str, Any], path: str) -> None:
    """Hot-remove the disk whose device or URI is C{path} (or, hot-added, whose drive has its device id)."""
    record = check_supported(hyper, name, DEV_DISK)
    wanted = path
    async with hyper._qmp(name) as protocol:
        blocks = await hyper._execute(protocol, "query-block")
        entry = _block_entry(blocks, path)
        if entry is None and disk.get("uuid"):  # a hot-added drive qemu names by its URI's options (rbd)
            devid = device_id(DEV_DISK, disk.get("uuid"))
            entry = next((b for b in blocks or [] if isinstance(b, dict) and b.get("device") == devid), None)
            if entry is not None:
                path = str((entry.get("inserted") or {}).get("file") or path)
        if entry is None:
            raise hv.HypervisorError("Instance %s has no disk %s attached" % (name, path))
        drive, qdev = str(entry.get("device") or ""), str(entry.get("qdev") or "")
        target = qdev[:-len("/virtio-backend")] if qdev.endswith("/virtio-backend") else qdev
        if not target:
            raise hv.HypervisorError("Disk %s of instance %s has no device to remove" % (path, name))
        await hyper._execute(protocol, "device_del", {"id": target})

        def gone(_qom: Any, blocks: Any) -> bool:
            found = _block_entry(blocks, path)
            return found is None or not found.get("qdev")

        await _wait_unplugged(hyper, protocol, gone, "disk %s" % path)
        if drive and _block_entry(await hyper._execute(protocol, "query-block"), path) is not None:
            await _drop_drive(hyper, protocol, drive)
    record["disks"] = [d for d in record.get("disks") or [] if d[0] not in (path, wanted)]
    hyper._write(name, record)


def _name_nics(record: dict[str, Any]) -> None:
    """Give the NICs of C{record} started with the instance their ids (C{nicN}, as on the command line)."""
    for index, nic in enumerate(record.get("nics") or []):
        nic.setdefault("id", "nic%d" % index)


async def add_nic(hyper: KVMHypervisor, name: str, nic: dict[str, Any], tags: Any = ()) -> None:
    """Hot-add C{nic} (C{uuid}, C{mac}, C{nicparams}, maybe C{ip}, C{name}, C{network} and C{netinfo});
    its tap is connected as at start-up (L{kvm_ifup}), with the instance's C{tags} in its environment."""
    params = nic.get("nicparams") or {}
    record = check_supported(hyper, name, DEV_NIC, nic_type=params.get("nic_type"))
    hvparams = dict(cmdline.DEFAULTS, **(record.get("hvparams") or {}))
    mac = str(nic.get("mac") or "").lower()
    _name_nics(record)
    if any(n.get("mac") == mac for n in record["nics"]):
        raise hv.HypervisorError("Instance %s already has a NIC with MAC %s" % (name, mac))
    taps = {n.get("tap") for n in record["nics"]}
    index = 0
    while hyper._tap(record["uuid"], index) in taps:
        index += 1
    tap = hyper._tap(record["uuid"], index)
    netid = device_id(DEV_NIC, nic.get("uuid"))
    model = cmdline.NIC_MODELS.get(str(hvparams.get("nic_type")), "virtio-net-pci")
    netdev: dict[str, Any] = {"type": "tap", "id": netid, "ifname": tap, "script": "no", "downscript": "no"}
    if model == "virtio-net-pci":
        netdev["vnet_hdr"] = bool(hvparams.get("vnet_hdr"))
        if hvparams.get("vhost_net"):
            netdev["vhost"] = True
    entry = dict(kvm_ifup.nic_entry(name, len(record["nics"]), dict(nic, mac=mac), tap), id=netid,
                 pci=kvm_pci.free_slot(record))
    async with hyper._qmp(name) as protocol:
        await hyper._execute(protocol, "netdev_add", netdev)
        try:
            await hyper.nics_up(name, tags, [(len(record["nics"]), entry)])
            await hyper._execute(protocol, "device_add", {"driver": model, "netdev": netid, "mac": mac,
                                                          "id": netid + "-dev", "addr": kvm_pci.address(entry["pci"])})
        except Exception:
            await hyper._execute(protocol, "netdev_del", {"id": netid})
            await hyper.nics_down(name, [entry])
            raise
    record["nics"].append(entry)
    hyper._write(name, record)


async def remove_nic(hyper: KVMHypervisor, name: str, nic: dict[str, Any]) -> None:
    """Hot-remove the NIC with C{nic}'s MAC."""
    record = check_supported(hyper, name, DEV_NIC)
    _name_nics(record)
    mac = str(nic.get("mac") or "").lower()
    found = [n for n in record["nics"] if nic.get("uuid") and n.get("uuid") == nic.get("uuid")] \
        or [n for n in record["nics"] if n.get("mac") == mac]
    if not found:
        raise hv.HypervisorError("Instance %s has no NIC with MAC %s" % (name, mac))
    netid = found[0]["id"]
    async with hyper._qmp(name) as protocol:
        await hyper._execute(protocol, "device_del", {"id": netid + "-dev"})
        await _wait_unplugged(hyper, protocol, lambda qom, _b: netid + "-dev" not in _ids(qom), "NIC %s" % mac)
        await hyper._execute(protocol, "netdev_del", {"id": netid})
    await hyper.nics_down(name, found)
    record["nics"] = [n for n in record["nics"] if n is not found[0]]
    hyper._write(name, record)


async def hotplug(hyper: KVMHypervisor, instance: Any, action: str, dev_type: str, device: dict[str, Any],
                  path: str | None) -> None:
    """Do C{action} (L{ACTIONS}) on C{device} of type C{dev_type} (L{DEV_TYPES})."""
    name = check_name(instance.name)
    if action not in ACTIONS or dev_type not in DEV_TYPES:
        raise hv.HypervisorError("Unknown hotplug request %s of a %s" % (action, dev_type))
    if dev_type == DEV_DISK:
        if action == ACTION_MODIFY:
            raise hv.HypervisorError("Disks cannot be modified by hotplug")
        if not path:
            raise hv.HypervisorError("No device path for the disk to hotplug")
        if action == ACTION_ADD:
            await add_disk(hyper, name, device, path)
        else:
            await remove_disk(hyper, name, device, path)
        return
    if action in (ACTION_REMOVE, ACTION_MODIFY):
        await remove_nic(hyper, name, device)
    if action in (ACTION_ADD, ACTION_MODIFY):
        await add_nic(hyper, name, device, getattr(instance, "tags", None))
