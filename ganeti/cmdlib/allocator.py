"""Placing a new instance on a node: the built-in allocator and external ones.

The built-in allocator (L{BUILTIN}) is pure (L{place}): among the candidate
nodes that reported their free memory (C{node_info}'s C{memory_free}) and
free disk, keep those where the instance fits, and take the one with the
most free memory left after placing it; ties go to the node with fewer
instances, then to the name.

An external allocator speaks Ganeti's iallocator protocol: it is an
executable named by the opcode's C{iallocator} (or the cluster's
C{default_iallocator}), found in C{<root>/usr/local/lib/ganeti/iallocators},
C{<root>/usr/lib/ganeti/iallocators} or on C{$PATH}; it gets the path of a
file holding the input (L{build_input}: the cluster, its node groups, nodes
and instances, and a C{request} of type C{allocate}) and prints
C{{"success": bool, "info": text, "result": [node name, ...]}}.

Which one (L{resolve}): the built-in when neither the opcode nor the
cluster names one, when the name is L{BUILTIN}, or when it is C{hail} and
no C{hail} is installed (htools' allocator, the usual default of clients).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Iterable, Sequence

import attrs

from ganeti import errors, serializer
from ganeti.cmdlib.instance_utils import instance_memory, instance_nodes, node_name
from ganeti.objects import ConfigData, nice_sort_key
from ganeti.rpc import instances as rpc_inst

BUILTIN = "builtin"
HAIL = "hail"
#: where external allocators live, relative to the root (then $PATH)
SEARCH_DIRS = ("usr/local/lib/ganeti/iallocators", "usr/lib/ganeti/iallocators")
#: the version of the iallocator input format
IALLOCATOR_VERSION = 2
#: seconds an external allocator may run
ALLOCATOR_TIMEOUT = 300.0

#: the one member of the node-allocation lock level (held while placing)
NAL_MEMBER = "NAL"


@attrs.frozen
class Request:
    """What to place (Ganeti's iallocator C{allocate} request)."""

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
    required_nodes: int = 1

    @property
    def disk_space(self) -> int:
        """MiB of node storage the disks take (none for diskless)."""
        if self.disk_template == "diskless":
            return 0
        return sum(int(d.get("size") or 0) for d in self.disks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "allocate",
            "name": self.name,
            "memory": self.memory,
            "spindle_use": self.spindle_use,
            "vcpus": self.vcpus,
            "disks": [{"size": int(d.get("size") or 0), "mode": d.get("mode", "rw"),
                       "spindles": d.get("spindles")} for d in self.disks],
            "disk_template": self.disk_template,
            "disk_space_total": self.disk_space,
            "os": self.os,
            "tags": list(self.tags),
            "nics": list(self.nics),
            "hypervisor": self.hypervisor,
            "required_nodes": self.required_nodes,
        }


@attrs.frozen
class NodeState:
    """One candidate node as the allocator sees it (MiB).

    @ivar free_disk: free storage for the request's template (C{None}: not
        reported, assumed enough)
    @ivar error: why its figures are missing (then it is not used)
    """

    uuid: str
    name: str
    free_memory: int | None = None
    total_memory: int | None = None
    free_disk: int | None = None
    total_disk: int | None = None
    total_cpus: int | None = None
    instances: int = 0
    error: str | None = None


@attrs.frozen
class Placement:
    """The allocator's answer: the chosen node (or none) and why the others were not."""

    node: NodeState | None
    rejected: dict[str, str] = attrs.Factory(dict)

    def explain(self) -> str:
        if not self.rejected:
            return "no candidate nodes"
        return "; ".join("%s: %s" % (name, why) for name, why in sorted(self.rejected.items()))


def place(request: Request, nodes: Sequence[NodeState]) -> Placement:
    """The built-in allocator: where C{request} fits best (pure)."""
    fitting: list[NodeState] = []
    rejected: dict[str, str] = {}
    space = request.disk_space
    for node in nodes:
        if node.error is not None:
            rejected[node.name] = "no data (%s)" % node.error
        elif node.free_memory is None:
            rejected[node.name] = "free memory unknown"
        elif node.free_memory < request.memory:
            rejected[node.name] = "not enough memory (%d MiB free, %d MiB needed)" % (node.free_memory, request.memory)
        elif space and node.free_disk is not None and node.free_disk < space:
            rejected[node.name] = "not enough disk space (%d MiB free, %d MiB needed)" % (node.free_disk, space)
        else:
            fitting.append(node)
    if not fitting:
        return Placement(None, rejected)
    best = min(fitting, key=lambda n: (-(n.free_memory or 0) + request.memory, n.instances, nice_sort_key(n.name)))
    return Placement(best, rejected)


# --- the iallocator protocol (pure) ------------------------------------------------------


def build_input(
    cfg: ConfigData, request: Request, nodes: Sequence[NodeState], usable: Iterable[str] | None = None
) -> dict[str, Any]:
    """Ganeti's iallocator input for C{request}.

    @param nodes: the figures of the nodes asked (by uuid); nodes of the
        config not among them have none
    @param usable: the uuids the instance may go to; every other node is
        shown offline (Ganeti's node white list, for opportunistic locking)
    """
    cluster = cfg.cluster
    states = {n.uuid: n for n in nodes}
    allowed = None if usable is None else set(usable)
    primaries: dict[str, list[Any]] = {}
    for inst in cfg.instances.values():
        primaries.setdefault(inst.primary_node or "", []).append(inst)
    node_data: dict[str, Any] = {}
    for uuid, node in cfg.nodes.items():
        state = states.get(uuid)
        hosted = primaries.get(uuid, [])
        memories = [instance_memory(cfg, i) for i in hosted]
        up_memory = sum(m for i, m in zip(hosted, memories) if i.admin_state == "up")
        entry: dict[str, Any] = {
            "tags": list(node.tags),
            "primary_ip": node.primary_ip,
            "secondary_ip": node.secondary_ip,
            "offline": bool(node.offline) or (allowed is not None and uuid not in allowed),
            "drained": bool(node.drained),
            "master_candidate": bool(node.master_candidate),
            "group": node.group,
            "master_capable": bool(node.master_capable),
            "vm_capable": node.vm_capable is not False,
            "ndparams": dict(cluster.ndparams or {}, **(node.ndparams or {})),
        }
        if state is not None and state.error is None and state.free_memory is not None:
            total_disk = state.total_disk if state.total_disk is not None else state.free_disk or 0
            entry.update({
                "total_memory": state.total_memory if state.total_memory is not None else state.free_memory,
                "reserved_memory": 0,
                "free_memory": state.free_memory,
                "total_disk": total_disk,
                "free_disk": state.free_disk if state.free_disk is not None else total_disk,
                "total_spindles": 0,
                "free_spindles": 0,
                "total_cpus": state.total_cpus or 1,
                "i_pri_memory": sum(memories),
                "i_pri_up_memory": up_memory,
            })
        node_data[node.name or uuid] = entry
    inst_data: dict[str, Any] = {}
    for inst in cfg.instances.values():
        disks = rpc_inst.instance_disks(cfg, inst)
        be = rpc_inst.filled_beparams(cfg, inst)
        inst_data[inst.name or inst.uuid or "?"] = {
            "tags": list(inst.tags),
            "admin_state": inst.admin_state,
            "admin_state_source": inst.admin_state_source,
            "vcpus": int(be.get("vcpus") or 1),
            "memory": instance_memory(cfg, inst),
            "spindle_use": int(be.get("spindle_use") or 1),
            "os": inst.os,
            "nodes": [node_name(cfg, u) for u in instance_nodes(cfg, inst)],
            "nics": [{"mac": n.mac, "ip": n.ip, "mode": (n.nicparams or {}).get("mode"),
                      "link": (n.nicparams or {}).get("link"), "network": n.network} for n in inst.nics],
            "disks": [{"size": d.size, "mode": d.mode, "spindles": d.spindles} for d in disks],
            "disk_template": inst.disk_template,
            "disk_space_total": 0 if inst.disk_template == "diskless" else sum(d.size or 0 for d in disks),
            "hypervisor": inst.hypervisor,
        }
    groups = {
        uuid: {"name": g.name, "alloc_policy": g.alloc_policy or "preferred", "ipolicy": dict(g.ipolicy or {}),
               "networks": sorted(g.networks or {}), "tags": list(g.tags)}
        for uuid, g in cfg.nodegroups.items()
    }
    return {
        "version": IALLOCATOR_VERSION,
        "cluster_name": cluster.cluster_name,
        "cluster_tags": list(cluster.tags),
        "enabled_hypervisors": list(cluster.enabled_hypervisors),
        "ipolicy": dict(cluster.ipolicy or {}),
        "nodegroups": groups,
        "nodes": node_data,
        "instances": inst_data,
        "request": request.to_dict(),
    }


def parse_output(name: str, output: bytes | str) -> list[str]:
    """The node names an allocator chose, from its answer.

    @raise errors.OpPrereqError: the answer is malformed
        (C{ECODE_FAULT}) or says it failed (C{ECODE_NORES})
    """
    try:
        answer = serializer.loads(output)
    except ValueError as e:
        raise errors.OpPrereqError("Allocator '%s' answered invalid JSON: %s" % (name, e), errors.ECODE_FAULT) from None
    if not isinstance(answer, dict) or "success" not in answer:
        raise errors.OpPrereqError("Allocator '%s' answered without 'success'" % name, errors.ECODE_FAULT)
    result = answer.get("result", answer.get("nodes"))
    if not answer["success"]:
        raise errors.OpPrereqError(
            "Can't compute nodes using iallocator '%s': %s" % (name, answer.get("info") or "no reason given"),
            errors.ECODE_NORES,
        )
    if not isinstance(result, list) or not result or not all(isinstance(n, str) for n in result):
        raise errors.OpPrereqError("Allocator '%s' answered a result that is not a list of node names: %.100r"
                                   % (name, result), errors.ECODE_FAULT)
    return result


def find_allocator(name: str, root: str = "/", path: str | None = None) -> str | None:
    """The executable of allocator C{name}, or C{None}."""
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    for directory in SEARCH_DIRS:
        candidate = os.path.join(root or "/", directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name, path=path)


def resolve(op_name: str | None, default: str | None, root: str = "/") -> tuple[str, str | None]:
    """Which allocator to run: C{(name, executable or None for the built-in)}.

    @raise errors.OpPrereqError: a named allocator is not installed
    """
    name = op_name or default or BUILTIN
    if name == BUILTIN:
        return BUILTIN, None
    found = find_allocator(name, root)
    if found is None:
        if name == HAIL:
            return BUILTIN, None
        raise errors.OpPrereqError("Can't find allocator '%s' (searched %s and $PATH)"
                                   % (name, ", ".join(os.path.join(root or "/", d) for d in SEARCH_DIRS)),
                                   errors.ECODE_NOENT)
    return name, found


# --- running an external allocator (I/O) ---------------------------------------------------


async def run_external(name: str, executable: str, data: dict[str, Any], reactor: Any = None) -> list[str]:
    """Run allocator C{executable} on C{data}; the node names it chose."""
    handle, input_path = tempfile.mkstemp(prefix="ganeti-iallocator-", suffix=".json")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(serializer.dumps(data))
        out, err, code = await _spawn(executable, [input_path], reactor)
    finally:
        try:
            os.unlink(input_path)
        except OSError:
            pass
    if code != 0:
        message = (err or out).decode("utf-8", "replace").strip()[-500:]
        raise errors.OpPrereqError("Allocator '%s' failed (exit code %s): %s" % (name, code, message),
                                   errors.ECODE_FAULT)
    return parse_output(name, out)


async def _spawn(executable: str, args: list[str], reactor: Any) -> tuple[bytes, bytes, int]:
    from twisted.internet.interfaces import IReactorProcess

    if reactor is not None and IReactorProcess.providedBy(reactor):
        from twisted.internet import utils

        out, err, code = await utils.getProcessOutputAndValue(executable, args, env=dict(os.environ), reactor=reactor)
        return out, err, code
    import subprocess

    done = subprocess.run([executable] + args, capture_output=True, timeout=ALLOCATOR_TIMEOUT, check=False)
    return done.stdout, done.stderr, done.returncode
