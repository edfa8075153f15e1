"""RAPI's C{GET /metrics}: the cluster in the Prometheus text format.

Every figure comes from a real source, at scrape time:

  - jobs by status and opcode, job queue wait (received to started) and
    run (started to ended) times, and how long opcodes waited for their
    locks at each level (the job processor records it in the job file,
    C{oplockwait}): LUXI C{QueryJobs} over the job queue's files
    (archived jobs are not in it);
  - the configuration's serial number: LUXI C{QueryConfigValues}
    (C{config_serial}, which LuxiD reads from WConfD);
  - nodes by role and state: LUXI C{QueryNodes};
  - WConfD's config write latency: LUXI C{QueryConfigValues}
    (C{config_write_latency}, which LuxiD asks WConfD for), when the
    daemons know it;
  - RAPI's own request latency by resource (the route's pattern) and
    status code, kept by L{RequestMetrics}.

A candidate's RAPI (which forwards to the master's) serves only its own
figures: L{render_candidate}.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ganeti.luxi import methods
from ganeti.promtext import Exposition, Histogram

R = TypeVar("R")

#: seconds; jobs wait and run from milliseconds to hours
JOB_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
LOCK_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
WRITE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

JOB_FIELDS = ["id", "status", "ops", "received_ts", "start_ts", "end_ts", "oplockwait"]
NODE_FIELDS = ["name", "offline", "drained", "master_candidate", "role"]


class RequestMetrics:
    """RAPI's request latencies: a histogram per (resource, method, code)."""

    def __init__(self) -> None:
        self.histograms: dict[tuple[str, str, str], Histogram] = {}

    def observe(self, resource: str, method: str, code: int, seconds: float) -> None:
        key = (resource, method, str(code))
        histogram = self.histograms.get(key)
        if histogram is None:
            histogram = self.histograms[key] = Histogram(REQUEST_BUCKETS)
        histogram.observe(seconds)


def _seconds(ts: Any) -> float | None:
    if isinstance(ts, (list, tuple)) and len(ts) == 2 and all(isinstance(v, (int, float)) for v in ts):
        return float(ts[0]) + float(ts[1]) / 1e6
    return None


def _opcode(ops: Any) -> str:
    if isinstance(ops, list) and ops and isinstance(ops[0], dict):
        return str(ops[0].get("OP_ID") or "unknown")
    return "unknown"


