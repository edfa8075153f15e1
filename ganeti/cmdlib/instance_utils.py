"""Helpers shared by the instance LUs (creation, operations, migration).

Lookups and checks on a config snapshot raise L{errors.OpPrereqError};
the node RPC helpers raise L{errors.OpExecError} carrying the node's own
message.  Nodes are reached at their primary IP (L{node_address}) on the
cluster-wide noded port; the instance travels as the C{INST_DICT} of
L{ganeti.rpc.instances.encode_instance}.

These names are imported by other LU modules: keep them stable.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from ganeti import errors
from ganeti.cmdlib.base import LogicalUnit, expand_instance_name
from ganeti.objects import ConfigData, Disk, Instance, Node, beparams_memory, beparams_vcpus
from ganeti.opcodes.typed import OpCode
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures
from ganeti.rpc.client import RpcResult

ADMIN_UP = "up"
ADMIN_DOWN = "down"
ADMIN_OFFLINE = "offline"
ADMIN_SOURCE_ADMIN = "admin"
ADMIN_SOURCE_USER = "user"

DT_DISKLESS = "diskless"
DT_FILE = "file"
DT_SHARED_FILE = "sharedfile"
DT_EXT = "ext"
DT_BLOCK = "blockdev"
#: the disk templates this implementation can create
DT_RBD = "rbd"

SUPPORTED_TEMPLATES = (DT_DISKLESS, DT_FILE, DT_SHARED_FILE, DT_RBD, DT_EXT, DT_BLOCK)
#: templates whose disks every node of the cluster sees
SHARED_TEMPLATES = (DT_SHARED_FILE, DT_RBD, DT_EXT, DT_BLOCK)

#: seconds to start an instance (a shutdown gets its own timeout on top); the
#: other procedures' time limits are their classes in L{ganeti.rpc.procedures}
TMO_START = procedures.TMO_NORMAL


# --- lookups ---------------------------------------------------------------------


def expand_instance(cfg: ConfigData, name: str) -> Instance:
    """The instance called C{name} (or with that UUID; short names expanded)."""
    full = expand_instance_name(cfg, name)
    for inst in cfg.instances.values():
        if inst.name == full:
            return inst
    raise errors.OpPrereqError("Instance '%s' not known" % name, errors.ECODE_NOENT)  # pragma: no cover


def refuse_forthcoming(inst: Instance) -> None:
    """Refuse an operation on a forthcoming instance (one only reserved by
    C{gnt-instance add --forthcoming}): as Ganeti, only its rename, removal,
    failover, queries and the C{--commit} of its creation take one."""
    if inst.forthcoming:
        raise errors.OpPrereqError("Instance '%s' is forthcoming: forthcoming instances are not supported for this"
                                   " operation (commit it first with 'gnt-instance add --commit')" % inst.name,
                                   errors.ECODE_STATE)


def current_instance(cfg: ConfigData, uuid: str | None, name: str) -> Instance:
    """The instance C{uuid} in C{cfg}; OpPrereqError if it is gone (e.g. removed
    while the LU waited for its lock) or C{uuid} is None (not resolved)."""
    inst = cfg.instances.get(uuid or "")
    if inst is None:
        raise errors.OpPrereqError("Instance '%s' not known" % name, errors.ECODE_NOENT)
    return inst


def get_node(cfg: ConfigData, uuid: str | None) -> Node:
    """The node with C{uuid}; OpPrereqError if there is none."""
    node = cfg.nodes.get(uuid or "")
    if node is None:
        raise errors.OpPrereqError("Node '%s' not known" % uuid, errors.ECODE_NOENT)
    return node


def node_name(cfg: ConfigData, uuid: str | None) -> str:
    """The name of node C{uuid} (the UUID itself if it is not known)."""
    node = cfg.nodes.get(uuid or "")
    return (node.name if node is not None else None) or str(uuid)


def node_address(node: Node) -> str:
    """Where node RPC reaches C{node}: its primary IP, else its name."""
    return node.primary_ip or node.name or ""


def instance_nodes(cfg: ConfigData, inst: Instance) -> list[str]:
    """UUIDs of the nodes C{inst} uses: the primary first, then its disks' nodes."""
    nodes = [inst.primary_node] if inst.primary_node else []
    for disk in rpc_inst.instance_disks(cfg, inst):
        for uuid in disk.nodes or ():
            if uuid not in nodes:
                nodes.append(uuid)
    return nodes


