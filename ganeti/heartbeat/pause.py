"""The watcher's pause file (Ganeti's C{watcher.pause}: the epoch until which
it does nothing), read and written by LuxiD, the watcher and NodeD
(C{get_watcher_pause}, C{set_watcher_pause}); stdlib only.
"""

from __future__ import annotations

import os

#: a pause file this long past its end is removed (Ganeti's)
PAUSE_REMOVE_AFTER = 3600.0


def pause_file(data_dir: str) -> str:
    return os.path.join(data_dir, "watcher.pause")


def read_pause(path: str, now: float) -> float | None:
    """The end of the watcher's pause, or None when it is not paused
    (Ganeti's reading: a bad or long-past file is removed)."""
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except FileNotFoundError:
        return None
    try:
        until = int(text)
    except ValueError:
        _remove(path)
        return None
    if now > until + PAUSE_REMOVE_AFTER:
        _remove(path)
        return None
    return float(until) if now <= until else None


def write_pause(path: str, until: float | None) -> None:
    """Pause until C{until} (an epoch), or end the pause (None)."""
    from ganeti import serializer

    if until is None:
        _remove(path)
    else:
        serializer.write_file(path, "%d\n" % int(until), mode=0o644)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
