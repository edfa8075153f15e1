"""Ganeti's C{gnt-instance modify --new-primary NODE} (C{pnode} of
OP_INSTANCE_SET_PARAMS): the instance's primary node changes in the
configuration only; nothing is copied or moved.

As Ganeti, the instance must not run on its current primary (unless
C{force}); the disks stay where they are, which suits the templates whose
disks every node reaches (C{sharedfile}, C{rbd}, C{ext}, C{blockdev},
C{diskless}).  A C{file} disk lives on its node: the new primary must have
its file (a file storage directory shared by the nodes), which is checked
there first (C{blockdev_getdimensions}); without it the change is refused
unless C{force} (C{gnt-instance move} copies file disks).  The disks'
node lists follow the primary.
"""

from __future__ import annotations

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LogicalUnit
from ganeti.objects import Instance
from ganeti.opcodes.typed import OpInstanceSetParams
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures


async def check(lu: LogicalUnit[OpInstanceSetParams], inst: Instance, target: str) -> None:
    """Refuse (before anything changes) an instance still running, and file
    disks the new primary does not have."""
    force = lu.op.force
    if not force:
        try:
            running = await iu.instance_info(lu, inst)
        except errors.OpExecError as e:
            await lu.log_warning("Can't get instance runtime information: %s", e)
        else:
            if running is not None:
                raise errors.OpPrereqError("Instance is still running on %s"
                                           % iu.node_name(lu.cfg, inst.primary_node), errors.ECODE_STATE)
    files = [d for d in rpc_inst.instance_disks(lu.cfg, inst) if d.dev_type == iu.DT_FILE]
    if not files:
        return
    found = await iu.call_node(lu, target, procedures.blockdev_getdimensions.call(
        [rpc_inst.disk_dict(lu.cfg, d, inst) for d in files]),
        what="look for the disks of instance %s on node %s" % (inst.name, iu.node_name(lu.cfg, target)))
    missing = [d for d, dims in zip(files, found or []) if not dims]
    if not missing:
        return
    message = ("Disk %s (file %s) of instance %s is not on node %s: a file disk stays on its node"
               % (missing[0].iv_name, missing[0].logical_id[1], inst.name, iu.node_name(lu.cfg, target)))
    if not force:
        raise errors.OpPrereqError(message + "; 'gnt-instance move' copies it (--force changes the primary"
                                   " node anyway)", errors.ECODE_STATE)
    await lu.log_warning("%s (changed anyway, as --force asks)", message)


async def move_disks(lu: LogicalUnit[OpInstanceSetParams], inst: Instance, old: str) -> None:
    """The disks of C{inst} (its primary changed from C{old}) list the new primary instead."""
    await iu.disks_follow_primary(lu, inst, old, inst.primary_node or "")
