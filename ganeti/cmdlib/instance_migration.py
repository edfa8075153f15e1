"""Moving instances between nodes: OP_INSTANCE_MIGRATE and OP_INSTANCE_FAILOVER
(the node LUs that submit them, OP_NODE_MIGRATE and OP_NODE_EVACUATE, are in
L{ganeti.cmdlib.node_evacuation}).

Only an instance whose disks every node sees can change node: templates
C{sharedfile} and C{diskless}.  Any other (C{file}, C{plain}, ...) has its
disks on its primary node and is refused with an L{errors.OpPrereqError}
naming that node.

Migration (the instance keeps running) follows the node RPC contract of
L{ganeti.rpc.instances}: C{migration_info} on the source, C{accept_instance}
on the target, C{instance_migrate} on the source, C{instance_get_migration_status}
polled on the source until the transfer is over, then
C{instance_finalize_migration_dst} on the target and
C{instance_finalize_migration_src} on the source.  When anything fails
after the target accepted the instance, both sides are finalized with
C{success=false}: the instance keeps running on the source and the
configuration is unchanged.  The primary node changes in the configuration
only once the target has taken the instance over.

Failover (the instance is stopped and started): stop it on the source
(skipped, with a warning, when the source is marked offline; a failed stop
aborts unless C{ignore_consistency}), change the primary node, then start
it on the target if it is marked up.

Choices where Ganeti leaves room or has features we do not have:
  - Migrating an instance that is not marked up, or does not run on its
    primary node, or whose primary node is offline, is refused unless
    C{allow_failover} is set, which turns the operation into a failover
    (the instance is then started on the target only if marked up).
  - The migration mode is C{mode}, else C{live}, else the instance's
    C{migration_mode} hypervisor parameter, else live.
  - No memory ballooning: the target must have the instance's current
    memory free (C{allow_runtime_changes} is accepted and has no effect);
    C{ignore_ipolicy} and C{ignore_hvversions} are accepted, there is no
    instance policy nor hypervisor version check to skip.
  - Without C{target_node} the allocator C{iallocator} names (else the
    cluster's default) chooses: an external one (Ganeti's C{hail}) answers
    a C{relocate} request (L{ganeti.cmdlib.iallocator}); the built-in one
    of L{ganeti.cmdlib.allocator} takes, among the online, undrained,
    vm_capable nodes of the primary's group, one that has the instance's
    memory free (C{node_info}), the most left after it.  The LU
    then holds every node lock until the choice is made, and keeps only
    those of the primary and the target afterwards.
  - C{cleanup} asks C{instance_list} on the primary and on the target (or,
    without one, on every possible target) and records where the instance
    runs; it fails if that is nowhere or on several nodes.  OP_INSTANCE_FAILOVER
    ignores C{cleanup}.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, TypeVar

import attrs

from ganeti import errors
from ganeti.cmdlib import allocator, iallocator
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODE_ALLOC,
    LEVEL_NODE_RES,
    Feedback,
    LogicalUnit,
    expand_node,
    register,
)
from ganeti.cmdlib.instance_utils import (
    ADMIN_UP,
    DT_DISKLESS,
    SHARED_TEMPLATES,
    TMO_START,
    NodeResources,
    call_node,
    call_node_result,
    check_bridges,
    check_node_free_memory,
    check_node_not_drained,
    check_node_online,
    check_node_vm_capable,
    current_instance,
    disks_follow_primary,
    encode,
    expand_instance,
    get_node,
    instance_info,
    instance_memory,
    instance_vcpus,
    node_address,
    node_name,
    node_resources,
    primary_counts,
    reason_trail,
    refuse_forthcoming,
    start_instance_on,
)
from ganeti.objects import ConfigData, Instance, Node
from ganeti.opcodes import DEFAULT_SHUTDOWN_TIMEOUT
from ganeti.opcodes.typed import OpCode, OpInstanceFailover, OpInstanceMigrate
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

_LUInstanceMoveOpT = TypeVar("_LUInstanceMoveOpT", bound=OpInstanceFailover | OpInstanceMigrate, covariant=True)

#: templates whose instances can change node
MOVABLE_TEMPLATES = tuple(SHARED_TEMPLATES) + (DT_DISKLESS,)

MODE_LIVE = "live"
MODE_NON_LIVE = "non-live"

#: seconds between two C{instance_get_migration_status} calls
MIGRATION_POLL_INTERVAL = 1.0
#: seconds between two progress lines in the job log
MIGRATION_FEEDBACK_INTERVAL = 10.0
#: statuses of a migration still going on (the hypervisors' own words)
MIGRATION_ACTIVE = frozenset(
    ["active", "setup", "pre-switchover", "device", "postcopy-active", "postcopy-paused", "postcopy-recover",
     "wait-unplug"]
)
MIGRATION_COMPLETED = "completed"



# --- checks --------------------------------------------------------------------------


def local_disk_problem(cfg: ConfigData, inst: Instance) -> str | None:
    """Why the disks of C{inst} cannot follow it to another node, or C{None}."""
    template = inst.disk_template or DT_DISKLESS
    if template not in MOVABLE_TEMPLATES:
        return "disk template %s" % template
    for index, disk in enumerate(rpc_inst.instance_disks(cfg, inst)):
        if disk.dev_type not in MOVABLE_TEMPLATES:
            return "disk %d is of type %s" % (index, disk.dev_type)
    return None


def check_movable(cfg: ConfigData, inst: Instance, what: str) -> None:
    """Refuse an instance whose disks live on its primary node only."""
    problem = local_disk_problem(cfg, inst)
    if problem is not None:
        raise errors.OpPrereqError(
            "Cannot %s instance %s: its disks (%s) are local to node %s and cannot follow it to another node;"
            " only %s instances can change node" % (what, inst.name, problem, node_name(cfg, inst.primary_node),
                                                   " and ".join(MOVABLE_TEMPLATES)),
            errors.ECODE_STATE,
        )


def check_target_node(cfg: ConfigData, inst: Instance, target_uuid: str, what: str) -> Node:
    """The node C{target_uuid}, if C{inst} may go there."""
    node = get_node(cfg, target_uuid)
    if target_uuid == inst.primary_node:
        raise errors.OpPrereqError(
            "Cannot %s instance %s to node %s: it is its primary node already" % (what, inst.name, node.name),
            errors.ECODE_INVAL,
        )
    check_node_online(cfg, target_uuid, "Cannot %s an instance to an offline node" % what)
    check_node_not_drained(cfg, target_uuid)
    check_node_vm_capable(cfg, target_uuid)
    return node


def uuid_of(item: Node | Instance) -> str:
    """The UUID of a node or instance of the config (never missing there)."""
    return item.uuid or ""


def migration_address(node: Node) -> str:
    """Where the instance's memory goes: the node's secondary IP (else its primary)."""
    return node.secondary_ip or node_address(node)


def possible_targets(cfg: ConfigData, source_uuid: str | None, exclude: Iterable[str] = ()) -> list[Node]:
    """Nodes of the source's group that may receive an instance, by name."""
    source = cfg.nodes.get(source_uuid or "")
    group = source.group if source is not None else None
    skip = set(exclude) | {source_uuid}
    return sorted(
        (n for n in cfg.nodes.values()
         if n.uuid not in skip and (group is None or n.group == group)
         and not n.offline and not n.drained and n.vm_capable is not False),
        key=lambda n: n.name or "",
    )