def secondary_nodes(cfg: ConfigData, inst: Instance) -> list[str]:
    """The nodes of C{inst} besides the primary."""
    return [uuid for uuid in instance_nodes(cfg, inst) if uuid != inst.primary_node]


def primary_counts(cfg: ConfigData) -> dict[str, int]:
    """C{{node uuid: number of primary instances}}."""
    counts: dict[str, int] = {}
    for inst in cfg.instances.values():
        counts[inst.primary_node or ""] = counts.get(inst.primary_node or "", 0) + 1
    return counts


# --- checks ------------------------------------------------------------------------


def check_node_online(cfg: ConfigData, uuid: str, msg: str | None = None) -> Node:
    """Refuse an offline node (Ganeti's C{CheckNodeOnline}); returns the node."""
    node = get_node(cfg, uuid)
    if node.offline:
        raise errors.OpPrereqError("%s: %s" % (msg or "Can't use offline node", node.name), errors.ECODE_STATE)
    return node


def check_node_not_drained(cfg: ConfigData, uuid: str) -> Node:
    node = get_node(cfg, uuid)
    if node.drained:
        raise errors.OpPrereqError("Can't use drained node %s" % node.name, errors.ECODE_STATE)
    return node


def check_node_vm_capable(cfg: ConfigData, uuid: str) -> Node:
    node = get_node(cfg, uuid)
    if node.vm_capable is False:
        raise errors.OpPrereqError("Can't use non-vm_capable node %s" % node.name, errors.ECODE_STATE)
    return node


def check_instance_state(
    inst: Instance, *, want_up: bool = False, want_down: bool = False, allow_offline: bool = False, msg: str = ""
) -> None:
    """Check C{inst}'s admin state (the configuration, not the live state).

    @param want_up: refuse unless it is marked up
    @param want_down: refuse if it is marked up
    @param allow_offline: accept an instance marked offline (refused otherwise)
    @param msg: what the LU wants to do, for the message
    """
    suffix = (", cannot %s" % msg) if msg else ""
    state = inst.admin_state or ADMIN_DOWN
    if state == ADMIN_OFFLINE and not allow_offline:
        raise errors.OpPrereqError("Instance %s is marked to be offline%s" % (inst.name, suffix), errors.ECODE_STATE)
    if want_up and state != ADMIN_UP:
        raise errors.OpPrereqError("Instance %s is marked to be %s%s" % (inst.name, state, suffix), errors.ECODE_STATE)
    if want_down and state == ADMIN_UP:
        raise errors.OpPrereqError("Instance %s is marked to be up%s" % (inst.name, suffix), errors.ECODE_STATE)


def check_hypervisor_enabled(cfg: ConfigData, hypervisor: str | None) -> str:
    """C{hypervisor} if the cluster has it enabled."""
    enabled = list(cfg.cluster.enabled_hypervisors or [])
    if not hypervisor or hypervisor not in enabled:
        raise errors.OpPrereqError(
            "Hypervisor '%s' is not enabled in the cluster (enabled: %s)" % (hypervisor, ", ".join(enabled) or "none"),
            errors.ECODE_STATE,
        )
    return hypervisor


# --- resources ------------------------------------------------------------------------


def instance_memory(cfg: ConfigData, inst: Instance, bep: Mapping[str, Any] | None = None) -> int:
    """The memory (MiB) C{inst} starts with: its filled C{maxmem} (or C{memory})."""
    return beparams_memory(rpc_inst.filled_beparams(cfg, inst, bep))


def instance_vcpus(cfg: ConfigData, inst: Instance) -> int:
    return beparams_vcpus(rpc_inst.filled_beparams(cfg, inst))


