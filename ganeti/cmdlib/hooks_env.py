"""The hooks of every LU Ganeti gives hooks: HPATH, HTYPE, environment, nodes.

One entry per opcode (Ganeti's C{HPATH}, C{HTYPE}, C{BuildHooksEnv},
C{BuildHooksNodes} and C{PreparePostHookNodes} of its LU), declared here
rather than spread over the LU modules; an LU class may instead set
C{HPATH} and implement the methods itself (L{ganeti.cmdlib.base}).  The
environment functions read what the LU resolved (C{self.op} after
C{check_prereq}, attributes it set) and the LU's config; they run after
C{check_prereq} and again after C{exec_} (the post phase).  Opcodes
without an entry run no hooks but C{config-update} (Ganeti's
C{NoHooksLU}s: queries, tags, OOB, disk (de)activation, ...).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import attrs

from ganeti.objects import ConfigData, Disk, Instance, Network, Node
from ganeti.rpc import instances as rpc_inst

#: the object types (Ganeti's C{HTYPE_*})
HTYPE_CLUSTER = "CLUSTER"
HTYPE_NODE = "NODE"
HTYPE_GROUP = "GROUP"
HTYPE_INSTANCE = "INSTANCE"
HTYPE_NETWORK = "NETWORK"

EnvFn = Callable[[Any], dict[str, Any]]
NodesFn = Callable[[Any], tuple[list[str], list[str]]]


# --- the environments Ganeti's LUs build -------------------------------------------------


def master_uuid(cfg: ConfigData) -> str:
    """The master node's UUID (the node most LUs run their hooks on)."""
    return cfg.cluster.master_node or ""


def node_names(cfg: ConfigData, uuids: Iterable[str]) -> list[str]:
    return [(cfg.nodes[u].name or u) if u in cfg.nodes else u for u in uuids]


def network_env(net: Network, prefix: str = "") -> dict[str, Any]:
    """Ganeti's C{Network.HooksDict}."""
    env: dict[str, Any] = {
        prefix + "NETWORK_NAME": net.name,
        prefix + "NETWORK_UUID": net.uuid,
        prefix + "NETWORK_TAGS": " ".join(net.tags or []),
    }
    for field, key in (("network", "SUBNET"), ("gateway", "GATEWAY"), ("network6", "SUBNET6"),
                       ("gateway6", "GATEWAY6"), ("mac_prefix", "MAC_PREFIX")):
        value = getattr(net, field)
        if value:
            env[prefix + "NETWORK_" + key] = value
    return env


def disk_template(disks: list[Disk], inst: Instance | None = None) -> str:
    """Ganeti's C{GetDiskTemplate}: the disks' one type, C{mixed} or C{diskless}."""
    types = {d.dev_type for d in disks if d.dev_type}
    if not types:
        return (inst.disk_template if inst is not None and not disks and inst.disk_template else None) or "diskless"
    return types.pop() if len(types) == 1 else "mixed"


def disk_env(idx: int, disk: Disk | Mapping[str, Any]) -> dict[str, Any]:
    """Ganeti's C{BuildDiskEnv} (a record, or a disk spec of an instance being created)."""
    env: dict[str, Any] = {}
    if isinstance(disk, Disk):
        uuid, name, size, mode = disk.uuid, disk.name, disk.size, disk.mode
        env.update(_logical_id_env(idx, disk))
    else:
        uuid, name = disk.get("uuid", ""), disk.get("name", "")
        size, mode = disk.get("size", ""), disk.get("mode", "")
    if name:
        env["INSTANCE_DISK%d_NAME" % idx] = name
    env["INSTANCE_DISK%d_UUID" % idx] = uuid
    env["INSTANCE_DISK%d_SIZE" % idx] = size
    env["INSTANCE_DISK%d_MODE" % idx] = mode
    return env


def _logical_id_env(idx: int, disk: Disk) -> dict[str, Any]:
    """Ganeti's C{BuildDiskLogicalIDEnv}."""
    env: dict[str, Any] = {}
    lid = disk.logical_id if isinstance(disk.logical_id, (list, tuple)) else []
    first = {"plain": "VG", "file": "DRIVER", "sharedfile": "DRIVER", "blockdev": "DRIVER", "rbd": "DRIVER",
             "ext": "PROVIDER", "gluster": "DRIVER"}.get(disk.dev_type or "")
    if first is not None and len(lid) >= 2:
        env["INSTANCE_DISK%d_%s" % (idx, first)] = lid[0]
        env["INSTANCE_DISK%d_ID" % idx] = lid[1]
    env["INSTANCE_DISK%d_DEV_TYPE" % idx] = disk.dev_type
    return env


