"""OP_INSTANCE_MULTI_ALLOC (C{gnt-instance batch-create}): several instances, one creation job each.

As Ganeti's C{LUInstanceMultiAlloc}: the instances are OP_INSTANCE_CREATE
opcodes (Ganeti's serialisation; C{OP_ID} optional); none may name an
allocator of its own; either all of them name their primary node or none
does; names must be distinct.  Each is checked as an OP_INSTANCE_CREATE
before anything is submitted, so one bad definition submits nothing.  The
result is Ganeti's: C{{"jobs": [[true, id], ...], "allocatable": [names],
"failed": []}}, the jobs followed by the client.

Unlike Ganeti, the nodes of instances without C{pnode} are not chosen for
all of them at once here: each creation job runs the allocator (C{iallocator},
else the cluster's default, else the built-in one) when it starts, so the
jobs may run one after another on a cluster that fits them all, and a job that
finds no room fails alone.  C{opportunistic_locking} is accepted and has no
effect.  With C{dry_run} only the checks run: no job is submitted.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors, opcodes
from ganeti.cmdlib.base import Feedback, LogicalUnit, expand_node, register
from ganeti.jobs.lifecycle import ResultWithJobs
from ganeti.opcodes.typed import OpInstanceCreate, OpInstanceMultiAlloc

CREATE = "OP_INSTANCE_CREATE"
#: what the LU passes on to each creation job from its own opcode
_INHERITED = ("dry_run", "debug_level", "priority")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


@register
class LUInstanceMultiAlloc(LogicalUnit[OpInstanceMultiAlloc]):
    """See the module docstring."""

    OP_ID = "OP_INSTANCE_MULTI_ALLOC"
    REQ_BGL = False

    def check_arguments(self) -> None:
        ops: list[OpInstanceCreate] = []
        for index, inst in enumerate(self.op.instances):
            op = dict(inst)
            kind = op.setdefault("OP_ID", CREATE)
            if kind != CREATE:
                raise _invalid("Instance definition %d is a %s, not an %s" % (index, kind, CREATE))
            if op.get("iallocator") is not None:
                raise _invalid("iallocator are not allowed to be set on instance objects")
            try:
                ops.append(OpInstanceCreate.from_dict(opcodes.validate(op)))
            except errors.OpPrereqError as e:
                raise _invalid("Instance definition %d: %s" % (index, e.args[0])) from None
        if not ops:
            raise _invalid("No instances to allocate")
        with_nodes = [bool(op.pnode) for op in ops]
        if any(with_nodes) and not all(with_nodes):
            raise _invalid("There are instance objects providing pnode/snode while others do not")
        names = [op.instance_name for op in ops]
        dups = sorted({name for name in names if names.count(name) > 1})
        if dups:
            raise _invalid("There are duplicate instance names: %s" % ", ".join(dups))
        self.creates = ops

    def expand_names(self) -> None:
        for op in self.creates:
            if op.pnode:
                expand_node(self.cfg, op.pnode)
        self.needed_locks = {}

    def check_prereq(self) -> None:
        self.partial = {"allocatable": [op.instance_name for op in self.creates], "failed": []}
        self.dry_run_result = dict(self.partial, jobs=[])

    async def exec_(self, feedback: Feedback) -> Any:
        jobs: list[list[dict[str, Any]]] = []
        for op in self.creates:
            job = op.to_dict()
            if self.op.iallocator and not job.get("pnode"):
                job["iallocator"] = self.op.iallocator
            for key in _INHERITED:
                value = getattr(self.op, key, None)
                if value is not None and key not in self.op.instances[len(jobs)]:
                    job[key] = value
            jobs.append([job])
        return ResultWithJobs(jobs, self.partial)
