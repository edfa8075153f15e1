"""Jobs and their opcodes as Ganeti's job files describe them (pure).

A L{QueuedJob} is mutable: LuxiD and the job process change it as the job
runs and write it out with L{QueuedJob.to_dict} (the job file layout of
spec/jobs.md).  Unknown keys in a job file are kept.
"""

from __future__ import annotations

import time
from typing import Any, Iterable

import attrs

from ganeti import serializer
from ganeti.jobs import lifecycle

# The statuses, priorities and log types are those of the lifecycle, kept
# importable from here (model.SUCCESS, model.FINALIZED, ...).
from ganeti.jobs.lifecycle import (  # noqa: F401
    CANCELED,
    CANCELING,
    ELOG_DELAY_TEST,
    ELOG_JQUEUE_TEST,
    ELOG_MESSAGE,
    ELOG_REMOTE_IMPORT,
    ERROR,
    FINALIZED,
    PENDING,
    PRIO_DEFAULT,
    PRIO_HIGH,
    PRIO_HIGHEST,
    PRIO_LOW,
    PRIO_LOWEST,
    PRIO_NORMAL,
    PRIO_SUBMIT_VALID,
    QUEUED,
    RUNNING,
    STATUS_ORDER,
    SUCCESS,
    WAITING,
    status_index,
)

Timestamp = list[int]


def timestamp(when: float | None = None) -> Timestamp:
    """Ganeti's C{[seconds, microseconds]}."""
    when = time.time() if when is None else when
    seconds, micros = divmod(int(round(when * 1e6)), 1000000)
    return [seconds, micros]


def ts_seconds(value: Timestamp | None) -> float | None:
    return None if value is None else value[0] + value[1] / 1e6


@attrs.define(kw_only=True)
class QueuedOpCode:
    input: dict[str, Any]
    status: str = QUEUED
    result: Any = None
    log: list[list[Any]] = attrs.Factory(list)
    priority: int = PRIO_DEFAULT
    start_timestamp: Timestamp | None = None
    exec_timestamp: Timestamp | None = None
    end_timestamp: Timestamp | None = None
    extra: dict[str, Any] = attrs.Factory(dict)

    # In the order Ganeti's job process writes them.
    _FIELDS = ("input", "status", "result", "log", "start_timestamp", "exec_timestamp", "end_timestamp", "priority")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueuedOpCode:
        if not isinstance(data, dict) or not isinstance(data.get("input"), dict):
            raise ValueError("an opcode entry needs an 'input' object")
        if "status" in data and not lifecycle.is_status(data["status"]):
            raise ValueError("unknown opcode status %r" % (data["status"],))
        known = {k: data[k] for k in cls._FIELDS if k in data}
        if known.get("log") is None:
            known["log"] = []
        if known.get("priority") is None:
            known["priority"] = data["input"].get("priority", PRIO_DEFAULT)
        return cls(extra={k: v for k, v in data.items() if k not in cls._FIELDS}, **known)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self._FIELDS}
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    @property
    def op_id(self) -> str:
        return str(self.input.get("OP_ID", ""))


