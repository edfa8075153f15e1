"""OP_CLUSTER_VERIFY_DISKS, OP_GROUP_VERIFY_DISKS, OP_CLUSTER_REPAIR_DISK_SIZES.

C{OP_CLUSTER_VERIFY_DISKS} submits one C{OP_GROUP_VERIFY_DISKS} job per
node group (or for the one named), as Ganeti does; its result is
C{{"jobs": [...]}}.  Ganeti's watcher submits C{OP_GROUP_VERIFY_DISKS}
itself, per group.

C{OP_GROUP_VERIFY_DISKS} returns Ganeti's triple C{[node errors,
instances needing activate-disks, missing volumes]}.  For the templates
this cluster has: each online, vm-capable node of the group reports the
dimensions of the file and sharedfile disks of the group's instances it
should hold (C{blockdev_getdimensions}; a sharedfile disk on its primary
node only, as every node sees the same file).  A node that cannot answer
is in the first member, C{{node name: error}} (its disks are not judged);
a disk the node does not have is in the third, C{{instance name: [[node
name, file path], ...]}}.  File disks have no activation state: the
second member (instances whose disks are offline and need
C{activate-disks}) is always empty for them.  Offline nodes are not asked.
Locks, all shared: the group, its instances and its nodes.

C{OP_CLUSTER_REPAIR_DISK_SIZES} compares, for the named instances (every
instance when none is named), the size the configuration records for each
file or sharedfile disk with the actual size the primary node reports,
and records the actual size (rounded down to MiB) where they differ.
Result: Ganeti's C{[[instance, disk index, "size", new size], ...]}.  A
primary node that is offline or cannot answer, or a disk it does not
have, is a warning and changes nothing.  Locks: the instances exclusively,
the node-res locks of their primary nodes shared.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE_RES,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    expand_instance_name,
    lookup_group,
    register,
)
from ganeti.cmdlib.verify import GroupLocks, address, group_instances
from ganeti.objects import ConfigData, Disk, Instance
from ganeti.opcodes.typed import OpClusterRepairDiskSizes, OpClusterVerifyDisks, OpGroupVerifyDisks
from ganeti.rpc import procedures, wire

#: the disk types whose size a node reports here
FILE_TYPES = ("file", "sharedfile")
#: bytes in a MiB (nodes report bytes)
MIB = 1024 * 1024
#: per-node timeout of C{blockdev_getdimensions}, seconds
DIMENSIONS_TIMEOUT = wire.TMO_NORMAL


def _file_disks(cfg: ConfigData, inst: Instance) -> list[tuple[int, Disk]]:
    """C{[(index, disk)]} of the file and sharedfile disks of C{inst}."""
    found = []
    for index, uuid in enumerate(inst.disks or []):
        disk = cfg.disks.get(uuid)
        if disk is not None and disk.dev_type in FILE_TYPES:
            found.append((index, disk))
    return found


def _disk_path(disk: Disk) -> str:
    lid = disk.logical_id
    return str(lid[1]) if isinstance(lid, list) and len(lid) == 2 else str(lid)


def _size_of(dimensions: Any) -> int | None:
    """The size in bytes of one C{blockdev_getdimensions} entry, or None."""
    if isinstance(dimensions, list) and dimensions and isinstance(dimensions[0], int) \
            and not isinstance(dimensions[0], bool):
        return dimensions[0]
    return None


@register
class LUClusterVerifyDisks(LogicalUnit[OpClusterVerifyDisks]):
    """Submit one OP_GROUP_VERIFY_DISKS job per node group."""

    OP_ID = "OP_CLUSTER_VERIFY_DISKS"
    REQ_BGL = False

    def expand_names(self) -> None:
        if self.op.group_name:
            self.needed_locks[LEVEL_NODEGROUP] = [lookup_group(self.cfg, self.op.group_name)]
        else:
            self.needed_locks[LEVEL_NODEGROUP] = ALL_SET
        self.share_all()

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti.jobs.lifecycle import ResultWithJobs

        groups = sorted(self.cfg.nodegroups[u].name or u for u in self.owned_locks(LEVEL_NODEGROUP)
                        if u in self.cfg.nodegroups)
        return ResultWithJobs([[{"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": name}] for name in groups])


@register
class LUGroupVerifyDisks(GroupLocks[OpGroupVerifyDisks]):
    """Which disks of a group's instances are missing (see the module docstring)."""

    OP_ID = "OP_GROUP_VERIFY_DISKS"
    REQ_BGL = False

    def check_prereq(self) -> None:
        if self.group_uuid not in self.cfg.nodegroups:
            raise errors.OpPrereqError("Node group '%s' was removed" % self.op.group_name, errors.ECODE_NOENT)

    def _expected(self) -> dict[str, list[tuple[str, Disk]]]:
        """C{{node uuid: [(instance name, disk), ...]}}: what each online,
        vm-capable node of the group must hold."""
        cfg = self.cfg
        wanted: dict[str, list[tuple[str, Disk]]] = {}
        for inst in group_instances(cfg, self.group_uuid):
            for _index, disk in _file_disks(cfg, inst):
                nodes = [inst.primary_node or ""] if disk.dev_type == "sharedfile" else list(disk.nodes or
                                                                                             [inst.primary_node or ""])
                for uuid in nodes:
                    node = cfg.nodes.get(uuid or "")
                    if node is None or node.group != self.group_uuid or node.offline or node.vm_capable is False:
                        continue
                    wanted.setdefault(node.uuid or "", []).append((inst.name or "", disk))
        return wanted

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        wanted = self._expected()
        node_errors: dict[str, str] = {}
        missing: dict[str, list[list[str]]] = {}
        if wanted:
            nodes = {uuid: cfg.nodes[uuid] for uuid in sorted(wanted)}
            results = await self.ctx.rpc().run(
                {n.name: address(n) for n in nodes.values()},
                procedures.blockdev_getdimensions.call([]).within(DIMENSIONS_TIMEOUT),
                per_node={n.name: procedures.blockdev_getdimensions.call([d.to_dict() for _, d in wanted[u]])
                          for u, n in nodes.items()},
            )
            for uuid, node in nodes.items():
                name = node.name or uuid
                result = results[node.name]
                entries = wanted[uuid]
                if result.failed or not isinstance(result.payload, list) or len(result.payload) != len(entries):
                    node_errors[name] = result.fail_msg if result.failed else "invalid answer: %r" % (result.payload,)
                    continue
                for (inst_name, disk), dimensions in zip(entries, result.payload):
                    if _size_of(dimensions) is None:
                        missing.setdefault(inst_name, []).append([name, _disk_path(disk)])
        return [node_errors, [], missing]