def nic_env(cfg: ConfigData, nics: Iterable[Any]) -> dict[str, Any]:
    """The C{INSTANCE_NIC*} variables of C{nics} (records or dicts with the
    same keys), their parameters filled from the cluster's (Ganeti's
    C{NICListToTuple} and the NIC part of C{BuildInstanceHookEnv})."""
    env: dict[str, Any] = {}
    default = (cfg.cluster.nicparams or {}).get("default") or {}
    count = 0
    for idx, nic in enumerate(nics):
        count += 1
        get = nic.get if isinstance(nic, Mapping) else (lambda key, _nic=nic: getattr(_nic, key, None))
        params = dict(default)
        params.update(get("nicparams") or {})
        mode, link, vlan = params.get("mode"), params.get("link"), params.get("vlan")
        if get("name"):
            env["INSTANCE_NIC%d_NAME" % idx] = get("name")
        env["INSTANCE_NIC%d_UUID" % idx] = get("uuid")
        env["INSTANCE_NIC%d_IP" % idx] = get("ip") or ""
        env["INSTANCE_NIC%d_MAC" % idx] = get("mac")
        env["INSTANCE_NIC%d_MODE" % idx] = mode
        env["INSTANCE_NIC%d_LINK" % idx] = link
        env["INSTANCE_NIC%d_VLAN" % idx] = vlan
        net_uuid = get("network")
        if net_uuid:
            net = cfg.networks.get(net_uuid) or next(
                (n for n in cfg.networks.values() if n.name == net_uuid), None)
            if net is not None:
                env.update(network_env(net, "INSTANCE_NIC%d_" % idx))
            else:
                env["INSTANCE_NIC%d_NETWORK_NAME" % idx] = net_uuid
        if mode in ("bridged", "openvswitch"):
            env["INSTANCE_NIC%d_BRIDGE" % idx] = link
    env["INSTANCE_NIC_COUNT"] = count
    return env


def instance_env(cfg: ConfigData, inst: Instance, *, override: Mapping[str, Any] | None = None,
                 disks: list[Any] | None = None, nics: list[Any] | None = None,
                 secondaries: list[str] | None = None) -> dict[str, Any]:
    """Ganeti's C{BuildInstanceHookEnvByObject}: C{OP_TARGET}, C{INSTANCE_*}.

    @param override: values that replace those of C{inst} (C{INSTANCE_*} keys)
    @param disks: the disks (records or creation specs; default: C{inst}'s)
    @param nics: the NICs (default: C{inst}'s)
    @param secondaries: secondary node UUIDs (default: those of C{inst}'s disks)
    """
    current = cfg.instances.get(inst.uuid or "", inst)
    bep = rpc_inst.filled_beparams(cfg, current)
    hvp = rpc_inst.filled_hvparams(cfg, current)
    disk_list = disks if disks is not None else rpc_inst.instance_disks(cfg, current)
    if secondaries is None:
        secondaries = sorted({n for d in disk_list if isinstance(d, Disk) for n in d.nodes}
                             - {current.primary_node or ""})
    records = [d for d in disk_list if isinstance(d, Disk)]
    template = disk_template(records, current) if len(records) == len(disk_list) else (
        current.disk_template or "diskless")
    maxmem = bep.get("maxmem", bep.get("memory"))
    env: dict[str, Any] = {
        "OP_TARGET": current.name,
        "INSTANCE_NAME": current.name,
        "INSTANCE_PRIMARY": node_names(cfg, [current.primary_node or ""])[0],
        "INSTANCE_SECONDARIES": " ".join(node_names(cfg, secondaries)),
        "INSTANCE_OS_TYPE": current.os,
        "INSTANCE_STATUS": current.admin_state,
        "INSTANCE_MINMEM": bep.get("minmem", maxmem),
        "INSTANCE_MAXMEM": maxmem,
        "INSTANCE_MEMORY": maxmem,
        "INSTANCE_VCPUS": bep.get("vcpus"),
        "INSTANCE_DISK_TEMPLATE": template,
        "INSTANCE_HYPERVISOR": current.hypervisor,
    }
    env.update(nic_env(cfg, nics if nics is not None else current.nics))
    for idx, disk in enumerate(disk_list):
        env.update(disk_env(idx, disk))
    env["INSTANCE_DISK_COUNT"] = len(disk_list)
    env["INSTANCE_TAGS"] = " ".join(current.tags or [])
    for source, kind in ((bep, "BE"), (hvp, "HV")):
        for key, value in source.items():
            env["INSTANCE_%s_%s" % (kind, key)] = value
    if override:
        env.update(override)
    return env


