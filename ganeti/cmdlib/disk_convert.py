"""Disk template conversion: C{gnt-instance modify -t TEMPLATE} (the
C{disk_template}, C{ext_params}, C{file_driver} and C{file_storage_dir} of
OP_INSTANCE_SET_PARAMS), as Ganeti's generic conversion.

Ganeti converts between any two templates but from C{diskless} and to
C{diskless} or C{blockdev}; its C{plain} <-> C{drbd} conversions need LVM
and DRBD, which these nodes cannot run.  Here: from C{file}, C{sharedfile},
C{rbd}, C{ext} and C{blockdev} to C{file}, C{sharedfile}, C{rbd} and C{ext}
(C{ext} to C{ext} only to another provider).  The instance must be down.
Steps, as Ganeti's: new empty disks of the new template (same sizes, modes
and names) are made on the primary node, each old disk's data is copied
onto its new one by the node (C{blockdev_convert}), then the configuration
swaps the disk lists (the old disks leave it) and the old disks are removed
(an adopted device is left alone).  A failure before the swap removes the
new disks and leaves the instance as it was.

C{--ext-params provider=P[,KEY=VALUE...]} (needed for C{-t ext}) names the
new disks' provider and its parameters, checked against the provider on the
primary node first; an ext or rbd disk's C{access} is kept.  An rbd disk
with C{access=userspace} (only librbd reaches it) is not converted, from or
to; the error says so before anything is made.  C{--file-driver}
and C{--file-storage-dir} (below the cluster's directory) are for a
file-based target only.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ganeti import errors, rbd_params
from ganeti.cmdlib import ext_disks, rbd_disks
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.instance import instance_dir_name
from ganeti.objects import Disk, Instance, new_uuid
from ganeti.opcodes.typed import OpInstanceSetParams
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

#: Ganeti's C{DTS_NOT_CONVERTIBLE_FROM} / C{_TO}
NOT_FROM = (iu.DT_DISKLESS,)
NOT_TO = (iu.DT_DISKLESS, iu.DT_BLOCK)
FILE_BASED = (iu.DT_FILE, iu.DT_SHARED_FILE)
FILE_DRIVERS = ("loop", "blktap", "blktap2")
LVM_TEMPLATES = ("plain", "drbd")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def check_arguments(op: OpInstanceSetParams) -> dict[str, Any] | None:
    """The checks of the conversion's arguments alone; the new ext disks'
    C{provider} and parameters (C{None} for another target)."""
    template = op.disk_template
    file_args = op.file_driver is not None or op.file_storage_dir is not None
    if template is None:
        if op.ext_params:
            raise _invalid("Specifying ExtStorage parameters requires converting to the 'ext' disk template")
        if file_args:
            raise _invalid("Specifying file-based configuration arguments requires converting to a file-based"
                           " disk template")
        return None
    if op.disks:
        raise _invalid("Disk template conversion and other disk changes not supported at the same time")
    if template in NOT_TO:
        raise _invalid("Conversion to the '%s' disk template is not supported" % template)
    if template in LVM_TEMPLATES:
        raise _invalid("Conversion to the '%s' disk template needs LVM%s, which these nodes cannot run"
                       " (possible here: %s)" % (template, " and DRBD" if template == "drbd" else "",
                                                 ", ".join(t for t in iu.SUPPORTED_TEMPLATES if t not in NOT_TO)))
    if template not in iu.SUPPORTED_TEMPLATES:
        raise _invalid("Disk template '%s' is not supported (supported: %s)"
                       % (template, ", ".join(iu.SUPPORTED_TEMPLATES)))
    if file_args and template not in FILE_BASED:
        raise _invalid("Specifying file-based configuration arguments requires converting to a file-based"
                       " disk template")
    if op.file_driver is not None and op.file_driver not in FILE_DRIVERS:
        raise _invalid("Invalid file driver name '%s' (one of %s)" % (op.file_driver, ", ".join(FILE_DRIVERS)))
    subdir = op.file_storage_dir
    if subdir is not None and (not subdir or os.path.isabs(subdir) or ".." in subdir.split("/")):
        raise _invalid("file_storage_dir must be a relative path without '..': %r" % subdir)
    if template != ext_disks.DT_EXT:
        if op.ext_params:
            raise _invalid("Specifying ExtStorage parameters requires converting to the 'ext' disk template")
        return None
    if not (op.ext_params or {}).get(ext_disks.PARAM_PROVIDER):
        raise _invalid("Provider option is missing, use either the '--ext-params' or '-e' option")
    generic = sorted(k for k in op.ext_params if k in ext_disks.GENERIC_KEYS and k != ext_disks.PARAM_PROVIDER)
    if generic:
        raise _invalid("Invalid ExtStorage parameter(s) for a conversion: %s" % ", ".join(generic))
    spec = ext_disks.check_disk(ext_disks.DT_EXT, dict(op.ext_params, size=1), 0)
    return {ext_disks.PARAM_PROVIDER: spec[ext_disks.PARAM_PROVIDER], "ext_params": spec["ext_params"]}


def check_prereq(cfg: Any, inst: Instance, op: OpInstanceSetParams) -> None:
    """The checks against the configuration (the instance locked)."""
    template = op.disk_template or ""
    current = inst.disk_template or iu.DT_DISKLESS
    if current in NOT_FROM:
        raise _invalid("Conversion from the '%s' disk template is not supported" % current)
    disks = rpc_inst.instance_disks(cfg, inst)
    if template != ext_disks.DT_EXT and all(d.dev_type == template for d in disks):
        raise _invalid("Instance already has disk template %s" % template)
    if template == ext_disks.DT_EXT:
        provider = (op.ext_params or {}).get(ext_disks.PARAM_PROVIDER)
        for disk in disks:
            if disk.dev_type == ext_disks.DT_EXT and (disk.params or {}).get(ext_disks.PARAM_PROVIDER) == provider:
                raise _invalid("Not converting, '%s' of type ExtStorage already using provider '%s'"
                               % (disk.iv_name, provider))
    for disk in disks:
        _check_copyable(disk)
    enabled = list(cfg.cluster.enabled_disk_templates or [])
    if template not in enabled:
        raise errors.OpPrereqError("Disk template '%s' is not enabled for this cluster (enabled templates: %s)"
                                   % (template, ", ".join(enabled)), errors.ECODE_STATE)
    if template in FILE_BASED and not _storage_dir(cfg, template):
        raise errors.OpPrereqError("The cluster has no storage directory for template %s" % template,
                                   errors.ECODE_STATE)
    iu.check_instance_state(inst, want_down=True, msg="cannot change disk template")


def _check_copyable(disk: Disk) -> None:
    """Refuse an rbd disk with userspace access: only librbd reaches it, and
    the node copies between block devices and files."""
    if disk.dev_type == iu.DT_RBD and (disk.params or {}).get(rbd_params.PARAM_ACCESS) == rbd_params.ACCESS_USER:
        raise errors.OpPrereqError("Disk %s is an rbd disk with access=userspace: only librbd reaches it, and a"
                                   " conversion here copies between block devices and files (use access="
                                   "kernelspace)" % disk.iv_name, errors.ECODE_STATE)


def _storage_dir(cfg: Any, template: str) -> str | None:
    found: str | None = (cfg.cluster.file_storage_dir if template == iu.DT_FILE
                         else cfg.cluster.shared_file_storage_dir)
    return found


def _file_disks(lu: LogicalUnit[OpInstanceSetParams], inst: Instance, template: str,
                specs: list[dict[str, Any]]) -> list[Disk]:
    base = _storage_dir(lu.cfg, template) or ""
    if lu.op.file_storage_dir:
        base = os.path.join(base, lu.op.file_storage_dir)
    dirname = instance_dir_name(lu.cfg, base, inst.name or "", inst.uuid or "")
    driver = lu.op.file_driver or FILE_DRIVERS[0]
    return [Disk(uuid=new_uuid(), name=spec.get("name"), dev_type=template,
                 logical_id=[driver, rpc_inst.disk_path(base, dirname, index)], nodes=[inst.primary_node or ""],
                 iv_name="disk/%d" % index, size=spec["size"], mode=spec["mode"], params={})
            for index, spec in enumerate(specs)]


async def _new_disks(lu: LogicalUnit[OpInstanceSetParams], inst: Instance, old: list[Disk],
                     ext_spec: dict[str, Any] | None) -> list[Disk]:
    template = lu.op.disk_template or ""
    specs: list[dict[str, Any]] = [{"size": d.size, "mode": d.mode or "rw", "name": d.name} for d in old]
    access = [(d.params or {}).get(ext_disks.PARAM_ACCESS) for d in old]
    if template == ext_disks.DT_EXT:
        assert ext_spec is not None
        for spec, kept in zip(specs, access):
            spec.update(ext_spec, ext_params=dict(ext_spec["ext_params"]))
            if kept:  # as Ganeti: the access of an ext or rbd disk stays
                spec[ext_disks.PARAM_ACCESS] = kept
        await ext_disks.check_on_node(lu, inst.primary_node or "", template, specs)
        return ext_disks.new_disks(lu.cfg, template, specs)
    if template == iu.DT_RBD:
        for spec, kept in zip(specs, access):
            if kept:
                spec[ext_disks.PARAM_ACCESS] = kept
        node = lu.cfg.nodes.get(inst.primary_node or "")
        made = rbd_disks.new_disks(lu.cfg, node.group if node is not None else None, inst.hypervisor or "", specs)
        for disk in made:
            _check_copyable(disk)
        return made
    return _file_disks(lu, inst, template, specs)


async def convert(lu: LogicalUnit[OpInstanceSetParams], inst: Instance, ext_spec: dict[str, Any] | None
                  ) -> list[list[Any]]:
    """Convert C{inst}'s disks (see the module docstring); the result lines."""
    template = lu.op.disk_template or ""
    pnode = inst.primary_node or ""
    await iu.check_instance_not_running(lu, inst, "cannot change disk template")
    old = rpc_inst.instance_disks(lu.cfg, inst)
    new = await _new_disks(lu, inst, old, ext_spec)
    shown = template if template != ext_disks.DT_EXT else "%s:%s" % (template, ext_spec and ext_spec["provider"])
    await lu.feedback("Converting disk template from '%s' to '%s'" % (inst.disk_template, shown))
    await lu.feedback("Creating new empty disks of type '%s'..." % shown)
    created: list[Disk] = []
    try:
        for disk in new:
            await iu.call_node(lu, pnode, procedures.blockdev_create.call(
                rpc_inst.disk_dict(lu.cfg, disk, inst), disk.size or 0, inst.name, True,
                "originstname+%s" % inst.name, False),
                what="create disk %s of instance %s" % (disk.iv_name, inst.name))
            created.append(disk)
        await lu.feedback("Populating the new empty disks of type '%s'..." % shown)
        for index, (src, dst) in enumerate(zip(old, new)):
            await lu.feedback(" - copying data from disk %d (%s), size %s MiB" % (index, src.dev_type, dst.size))
            await iu.call_node(lu, pnode, procedures.blockdev_convert.call(
                rpc_inst.disk_dict(lu.cfg, src, inst), rpc_inst.disk_dict(lu.cfg, dst, inst)),
                what="copy disk %d of instance %s" % (index, inst.name))
    except Exception:  # not GeneratorExit & co: nothing may be awaited then
        await lu.log_info("Removing the new disks of type '%s'; the instance is not affected" % shown)
        for problem in await iu.remove_disks(lu, pnode, created):
            await lu.log_warning("%s", problem)
        raise
    await lu.feedback("Replacing the old disks (%s) of the instance by the new ones (%s) in the configuration"
                      % (inst.disk_template, shown))
    current = lu.cfg.instances.get(inst.uuid or "", inst)
    await lu.update("instance", attrs.evolve(current, disks=[d.uuid or "" for d in new], disk_template=template,
                                             disks_active=False),
                    disks=new, remove_disks=[d.uuid for d in old if d.uuid])
    await lu.feedback("Removing old block devices of type '%s'..." % inst.disk_template)
    for disk in old:
        for node in disk.nodes or [pnode]:
            for problem in await iu.remove_disks(lu, node, [disk]):
                await lu.log_warning("%s (the disk left the configuration anyway)", problem)
    return [["disk_template", template]]
