"""Private and secret opcode parameters (Ganeti's C{Private} wrapper).

The values of L{FIELDS} (private and secret OS parameters) never reach a
job file, its replicas on the master candidates, a log or a query in
clear: LuxiD writes the job with each value replaced by C{"<redacted>"}
(as Ganeti's job files show them) and keeps the clear values in memory
(L{split}); it hands them to the job process with the confirmation of the
handshake (L{ganeti.jobs.channel}), and the processor merges them into the
opcode it runs (L{merged}) without writing them back.  A job whose clear
values are gone (LuxiD restarted before it ran) fails with a clear message
(L{lost}) instead of installing C{"<redacted>"}.  Secret parameters are
not stored in config.data either: the logical units pass them to the OS
scripts only.
"""

from __future__ import annotations

from typing import Any

#: the opcode fields Ganeti wraps in C{Private}
FIELDS = ("osparams_private", "osparams_secret", "osparams_private_cluster")
REDACTED = "<redacted>"


def redact(value: Any) -> Any:
    """C{value} with every leaf replaced by L{REDACTED} (the keys stay)."""
    if isinstance(value, dict):
        return {key: redact(item) for key, item in value.items()}
    return REDACTED


def split(op: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The opcode as it may be written, and its clear private values
    (C{{}} when it has none)."""
    clear = {name: op[name] for name in FIELDS if op.get(name)}
    if not clear:
        return op, {}
    out = dict(op)
    for name, value in clear.items():
        out[name] = redact(value)
    return out, clear


def merged(op: dict[str, Any], clear: dict[str, Any] | None) -> dict[str, Any]:
    """The opcode to run: its redacted fields replaced by the clear values."""
    return dict(op, **clear) if clear else op


def _has_redacted(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_redacted(item) for item in value.values())
    return bool(value == REDACTED)


def lost(op: dict[str, Any]) -> list[str]:
    """The private fields of C{op} that still hold only L{REDACTED}."""
    return [name for name in FIELDS if _has_redacted(op.get(name))]


def hold(store: dict[int, dict[str, Any]], job_id: int, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """LuxiD's side: the ops of job C{job_id} as written; their clear
    values kept in C{store[job_id]} (C{{"op index": {field: value}}}) until
    the job process has them (L{ganeti.luxid.spawner.JobChannel})."""
    out, clear = [], {}
    for index, op in enumerate(ops):
        written, values = split(op)
        out.append(written)
        if values:
            clear[str(index)] = values
    if clear:
        store[job_id] = clear
    return out