def instance_nodes(cfg: ConfigData, inst: Instance, master: bool = True) -> list[str]:
    """The master (unless not C{master}) and C{inst}'s nodes: the usual hooks nodes of an instance LU."""
    from ganeti.cmdlib import instance_utils as iu

    current = cfg.instances.get(inst.uuid or "", inst)
    nodes = [master_uuid(cfg)] if master else []
    return nodes + [n for n in iu.instance_nodes(cfg, current) if n not in nodes]


def node_target_env(node: Node) -> dict[str, Any]:
    """C{OP_TARGET} and C{NODE_NAME} (the start of every node LU's environment)."""
    return {"OP_TARGET": node.name, "NODE_NAME": node.name}


# --- the table ------------------------------------------------------------------------------


@attrs.frozen
class HookSpec:
    """The hooks of one opcode's LU."""

    hpath: str
    htype: str
    env: EnvFn
    nodes: NodesFn
    post_nodes: Callable[[Any, list[str]], list[str]] | None = None


#: OP_ID -> its hooks
SPECS: dict[str, HookSpec] = {}


def spec(op_id: str, hpath: str, htype: str, nodes: NodesFn,
         post_nodes: Callable[[Any, list[str]], list[str]] | None = None) -> Callable[[EnvFn], EnvFn]:
    """Declare the hooks of C{op_id}, the decorated function building the environment."""
    def declare(env: EnvFn) -> EnvFn:
        SPECS[op_id] = HookSpec(hpath, htype, env, nodes, post_nodes)
        return env
    return declare


def _master(lu: Any) -> tuple[list[str], list[str]]:
    mn = master_uuid(lu.cfg)
    return [mn], [mn]


def _members(cfg: ConfigData, group_uuid: str) -> list[str]:
    return [u for u, n in cfg.nodes.items() if n.group == group_uuid]


def _instance(lu: Any) -> Instance:
    """The LU's instance, as it is in its config now (or as it was, once removed)."""
    inst = getattr(lu, "instance", None)
    uuid = getattr(lu.op, "instance_uuid", None) or (inst.uuid if inst is not None else None)
    found = lu.cfg.instances.get(uuid or "")
    if found is not None:
        return found  # type: ignore[no-any-return]
    if inst is None:
        inst = lu.cfg.find_instance(lu.op.instance_name)
    return inst  # type: ignore[no-any-return]


def _inst_env(lu: Any, **extra: Any) -> dict[str, Any]:
    env = dict(extra)
    env.update(instance_env(lu.cfg, _instance(lu)))
    return env


def _inst_nodes(lu: Any) -> tuple[list[str], list[str]]:
    nl = instance_nodes(lu.cfg, _instance(lu))
    return nl, nl


# --- cluster -------------------------------------------------------------------------------


@spec("OP_CLUSTER_SET_PARAMS", "cluster-modify", HTYPE_CLUSTER, _master)
def _cluster_modify(lu: Any) -> dict[str, Any]:
    return {"OP_TARGET": lu.cfg.cluster.cluster_name, "NEW_VG_NAME": lu.op.vg_name}


def _post_init_nodes(lu: Any) -> tuple[list[str], list[str]]:
    return [], [master_uuid(lu.cfg)]


@spec("OP_CLUSTER_POST_INIT", "cluster-init", HTYPE_CLUSTER, _post_init_nodes)
def _cluster_init(lu: Any) -> dict[str, Any]:
    return {"OP_TARGET": lu.cfg.cluster.cluster_name}


def _verify_group_nodes(lu: Any) -> tuple[list[str], list[str]]:
    return [], _members(lu.cfg, lu.group_uuid)


