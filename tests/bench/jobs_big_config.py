"""Jobs on a big config, a part of C{scripts/bench jobs}: WConfD and LuxiD
(with its fork server) holding 1,000 nodes and C{--instances} instances
(the scale benchmark's config), jobs one after the other as fast as they
come back: test delays without locks (the config does not change) and tag
changes on one instance (each changes it).  Every job process needs the
config before its job runs; the figures show what that costs per job.
Then a LUXI query right after each of a few tag changes: LuxiD reads the
config again for it."""

from __future__ import annotations

import time
from typing import Any

from twisted.internet import threads

from ganeti.luxi.client import LuxiClient
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config
from tests.bench.jobs import follow
from tests.bench.jobtrace import CpuMeter

#: jobs per series (after one of each left out)
ROUNDS = 15


def _series(client: LuxiClient, ops: list[dict[str, Any]]) -> list[float]:
    """Submit->final in ms of each of C{ops}, one after the other; every job must succeed."""
    samples = []
    for op in ops:
        start = time.perf_counter()
        status = follow(client, client.submit_job([op]))
        samples.append((time.perf_counter() - start) * 1000)
        if status != "success":
            raise SystemExit("job %s on the big config ended %s" % (op["OP_ID"], status))
    return samples


def _queries_after_changes(client: LuxiClient, tags: Any) -> list[float]:
    """Wall ms of a query of the node names (LuxiD answers it from the config) right after each of
    L{ROUNDS} tag changes: LuxiD reads the config again."""
    samples = []
    for op in tags(ROUNDS):
        _series(client, [op])
        start = time.perf_counter()
        client.query("node", ["name"], None)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def measure_big_config(reactor: Any, instances: int, delay_op: Any) -> dict[str, float]:
    """C{{"big_config_<series>_p50_ms", "big_config_<series>_cpu_ms"}} for the series C{delay} and C{tags},
    and C{big_config_query_after_change_ms}."""
    from tests.bench.bench_jobs import percentile
    from tests.bench.bench_scale import make_config

    config = make_config(instances)
    target = sorted(i.name for i in config.instances.values())[0]
    paths = make_root("gntjb")
    seed_config(paths, config)
    wconfd, luxid = Daemon(paths, "ganeti-wconfd"), Daemon(paths, "ganeti-luxid")
    out: dict[str, float] = {"big_config_instances": instances}
    try:
        wconfd.start()
        await wconfd.ready(reactor, timeout=180)
        luxid.start()
        await luxid.ready(reactor, timeout=180)
        client = LuxiClient(paths.luxi_socket, timeout=120)
        try:
            def tags(count: int) -> list[dict[str, Any]]:
                return [{"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": target,
                         "tags": ["bench%d-%d" % (time.time_ns(), i)]} for i in range(count)]

            for name, make in (("delay", lambda n: [delay_op() for _ in range(n)]), ("tags", tags)):
                await threads.deferToThread(_series, client, make(1))
                cpu = CpuMeter(paths.root)
                cpu.start()
                samples = await threads.deferToThread(_series, client, make(ROUNDS))
                out["big_config_%s_p50_ms" % name] = percentile(samples, 50)
                out["big_config_%s_cpu_ms" % name] = sum(cpu.stop(ROUNDS).values())
            queries = await threads.deferToThread(_queries_after_changes, client, tags)
            out["big_config_query_after_change_ms"] = percentile(queries, 50)
        finally:
            client.close()
    finally:
        luxid.stop()
        wconfd.stop()
        remove_root(paths)
    return out


def rows(figures: dict[str, float]) -> list[tuple[str, str, str, str]]:
    if not figures:
        return []
    where = "[%d instances]" % figures["big_config_instances"]
    return [
        ("OP_TEST_DELAY(0.001) p50 " + where, "%.1f ms" % figures["big_config_delay_p50_ms"], "", ""),
        ("  CPU of all daemons per job", "%.1f ms" % figures["big_config_delay_cpu_ms"], "", ""),
        ("OP_TAGS_SET on an instance p50 " + where, "%.1f ms" % figures["big_config_tags_p50_ms"], "", ""),
        ("  CPU of all daemons per job", "%.1f ms" % figures["big_config_tags_cpu_ms"], "", ""),
        ("node names query after a change p50 " + where, "%.1f ms" % figures["big_config_query_after_change_ms"],
         "", ""),
    ]
