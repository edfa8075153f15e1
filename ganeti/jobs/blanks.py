"""Files made before the writes that need them: a job's path makes none.

An atomic write makes a file (its temporary copy, renamed over the
target), and on ext4 making a file is the costly step under a steady
stream of jobs: every job frees inodes (the job file versions its writes
replace, its lock file), and a new inode's search steps over the recently
freed ones.  Measured on this project's 2-core test machines: 0.4-0.8 ms
of CPU to make a file during C{scripts/bench jobs}, 0.02-0.14 ms on a
quiet disk, against 0.02 ms for a rename.  A job's path made four: its
lock file, the temporary copies of its job file's writes ("running" and
its end) in the job process, the new job's file in LuxiD.

So they are made ahead, by a spare once it is ready (L{ahead}, while the job
before runs; L{ganeti.jobs.spare}) and after each submission in LuxiD's thread
pool (L{make_blanks}, from L{ganeti.luxid.acks}): a spare's lock file C{lock_dir/spare_<pid>}, held,
renamed to its job's lock file name when the job comes (the flock stays
with the file), and empty files C{queue_dir/.blank-<pid>-<n>}, which a
write fills and renames over its target (L{ganeti.serializer.write_file}'s
C{blank}).  A write with no blank left makes its temporary file as before.

What a process leaves (a spare retired, a job that wrote less, a process
killed) is removed by the fork server when it reaps the process
(L{forget}) and, for processes gone before (a killed LuxiD, the children
of an earlier fork server), at LuxiD's start (L{sweep}, in its thread pool).  Names of dead processes only: a pid is alive once.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Callable, Iterator

from ganeti import childproc, lockfile
from ganeti.paths import Paths

#: blanks a spare makes: one per job file write of a job that runs without log lines ("running", its end)
SPARE_BLANKS = 2

_BLANK = ".blank-%d-%d"
_BLANK_RE = re.compile(r"^\.blank-(\d+)-\d+$")
_SPARE_LOCK = "spare_%d"
_SPARE_LOCK_RE = re.compile(r"^spare_(\d+)$")

#: this process's blanks not used yet, by directory (a daemon takes them in its reactor's thread and makes
#: them in its thread pool: L{_guard} keeps a blank from being given twice)
_ready: dict[str, list[str]] = {}
_guard = threading.Lock()


def make_blanks(directory: str, count: int) -> int:
    """Make this process's blanks in C{directory} up to C{count} unused; how many are ready."""
    with _guard:  # (those removed meanwhile, by a purge of the queue, are forgotten)
        ready = _ready.setdefault(directory, [])
        ready[:] = [path for path in ready if os.path.exists(path)]
        missing = count - len(ready)
    pid = os.getpid()
    n = 0
    while missing > 0 and n < 2 * count + 2:
        path = os.path.join(directory, _BLANK % (pid, n))
        n += 1
        try:  # (a name in use: a blank ready or taken and not yet written, or left by a dead process's pid)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            continue
        except OSError:  # (a full disk, a directory gone) the writes make their own
            break
        with _guard:
            ready.append(path)
        missing -= 1
    return len(ready)


def take(directory: str) -> str | None:
    """A blank of this process in C{directory}, for one write there; None when none is left."""
    with _guard:
        ready = _ready.get(directory)
        return ready.pop() if ready else None


def ahead(paths: Paths, held: list[tuple[int, str]]) -> Iterator[None]:
    """In a spare before its job, one file per step: its lock file, held and
    appended to C{held} as C{(fd, path)} (none appended: the job makes its own),
    then its blanks in the queue directory."""
    path = os.path.join(paths.lock_dir, _SPARE_LOCK % os.getpid())
    try:
        held.append((lockfile.hold(path), path))  # (one left by a dead process with this pid is taken over)
    except (OSError, lockfile.LockHeld):
        pass
    for n in range(SPARE_BLANKS):
        yield
        make_blanks(paths.queue_dir, n + 1)


def claim(held: tuple[int, str], path: str) -> tuple[int, str] | None:
    """The spare's lock file C{held} renamed to its job's lock file C{path}: C{(fd, path)}, still held; None
    when it could not be (the file is then closed and removed: the job makes its own)."""
    fd, spare_path = held
    try:
        os.rename(spare_path, path)
    except OSError:
        os.close(fd)
        _unlink(spare_path)
        return None
    return fd, path


def drop() -> None:
    """Remove this process's unused blanks (at its end)."""
    with _guard:
        for ready in _ready.values():
            for path in ready:
                _unlink(path)
            ready.clear()


def forget(paths: Paths, pid: int) -> None:
    """Remove what process C{pid}, reaped, left: its spare lock file and blanks."""
    _unlink(os.path.join(paths.lock_dir, _SPARE_LOCK % pid))
    for n in range(2 * SPARE_BLANKS + 2):
        _unlink(os.path.join(paths.queue_dir, _BLANK % (pid, n)))


def sweep(paths: Paths, alive: Callable[[int], bool] = childproc.pid_alive) -> int:
    """Remove the spare lock files and blanks of processes that are gone; how many files were removed."""
    removed = 0
    for directory, pattern in ((paths.queue_dir, _BLANK_RE), (paths.lock_dir, _SPARE_LOCK_RE)):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = pattern.match(name)
            if match is not None and not alive(int(match.group(1))):
                removed += _unlink(os.path.join(directory, name))
    return removed


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
    except OSError:
        return 0
    return 1


__all__ = ["SPARE_BLANKS", "ahead", "claim", "drop", "forget", "make_blanks", "sweep", "take"]