@spec("OP_CLUSTER_VERIFY_GROUP", "cluster-verify", HTYPE_CLUSTER, _verify_group_nodes)
def _cluster_verify(lu: Any) -> dict[str, Any]:
    cfg = lu.cfg
    env = {"CLUSTER_TAGS": " ".join(cfg.cluster.tags or [])}
    for uuid in _members(cfg, lu.group_uuid):
        node = cfg.nodes[uuid]
        env["NODE_TAGS_%s" % node.name] = " ".join(node.tags or [])
    return env


# --- node groups ---------------------------------------------------------------------------


@spec("OP_GROUP_ADD", "group-add", HTYPE_GROUP, _master)
def _group_add(lu: Any) -> dict[str, Any]:
    return {"GROUP_NAME": lu.op.group_name}


@spec("OP_GROUP_SET_PARAMS", "group-modify", HTYPE_GROUP, _master)
def _group_modify(lu: Any) -> dict[str, Any]:
    return {"GROUP_NAME": lu.op.group_name, "NEW_ALLOC_POLICY": lu.op.alloc_policy}


@spec("OP_GROUP_REMOVE", "group-remove", HTYPE_GROUP, _master)
def _group_remove(lu: Any) -> dict[str, Any]:
    return {"GROUP_NAME": lu.op.group_name}


def _group_and_members(lu: Any) -> tuple[list[str], list[str]]:
    mn = master_uuid(lu.cfg)
    nodes = [mn] + [u for u in _members(lu.cfg, lu.group_uuid) if u != mn]
    return nodes, nodes


@spec("OP_GROUP_RENAME", "group-rename", HTYPE_GROUP, _group_and_members)
def _group_rename(lu: Any) -> dict[str, Any]:
    return {"OLD_NAME": lu.op.group_name, "NEW_NAME": lu.op.new_name}


@spec("OP_GROUP_EVACUATE", "group-evacuate", HTYPE_GROUP, _group_and_members)
def _group_evacuate(lu: Any) -> dict[str, Any]:
    return {"GROUP_NAME": lu.op.group_name, "TARGET_GROUPS": " ".join(getattr(lu, "targets", None) or [])}


# --- networks ------------------------------------------------------------------------------


def _network_env(name: str | None, subnet: Any, gateway: Any, network6: Any, gateway6: Any, mac_prefix: Any,
                 tags: Any) -> dict[str, Any]:
    """Ganeti's C{_BuildNetworkHookEnv}: only the values that are set."""
    env: dict[str, Any] = {}
    for key, value in (("NETWORK_NAME", name), ("NETWORK_SUBNET", subnet), ("NETWORK_GATEWAY", gateway),
                       ("NETWORK_SUBNET6", network6), ("NETWORK_GATEWAY6", gateway6),
                       ("NETWORK_MAC_PREFIX", mac_prefix)):
        if value:
            env[key] = value
    if tags:
        env["NETWORK_TAGS"] = " ".join(tags)
    return env


@spec("OP_NETWORK_ADD", "network-add", HTYPE_NETWORK, _master)
def _network_add(lu: Any) -> dict[str, Any]:
    op = lu.op
    return _network_env(op.network_name, op.network, op.gateway, op.network6, op.gateway6, op.mac_prefix, op.tags)


@spec("OP_NETWORK_REMOVE", "network-remove", HTYPE_NETWORK, _master)
def _network_remove(lu: Any) -> dict[str, Any]:
    return {"NETWORK_NAME": lu.op.network_name}


@spec("OP_NETWORK_SET_PARAMS", "network-modify", HTYPE_NETWORK, _master)
def _network_modify(lu: Any) -> dict[str, Any]:
    op = lu.op
    net = lu.cfg.networks.get(lu.network_uuid)
    subnet = net.network if net is not None else None

    def new(field: str) -> Any:  # the value after the change: none clears it
        value = getattr(op, field)
        if value is None:
            return getattr(net, field, None) if net is not None else None
        return None if value == "none" else value

    return _network_env(op.network_name, subnet, new("gateway"), new("network6"), new("gateway6"),
                        new("mac_prefix"), net.tags if net is not None else [])


def _group_members(lu: Any) -> tuple[list[str], list[str]]:
    nodes = _members(lu.cfg, lu.group_uuid)
    return nodes, nodes