@register
class LUClusterRepairDiskSizes(LogicalUnit[OpClusterRepairDiskSizes]):
    """Record the actual sizes of file disks (see the module docstring)."""

    OP_ID = "OP_CLUSTER_REPAIR_DISK_SIZES"
    REQ_BGL = False

    def expand_names(self) -> None:
        names = self.op.instances
        self.wanted = sorted({expand_instance_name(self.cfg, n) for n in names}) if names else None
        self.needed_locks[LEVEL_INSTANCE] = self.wanted if self.wanted is not None else ALL_SET
        self.needed_locks[LEVEL_NODE_RES] = []
        self.share_locks = {LEVEL_NODE_RES: True}

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_NODE_RES:
            self.needed_locks[level] = sorted({i.primary_node for i in self._instances() if i.primary_node})

    def _instances(self) -> list[Instance]:
        by_name = {i.name: i for i in self.cfg.instances.values() if i.name}
        names = self.wanted if self.wanted is not None else sorted(by_name)
        return [by_name[n] for n in names if n in by_name]

    def check_prereq(self) -> None:
        known = {i.name for i in self.cfg.instances.values()}
        for name in self.wanted or []:
            if name not in known:
                raise errors.OpPrereqError("Instance '%s' not known" % name, errors.ECODE_NOENT)

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        per_node: dict[str, list[tuple[Instance, int, Disk]]] = {}
        for inst in self._instances():
            for index, disk in _file_disks(cfg, inst):
                per_node.setdefault(inst.primary_node or "", []).append((inst, index, disk))
        changed: list[list[Any]] = []
        for uuid in sorted(per_node, key=lambda u: cfg.nodes[u].name or u if u in cfg.nodes else u):
            entries = per_node[uuid]
            node = cfg.nodes.get(uuid)
            if node is None or node.offline:
                await self.log_warning("Node %s is offline, not checking the disks of its instances",
                                       node.name if node is not None else uuid)
                continue
            result = await self.ctx.rpc().run_one(
                node.name, address(node),
                procedures.blockdev_getdimensions.call([d.to_dict() for _, _, d in entries]).within(DIMENSIONS_TIMEOUT))
            if result.failed:
                await self.log_warning("Failure in blockdev_getdimensions call to node %s, ignoring: %s",
                                       node.name, result.fail_msg)
                continue
            if not isinstance(result.payload, list) or len(result.payload) != len(entries):
                await self.log_warning("Invalid result from node %s, ignoring node results", node.name)
                continue
            for (inst, index, disk), dimensions in zip(entries, result.payload):
                size = _size_of(dimensions)
                if size is None:
                    await self.log_warning("Disk %d of instance %s did not return size information, ignoring",
                                           index, inst.name)
                    continue
                size //= MIB
                if size == disk.size:
                    continue
                await self.log_info("Disk %d of instance %s has mismatched size, correcting: recorded %s, actual %d",
                                    index, inst.name, disk.size, size)
                current = self.cfg.disks.get(disk.uuid or "", disk)
                await self.update("disk", attrs.evolve(current, size=size))
                changed.append([inst.name, index, "size", size])
        return changed
