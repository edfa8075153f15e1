"""OP_INSTANCE_QUERY_DATA: the detailed data C{gnt-instance info} shows.

The result maps each instance name to a dict of the keys Ganeti's client
reads: C{name}, C{uuid}, C{serial_no}, C{ctime}, C{mtime},
C{config_state} (the admin state), C{run_state} (C{"up"}/C{"down"} from the
primary node, C{None} with C{static} or when the node cannot tell),
C{pnode} and its group, C{snodes} (and their groups), C{os},
C{os_instance}/C{os_actual}, C{hypervisor}, C{hv_instance}/C{hv_actual},
C{be_instance}/C{be_actual}, C{network_port}, C{nics} (Ganeti's tuples
C{(name, uuid, ip, mac, mode, link, vlan, network uuid, network info)}),
C{disk_template}, C{disks} (dicts with C{iv_name}, C{size}, C{mode},
C{dev_type}, C{logical_id}, C{pstatus}/C{sstatus} (C{None}), ...) and C{tags}.
Ours: C{accel}, the accelerator a running kvm instance uses (C{kvm} or
C{tcg}, from its node's instance info), only when the node tells.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    Feedback,
    LogicalUnit,
    expand_instance_name,
    register,
)
from ganeti.objects import ConfigData, Disk, Instance
from ganeti.opcodes.typed import OpInstanceQueryData
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures


def nic_tuple(cfg: ConfigData, nic: Any) -> list[Any]:
    filled = dict((cfg.cluster.nicparams or {}).get("default") or {}, **(nic.nicparams or {}))
    netinfo = None
    if nic.network is not None and nic.network in cfg.networks:
        net = cfg.networks[nic.network]
        netinfo = {"name": net.name, "uuid": net.uuid, "network": net.network, "gateway": net.gateway,
                   "network6": net.network6, "gateway6": net.gateway6, "mac_prefix": net.mac_prefix}
    return [nic.name, nic.uuid, nic.ip, nic.mac, filled.get("mode"), filled.get("link"), filled.get("vlan"),
            nic.network, netinfo]


def disk_data(disk: Disk) -> dict[str, Any]:
    return {
        "iv_name": disk.iv_name,
        "dev_type": disk.dev_type,
        "logical_id": disk.logical_id,
        "drbd_info": None,
        "pstatus": None,
        "sstatus": None,
        "children": [disk_data(child) for child in disk.children],
        "mode": disk.mode,
        "size": disk.size,
        "spindles": disk.spindles,
        "name": disk.name,
        "uuid": disk.uuid,
    }


def instance_data(cfg: ConfigData, inst: Instance, run_state: str | None,
                  runtime: dict[str, Any] | None = None) -> dict[str, Any]:
    """The dict of one instance (see the module docstring); C{runtime}: its
    node's instance info when it runs."""
    pnode = cfg.nodes.get(inst.primary_node or "")
    pgroup = cfg.nodegroups.get(pnode.group or "") if pnode is not None else None
    snodes = [cfg.nodes[u] for u in iu.secondary_nodes(cfg, inst) if u in cfg.nodes]
    sgroups = [cfg.nodegroups.get(n.group or "") for n in snodes]
    hv_actual = rpc_inst.filled_hvparams(cfg, inst)
    data = {
        "name": inst.name,
        "config_state": inst.admin_state,
        "run_state": run_state,
        "pnode": pnode.name if pnode is not None else inst.primary_node,
        "pnode_group_uuid": pgroup.uuid if pgroup is not None else None,
        "pnode_group_name": pgroup.name if pgroup is not None else None,
        "snodes": [n.name for n in snodes],
        "snodes_group_uuids": [g.uuid if g is not None else None for g in sgroups],
        "snodes_group_names": [g.name if g is not None else None for g in sgroups],
        "os": inst.os,
        "nics": [nic_tuple(cfg, nic) for nic in inst.nics],
        "disk_template": inst.disk_template,
        "disks": [disk_data(d) for d in rpc_inst.instance_disks(cfg, inst)],
        "hypervisor": inst.hypervisor,
        "network_port": inst.network_port,
        "hv_instance": dict(inst.hvparams),
        "hv_actual": hv_actual,
        "be_instance": dict(inst.beparams),
        "be_actual": rpc_inst.filled_beparams(cfg, inst),
        "os_instance": dict(inst.osparams),
        "os_actual": rpc_inst.filled_osparams(cfg, inst),
        "serial_no": inst.serial_no,
        "mtime": inst.mtime,
        "ctime": inst.ctime,
        "uuid": inst.uuid,
        "tags": list(inst.tags),
    }
    accel = (runtime or {}).get("accel")
    if isinstance(accel, str) and accel:
        data["accel"] = accel
    return data


