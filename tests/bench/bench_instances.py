"""scripts/bench instances: parallel instance creations, modifies and removes.

What Ganeti's own performance suite measures (its figures on Ganeti 3.0.2,
one node, fake hypervisor, diskless: 20 creations in 14.8 s, modifies at
2.45 jobs/s, removes at 2.36 jobs/s), here on a real 3-node loopback
cluster brought up with C{ganeti-local-cluster}: 20 OP_INSTANCE_CREATE
jobs with opportunistic locking and the built-in allocator submitted at
once, then 60 OP_INSTANCE_SET_PARAMS, then 20 OP_INSTANCE_REMOVE.  Each
figure is the wall time from submitting the batch to the last job's end.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import orjson

from ganeti import daemons
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths

FINAL = ("success", "error", "canceled")
BIN = os.path.dirname(sys.executable)
CREATIONS = 20
MODIFIES = 60
NODES = 3


def reason() -> list[list[Any]]:
    return [["gnt:client:bench", "", time.time_ns()]]


def create_op(name: str) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": "diskless",
        "disks": [],
        "nics": [],
        "os_type": "noop",
        "hypervisor": "fake",
        "beparams": {"maxmem": 128, "minmem": 128, "vcpus": 1},
        "opportunistic_locking": True,
        "name_check": False,
        "ip_check": False,
        "start": True,
        "reason": reason(),
    }


def wait_all(client: LuxiClient, ids: list[int], timeout: float = 600) -> list[str]:
    """Poll until every job is final; their statuses."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = [row[0] for row in client.query_jobs(ids, ["status"])]
        if all(s in FINAL for s in statuses):
            return statuses
        if time.monotonic() > deadline:
            raise RuntimeError("jobs still running after %ss: %s" % (timeout, statuses))
        time.sleep(0.01)


def batch(client: LuxiClient, jobs: list[list[dict[str, Any]]]) -> tuple[float, list[str], list[int]]:
    start = time.perf_counter()
    answers = client.submit_many_jobs(jobs)
    ids = [value for ok, value in answers if ok]
    if len(ids) != len(jobs):
        raise RuntimeError("submission refused: %s" % [value for ok, value in answers if not ok])
    statuses = wait_all(client, ids)
    return time.perf_counter() - start, statuses, ids


def failures(client: LuxiClient, ids: list[int], statuses: list[str]) -> list[str]:
    bad = [job_id for job_id, status in zip(ids, statuses) if status != "success"]
    if not bad:
        return []
    rows = client.query_jobs(bad, ["id", "opresult"])
    return ["job %s: %s" % (row[0], str(row[1])[:200]) for row in rows]


def cluster_up(directory: str) -> Paths:
    for number in range(1, NODES + 1):
        if daemons.accepts_tcp("127.0.1.%d" % number, 1811):
            raise SystemExit(
                "127.0.1.%d:1811 is taken (a demo or local cluster is running?); stop it first, e.g. "
                "ganeti-local-cluster down --dir /tmp/ganeti-demo --purge" % number
            )
    done = subprocess.run(
        [os.path.join(BIN, "ganeti-local-cluster"), "up", "--dir", directory, "--nodes", str(NODES),
         "--name", "bench.local", "--domain", "bench.local"],
        capture_output=True, text=True,
    )
    if done.returncode != 0:
        raise SystemExit("ganeti-local-cluster up failed:\n%s%s" % (done.stdout, done.stderr))
    return Paths(os.path.join(directory, "node1"))


def cluster_down(directory: str) -> None:
    subprocess.run([os.path.join(BIN, "ganeti-local-cluster"), "down", "--dir", directory, "--purge"],
                   capture_output=True, text=True)


def main() -> None:
    directory = "/tmp/gnt-bench-instances"
    cluster_down(directory)
    master = cluster_up(directory)
    try:
        client = LuxiClient(master.luxi_socket)
        names = ["inst%02d.bench.local" % i for i in range(CREATIONS)]
        create_s, statuses, ids = batch(client, [[create_op(n)] for n in names])
        problems = failures(client, ids, statuses)
        placed = client.query("instance", ["name", "pnode", "status"])["data"]
        per_node: dict[str, int] = {}
        for row in placed:
            per_node[row[1][1]] = per_node.get(row[1][1], 0) + 1
        mods = [
            [{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": names[i % CREATIONS],
              "beparams": {"vcpus": 2 + (i // CREATIONS) % 2}, "reason": reason()}]
            for i in range(MODIFIES)
        ]
        modify_s, statuses, ids = batch(client, mods)
        problems += failures(client, ids, statuses)
        removes = [[{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": n, "reason": reason()}] for n in names]
        remove_s, statuses, ids = batch(client, removes)
        problems += failures(client, ids, statuses)
        left = client.query("instance", ["name"])["data"]
        client.close()
    finally:
        if not os.environ.get("BENCH_KEEP"):
            cluster_down(directory)
    results = {
        "create20_s": round(create_s, 3),
        "create_jobs_per_s": round(CREATIONS / create_s, 2),
        "modify_jobs_per_s": round(MODIFIES / modify_s, 2),
        "remove_jobs_per_s": round(CREATIONS / remove_s, 2),
        "failed_jobs": len(problems),
        "instances_per_node": sorted(per_node.values()),
        "instances_left": len(left),
    }
    print("%-44s %12s %12s" % ("measurement", "value", "Ganeti 3.0.2"))
    print("%-44s %11.2fs %12s" % ("20 parallel creations (opportunistic, 3 nodes)", create_s, "14.8 s"))
    print("%-44s %12.2f %12s" % ("60 parallel modifies, jobs/s", results["modify_jobs_per_s"], "2.45"))
    print("%-44s %12.2f %12s" % ("20 parallel removes, jobs/s", results["remove_jobs_per_s"], "2.36"))
    print("%-44s %12s" % ("instances per node after creation", results["instances_per_node"]))
    for line in problems[:10]:
        print("FAILED", line)
    print(orjson.dumps(results).decode())


if __name__ == "__main__":
    main()