@attrs.frozen
class NodeResources:
    """What C{node_info} says about one node (MiB; C{None}: not reported).

    @ivar storage_free: C{{storage type: free MiB}} for the storage units asked
        (L{STORAGE_TYPE} maps a template to its type; see L{storage_of})
    """

    memory_total: int | None = None
    memory_free: int | None = None
    cpu_total: int | None = None
    storage_free: dict[str, int] = attrs.Factory(dict)
    #: the node's own memory and CPUs (the hypervisor's C{memory_dom0}, C{cpu_dom0})
    memory_dom0: int | None = None
    cpu_dom0: int | None = None
    #: C{{storage type: total MiB}} for the storage units asked
    storage_size: dict[str, int] = attrs.Factory(dict)

    def storage_of(self, template: str) -> tuple[int | None, int | None]:
        """C{(free, total)} MiB of the storage of C{template} (C{None}: not reported)."""
        kind = STORAGE_TYPE.get(template, template)
        return self.storage_free.get(kind), self.storage_size.get(kind)


#: the storage type of each disk template (Ganeti's MAP_DISK_TEMPLATE_STORAGE_TYPE)
STORAGE_TYPE = {"plain": "lvm-vg", "drbd": "lvm-vg", "file": "file", "sharedfile": "sharedfile",
                "gluster": "gluster", "rbd": "rados", "ext": "ext", "blockdev": "blockdev", "diskless": "diskless"}


def rbd_pool(cfg: ConfigData) -> str:
    """The pool of the cluster's rbd disk parameters."""
    from ganeti import rbd_params

    pool = ((cfg.cluster.diskparams or {}).get(DT_RBD) or {}).get(rbd_params.PARAM_POOL)
    return str(pool or rbd_params.DEFAULTS[rbd_params.PARAM_POOL])


def storage_units(cfg: ConfigData, templates: Iterable[str]) -> list[list[Any]]:
    """C{node_info}'s storage units for the templates among C{templates}
    whose space the nodes report: the file storage directories and, unlike
    Ganeti 3.0 (whose iallocator input says 0 for them), the rbd pool
    (C{rados}, from C{ceph df})."""
    units = []
    for template in dict.fromkeys(templates):
        if template == DT_FILE and cfg.cluster.file_storage_dir:
            units.append([DT_FILE, cfg.cluster.file_storage_dir, []])
        elif template == DT_SHARED_FILE and cfg.cluster.shared_file_storage_dir:
            units.append([DT_SHARED_FILE, cfg.cluster.shared_file_storage_dir, []])
        elif template == DT_RBD:
            units.append([STORAGE_TYPE[DT_RBD], rbd_pool(cfg), []])
    return units


def parse_node_info(payload: Any) -> NodeResources:
    """Read C{node_info}'s C{[boot_id, [storage...], [hv...]]}."""
    if not isinstance(payload, list) or len(payload) != 3:
        raise ValueError("node_info answered %.100r" % (payload,))
    _boot, storage, hvs = payload
    hv = hvs[0] if isinstance(hvs, list) and hvs and isinstance(hvs[0], dict) else {}
    free: dict[str, int] = {}
    size: dict[str, int] = {}
    for unit in storage if isinstance(storage, list) else ():
        if isinstance(unit, dict) and isinstance(unit.get("storage_free"), int):
            free[str(unit.get("type"))] = unit["storage_free"]
        if isinstance(unit, dict) and isinstance(unit.get("storage_size"), int):
            size[str(unit.get("type"))] = unit["storage_size"]

    def number(key: str) -> int | None:
        value = hv.get(key)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return NodeResources(number("memory_total"), number("memory_free"), number("cpu_total"), free,
                         number("memory_dom0"), number("cpu_dom0"), size)


async def node_resources(
    lu: LogicalUnit[OpCode], node_uuids: Iterable[str], hypervisor: str, templates: Iterable[str] = ()
) -> dict[str, NodeResources | str]:
    """C{{node uuid: NodeResources, or the error text}} from C{node_info}."""
    cfg = lu.cfg
    out: dict[str, NodeResources | str] = {}
    nodes = []
    for uuid in node_uuids:
        node = get_node(cfg, uuid)
        if node.offline:
            out[uuid] = "node is marked offline"
        else:
            nodes.append(node)
    if not nodes:
        return out
    hvparams = (cfg.cluster.hvparams or {}).get(hypervisor) or {}
    answers = await lu.ctx.rpc().run(
        {n.name: node_address(n) for n in nodes},
        procedures.node_info.call(storage_units(cfg, templates), [[hypervisor, hvparams]]),
    )
    for node in nodes:
        result = answers[node.name]
        if result.failed:
            out[node.uuid] = result.fail_msg or "unknown error"  # type: ignore[index]
            continue
        try:
            out[node.uuid] = parse_node_info(result.payload)  # type: ignore[index]
        except ValueError as e:
            out[node.uuid] = str(e)  # type: ignore[index]
    return out


