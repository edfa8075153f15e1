"""LU hooks, the master's side: Ganeti's C{HooksMaster} and C{mcpu._ExecLU}.

An LU that Ganeti gives hooks sets C{HPATH} (C{"instance-add"}, ...) and
C{HTYPE} (C{"INSTANCE"}, ...) and implements C{build_hooks_env()} (its
variables, without the C{GANETI_} prefix) and C{build_hooks_nodes()}
(C{(pre node UUIDs, post node UUIDs)}).  L{execute}, called by the job's
processor once C{check_prereq} passed, runs an LU the way Ganeti's
processor does:

  1. the pre phase: C{hooks_runner(hpath, "pre", env)} on the pre nodes; a
     failing script (C{HKR_FAIL}) anywhere aborts the opcode with
     L{errors.HooksAbort} C{[(node, script, output), ...]} before anything
     changed; offline nodes are skipped, unreachable ones noted in the job
     log;
  2. C{dry_run} stops here;
  3. C{exec_}; then the post phase on the post nodes (C{prepare_post_hook_nodes}
     may extend them), whose environment is built again (the state after
     the change) with the prefix C{GANETI_POST_}, merged with the pre one;
     a failing post script is a warning in the job log
     (C{"On <node> script <script> failed, output: ..."}), never an error;
  4. whatever happened, if the LU wrote the config: the C{config-update}
     hooks (phase post, the pre environment) on the master.

Every script gets C{PATH}, C{GANETI_HOOKS_VERSION} (2), C{GANETI_OP_CODE},
C{GANETI_DATA_DIR}, C{GANETI_HOOKS_PHASE}, C{GANETI_HOOKS_PATH},
C{GANETI_OBJECT_TYPE}, C{GANETI_CLUSTER}, C{GANETI_MASTER} and the LU's
variables, every value a string (L{full_env}).  The node runs the scripts
(L{ganeti.noded.hooks}).  Where Ganeti 3.0's messages name a node by its
UUID (its RPC results are keyed so) these name it (ours).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Mapping

from twisted.internet.defer import CancelledError
from twisted.logger import Logger

from ganeti import errors
from ganeti.objects import ConfigData, Disk, Instance, Network, Node
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

if TYPE_CHECKING:
    from ganeti.cmdlib.base import LogicalUnit
    from ganeti.opcodes.typed import OpCode

log = Logger()

#: the phases (Ganeti's C{HOOKS_PHASE_*})
PHASE_PRE = "pre"
PHASE_POST = "post"
#: C{PATH} of every hook (Ganeti's C{HOOKS_PATH})
HOOKS_PATH = "/sbin:/bin:/usr/sbin:/usr/bin"
#: Ganeti's C{HOOKS_VERSION}
HOOKS_VERSION = 2
#: the hooks run after any LU that wrote the config (Ganeti's C{HOOKS_NAME_CFGUPDATE})
CFGUPDATE = "config-update"
#: Ganeti's C{HKR_*}
HKR_SKIP, HKR_FAIL, HKR_SUCCESS = 0, 1, 2
#: the object types (Ganeti's C{HTYPE_*})
HTYPE_CLUSTER = "CLUSTER"
HTYPE_NODE = "NODE"
HTYPE_GROUP = "GROUP"
HTYPE_INSTANCE = "INSTANCE"
HTYPE_NETWORK = "NETWORK"
#: Ganeti's default data directory, which C{GANETI_DATA_DIR} names
DATA_DIR = "/var/lib/ganeti"

#: the WConfD client calls that change the config (Ganeti's C{write_count})
WRITES = frozenset({"write_config", "write_config_and_unlock", "update", "update_instance", "update_node",
                    "update_group", "update_cluster", "add", "remove", "change_filter"})


def prefixed(env: Mapping[str, Any], phase: str) -> dict[str, Any]:
    """The LU's variables with the phase's prefix (C{GANETI_} or C{GANETI_POST_})."""
    prefix = "GANETI_" if phase == PHASE_PRE else "GANETI_POST_"
    for key in env:
        if key.upper().startswith(prefix):
            raise errors.ProgrammerError("hooks variable %s already has the prefix %s" % (key, prefix))
    return {prefix + key: value for key, value in env.items()}


def full_env(op_id: str, hpath: str, phase: str, phase_env: Mapping[str, Any], *, htype: str | None = None,
             cluster: str | None = None, master: str | None = None, data_dir: str = DATA_DIR) -> dict[str, str]:
    """What a script gets (Ganeti's C{_RunWrapper}): the fixed variables and
    C{phase_env} (already prefixed), every value as a string."""
    env: dict[str, Any] = {
        "PATH": HOOKS_PATH,
        "GANETI_HOOKS_VERSION": HOOKS_VERSION,
        "GANETI_OP_CODE": op_id,
        "GANETI_DATA_DIR": data_dir,
        "GANETI_HOOKS_PHASE": phase,
        "GANETI_HOOKS_PATH": hpath,
    }
    if htype:
        env["GANETI_OBJECT_TYPE"] = htype
    if cluster is not None:
        env["GANETI_CLUSTER"] = cluster
    if master is not None:
        env["GANETI_MASTER"] = master
    clash = set(env) & set(phase_env)
    if clash:
        raise errors.ProgrammerError("hooks variables set twice: %s" % ", ".join(sorted(clash)))
    env.update(phase_env)
    return {str(key): str(value) for key, value in env.items()}


def failures(results: Mapping[str, Any]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """C{(failed scripts [(node, script, output)], notes)} of a phase's RPC
    results C{{node name: RpcResult}}: offline nodes are skipped, a node
    that did not answer is a note."""
    failed: list[tuple[str, str, str]] = []
    notes: list[str] = []
    for name in sorted(results):
        result = results[name]
        if result.offline:
            continue
        if not result.success:
            notes.append("Communication failure to node %s: %s" % (name, result.fail_msg))
            continue
        payload = result.payload if isinstance(result.payload, list) else []
        for entry in payload:
            if isinstance(entry, (list, tuple)) and len(entry) == 3 and entry[1] == HKR_FAIL:
                failed.append((name, str(entry[0]), str(entry[2] or "")))
    return failed, notes


class _CountingWConfd:
    """The job's WConfD client, counting the calls that change the config."""

    def __init__(self, wconfd: Any) -> None:
        self._wconfd = wconfd
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._wconfd, name)
        if name in WRITES:
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.writes += 1
                return value(*args, **kwargs)
            return counted
        return value