@attrs.define(kw_only=True)
class QueuedJob:
    id: int
    ops: list[QueuedOpCode]
    received_timestamp: Timestamp | None = None
    start_timestamp: Timestamp | None = None
    end_timestamp: Timestamp | None = None
    livelock: str | None = None
    process_id: int | None = None
    extra: dict[str, Any] = attrs.Factory(dict)

    _FIELDS = ("id", "ops", "received_timestamp", "start_timestamp", "end_timestamp")
    _OPTIONAL = ("livelock", "process_id")

    # --- (de)serialization ------------------------------------------------
    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueuedJob:
        if not isinstance(data, dict) or not isinstance(data.get("id"), int) or not isinstance(data.get("ops"), list):
            raise ValueError("a job file needs an integer 'id' and a list 'ops'")
        known: dict[str, Any] = {k: data.get(k) for k in cls._FIELDS + cls._OPTIONAL}
        known["ops"] = [QueuedOpCode.from_dict(op) for op in data["ops"]]
        extra = {k: v for k, v in data.items() if k not in cls._FIELDS + cls._OPTIONAL}
        return cls(extra=extra, **known)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "ops": [op.to_dict() for op in self.ops],
            "start_timestamp": self.start_timestamp,
            "end_timestamp": self.end_timestamp,
            "received_timestamp": self.received_timestamp,
        }
        for key in self._OPTIONAL:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    def to_json(self) -> bytes:
        """The job file's content (JSON and a final newline, as Ganeti writes it)."""
        return serializer.dumps(self.to_dict()) + b"\n"

    @classmethod
    def new(cls, job_id: int, inputs: Iterable[dict[str, Any]], when: float | None = None) -> QueuedJob:
        """A job as submitted: every opcode queued, the reason trail extended."""
        when = time.time() if when is None else when
        ops = []
        for index, op in enumerate(inputs):
            op = dict(op)
            op_id = str(op.get("OP_ID", ""))
            reason = list(op.get("reason") or [])
            short = op_id[3:].lower() if op_id.startswith("OP_") else op_id.lower()
            reason.append(["gnt:opcode:%s" % short, "job=%d;index=%d" % (job_id, index), int(when * 1e9)])
            op["reason"] = reason
            prio = op.get("priority", PRIO_DEFAULT)
            ops.append(QueuedOpCode(input=op, priority=prio if isinstance(prio, int) else PRIO_DEFAULT))
        return cls(id=job_id, ops=ops, received_timestamp=timestamp(when))

    # --- derived state -----------------------------------------------------
    @property
    def status(self) -> str:
        """The job status from its opcodes' (spec/jobs.md section 1)."""
        return lifecycle.job_status(op.status for op in self.ops)

    @property
    def finalized(self) -> bool:
        return self.status in FINALIZED

    @property
    def priority(self) -> int:
        """Minimum priority of the opcodes not yet finalized."""
        pending = [op.priority for op in self.ops if op.status not in FINALIZED]
        return min(pending) if pending else PRIO_DEFAULT

    @property
    def log_serial(self) -> int:
        serials = [entry[0] for op in self.ops for entry in op.log]
        return max(serials) if serials else 0

    def log_since(self, serial: int | None) -> list[list[Any]]:
        """Log entries (of all opcodes, in order) newer than C{serial}."""
        floor = serial or 0
        return [entry for op in self.ops for entry in op.log if entry[0] > floor]

    def add_log(self, op_index: int, message: Any, kind: str = ELOG_MESSAGE, when: float | None = None) -> list[Any]:
        entry = [self.log_serial + 1, timestamp(when), kind, message]
        self.ops[op_index].log.append(entry)
        return entry

    def depends(self) -> list[tuple[int, list[str]]]:
        """Dependencies of the first opcode that has not finished."""
        for op in self.ops:
            if op.status not in FINALIZED:
                return [(int(d[0]), list(d[1] or [])) for d in op.input.get("depends") or []]
        return []

    # --- transitions LuxiD makes --------------------------------------------
    def cancel(self, when: float | None = None, reason: str | None = None) -> None:
        """Cancel every unfinished opcode.

        @param reason: C{None} for a job that has not started (results stay
            as they are, as Ganeti's LuxiD leaves them); otherwise why the
            job was stopped (a killed job): it becomes the result of the
            canceled opcodes and a log entry of the first of them.
        """
        canceled = lifecycle.cancel(self, timestamp(when), reason=reason)
        if reason is not None and canceled:
            self.add_log(canceled[0], reason, when=when)

    def fail(self, message: str, when: float | None = None, error_class: str = "OpExecError") -> None:
        """Fail every unfinished opcode with C{message} (e.g. the process died)."""
        lifecycle.fail(self, [error_class, [message]], timestamp(when))

    def set_priority(self, priority: int) -> None:
        for op in self.ops:
            if op.status not in FINALIZED:
                op.priority = priority
                op.input["priority"] = priority