@spec("OP_NETWORK_CONNECT", "network-connect", HTYPE_NETWORK, _group_members)
def _network_connect(lu: Any) -> dict[str, Any]:
    op = lu.op
    return {"GROUP_NAME": op.group_name, "GROUP_NETWORK_MODE": op.network_mode,
            "GROUP_NETWORK_LINK": op.network_link, "GROUP_NETWORK_VLAN": op.network_vlan}


@spec("OP_NETWORK_DISCONNECT", "network-disconnect", HTYPE_NETWORK, _group_members)
def _network_disconnect(lu: Any) -> dict[str, Any]:
    env: dict[str, Any] = {"GROUP_NAME": lu.op.group_name}
    params = getattr(lu, "hooks_netparams", None)
    if params is None:
        params = (lu.cfg.nodegroups[lu.group_uuid].networks or {}).get(lu.network_uuid)
        lu.hooks_netparams = params  # the post phase: as it was before
    if params:
        env.update({"GROUP_NETWORK_MODE": params.get("mode"), "GROUP_NETWORK_LINK": params.get("link"),
                    "GROUP_NETWORK_VLAN": params.get("vlan")})
    return env


# --- nodes ---------------------------------------------------------------------------------


def _node_add_nodes(lu: Any) -> tuple[list[str], list[str]]:
    new = lu.cfg.find_node(lu.op.node_name)
    nodes = [u for u in lu.cfg.nodes if new is None or u != new.uuid]
    return nodes, nodes


def _node_add_post(lu: Any, nodes: list[str]) -> list[str]:
    new = lu.cfg.find_node(lu.op.node_name)
    return nodes + ([new.uuid] if new is not None and new.uuid not in nodes else [])


@spec("OP_NODE_ADD", "node-add", HTYPE_NODE, _node_add_nodes, _node_add_post)
def _node_add(lu: Any) -> dict[str, Any]:
    op = lu.op
    return {"OP_TARGET": op.node_name, "NODE_NAME": op.node_name, "NODE_PIP": op.primary_ip,
            "NODE_SIP": op.secondary_ip, "MASTER_CAPABLE": str(op.master_capable),
            "VM_CAPABLE": str(op.vm_capable)}


def _node_modify_nodes(lu: Any) -> tuple[list[str], list[str]]:
    nl = [master_uuid(lu.cfg), lu.node_uuid]
    return nl, nl


@spec("OP_NODE_SET_PARAMS", "node-modify", HTYPE_NODE, _node_modify_nodes)
def _node_modify(lu: Any) -> dict[str, Any]:
    op = lu.op
    return {"OP_TARGET": op.node_name, "MASTER_CANDIDATE": str(op.master_candidate), "OFFLINE": str(op.offline),
            "DRAINED": str(op.drained), "MASTER_CAPABLE": str(op.master_capable), "VM_CAPABLE": str(op.vm_capable)}


@spec("OP_NODE_MIGRATE", "node-migrate", HTYPE_NODE, _master)
def _node_migrate(lu: Any) -> dict[str, Any]:
    return {"NODE_NAME": lu.op.node_name, "ALLOW_RUNTIME_CHANGES": lu.op.allow_runtime_changes}


def _node_remove_nodes(lu: Any) -> tuple[list[str], list[str]]:
    nodes = [u for u in lu.cfg.nodes if u != lu.node_uuid]
    return nodes, nodes


@spec("OP_NODE_REMOVE", "node-remove", HTYPE_NODE, _node_remove_nodes)
def _node_remove(lu: Any) -> dict[str, Any]:
    return {"OP_TARGET": lu.op.node_name, "NODE_NAME": lu.op.node_name}


# --- instances -----------------------------------------------------------------------------


def _create_nodes(lu: Any) -> tuple[list[str], list[str]]:
    nl = [master_uuid(lu.cfg)]
    if lu.op.pnode_uuid and lu.op.pnode_uuid not in nl:
        nl.append(lu.op.pnode_uuid)
    return nl, nl


