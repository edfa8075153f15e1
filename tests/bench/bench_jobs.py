"""scripts/bench jobs: job latency, burst throughput, spawn cost, CLI wall time.

Real daemons (WConfD and LuxiD under twistd) in temporary roots; jobs are
OP_TEST_DELAY(0.001) submitted over LUXI.  Without locks (the job process
sleeps) on WConfD and LuxiD alone; with a node lock and an RPC (the BGL
shared, the node exclusive, NodeD's C{test_delay}) on a one-node loopback
cluster.  The daemons trace every job's hops (L{ganeti.jobs.trace}): the
median time of each hop since the client sent the job is printed, and the
CPU each daemon spends per job (load-independent, unlike wall time).
Then the latency once C{--finished-jobs} more finished jobs are in the queue
(C{submit_final_p50_ms_finished_N}: a busy master keeps them until they are
archived).  Prints tables, then one JSON line.
"""

from __future__ import annotations

import argparse
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
from tests.bench.jobs_big_config import measure_big_config
from tests.bench.jobs_big_config import rows as big_config_rows
from tests.bench.jobtrace import CpuMeter, hop_table, print_cpu, print_hops, traced
from tests.bench.quorum import candidate_config, job_reached, parse_candidates, with_cluster

#: instances in the config of the big config's jobs (L{tests.bench.jobs_big_config}; C{--instances})
BIG_CONFIG = 10000
#: finished jobs added to the queue before the last latency measurement (C{--finished-jobs})
FINISHED = 3000
#: rounds of the latency measurements (the first L{WARM_UP} are left out)
ROUNDS = 60
WARM_UP = 5


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def delay_op() -> dict[str, Any]:
    # on_master False: no RPC (this benchmark runs no NodeD), the job process sleeps
    return {"OP_ID": "OP_TEST_DELAY", "duration": 0.001, "on_master": False,
            "reason": [["gnt:client:bench", "", time.time_ns()]]}


def lock_rpc_op(node: str) -> dict[str, Any]:
    """OP_TEST_DELAY(0.001) on C{node}: the BGL shared, the node locked, NodeD's test_delay."""
    return dict(delay_op(), on_nodes=[node], no_locks=False)


def latency(client: LuxiClient, op: dict[str, Any] | None = None, rounds: int = ROUNDS
            ) -> tuple[list[float], dict[int, tuple[int, int]]]:
    """Submit->final in ms of C{rounds} jobs of C{op} one after the other (the
    warm-up left out), and C{{job id: (send ns, final ns)}} of the same jobs."""
    samples, times = [], {}
    for n in range(rounds):
        sent = time.monotonic_ns()
        job_id = client.submit_job([op or delay_op()])
        status = follow(client, job_id)
        final = time.monotonic_ns()
        assert status == "success", (job_id, status)
        if n >= WARM_UP:
            samples.append((final - sent) / 1e6)
            times[job_id] = (sent, final)
    return samples, times


def burst(client: LuxiClient, count: int = 200) -> float:
    start = time.perf_counter()
    answers = client.submit_many_jobs([[delay_op()] for _ in range(count)])
    ids = [job_id for ok, job_id in answers if ok]
    assert len(ids) == count
    for job_id in ids:
        assert follow(client, job_id) == "success"
    return count / (time.perf_counter() - start)


def with_finished_jobs(client: LuxiClient, count: int, rounds: int = 30) -> list[float]:
    """Milliseconds of single jobs once C{count} more finished jobs are in the queue (a busy master keeps
    its finished jobs until they are archived, 6 hours later)."""
    for start in range(0, count, 500):
        burst(client, min(500, count - start))
    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        assert follow(client, client.submit_job([delay_op()])) == "success"
        took.append((time.perf_counter() - start) * 1000)
    return took


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


