"""PCI slots of an instance's disks and NICs, as Ganeti 3.0's kvm hypervisor.

qemu places a device without an address in the first free slot, so a
guest's slots depend on the order things were added: after a hotplug the
running qemu no longer matches a fresh command line, and a migration
target started from one would refuse the source's state (or hand the
guest different devices).  As Ganeti, the first C{kvm_pci_reservations}
slots (default 12) are left to qemu's own devices (host bridge, ISA
bridge, balloon, VGA, ...); every paravirtual disk and every PCI NIC gets
an explicit slot above them, at start-up and at hot-add, and an id.  The
instance's runtime record keeps both: a disk is C{[path, mode, id, slot]},
a NIC has C{"id"} (its netdev; the device is C{<id>-dev}) and C{"pci"}.
A migration target is started from that record, so its qemu has every
hotplugged device at the same slot.
"""

from __future__ import annotations

from typing import Any

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm_cmdline as cmdline

#: Ganeti's default of hvparam C{kvm_pci_reservations}
DEFAULT_RESERVATIONS = 12
#: slots on qemu's PCI bus
SLOTS = 32
#: NIC models that are no PCI devices
NON_PCI_NICS = ("ne2k_isa",)


def reservations(hvparams: dict[str, Any]) -> int:
    value = hvparams.get("kvm_pci_reservations")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < SLOTS:
        return DEFAULT_RESERVATIONS
    return value


def used(record: dict[str, Any]) -> set[int]:
    """The slots the disks and NICs of C{record} hold."""
    slots = {d[3] for d in record.get("disks") or [] if len(d) > 3 and isinstance(d[3], int)}
    slots |= {n["pci"] for n in record.get("nics") or [] if isinstance(n.get("pci"), int)}
    return slots


def free_slot(record: dict[str, Any]) -> int:
    """The lowest free slot above the reservations.

    @raise hv.HypervisorError: all are taken.
    """
    taken = used(record)
    for slot in range(reservations(record.get("hvparams") or {}), SLOTS):
        if slot not in taken:
            return slot
    raise hv.HypervisorError("Instance %s has no free PCI slot left (slots %d to %d are taken)"
                             % (record.get("name"), reservations(record.get("hvparams") or {}), SLOTS - 1))


def assign(record: dict[str, Any]) -> None:
    """Give the disks (if paravirtual) and the PCI NICs of a new C{record}
    their ids and slots: disks first, then NICs, in their order."""
    params = dict(cmdline.DEFAULTS, **(record.get("hvparams") or {}))
    nic_type = str(params.get("nic_type"))
    if params.get("disk_type") == "paravirtual":
        for index, disk in enumerate(record.get("disks") or []):
            if len(disk) < 4:
                disk[2:] = ["disk%d" % index, free_slot(record)]
    for index, nic in enumerate(record.get("nics") or []):
        nic.setdefault("id", "nic%d" % index)
        if nic_type not in NON_PCI_NICS and not isinstance(nic.get("pci"), int):
            nic["pci"] = free_slot(record)


def address(slot: int) -> str:
    """qemu's C{addr=} of C{slot}."""
    return "0x%x" % slot


def command_devices(record: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The disks and NICs of C{record} as L{cmdline.build_command} takes them."""
    disks = [tuple(disk) for disk in record.get("disks") or []]
    nics = [(nic["mac"], nic["tap"], None, nic["id"], nic.get("pci")) if nic.get("id") else (nic["mac"], nic["tap"], None)
            for nic in record.get("nics") or []]
    return disks, nics
