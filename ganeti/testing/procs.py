"""What the tests, benchmarks and the demo read of other processes in
C{/proc}: a process's command line and run state, and every live process
with its command line.  A process that ends while it is read reads as gone
(an empty command line, no state), never as an error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator


def argv(pid: int | str) -> list[str]:
    """The command line of process C{pid} as its words; C{[]} once it is
    gone (or for a kernel thread, which has none)."""
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return raw.decode("utf-8", "replace").split("\0")[:-1] if raw else []


def state(pid: int | str) -> str | None:
    """The one-letter run state of process C{pid} (C{R}, C{S}, C{Z}...), or
    C{None} once it is gone."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as handle:
            return handle.read().rsplit(b")", 1)[-1].split()[0].decode()
    except (OSError, IndexError):
        return None


def processes(live: bool = False) -> Iterator[tuple[int, list[str]]]:
    """Every process but this one, with its command line (C{[]} for kernel
    threads); with C{live}, zombies left out."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        if live and state(entry) in (None, "Z"):
            continue
        yield int(entry), argv(entry)
