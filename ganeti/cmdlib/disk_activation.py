"""OP_INSTANCE_ACTIVATE_DISKS and OP_INSTANCE_DEACTIVATE_DISKS.

Activation makes every disk of an instance usable on its primary node, as
Ganeti's C{AssembleInstanceDisks}: a first pass of C{blockdev_assemble}
with C{on_primary} false on every node of each disk (for every template
here only the primary, where it is a no-op: nothing is mirrored), then a
second pass on the primary, whose answer C{[device path, link, uri]} gives
the result
C{[[primary node name, iv_name, device path or None], ...]}.  The path is
C{None} for a disk the hypervisor opens itself (userspace rbd, an ext
volume with only a C{kvm:} URI).  The instance is marked C{disks_active}
first and marked inactive again when a disk fails (then
L{errors.OpExecError}, after a warning per failure).  C{ignore_size}
sends the disks without their recorded size; C{wait_for_sync} has nothing
to wait for (no template here is mirrored).

Deactivation refuses, unless C{force}, an instance marked up or offline
and one running on its primary node ("cannot shutdown disks", as Ganeti);
then it marks the disks inactive and calls C{blockdev_shutdown} for each
disk on its primary node.  As in Ganeti, a node that fails is only a
warning.

Locks (both): the instance exclusively, its nodes exclusively.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LEVEL_NODE, Feedback, register
from ganeti.cmdlib.instance_ops import InstanceLU
from ganeti.objects import Disk, Instance
from ganeti.opcodes.typed import OpInstanceActivateDisks, OpInstanceDeactivateDisks
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures


def disk_nodes(inst: Instance, disk: Disk) -> list[str]:
    """The nodes C{disk} is assembled on (Ganeti's C{ComputeNodeTree}): the
    primary only, for every template here (only DRBD spans two nodes)."""
    return [inst.primary_node or ""]


_DiskOpT = TypeVar("_DiskOpT", bound=OpInstanceActivateDisks | OpInstanceDeactivateDisks, covariant=True)


def _dev_path(payload: Any) -> str | None:
    """The device path of a primary's C{blockdev_assemble} answer."""
    if isinstance(payload, list) and payload and isinstance(payload[0], str):
        return payload[0]
    return None


class _DiskLU(InstanceLU[_DiskOpT]):
    """Locks the instance and, declared once it is known, its nodes."""

    def expand_names(self) -> None:
        super().expand_names()
        self.needed_locks[LEVEL_NODE] = []

    def declare_locks(self, level: str) -> None:
        inst = self.cfg.instances.get(self.op.instance_uuid or "")
        if inst is not None and level == LEVEL_NODE:
            self.needed_locks[LEVEL_NODE] = iu.instance_nodes(self.cfg, inst)

    async def mark_disks_active(self, active: bool) -> Instance:
        current = self.cfg.instances.get(self.instance.uuid or "", self.instance)
        if bool(current.disks_active) == active:
            return current
        stored: Instance = await self.update("instance", attrs.evolve(current, disks_active=active))
        return stored


@register
class LUInstanceActivateDisks(_DiskLU[OpInstanceActivateDisks]):
    """Bring up an instance's disks (see the module docstring)."""

    OP_ID = "OP_INSTANCE_ACTIVATE_DISKS"

    def check_prereq(self) -> None:
        super().check_prereq()
        iu.check_node_online(self.cfg, self.pnode)

    def _disk_arg(self, disk: Disk) -> dict[str, Any]:
        data = rpc_inst.disk_dict(self.cfg, disk, self.instance)
        if self.op.ignore_size:
            data["size"] = None
        return data

    async def exec_(self, feedback: Feedback) -> Any:
        inst = await self.mark_disks_active(True)
        data = iu.encode(self, inst)
        disks = rpc_inst.instance_disks(self.cfg, inst)
        disks_ok = True
        paths: dict[int, str | None] = {}
        for primary in (False, True):
            for index, disk in enumerate(disks):
                nodes = [self.pnode] if primary else disk_nodes(inst, disk)
                for uuid in nodes:
                    call = procedures.blockdev_assemble.call(self._disk_arg(disk), data, primary, index)
                    result = await iu.call_node_result(self, uuid, call)
                    if result.failed:
                        await self.log_warning("Could not prepare block device %s on node %s (is_primary=%s,"
                                               " pass=%d): %s", disk.iv_name, iu.node_name(self.cfg, uuid),
                                               primary, 2 if primary else 1, result.fail_msg)
                        disks_ok = False
                    elif primary:
                        paths[index] = _dev_path(result.payload)
        if not disks_ok:
            await self.mark_disks_active(False)
            raise errors.OpExecError("Cannot activate block devices")
        pname = iu.node_name(self.cfg, self.pnode)
        return [[pname, disk.iv_name, paths.get(index)] for index, disk in enumerate(disks)]


@register
class LUInstanceDeactivateDisks(_DiskLU[OpInstanceDeactivateDisks]):
    """Shut down an instance's disks (see the module docstring)."""

    OP_ID = "OP_INSTANCE_DEACTIVATE_DISKS"

    def check_prereq(self) -> None:
        super().check_prereq()
        if not self.op.force:
            iu.check_instance_state(self.instance, want_down=True, msg="shutdown disks")

    async def exec_(self, feedback: Feedback) -> Any:
        inst = self.instance
        if not self.op.force:
            if iu.get_node(self.cfg, self.pnode).offline:
                await self.log_warning("Primary node offline, ignoring check that instance is down")
            else:
                await iu.check_instance_not_running(self, inst, "cannot shutdown disks")
        inst = await self.mark_disks_active(False)
        for disk in rpc_inst.instance_disks(self.cfg, inst):
            for uuid in disk_nodes(inst, disk):
                call = procedures.blockdev_shutdown.call(rpc_inst.disk_dict(self.cfg, disk, inst))
                result = await iu.call_node_result(self, uuid, call)
                if result.failed:
                    await self.log_warning("Could not shutdown block device %s on node %s: %s", disk.iv_name,
                                           iu.node_name(self.cfg, uuid), result.fail_msg)
        return None
