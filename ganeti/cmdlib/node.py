"""Node LUs: OP_NODE_ADD, OP_NODE_REMOVE, OP_NODE_SET_PARAMS.

The master-candidate pool follows Ganeti's rules (C{lib/cmdlib/common.py},
C{lib/config.py}): the cluster wants C{candidate_pool_size} candidates, or
every node that can be one (online, not drained, master capable) if there
are fewer.  A new node becomes a candidate while the pool is short; a node
that leaves the pool (removed, offline, drained, demoted, no longer master
capable) is replaced by promoting another, when the LU holds every node
lock.

Nodes are reached by node RPC at their primary IP on the cluster-wide
port (LuxiD's C{--rpc-port}, L{ganeti.cmdlib.base.OpContext.rpc_port}).

RAPI runs on every master candidate: once the configuration holds a node's
new role, the LU tells the node (C{node_promote_to_mc} starts RAPI there,
C{node_demote_from_mc} stops it); a node that does not answer is a warning,
as in Ganeti.
"""

from __future__ import annotations

import socket
from typing import Any, Iterable

import attrs

from ganeti import GANETI_RELEASE, errors
from ganeti.cmdlib import candidate_certs, group_params, names
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_NODE,
    LEVEL_NODE_RES,
    Feedback,
    LogicalUnit,
    expand_node,
    lookup_group,
    register,
)
from ganeti.cmdlib.oob import oob_program
from ganeti.objects import ConfigData, Node, new_uuid
from ganeti.opcodes.typed import OpClusterRedistConf, OpCode, OpNodeAdd, OpNodeRemove, OpNodeSetParams
from ganeti.rpc import procedures, wire

# --- the candidate pool (pure functions of a config) ---------------------------------


def candidate_stats(cfg: ConfigData, exceptions: Iterable[str] = ()) -> tuple[int, int, int]:
    """Ganeti's C{GetMasterCandidateStats}: C{(now, should, max)}.

    C{now}: candidates; C{max}: nodes that could be one (online, not
    drained, master capable); C{should}: C{min(max, candidate_pool_size)}.
    Nodes whose UUID is in C{exceptions} are not counted.
    """
    skip = set(exceptions)
    mc_now = mc_max = 0
    for node in cfg.nodes.values():
        if node.uuid in skip:
            continue
        if not (node.offline or node.drained) and node.master_capable:
            mc_max += 1
        if node.master_candidate:
            mc_now += 1
    pool = cfg.cluster.candidate_pool_size or 0
    return mc_now, min(mc_max, pool), mc_max


def decide_self_promotion(cfg: ConfigData, exceptions: Iterable[str] = ()) -> bool:
    """Whether a node (not counted yet, or in C{exceptions}) should become a candidate."""
    mc_now, mc_should, _ = candidate_stats(cfg, exceptions)
    mc_should = min(mc_should + 1, cfg.cluster.candidate_pool_size or 0)
    return mc_now < mc_should


def nodes_to_promote(cfg: ConfigData, exceptions: Iterable[str] = ()) -> list[Node]:
    """Ganeti's C{MaintainCandidatePool}: nodes to make candidates (by name order).

    Only online, undrained, master capable nodes outside C{exceptions} that
    are not candidates yet, as many as the pool is short.
    """
    skip = set(exceptions)
    mc_now, mc_should, _ = candidate_stats(cfg, skip)
    chosen: list[Node] = []
    for node in sorted(cfg.nodes.values(), key=lambda n: n.name or ""):
        if mc_now >= mc_should:
            break
        if node.master_candidate or node.offline or node.drained or node.uuid in skip or not node.master_capable:
            continue
        chosen.append(node)
        mc_now += 1
    return chosen


