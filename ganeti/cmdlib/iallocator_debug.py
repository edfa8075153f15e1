"""OP_TEST_ALLOCATOR (C{gnt-debug iallocator}): an allocator's input or output.

Direction C{in} answers the text an allocator would get for the request
(L{ganeti.cmdlib.iallocator.build_input}, with the nodes' live figures);
direction C{out} runs the allocator on it and answers what it printed.  The
built-in allocator (L{ganeti.cmdlib.allocator.BUILTIN}) answers C{allocate}
requests in the protocol's form: C{{"success": ..., "info": ...,
"result": [node]}}; an external one (C{hail} too) must be installed.

Modes as Ganeti's LUTestAllocator: C{allocate} and C{multi-allocate} (C{count}
instances named C{name0}, C{name1}, ...) of a new instance, C{relocate} of a
mirrored (sharedfile, diskless) instance, C{node-evacuate} and
C{change-group} of C{instances}; C{allocate-secondary} is refused.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import attrs

from ganeti import errors, serializer
from ganeti.cmdlib import allocator, iallocator
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import Feedback, LogicalUnit, register
from ganeti.objects import ConfigData, Instance
from ganeti.opcodes.typed import OpTestAllocator

#: disk templates whose instances Ganeti can relocate (C{DTS_MIRRORED} here)
RELOCATABLE = frozenset(["sharedfile", "diskless"])
DISK_MODES = ("rw", "ro")


def _check_disks(disks: Any) -> list[dict[str, Any]]:
    """C{disks} as Ganeti wants them for a new instance: C{{size: int, mode: rw|ro}} each."""
    for row in disks or []:
        if (not isinstance(row, dict) or not isinstance(row.get("size"), int) or isinstance(row.get("size"), bool)
                or row.get("mode") not in DISK_MODES):
            raise errors.OpPrereqError("Invalid contents of the 'disks' parameter", errors.ECODE_INVAL)
    return [dict(row) for row in disks or []]


def alloc_request(op: OpTestAllocator, name: str, hypervisor: str) -> iallocator.AllocateRequest:
    """The C{allocate} request of one new instance."""
    return iallocator.AllocateRequest(
        name=name,
        memory=op.memory or 0,
        vcpus=op.vcpus or 0,
        disk_template=op.disk_template or "diskless",
        disks=_check_disks(op.disks),
        nics=[dict(n) for n in op.nics or []],
        hypervisor=hypervisor,
        os=op.os or "",
        tags=list(op.tags or []),
        spindle_use=op.spindle_use,
        group_name=op.group_name,
    )


@attrs.frozen
class MultiAllocateRequest:
    """Place several new instances (C{multi-allocate}): their C{allocate}
    requests, each without its C{type}."""

    instances: list[iallocator.AllocateRequest]

    mode = "multi-allocate"

    def to_dict(self, cfg: ConfigData | None = None) -> dict[str, Any]:
        requests = []
        for request in self.instances:
            one = request.to_dict(cfg)
            one.pop("type", None)
            requests.append(one)
        return {"type": self.mode, "instances": requests}

    def extra_args(self) -> list[str]:
        return []


def build_request(cfg: ConfigData, op: OpTestAllocator) -> Any:
    """The iallocator request (L{ganeti.cmdlib.iallocator}) for C{op}'s mode (pure).

    @raise errors.OpPrereqError: the opcode does not make a valid request
    """
    mode = op.mode
    hypervisor = op.hypervisor or (cfg.cluster.enabled_hypervisors or ["fake"])[0]
    if mode in ("allocate", "multi-allocate"):
        name = op.name
        if cfg.find_instance(name) is not None:
            raise errors.OpPrereqError("Instance '%s' already in the cluster" % name, errors.ECODE_EXISTS)
        if mode == "allocate":
            return alloc_request(op, name, hypervisor)
        return MultiAllocateRequest([alloc_request(op, "%s%d" % (name, index), hypervisor)
                                     for index in range(op.count)])
    if mode == "relocate":
        inst = _instance(cfg, op.name)
        if inst.disk_template not in RELOCATABLE:
            raise errors.OpPrereqError("Can't relocate non-mirrored instances", errors.ECODE_INVAL)
        return iallocator.RelocateRequest(
            name=inst.name or "", relocate_from=[iu.node_name(cfg, u) for u in iu.secondary_nodes(cfg, inst)])
    if mode in ("node-evacuate", "change-group"):
        if not op.instances:
            raise errors.OpPrereqError("Missing instances", errors.ECODE_INVAL)
        names = [_instance(cfg, name).name or "" for name in op.instances]
        if mode == "node-evacuate":
            return iallocator.NodeEvacRequest(instances=names, evac_mode=op.evac_mode or "all")
        return iallocator.ChangeGroupRequest(instances=names, target_groups=list(op.target_groups or []))
    raise errors.OpPrereqError("Invalid test allocator mode '%s'" % mode, errors.ECODE_INVAL)


def _instance(cfg: ConfigData, name: str) -> Instance:
    return iu.expand_instance(cfg, name)


def builtin_output(request: Any, states: list[allocator.NodeState]) -> str:
    """What the built-in allocator answers, in the protocol's form: it places
    C{allocate} requests only."""
    if not isinstance(request, iallocator.AllocateRequest):
        answer: dict[str, Any] = {"success": False, "info": "the built-in allocator answers allocate requests only",
                                  "result": []}
    else:
        placement = allocator.place(request, states)
        if placement.node is None:
            answer = {"success": False, "info": "no node fits: %s" % placement.explain(), "result": []}
        else:
            answer = {"success": True, "info": "allocation successful", "result": [placement.node.name]}
    return serializer.dumps(answer).decode("utf-8")


@register
class LUTestAllocator(LogicalUnit[OpTestAllocator]):
    """See the module docstring.  Reads only: the BGL shared, no other lock."""

    OP_ID = "OP_TEST_ALLOCATOR"
    REQ_BGL = False

    def check_prereq(self) -> None:
        self.request = build_request(self.cfg, self.op)
        if self.op.direction == "out" and not self.op.iallocator:
            raise errors.OpPrereqError("Missing allocator name", errors.ECODE_INVAL)

    async def _states(self, hypervisor: str, template: str) -> list[allocator.NodeState]:
        cfg = self.cfg
        uuids = sorted((u for u, n in cfg.nodes.items() if not n.offline), key=lambda u: iu.node_name(cfg, u))
        return await allocator.node_states(self, uuids, hypervisor, template)

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        hypervisor = self.op.hypervisor or (cfg.cluster.enabled_hypervisors or ["fake"])[0]
        template = self.op.disk_template or "diskless"
        states = await self._states(hypervisor, template)
        text = serializer.dumps(allocator.build_input(cfg, self.request, states)).decode("utf-8")
        if self.op.direction == "in":
            return text
        name, executable = allocator.resolve(self.op.iallocator, None, allocator.root_of(self))
        if executable is None:
            return builtin_output(self.request, states)
        args = allocator.option_args(cfg.cluster.default_iallocator_params, self.request.extra_args())
        return await run_allocator(name, executable, text, args, self.ctx.clock)


async def run_allocator(name: str, executable: str, text: str, args: list[str], reactor: Any) -> str:
    """Run allocator C{executable} on input C{text} with options C{args}; what
    it printed (any exit status but 0 is an L{errors.OpExecError})."""
    from twisted.internet import utils

    handle, path = tempfile.mkstemp(prefix="ganeti-iallocator-", suffix=".json")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        out, err, code = await utils.getProcessOutputAndValue(executable, [path, *args], env=dict(os.environ),
                                                              reactor=reactor)
    finally:
        os.unlink(path)
    if code != 0:
        raise errors.OpExecError("Allocator '%s' failed (exit code %s): %s"
                                 % (name, code, (err or out).decode("utf-8", "replace").strip()[-500:]))
    answer: str = out.decode("utf-8", "replace")
    return answer