async def node_free_memory(lu: LogicalUnit[OpCode], node_uuids: Iterable[str], hypervisor: str) -> dict[str,
                           int | None]:
    """C{{node uuid: free MiB}} as the hypervisor reports it; C{None} if unknown."""
    answers = await node_resources(lu, node_uuids, hypervisor)
    return {uuid: (res.memory_free if isinstance(res, NodeResources) else None) for uuid, res in answers.items()}


async def check_node_free_memory(lu: LogicalUnit[OpCode], node_uuid: str, reason: str, requested: int,
                                 hypervisor: str) -> int:
    """Ganeti's C{CheckNodeFreeMemory}: the node has C{requested} MiB free.

    @return: the free memory
    @raise errors.OpPrereqError: the node cannot tell, or has too little
    """
    name = node_name(lu.cfg, node_uuid)
    answer = (await node_resources(lu, [node_uuid], hypervisor))[node_uuid]
    if not isinstance(answer, NodeResources):
        raise errors.OpPrereqError("Can't get data from node %s: %s" % (name, answer), errors.ECODE_ENVIRON)
    if answer.memory_free is None:
        raise errors.OpPrereqError("Can't compute free memory on node %s, result was '%s'" % (name, answer),
                                   errors.ECODE_ENVIRON)
    if requested > answer.memory_free:
        raise errors.OpPrereqError(
            "Not enough memory on node %s for %s: needed %s MiB, available %s MiB"
            % (name, reason, requested, answer.memory_free),
            errors.ECODE_NORES,
        )
    return answer.memory_free


# --- node RPC -----------------------------------------------------------------------------


async def call_node_result(lu: LogicalUnit[OpCode], node_uuid: str, call: procedures.Call[Any]) -> RpcResult:
    """Make C{call} (see L{ganeti.rpc.procedures}) on one node; its L{RpcResult}.

    An offline node is not contacted: its result is a failure saying so.
    """
    node = get_node(lu.cfg, node_uuid)
    if node.offline:
        return RpcResult.failure(node.name or node_uuid, "node is marked offline", offline=True)
    result: RpcResult = await lu.ctx.rpc().run_one(node.name or node_uuid, node_address(node), call)
    return result


async def call_node(lu: LogicalUnit[OpCode], node_uuid: str, call: procedures.Call[Any],
                    what: str | None = None) -> Any:
    """Make C{call} on one node; its payload, or L{errors.OpExecError}.

    The error reads C{"Could not <what> on node <name>: <node's message>"}.
    """
    result = await call_node_result(lu, node_uuid, call)
    if result.failed:
        raise errors.OpExecError(
            "Could not %s on node %s: %s" % (what or call.procedure, node_name(lu.cfg, node_uuid), result.fail_msg)
        )
    return result.payload


#: hypervisors whose NICs are attached to nothing (the bridges they name are not checked)
NO_NIC_DEVICES = ("fake",)


async def check_bridges(lu: LogicalUnit[OpCode], nics: Any, node_uuid: str, hypervisor: str) -> None:
    """Ganeti's C{CheckNicsBridgesExist}: the bridges of the bridged NICs
    among C{nics} (their C{nicparams} over the cluster's defaults) exist on
    the node (node RPC C{bridges_exist}).  Not for the C{fake} hypervisor,
    whose NICs are attached to nothing.

    @raise errors.OpPrereqError: Ganeti's "Error checking bridges on
        destination node 'N': Missing bridges B" (C{ECODE_ENVIRON})
    """
    if hypervisor in NO_NIC_DEVICES:
        return
    default = (lu.cfg.cluster.nicparams or {}).get("default") or {}
    bridges: list[str] = []
    for nic in nics or []:
        own = nic.get("nicparams") if isinstance(nic, dict) else nic.nicparams
        filled = dict(default, **(own or {}))
        if filled.get("mode") == "bridged" and filled.get("link") and filled["link"] not in bridges:
            bridges.append(filled["link"])
    if not bridges:
        return
    result = await call_node_result(lu, node_uuid, procedures.bridges_exist.call(bridges))
    if result.failed:
        raise errors.OpPrereqError("Error checking bridges on destination node '%s': %s"
                                   % (node_name(lu.cfg, node_uuid), result.fail_msg), errors.ECODE_ENVIRON)