async def adjust_candidate_pool(lu: LogicalUnit[OpCode], exceptions: Iterable[str]) -> list[str]:
    """Promote nodes until the pool is full again (the LU holds every node lock).

    Returns the names of the promoted nodes.
    """
    exceptions = list(exceptions)
    promoted = []
    nodes = nodes_to_promote(lu.cfg, exceptions)
    for node in nodes:
        await lu.update("node", attrs.evolve(node, master_candidate=True))
        promoted.append(node.name or "")
    if promoted:
        await lu.log_info("Promoted nodes to master candidate role: %s", ", ".join(promoted))
        await tell_roles(lu, nodes, promoted=True)
    mc_now, mc_should, _ = candidate_stats(lu.cfg, exceptions)
    if mc_now > mc_should:
        await lu.log_info("Note: more nodes are candidates (%d) than desired (%d)" % (mc_now, mc_should))
    return promoted


#: Seconds a node may take to start or stop its RAPI when its role changes.
ROLE_TIMEOUT = 60.0
#: Seconds an offlined node gets (it is probably down).
OFFLINE_TIMEOUT = 10.0


async def tell_roles(lu: LogicalUnit[OpCode], nodes: Iterable[Node], promoted: bool,
                     timeout: float = ROLE_TIMEOUT) -> None:
    """Tell C{nodes} they are (C{promoted}) or are no longer master
    candidates: RAPI starts or stops there.  Failures are warnings."""
    targets = {node.name: _address(node) for node in nodes if node.name}
    if not targets:
        return
    procedure = procedures.node_promote_to_mc if promoted else procedures.node_demote_from_mc
    answers = await lu.ctx.rpc().run(targets, procedure.call().within(timeout))
    for name in sorted(answers):
        if answers[name].failed:
            await lu.log_warning("Node %s failed to %s: %s", name,
                                 "start its master candidate daemons" if promoted else "demote itself",
                                 answers[name].fail_msg)


def node_instances(cfg: ConfigData, node_uuid: str) -> list[str]:
    """Names of the instances using C{node_uuid} (as primary or through a disk)."""
    names = []
    for inst in cfg.instances.values():
        nodes = {inst.primary_node}
        for disk_uuid in inst.disks:
            disk = cfg.disks.get(disk_uuid)
            if disk is not None:
                nodes.update(disk.nodes or [])
        if node_uuid in nodes:
            names.append(inst.name or inst.uuid or "?")
    return sorted(names)


def _address(node: Node) -> str:
    return node.primary_ip or node.name or ""


# --- OP_NODE_ADD ------------------------------------------------------------------------


def _check_static(op: OpNodeAdd | OpNodeSetParams) -> dict[str, Any]:
    """A node opcode's C{ndparams}, C{hv_state} and C{disk_state}, typed
    by the checks the node group's use (empty when not given)."""
    return {
        "ndparams": group_params.check_ndparams(op.ndparams or {}),
        "hv_state": group_params.check_hv_state(op.hv_state or {}),
        "disk_state": group_params.check_disk_state(op.disk_state or {}),
    }


