"""The pipes between LuxiD and a job process: one JSON object per line.

The handshake, step by step (DESIGN.md, "Jobs"):

  1. LuxiD records its own lock file in the job file and starts the job
     process with one extra pipe in each direction (child fd 3: to LuxiD,
     child fd 4: from LuxiD);
  2. the child creates and flocks its own lock file and sends
     C{{"lockfile": path, "pid": pid}};
  3. LuxiD stores both in the job file, durably, and answers
     C{{"confirm": true}} (with C{"private"}: the clear values of the
     job's private parameters, which its file holds redacted);
     A job file that names the child's lock file and pid since the
     submission (a planned spare) needs no recording: LuxiD confirms as soon
     as the job is acknowledged, even before the announcement arrives, with
     C{"if": [path, pid]}; a child that is not that one ignores it and
     waits for its own;
  4. only then does the child read its job file and run the job (while
     it waits it may connect to WConfD, register as lock owner and read
     the config: nothing that changes anything).  End of file or silence before the confirmation:
     the child removes its lock file and exits without running anything.

Afterwards LuxiD may send C{{"cancel": true}} or C{{"priority": n}}; the
child answers a cancel with C{{"cancelled": bool}}.  A child that cannot
write its job file because the disk is full sends C{{"unsaved": job}} (the
job as it stands) before it exits: LuxiD records that state.
"""

from __future__ import annotations

import os
import select
import time
from typing import Any

import orjson

TO_PARENT_FD = 3
FROM_PARENT_FD = 4
MAX_LINE = 64 * 1024

LOCKFILE = "lockfile"
CONFIRM = "confirm"
#: with a confirmation sent before the announcement it answers: C{[lock file, pid]}, the process it is for
#: (a spare LuxiD recorded in the job file at the submission); any other process ignores it
IF = "if"
#: with the confirmation: the job's clear private values (L{ganeti.jobs.private}), never in its file
PRIVATE = "private"
CANCEL = "cancel"
CANCELLED = "cancelled"
PRIORITY = "priority"
UNSAVED = "unsaved"


class ChannelError(Exception):
    """The other side broke the protocol or went away."""


def encode(message: dict[str, Any]) -> bytes:
    return orjson.dumps(message) + b"\n"


class LineDecoder:
    """Split a byte stream into JSON objects, one per line."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        messages = []
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise ChannelError("not JSON: %r" % line[:100]) from e
            if not isinstance(message, dict):
                raise ChannelError("not an object: %r" % line[:100])
            messages.append(message)
        if len(self._buffer) > MAX_LINE:
            raise ChannelError("line too long")
        return messages


def write_blocking(fd: int, message: dict[str, Any]) -> None:
    data = encode(message)
    while data:
        data = data[os.write(fd, data):]


def read_blocking(fd: int, timeout: float) -> dict[str, Any]:
    """Read one message; L{ChannelError} on end of file or timeout."""
    decoder = LineDecoder()
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ChannelError("no answer within %ss" % timeout)
        ready, _w, _x = select.select([fd], [], [], remaining)
        if not ready:
            continue
        data = os.read(fd, 4096)
        if not data:
            raise ChannelError("the other side closed the channel")
        messages = decoder.feed(data)
        if messages:
            return messages[0]
