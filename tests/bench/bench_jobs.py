"""scripts/bench jobs: job latency, burst throughput, spawn cost, CLI wall time.

Real daemons (WConfD and LuxiD under twistd) in temporary roots; jobs are
OP_TEST_DELAY(0.001) submitted over LUXI.  Prints a table, then one JSON
line with the figures the LuxiD issue names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti.config.bootstrap import initial_config
from ganeti.jobs.model import QueuedJob
from ganeti.jobs.queue import JobQueueDir
from ganeti.luxi.client import LuxiClient
from ganeti.luxid.forkclient import ForkServer
from ganeti.luxid.spawner import JobChannel
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config
from tests.bench.jobs import follow
from tests.bench.quorum import candidate_config, job_reached, parse_candidates, with_cluster


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def delay_op() -> dict[str, Any]:
    # on_master False: no RPC (this benchmark runs no NodeD), the job process sleeps
    return {"OP_ID": "OP_TEST_DELAY", "duration": 0.001, "on_master": False,
            "reason": [["gnt:client:bench", "", time.time_ns()]]}


def latency(client: LuxiClient, rounds: int = 60) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        job_id = client.submit_job([delay_op()])
        assert follow(client, job_id) == "success"
        samples.append((time.perf_counter() - start) * 1000)
    return samples[5:]  # warm-up


def burst(client: LuxiClient, count: int = 200) -> float:
    start = time.perf_counter()
    answers = client.submit_many_jobs([[delay_op()] for _ in range(count)])
    ids = [job_id for ok, job_id in answers if ok]
    assert len(ids) == count
    for job_id in ids:
        assert follow(client, job_id) == "success"
    return count / (time.perf_counter() - start)


def cli_delay(paths: Any, rounds: int = 15) -> list[float]:
    gnt_debug = shutil.which("gnt-debug") or os.path.join(os.path.dirname(sys.executable), "gnt-debug")
    if not os.path.exists(gnt_debug):
        return []
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        result = subprocess.run([gnt_debug, "--root", paths.root, "delay", "--no-master", "0.001"], capture_output=True, text=True)
        samples.append((time.perf_counter() - start) * 1000)
        assert result.returncode == 0, result.stdout + result.stderr
    return samples[3:]


async def spawn_cost(reactor: Any, paths: Any, rounds: int = 40) -> list[float]:
    """LuxiD's own spawning path (fork server + handshake), measured in-process."""
    queue = JobQueueDir(paths)
    queue.open()
    exits: dict[int, defer.Deferred] = {}

    def exited(info: Any) -> None:
        exits.pop(info.job_id).callback(info)

    server = ForkServer(reactor, paths, exited)
    server.start()
    samples = []
    try:
        for job_id in queue.allocate_ids(rounds):
            job = QueuedJob.new(job_id, [delay_op()])
            queue.write_job(job)

            def record(jid: int, lockfile: str, pid: int, job: QueuedJob = job) -> None:
                job.livelock, job.process_id = lockfile, pid
                queue.write_job(job)

            channel = JobChannel(job_id, paths, reactor, record)
            exits[job_id] = defer.Deferred()
            start = time.perf_counter()
            server.spawn(channel)
            await channel.ready
            samples.append((time.perf_counter() - start) * 1000)
            await exits[job_id]
    finally:
        server.stop()
        queue.close()
    return samples[3:]


async def measure(reactor: Any, paths: Any) -> dict[str, float]:
    """Job latency, the burst and the CLI's wall time against the LuxiD of C{paths}."""
    client = LuxiClient(paths.luxi_socket)
    await task.deferLater(reactor, 0.5, lambda: None)
    lat = await threads.deferToThread(latency, client)
    rate = await threads.deferToThread(burst, client)
    cli = await threads.deferToThread(cli_delay, paths)
    client.close()
    return {
        "job_latency_p50_ms": percentile(lat, 50),
        "job_latency_p99_ms": percentile(lat, 99),
        "burst200_jobs_per_s": rate,
        "cli_delay_ms": percentile(cli, 50) if cli else -1.0,
    }


