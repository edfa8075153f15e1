"""OP_INSTANCE_RECREATE_DISKS: make an instance's disks again, empty.

As Ganeti's C{LUInstanceRecreateDisks}: for a disk lost with its node or
removed by hand.  C{disks} names the disks to make (C{[[index, {size,
mode, spindles}], ...]}, or the deprecated list of indices; empty: all of
them), each optionally with a new size or mode.  C{nodes} (or an
allocator, C{iallocator}) puts the instance on other nodes first: as many
nodes as the instance has (one for every template here: the new primary),
and then every disk is made, not some.

Refused with a clear error, nothing changed: an instance marked up or
running on its primary (unless the primary is offline and the instance
moves), a diskless instance, an unknown or repeated disk index, a
parameter other than size/mode/spindles, a wrong number of nodes, an
offline target.  The disks are made with C{blockdev_create} on the
primary; a disk whose storage is still there fails as it does in Ganeti
("already exists") and the disks made before it are removed again.  After
a move, what is left on the old nodes is the admin's to remove (a warning
says so).  The result is C{None}.

Locks: the instance; the new nodes, or with an allocator every node of
the primary's group, or else the instance's nodes (all exclusively).
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import allocator, iallocator
from ganeti.cmdlib import instance_params as params
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LEVEL_NODE, Feedback, expand_node, register
from ganeti.cmdlib.instance_migration import set_primary_node
from ganeti.cmdlib.instance_ops import InstanceLU
from ganeti.objects import Disk
from ganeti.opcodes.typed import OpInstanceRecreateDisks
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

#: what a recreated disk may change (Ganeti's C{_MODIFYABLE})
MODIFIABLE = ("size", "mode", "spindles")


def normalized(disks: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """C{[(index, params)]} of the opcode's C{disks} (a list of indices becomes
    C{[(index, {})]}, sorted); a repeated index or a parameter that cannot
    change is refused."""
    pairs = [(d, {}) if isinstance(d, int) else (int(d[0]), dict(d[1])) for d in disks]
    seen: set[int] = set()
    repeated = sorted({i for i, _p in pairs if i in seen or seen.add(i)})  # type: ignore[func-returns-value]
    if repeated:
        raise errors.OpPrereqError("Some disks have been specified more than once: %s"
                                   % ", ".join(map(str, repeated)), errors.ECODE_INVAL)
    out = []
    for index, changes in sorted(pairs, key=lambda p: p[0]):
        unsupported = sorted(set(changes) - set(MODIFIABLE))
        if unsupported:
            raise errors.OpPrereqError("Parameters for disk %s try to change unmodifyable parameter(s): %s"
                                       % (index, ", ".join(unsupported)), errors.ECODE_INVAL)
        checked: dict[str, Any] = {}
        if "size" in changes or "mode" in changes:
            checked = params.check_disk({k: changes[k] for k in ("size", "mode") if k in changes}, index,
                                        require_size=False)
        if changes.get("spindles") is not None:
            if isinstance(changes["spindles"], bool) or not isinstance(changes["spindles"], int) \
                    or changes["spindles"] < 0:
                raise errors.OpPrereqError("Disk %d: invalid spindles %r" % (index, changes["spindles"]),
                                           errors.ECODE_INVAL)
            checked["spindles"] = changes["spindles"]
        out.append((index, checked))
    return out


@register
class LUInstanceRecreateDisks(InstanceLU[OpInstanceRecreateDisks]):
    """Recreate an instance's disks (see the module docstring)."""

    OP_ID = "OP_INSTANCE_RECREATE_DISKS"

    def check_arguments(self) -> None:
        op = self.op
        self.changes = normalized(list(op.disks or []))
        if op.iallocator and op.nodes:
            raise errors.OpPrereqError("Give either an allocator or nodes, not both", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        super().expand_names()
        self.new_nodes: list[str] = []
        for name in self.op.nodes or []:
            uuid = expand_node(self.cfg, name).uuid or ""
            if uuid in self.new_nodes:
                raise errors.OpPrereqError("Node %s given more than once" % name, errors.ECODE_INVAL)
            self.new_nodes.append(uuid)
        self.op = attrs.evolve(self.op, nodes=[iu.node_name(self.cfg, u) for u in self.new_nodes],
                               node_uuids=list(self.new_nodes) or None)
        self.needed_locks[LEVEL_NODE] = list(self.new_nodes)

    def declare_locks(self, level: str) -> None:
        inst = self.cfg.instances.get(self.op.instance_uuid or "")
        if inst is None or level != LEVEL_NODE or self.new_nodes:
            return
        if self.op.iallocator:
            group = iu.get_node(self.cfg, inst.primary_node).group
            self.needed_locks[LEVEL_NODE] = sorted(u for u, n in self.cfg.nodes.items() if n.group == group)
        else:
            self.needed_locks[LEVEL_NODE] = iu.instance_nodes(self.cfg, inst)

    def check_prereq(self) -> None:
        super().check_prereq()
        cfg, inst = self.cfg, self.instance
        current = iu.instance_nodes(cfg, inst)
        if self.new_nodes and len(self.new_nodes) != len(current):
            raise errors.OpPrereqError("Instance %s currently has %d nodes, but %d replacement nodes were specified"
                                       % (inst.name, len(current), len(self.new_nodes)), errors.ECODE_INVAL)
        target = self.new_nodes[0] if self.new_nodes else self.pnode
        if not self.op.iallocator:
            iu.check_node_online(cfg, target)
            if self.new_nodes:
                iu.check_node_vm_capable(cfg, target)
        self.disks: list[Disk] = rpc_inst.instance_disks(cfg, inst)
        if not self.disks:
            raise errors.OpPrereqError("Instance '%s' has no disks" % inst.name, errors.ECODE_INVAL)
        moving = bool(self.new_nodes or self.op.iallocator)
        self.old_primary_offline = bool(iu.get_node(cfg, self.pnode).offline)
        if not (moving and self.old_primary_offline):
            iu.check_instance_state(inst, want_down=True, msg="recreate disks")
        wanted = dict(self.changes) if self.changes else {i: {} for i in range(len(self.disks))}
        top = max(wanted)
        if top >= len(self.disks):
            raise errors.OpPrereqError("Invalid disk index '%s' (instance %s has %d disks)"
                                       % (top, inst.name, len(self.disks)), errors.ECODE_INVAL)
        if moving and sorted(wanted) != list(range(len(self.disks))):
            raise errors.OpPrereqError("Can't recreate disks partially and change the nodes at the same time",
                                       errors.ECODE_INVAL)
        if inst.disk_template == iu.DT_BLOCK and any("size" in c for c in wanted.values()):
            raise errors.OpPrereqError("The size of an adopted block device (template blockdev) cannot change",
                                       errors.ECODE_INVAL)
        self.wanted = wanted

    async def _choose_node(self) -> str:
        """The allocator's new primary among the locked nodes of the primary's group."""
        cfg, inst = self.cfg, self.instance
        candidates = [u for u in self.owned_locks(LEVEL_NODE)
                      if not cfg.nodes[u].offline and not cfg.nodes[u].drained and cfg.nodes[u].vm_capable is not False]
        name, executable = allocator.resolve(self.op.iallocator, cfg.cluster.default_iallocator,
                                             allocator.root_of(self))
        template = inst.disk_template or iu.DT_DISKLESS
        states = await allocator.node_states(self, sorted(candidates), inst.hypervisor or "", template)
        request = iallocator.AllocateRequest(
            name=inst.name or "", memory=iu.instance_memory(cfg, inst), vcpus=iu.instance_vcpus(cfg, inst),
            disk_template=template, disks=[{"size": d.size, "mode": d.mode, "spindles": d.spindles}
                                           for d in self.disks],
            nics=[{}], hypervisor=inst.hypervisor or "", os=inst.os or "", tags=list(inst.tags))
        if executable is not None:
            chosen = await allocator.choose_node(cfg, name, executable, request, states,
                                                 {iu.node_name(cfg, u): u for u in candidates}, reactor=self.ctx.clock)
        else:
            placement = allocator.place(request, states)
            if placement.node is None:
                raise errors.OpPrereqError("Can't compute nodes using iallocator '%s': %s"
                                           % (name, placement.explain()), errors.ECODE_NORES)
            chosen = placement.node.uuid
        await self.log_info("Selected nodes for instance %s via iallocator %s: %s", inst.name, name,
                            iu.node_name(cfg, chosen))
        return chosen

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        inst = self.instance
        if not ((self.new_nodes or self.op.iallocator) and self.old_primary_offline):
            await iu.check_instance_not_running(self, inst, "cannot recreate disks")
        target = await self._choose_node() if self.op.iallocator else (self.new_nodes or [self.pnode])[0]
        for index, changes in sorted(self.wanted.items()):
            if changes:
                disk = self.cfg.disks.get(self.disks[index].uuid or "", self.disks[index])
                self.disks[index] = await self.update("disk", attrs.evolve(disk, **changes))
        if target != inst.primary_node:
            await self.log_warning("Changing the instance's nodes, you will have to remove any disks left on the"
                                   " older nodes manually")
            inst = await set_primary_node(self, inst, target)
            self.disks = rpc_inst.instance_disks(self.cfg, inst)
        created: list[Disk] = []
        try:
            for index, disk in enumerate(self.disks):
                if index not in self.wanted:
                    continue
                await self.feedback("* creating disk %s of instance %s on node %s"
                                    % (disk.iv_name, inst.name, iu.node_name(cfg, target)))
                await iu.call_node(self, target, procedures.blockdev_create.call(
                    rpc_inst.disk_dict(self.cfg, disk, inst), disk.size or 0, inst.name, True,
                    "originstname+%s" % inst.name, False),
                                   what="create disk %s of instance %s" % (disk.iv_name, inst.name))
                created.append(disk)
        except errors.OpExecError:
            for problem in await iu.remove_disks(self, target, created):
                await self.log_warning("%s", problem)
            raise
        return None