class HooksMaster:
    """The hooks of one LU run (Ganeti's C{HooksMaster.BuildFromLu}).

    Built after C{check_prereq}: the pre environment is computed here.
    """

    def __init__(self, lu: LogicalUnit[OpCode]) -> None:
        from ganeti.cmdlib.hooks_env import SPECS

        self.lu = lu
        self.op_id = lu.OP_ID or ""
        self.hpath: str | None = lu.HPATH
        self.htype: str | None = lu.HTYPE
        self._env_fn: Callable[[], dict[str, Any]] = lu.build_hooks_env
        self._post_nodes_fn: Callable[[list[str]], list[str]] = lu.prepare_post_hook_nodes
        nodes_fn: Callable[[], tuple[list[str], list[str]]] = lu.build_hooks_nodes
        declared = SPECS.get(self.op_id) if self.hpath is None else None
        if declared is not None:
            self.hpath, self.htype = declared.hpath, declared.htype
            self._env_fn = lambda: declared.env(lu)
            nodes_fn = lambda: declared.nodes(lu)  # noqa: E731
            if declared.post_nodes is not None:
                self._post_nodes_fn = lambda nodes: declared.post_nodes(lu, nodes)  # type: ignore[misc]
        cfg = lu.cfg
        self.cluster_name = cfg.cluster.cluster_name
        self.master_name = cfg.master_node_name()
        self.pre_nodes: frozenset[str] = frozenset()
        self.post_nodes: frozenset[str] = frozenset()
        self.pre_env: dict[str, Any] = {}
        if self.hpath is not None:
            pre, post = nodes_fn()
            self.pre_nodes, self.post_nodes = frozenset(n for n in pre if n), frozenset(n for n in post if n)
            self.pre_env = prefixed(self._env_fn(), PHASE_PRE)

    def _env(self, hpath: str, phase: str, phase_env: Mapping[str, Any]) -> dict[str, str]:
        return full_env(self.op_id, hpath, phase, phase_env, htype=self.htype, cluster=self.cluster_name,
                        master=self.master_name)

    async def _send(self, cfg: ConfigData, nodes: Iterable[str], hpath: str, phase: str,
                    env: dict[str, str]) -> dict[str, Any]:
        targets, offline = resolve_nodes(cfg, nodes)
        call = procedures.hooks_runner.call(hpath, phase, env)
        try:
            rpc = self.lu.ctx.rpc()
        except errors.OpExecError:  # a context without node RPC (unit tests): no node runs hooks
            return {}
        results: dict[str, Any] = await rpc.run(targets, call, offline=offline)
        return results

    async def run_phase(self, phase: str) -> dict[str, Any] | None:
        """Run C{phase}; L{errors.HooksAbort} when a pre script failed."""
        if self.hpath is None:
            return None
        if phase == PHASE_PRE:
            nodes, env = self.pre_nodes, self.pre_env
        else:
            self.lu.cfg = await self.lu.ctx.wconfd.read_config()  # the state after the change
            nodes = frozenset(n for n in self._post_nodes_fn(sorted(self.post_nodes)) if n)
            env = dict(prefixed(self._env_fn(), PHASE_POST))
            env.update(self.pre_env)
        if not nodes:
            return None
        results = await self._send(self.lu.cfg, nodes, self.hpath, phase, self._env(self.hpath, phase, env))
        failed, notes = failures(results)
        for note in notes:
            await self.lu.log_warning("%s", note)
        log.info("job {job}: hooks {hpath}-{phase} on {nodes}: {failed} failed", job=self.lu.ctx.job_id,
                 hpath=self.hpath, phase=phase, nodes=", ".join(sorted(results)), failed=len(failed))
        if failed and phase == PHASE_PRE:
            raise errors.HooksAbort(failed)
        for node, script, output in failed:
            await self.lu.log_warning("On %s script %s failed, output: %s", node, script, output or "(no output)")
        return results

    async def run_config_update(self) -> None:
        """The C{config-update} hooks on the master (their results are ignored, as Ganeti does)."""
        if self.master_name is None:
            return
        env = self._env(CFGUPDATE, PHASE_POST, self.pre_env)
        try:
            cfg = await self.lu.ctx.wconfd.read_config()
            await self._send(cfg, [self.master_name], CFGUPDATE, PHASE_POST, env)
        except Exception as e:
            log.warn("job {job}: config-update hooks not run: {e}", job=self.lu.ctx.job_id, e=e)


