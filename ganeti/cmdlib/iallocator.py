"""Ganeti's iallocator protocol (pure): what an external allocator reads and answers.

An external allocator (Ganeti's C{hail} from htools, or any program
speaking the protocol) gets the path of a JSON file (L{build_input}):

  - the cluster: C{version} (2), C{cluster_name}, C{cluster_tags},
    C{enabled_hypervisors}, C{ipolicy};
  - C{nodegroups}: C{{uuid: {name, alloc_policy, networks, ipolicy, tags}}},
    each C{ipolicy} the cluster's filled with the group's own (Ganeti's
    C{FillIPolicy}: every key, C{std} merged key by key);
  - C{nodes}: C{{name: ...}} with the configuration's fields (tags, IPs,
    flags, group uuid, filled C{ndparams}) and, for the nodes whose
    C{node_info} figures are known, the dynamic ones (memory, disk,
    spindles, CPUs, memory of the primary instances).  A node without
    figures is shown offline, so that no allocator places anything there.
    C{free_memory} is the hypervisor's figure as reported (Ganeti further
    subtracts what running instances may still claim up to their maximum
    memory, from an extra C{all_instances_info} call; we do not);
  - C{instances}: C{{name: ...}} with their filled backend parameters,
    nodes (primary first), NICs (filled C{mode} and C{link}, C{bridge} when
    bridged), disks (C{dev_type}, C{size}, C{mode}, C{spindles}) and disk
    space;
  - C{request}: one of L{AllocateRequest} (C{allocate}),
    L{RelocateRequest} (C{relocate}), L{NodeEvacRequest}
    (C{node-evacuate}), L{ChangeGroupRequest} (C{change-group}).

It prints C{{"success": bool, "info": text, "result": ...}}: a list of node
names for C{allocate} and C{relocate} (L{node_names}), C{[moved, failed,
jobs]} for C{node-evacuate} and C{change-group} (L{evacuation}).
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping, Protocol

import attrs

from ganeti import errors, serializer
from ganeti.cmdlib.instance_utils import instance_memory, instance_nodes, node_name
from ganeti.objects import ConfigData
from ganeti.rpc import instances as rpc_inst

#: the version of the iallocator input format
IALLOCATOR_VERSION = 2
#: MiB of DRBD metadata added to each disk of a DRBD instance
DRBD_META_SIZE = 128
#: templates whose disks have a secondary node (two nodes are needed)
INT_MIRROR = ("drbd",)
#: what a disk of each template takes of its node's storage (per MiB of disk)
_NO_SPACE = ("diskless", "blockdev", "block")
#: modes of a node evacuation
EVAC_MODES = ("primary-only", "secondary-only", "all")


def disk_space(template: str, sizes: Iterable[int]) -> int:
    """MiB of node storage disks of C{sizes} take (Ganeti's C{ComputeDiskSize})."""
    if template in _NO_SPACE:
        return 0
    extra = DRBD_META_SIZE if template in INT_MIRROR else 0
    return sum(int(size) + extra for size in sizes)


def filled_ipolicy(cluster_policy: Mapping[str, Any], group_policy: Mapping[str, Any] | None) -> dict[str, Any]:
    """The cluster's instance policy with the group's own values (Ganeti's C{FillIPolicy})."""
    out = copy.deepcopy(dict(group_policy or {}))
    for key, value in cluster_policy.items():
        if key not in out:
            out[key] = copy.deepcopy(value)
        elif key == "std" and isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = dict(value, **out[key])
    return out


class Request(Protocol):
    """What an allocator is asked: C{mode}, the request's dict, extra options."""

    @property
    def mode(self) -> str: ...

    def to_dict(self, cfg: ConfigData) -> dict[str, Any]: ...

    def extra_args(self) -> list[str]: ...


@attrs.frozen
class AllocateRequest:
    """Place a new instance (C{allocate}).

    @ivar disks: C{{"size": MiB, "mode": ..., "spindles": ...}} each
    @ivar restrict_to: the only node names it may go to (Ganeti's node
        white list, sent as C{restrict-to-nodes}), or C{None}
    """

    name: str
    memory: int
    vcpus: int
    disk_template: str
    disks: list[dict[str, Any]] = attrs.Factory(list)
    nics: list[dict[str, Any]] = attrs.Factory(list)
    hypervisor: str = "fake"
    os: str = ""
    tags: list[str] = attrs.Factory(list)
    spindle_use: int = 1
    group_name: str | None = None
    restrict_to: list[str] | None = None

    mode = "allocate"

    @property
    def required_nodes(self) -> int:
        return 2 if self.disk_template in INT_MIRROR else 1

    @property
    def disk_space(self) -> int:
        """MiB of node storage the disks take (none for diskless)."""
        return disk_space(self.disk_template, (int(d.get("size") or 0) for d in self.disks))

    def to_dict(self, cfg: ConfigData | None = None) -> dict[str, Any]:
        out = {
            "type": self.mode,
            "name": self.name,
            "disk_template": self.disk_template,
            "group_name": self.group_name,
            "tags": list(self.tags),
            "os": self.os,
            "vcpus": self.vcpus,
            "memory": self.memory,
            "spindle_use": self.spindle_use,
            "disks": [{"size": int(d.get("size") or 0), "mode": d.get("mode", "rw"), "spindles": d.get("spindles"),
                       "dev_type": self.disk_template} for d in self.disks],
            "disk_space_total": self.disk_space,
            "nics": [dict(n) for n in self.nics],
            "required_nodes": self.required_nodes,
            "hypervisor": self.hypervisor,
        }
        if self.restrict_to is not None:
            out["restrict-to-nodes"] = list(self.restrict_to)
        return out

    def extra_args(self) -> list[str]:
        return []


@attrs.frozen
class RelocateRequest:
    """Find a new node for an instance, away from C{relocate_from} (C{relocate}).

    @ivar relocate_from: the node names it leaves
    """

    name: str
    relocate_from: list[str]

    mode = "relocate"

    def to_dict(self, cfg: ConfigData) -> dict[str, Any]:
        inst = cfg.find_instance(self.name)
        if inst is None:
            raise errors.OpPrereqError("Instance '%s' not known" % self.name, errors.ECODE_NOENT)
        disks = rpc_inst.instance_disks(cfg, inst)
        return {
            "type": self.mode,
            "name": self.name,
            "disk_space_total": disk_space(inst.disk_template or "diskless", (d.size or 0 for d in disks)),
            "required_nodes": 1,
            "relocate_from": list(self.relocate_from),
        }

    def extra_args(self) -> list[str]:
        return []


@attrs.frozen
class NodeEvacRequest:
    """Move instances off their node(s) (C{node-evacuate}).

    @ivar evac_mode: one of L{EVAC_MODES}
    """

    instances: list[str]
    evac_mode: str
    ignore_soft_errors: bool = False

    mode = "node-evacuate"

    def __attrs_post_init__(self) -> None:
        if self.evac_mode not in EVAC_MODES:
            raise errors.OpPrereqError("Invalid evacuation mode '%s' (known: %s)"
                                       % (self.evac_mode, ", ".join(EVAC_MODES)), errors.ECODE_INVAL)

    def to_dict(self, cfg: ConfigData | None = None) -> dict[str, Any]:
        return {"type": self.mode, "instances": list(self.instances), "evac_mode": self.evac_mode}

    def extra_args(self) -> list[str]:
        return ["--ignore-soft-errors"] if self.ignore_soft_errors else []


@attrs.frozen
class ChangeGroupRequest:
    """Move instances to other node groups (C{change-group}).

    @ivar target_groups: group uuids (all but the instances' own when empty)
    """

    instances: list[str]
    target_groups: list[str]

    mode = "change-group"

    def to_dict(self, cfg: ConfigData | None = None) -> dict[str, Any]:
        return {"type": self.mode, "instances": list(self.instances), "target_groups": list(self.target_groups)}

    def extra_args(self) -> list[str]:
        return []


@attrs.frozen
class NodeFigures:
    """What a node's C{node_info} says, for the allocator input (MiB).

    @ivar free_disk: free storage for the request's template (C{None}: not
        reported, then the total is taken, or 0)
    """

    free_memory: int
    total_memory: int | None = None
    reserved_memory: int = 0
    total_disk: int | None = None
    free_disk: int | None = None
    total_spindles: int = 0
    free_spindles: int = 0
    total_cpus: int | None = None
    reserved_cpus: int = 0


def _instance_data(cfg: ConfigData) -> dict[str, Any]:
    cluster = cfg.cluster
    nic_defaults = (cluster.nicparams or {}).get("default") or {}
    out: dict[str, Any] = {}
    for inst in cfg.instances.values():
        disks = rpc_inst.instance_disks(cfg, inst)
        be = rpc_inst.filled_beparams(cfg, inst)
        nics = []
        for nic in inst.nics:
            filled = dict(nic_defaults, **(nic.nicparams or {}))
            entry = {"mac": nic.mac, "ip": nic.ip, "mode": filled.get("mode"), "link": filled.get("link")}
            if filled.get("mode") == "bridged":
                entry["bridge"] = filled.get("link")
            nics.append(entry)
        template = inst.disk_template or "diskless"
        disk_list: list[dict[str, Any]] = [
            {"dev_type": d.dev_type or template, "size": d.size or 0, "mode": d.mode or "rw", "spindles": d.spindles}
            for d in disks
        ]
        out[inst.name or inst.uuid or "?"] = {
            "tags": list(inst.tags),
            "admin_state": inst.admin_state,
            "vcpus": int(be.get("vcpus") or 1),
            "memory": instance_memory(cfg, inst),
            "spindle_use": int(be.get("spindle_use") or 1),
            "os": inst.os,
            "nodes": [node_name(cfg, u) for u in instance_nodes(cfg, inst)],
            "nics": nics,
            "disks": disk_list,
            "disk_template": template,
            "disks_active": bool(inst.disks_active),
            "hypervisor": inst.hypervisor,
            "disk_space_total": disk_space(template, (d["size"] for d in disk_list)),
        }
    return out


def build_input(cfg: ConfigData, request: Request, figures: Mapping[str, NodeFigures]) -> dict[str, Any]:
    """Ganeti's iallocator input for C{request}.

    @param figures: C{{node uuid: NodeFigures}} of the nodes asked; every
        other node that is neither offline nor non-vm-capable is shown
        offline (its resources are unknown)
    """
    cluster = cfg.cluster
    cluster_policy = dict(cluster.ipolicy or {})
    up_memory: dict[str, int] = {}
    all_memory: dict[str, int] = {}
    for inst in cfg.instances.values():
        memory = instance_memory(cfg, inst)
        primary = inst.primary_node or ""
        all_memory[primary] = all_memory.get(primary, 0) + memory
        if inst.admin_state == "up" and not inst.forthcoming:
            up_memory[primary] = up_memory.get(primary, 0) + memory
    nodes: dict[str, Any] = {}
    for uuid, node in cfg.nodes.items():
        group = cfg.nodegroups.get(node.group or "")
        state = figures.get(uuid)
        vm_capable = node.vm_capable is not False
        entry: dict[str, Any] = {
            "tags": list(node.tags),
            "primary_ip": node.primary_ip,
            "secondary_ip": node.secondary_ip,
            "offline": bool(node.offline) or (vm_capable and state is None),
            "drained": bool(node.drained),
            "master_candidate": bool(node.master_candidate),
            "group": node.group,
            "master_capable": node.master_capable is not False,
            "vm_capable": vm_capable,
            "ndparams": dict(cluster.ndparams or {}, **(group.ndparams if group else {}), **(node.ndparams or {})),
        }
        if state is not None and vm_capable and not node.offline:
            total_disk = state.total_disk if state.total_disk is not None else (state.free_disk or 0)
            entry.update({
                "total_memory": state.total_memory if state.total_memory is not None else state.free_memory,
                "reserved_memory": state.reserved_memory,
                "free_memory": state.free_memory,
                "total_disk": total_disk,
                "free_disk": state.free_disk if state.free_disk is not None else total_disk,
                "total_spindles": state.total_spindles,
                "free_spindles": state.free_spindles,
                "total_cpus": state.total_cpus or 1,
                "reserved_cpus": state.reserved_cpus,
                "i_pri_memory": all_memory.get(uuid, 0),
                "i_pri_up_memory": up_memory.get(uuid, 0),
            })
        nodes[node.name or uuid] = entry
    groups = {
        uuid: {"name": g.name, "alloc_policy": g.alloc_policy or "preferred", "networks": sorted(g.networks or {}),
               "ipolicy": filled_ipolicy(cluster_policy, g.ipolicy), "tags": list(g.tags)}
        for uuid, g in cfg.nodegroups.items()
    }
    return {
        "version": IALLOCATOR_VERSION,
        "cluster_name": cluster.cluster_name,
        "cluster_tags": list(cluster.tags),
        "enabled_hypervisors": list(cluster.enabled_hypervisors),
        "ipolicy": cluster_policy,
        "nodegroups": groups,
        "nodes": nodes,
        "instances": _instance_data(cfg),
        "request": request.to_dict(cfg),
    }


# --- the answer ------------------------------------------------------------------------------


def parse_answer(name: str, output: bytes | str) -> Any:
    """The C{result} of an allocator's answer (still to be checked by mode).

    @raise errors.OpPrereqError: the answer is malformed
        (C{ECODE_FAULT}) or says it failed (C{ECODE_NORES})
    """
    try:
        answer = serializer.loads(output)
    except ValueError as e:
        raise errors.OpPrereqError("Allocator '%s' answered invalid JSON: %s" % (name, e), errors.ECODE_FAULT) from None
    if not isinstance(answer, dict) or "success" not in answer:
        raise errors.OpPrereqError("Allocator '%s' answered without 'success'" % name, errors.ECODE_FAULT)
    if not answer["success"]:
        raise errors.OpPrereqError(
            "Can't compute nodes using iallocator '%s': %s" % (name, answer.get("info") or "no reason given"),
            errors.ECODE_NORES,
        )
    return answer.get("result", answer.get("nodes"))


def node_names(name: str, result: Any, required: int | None = None) -> list[str]:
    """The node names of an C{allocate} or C{relocate} result.

    @param required: how many there must be (C{None}: at least one)
    @raise errors.OpPrereqError: C{ECODE_FAULT}, it is not such a list
    """
    if not isinstance(result, list) or not result or not all(isinstance(n, str) and n for n in result):
        raise errors.OpPrereqError("Allocator '%s' answered a result that is not a list of node names: %.100r"
                                   % (name, result), errors.ECODE_FAULT)
    if required is not None and len(result) != required:
        raise errors.OpPrereqError("Allocator '%s' answered %d node(s) (%s), %d are needed"
                                   % (name, len(result), ", ".join(result), required), errors.ECODE_FAULT)
    return result


@attrs.frozen
class Evacuation:
    """A C{node-evacuate} or C{change-group} result.

    @ivar moved: C{[(instance name, group, [node names])]}
    @ivar failed: C{[(instance name, why)]}
    """

    moved: list[tuple[str, str, list[str]]]
    failed: list[tuple[str, str]]


def evacuation(name: str, result: Any) -> Evacuation:
    """Read C{[moved, failed, jobs]}.

    @raise errors.OpPrereqError: C{ECODE_FAULT}, it is malformed
    """
    def bad(why: str) -> errors.OpPrereqError:
        return errors.OpPrereqError("Allocator '%s' answered an invalid evacuation result (%s): %.200r"
                                    % (name, why, result), errors.ECODE_FAULT)

    if not isinstance(result, list) or len(result) != 3 or not all(isinstance(p, list) for p in result):
        raise bad("not [moved, failed, jobs]")
    moved: list[tuple[str, str, list[str]]] = []
    for entry in result[0]:
        if (not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[0], str)
                or not isinstance(entry[1], str) or not isinstance(entry[2], list)
                or not all(isinstance(n, str) for n in entry[2])):
            raise bad("a moved entry is not [instance, group, [nodes]]")
        moved.append((entry[0], entry[1], list(entry[2])))
    failed: list[tuple[str, str]] = []
    for entry in result[1]:
        if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str):
            raise bad("a failed entry is not [instance, reason]")
        failed.append((entry[0], str(entry[1] or "")))
    return Evacuation(moved, failed)


