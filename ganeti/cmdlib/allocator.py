"""Placing a new instance on a node: the built-in allocator and external ones.

The built-in allocator (L{BUILTIN}) is pure (L{place}): among the candidate
nodes that reported their free memory (C{node_info}'s C{memory_free}) and
free disk, keep those where the instance fits, and take the one with the
most free memory left after placing it; ties go to the node with fewer
instances, then to the name.

An external allocator speaks Ganeti's iallocator protocol
(L{ganeti.cmdlib.iallocator}): it is an executable named by the opcode's
C{iallocator} (or the cluster's C{default_iallocator}), a plain name found,
as Ganeti looks for it, in C{<root>/usr/local/lib/ganeti/iallocators} or
C{<root>/usr/lib/ganeti/iallocators} (nowhere else: not on C{$PATH}).  It
gets the path of a file holding the input, then the cluster's
C{default_iallocator_params} and the request's own options as
C{--key=value} (C{--key} for a C{None} value) (L{option_args}), and prints
its answer.

Which one (L{resolve}): the built-in when neither the opcode nor the
cluster names one or when the name is L{BUILTIN}; otherwise the named one,
which must be installed: C{hail} (Ganeti's htools) too, so that asking for
it never silently gets the built-in allocator.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import attrs

from ganeti import errors, serializer
from ganeti.cmdlib import iallocator
from ganeti.cmdlib import instance_utils as iu
from ganeti.objects import ConfigData, nice_sort_key

if TYPE_CHECKING:
    from ganeti.cmdlib.base import LogicalUnit
    from ganeti.opcodes.typed import OpCode

BUILTIN = "builtin"
HAIL = "hail"
#: where external allocators live, relative to the root (Ganeti's search path)
SEARCH_DIRS = ("usr/local/lib/ganeti/iallocators", "usr/lib/ganeti/iallocators")
#: what an allocator's name may be (Ganeti's mask for external scripts)
_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
#: seconds an external allocator may run
ALLOCATOR_TIMEOUT = 300.0

#: the one member of the node-allocation lock level (held while placing)
NAL_MEMBER = "NAL"


#: what to place (Ganeti's iallocator C{allocate} request)
Request = iallocator.AllocateRequest


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
    reserved_memory: int = 0
    reserved_cpus: int = 0


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


def figures(nodes: Sequence[NodeState]) -> dict[str, iallocator.NodeFigures]:
    """The iallocator figures of the nodes whose free memory is known, by uuid."""
    return {
        n.uuid: iallocator.NodeFigures(free_memory=n.free_memory, total_memory=n.total_memory, free_disk=n.free_disk,
                                       total_disk=n.total_disk, total_cpus=n.total_cpus,
                                       reserved_memory=n.reserved_memory, reserved_cpus=n.reserved_cpus)
        for n in nodes if n.error is None and n.free_memory is not None
    }


def build_input(cfg: ConfigData, request: iallocator.Request, nodes: Sequence[NodeState]) -> dict[str, Any]:
    """Ganeti's iallocator input for C{request}, with the figures of C{nodes}
    (every other node shown offline)."""
    return iallocator.build_input(cfg, request, figures(nodes))


def parse_output(name: str, output: bytes | str) -> list[str]:
    """The node names an allocator chose for an C{allocate} or C{relocate} request."""
    return iallocator.node_names(name, iallocator.parse_answer(name, output))


def find_allocator(name: str, root: str | None) -> str | None:
    """The executable of allocator C{name} under C{root}'s search path
    (L{SEARCH_DIRS}, as Ganeti: a plain name, no other directory), or C{None}.

    @param root: C{None}: there is no search path (an LU without a node
        root, in tests), nothing is found
    """
    if root is None or not _NAME.match(name):
        return None
    for directory in SEARCH_DIRS:
        candidate = os.path.join(root or "/", directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def resolve(op_name: str | None, default: str | None, root: str | None) -> tuple[str, str | None]:
    """Which allocator to run: C{(name, executable or None for the built-in)}.

    @raise errors.OpPrereqError: a named allocator (C{hail} too) is not
        installed under C{root}
    """
    name = op_name or default or BUILTIN
    if name == BUILTIN:
        return BUILTIN, None
    if not _NAME.match(name):
        raise errors.OpPrereqError("Invalid allocator name '%s': a plain name of letters, digits, '-' and '_' is"
                                   " needed, found in %s" % (name, _search_path(root)), errors.ECODE_INVAL)
    found = find_allocator(name, root)
    if found is None:
        hint = " (Ganeti's htools provide it; '%s' names the built-in allocator)" % BUILTIN if name == HAIL else ""
        raise errors.OpPrereqError("Can't find allocator '%s' (searched %s)%s" % (name, _search_path(root), hint),
                                   errors.ECODE_NOENT)
    return name, found


def option_args(params: Mapping[str, Any] | None, extra: Sequence[str] = ()) -> list[str]:
    """The command line options of an allocator: C{params} (the cluster's
    C{default_iallocator_params}) as Ganeti's node daemon passes them, then
    C{extra} (the request's)."""
    out = ["--%s" % key if value is None else "--%s=%s" % (key, value) for key, value in (params or {}).items()]
    return out + [arg for arg in extra if arg not in out]


def _search_path(root: str | None) -> str:
    if root is None:
        return "no search path"
    return ", ".join(os.path.join(root or "/", d) for d in SEARCH_DIRS)


# --- running an external allocator (I/O) ---------------------------------------------------


def root_of(lu: LogicalUnit[OpCode]) -> str | None:
    """The node root an LU looks for allocators under (C{None}: no node root, in tests)."""
    return lu.ctx.paths.root if lu.ctx.paths is not None else None


async def run_request(cfg: ConfigData, name: str, executable: str, request: iallocator.Request,
                      nodes: Sequence[NodeState], reactor: Any = None) -> Any:
    """Run allocator C{executable} on C{request} with the figures of
    C{nodes} and the cluster's C{default_iallocator_params}; the result."""
    data = build_input(cfg, request, nodes)
    args = option_args(cfg.cluster.default_iallocator_params, request.extra_args())
    return await run_raw(name, executable, data, reactor, args)


async def choose_node(cfg: ConfigData, name: str, executable: str, request: iallocator.Request,
                      nodes: Sequence[NodeState], usable: Mapping[str, str], required: int = 1,
                      reactor: Any = None) -> str:
    """The uuid of the node allocator C{name} chose for an C{allocate} or
    C{relocate} request (the first of the C{required} nodes it must name).

    @param usable: C{{node name: uuid}} of the nodes it may choose
    @raise errors.OpPrereqError: it failed (C{ECODE_NORES}), or answered
        something else or a node not among C{usable} (C{ECODE_FAULT})
    """
    try:
        result = await run_request(cfg, name, executable, request, nodes, reactor)
    except errors.OpPrereqError as exc:
        hint = policy_hint(cfg, getattr(request, "disk_template", None))
        if hint is None or "FailDisk" not in str(exc.args[0] if exc.args else exc):
            raise
        raise errors.OpPrereqError("%s; %s" % (exc.args[0], hint), errors.ECODE_NORES) from None
    chosen = iallocator.node_names(name, result, required)[0]
    if chosen not in usable:
        raise errors.OpPrereqError("Allocator '%s' chose node %s, which is not among the usable ones (%s)"
                                   % (name, chosen, ", ".join(sorted(usable))), errors.ECODE_FAULT)
    return usable[chosen]


def policy_hint(cfg: ConfigData, template: str | None) -> str | None:
    """Why an allocator like hail refuses every node with "FailDisk" when
    C{template} is not among the disk templates the instance policy of the
    node groups allows (Ganeti's init restricts it to the templates enabled
    then), or C{None}."""
    if not template:
        return None
    refusing = []
    for group in sorted(cfg.nodegroups.values(), key=lambda g: g.name or ""):
        policy = iallocator.filled_ipolicy(dict(cfg.cluster.ipolicy or {}), group.ipolicy)
        allowed = policy.get("disk-templates")
        if isinstance(allowed, list) and template not in allowed:
            refusing.append("%s (%s)" % (group.name, ", ".join(allowed) or "none"))
    if not refusing:
        return None
    return ("the instance policy does not allow disk template %s in node group(s) %s: allow it with"
            " gnt-group modify --ipolicy-disk-templates" % (template, "; ".join(refusing)))


async def run_external(name: str, executable: str, data: dict[str, Any], reactor: Any = None,
                       args: Sequence[str] = ()) -> list[str]:
    """Run allocator C{executable} on C{data} (an C{allocate} or C{relocate}
    request); the node names it chose."""
    return iallocator.node_names(name, await run_raw(name, executable, data, reactor, args))


async def run_raw(name: str, executable: str, data: dict[str, Any], reactor: Any = None,
                  args: Sequence[str] = ()) -> Any:
    """Run allocator C{executable} on C{data} (with the options C{args});
    the C{result} of its successful answer."""
    handle, input_path = tempfile.mkstemp(prefix="ganeti-iallocator-", suffix=".json")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(serializer.dumps(data))
        out, err, code = await _spawn(executable, [input_path] + list(args), reactor)
    finally:
        try:
            os.unlink(input_path)
        except OSError:
            pass
    if code != 0:
        message = (err or out).decode("utf-8", "replace").strip()[-500:]
        raise errors.OpPrereqError("Allocator '%s' failed (exit code %s): %s" % (name, code, message),
                                   errors.ECODE_FAULT)
    return iallocator.parse_answer(name, out)


async def _spawn(executable: str, args: list[str], reactor: Any) -> tuple[bytes, bytes, int]:
    """Run the allocator on C{reactor} without blocking it (killed after
    L{ALLOCATOR_TIMEOUT}); see L{ganeti.asyncutil.Network.run}."""
    from ganeti.asyncutil import Network, ProgramTimeout

    try:
        return await Network(reactor).run(executable, args, ALLOCATOR_TIMEOUT)
    except ProgramTimeout:
        raise errors.OpPrereqError("Allocator '%s' did not answer within %ds" % (executable, ALLOCATOR_TIMEOUT),
                                   errors.ECODE_FAULT) from None


async def node_states(lu: LogicalUnit[OpCode], uuids: Sequence[str], hypervisor: str, template: str) -> list[NodeState]:
    """The allocator's view of nodes C{uuids} for a new instance of
    C{hypervisor} with disks of C{template}, from their C{node_info}
    (memory, CPUs, the template's storage); a node that did not answer
    carries its error."""
    cfg = lu.cfg
    resources = await iu.node_resources(lu, list(uuids), hypervisor, [template])
    counts = iu.primary_counts(cfg)
    states = []
    for uuid in uuids:
        res = resources.get(uuid)
        name = iu.node_name(cfg, uuid)
        if not isinstance(res, iu.NodeResources):
            states.append(NodeState(uuid, name, error=str(res), instances=counts.get(uuid, 0)))
            continue
        states.append(NodeState(
            uuid, name, free_memory=res.memory_free, total_memory=res.memory_total,
            free_disk=res.storage_of(template)[0], total_disk=res.storage_of(template)[1],
            total_cpus=res.cpu_total, instances=counts.get(uuid, 0), reserved_memory=res.memory_dom0 or 0,
            reserved_cpus=res.cpu_dom0 or 0))
    return states
