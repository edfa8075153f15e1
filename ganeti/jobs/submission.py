"""What a submitted job must be before LuxiD takes it (pure: no Twisted, no I/O).

L{check_job} checks one job of a C{SubmitJob}/C{SubmitManyJobs} request:
every opcode against its declaration, and its relative dependencies
resolvable as the job id it is to get.
"""

from __future__ import annotations

from typing import Any

from ganeti import errors, opcodes
from ganeti.jobs import scheduler


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