def evacuation_targets(name: str, result: Evacuation, instances: Mapping[str, str],
                       nodes: Mapping[str, str]) -> dict[str, str]:
    """C{{instance uuid: new primary node uuid}} from an evacuation result.

    @param instances: C{{name: uuid}} of the instances asked about
    @param nodes: C{{name: uuid}} of the nodes they may go to
    @raise errors.OpPrereqError: some failed to move (C{ECODE_NORES}, as
        Ganeti: "Unable to evacuate instances ..."), or the answer moves an
        instance not asked about, to an unusable node, or leaves one out
        (C{ECODE_FAULT})
    """
    if result.failed:
        raise errors.OpPrereqError("Unable to evacuate instances %s" % ", ".join(
            "%s (%s)" % (inst, why) for inst, why in result.failed), errors.ECODE_NORES)
    placed: dict[str, str] = {}
    for inst_name, _group, targets in result.moved:
        if inst_name not in instances or not targets or targets[0] not in nodes:
            raise errors.OpPrereqError("Allocator '%s' answered an unusable move: %s to %s"
                                       % (name, inst_name, ", ".join(targets) or "nowhere"), errors.ECODE_FAULT)
        placed[instances[inst_name]] = nodes[targets[0]]
    missing = sorted(n for n, uuid in instances.items() if uuid not in placed)
    if missing:
        raise errors.OpPrereqError("Allocator '%s' did not place %s" % (name, ", ".join(missing)), errors.ECODE_FAULT)
    return placed