def disk_template_of(cfg: ConfigData, instances: Iterable[Instance]) -> str:
    """The disk template whose storage figures the allocator input of a move
    carries: the instances' one, else (mixed) the cluster's first enabled one
    among theirs, as Ganeti's input has figures of one template."""
    templates = list(dict.fromkeys(i.disk_template or DT_DISKLESS for i in instances))
    if len(templates) == 1:
        return templates[0]
    enabled = [t for t in cfg.cluster.enabled_disk_templates or [] if t in templates]
    return (enabled or templates or [DT_DISKLESS])[0]


async def node_states(lu: LogicalUnit[OpCode], nodes: list[Node], hypervisors: Iterable[str],
                      template: str = DT_DISKLESS) -> list[allocator.NodeState]:
    """The allocator's view of C{nodes} (C{node_info} once per hypervisor;
    the least free memory counts), with the storage figures of C{template}."""
    counts = primary_counts(lu.cfg)
    states = {uuid_of(n): allocator.NodeState(uuid_of(n), n.name or "", instances=counts.get(uuid_of(n), 0))
              for n in nodes}
    for number, hv in enumerate(sorted(set(hypervisors))):
        answers = await node_resources(lu, list(states), hv, [template] if number == 0 else [])
        for uuid, state in states.items():
            res = answers.get(uuid)
            if state.error is not None:
                continue
            if not isinstance(res, NodeResources):
                states[uuid] = attrs.evolve(state, error=str(res))
            elif res.memory_free is not None:
                free = res.memory_free if state.free_memory is None else min(state.free_memory, res.memory_free)
                free_disk, total_disk = res.storage_of(template)
                if number > 0:
                    free_disk, total_disk = state.free_disk, state.total_disk
                states[uuid] = attrs.evolve(state, free_memory=free, total_memory=res.memory_total,
                                            total_cpus=res.cpu_total, reserved_memory=res.memory_dom0 or 0,
                                            reserved_cpus=res.cpu_dom0 or 0, free_disk=free_disk,
                                            total_disk=total_disk)
    return list(states.values())