async def check_os_params(lu: LogicalUnit[OpCode], required: bool, node_uuids: list[str], os_name: str,
                          osparams: dict[str, Any], force_variant: bool) -> None:
    """Ganeti's C{CheckOSParams}: node RPC C{os_validate} on the vm-capable
    nodes given, which checks the OS, its variant and that it declares
    every parameter, then runs its C{verify} script with them (C{OSP_*}).
    Not C{required}: an OS a node lacks is noted, not refused.

    @raise errors.OpPrereqError: "OS Parameters validation failed on node N: ..."
    """
    for node_uuid in node_uuids:
        node = get_node(lu.cfg, node_uuid)
        if node.vm_capable is False or node.offline:
            continue
        result = await call_node_result(lu, node_uuid, procedures.os_validate.call(
            required, os_name, ["parameters"], dict(osparams), force_variant))
        if result.failed:
            raise errors.OpPrereqError("OS Parameters validation failed on node %s: %s"
                                       % (node.name, result.fail_msg), errors.ECODE_INVAL)
        if not result.payload:
            await lu.log_info("OS %s not found on node %s, validation skipped", os_name, node.name)


def reason_trail(lu: LogicalUnit[OpCode]) -> list[Any]:
    """The opcode's reason trail, for the RPCs that record it."""
    reason = lu.op.reason
    return list(reason) if isinstance(reason, list) else []


def encode(lu: LogicalUnit[OpCode], inst: Instance, **kwargs: Any) -> dict[str, Any]:
    """C{INST_DICT} of C{inst} on the LU's config (see L{rpc_inst.encode_instance})."""
    return rpc_inst.encode_instance(lu.cfg, inst, **kwargs)


async def instance_info(lu: LogicalUnit[OpCode], inst: Instance, node_uuid: str | None = None) -> dict[str, Any] | None:
    """The hypervisor's info on C{inst} on C{node_uuid} (default: its primary).

    @return: C{None} if it does not run there, else C{{"memory", "vcpus", "state", "time"}}
    @raise errors.OpExecError: the node cannot be asked
    """
    node_uuid = node_uuid or inst.primary_node or ""
    hvparams = rpc_inst.filled_hvparams(lu.cfg, inst)
    payload = await call_node(
        lu, node_uuid, procedures.instance_info.call(inst.name or "", inst.hypervisor or "", hvparams),
        what="get the state of instance %s" % inst.name,
    )
    return payload if isinstance(payload, dict) and payload else None


async def check_instance_not_running(lu: LogicalUnit[OpCode], inst: Instance, what: str) -> None:
    """Refuse (OpPrereqError) if C{inst} runs on its primary node."""
    if await instance_info(lu, inst) is not None:
        raise errors.OpPrereqError("Instance %s is running, %s" % (inst.name, what), errors.ECODE_STATE)


async def start_instance_on(
    lu: LogicalUnit[OpCode],
    inst: Instance,
    node_uuid: str,
    *,
    hvp: Mapping[str, Any] | None = None,
    bep: Mapping[str, Any] | None = None,
    paused: bool = False,
    disks: list[Disk] | None = None,
) -> None:
    """Start C{inst} on C{node_uuid} (C{instance_start}); OpExecError on failure."""
    data = rpc_inst.encode_instance(lu.cfg, inst, hvp=hvp, bep=bep, disks=disks)
    await call_node(lu, node_uuid, procedures.instance_start.call(data, bool(paused), reason_trail(lu)).within(TMO_START),
                    what="start instance %s" % inst.name)


async def shutdown_instance_on(lu: LogicalUnit[OpCode], inst: Instance, node_uuid: str, timeout: int) -> None:
    """Stop C{inst} on C{node_uuid} (C{instance_shutdown}); OpExecError on failure.

    Stopping an instance that does not run succeeds (noded's contract).
    """
    data = rpc_inst.encode_instance(lu.cfg, inst)
    await call_node(lu, node_uuid,
                    procedures.instance_shutdown.call(data, int(timeout), reason_trail(lu)).within(TMO_START + int(timeout)),
                    what="shutdown instance %s" % inst.name)