@spec("OP_INSTANCE_CREATE", "instance-add", HTYPE_INSTANCE, _create_nodes)
def _instance_add(lu: Any) -> dict[str, Any]:
    op, cfg = lu.op, lu.cfg
    env: dict[str, Any] = {"ADD_MODE": op.mode}
    if op.mode == "import":
        env["SRC_NODE"] = op.src_node
        env["SRC_PATH"] = op.src_path
        env["SRC_IMAGES"] = getattr(lu, "src_images", "")
    hypervisor = getattr(lu, "hypervisor", None) or op.hypervisor
    record = Instance(name=op.instance_name, primary_node=op.pnode_uuid, os=op.os_type, hypervisor=hypervisor,
                      beparams=getattr(lu, "beparams", None) or {}, hvparams=getattr(lu, "hvparams", None) or {},
                      admin_state=op.start, disk_template=getattr(lu, "template", None) or op.disk_template,
                      tags=list(op.tags or []))
    env.update(instance_env(cfg, record, disks=list(getattr(lu, "disks", None) or []),
                               nics=list(getattr(lu, "nics", None) or []), secondaries=[]))
    env["INSTANCE_STATUS"] = op.start
    env["INSTANCE_DISK_TEMPLATE"] = getattr(lu, "template", None) or op.disk_template
    return env


def _remove_nodes(lu: Any) -> tuple[list[str], list[str]]:
    mn = master_uuid(lu.cfg)
    return [mn], [n for n in instance_nodes(lu.cfg, _instance(lu), master=False) if n != mn] + [mn]


@spec("OP_INSTANCE_REMOVE", "instance-remove", HTYPE_INSTANCE, _remove_nodes)
def _instance_remove(lu: Any) -> dict[str, Any]:
    return _inst_env(lu, SHUTDOWN_TIMEOUT=lu.op.shutdown_timeout)


@spec("OP_INSTANCE_RENAME", "instance-rename", HTYPE_INSTANCE, _inst_nodes)
def _instance_rename(lu: Any) -> dict[str, Any]:
    env = _inst_env(lu)
    env["INSTANCE_NEW_NAME"] = lu.op.new_name
    return env


@spec("OP_INSTANCE_STARTUP", "instance-start", HTYPE_INSTANCE, _inst_nodes)
def _instance_start(lu: Any) -> dict[str, Any]:
    return _inst_env(lu, FORCE=lu.op.force)


@spec("OP_INSTANCE_SHUTDOWN", "instance-stop", HTYPE_INSTANCE, _inst_nodes)
def _instance_stop(lu: Any) -> dict[str, Any]:
    env = _inst_env(lu)
    env["TIMEOUT"] = lu.op.timeout
    return env


@spec("OP_INSTANCE_REBOOT", "instance-reboot", HTYPE_INSTANCE, _inst_nodes)
def _instance_reboot(lu: Any) -> dict[str, Any]:
    op = lu.op
    return _inst_env(lu, IGNORE_SECONDARIES=op.ignore_secondaries, REBOOT_TYPE=op.reboot_type,
                     SHUTDOWN_TIMEOUT=op.shutdown_timeout)


@spec("OP_INSTANCE_REINSTALL", "instance-reinstall", HTYPE_INSTANCE, _inst_nodes)
def _instance_reinstall(lu: Any) -> dict[str, Any]:
    return _inst_env(lu)


@spec("OP_INSTANCE_RECREATE_DISKS", "instance-recreate-disks", HTYPE_INSTANCE, _inst_nodes)
def _instance_recreate_disks(lu: Any) -> dict[str, Any]:
    return _inst_env(lu)


@spec("OP_INSTANCE_GROW_DISK", "disk-grow", HTYPE_INSTANCE, _inst_nodes)
def _disk_grow(lu: Any) -> dict[str, Any]:
    op = lu.op
    return _inst_env(lu, DISK=op.disk, AMOUNT=op.amount, ABSOLUTE=op.absolute)


@spec("OP_INSTANCE_SET_PARAMS", "instance-modify", HTYPE_INSTANCE, _inst_nodes)
def _instance_modify(lu: Any) -> dict[str, Any]:
    op = lu.op
    env = _inst_env(lu)
    be_new = op.beparams or {}
    for key, var in (("minmem", "INSTANCE_MINMEM"), ("maxmem", "INSTANCE_MAXMEM"), ("vcpus", "INSTANCE_VCPUS")):
        if key in be_new and be_new[key] not in (None, "default"):
            env[var] = be_new[key]
            if key == "maxmem":
                env["INSTANCE_MEMORY"] = be_new[key]
    if op.disk_template:
        env["NEW_DISK_TEMPLATE"] = op.disk_template
    if op.runtime_mem:
        env["RUNTIME_MEMORY"] = op.runtime_mem
    return env