@register
class LUNodeAdd(LogicalUnit[OpNodeAdd]):
    """Add a node (or re-add one with C{readd}).

    Locks: the BGL exclusively (C{REQ_BGL}), and every node lock, so that
    the node being re-added may be changed.  With C{join_token} the node's
    unjoined NodeD is first given the cluster's certificate
    (L{ganeti.rpc.join}); without it the node must already have them.  The
    node must answer C{version} and the master must reach its node daemon
    before it enters the configuration; WConfD then pushes config.data (to
    candidates) and ssconf to it.
    """

    OP_ID = "OP_NODE_ADD"
    REQ_BGL = True

    def check_arguments(self) -> None:
        op = self.op
        self.op = op = attrs.evolve(op, node_name=names.normalize_hostname(op.node_name, "node name"))
        self.static = _check_static(op)
        for key, value in (("primary_ip", op.primary_ip), ("secondary_ip", op.secondary_ip)):
            if value is not None and not _valid_ip(value):
                raise errors.OpPrereqError("Invalid %s address '%s'" % (key.replace("_", " "), value), errors.ECODE_INVAL)

    async def resolve(self) -> None:
        """Without a primary IP, the node's name must resolve to one; the
        secondary IP defaults to the primary."""
        op = self.op
        if op.primary_ip is None:
            try:
                _canonical, _aliases, addresses = await self.ctx.net.resolve(op.node_name)
                if not addresses:
                    raise OSError("no address")
            except OSError as e:
                raise errors.OpPrereqError(
                    "Cannot resolve node name '%s' (%s); give its primary IP" % (op.node_name, e),
                    errors.ECODE_RESOLVER,
                ) from None
            self.op = op = attrs.evolve(op, primary_ip=addresses[0])
        if op.secondary_ip is None:
            self.op = op = attrs.evolve(op, secondary_ip=op.primary_ip)

    def expand_names(self) -> None:
        self.needed_locks[LEVEL_NODE] = ALL_SET

    def check_prereq(self) -> None:
        op = self.op
        name = op.node_name
        ips = {op.primary_ip, op.secondary_ip}
        existing = next((n for n in self.cfg.nodes.values() if n.name == name), None)
        if existing is not None and not op.readd:
            raise errors.OpPrereqError("Node %s is already in the configuration" % name, errors.ECODE_EXISTS)
        if existing is None and op.readd:
            raise errors.OpPrereqError("Node %s is not in the configuration" % name, errors.ECODE_NOENT)
        for node in self.cfg.nodes.values():
            if node.name == name:
                continue
            if ips & {node.primary_ip, node.secondary_ip}:
                raise errors.OpPrereqError(
                    "New node ip address(es) conflict with existing node %s" % node.name, errors.ECODE_NOTUNIQUE
                )
        if existing is not None and existing.uuid == self.cfg.cluster.master_node:
            raise errors.OpPrereqError("Cannot readd the master node", errors.ECODE_STATE)
        self.existing = existing
        self.group_uuid = existing.group if existing is not None and op.group is None else lookup_group(
            self.cfg, op.group
        )
        default = existing.master_capable if existing is not None else True
        self.master_capable = default if op.master_capable is None else op.master_capable
        default = existing.vm_capable if existing is not None else True
        self.vm_capable = default if op.vm_capable is None else op.vm_capable
        exceptions = [existing.uuid or ""] if existing is not None else []
        self.master_candidate = bool(self.master_capable) and decide_self_promotion(self.cfg, exceptions)

    async def exec_(self, feedback: Feedback) -> Any:
        op = self.op
        name, ip = op.node_name, op.primary_ip or ""
        port = self.ctx.rpc_port
        if op.join_token:
            from ganeti.rpc.join import join_node_async

            try:
                await join_node_async(self.ctx.clock, self.ctx.paths, ip, op.join_token, name, port=port)
            except Exception as e:
                raise errors.OpExecError("Could not join node %s at %s:%d: %s" % (name, ip, port, e)) from e
        rpc = self.ctx.rpc()
        result = await rpc.run_one(name, ip, procedures.version.call())
        if result.failed:
            raise errors.OpPrereqError(
                "Can't get version information from node %s: %s" % (name, result.fail_msg), errors.ECODE_ENVIRON
            )
        if result.payload != wire.PROTOCOL_VERSION:
            raise errors.OpExecError(
                "Version mismatch master version %s, node version %s" % (wire.PROTOCOL_VERSION, result.payload)
            )
        # Ganeti's node_verify_light on the node about to join (its LVM check has no counterpart here):
        # the software version, which cluster verify would report as a mismatch afterwards
        light = await rpc.run_one(name, ip, procedures.node_verify_light.call(
            {"version": None}, self.cfg.cluster.cluster_name or ""))
        if light.failed:
            raise errors.OpPrereqError("Can't verify node %s: %s" % (name, light.fail_msg), errors.ECODE_ENVIRON)
        version = (light.payload or {}).get("version")
        if isinstance(version, list) and len(version) == 2 and version[1] != GANETI_RELEASE:
            await self.log_warning("Node %s runs software version %s, the master %s", name, version[1],
                                   GANETI_RELEASE)
        master = self.cfg.nodes.get(self.cfg.cluster.master_node or "")
        if master is not None:
            answer = await rpc.run_one(master.name or "", _address(master), procedures.node_verify.call(
                {"nodelist": [[name, ip]]}, self.cfg.cluster.cluster_name or ""))
            if answer.failed:
                raise errors.OpExecError("Cannot communicate with node %s: %s" % (master.name, answer.fail_msg))
            failures = (answer.payload or {}).get("nodelist") or {}
            if failures:
                for why in failures.values():
                    await self.feedback("ssh/hostname verification failed (checking from %s): %s" % (master.name, why))
                raise errors.OpExecError("ssh/hostname verification failed")
        changes: dict[str, Any] = dict(
            primary_ip=ip,
            secondary_ip=op.secondary_ip,
            master_candidate=self.master_candidate,
            offline=False,
            drained=False,
            group=self.group_uuid,
            master_capable=self.master_capable,
            vm_capable=self.vm_capable,
        )
        if op.ndparams is not None:
            changes["ndparams"] = group_params.merged({}, self.static["ndparams"])
        if op.hv_state is not None:
            changes["hv_state_static"] = group_params.merged_nested({}, self.static["hv_state"])
        if op.disk_state is not None:
            changes["disk_state_static"] = group_params.merged_disk_state({}, self.static["disk_state"])
        if self.existing is not None:
            await self.log_info("Readding a node, the offline/drained flags were reset")
            node = attrs.evolve(self.existing, **changes)
            await self.update("node", node)
        else:
            node = Node(name=name, uuid=new_uuid(), powered=True, **changes)
            await self.add("node", node)
        # the node's own client certificate (new with a join) is what the others accept from it
        await candidate_certs.sync(self, refresh=[node.uuid or ""])
        if self.master_candidate:
            await self._give_ancillary_files(name, ip)
            await tell_roles(self, [node], promoted=True)
        elif self.existing is not None and self.existing.master_candidate:
            await tell_roles(self, [node], promoted=False)
        return None


    async def _give_ancillary_files(self, name: str, ip: str) -> None:
        """Give a new candidate the cluster-wide files now (Ganeti's
        RedistributeAncillaryFiles): its RAPI needs the certificate before it
        starts, and WConfD sends them only after this job."""
        paths = self.ctx.paths
        if paths is None:
            return
        from ganeti.wconfd.replication import ancillary_files

        rpc = self.ctx.rpc()
        for details in ancillary_files(paths):
            answer = await rpc.run_one(name, ip, procedures.upload_file.call(details))
            if answer.failed:
                await self.log_warning("Copy of %s to node %s failed: %s", details[0], name, answer.fail_msg)