@register
class LUInstanceQueryData(LogicalUnit[OpInstanceQueryData]):
    """Detailed data of instances (all of them when none is named).

    With C{use_locking} the instances and their nodes are locked shared;
    without, a config snapshot is read.  Live state comes from one
    C{all_instances_info} call per primary node, unless C{static}.
    """

    OP_ID = "OP_INSTANCE_QUERY_DATA"
    REQ_BGL = False

    def expand_names(self) -> None:
        names = self.op.instances
        self.wanted = [expand_instance_name(self.cfg, name) for name in names] if names else None
        if self.op.use_locking:
            self.needed_locks[LEVEL_INSTANCE] = self.wanted if self.wanted is not None else ALL_SET
            self.needed_locks[LEVEL_NODE] = []
            self.share_all()

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_NODE:
            nodes: set[str] = set()
            for inst in self._instances(strict=False):
                nodes.update(iu.instance_nodes(self.cfg, inst))
            self.needed_locks[LEVEL_NODE] = sorted(nodes)

    def _instances(self, strict: bool = True) -> list[Instance]:
        by_name = {i.name or "": i for i in self.cfg.instances.values()}
        if self.wanted is None:
            return [by_name[n] for n in sorted(by_name)]
        found = []
        for name in self.wanted:
            if name in by_name:
                found.append(by_name[name])
            elif strict:
                raise errors.OpPrereqError("Instance '%s' not known" % name, errors.ECODE_NOENT)
        return found

    def check_prereq(self) -> None:
        self.instances = self._instances()

    async def _live(self) -> dict[str, dict[str, Any] | None]:
        """C{{node uuid: {instance name: info}}}; C{None} for nodes that cannot tell."""
        cfg = self.cfg
        node_uuids = sorted({i.primary_node for i in self.instances if i.primary_node in cfg.nodes})
        out: dict[str, dict[str, Any] | None] = {uuid: None for uuid in node_uuids}
        online = [cfg.nodes[u] for u in node_uuids if not cfg.nodes[u].offline]
        if not online:
            return out
        hvs = list(cfg.cluster.enabled_hypervisors or [])
        hvparams = {hv: (cfg.cluster.hvparams or {}).get(hv) or {} for hv in hvs}
        answers = await self.ctx.rpc().run({n.name: iu.node_address(n) for n in online},
                                           procedures.all_instances_info.call(hvs, hvparams))
        for node in online:
            result = answers[node.name]
            if not result.failed and isinstance(result.payload, dict):
                out[node.uuid] = result.payload  # type: ignore[index]
        return out

    async def exec_(self, feedback: Feedback) -> Any:
        live = None if self.op.static else await self._live()
        result = {}
        for inst in self.instances:
            run_state, runtime = None, None
            if live is not None:
                info = live.get(inst.primary_node or "")
                if info is not None:
                    run_state = "up" if inst.name in info else "down"
                    runtime = info.get(inst.name or "")
            result[inst.name] = instance_data(self.cfg, inst, run_state,
                                              runtime if isinstance(runtime, dict) else None)
        return result