def _move_prefix(lu: Any, inst: Instance) -> dict[str, Any]:
    cfg = lu.cfg
    source = inst.primary_node or ""
    target = getattr(lu, "target_uuid", None) or ""
    if getattr(lu, "hooks_primaries", None) is None:  # the post phase: as before the move
        lu.hooks_primaries = (source, target)
    source, target = lu.hooks_primaries
    names = node_names(cfg, [source, target])
    return {"OLD_PRIMARY": names[0], "NEW_PRIMARY": names[1], "OLD_SECONDARY": "", "NEW_SECONDARY": ""}


def _failover_nodes(lu: Any) -> tuple[list[str], list[str]]:
    inst = _instance(lu)
    nl = [master_uuid(lu.cfg), getattr(lu, "target_uuid", None) or ""]
    return nl, nl + [inst.primary_node or ""]


@spec("OP_INSTANCE_FAILOVER", "instance-failover", HTYPE_INSTANCE, _failover_nodes)
def _instance_failover(lu: Any) -> dict[str, Any]:
    op, inst = lu.op, _instance(lu)
    env = {"IGNORE_CONSISTENCY": op.ignore_consistency, "SHUTDOWN_TIMEOUT": op.shutdown_timeout,
           "FAILOVER_CLEANUP": op.cleanup}
    env.update(_move_prefix(lu, inst))
    env.update(instance_env(lu.cfg, inst))
    return env


def _migrate_nodes(lu: Any) -> tuple[list[str], list[str]]:
    inst = _instance(lu)
    nl = [master_uuid(lu.cfg), inst.primary_node or "", getattr(lu, "target_uuid", None) or ""]
    return nl, nl


@spec("OP_INSTANCE_MIGRATE", "instance-migrate", HTYPE_INSTANCE, _migrate_nodes)
def _instance_migrate(lu: Any) -> dict[str, Any]:
    op, inst = lu.op, _instance(lu)
    live = op.mode != "non-live" if op.mode else (op.live if op.live is not None else True)
    env = instance_env(lu.cfg, inst)
    env.update({"MIGRATE_LIVE": live, "MIGRATE_CLEANUP": op.cleanup,
                "ALLOW_RUNTIME_CHANGES": op.allow_runtime_changes})
    env.update(_move_prefix(lu, inst))
    return env


def _instance_move_nodes(lu: Any) -> tuple[list[str], list[str]]:
    inst = _instance(lu)
    if getattr(lu, "hooks_source", None) is None:
        lu.hooks_source = inst.primary_node or ""
    nl = [master_uuid(lu.cfg), lu.hooks_source, lu.op.target_node_uuid or ""]
    return nl, nl


@spec("OP_INSTANCE_MOVE", "instance-move", HTYPE_INSTANCE, _instance_move_nodes)
def _instance_move(lu: Any) -> dict[str, Any]:
    return _inst_env(lu, TARGET_NODE=lu.op.target_node, SHUTDOWN_TIMEOUT=lu.op.shutdown_timeout)


@spec("OP_INSTANCE_CHANGE_GROUP", "instance-change-group", HTYPE_INSTANCE, _master)
def _instance_change_group(lu: Any) -> dict[str, Any]:
    return _inst_env(lu, TARGET_GROUPS=" ".join(getattr(lu, "targets", None) or []))


def _export_nodes(lu: Any) -> tuple[list[str], list[str]]:
    nl = [master_uuid(lu.cfg), _instance(lu).primary_node or ""]
    if lu.op.mode == "local" and lu.op.target_node_uuid:
        nl.append(lu.op.target_node_uuid)
    return nl, nl


@spec("OP_BACKUP_EXPORT", "instance-export", HTYPE_INSTANCE, _export_nodes)
def _instance_export(lu: Any) -> dict[str, Any]:
    op = lu.op
    return _inst_env(lu, EXPORT_MODE=op.mode, EXPORT_NODE=op.target_node, EXPORT_DO_SHUTDOWN=op.shutdown,
                     SHUTDOWN_TIMEOUT=op.shutdown_timeout, REMOVE_INSTANCE=str(bool(op.remove_instance)))