def _valid_ip(text: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, text)
            return True
        except OSError:
            pass
    return False


# --- OP_NODE_REMOVE ---------------------------------------------------------------------


@register
class LUNodeRemove(LogicalUnit[OpNodeRemove]):
    """Remove a node: not the master, not one with instances.

    Locks: the BGL exclusively and every node lock (another node may be
    promoted to keep the candidate pool full).  The steps, in this order:
    promote other nodes as needed; tell the node to leave the cluster
    (best effort: a warning if it cannot be reached); remove it from the
    configuration.  A job killed before the last step leaves a node in the
    configuration that no longer answers, which C{gnt-cluster verify}
    reports and the same removal run again finishes (the node's refusal is
    then a warning); never a node out of the configuration still serving
    the cluster.
    """

    OP_ID = "OP_NODE_REMOVE"
    REQ_BGL = True

    def expand_names(self) -> None:
        self.node_uuid = expand_node(self.cfg, self.op.node_name).uuid or ""
        self.op = attrs.evolve(self.op, node_uuid=self.node_uuid)
        self.needed_locks[LEVEL_NODE] = ALL_SET

    def check_prereq(self) -> None:
        node = self.cfg.nodes.get(self.node_uuid)
        if node is None:
            raise errors.OpPrereqError("Node '%s' not known" % self.op.node_name, errors.ECODE_NOENT)
        if node.uuid == self.cfg.cluster.master_node:
            raise errors.OpPrereqError("Node is the master node, failover to another node is required",
                                       errors.ECODE_INVAL)
        instances = node_instances(self.cfg, node.uuid or "")
        if instances:
            raise errors.OpPrereqError(
                "Instance %s is still running on the node, please remove first" % instances[0], errors.ECODE_INVAL
            )
        self.node = node

    async def exec_(self, feedback: Feedback) -> Any:
        node = self.node
        await adjust_candidate_pool(self, [node.uuid or ""])
        result = await self.ctx.rpc().run_one(node.name or "", _address(node), procedures.node_leave_cluster.call(False))
        if result.failed:
            await self.log_warning("Errors encountered on the remote node while leaving the cluster: %s",
                                   result.fail_msg)
        await self.remove("node", node.uuid or "")
        await candidate_certs.sync(self)
        return None


