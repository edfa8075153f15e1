"""OP_INSTANCE_MOVE: copy a file instance's disks to another node and switch it over.

Steps, each undone in reverse when a later one fails:

  1. create the disks on the target node (same paths, the node's own storage);
  2. stop the instance on its primary node if it runs (it stays stopped
     during the copy);
  3. stream each disk file to its copy on the target (TLS with the cluster
     certificate, progress in the job log, see L{ganeti.cmdlib.transfer});
  4. record the target as the primary node (and the disks' node);
  5. remove the disks on the old node (a failure is a warning: C{gnt-cluster
     verify} reports the orphan files);
  6. start the instance on the target if it is marked up.

A failure before step 4 removes the target's disks and starts the instance
on its old node again if it was running: the instance is where it was.

Only the C{file} template is moved this way (and C{diskless}, with no copy);
C{sharedfile} instances move with C{gnt-instance failover}/C{migrate}.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib import transfer
from ganeti.cmdlib.base import LEVEL_INSTANCE, LEVEL_NODE, LEVEL_NODE_RES, Feedback, LogicalUnit, expand_node, register
from ganeti.cmdlib.instance_migration import set_primary_node
from ganeti.objects import Disk
from ganeti.opcodes.typed import OpInstanceMove
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

MOVABLE_TEMPLATES = (iu.DT_FILE, iu.DT_DISKLESS)


@register
class LUInstanceMove(LogicalUnit[OpInstanceMove]):
    """Move an instance by copying its disks (see the module docstring)."""

    OP_ID = "OP_INSTANCE_MOVE"
    REQ_BGL = False

    def expand_names(self) -> None:
        cfg, op = self.cfg, self.op
        inst = iu.expand_instance(cfg, op.instance_name)
        iu.refuse_forthcoming(inst)
        self.op = op = attrs.evolve(op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        node = expand_node(cfg, op.target_node)
        self.op = op = attrs.evolve(op, target_node=node.name or "", target_node_uuid=node.uuid)
        self.target_uuid = node.uuid or ""
        nodes = sorted({node.uuid or "", inst.primary_node or ""} - {""})
        self.needed_locks[LEVEL_INSTANCE] = [inst.name]
        self.needed_locks[LEVEL_NODE] = nodes
        self.needed_locks[LEVEL_NODE_RES] = nodes

    def check_prereq(self) -> None:
        cfg, op = self.cfg, self.op
        inst = self.instance = iu.current_instance(cfg, op.instance_uuid, op.instance_name)
        target = self.target_uuid
        if target == inst.primary_node:
            raise errors.OpPrereqError("Instance %s is already on the node %s" % (inst.name, op.target_node),
                                       errors.ECODE_STATE)
        if inst.disk_template not in MOVABLE_TEMPLATES:
            raise errors.OpPrereqError(
                "Disk template %s not suitable for copying (movable: %s; sharedfile instances move with failover"
                " or migrate)" % (inst.disk_template, ", ".join(MOVABLE_TEMPLATES)), errors.ECODE_STATE)
        transfer.check_compression(self, op.compress)
        iu.check_node_online(cfg, target, "Cannot move to node %s: it is offline" % op.target_node)
        iu.check_node_not_drained(cfg, target)
        iu.check_node_vm_capable(cfg, target)
        iu.check_node_online(cfg, inst.primary_node or "")
        self.disks = rpc_inst.instance_disks(cfg, inst)

    async def exec_(self, feedback: Feedback) -> Any:
        op, inst = self.op, self.instance
        source, target = inst.primary_node or "", self.target_uuid
        await iu.check_bridges(self, inst.nics, target, inst.hypervisor or "")
        if inst.admin_state == iu.ADMIN_UP:
            await iu.check_node_free_memory(self, target, "moving instance %s" % inst.name,
                                            iu.instance_memory(self.cfg, inst), inst.hypervisor or "")
        created: list[Disk] = []
        running = False
        try:
            for disk in self.disks:
                await iu.call_node(self, target, procedures.blockdev_create.call(
                    disk.to_dict(), disk.size or 0, inst.name, True, "originstname+%s" % inst.name, False),
                                   what="create disk %s of instance %s" % (disk.iv_name, inst.name))
                created.append(disk)
            running = await iu.instance_info(self, inst) is not None
            if running:
                await self.feedback("* shutting down instance %s on node %s" % (inst.name,
                                                                                iu.node_name(self.cfg, source)))
                await iu.shutdown_instance_on(self, inst, source, op.shutdown_timeout)
            for index, disk in enumerate(self.disks):
                await self.feedback("* copying disk/%d to node %s" % (index, op.target_node))
                await transfer.transfer(self, "disk/%d" % index,
                                        transfer.Endpoint(source, {"type": "disk", "disk": disk.to_dict()}),
                                        transfer.Endpoint(target, {"type": "disk", "disk": disk.to_dict()}),
                                        op.compress, (disk.size or 0) * 1024 * 1024)
        except Exception as e:
            await self._undo(target, created, running, e)
            raise
        inst = await set_primary_node(self, inst, target)
        problems = await iu.remove_disks(self, source, self.disks)
        for problem in problems:
            await self.log_warning("%s (remove the file by hand; gnt-cluster verify reports it)", problem)
        if inst.admin_state == iu.ADMIN_UP:
            await self.feedback("* starting instance %s on node %s" % (inst.name, op.target_node))
            await iu.start_instance_on(self, inst, target)
        return None

    async def _undo(self, target: str, created: list[Disk], running: bool, error: BaseException) -> None:
        inst = self.instance
        await self.log_warning("Move of instance %s failed (%s): undoing it", inst.name, error)
        for problem in await iu.remove_disks(self, target, created):
            await self.log_warning("%s", problem)
        if running:
            result = await iu.call_node_result(
                self, inst.primary_node or "", procedures.instance_start.call(
                    rpc_inst.encode_instance(self.cfg, inst), False, iu.reason_trail(self)).within(iu.TMO_START))
            if result.failed:
                await self.log_warning("Could not start instance %s again on node %s: %s", inst.name,
                                       iu.node_name(self.cfg, inst.primary_node), result.fail_msg)
