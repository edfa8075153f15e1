"""Timestamps of a job's path through the daemons, for C{scripts/bench jobs}.

Off unless the environment names a file in C{GANETI_JOB_TRACE}: then every
process on the path (LuxiD, the fork server, the job process; they inherit
the variable) appends one line per hop, C{"<job id> <hop> <ns> <pid>"}, the
time on the system-wide monotonic clock (the same in every process, and
C{time.monotonic_ns()} of the benchmark's client).  Off, a hop costs one
test of a module constant.  Stdlib only: the job process imports it before
any reactor.
"""

from __future__ import annotations

import os
import time
from typing import Callable

#: the variable naming the trace file
ENV = "GANETI_JOB_TRACE"

#: the variable naming a directory for a profile of every job process (C{job-<id>.prof})
PROFILE_ENV = "GANETI_JOB_PROFILE"

_PATH = os.environ.get(ENV) or None
ENABLED = _PATH is not None


def hop(job_id: int, name: str, at: int | None = None) -> None:
    """Record that job C{job_id} passed hop C{name} now (or at C{at}, ns)."""
    if _PATH is None:
        return
    line = "%d %s %d %d\n" % (job_id, name, time.monotonic_ns() if at is None else at, os.getpid())
    try:
        fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    try:
        os.write(fd, line.encode())  # one write with O_APPEND: lines of processes never mix
    finally:
        os.close(fd)


#: the job this process runs (set by the job process): what L{step} records against
current_job = 0


def step(name: str) -> None:
    """L{hop} of this process's job (a step inside the job process: its node RPCs)."""
    if _PATH is not None and current_job:
        hop(current_job, name)


def profiled(job_id: int, function: Callable[[], int]) -> int:
    """C{function()}, under cProfile when C{GANETI_JOB_PROFILE} names a directory."""
    directory = os.environ.get(PROFILE_ENV)
    if not directory:
        return function()
    import cProfile

    profile = cProfile.Profile()
    try:
        return int(profile.runcall(function))
    finally:
        profile.dump_stats(os.path.join(directory, "job-%d.prof" % job_id))


def now() -> int:
    """A timestamp for L{hop}'s C{at}, 0 when tracing is off (no clock read)."""
    return time.monotonic_ns() if _PATH is not None else 0


def read(path: str) -> dict[int, list[tuple[str, int, int]]]:
    """The trace file C{path}: per job, its hops C{(name, ns, pid)} in time order."""
    jobs: dict[int, list[tuple[str, int, int]]] = {}
    with open(path) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) != 4:
                continue
            try:
                jobs.setdefault(int(parts[0]), []).append((parts[1], int(parts[2]), int(parts[3])))
            except ValueError:
                continue
    for hops in jobs.values():
        hops.sort(key=lambda h: h[1])
    return jobs