# --- OP_NODE_SET_PARAMS -----------------------------------------------------------------

ROLE_CANDIDATE = "candidate"
ROLE_DRAINED = "drained"
ROLE_OFFLINE = "offline"
ROLE_REGULAR = "regular"
#: the flags (master_candidate, drained, offline) of each role
_R2F = {
    ROLE_CANDIDATE: (True, False, False),
    ROLE_DRAINED: (False, True, False),
    ROLE_OFFLINE: (False, False, True),
    ROLE_REGULAR: (False, False, False),
}
_F2R = {flags: role for role, flags in _R2F.items()}
_FLAGS = ("master_candidate", "drained", "offline")


@register
class LUNodeSetParams(LogicalUnit[OpNodeSetParams]):
    """Change a node's roles (candidate, drained, offline) and capabilities.

    At most one of the three role flags may be set at once; setting one
    clears the others.  The master's role cannot change here.  A demotion
    that would leave the pool short is refused unless C{auto_promote},
    which locks every node and promotes others.  Returns Ganeti's list of
    C{[parameter, new value]} changes.
    """

    OP_ID = "OP_NODE_SET_PARAMS"
    REQ_BGL = False

    def check_arguments(self) -> None:
        op = self.op
        mods = (op.offline, op.master_candidate, op.drained, op.master_capable, op.vm_capable, op.secondary_ip,
                op.ndparams, op.hv_state, op.disk_state, op.powered)
        if all(value is None for value in mods):
            raise errors.OpPrereqError("Please pass at least one modification", errors.ECODE_INVAL)
        if list(self._flags().values()).count(True) > 1:
            raise errors.OpPrereqError("Can't set the node into more than one state at the same time",
                                       errors.ECODE_INVAL)
        if op.secondary_ip is not None and not _valid_ip(op.secondary_ip):
            raise errors.OpPrereqError("Secondary IP (%s) needs to be a valid IP address" % op.secondary_ip,
                                       errors.ECODE_INVAL)
        self.static = _check_static(op)
        self.might_demote = (op.master_candidate is False or op.offline is True
                             or op.drained is True or op.master_capable is False)
        self.lock_all = bool(op.auto_promote) and self.might_demote

    def _flags(self) -> dict[str, bool | None]:
        """The state flags the opcode sets (C{None}: unchanged), in C{_FLAGS} order."""
        op = self.op
        return {"master_candidate": op.master_candidate, "drained": op.drained, "offline": op.offline}

    def expand_names(self) -> None:
        self.node_uuid = expand_node(self.cfg, self.op.node_name).uuid or ""
        self.op = attrs.evolve(self.op, node_uuid=self.node_uuid)
        locks = ALL_SET if self.lock_all else [self.node_uuid]
        self.needed_locks[LEVEL_NODE] = locks
        self.needed_locks[LEVEL_NODE_RES] = locks

    def check_prereq(self) -> None:
        op = self.op
        node = self.cfg.nodes.get(self.node_uuid)
        if node is None:
            raise errors.OpPrereqError("Node '%s' not known" % op.node_name, errors.ECODE_NOENT)
        self.node = node
        self.infos: list[str] = []
        if op.powered is not None and not oob_program(self.cfg, node):
            raise errors.OpPrereqError("Node %s does not support out-of-band handling, it can not be marked as"
                                       " powered" % op.node_name, errors.ECODE_STATE)
        is_master = node.uuid == self.cfg.cluster.master_node
        if any(value is not None for value in self._flags().values()) and is_master:
            raise errors.OpPrereqError("The master role can be changed only via master-failover", errors.ECODE_INVAL)
        if op.master_candidate and not node.master_capable and op.master_capable is not True:
            raise errors.OpPrereqError(
                "Node %s is not master capable, cannot make it a master candidate" % node.name, errors.ECODE_STATE
            )
        if op.vm_capable is False and node_instances(self.cfg, node.uuid or ""):
            raise errors.OpPrereqError(
                "Node %s hosts instances, cannot unset the vm_capable flag" % node.name, errors.ECODE_STATE
            )
        if node.master_candidate and self.might_demote and not self.lock_all:
            mc_remaining, mc_should, _ = candidate_stats(self.cfg, [node.uuid or ""])
            if mc_remaining < mc_should:
                raise errors.OpPrereqError(
                    "Not enough master candidates, please pass auto promote option to allow promotion"
                    " (--auto-promote or RAPI auto_promote=True)", errors.ECODE_STATE
                )
        self.old_flags = old_flags = (bool(node.master_candidate), bool(node.drained), bool(node.offline))
        if old_flags not in _F2R:
            raise errors.OpPrereqError("Node %s has invalid flags %s" % (node.name, old_flags), errors.ECODE_STATE)
        self.old_role = old_role = _F2R[old_flags]
        # only real changes are kept: unsetting an unset flag is no change
        unset = set()
        for flag, value in self._flags().items():
            if value is False and not getattr(node, flag):
                self.infos.append("Ignoring request to unset flag %s, already unset" % flag)
                unset.add(flag)
        if unset:
            self.op = op = attrs.evolve(
                op, master_candidate=None if "master_candidate" in unset else op.master_candidate,
                drained=None if "drained" in unset else op.drained, offline=None if "offline" in unset else op.offline)
        # a node coming back (undrained, onlined, master capable again) may promote itself
        if (op.drained is False or op.offline is False
                or (op.master_capable and not node.master_capable)):
            if decide_self_promotion(self.cfg, [node.uuid or ""]) and op.offline is not True \
                    and op.drained is not True and op.master_candidate is not False:
                self.op = op = attrs.evolve(op, master_candidate=True)
                self.infos.append("Auto-promoting node to master candidate")
        if op.master_capable is False and node.master_candidate:
            if is_master:
                raise errors.OpPrereqError("Master must remain master capable", errors.ECODE_STATE)
            self.infos.append("Demoting from master candidate")
            self.op = op = attrs.evolve(op, master_candidate=False)
        if op.master_candidate:
            new_role = ROLE_CANDIDATE
        elif op.drained:
            new_role = ROLE_DRAINED
        elif op.offline:
            new_role = ROLE_OFFLINE
        elif False in self._flags().values():
            new_role = ROLE_REGULAR
        else:
            new_role = old_role
        self.new_role = new_role

    async def exec_(self, feedback: Feedback) -> Any:
        op = self.op
        node = self.node
        for info in self.infos:
            await self.log_info(info)
        if self.old_role == ROLE_OFFLINE and self.new_role != self.old_role:
            answer = await self.ctx.rpc().run_one(node.name or "", _address(node), procedures.version.call())
            if answer.failed:
                raise errors.OpPrereqError(
                    "Node %s is being de-offlined but fails to report its version: %s" % (node.name, answer.fail_msg),
                    errors.ECODE_STATE,
                )
            await self.log_warning("Transitioning node from offline to online state without using re-add."
                                   " Please make sure the node is healthy!")
        result: list[list[Any]] = []
        changes: dict[str, Any] = {}
        if op.ndparams is not None:
            changes["ndparams"] = group_params.merged(node.ndparams or {}, self.static["ndparams"])
            result.append(["ndparams", str(changes["ndparams"])])
        if op.hv_state is not None:
            changes["hv_state_static"] = group_params.merged_nested(node.hv_state_static or {},
                                                                    self.static["hv_state"])
        if op.disk_state is not None:
            changes["disk_state_static"] = group_params.merged_disk_state(node.disk_state_static or {},
                                                                          self.static["disk_state"])
        if op.powered is not None:
            changes["powered"] = op.powered
            result.append(["powered", str(op.powered)])
        for attr, value in (("master_capable", op.master_capable), ("vm_capable", op.vm_capable)):
            if value is not None:
                changes[attr] = value
                result.append([attr, str(value)])
        if self.new_role != self.old_role:
            new_flags = _R2F[self.new_role]
            for old, new, desc in zip(self.old_flags, new_flags, _FLAGS):
                if old != new:
                    result.append([desc, str(new)])
            changes.update(zip(_FLAGS, new_flags))
        if op.secondary_ip is not None:
            changes["secondary_ip"] = op.secondary_ip
            result.append(["secondary_ip", op.secondary_ip])
        new_node = attrs.evolve(node, **changes)
        if self.lock_all and self.new_role != self.old_role:
            # every node is locked: fill the pool before this node leaves it
            self.cfg = attrs.evolve(self.cfg, nodes={**self.cfg.nodes, node.uuid or "": new_node})
            await adjust_candidate_pool(self, [node.uuid or ""])
        if new_node != node:
            await self.update("node", new_node)
        if self.new_role != self.old_role:
            await candidate_certs.sync(self, None if self.lock_all else [node.uuid or ""])
        if self.new_role != self.old_role and ROLE_CANDIDATE in (self.old_role, self.new_role):
            promoted = self.new_role == ROLE_CANDIDATE
            timeout = OFFLINE_TIMEOUT if self.new_role == ROLE_OFFLINE else ROLE_TIMEOUT
            await tell_roles(self, [new_node], promoted, timeout)
        return result


