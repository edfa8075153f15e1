"""OP_INSTANCE_GROW_DISK: make one disk of an instance bigger.

Only file and sharedfile disks grow here (the templates this cluster
creates).  The disk grows by C{amount} MiB, or to C{amount} MiB with
C{absolute} (which must not be below its size).  The node must report
enough free space in the storage directory when it reports any.

The node calls follow Ganeti's order (noded's contract in
L{ganeti.rpc.instances}: C{blockdev_grow [disk, amount, dryrun,
backingstore, exclusive_storage]}): a dry run on the backing storage of
every node of the disk, then the real growth of the backing storage on
each, then the logical step on the primary (a no-op for files).  A
sharedfile disk is one file every node sees: only the primary grows it.
The new size is then recorded in the configuration and the node locks are
released.

The file grows by the difference between the new size and the size the
primary node reports (C{blockdev_getdimensions}), not the recorded one: a
job killed after growing the file and before recording its size leaves a
file bigger than the configuration says, which C{gnt-cluster verify}
reports, and the same command run again (same target) grows nothing and
records the size.  A file already bigger than the new size is refused,
naming its size (record it with C{--absolute}).  File disks are not mirrored: there is nothing to wait for with
C{wait_for_sync}.  The instance may be running: the hypervisor sees the
new size at its next start.

Locks: the instance exclusively, its nodes and their node-res locks
exclusively.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LEVEL_NODE, LEVEL_NODE_RES, Feedback, register
from ganeti.cmdlib.instance_ops import InstanceLU
from ganeti.objects import Disk
from ganeti.opcodes.typed import OpInstanceGrowDisk
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures, wire
from ganeti.units import format_unit

#: bytes in a MiB (sizes the nodes report are bytes)
MIB = 1024 * 1024

#: the disk templates whose disks can grow here
GROWABLE = (iu.DT_FILE, iu.DT_SHARED_FILE, iu.DT_RBD, iu.DT_EXT)
#: seconds one growth may take on a node
TMO_GROW = wire.TMO_NORMAL


def _h(mib: int) -> str:
    return format_unit(mib, "h")


@register
class LUInstanceGrowDisk(InstanceLU[OpInstanceGrowDisk]):
    """Grow a disk of an instance (see the module docstring)."""

    OP_ID = "OP_INSTANCE_GROW_DISK"

    def expand_names(self) -> None:
        super().expand_names()
        self.needed_locks[LEVEL_NODE] = []
        self.needed_locks[LEVEL_NODE_RES] = []

    def declare_locks(self, level: str) -> None:
        inst = self.cfg.instances.get(self.op.instance_uuid or "")
        if inst is not None and level in (LEVEL_NODE, LEVEL_NODE_RES):
            self.needed_locks[level] = iu.instance_nodes(self.cfg, inst)

    def check_prereq(self) -> None:
        super().check_prereq()
        inst, op, cfg = self.instance, self.op, self.cfg
        disks = rpc_inst.instance_disks(cfg, inst)
        index = op.disk
        if index >= len(disks):
            have = "no disks" if not disks else "disks 0 to %d" % (len(disks) - 1)
            raise errors.OpPrereqError("Invalid disk index %d: instance %s has %s" % (index, inst.name, have),
                                       errors.ECODE_INVAL)
        disk: Disk = disks[index]
        if disk.dev_type not in GROWABLE:
            raise errors.OpPrereqError("Disk %d of instance %s (template %s) cannot grow: only %s disks can"
                                       % (index, inst.name, disk.dev_type, " and ".join(GROWABLE)),
                                       errors.ECODE_INVAL)
        if disk.dev_type == iu.DT_SHARED_FILE:
            self.nodes = [self.pnode]
        else:
            self.nodes = [self.pnode] + [n for n in disk.nodes or [] if n != self.pnode]
        for uuid in self.nodes:
            iu.check_node_online(cfg, uuid)
        size = int(disk.size or 0)
        if op.absolute:
            self.target = op.amount
            self.delta = self.target - size
            if self.delta < 0:
                raise errors.OpPrereqError("Requested size (%s) is smaller than the current size of disk %d (%s)"
                                           % (_h(self.target), index, _h(size)), errors.ECODE_STATE)
        else:
            self.delta = op.amount
            self.target = size + self.delta
        self.disk = disk

    async def _check_free_space(self) -> None:
        template = self.disk.dev_type or ""
        answers = await iu.node_resources(self, self.nodes, self.instance.hypervisor or "", [template])
        for uuid, answer in answers.items():
            free = answer.storage_free.get(template) if isinstance(answer, iu.NodeResources) else None
            if free is not None and self.delta > free:
                raise errors.OpPrereqError(
                    "Not enough disk space on node %s to grow disk %d of instance %s: needed %s, available %s"
                    % (iu.node_name(self.cfg, uuid), self.op.disk, self.instance.name, _h(self.delta),
                       _h(free)), errors.ECODE_NORES)

    async def _grow(self, uuid: str, dryrun: bool, backingstore: bool) -> None:
        what = "grow disk %d of instance %s%s" % (self.op.disk, self.instance.name,
                                                  " (dry run)" if dryrun else "")
        await iu.call_node(self, uuid, procedures.blockdev_grow.call(
            rpc_inst.disk_dict(self.cfg, self.disk, self.instance), self.delta, dryrun, backingstore,
            False).within(TMO_GROW), what=what)

    async def _file_delta(self) -> int:
        """MiB the file on the primary must grow to reach the target."""
        answer = await iu.call_node(self, self.pnode, procedures.blockdev_getdimensions.call(
                                        [rpc_inst.disk_dict(self.cfg, self.disk, self.instance)]),
                                    what="get the size of disk %d of instance %s" % (self.op.disk,
                                                                                       self.instance.name))
        dims = answer[0] if isinstance(answer, list) and answer else None
        if not isinstance(dims, list) or not dims or not isinstance(dims[0], int):
            raise errors.OpExecError("Disk %d of instance %s is missing on node %s"
                                     % (self.op.disk, self.instance.name, iu.node_name(self.cfg, self.pnode)))
        actual = dims[0] // MIB
        if actual > self.target:
            raise errors.OpExecError(
                "Disk %d of instance %s is already %s on node %s, more than %s: grow it to an absolute size"
                " of at least %s to record it" % (self.op.disk, self.instance.name, _h(actual),
                                                  iu.node_name(self.cfg, self.pnode), _h(self.target), _h(actual)))
        return self.target - actual

    async def exec_(self, feedback: Feedback) -> Any:
        inst, disk = self.instance, self.disk
        if self.delta > 0:
            await self._check_free_space()
        self.delta = await self._file_delta()
        await self.feedback("Growing disk %d of instance '%s' by %s to %s"
                            % (self.op.disk, inst.name, _h(self.delta), _h(self.target)))
        for uuid in self.nodes:
            await self._grow(uuid, dryrun=True, backingstore=True)
        for uuid in self.nodes:
            await self._grow(uuid, dryrun=False, backingstore=True)
        await self._grow(self.pnode, dryrun=False, backingstore=False)
        current = self.cfg.disks.get(disk.uuid or "", disk)
        if current.size != self.target:
            await self.update("disk", attrs.evolve(current, size=self.target))
        await self.release_locks(LEVEL_NODE)
        if inst.admin_state == iu.ADMIN_UP:
            await self.log_info("Instance %s sees the new size of disk %d at its next start", inst.name,
                                self.op.disk)
        return None
