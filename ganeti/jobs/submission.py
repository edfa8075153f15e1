"""What a submitted job must be before LuxiD takes it (pure: no Twisted, no I/O).

L{check_job} checks one job of a C{SubmitJob}/C{SubmitManyJobs} request:
every opcode against its declaration, and its relative dependencies
resolvable as the job id it is to get.

Idempotent submission: a client may name a job with a I{submission id}, an
entry of the first opcode's reason trail whose source is
L{SUBMISSION_SOURCE}::

    {"OP_ID": "OP_TAGS_SET", ..., "reason": [["gnt:submission", "4f2c...:0", 1700000000000000000], ...]}

A reason-trail entry rather than a new LUXI argument or job field: Ganeti
3.0's LuxiD, clients and job files already carry reason trails of any
source, so a job with an id is an ordinary job everywhere, and Ganeti's own
clients (which send none) are served as before.  L{SubmissionIndex} maps
ids to the job ids that carry them; LuxiD rebuilds it from the job files
at its start (after a restart or a failover: the files are replicated to
the candidates), and answers a resubmission with the ids of the first
submission instead of making new jobs (L{plan}).
"""

from __future__ import annotations

from typing import Any, Iterable

from ganeti import errors, opcodes
from ganeti.jobs import scheduler
from ganeti.luxi.submitid import MAX_ID_LENGTH, SUBMISSION_SOURCE, reason_entry, submission_id

__all__ = ["MAX_ID_LENGTH", "SUBMISSION_SOURCE", "SubmissionIndex", "check_job", "plan", "reason_entry",
           "submission_id"]


def check_job(ops: Any, index: int, count: int, job_id: int) -> list[dict[str, Any]]:
    """Check one submitted job: its opcodes (L{opcodes.validate}) and its
    dependencies resolved as job C{job_id}; the opcodes as submitted.

    @raise errors.OpPrereqError: (C{ECODE_INVAL}) naming the job (when the
        submission has several), the opcode and the problem.
    """
    where = "Job %d: " % index if count > 1 else ""
    if not isinstance(ops, list) or not ops:
        raise errors.OpPrereqError("%sa job needs a non-empty list of opcodes" % where, errors.ECODE_INVAL)
    for number, op in enumerate(ops):
        try:
            opcodes.validate(op)
        except errors.OpPrereqError as e:
            raise errors.OpPrereqError("%sopcode %d: %s" % (where, number, e.args[0]), errors.ECODE_INVAL) from None
    try:
        scheduler.resolve_relative_depends(ops, job_id)
    except errors.OpPrereqError as e:
        raise errors.OpPrereqError("%s%s" % (where, e.args[0]), errors.ECODE_INVAL) from None
    return [dict(op) for op in ops]


class SubmissionIndex:
    """Submission id -> job id, for the jobs LuxiD holds (pure)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def rebuild(self, jobs: Iterable[Any]) -> None:
        """Index every job of the queue (L{ganeti.jobs.model.QueuedJob}s, as
        loaded from their files); the lowest job id wins, should two carry
        the same submission id."""
        self._ids = {}
        for job in sorted(jobs, key=lambda j: j.id):
            key = submission_id([op.input for op in job.ops])
            if key is not None:
                self._ids.setdefault(key, job.id)

    def get(self, key: str | None) -> int | None:
        return None if key is None else self._ids.get(key)

    def add(self, key: str | None, job_id: int) -> None:
        if key is not None:
            self._ids.setdefault(key, job_id)

    def forget(self, job_ids: Iterable[int]) -> None:
        """Drop the ids of jobs that are gone (archived, then removed)."""
        gone = set(job_ids)
        self._ids = {k: v for k, v in self._ids.items() if v not in gone}


def plan(index: SubmissionIndex, jobs_ops: list[Any]) -> tuple[list[int | None], dict[int, int]]:
    """Which jobs of a request were submitted before.

    @return: for each job, the id of the job already made for its
        submission id, or C{None} for a job to make; and C{{position:
        earlier position}} for a job naming the same submission id as an
        earlier new job of the same request (one job is made for both).
    """
    known: list[int | None] = []
    same_as: dict[int, int] = {}
    first: dict[str, int] = {}
    for position, ops in enumerate(jobs_ops):
        key = submission_id(ops)
        known.append(index.get(key))
        if known[-1] is None and key is not None:
            if key in first:
                same_as[position] = first[key]
            else:
                first[key] = position
    return known, same_as