def resolve_nodes(cfg: ConfigData, nodes: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """C{({name: address}, offline names)} of node UUIDs or names; an unknown
    one is taken as a name (and address), as Ganeti's RPC resolver does."""
    targets: dict[str, str] = {}
    offline: list[str] = []
    for key in nodes:
        node = cfg.find_node(key)
        if node is None:
            targets[key] = key
            continue
        name = node.name or key
        targets[name] = node.primary_ip or name
        if node.offline:
            offline.append(name)
    return targets, offline


async def execute(lu: LogicalUnit[OpCode], run: Callable[[], Awaitable[Any]]) -> Any:
    """Run C{lu} (its C{check_prereq} passed) with its hooks: pre phase,
    C{run()} unless C{dry_run}, post phase, C{config-update}; see the
    module docstring."""
    ctx = lu.ctx
    master = HooksMaster(lu)
    await master.run_phase(PHASE_PRE)
    if getattr(lu.op, "dry_run", False):
        return lu.dry_run_result
    counting = _CountingWConfd(ctx.wconfd)
    ctx.wconfd = counting
    try:
        result = await run()
        await master.run_phase(PHASE_POST)
    except (GeneratorExit, CancelledError):  # killed: stop now
        ctx.wconfd = counting._wconfd
        raise
    except BaseException:
        ctx.wconfd = counting._wconfd
        if counting.writes:
            await master.run_config_update()
        raise
    ctx.wconfd = counting._wconfd
    if counting.writes:
        await master.run_config_update()
    return result


# --- environments Ganeti's LUs build ----------------------------------------------------


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
