"""Submission ids: what makes a job's submission idempotent (pure, standard library).

A client names a job with an entry of its first opcode's reason trail whose
source is L{SUBMISSION_SOURCE}; LuxiD answers a resubmission with the same
id with the first job id (L{ganeti.jobs.submission}).  Here is only what
clients need, so that they do not load LuxiD's submission checks.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: the reason-trail source of a submission id
SUBMISSION_SOURCE = "gnt:submission"
#: the longest submission id accepted
MAX_ID_LENGTH = 200


def submission_id(ops: Any) -> str | None:
    """The submission id of a job (its opcodes, as submitted or as in its
    job file), or C{None}: the text of the first L{SUBMISSION_SOURCE} entry
    of the first opcode's reason trail.  Anything malformed counts as none
    (the opcode's own check refuses a malformed trail)."""
    if not isinstance(ops, list) or not ops or not isinstance(ops[0], dict):
        return None
    trail = ops[0].get("reason")
    if not isinstance(trail, list):
        return None
    for entry in trail:
        if isinstance(entry, (list, tuple)) and len(entry) >= 2 and entry[0] == SUBMISSION_SOURCE:
            value = entry[1]
            if isinstance(value, str) and 0 < len(value) <= MAX_ID_LENGTH:
                return value
            return None
    return None


def reason_entry(value: str, timestamp_ns: int) -> list[Any]:
    """The reason-trail entry that gives a job the submission id C{value}."""
    return [SUBMISSION_SOURCE, value, timestamp_ns]
