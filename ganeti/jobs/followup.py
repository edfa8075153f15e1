"""Follow-up jobs: an opcode whose result is more jobs (Ganeti's C{ResultWithJobs}).

An LU that hands work on to other jobs (node evacuation, node migration)
returns a L{ResultWithJobs} instead of a plain value.  The processor then
submits those jobs to LuxiD (C{SubmitManyJobs} over LUXI, through the
C{submit} callable the job process gives it) and the opcode's result
becomes C{{"jobs": [[true, job_id] | [false, error], ...]}}, plus whatever
else the LU put in C{other}.

Each submitted opcode inherits from the one that submitted it, unless it
sets them itself: its submission priority, its debug level, and its reason
trail (the parent's entries come first, less its submission id: a
follow-up job is a submission of its own); its C{comment} says which job
submitted it.

L{ResultWithJobs} itself is defined in L{ganeti.jobs.lifecycle}, so that
logical units return it without importing this module.
"""

from __future__ import annotations

import copy
from typing import Any, Awaitable, Callable

from ganeti import errors
from ganeti.jobs.lifecycle import ResultWithJobs
from ganeti.luxi.submitid import SUBMISSION_SOURCE
from ganeti.reactors import ITimeUNIXReactor

#: the result key listing the submitted jobs
JOB_IDS_KEY = "jobs"

#: C{submit(jobs) -> [[True, id] | [False, why], ...]}
Submitter = Callable[[list[list[dict[str, Any]]]], Awaitable[list[Any]]]

__all__ = ["JOB_IDS_KEY", "ResultWithJobs", "Submitter", "luxi_submitter", "prepare", "submit"]


def prepare(parent: dict[str, Any], jobs: list[list[dict[str, Any]]], job_id: int | None) -> list[list[dict[str, Any]]]:
    """The follow-up C{jobs} of opcode C{parent}, ready for C{SubmitManyJobs}."""
    origin = str(parent.get("OP_ID", "?"))
    comment = "Submitted by %s" % origin if job_id is None else "Submitted by job %d (%s)" % (job_id, origin)
    # a follow-up job is a submission of its own: never the parent's submission id (ganeti.luxi.submitid)
    inherited_reason = [entry for entry in parent.get("reason") or []
                        if not (isinstance(entry, (list, tuple)) and entry and entry[0] == SUBMISSION_SOURCE)]
    out = []
    for ops in jobs:
        prepared = []
        for op in ops:
            op = copy.deepcopy(op)
            if op.get("priority") is None and "priority" in parent:
                op["priority"] = parent["priority"]
            if op.get("debug_level") is None and parent.get("debug_level") is not None:
                op["debug_level"] = parent["debug_level"]
            if not op.get("comment"):
                op["comment"] = comment
            op["reason"] = copy.deepcopy(inherited_reason) + list(op.get("reason") or [])
            prepared.append(op)
        out.append(prepared)
    return out


async def submit(
    submitter: Submitter | None, parent: dict[str, Any], result: ResultWithJobs, job_id: int | None
) -> dict[str, Any]:
    """Submit C{result.jobs}; the opcode result with their ids under C{"jobs"}.

    @raise errors.OpExecError: there is no way to submit jobs, or LuxiD
        refused the whole submission.
    """
    answer: list[Any] = []
    jobs = prepare(parent, result.jobs, job_id)
    if jobs:
        if submitter is None:
            raise errors.OpExecError("This job cannot submit its %d follow-up job(s): no job queue" % len(jobs))
        try:
            answer = list(await submitter(jobs))
        except errors.GenericError as e:
            raise errors.OpExecError("Could not submit the follow-up jobs: %s" % (e.args[0] if e.args else e)) from e
    out = dict(result.other)
    out[JOB_IDS_KEY] = [[bool(ok), value] for ok, value in answer]
    return out


def luxi_submitter(reactor: ITimeUNIXReactor, socket_path: str) -> Submitter:
    """A submitter that sends the jobs to the LuxiD at C{socket_path}."""

    async def submit_jobs(jobs: list[list[dict[str, Any]]]) -> list[Any]:
        from ganeti.luxi import methods
        from ganeti.luxi.client import AsyncLuxiClient

        client = await AsyncLuxiClient.connect(reactor, socket_path)
        try:
            return await client.run(methods.SubmitManyJobs.call(jobs))
        finally:
            await client.close()

    return submit_jobs
