"""Where a job's time goes: the per-hop trace and the CPU per job of each daemon.

L{traced} sets C{GANETI_JOB_TRACE} for the daemons started inside it
(L{ganeti.jobs.trace}); L{hop_table} turns the trace and the client's own
send/final times into the median offset of every hop from the client's
send.  L{CpuMeter} reads C{/proc/<pid>/stat} of the daemons of a root
(the fork server's children, the job processes, count in its reaped
children's time): CPU per job does not depend on the machine's load as
wall time does.
"""

from __future__ import annotations

import contextlib
import os
import statistics
from typing import Iterator

from ganeti.jobs import trace
from ganeti.luxid.forkclient import recorded_pid
from ganeti.paths import Paths
from ganeti.testing import procs, warmfork

#: the hops of the client (the benchmark), added to the daemons' trace
CLIENT_SEND, CLIENT_FINAL = "client.send", "client.final"


@contextlib.contextmanager
def traced(path: str) -> Iterator[str]:
    """Daemons started in this context trace their jobs' hops to C{path}."""
    before = os.environ.get(trace.ENV)
    os.environ[trace.ENV] = path
    try:
        yield path
    finally:
        if before is None:
            os.environ.pop(trace.ENV, None)
        else:
            os.environ[trace.ENV] = before


def hop_table(path: str, client: dict[int, tuple[int, int]]) -> list[tuple[str, float, float, int]]:
    """C{[(hop, median ms since the client's send, median ms since the hop before, jobs that passed it)]}
    over the jobs of C{client} (C{{job id: (send ns, final ns)}}), in the order
    of the medians; a hop a job passes several times counts its first pass.
    Hops of one path only (a spare planned at the submission or not) count fewer jobs."""
    try:
        jobs = trace.read(path)
    except FileNotFoundError:
        jobs = {}
    offsets: dict[str, list[float]] = {}
    for job_id, (sent, final) in client.items():
        seen: dict[str, int] = {CLIENT_SEND: sent, CLIENT_FINAL: final}
        for name, ns, _pid in jobs.get(job_id, []):
            seen.setdefault(name, ns)
        for name, ns in seen.items():
            offsets.setdefault(name, []).append((ns - sent) / 1e6)
    medians = sorted(((statistics.median(v), name) for name, v in offsets.items()), key=lambda m: m[0])
    rows, previous = [], 0.0
    for median, name in medians:
        rows.append((name, median, median - previous, len(offsets[name])))
        previous = median
    return rows


def print_hops(title: str, rows: list[tuple[str, float, float, int]]) -> None:
    print("%-40s %10s %10s %6s" % (title, "at (ms)", "+ (ms)", "jobs"))
    for name, at, delta, jobs in rows:
        print("  %-38s %10.2f %10.2f %6d" % (name, at, delta, jobs))


def _stat(pid: int) -> tuple[str, int, int, int, int]:
    """C{(process name, own CPU ticks, reaped children's CPU ticks, own minor page faults, reaped children's
    minor page faults)} of C{pid}."""
    with open("/proc/%d/stat" % pid) as handle:
        data = handle.read()
    name = data[data.index("(") + 1:data.rindex(")")]
    fields = data[data.rindex(")") + 2:].split()
    # fields[7], [8]: minflt cminflt; [11..14]: utime stime cutime cstime (proc(5) fields 10-11, 14-17)
    return (name, int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[7]),
            int(fields[8]))


def daemon_pids(root: str) -> dict[str, int]:
    """C{{role: pid}} of the daemons of the node root C{root} (by their command lines, also of the daemons
    forked warm, L{warmfork.forked_children}, whose own command line is their launcher's)."""
    found: dict[str, int] = {}
    candidates = list(procs.processes())
    candidates += warmfork.forked_children(root)
    forkserver = recorded_pid(Paths(root))
    if forkserver is not None:  # (one forked at LuxiD's start has LuxiD's launcher's command line)
        found["forkserver+jobs"] = forkserver
    for pid, words in candidates:
        if root not in words:
            continue
        for role, marker in (("forkserver+jobs", "ganeti.luxid.forkserver"), ("luxid", "ganeti-luxid"),
                             ("wconfd", "ganeti-wconfd"), ("noded", "ganeti-noded")):
            if marker in words:
                found.setdefault(role, pid)
    return found


class CpuMeter:
    """CPU time (and minor page faults: copy-on-write after a fork among them) of a root's daemons between
    L{start} and L{stop}; the fork server's own apart from that of its job processes (reaped ones)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._before: dict[str, tuple[int, int]] = {}
        self.pids: dict[str, int] = {}
        #: minor page faults per job of each daemon, set by L{stop}
        self.faults_per_job: dict[str, float] = {}

    def _read(self) -> dict[str, tuple[int, int]]:
        out = {}
        for role, pid in self.pids.items():
            try:
                _name, own, children, faults, children_faults = _stat(pid)
            except (OSError, ValueError, IndexError):
                continue
            if role == "forkserver+jobs":  # apart: the fork server's own share and its job processes'
                out["forkserver"] = (own, faults)
                out["jobs"] = (children, children_faults)
            else:
                out[role] = (own + children, faults + children_faults)
        return out

    def start(self) -> None:
        self.pids = daemon_pids(self.root)
        self._before = self._read()

    def stop(self, jobs: int) -> dict[str, float]:
        """CPU milliseconds per job of each daemon (C{forkserver}: its own; C{jobs}: its reaped children's)."""
        after, tick = self._read(), 1000.0 / os.sysconf("SC_CLK_TCK")
        per_job: dict[str, float] = {}
        for role, (cpu, faults) in after.items():
            cpu0, faults0 = self._before.get(role, (cpu, faults))
            per_job[role] = (cpu - cpu0) * tick / max(1, jobs)
            self.faults_per_job[role] = (faults - faults0) / max(1, jobs)
        return per_job


def print_cpu(title: str, per_job: dict[str, float], faults: dict[str, float] | None = None) -> None:
    faults = faults or {}
    print("%-40s %10s %10s" % (title, "ms/job", "faults/job"))
    for role, ms in sorted(per_job.items()):
        print("  %-38s %10.2f %10.0f" % (role, ms, faults.get(role, 0)))
    print("  %-38s %10.2f %10.0f" % ("total", sum(per_job.values()), sum(faults.values())))


__all__ = ["CLIENT_FINAL", "CLIENT_SEND", "CpuMeter", "daemon_pids", "hop_table", "print_cpu", "print_hops", "traced"]