def render(jobs: list[list[Any]], serial: Any, nodes: list[list[Any]], write_latency: Any,
           requests: RequestMetrics, liveness: list[list[Any]] | None = None) -> bytes:
    """The metrics text from the LUXI answers and RAPI's own counters (pure).

    @param jobs: C{QueryJobs} rows of L{JOB_FIELDS}
    @param nodes: C{QueryNodes} rows of L{NODE_FIELDS}
    @param liveness: C{QueryNodes} rows of C{["liveness"]} (LuxiD's heartbeat roster)
    @param write_latency: C{{"buckets": [...], "counts": [...], "sum": s,
        "count": n}} or C{None}
    """
    out = Exposition()
    out.family("ganeti_jobs", "gauge", "Jobs in the queue by status and (first) opcode.")
    counts: dict[tuple[str, str], int] = {}
    waits: dict[str, list[float]] = {}
    runs: dict[str, list[float]] = {}
    locks: dict[str, list[float]] = {}
    for row in jobs:
        if not isinstance(row, list) or len(row) != len(JOB_FIELDS):
            continue
        _id, status, ops, received, started, ended, lock_waits = row
        opcode = _opcode(ops)
        counts[(str(status), opcode)] = counts.get((str(status), opcode), 0) + 1
        t_received, t_started, t_ended = _seconds(received), _seconds(started), _seconds(ended)
        if t_received is not None and t_started is not None:
            waits.setdefault(opcode, []).append(max(0.0, t_started - t_received))
        if t_started is not None and t_ended is not None:
            runs.setdefault(opcode, []).append(max(0.0, t_ended - t_started))
        for per_level in lock_waits if isinstance(lock_waits, list) else []:
            for level, seconds in (per_level.items() if isinstance(per_level, dict) else ()):
                if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                    locks.setdefault(str(level), []).append(max(0.0, float(seconds)))
    for (status, opcode), number in sorted(counts.items()):
        out.sample("ganeti_jobs", number, status=status, opcode=opcode)
    for opcode in sorted(waits):
        out.histogram("ganeti_job_queue_wait_seconds", "Time jobs waited in the queue before they started.",
                      JOB_BUCKETS, waits[opcode], opcode=opcode)
    for opcode in sorted(runs):
        out.histogram("ganeti_job_run_seconds", "Time jobs ran, from start to end.", JOB_BUCKETS, runs[opcode],
                      opcode=opcode)
    for level in sorted(locks):
        out.histogram("ganeti_lock_wait_seconds", "Time opcodes waited for their locks, by lock level.",
                      LOCK_BUCKETS, locks[level], level=level)
    if isinstance(serial, int) and not isinstance(serial, bool):
        out.family("ganeti_config_serial", "gauge", "Serial number of the cluster configuration.")
        out.sample("ganeti_config_serial", serial)
    if isinstance(write_latency, dict):
        try:
            out.histogram_counts("ganeti_wconfd_config_write_seconds",
                                 "Time WConfD took to write config.data durably.",
                                 write_latency["buckets"], write_latency["counts"], write_latency["sum"],
                                 write_latency["count"])
        except (KeyError, TypeError):
            pass
    out.family("ganeti_nodes", "gauge", "Nodes by role and state.")
    states: dict[tuple[str, str], int] = {}
    for row in nodes:
        if not isinstance(row, list) or len(row) != len(NODE_FIELDS):
            continue
        _name, offline, drained, _candidate, role = row
        state = "offline" if offline else "drained" if drained else "online"
        key = (str(role or "R"), state)
        states[key] = states.get(key, 0) + 1
    for (role, state), number in sorted(states.items()):
        out.sample("ganeti_nodes", number, role=role, state=state)
    by_liveness: dict[str, int] = {}
    for row in liveness or []:
        if isinstance(row, list) and len(row) == 1 and isinstance(row[0], str):
            by_liveness[row[0]] = by_liveness.get(row[0], 0) + 1
    if by_liveness:
        out.family("ganeti_nodes_liveness", "gauge", "Nodes by heartbeat liveness (up, unreachable, offline, unknown).")
        for state, number in sorted(by_liveness.items()):
            out.sample("ganeti_nodes_liveness", number, liveness=state)
    for (resource, method, code), histogram in sorted(requests.histograms.items()):
        out.histogram_counts("ganeti_rapi_request_duration_seconds", "Time RAPI took to answer requests.",
                             histogram.buckets, histogram.counts, histogram.total, histogram.count,
                             resource=resource, method=method, code=code)
    return out.render()


async def _read(luxi: Any, request: methods.Request[R]) -> R:
    """A declared read-only LUXI call on C{luxi} (a L{ganeti.rapi.luxi.LuxiPool})."""
    result: R = await luxi.read(request.method, *request.args)
    return result


def render_candidate(requests: RequestMetrics, forwarded: RequestMetrics) -> bytes:
    """The metrics of a candidate's RAPI, which forwards to the master's (pure).

    Only this RAPI's own figures: the requests it answered itself (its
    C{/metrics} scrapes) and the requests it forwarded, in a family of their
    own, as the master's RAPI counts them again in its request histogram.
    The cluster's figures (jobs, nodes, config) are the master's RAPI's
    alone, so that a C{sum()} over every RAPI target counts each job once.
    """
    out = Exposition()
    out.family("ganeti_rapi_forwarding", "gauge",
               "1: this RAPI forwards to the master's (cluster metrics are at the master's RAPI).")
    out.sample("ganeti_rapi_forwarding", 1)
    for (resource, method, code), histogram in sorted(requests.histograms.items()):
        out.histogram_counts("ganeti_rapi_request_duration_seconds", "Time RAPI took to answer requests.",
                             histogram.buckets, histogram.counts, histogram.total, histogram.count,
                             resource=resource, method=method, code=code)
    for (resource, method, code), histogram in sorted(forwarded.histograms.items()):
        out.histogram_counts("ganeti_rapi_forwarded_request_duration_seconds",
                             "Time requests forwarded to the master's RAPI took, as this RAPI saw them.",
                             histogram.buckets, histogram.counts, histogram.total, histogram.count,
                             resource=resource, method=method, code=code)
    return out.render()


async def collect(luxi: Any, requests: RequestMetrics) -> bytes:
    """Ask LuxiD and render."""
    jobs = await _read(luxi, methods.QueryJobs.call([], JOB_FIELDS))
    serial, latency = await _read(luxi, methods.QueryConfigValues.call(["config_serial", "config_write_latency"]))
    nodes = await _read(luxi, methods.QueryNodes.call([], NODE_FIELDS, False))
    liveness = await _read(luxi, methods.QueryNodes.call([], ["liveness"], False))
    return render([row for row in jobs or [] if row is not None], serial, nodes or [], latency, requests, liveness)
