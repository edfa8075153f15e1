"""scripts/bench chaos: crash trials per fault, and LuxiD's fd growth over 5,000 jobs.

Brings up its own 3-node loopback clusters (127.0.1.1-3, free ports, temp
roots).  Prints, per fault: trials, acknowledged jobs, lost, ran twice,
failed by the fault, locks left, stale replicas, broken promises, seconds
until the killed daemons answered again; then LuxiD's file descriptors
after 5,000 OP_TEST_DELAY(0) jobs minus after 10; then one JSON line.

    scripts/bench chaos [--trials-per-fault N] [--jobs N] [--seed S]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti import errors
from ganeti.luxi.client import LuxiClient
from ganeti.testing.chaos import FAULTS, ChaosCluster, fd_count, totals
from ganeti.testing.chaos_run import print_table, run_trials
from ganeti.testing.daemons import make_root, remove_root
from ganeti.testing.fdcount import quick_job

BATCH = 100
FINAL = ("success", "error", "canceled")


def run_jobs(client: LuxiClient, count: int) -> int:
    """Submit C{count} quick OP_TEST_DELAY jobs in batches (SubmitManyJobs),
    wait for each batch, archive what ended (the queue holds 5,000 at most);
    how many succeeded (fewer if LuxiD stopped taking jobs)."""
    succeeded = 0
    left = count
    while left > 0:
        size = min(BATCH, left)
        try:
            answers = client.submit_many_jobs([quick_job() for _ in range(size)])
        except (errors.GenericError, OSError) as e:
            print("LuxiD refused jobs after %d: %s" % (count - left, e), file=sys.stderr, flush=True)
            break
        ids = [job_id for ok, job_id in answers if ok]
        deadline = time.monotonic() + 300
        while True:
            rows = client.query_jobs(ids, ["status"])
            if all(row is not None and row[0] in FINAL for row in rows) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        succeeded += sum(1 for row in rows if row is not None and row[0] == "success")
        client.auto_archive_jobs(-1, 60)
        left -= size
    return succeeded


async def fd_growth(reactor: Any, jobs: int) -> dict[str, Any]:
    """LuxiD's open fds after 10 jobs and after C{jobs} more."""
    root = make_root("gchb")
    try:
        async with ChaosCluster(reactor, root, prefix="gchb") as cluster:
            pid = cluster.pid("luxid")
            client = LuxiClient(cluster.master.luxi_socket, timeout=120)
            try:
                await threads.deferToThread(run_jobs, client, 10)
                after_10 = fd_count(pid)
                began = time.monotonic()
                succeeded = await threads.deferToThread(run_jobs, client, jobs)
                seconds = time.monotonic() - began
                after_n = fd_count(pid)
            finally:
                client.close()
    finally:
        remove_root(root)
    return {"fds_after_10": after_10, "fds_after_n": after_n, "jobs": jobs, "succeeded": succeeded,
            "jobs_per_s": jobs / seconds if seconds else 0.0}


async def main(reactor: Any, args: argparse.Namespace) -> None:
    faults = args.fault or sorted(FAULTS)
    results = await run_trials(reactor, faults, args.trials_per_fault * len(faults), 1e9, args.seed,
                               report=lambda line: print(line, file=sys.stderr, flush=True))
    growth = await fd_growth(reactor, args.jobs)
    print_table(results)
    print("LuxiD fds: %d after 10 jobs, %d after %d more (%d succeeded, %.0f jobs/s): growth %d (target 0)"
          % (growth["fds_after_10"], growth["fds_after_n"], growth["jobs"], growth["succeeded"], growth["jobs_per_s"],
             growth["fds_after_n"] - growth["fds_after_10"]))
    figures = totals(results)
    figures["seed"] = args.seed
    figures["luxid_fd_growth_jobs"] = args.jobs  # how many jobs the next figure covers (5000 unless --jobs)
    figures["luxid_fd_growth_5000_jobs"] = growth["fds_after_n"] - growth["fds_after_10"]
    print(orjson.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}).decode())


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench chaos")
    parser.add_argument("--trials-per-fault", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=5000, help="jobs for the fd growth figure (default 5000)")
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--fault", choices=sorted(FAULTS), action="append", help="only this fault (repeatable)")
    args = parser.parse_args(argv)
    if args.trials_per_fault < 1 or args.jobs < 1:
        parser.error("--trials-per-fault and --jobs must be positive")
    return args


if __name__ == "__main__":
    options = parse_args(sys.argv[1:])
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, options)))
