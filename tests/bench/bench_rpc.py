"""scripts/bench rpc: node RPC round trips, fan-out and config distribution.

Runs three real noded (twistd) on 127.0.1.1-3 in temporary roots sharing
one cluster certificate.  Prints a table, then one JSON line.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

import orjson
from twisted.internet import defer, task

from ganeti import crypto
from ganeti.config.bootstrap import grow, initial_config
from ganeti.daemons import free_port
from ganeti.rpc import RpcClient, wire
from ganeti.testing.chaos import cpu_seconds
from ganeti.testing.daemons import Daemon, make_root, remove_root


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


async def timed(samples: list[float], call: Any) -> Any:
    start = time.perf_counter()
    result = await call()
    samples.append((time.perf_counter() - start) * 1000)
    return result


async def main(reactor: Any) -> None:
    roots = [make_root("gntr%d" % i) for i in (1, 2, 3)]
    crypto.bootstrap_secrets(roots[0], "bench.test", node_name="node1.test")
    for paths in roots[1:]:
        os.makedirs(paths.data_dir, exist_ok=True)
        shutil.copy(roots[0].server_pem, paths.server_pem)
    port = free_port()
    daemons = [
        Daemon(p, "ganeti-noded", "--bind", "127.0.1.%d" % i, "--port", str(port), tcp=("127.0.1.%d" % i, port))
        for i, p in enumerate(roots, 1)
    ]
    nodes = {"node%d" % i: "127.0.1.%d" % i for i in (1, 2, 3)}
    results: dict[str, float] = {}
    try:
        for daemon in daemons:
            daemon.start()
        for daemon in daemons:
            await daemon.ready(reactor, timeout=60)

        client = RpcClient.from_paths(reactor, roots[0], port=port)
        for _ in range(50):
            (await client.call_one("node1", "127.0.1.1", "version")).raise_on_fail()
        samples: list[float] = []
        assert daemons[0].process is not None
        server = daemons[0].process.pid
        cpu, server_cpu = time.process_time(), cpu_seconds(server)
        for _ in range(1000):
            result = await timed(samples, lambda: client.call_one("node1", "127.0.1.1", "version"))
            result.raise_on_fail()
        results["rpc_client_cpu_us"] = (time.process_time() - cpu) / len(samples) * 1e6  # the caller's CPU per call
        results["rpc_server_cpu_us"] = (cpu_seconds(server) - server_cpu) / len(samples) * 1e6  # NodeD's (10 ms ticks)
        results["rpc_p50_ms"] = percentile(samples, 50)
        results["rpc_p99_ms"] = percentile(samples, 99)

        fanout: list[float] = []
        for _ in range(300):
            answers = await timed(fanout, lambda: client.call(nodes, "version"))
            for answer in answers.values():
                answer.raise_on_fail()
        results["fanout3_p50_ms"] = percentile(fanout, 50)
        results["fanout3_p99_ms"] = percentile(fanout, 99)

        fresh = RpcClient.from_paths(reactor, roots[0], port=port, persistent=False)
        new_tls: list[float] = []
        for _ in range(200):
            result = await timed(new_tls, lambda: fresh.call_one("node1", "127.0.1.1", "version"))
            result.raise_on_fail()
        await fresh.close()
        results["rpc_new_tls_p50_ms"] = percentile(new_tls, 50)
        results["rpc_new_tls_p99_ms"] = percentile(new_tls, 99)

        config = grow(initial_config("bench.test", "node1.test", "127.0.1.1"), nodes=2, instances=10000)
        data = config.to_json()
        vpath = wire.virtual_path(roots[0].root, roots[0].config_data)
        runs: list[float] = []
        for _ in range(5):
            start = time.perf_counter()
            details = wire.file_details(vpath, data, mode=0o640)  # encoding is part of the cost
            answers = await client.call(nodes, "upload_file", [details], timeout=wire.TMO_NORMAL)
            runs.append(time.perf_counter() - start)
            for answer in answers.values():
                answer.raise_on_fail()
        for paths in roots:
            with open(paths.config_data, "rb") as handle:
                assert handle.read() == data
        results["config_distribution_10k_s"] = percentile(runs, 50)
        results["config_10k_mb"] = len(data) / 1e6
        await client.close()
    finally:
        for daemon in daemons:
            daemon.stop()
        for paths in roots:
            remove_root(paths)

    rows = [
        ("version round trip p50 (kept connection)", "%.3f ms" % results["rpc_p50_ms"]),
        ("version round trip p99 (kept connection)", "%.3f ms" % results["rpc_p99_ms"]),
        ("  the caller's CPU per round trip", "%.0f us" % results["rpc_client_cpu_us"]),
        ("  NodeD's CPU per round trip", "%.0f us" % results["rpc_server_cpu_us"]),
        ("version with a new TLS handshake p50", "%.3f ms" % results["rpc_new_tls_p50_ms"]),
        ("version with a new TLS handshake p99", "%.3f ms" % results["rpc_new_tls_p99_ms"]),
        ("fan-out version to 3 nodes p50", "%.3f ms" % results["fanout3_p50_ms"]),
        ("fan-out version to 3 nodes p99", "%.3f ms" % results["fanout3_p99_ms"]),
        ("config.data 10k instances (%.1f MB) to 3 nodes" % results["config_10k_mb"],
         "%.3f s" % results["config_distribution_10k_s"]),
    ]
    print("%-48s %s" % ("Node RPC benchmark", "measured"))
    for row in rows:
        print("%-48s %s" % row)
    keys = ("rpc_p50_ms", "rpc_p99_ms", "rpc_client_cpu_us", "rpc_server_cpu_us", "rpc_new_tls_p50_ms", "fanout3_p50_ms",
            "config_distribution_10k_s")
    print(orjson.dumps({k: round(results[k], 4) for k in keys}).decode())


if __name__ == "__main__":
    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
