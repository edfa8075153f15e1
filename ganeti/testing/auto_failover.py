"""Helpers of the automatic failover's tests and benchmark.

L{enable_auto_failover} writes the HA parameters on every node (what
C{gnt-cluster modify --auto-failover} replicates); L{kill_root} is
C{kill -9} of every process of one node's root (its daemons and the job
processes LuxiD started); L{try_submit} asks one node's LuxiD to take a
tag job (is it the master?).  The stream of tag jobs from a client that
rides through failovers is L{ganeti.testing.jobstream}.
"""

from __future__ import annotations

import os
import signal

from ganeti.ha import params as ha_params
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing import procs, warmfork
from ganeti.testing.jobstream import tag_job


def enable_auto_failover(roots: list[Paths], timeout: float) -> None:
    """Automatic failover on with C{timeout} seconds, on every node."""
    params = ha_params.HaParams().changed(auto_failover=True, failover_timeout=timeout)
    for paths in roots:
        ha_params.write(paths, params)


def root_pids(paths: Paths) -> list[int]:
    """Every process whose command line names C{paths.root} (a unique temporary directory), and the daemons
    forked warm for it (L{warmfork.forked_pids}: their command line is their launcher's)."""
    found = []
    wanted = paths.root
    for pid, argv in procs.processes():
        if any(arg == wanted or arg.startswith(wanted + "/") for arg in argv):
            found.append(pid)
    return found + [pid for pid in warmfork.forked_pids(paths.root) if pid not in found]


def kill_root(paths: Paths) -> list[int]:
    """C{kill -9} every process of C{paths}' root (by pid); the pids killed."""
    pids = root_pids(paths)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def try_submit(paths: Paths, tag: str = "probe") -> int | None:
    """Submit a job adding C{tag} to C{paths}' LuxiD; its id, or C{None} (refused, or no LuxiD)."""
    try:
        client = LuxiClient(paths.luxi_socket, timeout=5)
        try:
            answers = client.submit_many_jobs([tag_job(tag)])
        finally:
            client.close()
    except Exception:  # no master there (yet)
        return None
    ok, job_id = answers[0]
    return int(job_id) if ok else None


__all__ = ["enable_auto_failover", "kill_root", "root_pids", "try_submit"]
