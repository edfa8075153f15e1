"""OP_INSTANCE_CHANGE_GROUP and OP_GROUP_EVACUATE: instances to other node groups.

Both place the instances with the built-in allocator (Ganeti's
C{change-group} request answered by the same placement as node
evacuation: running instances first, biggest first, each on the node of the
target groups with the most free memory) and hand one follow-up job per
instance to LuxiD, as OP_NODE_EVACUATE does:

  - C{file} instances: OP_INSTANCE_MOVE (their disks are copied);
  - C{sharedfile} and C{diskless} instances: OP_INSTANCE_MIGRATE (with
    C{allow_failover}) when they run and C{force_failover} is not set,
    OP_INSTANCE_FAILOVER otherwise.

The target groups are C{target_groups} (names or UUIDs), by default every
group but the instance's own whose allocation policy is not
C{unallocable}; their online, undrained, vm-capable nodes are the
candidates.  An instance no node can hold (memory) fails the opcode with
C{ECODE_NORES} before any job is submitted.

Locks (all shared): the instances, their groups and the target groups, and
the nodes of those groups.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ganeti import errors
from ganeti.cmdlib import allocator
from ganeti.cmdlib.base import (
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    lookup_group,
    register,
)
from ganeti.cmdlib.instance_migration import disk_template_of, node_states, uuid_of
from ganeti.cmdlib.instance_utils import (
    ADMIN_UP,
    DT_FILE,
    expand_instance,
    instance_memory,
    node_name,
    refuse_forthcoming,
)
from ganeti.cmdlib.node_evacuation import plan_evacuation
from ganeti.jobs.lifecycle import ResultWithJobs
from ganeti.objects import ConfigData, Instance, Node
from ganeti.opcodes.typed import OpGroupEvacuate, OpInstanceChangeGroup

_LUGroupMovesOpT = TypeVar("_LUGroupMovesOpT", bound=OpGroupEvacuate | OpInstanceChangeGroup, covariant=True)


def target_group_uuids(cfg: ConfigData, source_groups: set[str], wanted: list[str] | None) -> list[str]:
    """The UUIDs of the groups instances of C{source_groups} may go to.
    @raise errors.OpPrereqError: an unknown group, or a source group named as a target
    """
    if wanted:
        uuids = [lookup_group(cfg, name) for name in wanted]
        same = sorted(cfg.nodegroups[u].name or u for u in uuids if u in source_groups)
        if same:
            raise errors.OpPrereqError("Cannot use group(s) %s as a target: the instances are already there"
                                       % ", ".join(same), errors.ECODE_INVAL)
        return sorted(set(uuids))
    return sorted(u for u, g in cfg.nodegroups.items()
                  if u not in source_groups and g.alloc_policy != "unallocable")


def group_nodes(cfg: ConfigData, groups: list[str]) -> list[Node]:
    """The nodes of C{groups} that may receive instances, by name."""
    return sorted((n for n in cfg.nodes.values() if n.group in groups and not n.offline and not n.drained
                   and n.vm_capable is not False), key=lambda n: n.name or "")


def move_opcode(inst: Instance, target: str, force_failover: bool = False) -> dict[str, Any]:
    """The opcode that moves C{inst} to node C{target}."""
    if inst.disk_template == DT_FILE:
        return {"OP_ID": "OP_INSTANCE_MOVE", "instance_name": inst.name, "target_node": target}
    if inst.admin_state == ADMIN_UP and not force_failover:
        return {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": inst.name, "target_node": target,
                "allow_failover": True}
    return {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": inst.name, "target_node": target}


class _LUGroupMoves(LogicalUnit[_LUGroupMovesOpT]):
    """Common part: the instances to move, the target groups, the placement."""

    REQ_BGL = False

    def lock_for(self, instances: list[Instance]) -> None:
        cfg = self.cfg
        self.instance_names = sorted(i.name or "" for i in instances)
        sources = {cfg.nodes[i.primary_node].group for i in instances if i.primary_node in cfg.nodes}
        self.source_groups = {g for g in sources if g}
        own = getattr(self, "group_uuid", None)
        self.targets = target_group_uuids(cfg, self.source_groups | ({own} if own else set()),
                                          self.op.target_groups)
        groups = sorted(self.source_groups | set(self.targets))
        self.needed_locks[LEVEL_INSTANCE] = self.instance_names
        self.needed_locks[LEVEL_NODEGROUP] = groups
        self.needed_locks[LEVEL_NODE] = sorted(u for u, n in cfg.nodes.items() if n.group in groups)
        self.share_all()

    def check_targets(self) -> None:
        if not self.targets:
            raise errors.OpPrereqError("No other node group can take the instances (no target group)",
                                       errors.ECODE_NORES)
        self.candidates = group_nodes(self.cfg, self.targets)
        if not self.candidates:
            names = ", ".join(self.cfg.nodegroups[g].name or g for g in self.targets)
            raise errors.OpPrereqError("No online, undrained, vm_capable node in the target group(s) %s" % names,
                                       errors.ECODE_NORES)

    async def plan(self, instances: list[Instance], force_failover: bool = False) -> list[list[dict[str, Any]]]:
        """One job per instance, moving it where the allocator says."""
        cfg = self.cfg
        wanted = self.op.iallocator
        if wanted and wanted not in (allocator.BUILTIN, allocator.HAIL):
            await self.log_info("Allocator %s places new instances only; the built-in one chooses the nodes",
                                wanted)
        states = await node_states(self, self.candidates, [i.hypervisor or "" for i in instances],
                                   disk_template_of(self.cfg, instances))
        items = [(inst, instance_memory(cfg, inst), inst.admin_state == ADMIN_UP) for inst in instances]
        placed, homeless = plan_evacuation(cfg, items, states)
        if homeless:
            raise errors.OpPrereqError(
                "No node of the target group(s) has enough free memory for %s"
                % ", ".join("%s (%d MiB)" % (i.name, instance_memory(cfg, i)) for i in homeless),
                errors.ECODE_NORES)
        jobs = []
        for inst in instances:
            target = node_name(cfg, placed[uuid_of(inst)])
            await self.log_info("Instance %s goes to node %s", inst.name, target)
            jobs.append([move_opcode(inst, target, force_failover)])
        return jobs


@register
class LUInstanceChangeGroup(_LUGroupMoves[OpInstanceChangeGroup]):
    """Move one instance to another node group (follow-up job)."""

    OP_ID = "OP_INSTANCE_CHANGE_GROUP"

    def expand_names(self) -> None:
        inst = expand_instance(self.cfg, self.op.instance_name)
        refuse_forthcoming(inst)
        self.op = attrs.evolve(self.op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        self.lock_for([inst])

    def check_prereq(self) -> None:
        self.instance = expand_instance(self.cfg, self.op.instance_name)
        self.check_targets()

    async def exec_(self, feedback: Feedback) -> Any:
        return ResultWithJobs(await self.plan([self.instance]))


@register
class LUGroupEvacuate(_LUGroupMoves[OpGroupEvacuate]):
    """Move every instance of a node group to other groups (one follow-up job each)."""

    OP_ID = "OP_GROUP_EVACUATE"

    def group_instances(self) -> list[Instance]:
        cfg = self.cfg
        return sorted((i for i in cfg.instances.values()
                       if i.primary_node in cfg.nodes and cfg.nodes[i.primary_node].group == self.group_uuid),
                      key=lambda i: i.name or "")

    def expand_names(self) -> None:
        self.group_uuid = lookup_group(self.cfg, self.op.group_name)
        self.op = attrs.evolve(self.op, group_name=self.cfg.nodegroups[self.group_uuid].name or "")
        instances = self.group_instances()
        self.lock_for(instances)
        self.source_groups.add(self.group_uuid)
        if self.group_uuid not in self.needed_locks[LEVEL_NODEGROUP]:
            self.needed_locks[LEVEL_NODEGROUP] = sorted(set(self.needed_locks[LEVEL_NODEGROUP]) | {self.group_uuid})

    def check_prereq(self) -> None:
        now = [i.name for i in self.group_instances()]
        if now != self.instance_names:
            raise errors.OpPrereqError("The instances of group %s changed while the locks were taken; try again"
                                       % self.op.group_name, errors.ECODE_STATE)
        self.instances = self.group_instances()
        if self.instances:
            self.check_targets()

    async def exec_(self, feedback: Feedback) -> Any:
        if not self.instances:
            await self.log_info("Group %s has no instances to evacuate", self.op.group_name)
            return ResultWithJobs([])
        jobs = await self.plan(self.instances, self.op.force_failover)
        if self.op.sequential:
            jobs = [[op for job in jobs for op in job]]
        return ResultWithJobs(jobs)
