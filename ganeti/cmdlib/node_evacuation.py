"""The node LUs that move every instance of a node: OP_NODE_MIGRATE and
OP_NODE_EVACUATE (split from L{ganeti.cmdlib.instance_migration}, whose
opcodes their follow-up jobs run).

  - OP_NODE_MIGRATE submits one OP_INSTANCE_MIGRATE per primary instance
    (name order) without checking them: each job accepts or refuses its
    instance, as in Ganeti.
  - OP_NODE_EVACUATE chooses every target itself (C{remote_node}, else an
    external allocator's answer to a C{node-evacuate} request, else the
    built-in allocator, running instances biggest first) and submits one
    job per instance: OP_INSTANCE_MIGRATE with C{allow_failover} for those
    marked up, OP_INSTANCE_FAILOVER for the others.  It refuses the whole
    evacuation, naming them, when some instances have node-local disks.
    Secondary-only evacuation has nothing to do (no template here has
    secondaries).
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ganeti import errors
from ganeti.cmdlib import allocator, iallocator
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    expand_node,
    register,
)
from ganeti.cmdlib.instance_migration import (
    disk_template_of,
    local_disk_problem,
    move_request,
    node_states,
    possible_targets,
    uuid_of,
)
from ganeti.cmdlib.instance_utils import (
    ADMIN_UP,
    check_node_not_drained,
    check_node_online,
    check_node_vm_capable,
    get_node,
    instance_memory,
    node_name,
    secondary_nodes,
)
from ganeti.jobs.lifecycle import ResultWithJobs
from ganeti.objects import ConfigData, Instance, Node
from ganeti.opcodes.typed import OpNodeEvacuate, OpNodeMigrate

_LUNodeJobsOpT = TypeVar("_LUNodeJobsOpT", bound=OpNodeEvacuate | OpNodeMigrate, covariant=True)

EVAC_PRIMARY = "primary-only"
EVAC_SECONDARY = "secondary-only"
EVAC_ALL = "all"


def plan_evacuation(
    cfg: ConfigData, instances: list[tuple[Instance, int, bool]], states: list[allocator.NodeState]
) -> tuple[dict[str, str], list[Instance]]:
    """Place C{instances} (C{(instance, MiB, running)}) with the built-in allocator.

    Running instances first, biggest first, each where the allocator puts
    it; then the stopped ones, which need no memory now (the allocator
    takes the node with the most left).  Each placed instance's memory is
    taken from its node, so that the next ones spread.

    @return: C{({instance uuid: node uuid}, [running instances no node can hold])}
    """
    current = {s.uuid: s for s in states}
    placed: dict[str, str] = {}
    homeless: list[Instance] = []
    for inst, need, running in sorted(instances, key=lambda item: (not item[2], -item[1], item[0].name or "")):
        placement = allocator.place(move_request(cfg, inst, need if running else 0), list(current.values()))
        if placement.node is None:
            homeless.append(inst)
            continue
        node = placement.node
        placed[uuid_of(inst)] = node.uuid
        current[node.uuid] = attrs.evolve(node, free_memory=(node.free_memory or 0) - need,
                                          instances=node.instances + 1)
    return placed, homeless


# --- OP_NODE_MIGRATE / OP_NODE_EVACUATE --------------------------------------------------------


def primary_instances(cfg: ConfigData, node_uuid: str) -> list[Instance]:
    """The instances whose primary node is C{node_uuid}, by name."""
    return sorted((i for i in cfg.instances.values() if i.primary_node == node_uuid), key=lambda i: i.name or "")


def secondary_instances(cfg: ConfigData, node_uuid: str) -> list[Instance]:
    """The instances with a disk on C{node_uuid} that is not their primary, by name."""
    return sorted((i for i in cfg.instances.values() if node_uuid in secondary_nodes(cfg, i)),
                  key=lambda i: i.name or "")


class _LUNodeJobs(LogicalUnit[_LUNodeJobsOpT]):
    """A node LU that hands one job per instance on to LuxiD."""

    REQ_BGL = False

    def expand_node_names(self) -> Node:
        node = expand_node(self.cfg, self.op.node_uuid or self.op.node_name)
        self.node_uuid = uuid_of(node)
        self.op = attrs.evolve(self.op, node_name=node.name or "", node_uuid=node.uuid)
        return node

    def node(self) -> Node:
        node = self.cfg.nodes.get(self.node_uuid)
        if node is None:
            raise errors.OpPrereqError("Node '%s' not known" % self.op.node_name, errors.ECODE_NOENT)
        return node


@register
class LUNodeMigrate(_LUNodeJobs[OpNodeMigrate]):
    """Migrate every primary instance of a node: one OP_INSTANCE_MIGRATE job each.

    Locks: the node, shared.
    """

    OP_ID = "OP_NODE_MIGRATE"

    def check_arguments(self) -> None:
        if self.op.mode is not None and self.op.live is not None:
            raise errors.OpPrereqError("Give either 'mode' or 'live', not both", errors.ECODE_INVAL)
        if self.op.target_node and self.op.iallocator:
            raise errors.OpPrereqError("Give either a target node or an iallocator, not both", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        node = self.expand_node_names()
        wanted = self.op.target_node_uuid or self.op.target_node
        if wanted:
            target = expand_node(self.cfg, wanted)
            if target.uuid == node.uuid:
                raise errors.OpPrereqError("Cannot migrate the instances of node %s to that node itself" % node.name,
                                           errors.ECODE_INVAL)
            self.op = attrs.evolve(self.op, target_node=target.name, target_node_uuid=target.uuid)
        self.needed_locks = {LEVEL_NODE: [node.uuid]}
        self.share_all()

    def check_prereq(self) -> None:
        self.node()

    async def exec_(self, feedback: Feedback) -> Any:
        instances = primary_instances(self.cfg, self.node_uuid)
        if not instances:
            await self.log_info("Node %s has no primary instances", self.op.node_name)
        op = self.op
        passed_on = {"mode": op.mode, "live": op.live, "target_node": op.target_node, "iallocator": op.iallocator,
                     "allow_runtime_changes": op.allow_runtime_changes, "ignore_ipolicy": op.ignore_ipolicy}
        params = {key: value for key, value in passed_on.items() if value is not None}
        jobs = [[dict({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": inst.name}, **params)] for inst in instances]
        return ResultWithJobs(jobs)


@register
class LUNodeEvacuate(_LUNodeJobs[OpNodeEvacuate]):
    """Move every instance away from a node: one job per instance.

    Locks (all shared): the instances to move, the groups of the node and
    of C{remote_node}, the node and C{remote_node} (every node when the
    allocator chooses).
    """

    OP_ID = "OP_NODE_EVACUATE"

    def check_arguments(self) -> None:
        if self.op.remote_node and self.op.iallocator:
            raise errors.OpPrereqError("Give either a remote node or an iallocator, not both", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        node = self.expand_node_names()
        self.remote_uuid: str | None = None
        wanted = self.op.remote_node_uuid or self.op.remote_node
        if wanted:
            remote = expand_node(self.cfg, wanted)
            if remote.uuid == node.uuid:
                raise errors.OpPrereqError("Cannot evacuate node %s to itself" % node.name, errors.ECODE_INVAL)
            self.remote_uuid = remote.uuid
            self.op = attrs.evolve(self.op, remote_node=remote.name, remote_node_uuid=remote.uuid)
        self.instance_names = self.affected(self.cfg)
        groups = {node.group}
        if self.remote_uuid is not None:
            groups.add(get_node(self.cfg, self.remote_uuid).group)
        self.needed_locks = {
            LEVEL_INSTANCE: self.instance_names,
            LEVEL_NODEGROUP: sorted(g for g in groups if g),
            LEVEL_NODE: [node.uuid, self.remote_uuid] if self.remote_uuid is not None else ALL_SET,
        }
        self.share_all()

    def affected(self, cfg: ConfigData) -> list[str]:
        """Names of the instances the evacuation concerns (primary and/or secondary)."""
        found: list[Instance] = []
        if self.op.mode in (EVAC_PRIMARY, EVAC_ALL):
            found += primary_instances(cfg, self.node_uuid)
        if self.op.mode in (EVAC_SECONDARY, EVAC_ALL):
            found += secondary_instances(cfg, self.node_uuid)
        return sorted({i.name for i in found if i.name})

    def check_prereq(self) -> None:
        cfg, node = self.cfg, self.node()
        now = self.affected(cfg)
        if now != self.instance_names:
            raise errors.OpPrereqError(
                "The instances of node %s changed while the locks were taken (were: %s; now: %s); try again"
                % (node.name, ", ".join(self.instance_names) or "none", ", ".join(now) or "none"),
                errors.ECODE_STATE,
            )
        if self.remote_uuid is not None:
            check_node_online(cfg, self.remote_uuid, "Cannot evacuate to an offline node")
            check_node_not_drained(cfg, self.remote_uuid)
            check_node_vm_capable(cfg, self.remote_uuid)
        secondaries = [i.name or "?" for i in secondary_instances(cfg, self.node_uuid)]
        if secondaries and self.op.mode != EVAC_PRIMARY:
            raise errors.OpPrereqError(
                "Cannot move the disks of instances %s away from their secondary node %s: no supported disk"
                " template has secondaries" % (", ".join(sorted(secondaries)), node.name),
                errors.ECODE_STATE,
            )
        self.to_move = primary_instances(cfg, self.node_uuid) if self.op.mode != EVAC_SECONDARY else []
        stuck = []
        for inst in self.to_move:
            problem = local_disk_problem(cfg, inst)
            if problem is not None:
                stuck.append("%s (%s)" % (inst.name, problem))
        if stuck:
            raise errors.OpPrereqError(
                "Cannot evacuate node %s: the disks of instance(s) %s are local to it and cannot move;"
                " remove or export these instances first" % (node.name, ", ".join(stuck)),
                errors.ECODE_STATE,
            )

    async def exec_(self, feedback: Feedback) -> Any:
        if not self.to_move:
            await self.log_info("No instances to evacuate from node %s", self.op.node_name)
            return ResultWithJobs([])
        targets = await self.targets()
        jobs = []
        for inst in self.to_move:
            target = node_name(self.cfg, targets[uuid_of(inst)])
            if inst.admin_state == ADMIN_UP:
                op = {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": inst.name, "target_node": target,
                      "allow_failover": True}
            else:
                op = {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": inst.name, "target_node": target}
            jobs.append([op])
        return ResultWithJobs(jobs)

    async def targets(self) -> dict[str, str]:
        """C{{instance uuid: target node uuid}} for L{to_move}."""
        if self.remote_uuid is not None:
            return {uuid_of(inst): self.remote_uuid for inst in self.to_move}
        cfg = self.cfg
        candidates = possible_targets(cfg, self.node_uuid)
        if not candidates:
            raise errors.OpPrereqError(
                "Cannot evacuate node %s: no other online, undrained, vm_capable node in its group"
                % self.op.node_name, errors.ECODE_NORES,
            )
        name, executable = allocator.resolve(self.op.iallocator, cfg.cluster.default_iallocator,
                                             allocator.root_of(self))
        states = await node_states(self, candidates, [inst.hypervisor or "" for inst in self.to_move],
                                   disk_template_of(self.cfg, self.to_move))
        if executable is not None:
            return await self.external_targets(name, executable, candidates, states)
        wanted = [(inst, instance_memory(cfg, inst), inst.admin_state == ADMIN_UP) for inst in self.to_move]
        placed, homeless = plan_evacuation(cfg, wanted, states)
        if homeless:
            problems = "; ".join(s.name + ": " + s.error for s in states if s.error is not None)
            raise errors.OpPrereqError(
                "Cannot evacuate node %s: no node has enough free memory for %s%s" % (
                    self.op.node_name,
                    ", ".join("%s (%d MiB)" % (i.name, instance_memory(cfg, i)) for i in homeless),
                    " (%s)" % problems if problems else ""),
                errors.ECODE_NORES,
            )
        for inst in self.to_move:
            await self.log_info("Instance %s goes to node %s", inst.name, node_name(cfg, placed[uuid_of(inst)]))
        return placed

    async def external_targets(self, name: str, executable: str, candidates: list[Node],
                               states: list[allocator.NodeState]) -> dict[str, str]:
        """L{targets} as external allocator C{name} answers a C{node-evacuate} request."""
        request = iallocator.NodeEvacRequest([i.name or "" for i in self.to_move], self.op.mode,
                                             bool(self.op.ignore_soft_errors))
        answer = await allocator.run_request(self.cfg, name, executable, request, states, self.ctx.clock)
        placed = iallocator.evacuation_targets(name, iallocator.evacuation(name, answer),
                                               {i.name or "": uuid_of(i) for i in self.to_move},
                                               {n.name or "": uuid_of(n) for n in candidates})
        for inst in self.to_move:
            await self.log_info("Instance %s goes to node %s (allocator %s)", inst.name,
                                node_name(self.cfg, placed[uuid_of(inst)]), name)
        return placed