async def remove_disks(lu: LogicalUnit[OpCode], node_uuid: str, disks: Iterable[Disk]) -> list[str]:
    """Remove C{disks} from C{node_uuid}, each even if another fails.

    @return: the error messages (empty when every disk is gone)
    """
    problems = []
    for disk in disks:
        if disk.dev_type == DT_DISKLESS:
            continue
        result = await call_node_result(lu, node_uuid, procedures.blockdev_remove.call(rpc_inst.disk_dict(lu.cfg, disk)))
        if result.failed:
            problems.append("could not remove disk %s on node %s: %s"
                            % (disk.iv_name or disk.uuid, node_name(lu.cfg, node_uuid), result.fail_msg))
    return problems


async def set_admin_state(lu: LogicalUnit[OpCode], inst: Instance, state: str,
                          source: str = ADMIN_SOURCE_ADMIN) -> Instance:
    """Record C{inst}'s admin state (and its source) in the config."""
    current = lu.cfg.instances.get(inst.uuid or "", inst)
    if current.admin_state == state and current.admin_state_source == source:
        return current
    stored: Instance = await lu.update("instance", attrs.evolve(current, admin_state=state, admin_state_source=source))
    return stored


async def remove_instance(lu: LogicalUnit[OpCode], inst: Instance, shutdown_timeout: int, ignore_failures: bool,
                          reason: list[Any]) -> None:
    """Remove C{inst} (L{ganeti.cmdlib.instance.LUInstanceRemove}'s steps, also
    run by an export with C{remove_instance}): mark it down, stop it on its
    primary node, remove its disks, drop it (and them) from the config.

    @param reason: the reason trail the shutdown RPC records
    @raise errors.OpExecError: it could not be stopped or a disk removed
        (unless C{ignore_failures}: then only warnings)
    """
    pnode = inst.primary_node or ""
    if inst.forthcoming:  # only reserved: nothing runs, no disk was made
        await lu.log_info("Instance %s on node %s is forthcoming: nothing to stop, no disk to remove",
                          inst.name, node_name(lu.cfg, pnode))
        await lu.log_info("Removing instance %s out of cluster config", inst.name)
        await lu.remove("instance", inst.uuid or "")
        return
    if inst.admin_state == ADMIN_UP:
        inst = await set_admin_state(lu, inst, ADMIN_DOWN)
    await lu.log_info("Shutting down instance %s on node %s", inst.name, node_name(lu.cfg, pnode))
    result = await call_node_result(
        lu, pnode, procedures.instance_shutdown.call(
            rpc_inst.encode_instance(lu.cfg, inst), shutdown_timeout, reason,
        ).within(TMO_START + shutdown_timeout))
    if result.failed:
        message = "Could not shutdown instance %s on node %s: %s" % (inst.name, node_name(lu.cfg, pnode),
                                                                     result.fail_msg)
        if not ignore_failures:
            raise errors.OpExecError(message)
        await lu.log_warning("%s", message)
    await lu.log_info("Removing block devices for instance %s", inst.name)
    problems = []
    for disk in rpc_inst.instance_disks(lu.cfg, inst):
        if disk.forthcoming:  # a disk only reserved was never made
            continue
        for node in disk.nodes or [pnode]:
            problems += await remove_disks(lu, node, [disk])
    if problems:
        if not ignore_failures:
            raise errors.OpExecError("Can't remove instance's disks: %s" % "; ".join(problems))
        for problem in problems:
            await lu.log_warning("%s", problem)
    await lu.log_info("Removing instance %s out of cluster config", inst.name)
    await lu.remove("instance", inst.uuid or "")


async def disks_follow_primary(lu: LogicalUnit[Any], inst: Instance, old: str, new: str) -> None:
    """The disks of C{inst} that listed node C{old} list node C{new} instead
    (its primary changed), each node once."""
    for disk in rpc_inst.instance_disks(lu.cfg, inst):
        if old in (disk.nodes or []):
            nodes: list[str] = []
            for uuid in disk.nodes:
                uuid = new if uuid == old else uuid
                if uuid not in nodes:
                    nodes.append(uuid)
            await lu.update("disk", attrs.evolve(disk, nodes=nodes))
