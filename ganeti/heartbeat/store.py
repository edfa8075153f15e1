"""The durable record of roster transitions: one appended line each.

C{var/lib/ganeti/liveness.log} holds one JSON object per line, a
L{ganeti.heartbeat.roster.Transition} record.  The records of one batch
(LuxiD writes those of one turn of its reactor together: 1,000 nodes
marked unreachable by one sweep, or heard from again after a stall) are
one C{write} and one C{fsync} (L{LivenessStore.writes} counts the records,
L{LivenessStore.syncs} the fsyncs: tests and the benchmark check that
beats write nothing).  On start LuxiD reads the
last record of every node; a log longer than L{COMPACT_AT} lines is
rewritten then (atomically) to those last records.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from twisted.logger import Logger

from ganeti import serializer

#: lines beyond which the log is compacted when it is loaded
COMPACT_AT = 10000


#: in the run directory: the nodes LuxiD counts unreachable now, C{{name: last seen or null}}, rewritten
#: (atomically, not durably: it is LuxiD's view while it runs) whenever that set changes; a job process reads
#: it to note calls to such nodes in its log without asking LuxiD
UNREACHABLE_FILE = "liveness-unreachable.json"


def unreachable_path(run_dir: str) -> str:
    return os.path.join(run_dir, UNREACHABLE_FILE)


def write_unreachable(run_dir: str, nodes: dict[str, float | None]) -> None:
    """Replace L{UNREACHABLE_FILE} with C{nodes} (atomically, not durably)."""
    os.makedirs(run_dir, exist_ok=True)
    serializer.write_file(unreachable_path(run_dir), orjson.dumps(nodes), durable=False)


def read_unreachable(run_dir: str) -> dict[str, float | None] | None:
    """What L{write_unreachable} wrote last; C{None} when there is no such file (LuxiD has not written it)
    or it cannot be read."""
    try:
        with open(unreachable_path(run_dir), "rb") as handle:
            nodes = orjson.loads(handle.read())
    except (OSError, orjson.JSONDecodeError):
        return None
    return nodes if isinstance(nodes, dict) else None


class LivenessStore:
    """Append-only transitions log at C{path}."""

    log = Logger()

    def __init__(self, path: str) -> None:
        self.path = path
        #: records written durably (one per transition)
        self.writes = 0
        #: fsyncs done (one per batch of records)
        self.syncs = 0
        self._fd: int | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """The last record of each node (torn or bad lines are skipped)."""
        last: dict[str, dict[str, Any]] = {}
        lines = 0
        try:
            with open(self.path, "rb") as handle:
                for line in handle:
                    lines += 1
                    try:
                        record = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(record, dict) and isinstance(record.get("node"), str):
                        last[record["node"]] = record
        except FileNotFoundError:
            return {}
        if lines > COMPACT_AT:
            body = b"".join(orjson.dumps(r) + b"\n" for r in last.values())
            serializer.write_file(self.path, body, mode=0o640)
        return last

    def append(self, record: dict[str, Any]) -> None:
        """Write one record durably (one write, one fsync)."""
        self.append_many([record])

    def append_many(self, records: list[dict[str, Any]]) -> None:
        """Write C{records} durably: one write, one fsync."""
        if not records:
            return
        if self._fd is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        data = memoryview(b"".join(orjson.dumps(r) + b"\n" for r in records))
        while data:
            data = data[os.write(self._fd, data):]
        os.fsync(self._fd)
        self.writes += len(records)
        self.syncs += 1

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


__all__ = ["COMPACT_AT", "LivenessStore"]
