"""How many file descriptors LuxiD holds after many jobs (leak check).

L{measure_luxid_fds} starts WConfD and LuxiD of a fresh root under twistd,
runs C{warmup} quick jobs (OP_TEST_DELAY), counts LuxiD's open fds in
C{/proc/<pid>/fd}, runs more jobs up to C{jobs} in all (archiving them as
it goes, so the queue never fills), and counts again::

    figures = await measure_luxid_fds(reactor, jobs=5000)
    assert figures.after_all == figures.after_warmup

Used by tests/integration/test_luxid_fds.py and by benchmarks.
"""

from __future__ import annotations

import os
import time
from typing import Any

import attrs
from twisted.internet import threads
from twisted.internet.interfaces import IReactorTime

from ganeti.config.bootstrap import initial_config
from ganeti.jobs import lifecycle
from ganeti.luxi.client import LuxiClient
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config

FINAL = lifecycle.FINALIZED
#: jobs submitted at once (one SubmitManyJobs call)
BATCH = 100


@attrs.frozen
class FdFigures:
    """LuxiD's open fds after C{warmup} jobs and after C{jobs} jobs in all."""

    warmup: int
    jobs: int
    after_warmup: int
    after_all: int
    statuses: dict[str, int]
    seconds: float


def open_fds(pid: int) -> int:
    """How many file descriptors process C{pid} has open."""
    return len(os.listdir("/proc/%d/fd" % pid))


def quick_job(duration: float = 0.001) -> list[dict[str, Any]]:
    """A job that sleeps C{duration} (positive) seconds in its job process (no RPC)."""
    return [{"OP_ID": "OP_TEST_DELAY", "duration": duration, "on_master": False,
             "reason": [["gnt:client:fdcount", "", 0]]}]


def wait_final(client: LuxiClient, job_ids: list[int], timeout: float = 600.0) -> dict[int, str]:
    """Poll (QueryJobs, every 50 ms) until every job in C{job_ids} is final."""
    deadline = time.monotonic() + timeout
    statuses: dict[int, str] = {}
    pending = list(job_ids)
    while pending:
        rows = client.query_jobs(pending, ["id", "status"])
        for row in rows:
            if row is not None and row[1] in FINAL:
                statuses[int(row[0])] = row[1]
        pending = [job_id for job_id in pending if job_id not in statuses]
        if pending:
            if time.monotonic() > deadline:
                raise AssertionError("jobs %s did not finish within %ss" % (pending[:10], timeout))
            time.sleep(0.05)
    return statuses


def run_jobs(client: LuxiClient, count: int, batch: int = BATCH) -> dict[str, int]:
    """Run C{count} quick jobs, C{batch} at a time, archiving each batch once
    it is final; returns how many ended in each status."""
    tally: dict[str, int] = {}
    done = 0
    while done < count:
        size = min(batch, count - done)
        answers = client.submit_many_jobs([quick_job() for _ in range(size)])
        ids = [int(job_id) for ok, job_id in answers if ok]
        assert len(ids) == size, answers
        for status in wait_final(client, ids).values():
            tally[status] = tally.get(status, 0) + 1
        for job_id in ids:
            client.archive_job(job_id)
        done += size
    return tally


async def measure_luxid_fds(reactor: IReactorTime, jobs: int = 5000, warmup: int = 10, *,
                            luxid_args: tuple[str, ...] = ()) -> FdFigures:
    """Run C{jobs} jobs through a fresh LuxiD; its fd count after C{warmup}
    jobs and after all of them.  C{luxid_args}: more LuxiD options (such as
    C{--no-forkserver})."""
    paths = make_root("gntfd")
    seed_config(paths, initial_config("fd.test", "node1.test", "127.0.1.1"))
    wconfd = Daemon(paths, "ganeti-wconfd")
    luxid = Daemon(paths, "ganeti-luxid", *luxid_args)
    try:
        wconfd.start()
        await wconfd.ready(reactor)
        luxid.start()
        await luxid.ready(reactor)
        assert luxid.process is not None
        pid = luxid.process.pid

        def measure() -> FdFigures:
            started = time.monotonic()
            with LuxiClient(paths.luxi_socket, timeout=120) as client:
                tally = run_jobs(client, warmup)
                after_warmup = open_fds(pid)
                for status, number in run_jobs(client, jobs - warmup).items():
                    tally[status] = tally.get(status, 0) + number
                after_all = open_fds(pid)
            return FdFigures(warmup, jobs, after_warmup, after_all, tally, time.monotonic() - started)

        return await threads.deferToThread(measure)
    finally:
        luxid.stop()
        wconfd.stop()
        remove_root(paths)


__all__ = ["FdFigures", "measure_luxid_fds", "open_fds", "run_jobs", "wait_final"]
