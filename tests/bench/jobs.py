"""What the benchmarks share: running jobs through LuxiD and timing them.

L{run_job} submits one job and polls it to its end; L{follow} waits for
a job through C{WaitForJobChange}; L{create_remove_rounds} is the
measurement of the storage benchmarks (C{scripts/bench storage},
C{scripts/bench extstorage}): instances with one disk created and removed
in turn, with a check after each step of what the storage holds.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from ganeti.luxi.client import LuxiClient

#: the job statuses that end a job
FINAL = ("success", "error", "canceled")


def run_job(client: LuxiClient, op: dict[str, Any], timeout: float = 300) -> float:
    """Submit one job and wait for its success; the seconds it took."""
    start = time.perf_counter()
    job_id = client.submit_job([op])
    deadline = time.monotonic() + timeout
    while True:
        ((status, result),) = client.query_jobs([job_id], ["status", "opresult"])
        if status in FINAL:
            break
        if time.monotonic() > deadline:
            raise SystemExit("job %s still %s after %ss" % (job_id, status, timeout))
        time.sleep(0.005)
    took = time.perf_counter() - start
    if status != "success":
        raise SystemExit("job %s (%s) ended %s: %s" % (job_id, op["OP_ID"], status, str(result)[:500]))
    return took


def follow(client: LuxiClient, job_id: int) -> str:
    """Wait for C{job_id}'s end (C{WaitForJobChange}); its status."""
    prev = None
    while True:
        answer = client.wait_for_job_change(job_id, ["status"], prev, None, 30)
        if answer == "nochange":
            continue
        prev = answer[0]
        if prev[0] in FINAL:
            return str(prev[0])


def create_op(name: str, template: str, disk: dict[str, Any], size_mib: int, pnode: str) -> dict[str, Any]:
    """An OP_INSTANCE_CREATE of a started fake-hypervisor instance, no OS install,
    with one disk of C{size_mib} MiB (C{disk}: more of the disk's parameters)."""
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": template,
            "disks": [dict(disk, size=size_mib)], "nics": [], "os_type": "noop", "no_install": True,
            "hypervisor": "fake", "pnode": pnode, "beparams": {"maxmem": 64, "minmem": 64},
            "name_check": False, "ip_check": False, "start": True}


def create_remove_rounds(client: LuxiClient, make_op: Callable[[str], dict[str, Any]], volumes: Callable[[], list[str]],
                         rounds: int, prefix: str, between: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """C{{"create": [s...], "remove": [s...]}}: C{rounds} instances
    (C{make_op(name)}) created and removed in turn, after one warm-up
    round (the first job pays for imports and caches); C{volumes()} must
    list one volume after each creation, none after each removal.
    C{between()}, if given, runs after each round."""
    creates, removes = [], []
    run_job(client, make_op("%swarm.test" % prefix))
    run_job(client, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "%swarm.test" % prefix})
    for n in range(rounds):
        name = "%s%d.test" % (prefix, n)
        creates.append(run_job(client, make_op(name)))
        if len(volumes()) != 1:
            raise SystemExit("expected one volume after creating %s: %s" % (name, volumes()))
        removes.append(run_job(client, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": name}))
        if volumes():
            raise SystemExit("volumes left after removing %s: %s" % (name, volumes()))
        if between is not None:
            between()
    return {"create": creates, "remove": removes}


def rounds_figures(prefix: str, figures: dict[str, list[float]]) -> dict[str, float]:
    """The JSON figures of L{create_remove_rounds}' result: the median
    (C{<prefix>_create_s}, C{<prefix>_remove_s}) and the worst
    (C{<prefix>_create_max_s}, ...) of each, in seconds."""
    out = {}
    for step in ("create", "remove"):
        out["%s_%s_s" % (prefix, step)] = round(statistics.median(figures[step]), 3)
        out["%s_%s_max_s" % (prefix, step)] = round(max(figures[step]), 3)
    return out


__all__ = ["FINAL", "create_op", "create_remove_rounds", "follow", "rounds_figures", "run_job"]