async def with_candidates(reactor: Any, candidates: int) -> dict[str, float]:
    """Job latency, burst and CLI wall time on the master of a cluster with
    C{candidates} master candidates (L{tests.bench.quorum})."""

    async def body(paths: Any) -> dict[str, float]:
        return await measure(reactor, paths)

    return await with_cluster(reactor, candidate_config(candidates), candidates, body,
                              job_reached(1), luxid=True)


async def main(reactor: Any, candidates: int = 0) -> None:
    paths = make_root("gntj")
    seed_config(paths, initial_config("bench.test", "node1.test", "127.0.1.1"))
    wconfd = Daemon(paths, "ganeti-wconfd")
    luxid = Daemon(paths, "ganeti-luxid")
    try:
        wconfd.start()
        await wconfd.ready(reactor)
        luxid.start()
        await luxid.ready(reactor)
        results = await measure(reactor, paths)
        luxid.stop()  # the spawn measurement takes LuxiD's place on this root
        spawns = await spawn_cost(reactor, paths)
    finally:
        luxid.stop()
        wconfd.stop()
        remove_root(paths)
    results.update({"spawn_p50_ms": percentile(spawns, 50), "spawn_p99_ms": percentile(spawns, 99)})
    rows = [
        ("OP_TEST_DELAY(0.001) submit->success p50", "%.1f ms" % results["job_latency_p50_ms"], "<= 25 ms", "240 ms"),
        ("OP_TEST_DELAY(0.001) submit->success p99", "%.1f ms" % results["job_latency_p99_ms"], "", ""),
        ("200 jobs at once (SubmitManyJobs)", "%.1f jobs/s" % results["burst200_jobs_per_s"], ">= 50 jobs/s", "3.5 jobs/s"),
        ("spawn -> handshake confirmed p50", "%.1f ms" % results["spawn_p50_ms"], "<= 20 ms", "~200 ms"),
        ("spawn -> handshake confirmed p99", "%.1f ms" % results["spawn_p99_ms"], "", ""),
        ("gnt-debug delay 0.001 wall time p50", "%.0f ms" % results["cli_delay_ms"] if results["cli_delay_ms"] >= 0 else "n/a (no gnt-debug)", "<= 150 ms", "382 ms"),
    ]
    summary: dict[str, float] = {k: round(v, 3) for k, v in results.items()}
    if candidates:
        quorum = await with_candidates(reactor, candidates)
        mode = " [%d cand.]" % candidates
        rows += [
            ("OP_TEST_DELAY(0.001) submit->success p50" + mode, "%.1f ms" % quorum["job_latency_p50_ms"], "<= 25 ms",
             ""),
            ("OP_TEST_DELAY(0.001) submit->success p99" + mode, "%.1f ms" % quorum["job_latency_p99_ms"], "", ""),
            ("200 jobs at once (SubmitManyJobs)" + mode, "%.1f jobs/s" % quorum["burst200_jobs_per_s"],
             ">= 50 jobs/s", ""),
            ("gnt-debug delay 0.001 wall time p50" + mode,
             "%.0f ms" % quorum["cli_delay_ms"] if quorum["cli_delay_ms"] >= 0 else "n/a (no gnt-debug)", "<= 150 ms",
             ""),
        ]
        summary["candidates"] = candidates
        summary.update({"%s_%dc" % (k, candidates): round(v, 3) for k, v in quorum.items()})
    print("%-52s %-20s %-14s %s" % ("Jobs benchmark", "measured", "target", "Ganeti 3.0"))
    for row in rows:
        print("%-52s %-20s %-14s %s" % row)
    print(orjson.dumps(summary).decode())


if __name__ == "__main__":
    count = parse_candidates(sys.argv[1:], "scripts/bench jobs")
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, count)))