async def traced_latency(reactor: Any, paths: Any, trace_path: str, op: dict[str, Any] | None, title: str
                         ) -> tuple[list[float], dict[str, float]]:
    """L{latency} against the LuxiD of C{paths}, with its hop table and
    the daemons' CPU per job printed; the samples and the CPU figures."""
    client = LuxiClient(paths.luxi_socket)
    await task.deferLater(reactor, 0.5, lambda: None)
    await threads.deferToThread(latency, client, op, 1)  # the fork server is up: its CPU is counted
    cpu = CpuMeter(paths.root)
    cpu.start()
    try:
        samples, times = await threads.deferToThread(latency, client, op)
    finally:
        client.close()
    per_job = cpu.stop(ROUNDS)
    print_hops("Hops of one job: " + title, hop_table(trace_path, times))
    print_cpu("CPU per job: " + title, per_job, cpu.faults_per_job)
    return samples, per_job


async def measure(reactor: Any, paths: Any, trace_path: str, finished: int = 0) -> dict[str, float]:
    """Job latency, the burst and the CLI's wall time against the LuxiD of C{paths}, then the latency once
    C{finished} more finished jobs are in its queue."""
    lat, cpu = await traced_latency(reactor, paths, trace_path, None, "no locks")
    client = LuxiClient(paths.luxi_socket)
    try:
        rate = await threads.deferToThread(burst, client)
        cli = await threads.deferToThread(cli_delay, paths)
        crowded = await threads.deferToThread(with_finished_jobs, client, finished) if finished else []
    finally:
        client.close()
    return {
        "submit_final_p50_ms": percentile(lat, 50),
        "submit_final_p99_ms": percentile(lat, 99),
        "cpu_per_job_ms": sum(cpu.values()),
        "burst200_jobs_per_s": rate,
        "cli_delay_ms": percentile(cli, 50) if cli else -1.0,
        **({"submit_final_p50_ms_finished_%d" % finished: percentile(crowded, 50)} if crowded else {}),
    }


async def on_cluster(reactor: Any, candidates: int, trace_path: str) -> dict[str, float]:
    """On the master of a loopback cluster with C{candidates} more master
    candidates (L{tests.bench.quorum}): jobs with a node lock and an RPC, and
    (with candidates) jobs without locks."""

    async def body(paths: Any) -> dict[str, float]:
        figures: dict[str, float] = {}
        mode = " [%d cand.]" % candidates if candidates else " [1 node]"
        if candidates:
            lat, cpu = await traced_latency(reactor, paths, trace_path, None, "no locks" + mode)
            figures.update(submit_final_p50_ms=percentile(lat, 50), submit_final_p99_ms=percentile(lat, 99),
                           cpu_per_job_ms=sum(cpu.values()))
        node = next(iter(candidate_config(candidates).nodes.values())).name
        lat, cpu = await traced_latency(reactor, paths, trace_path, lock_rpc_op(node), "node lock + RPC" + mode)
        figures.update(lock_rpc_p50_ms=percentile(lat, 50), lock_rpc_p99_ms=percentile(lat, 99),
                       lock_rpc_cpu_per_job_ms=sum(cpu.values()))
        return figures

    with traced(trace_path):
        return await with_cluster(reactor, candidate_config(candidates), candidates, body,
                                  job_reached(1), luxid=True)