def move_request(cfg: ConfigData, inst: Instance, memory: int) -> allocator.Request:
    """What the allocator must find room for: C{memory} MiB (the disks stay
    where they are, on storage every node sees)."""
    return allocator.Request(name=inst.name or "", memory=memory, vcpus=instance_vcpus(cfg, inst),
                             disk_template=inst.disk_template or DT_DISKLESS, hypervisor=inst.hypervisor or "",
                             os=inst.os or "", tags=list(inst.tags))


async def choose_target(lu: LogicalUnit[OpInstanceFailover | OpInstanceMigrate], inst: Instance, need: int) -> str:
    """The allocator's node for C{inst} (C{need} MiB free) among the
    possible targets whose lock the LU holds."""
    owned = lu.owned_locks(LEVEL_NODE)
    candidates = [n for n in possible_targets(lu.cfg, inst.primary_node) if n.uuid in owned]
    if not candidates:
        raise errors.OpPrereqError(
            "No node can take instance %s: no other online, undrained, vm_capable node in the group of node %s"
            % (inst.name, node_name(lu.cfg, inst.primary_node)),
            errors.ECODE_NORES,
        )
    name, executable = allocator.resolve(lu.op.iallocator, lu.cfg.cluster.default_iallocator,
                                         allocator.root_of(lu))
    states = await node_states(lu, candidates, [inst.hypervisor or ""], disk_template_of(lu.cfg, [inst]))
    if executable is not None:
        request = iallocator.RelocateRequest(inst.name or "", [node_name(lu.cfg, inst.primary_node)])
        chosen = await allocator.choose_node(lu.cfg, name, executable, request, states,
                                             {n.name or "": uuid_of(n) for n in candidates}, reactor=lu.ctx.clock)
        await lu.log_info("Selected node %s for instance %s (allocator %s)", node_name(lu.cfg, chosen), inst.name, name)
        return chosen
    placement = allocator.place(move_request(lu.cfg, inst, need), states)
    if placement.node is None:
        raise errors.OpPrereqError(
            "No node can take instance %s (%d MiB of memory): %s" % (inst.name, need, placement.explain()),
            errors.ECODE_NORES,
        )
    await lu.log_info("Selected node %s for instance %s", placement.node.name, inst.name)
    return placement.node.uuid


# --- moving the instance in the configuration -----------------------------------------------


