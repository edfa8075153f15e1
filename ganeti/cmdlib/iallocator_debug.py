"""OP_TEST_ALLOCATOR (C{gnt-debug iallocator}): an allocator's input or output.

Direction C{in} answers the text an allocator would get for the request
(L{ganeti.cmdlib.allocator.build_input}, with the nodes' live figures);
direction C{out} runs the allocator on it and answers what it printed.  The
built-in allocator (L{ganeti.cmdlib.allocator.BUILTIN}, also for C{hail}
when none is installed) answers C{allocate} requests in the protocol's
form: C{{"success": ..., "info": ..., "result": [node]}}.

Modes as Ganeti's LUTestAllocator: C{allocate} and C{multi-allocate} (C{count}
instances named C{name0}, C{name1}, ...) of a new instance, C{relocate} of a
mirrored (sharedfile, diskless) instance, C{node-evacuate} and
C{change-group} of C{instances}; C{allocate-secondary} is refused.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any


from ganeti import errors, serializer
from ganeti.cmdlib import allocator
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import Feedback, LogicalUnit, register
from ganeti.objects import ConfigData, Instance

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


def alloc_request(op: dict[str, Any], name: str, hypervisor: str) -> dict[str, Any]:
    """The C{allocate} request of one new instance (without its C{type})."""
    request = allocator.Request(
        name=name,
        memory=op.get("memory") or 0,
        vcpus=op.get("vcpus") or 0,
        disk_template=op.get("disk_template") or "diskless",
        disks=_check_disks(op.get("disks")),
        nics=[dict(n) for n in op.get("nics") or []],
        hypervisor=hypervisor,
        os=op.get("os") or "",
        tags=list(op.get("tags") or []),
        spindle_use=op.get("spindle_use", 1),
    ).to_dict()
    request.pop("type", None)
    request.setdefault("group_name", op.get("group_name"))
    return request


def build_request(cfg: ConfigData, op: dict[str, Any]) -> tuple[dict[str, Any], allocator.Request | None]:
    """The request for C{op}'s mode (with its C{type}) and, for C{allocate},
    the L{allocator.Request} the built-in allocator can place (pure).

    @raise errors.OpPrereqError: the opcode does not make a valid request
    """
    mode = op["mode"]
    hypervisor = op.get("hypervisor") or (cfg.cluster.enabled_hypervisors or ["fake"])[0]
    if mode in ("allocate", "multi-allocate"):
        name = op["name"]
        known = {i.name for i in cfg.instances.values()}
        if name in known:
            raise errors.OpPrereqError("Instance '%s' already in the cluster" % name, errors.ECODE_EXISTS)
        if mode == "allocate":
            request = dict(alloc_request(op, name, hypervisor), type=mode)
            placeable = allocator.Request(
                name=name, memory=request["memory"], vcpus=request["vcpus"],
                disk_template=request["disk_template"], disks=_check_disks(op.get("disks")),
                hypervisor=hypervisor,
            )
            return request, placeable
        instances = [alloc_request(op, "%s%d" % (name, index), hypervisor) for index in range(op["count"])]
        return {"type": mode, "instances": instances}, None
    if mode == "relocate":
        inst = _instance(cfg, op["name"])
        if inst.disk_template not in RELOCATABLE:
            raise errors.OpPrereqError("Can't relocate non-mirrored instances", errors.ECODE_INVAL)
        disks = [cfg.disks[u] for u in inst.disks if u in cfg.disks]
        space = 0 if inst.disk_template == "diskless" else sum(d.size or 0 for d in disks)
        return {"type": mode, "name": inst.name, "disk_space_total": space, "required_nodes": 1,
                "relocate_from": [iu.node_name(cfg, u) for u in iu.secondary_nodes(cfg, inst)]}, None
    if mode in ("node-evacuate", "change-group"):
        if not op.get("instances"):
            raise errors.OpPrereqError("Missing instances", errors.ECODE_INVAL)
        names = [_instance(cfg, name).name for name in op["instances"]]
        if mode == "node-evacuate":
            return {"type": mode, "instances": names, "evac_mode": op.get("evac_mode")}, None
        return {"type": mode, "instances": names, "target_groups": list(op.get("target_groups") or [])}, None
    raise errors.OpPrereqError("Invalid test allocator mode '%s'" % mode, errors.ECODE_INVAL)


def _instance(cfg: ConfigData, name: str) -> Instance:
    return iu.expand_instance(cfg, name)


def builtin_output(request: allocator.Request | None, states: list[allocator.NodeState]) -> str:
    """What the built-in allocator answers, in the protocol's form."""
    if request is None:
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
class LUTestAllocator(LogicalUnit):
    """See the module docstring.  Reads only: the BGL shared, no other lock."""

    OP_ID = "OP_TEST_ALLOCATOR"
    REQ_BGL = False

    def check_prereq(self) -> None:
        self.request, self.placeable = build_request(self.cfg, self.op)
        if self.op["direction"] == "out" and not self.op.get("iallocator"):
            raise errors.OpPrereqError("Missing allocator name", errors.ECODE_INVAL)

    async def _states(self, hypervisor: str, template: str) -> list[allocator.NodeState]:
        cfg = self.cfg
        uuids = [u for u, n in cfg.nodes.items() if not n.offline]
        resources = await iu.node_resources(self, uuids, hypervisor, [template])
        counts = iu.primary_counts(cfg)
        states = []
        for uuid in sorted(cfg.nodes, key=lambda u: iu.node_name(cfg, u)):
            res = resources.get(uuid)
            name = iu.node_name(cfg, uuid)
            if not isinstance(res, iu.NodeResources):
                states.append(allocator.NodeState(uuid, name, error=str(res or "offline"),
                                                  instances=counts.get(uuid, 0)))
                continue
            states.append(allocator.NodeState(
                uuid, name, free_memory=res.memory_free, total_memory=res.memory_total,
                free_disk=res.storage_free.get(template), total_cpus=res.cpu_total, instances=counts.get(uuid, 0)))
        return states

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        hypervisor = self.op.get("hypervisor") or (cfg.cluster.enabled_hypervisors or ["fake"])[0]
        template = self.op.get("disk_template") or "diskless"
        states = await self._states(hypervisor, template)
        data = allocator.build_input(cfg, allocator.Request(name="", memory=0, vcpus=0, disk_template=template),
                                     states)
        data["request"] = self.request
        text = serializer.dumps(data).decode("utf-8")
        if self.op["direction"] == "in":
            return text
        root = self.ctx.paths.root if self.ctx.paths is not None else "/"
        name, executable = allocator.resolve(self.op["iallocator"], None, root)
        if executable is None:
            return builtin_output(self.placeable, states)
        return await run_allocator(name, executable, text, self.ctx.clock)


async def run_allocator(name: str, executable: str, text: str, reactor: Any) -> str:
    """Run allocator C{executable} on input C{text}; what it printed (any exit
    status but 0 is an L{errors.OpExecError})."""
    from twisted.internet import utils

    handle, path = tempfile.mkstemp(prefix="ganeti-iallocator-", suffix=".json")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        out, err, code = await utils.getProcessOutputAndValue(executable, [path], env=dict(os.environ),
                                                              reactor=reactor)
    finally:
        os.unlink(path)
    if code != 0:
        raise errors.OpExecError("Allocator '%s' failed (exit code %s): %s"
                                 % (name, code, (err or out).decode("utf-8", "replace").strip()[-500:]))
    return out.decode("utf-8", "replace")