async def main(reactor: Any, candidates: int = 0, instances: int = BIG_CONFIG, finished: int = FINISHED) -> None:
    load_before = os.getloadavg()[0]
    paths = make_root("gntj")
    seed_config(paths, initial_config("bench.test", "node1.test", "127.0.1.1"))
    trace_dir = make_root("gntt")
    try:
        wconfd = Daemon(paths, "ganeti-wconfd")
        luxid = Daemon(paths, "ganeti-luxid")
        try:
            with traced(os.path.join(trace_dir.root, "single")) as trace_path:
                wconfd.start()
                await wconfd.ready(reactor)
                luxid.start()
                await luxid.ready(reactor)
            results = await measure(reactor, paths, trace_path, finished)
            luxid.stop()  # the spawn measurement takes LuxiD's place on this root
            spawns = await spawn_cost(reactor, paths)
        finally:
            luxid.stop()
            wconfd.stop()
            remove_root(paths)
        results.update({"spawn_p50_ms": percentile(spawns, 50), "spawn_p99_ms": percentile(spawns, 99)})
        results.update(await on_cluster(reactor, 0, os.path.join(trace_dir.root, "onenode")))
        quorum = await on_cluster(reactor, candidates, os.path.join(trace_dir.root, "quorum")) if candidates else {}
        big = await measure_big_config(reactor, instances, delay_op) if instances else {}
    finally:
        remove_root(trace_dir)
    rows = [
        ("OP_TEST_DELAY(0.001) submit->final p50", "%.1f ms" % results["submit_final_p50_ms"], "<= 10 ms", "224 ms"),
        ("OP_TEST_DELAY(0.001) submit->final p99", "%.1f ms" % results["submit_final_p99_ms"], "", ""),
        ("  CPU of all daemons per job", "%.1f ms" % results["cpu_per_job_ms"], "", ""),
        ("... node lock + RPC, 1 node, p50", "%.1f ms" % results["lock_rpc_p50_ms"], "<= 20 ms", "313 ms"),
        ("... node lock + RPC, 1 node, p99", "%.1f ms" % results["lock_rpc_p99_ms"], "", ""),
        ("  CPU of all daemons per job", "%.1f ms" % results["lock_rpc_cpu_per_job_ms"], "", ""),
        ("200 jobs at once (SubmitManyJobs)", "%.1f jobs/s" % results["burst200_jobs_per_s"], ">= 50 jobs/s", "3.5 jobs/s"),
        ("spawn -> handshake confirmed p50", "%.1f ms" % results["spawn_p50_ms"], "<= 20 ms", "~200 ms"),
        ("spawn -> handshake confirmed p99", "%.1f ms" % results["spawn_p99_ms"], "", ""),
        *([("... with %d more finished jobs in the queue, p50" % finished,
            "%.1f ms" % results["submit_final_p50_ms_finished_%d" % finished], "", "")] if finished else []),
        ("gnt-debug delay 0.001 wall time p50", "%.0f ms" % results["cli_delay_ms"] if results["cli_delay_ms"] >= 0 else "n/a (no gnt-debug)", "<= 150 ms", "382 ms"),
    ]
    summary: dict[str, float] = {k: round(v, 3) for k, v in results.items()}
    if candidates:
        mode = " [%d cand.]" % candidates
        rows += [
            ("OP_TEST_DELAY(0.001) submit->final p50" + mode, "%.1f ms" % quorum["submit_final_p50_ms"],
             "<= %.0f ms" % (1.5 * results["submit_final_p50_ms"]), ""),
            ("OP_TEST_DELAY(0.001) submit->final p99" + mode, "%.1f ms" % quorum["submit_final_p99_ms"], "", ""),
            ("... node lock + RPC p50" + mode, "%.1f ms" % quorum["lock_rpc_p50_ms"],
             "<= %.0f ms" % (1.5 * results["lock_rpc_p50_ms"]), ""),
            ("... node lock + RPC p99" + mode, "%.1f ms" % quorum["lock_rpc_p99_ms"], "", ""),
        ]
        summary["candidates"] = candidates
        summary.update({"%s_%dc" % (k, candidates): round(v, 3) for k, v in quorum.items()})
    rows += big_config_rows(big)
    summary.update({k: round(v, 3) for k, v in big.items()})
    summary["load_1min_before"] = round(load_before, 2)
    summary["load_1min_after"] = round(os.getloadavg()[0], 2)
    print("%-52s %-20s %-14s %s" % ("Jobs benchmark", "measured", "target", "Ganeti 3.0"))
    for row in rows:
        print("%-52s %-20s %-14s %s" % row)
    print(orjson.dumps(summary).decode())


if __name__ == "__main__":
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--instances", type=int, default=BIG_CONFIG)
    extra.add_argument("--finished-jobs", type=int, default=FINISHED)
    known, rest = extra.parse_known_args(sys.argv[1:])
    if "-h" in rest or "--help" in rest:
        print("  --instances N  instances of the big config's jobs (default %d; 0: not measured)" % BIG_CONFIG)
        print("  --finished-jobs N  finished jobs added to the queue before the last latency (default %d; 0: not"
              " measured)" % FINISHED)
    count = parse_candidates(rest, "scripts/bench jobs")
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, count, max(0, known.instances),
                                                         max(0, known.finished_jobs))))
