"""scripts/bench wconfd: WConfD's lock, update, read and death-detection costs.

Runs real daemons (twistd, Unix socket, fsync'd files) in temporary roots.
Prints a table, then one JSON line with the figures the WConfD issue names.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import attrs
import orjson
from twisted.internet import defer, task

from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import ConfigData
from ganeti.testing.daemons import Daemon, LiveOwner, make_root, remove_root, seed_config
from ganeti.wconfd.client import WConfdClient
from tests.bench.quorum import candidate_config, config_reached, parse_candidates, with_cluster


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


async def with_daemon(reactor: Any, config: ConfigData, body: Any) -> Any:
    paths = make_root("gntb")
    seed_config(paths, config)
    daemon = Daemon(paths, "ganeti-wconfd")
    daemon.start()
    try:
        await daemon.ready(reactor, timeout=120)
        return await body(paths)
    finally:
        daemon.stop()
        remove_root(paths)


async def bench_locks(reactor: Any, rounds: int = 4000, seconds: float = 3.0) -> dict[str, float]:
    config = grow(initial_config("bench.test", "node1.test", "127.0.1.1"), nodes=8, instances=64)
    names = sorted(i.name for i in config.instances.values())

    async def body(paths: Any) -> dict[str, float]:
        client = await WConfdClient.connect(reactor, paths.wconfd_socket)
        job = LiveOwner(paths, 1)
        await client.try_update_locks(job.owner, [("cluster/BGL", "shared")])
        lock = "instance/" + names[0]
        samples = []
        for i in range(rounds):
            mode = "exclusive" if i % 2 == 0 else "release"
            start = time.perf_counter()
            await client.try_update_locks(job.owner, [(lock, mode)])
            samples.append((time.perf_counter() - start) * 1000)
        await client.close()

        clients = [await WConfdClient.connect(reactor, paths.wconfd_socket) for _ in range(8)]
        owners = [LiveOwner(paths, 100 + n) for n in range(8)]
        for client, owner in zip(clients, owners):
            await client.try_update_locks(owner.owner, [("cluster/BGL", "shared")])
        done = [0]
        deadline = time.perf_counter() + seconds

        async def worker(n: int) -> None:
            client, owner = clients[n], owners[n].owner
            lock = "instance/" + names[n]
            i = 0
            while time.perf_counter() < deadline:
                await client.try_update_locks(owner, [(lock, "exclusive" if i % 2 == 0 else "release")])
                i += 1
                done[0] += 1

        start = time.perf_counter()
        await defer.gatherResults([defer.ensureDeferred(worker(n)) for n in range(8)])
        elapsed = time.perf_counter() - start
        for client in clients:
            await client.close()
        return {
            "lock_p50_ms": percentile(samples, 50),
            "lock_p99_ms": percentile(samples, 99),
            "lock_ops_per_s_8_clients": done[0] / elapsed,
        }

    return await with_daemon(reactor, config, body)  # type: ignore[no-any-return]


async def bench_updates(reactor: Any, instances: int, seconds: float = 4.0, writers: int = 8,
                        candidates: int = 0) -> dict[str, float]:
    """Durable updates by C{writers} clients; with C{candidates}, on a
    cluster of the master and that many candidates (L{tests.bench.quorum})."""
    if candidates:
        config = candidate_config(candidates, lambda c: grow(c, nodes=999 - candidates, instances=instances))
    else:
        config = grow(initial_config("bench.test", "node1.test", "127.0.1.1"), nodes=999, instances=instances)
    by_writer: list[list[str]] = [[] for _ in range(writers)]
    for index, inst in enumerate(sorted(config.instances.values(), key=lambda i: i.name)[: writers * 16]):
        by_writer[index % writers].append(inst.name)

    async def body(paths: Any) -> dict[str, float]:
        clients = [await WConfdClient.connect(reactor, paths.wconfd_socket) for _ in range(writers)]
        owners = [LiveOwner(paths, 200 + n).owner for n in range(writers)]
        current: list[list[Any]] = []
        for client, owner, names in zip(clients, owners, by_writer):
            request = [("cluster/BGL", "shared")] + [("instance/" + n, "exclusive") for n in sorted(names)]
            assert await client.try_update_locks(owner, request) == []
            current.append([await client.read_instance(n) for n in names])
        done = [0]
        latencies: list[float] = []
        deadline = time.perf_counter() + seconds

        async def writer(n: int) -> None:
            client, owner, mine = clients[n], owners[n], current[n]
            i = 0
            while time.perf_counter() < deadline:
                inst = mine[i % len(mine)]
                start = time.perf_counter()
                new = await client.update_instance(owner, attrs.evolve(inst, os="img-%d" % i))
                latencies.append((time.perf_counter() - start) * 1000)
                mine[i % len(mine)] = new
                i += 1
                done[0] += 1

        start = time.perf_counter()
        await defer.gatherResults([defer.ensureDeferred(writer(n)) for n in range(writers)])
        elapsed = time.perf_counter() - start
        await clients[0].flush_config()
        size = os.path.getsize(paths.config_data)
        bytes_ms: list[float] = []
        read_ms: list[float] = []
        object_ms: list[float] = []
        for _ in range(7):
            start = time.perf_counter()
            data, _serial = await clients[0].read_config_bytes()
            bytes_ms.append((time.perf_counter() - start) * 1000)
            orjson.loads(data)
            read_ms.append((time.perf_counter() - start) * 1000)
        for _ in range(3):
            start = time.perf_counter()
            await clients[0].read_config()
            object_ms.append((time.perf_counter() - start) * 1000)
        for client in clients:
            await client.close()
        return {
            "updates_per_s": done[0] / elapsed,
            "update_p50_ms": percentile(latencies, 50),
            "update_p99_ms": percentile(latencies, 99),
            "config_mb": size / 1e6,
            "full_read_bytes_ms": percentile(bytes_ms, 50),
            "full_read_ms": percentile(read_ms, 50),
            "full_read_objects_ms": percentile(object_ms, 50),
        }

    if candidates:
        return await with_cluster(reactor, config, candidates, body, config_reached(config))  # type: ignore[no-any-return]
    return await with_daemon(reactor, config, body)  # type: ignore[no-any-return]


HOLDER = textwrap.dedent(
    """
    import sys
    from twisted.internet import defer, task
    from ganeti.paths import Paths
    from ganeti.testing.daemons import LiveOwner
    from ganeti.wconfd.client import WConfdClient

    async def main(reactor):
        paths = Paths(sys.argv[1])
        job = LiveOwner(paths, int(sys.argv[2]))
        client = await WConfdClient.connect(reactor, paths.wconfd_socket)
        assert await client.try_update_locks(job.owner, [("cluster/BGL", "exclusive")]) == []
        print("locked", flush=True)
        await defer.Deferred()

    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
    """
)


async def bench_death(reactor: Any, rounds: int = 5) -> dict[str, float]:
    config = initial_config("bench.test", "node1.test", "127.0.1.1")

    async def body(paths: Any) -> dict[str, float]:
        client = await WConfdClient.connect(reactor, paths.wconfd_socket)
        times = []
        for n in range(rounds):
            child = subprocess.Popen([sys.executable, "-c", HOLDER, paths.root, str(300 + n)], stdout=subprocess.PIPE, text=True)
            assert child.stdout is not None and child.stdout.readline() == "locked\n"
            waiter = LiveOwner(paths, 400 + n)
            pending = defer.ensureDeferred(client.acquire(waiter.owner, [("cluster/BGL", "exclusive")], timeout=30))
            await task.deferLater(reactor, 0.05, lambda: None)
            start = time.perf_counter()
            child.kill()
            await pending
            times.append(time.perf_counter() - start)
            child.wait()
            await client.free_locks(waiter.owner)
            waiter.die()
        await client.close()
        return {"dead_owner_release_s": max(times), "dead_owner_release_median_s": percentile(times, 50)}

    return await with_daemon(reactor, config, body)  # type: ignore[no-any-return]


async def main(reactor: Any, candidates: int = 0) -> None:
    results: dict[str, float] = {}
    results.update(await bench_locks(reactor))
    small = await bench_updates(reactor, 1000)
    large = await bench_updates(reactor, 10000)
    results["updates_per_s_1k"] = small["updates_per_s"]
    results["updates_per_s_10k"] = large["updates_per_s"]
    results["update_cost_ratio_10k_to_1k"] = small["updates_per_s"] / large["updates_per_s"]
    results["full_read_ms_10k"] = large["full_read_bytes_ms"]  # the read WConfD serves (cached bytes)
    results.update(await bench_death(reactor))
    quorum: list[tuple[str, dict[str, float]]] = []
    if candidates:
        suffix = "_%dc" % candidates
        for label, count in (("1k", 1000), ("10k", 10000)):
            figures = await bench_updates(reactor, count, candidates=candidates)
            quorum.append((label, figures))
            for key in ("updates_per_s", "update_p50_ms", "update_p99_ms"):
                results["%s_%s%s" % (key, label, suffix)] = figures[key]

    rows = [
        ("lock round trip p50 (1 client)", "%.3f ms" % results["lock_p50_ms"], "<= 0.3 ms", "1.7-2.2 ms"),
        ("lock round trip p99 (1 client)", "%.3f ms" % results["lock_p99_ms"], "", ""),
        ("lock ops/s, 8 clients", "%.0f /s" % results["lock_ops_per_s_8_clients"], ">= 5000 /s", ""),
        ("durable updates/s, 1k inst., 8 writers", "%.0f /s" % small["updates_per_s"], "", ""),
        ("  update latency p50 / p99", "%.2f / %.2f ms" % (small["update_p50_ms"], small["update_p99_ms"]), "", ""),
        ("durable updates/s, 10k inst., 8 writers", "%.0f /s" % large["updates_per_s"], ">= 200 /s", ""),
        ("  update latency p50 / p99", "%.2f / %.2f ms" % (large["update_p50_ms"], large["update_p99_ms"]), "", ""),
        ("cost per update 10k / 1k", "%.2fx" % results["update_cost_ratio_10k_to_1k"], "<= 2x", ""),
        ("config.data size at 1k / 10k", "%.1f / %.1f MB" % (small["config_mb"], large["config_mb"]), "", ""),
        ("full config read 10k (ReadConfig, bytes)", "%.1f ms" % large["full_read_bytes_ms"], "<= 20 ms", "46 ms @2.2k"),
        ("  + client parses JSON (orjson)", "%.1f ms" % large["full_read_ms"], "", ""),
        ("  + client builds config objects", "%.1f ms" % large["full_read_objects_ms"], "", ""),
        ("SIGKILL -> locks granted, worst of 5", "%.3f s" % results["dead_owner_release_s"], "<= 1 s", "up to 311 s"),
        ("SIGKILL -> locks granted, median", "%.3f s" % results["dead_owner_release_median_s"], "", ""),
    ]
    for label, figures in quorum:
        rows.append(("durable updates/s, %s inst., %d cand." % (label, candidates), "%.0f /s" % figures["updates_per_s"],
                     ">= 200 /s" if label == "10k" else "", ""))
        rows.append(("  update latency p50 / p99", "%.2f / %.2f ms" % (figures["update_p50_ms"], figures["update_p99_ms"]),
                     "", ""))
    print("%-42s %-18s %-12s %s" % ("WConfD benchmark", "measured", "target", "Ganeti 3.0"))
    for row in rows:
        print("%-42s %-18s %-12s %s" % row)
    keys = (
        "lock_p50_ms",
        "lock_p99_ms",
        "lock_ops_per_s_8_clients",
        "updates_per_s_1k",
        "updates_per_s_10k",
        "update_cost_ratio_10k_to_1k",
        "full_read_ms_10k",
        "dead_owner_release_s",
    )
    summary = {k: round(results[k], 4) for k in keys}
    if candidates:
        summary["candidates"] = candidates
        summary.update({k: round(v, 4) for k, v in results.items() if k.endswith("_%dc" % candidates)})
    print(orjson.dumps(summary).decode())


if __name__ == "__main__":
    count = parse_candidates(sys.argv[1:], "scripts/bench wconfd")
    task.react(lambda reactor: defer.ensureDeferred(main(reactor, count)))