# --- OP_CLUSTER_REDIST_CONF (verify: L{ganeti.cmdlib.verify}) ----------------------------

#: Per-node timeout of the cluster-wide RPCs of redist-conf, seconds.
PUSH_TIMEOUT = 60.0


@register
class LUClusterRedistConf(LogicalUnit[OpClusterRedistConf]):
    """Push config.data to the master candidates and ssconf to every online node, now.

    Locks: the BGL and every node, shared.  Nodes that do not take it are
    reported as warnings (WConfD keeps retrying them on its own).
    """

    OP_ID = "OP_CLUSTER_REDIST_CONF"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.needed_locks[LEVEL_NODE] = ALL_SET
        self.share_all()

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti import ssconf

        await candidate_certs.sync(self)  # candidates still missing (a cluster older than their upkeep)
        await self.ctx.wconfd.flush_config()
        data, _serial = await self.ctx.wconfd.read_config_bytes()
        cfg = ConfigData.from_json(data)
        master = cfg.cluster.master_node
        nodes = sorted((n for n in cfg.nodes.values() if n.uuid != master and not n.offline),
                       key=lambda n: n.name or "")
        if not nodes:
            return None
        paths = self.ctx.paths
        root = paths.root if paths is not None else "/"
        config_path = paths.config_data if paths is not None else "/var/lib/ganeti/config.data"
        details = wire.file_details(wire.virtual_path(root, config_path), data, mode=0o640)
        values = ssconf.compute(cfg)
        candidates = {n.name: _address(n) for n in nodes if n.master_candidate}
        rpc = self.ctx.rpc()
        uploads = (await rpc.run(candidates, procedures.upload_file.call(details).within(PUSH_TIMEOUT))
                   if candidates else {})
        writes = await rpc.run({n.name: _address(n) for n in nodes},
                               procedures.write_ssconf_files.call(values).within(PUSH_TIMEOUT))
        for name, result in list(uploads.items()) + list(writes.items()):
            if result.failed:
                what = "config.data" if name in uploads and result is uploads[name] else "ssconf"
                await self.log_warning("Copy of %s to node %s failed: %s", what, name, result.fail_msg)
        return None