async def set_primary_node(lu: LogicalUnit[OpCode], inst: Instance, target_uuid: str) -> Instance:
    """Record C{target_uuid} as the primary node of C{inst}, and its disks' node."""
    current = lu.cfg.instances.get(inst.uuid or "", inst)
    old = current.primary_node
    stored: Instance = await lu.update("instance", attrs.evolve(current, primary_node=target_uuid))
    await disks_follow_primary(lu, stored, old or "", target_uuid)
    return stored


async def failover(
    lu: LogicalUnit[OpCode], inst: Instance, target_uuid: str, shutdown_timeout: int, ignore_consistency: bool
) -> None:
    """Stop C{inst} on its primary, make C{target_uuid} its primary, start it
    there if it is marked up."""
    cfg = lu.cfg
    source, target = get_node(cfg, inst.primary_node), get_node(cfg, target_uuid)
    if inst.forthcoming:  # as Ganeti: only the configuration moves
        await lu.feedback("Instance is forthcoming, just updating the configuration")
        await set_primary_node(lu, inst, target_uuid)
        return
    await lu.feedback("* shutting down instance on source node %s" % source.name)
    if source.offline:
        await lu.log_warning(
            "Node %s is offline: instance %s is not stopped there; make sure that node is really down",
            source.name, inst.name,
        )
    else:
        result = await call_node_result(
            lu, uuid_of(source), procedures.instance_shutdown.call(
                encode(lu, inst), int(shutdown_timeout), reason_trail(lu)).within(TMO_START + int(shutdown_timeout)),
        )
        if result.failed:
            if not ignore_consistency:
                raise errors.OpExecError(
                    "Could not shut down instance %s on node %s: %s" % (inst.name, source.name, result.fail_msg)
                )
            await lu.log_warning(
                "Could not shut down instance %s on node %s (%s); going on as ignore_consistency asks:"
                " make sure it does not run there", inst.name, source.name, result.fail_msg,
            )
    inst = await set_primary_node(lu, inst, target_uuid)
    if inst.admin_state == ADMIN_UP:
        await lu.feedback("* starting the instance on the target node %s" % target.name)
        await start_instance_on(lu, inst, target_uuid)
    else:
        await lu.feedback("* instance %s is marked %s: not starting it on %s"
                          % (inst.name, inst.admin_state or "down", target.name))


# --- OP_INSTANCE_MIGRATE / OP_INSTANCE_FAILOVER -----------------------------------------------


