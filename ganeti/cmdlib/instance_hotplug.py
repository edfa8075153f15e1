"""Hotplug for OP_INSTANCE_SET_PARAMS (C{hotplug}, C{hotplug_if_possible}).

As Ganeti 3.0: before anything changes the primary is asked
(C{hotplug_supported}: the instance runs there and its hypervisor can
hotplug).  If it cannot, C{hotplug} fails with "Hotplug is not possible:
..." and nothing changes; C{hotplug_if_possible} logs a warning and the
modification is made without hotplug (it takes effect at the next start).
With hotplug, a removed disk leaves the guest first (C{hotplug_device}
C{hotremove}, then C{blockdev_shutdown}) and is then removed from its node;
a new disk is created, assembled on the primary (C{blockdev_assemble}) and
hot-added; NICs are hot-added, hot-removed or (modified) hot-replaced.  A
failed hotplug is only a warning (the result says C{hotplug:failed}); the
configuration changes anyway, as in Ganeti.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.objects import NIC, Disk, Instance
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

ACTION_ADD, ACTION_REMOVE, ACTION_MODIFY = "hotadd", "hotremove", "hotmod"
DEV_DISK, DEV_NIC = "disk", "nic"


async def decide(lu: Any, devices_change: bool) -> bool:
    """Whether the modification hotplugs (see the module docstring)."""
    op = lu.op
    if not (op.hotplug or op.hotplug_if_possible) or not devices_change:
        return False
    inst = lu.instance
    result = await iu.call_node_result(lu, inst.primary_node or "",
                                       procedures.hotplug_supported.call(iu.encode(lu, inst)))
    if not result.failed:
        return True
    if op.hotplug:
        raise errors.OpPrereqError("Hotplug is not possible: %s" % result.fail_msg, errors.ECODE_STATE)
    await lu.log_warning("%s", result.fail_msg)
    await lu.log_info("Modification will take place without hotplugging.")
    return False


async def _device(lu: Any, inst: Instance, action: str, dev_type: str, device: dict[str, Any],
                  seq: int) -> str:
    """Ganeti's C{_HotplugDevice}: C{"hotplug:done"} or, after a warning, C{"hotplug:failed"}."""
    await lu.log_info("Trying to hotplug device...")
    result = await iu.call_node_result(lu, inst.primary_node or "", procedures.hotplug_device.call(
        iu.encode(lu, inst), action, dev_type, device, None, seq))
    if result.failed:
        await lu.log_warning("Could not hotplug device: %s", result.fail_msg)
        await lu.log_info("Continuing execution..")
        return "hotplug:failed"
    await lu.log_info("Hotplug done.")
    return "hotplug:done"


def _index(disk: Disk) -> int:
    tail = (disk.iv_name or "").rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else 0


async def remove_disk(lu: Any, inst: Instance, disk: Disk) -> str:
    """Take C{disk} out of the running guest and shut it down on the primary."""
    data = rpc_inst.disk_dict(lu.cfg, disk, inst)
    message = await _device(lu, inst, ACTION_REMOVE, DEV_DISK, data, _index(disk))
    result = await iu.call_node_result(lu, inst.primary_node or "", procedures.blockdev_shutdown.call(data))
    if result.failed:
        await lu.log_warning("Could not shutdown block device %s: %s", disk.iv_name, result.fail_msg)
    return message


def _nic_dicts(lu: Any, inst: Instance) -> dict[str, dict[str, Any]]:
    """The NICs of C{inst} as the node gets them (nicparams filled), by uuid."""
    data = iu.encode(lu, inst)
    return {str(n.get("uuid")): n for n in data.get("nics") or [] if isinstance(n, dict)}


async def after_store(lu: Any, stored: Instance, new_disks: list[Disk], removed_nics: list[NIC],
                      hot_nics: list[tuple[str, str]]) -> list[list[Any]]:
    """Hotplug what the stored modification added, removed or changed; the result lines."""
    changes: list[list[Any]] = []
    inst = lu.cfg.instances.get(stored.uuid or "", stored)
    disks = rpc_inst.instance_disks(lu.cfg, inst)
    for disk in new_disks:
        index = next((i for i, d in enumerate(disks) if d.uuid == disk.uuid), len(disks))
        current = disks[index] if index < len(disks) else disk
        data = rpc_inst.disk_dict(lu.cfg, current, inst)
        result = await iu.call_node_result(lu, inst.primary_node or "", procedures.blockdev_assemble.call(
            data, iu.encode(lu, inst), True, index))
        if result.failed:
            changes.append(["disk/%d" % index, "assemble:failed"])
            await lu.log_warning("Can't assemble newly created disk %d: %s", index, result.fail_msg)
            continue
        changes.append(["disk/%d" % index, await _device(lu, inst, ACTION_ADD, DEV_DISK, data, index)])
    if removed_nics:
        old = _nic_dicts(lu, lu.instance)
        for nic in removed_nics:
            index = next((i for i, n in enumerate(lu.instance.nics) if n.uuid == nic.uuid), 0)
            message = await _device(lu, lu.instance, ACTION_REMOVE, DEV_NIC, old.get(nic.uuid or "", nic.to_dict()),
                                    index)
            changes.append(["nic/%d" % index, message])
    if hot_nics:
        now = _nic_dicts(lu, inst)
        for action, uuid in hot_nics:
            index = next((i for i, n in enumerate(inst.nics) if n.uuid == uuid), 0)
            if uuid not in now:
                continue
            message = await _device(lu, inst, action, DEV_NIC, now[uuid], index)
            changes.append(["nic.%d" % index if action == ACTION_ADD else "nic/%d" % index, message])
    return changes
