"""Disk modifications of OP_INSTANCE_SET_PARAMS that depend on the template.

  - C{add} checks its parameters by the instance's template: C{ext} takes
    a C{provider} (default: the provider of the instance's first disk)
    and the provider's parameters, C{blockdev} needs C{adopt=/dev/...}
    (the size is the device's), the others refuse both;
  - C{attach} takes a disk the configuration keeps without an instance
    (one detached before), by exactly one of C{name} or C{uuid}, of the
    instance's template;
  - C{detach} keeps the disk in the configuration, without an instance:
    shut down on the primary (out of the running guest first, with
    hotplug), to be attached again later.

As in Ganeti 3.0, for templates whose disk is not named after its
instance: C{rbd}, C{ext} and C{blockdev}.  File disks (C{file},
C{sharedfile}) live in their instance's directory, which Ganeti renames on
attach and detach; that is refused here with a clear error.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.cmdlib import ext_disks, instance_hotplug
from ganeti.cmdlib import instance_params as params
from ganeti.cmdlib import instance_utils as iu
from ganeti.objects import ConfigData, Disk, Instance
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

#: the templates whose disks can be detached and attached
DETACHABLE = (iu.DT_RBD, iu.DT_EXT, iu.DT_BLOCK)


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def check_attach(mod: dict[str, Any]) -> None:
    """An attach names its disk by exactly one of C{name} or C{uuid}."""
    if len(mod) != 1 or not ({"name", "uuid"} & set(mod)):
        raise _invalid("Only one argument is permitted in attach op, either name or uuid")
    value = next(iter(mod.values()))
    if not isinstance(value, str) or not value:
        raise _invalid("Invalid disk %s to attach: %r" % (next(iter(mod)), value))


def _template_check(inst: Instance, what: str) -> None:
    if inst.disk_template not in DETACHABLE:
        raise _invalid("Disks of template %s cannot be %s here (file disks are named after their instance; only"
                       " %s)" % (inst.disk_template, what, ", ".join(DETACHABLE)))


def find_detached(cfg: ConfigData, inst: Instance, mod: dict[str, Any]) -> Disk:
    """The disk C{mod} names, which no instance lists, of C{inst}'s template."""
    _template_check(inst, "attached")
    key, value = next(iter(mod.items()))
    found = [d for d in cfg.disks.values() if (d.uuid if key == "uuid" else d.name) == value]
    if not found:
        raise errors.OpPrereqError("Disk with %s '%s' not found" % (key, value), errors.ECODE_NOENT)
    if len(found) > 1:
        raise _invalid("More than one disk is named '%s': attach it by uuid" % value)
    disk = found[0]
    owner = next((i for i in cfg.instances.values() if disk.uuid in (i.disks or [])), None)
    if owner is not None:
        raise errors.OpPrereqError("Disk %s is attached to instance %s; detach it first"
                                   % (value, owner.name), errors.ECODE_STATE)
    if disk.dev_type != inst.disk_template:
        raise _invalid("Disk %s is of template %s, instance %s of template %s" % (value, disk.dev_type, inst.name,
                                                                                 inst.disk_template))
    return disk


def check_detachable(inst: Instance, disk: Disk) -> None:
    _template_check(inst, "detached")


def check_new_disk(inst: Instance, disks: list[Disk], mod: dict[str, Any], index: int) -> dict[str, Any]:
    """The checked parameters of a disk to add to C{inst} (see the module docstring)."""
    template = inst.disk_template
    if template == iu.DT_EXT:
        if "provider" not in mod:
            providers = [d.params.get("provider") or d.logical_id[0] for d in disks
                         if isinstance(d.logical_id, list) and d.logical_id]
            if not providers:
                raise _invalid("Disk %d: template ext needs an ExtStorage provider (provider=NAME)" % index)
            mod = dict(mod, provider=providers[0])
        return ext_disks.check_disk(template, mod, index)
    if template == iu.DT_BLOCK:
        if "size" in mod:  # the size is the adopted device's
            mod = {k: v for k, v in mod.items() if k != "size"}
        return ext_disks.check_disk(template, mod, index)
    return params.check_disk(mod, index)


async def detach(lu: Any, inst: Instance, disk: Disk, hotplug: bool) -> list[list[Any]]:
    """Take C{disk} out of the guest (C{hotplug}) and shut it down on the primary; the result lines."""
    if hotplug:
        message = await instance_hotplug.remove_disk(lu, inst, disk)
        return [[disk.iv_name or "disk", message]]
    result = await iu.call_node_result(lu, inst.primary_node or "", procedures.blockdev_shutdown.call(
        rpc_inst.disk_dict(lu.cfg, disk, inst)))
    if result.failed:
        await lu.log_warning("Could not shutdown block device %s: %s", disk.iv_name, result.fail_msg)
    return []