class _LUInstanceMove(LogicalUnit[_LUInstanceMoveOpT]):
    """What migration and failover share: names, locks, checks.

    Locks: the instance exclusively; node and node-res locks of the
    primary and the target, exclusively, or every node when the target is
    to be chosen.
    """

    REQ_BGL = False
    WHAT: ClassVar[str] = ""
    #: as Ganeti: a forthcoming instance can fail over (in the configuration only), not migrate
    ALLOW_FORTHCOMING: ClassVar[bool] = False

    def check_arguments(self) -> None:
        if self.op.target_node and self.op.iallocator:
            raise errors.OpPrereqError("Give either a target node or an iallocator, not both", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        inst = expand_instance(self.cfg, self.op.instance_name)
        if not self.ALLOW_FORTHCOMING:
            refuse_forthcoming(inst)
        self.inst_uuid = uuid_of(inst)
        self.op = attrs.evolve(self.op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        self.target_uuid: str | None = None
        wanted = self.op.target_node_uuid or self.op.target_node
        if wanted:
            node = expand_node(self.cfg, wanted)
            self.target_uuid = node.uuid
            self.op = attrs.evolve(self.op, target_node=node.name, target_node_uuid=node.uuid)
        self.needed_locks = {LEVEL_INSTANCE: [inst.name], LEVEL_NODE: [], LEVEL_NODE_RES: []}
        if self.target_uuid is None:  # the allocator chooses: share the node-allocation lock
            self.needed_locks[LEVEL_NODE_ALLOC] = [allocator.NAL_MEMBER]
            self.share_locks[LEVEL_NODE_ALLOC] = True

    def declare_locks(self, level: str) -> None:
        if level not in (LEVEL_NODE, LEVEL_NODE_RES):
            return
        if self.target_uuid is None:
            self.needed_locks[level] = ALL_SET
            return
        inst = self.cfg.instances.get(self.inst_uuid)
        members = [self.target_uuid]
        if inst is not None and inst.primary_node:
            members.append(inst.primary_node)
        self.needed_locks[level] = members

    def check_prereq(self) -> None:
        inst = current_instance(self.cfg, self.inst_uuid, self.op.instance_name)
        self.instance = inst
        check_movable(self.cfg, inst, self.WHAT)
        get_node(self.cfg, inst.primary_node)
        if self.target_uuid is not None:
            check_target_node(self.cfg, inst, self.target_uuid, self.WHAT)

    async def target_for(self, inst: Instance, need: int) -> str:
        """The given target (with C{need} MiB free), or one the allocator
        chooses; it must have the instance's bridges (Ganeti's check)."""
        if self.target_uuid is None:
            self.target_uuid = await choose_target(self, inst, need)
            keep = [self.target_uuid, inst.primary_node or ""]
            await self.release_locks(LEVEL_NODE_ALLOC)
            await self.release_locks(LEVEL_NODE, keep=keep)
            await self.release_locks(LEVEL_NODE_RES, keep=keep)
        elif need > 0:
            await check_node_free_memory(
                self, self.target_uuid, "%s of instance %s" % (self.WHAT, inst.name), need, inst.hypervisor or "",
            )
        await check_bridges(self, inst.nics, self.target_uuid, inst.hypervisor or "")
        return self.target_uuid

    async def run_failover(self, inst: Instance, shutdown_timeout: int, ignore_consistency: bool) -> None:
        need = instance_memory(self.cfg, inst) if inst.admin_state == ADMIN_UP else 0
        target = await self.target_for(inst, need)
        await self.feedback("Failover instance %s" % inst.name)
        await failover(self, inst, target, shutdown_timeout, ignore_consistency)


@register
class LUInstanceFailover(_LUInstanceMove[OpInstanceFailover]):
    """Stop an instance, change its primary node, start it there (if marked up)."""

    OP_ID = "OP_INSTANCE_FAILOVER"
    WHAT = "failover"
    ALLOW_FORTHCOMING = True

    async def exec_(self, feedback: Feedback) -> Any:
        await self.run_failover(self.instance, self.op.shutdown_timeout, self.op.ignore_consistency)
        return None


@register
class LUInstanceMigrate(_LUInstanceMove[OpInstanceMigrate]):
    """Move a running instance to another node without stopping it."""

    OP_ID = "OP_INSTANCE_MIGRATE"
    WHAT = "migrate"

    def check_arguments(self) -> None:
        super().check_arguments()
        if self.op.mode is not None and self.op.live is not None:
            raise errors.OpPrereqError("Give either 'mode' or 'live', not both", errors.ECODE_INVAL)

    def check_prereq(self) -> None:
        super().check_prereq()
        inst = self.instance
        mode = self.op.mode
        if mode is None and self.op.live is not None:
            mode = MODE_LIVE if self.op.live else MODE_NON_LIVE
        if mode is None:
            mode = rpc_inst.filled_hvparams(self.cfg, inst).get("migration_mode") or MODE_LIVE
        self.live = mode == MODE_LIVE
        self.fall_back = False
        if self.op.cleanup:
            return
        why = None
        if inst.admin_state != ADMIN_UP:
            why = "it is marked %s" % (inst.admin_state or "down")
        elif get_node(self.cfg, inst.primary_node).offline:
            why = "its primary node %s is offline" % node_name(self.cfg, inst.primary_node)
        if why is not None:
            if not self.op.allow_failover:
                raise errors.OpPrereqError(
                    "Cannot migrate instance %s: %s; use failover (or allow_failover)" % (inst.name, why),
                    errors.ECODE_STATE,
                )
            self.fall_back = True
            self.fall_back_reason = why

    async def exec_(self, feedback: Feedback) -> Any:
        inst = self.instance
        if self.op.cleanup:
            await self.feedback("Migrating instance %s (cleanup)" % inst.name)
            await self.cleanup(inst)
            return None
        running = None
        if not self.fall_back:
            running = await instance_info(self, inst)
            if running is None:
                why = "it does not run on its primary node %s" % node_name(self.cfg, inst.primary_node)
                if not self.op.allow_failover:
                    raise errors.OpPrereqError(
                        "Cannot migrate instance %s: %s; use failover (or allow_failover)" % (inst.name, why),
                        errors.ECODE_STATE,
                    )
                self.fall_back, self.fall_back_reason = True, why
        if self.fall_back:
            await self.log_info("Instance %s cannot be migrated (%s): failing it over", inst.name,
                                self.fall_back_reason)
            await self.run_failover(inst, DEFAULT_SHUTDOWN_TIMEOUT, False)
            return None
        assert running is not None
        need = int(running.get("memory") or instance_memory(self.cfg, inst))
        target = await self.target_for(inst, need)
        await self.feedback("Migrating instance %s" % inst.name)
        await self.migrate(inst, target)
        return None

    # --- the migration ---------------------------------------------------------
    async def migrate(self, inst: Instance, target_uuid: str) -> None:
        source, target = get_node(self.cfg, inst.primary_node), get_node(self.cfg, target_uuid)
        data = encode(self, inst)
        address = migration_address(target)
        await self.feedback("* checking disk consistency between source and target")
        # sharedfile and diskless: both nodes see the same disks, nothing differs
        info = await call_node(self, uuid_of(source), procedures.migration_info.call(data),
                               what="get the migration data of instance %s" % inst.name)
        await self.feedback("* preparing %s to accept the instance" % target.name)
        try:
            await call_node(self, uuid_of(target), procedures.accept_instance.call(data, info, address),
                            what="prepare the migration of instance %s" % inst.name)
        except errors.OpExecError:
            await self.abort(source, target, data, info, source_too=False)
            raise
        await self.feedback("* migrating instance to %s" % target.name)
        try:
            await call_node(self, uuid_of(source),
                            procedures.instance_migrate.call(self.cfg.cluster.cluster_name or "", data, address, self.live),
                            what="migrate instance %s" % inst.name)
            await self.wait_for_migration(inst, source, data)
            await call_node(self, uuid_of(target), procedures.instance_finalize_migration_dst.call(data, info, True),
                            what="take over instance %s" % inst.name)
        except errors.OpExecError as e:
            await self.feedback("* migration failed, rolling back: %s" % e)
            await self.abort(source, target, data, info, source_too=True)
            raise errors.OpExecError(
                "Could not migrate instance %s, it stays on node %s: %s" % (inst.name, source.name, e)
            ) from e
        await self.feedback("* instance %s runs on %s now, updating the configuration" % (inst.name, target.name))
        await set_primary_node(self, inst, target_uuid)
        result = await call_node_result(self, uuid_of(source),
                                        procedures.instance_finalize_migration_src.call(data, True, self.live))
        if result.failed:
            await self.log_warning("Node %s could not clean up after the migration of instance %s: %s",
                                   source.name, inst.name, result.fail_msg)
        await self.feedback("* done")

    async def wait_for_migration(self, inst: Instance, source: Node, data: dict[str, Any]) -> None:
        """Poll the source until the transfer is over; OpExecError if it failed."""
        clock = self.ctx.clock
        last = clock.seconds()
        while True:
            status = await call_node(self, uuid_of(source), procedures.instance_get_migration_status.call(data),
                                     what="get the migration status of instance %s" % inst.name)
            state = status.get("status") if isinstance(status, dict) else None
            if state == MIGRATION_COMPLETED:
                await self.feedback_completed(status)
                return
            if state not in MIGRATION_ACTIVE:
                detail = status.get("info") or status.get("error") if isinstance(status, dict) else None
                raise errors.OpExecError(
                    "the migration ended with status %r%s" % (state, ": %s" % detail if detail else "")
                )
            now = clock.seconds()
            if now - last >= MIGRATION_FEEDBACK_INTERVAL:
                last = now
                done, total = status.get("transferred_ram"), status.get("total_ram")
                if isinstance(done, (int, float)) and isinstance(total, (int, float)) and total > 0:
                    await self.feedback("* memory transfer progress: %.2f %%" % (100.0 * done / total))
            await self.ctx.sleep(MIGRATION_POLL_INTERVAL)

    async def feedback_completed(self, status: dict[str, Any]) -> None:
        """Tell the hypervisor's own figures of a completed migration, when it gives them
        (kvm: qemu's C{query-migrate}: the guest's downtime, the memory sent, the time)."""
        downtime = status.get("downtime_ms")
        if not isinstance(downtime, int) or isinstance(downtime, bool):
            return
        parts = ["downtime %d ms" % downtime]
        sent = status.get("transferred_ram")
        if isinstance(sent, int) and not isinstance(sent, bool):
            parts.append("%.1f MiB of memory sent" % (sent / 1048576.0))
        took = status.get("total_time_ms")
        if isinstance(took, int) and not isinstance(took, bool):
            parts.append("in %.2f s" % (took / 1000.0))
        await self.feedback("* migration completed: %s" % ", ".join(parts))

    async def abort(self, source: Node, target: Node, data: dict[str, Any], info: Any, source_too: bool) -> None:
        """Roll back: finalize the target (and the source) with success=false."""
        result = await call_node_result(self, uuid_of(target),
                                        procedures.instance_finalize_migration_dst.call(data, info, False))
        if result.failed:
            await self.log_warning("Could not clean up the aborted migration on target node %s: %s",
                                   target.name, result.fail_msg)
        if source_too:
            result = await call_node_result(self, uuid_of(source),
                                            procedures.instance_finalize_migration_src.call(data, False, self.live))
            if result.failed:
                await self.log_warning("Could not recover instance %s on source node %s: %s",
                                       data.get("name"), source.name, result.fail_msg)

    # --- cleanup ---------------------------------------------------------------
    async def cleanup(self, inst: Instance) -> None:
        """Find where C{inst} runs after a failed migration; record that node."""
        cfg = self.cfg
        if self.target_uuid is not None:
            others = [get_node(cfg, self.target_uuid)]
        else:
            others = possible_targets(cfg, inst.primary_node)
        nodes = [get_node(cfg, inst.primary_node)] + others
        hv = inst.hypervisor or ""
        await self.feedback("* checking where instance %s runs (on %s)"
                            % (inst.name, ", ".join(n.name or "?" for n in nodes)))
        answers = await self.ctx.rpc().run({n.name: node_address(n) for n in nodes}, procedures.instance_list.call(
            [hv], {hv: (cfg.cluster.hvparams or {}).get(hv) or {}}))
        running = []
        for node in nodes:
            result = answers[node.name]
            if result.failed:
                raise errors.OpExecError("Cannot tell where instance %s runs: node %s: %s"
                                         % (inst.name, node.name, result.fail_msg))
            if inst.name in (result.payload or []):
                running.append(node)
        if len(running) > 1:
            raise errors.OpExecError(
                "Instance %s runs on several nodes (%s): this needs manual intervention"
                % (inst.name, ", ".join(n.name or "?" for n in running))
            )
        if not running:
            raise errors.OpExecError(
                "Instance %s runs on none of %s: stop it (gnt-instance shutdown) to mark it down, then start it"
                % (inst.name, ", ".join(n.name or "?" for n in nodes))
            )
        (where,) = running
        if where.uuid == inst.primary_node:
            await self.feedback("* instance %s confirmed to run on its primary node %s" % (inst.name, where.name))
        else:
            await self.feedback("* instance %s runs on node %s, updating the configuration" % (inst.name, where.name))
            await set_primary_node(self, inst, uuid_of(where))
        await self.feedback("* done")
