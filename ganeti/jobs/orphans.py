"""Job processes a past mastership of this node left running.

A job process holds a flock on its own lock file (C{lock_dir/job_<id>_<ns>},
L{ganeti.jobs.process}) for as long as it lives.  When a node takes over as
master, no job process of its own can be running yet (its LuxiD has not
started): every holder of a job lock file there is an orphan of an earlier
mastership of the node, cut off (a partition, a pause) before the old
master's C{node_stop_master} could kill it.  Such a process must not go on:
it would reconnect to the new master's WConfD and LuxiD, which never gave it
its locks, and could record an ending for a job the new master has settled.
L{kill_orphans} finds them by the lock table (C{/proc/locks}: the job file
that named the process may have been replaced by another master's copy).
"""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Callable

from ganeti import lockfile
from ganeti.paths import Paths

JOB_LOCK_RE = re.compile(r"^job_(\d+)_\d+$")


def job_lock_path(paths: Paths, job_id: int) -> str:
    """A new lock file name for a process of job C{job_id} (matches L{JOB_LOCK_RE})."""
    return os.path.join(paths.lock_dir, "job_%06d_%d" % (job_id, time.time_ns()))


def is_job_lock_path(paths: Paths, job_id: int, path: str) -> bool:
    """Whether C{path} names a lock file of job C{job_id} in the lock directory."""
    match = JOB_LOCK_RE.match(os.path.basename(path))
    return os.path.dirname(path) == paths.lock_dir and match is not None and int(match.group(1)) == job_id


def kill_job_process(pid: int, signum: int) -> None:
    """Kill C{pid} and its session (a job process forked by LuxiD's fork
    server leads one), or C{pid} alone when it leads no process group."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
            return
    except ProcessLookupError:
        pass
    os.kill(pid, signum)


def job_lock_holders(paths: Paths, proc_locks: str = lockfile.PROC_LOCKS) -> dict[int, set[int]]:
    """C{{job id: pids}} of the job lock files held here (other than by this process)."""
    try:
        names = sorted(os.listdir(paths.lock_dir))
    except OSError:
        return {}
    inodes: dict[int, int] = {}
    for name in names:
        match = JOB_LOCK_RE.match(name)
        if match is None:
            continue
        try:
            inodes[os.stat(os.path.join(paths.lock_dir, name)).st_ino] = int(match.group(1))
        except OSError:
            continue
    if not inodes:
        return {}
    try:
        with open(proc_locks, "rb") as handle:
            table = handle.read()
    except OSError:
        return {}
    found: dict[int, set[int]] = {}
    for inode, job_id in inodes.items():
        pids = lockfile.lock_holders(table, inode) - {os.getpid()}
        if pids:
            found.setdefault(job_id, set()).update(pids)
    return found


def kill_orphans(paths: Paths, out: Callable[[str], object] = lambda _line: None,
                 kill: Callable[[int, int], None] = kill_job_process,
                 proc_locks: str = lockfile.PROC_LOCKS) -> list[int]:
    """SIGKILL every job process still holding its lock file here (see the
    module docstring); the job ids whose process was killed."""
    killed = []
    for job_id, pids in sorted(job_lock_holders(paths, proc_locks).items()):
        for pid in sorted(pids):
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(job_id)
            out("job %d: its process (pid %d), left running by an earlier mastership of this node, killed"
                % (job_id, pid))
    return sorted(set(killed))
