"""scripts/bench mond: ganeti-mond's latency, throughput and memory.

One node (127.0.1.1, free ports) with 100 fake instances running (their
config in config.data, served by a real ganeti-confd; their state files
under the node's fake hypervisor), and ganeti-mond (twistd) with every
built-in collector.  The load generator, in this process, keeps one HTTP
connection alive and times sequential requests of C{/1/report/all} and of
C{/metrics}; then 8 connections in parallel (threads) for requests/s.
MonD's RSS is read from /proc before and after the load.  Prints a table,
then one JSON line.

    scripts/bench mond [--requests N] [--instances N]
"""

from __future__ import annotations

import argparse
import http.client
import os
import threading
import time
from typing import Any

import attrs
import orjson
from twisted.internet import defer, task

from ganeti import crypto, serializer, ssconf
from ganeti.config.bootstrap import initial_config
from ganeti.daemons import free_port, write_node_identity
from ganeti.objects import Instance, new_uuid
from ganeti.testing.chaos import cpu_seconds
from ganeti.testing.daemons import make_root, remove_root, seed_config
from ganeti.testing.mond import ConfdDaemon, MondDaemon

ADDRESS = "127.0.1.1"
NODE = "node1.test"
#: Ganeti 3.0.2's MonD (Haskell) idles at this RSS
GANETI_RSS_MB = 17


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return 0.0



def prepare(paths: Any, instances: int) -> None:
    config = initial_config("cluster.test", NODE, ADDRESS)
    node = next(iter(config.nodes))
    now = time.time()
    items = {}
    for number in range(instances):
        uuid = new_uuid()
        items[uuid] = Instance(name="vm%03d.test" % number, uuid=uuid, primary_node=node, os="noop",
                               hypervisor="fake", admin_state="up", disk_template="diskless",
                               beparams={"maxmem": 128, "minmem": 128, "vcpus": 1}, ctime=now, mtime=now,
                               serial_no=1)
    config = attrs.evolve(config, instances=items)
    crypto.bootstrap_secrets(paths, "cluster.test", node_name=NODE)
    seed_config(paths, config)
    ssconf.write_files(paths, ssconf.compute(config), max_size=None)
    write_node_identity(paths, NODE, ADDRESS)
    state = os.path.join(paths.run_dir, "fake-hypervisor")
    os.makedirs(state, exist_ok=True)
    for inst in items.values():
        serializer.write_json(os.path.join(state, inst.name), {"name": inst.name, "memory": 128, "vcpus": 1,
                                                               "state": "running", "started": now, "disks": []},
                              durable=False)
    for directory in ("srv/ganeti/file-storage", "srv/ganeti/shared-file-storage"):
        os.makedirs(os.path.join(paths.root, directory), exist_ok=True)


def sequential(port: int, path: str, count: int) -> tuple[list[float], int]:
    """C{count} GETs of C{path} over one kept-alive connection: their times (s) and the body size."""
    connection = http.client.HTTPConnection(ADDRESS, port, timeout=30)
    times = []
    size = 0
    try:
        for _ in range(count):
            started = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            times.append(time.perf_counter() - started)
            assert response.status == 200, (response.status, body[:200])
            size = len(body)
    finally:
        connection.close()
    return times, size


def parallel(port: int, path: str, connections: int, seconds: float) -> float:
    """Requests/s of C{connections} keep-alive clients (threads) for C{seconds}."""
    counts = [0] * connections
    deadline = time.perf_counter() + seconds

    def client(index: int) -> None:
        connection = http.client.HTTPConnection(ADDRESS, port, timeout=30)
        try:
            while time.perf_counter() < deadline:
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                counts[index] += 1
        finally:
            connection.close()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


async def run(reactor: Any, args: argparse.Namespace) -> None:
    paths = make_root("gntbm")
    confd = mond = None
    try:
        prepare(paths, args.instances)
        confd = ConfdDaemon(paths, ADDRESS, free_port(ADDRESS, udp=True))
        confd.start()
        await confd.ready(reactor)
        mond = MondDaemon(paths, NODE, ADDRESS, free_port(ADDRESS), confd.port)
        mond.start()
        await mond.ready(reactor)
        deadline = time.monotonic() + 60
        while True:  # every collector has reported, the instances are all there
            reports = orjson.loads(mond.get("/1/report/all")[2])
            instances = [r for r in reports if r["name"] == "inst-status-fake"]
            if instances and len(instances[0]["data"].get("instances", [])) == args.instances:
                break
            assert time.monotonic() < deadline, "MonD did not report the instances"
            await task.deferLater(reactor, 0.2, lambda: None)
        assert instances[0]["data"]["status"]["code"] == 0, instances[0]["data"]["status"]
        await task.deferLater(reactor, 6, lambda: None)  # a second cpu-avg-load sample: the full report
        pid = mond.process.pid
        idle = rss_mb(pid)
        cpu_before = cpu_seconds(pid)
        report_times, report_size = sequential(mond.port, "/1/report/all", args.requests)
        metrics_times, metrics_size = sequential(mond.port, "/metrics", args.requests)
        report_rps = parallel(mond.port, "/1/report/all", 8, args.seconds)
        metrics_rps = parallel(mond.port, "/metrics", 8, args.seconds)
        cpu_used = cpu_seconds(pid) - cpu_before
        loaded = rss_mb(pid)
        peak = rss_mb(pid, "VmHWM")
    finally:
        for daemon in (mond, confd):
            if daemon is not None:
                daemon.stop()
        remove_root(paths)
    row = "%-16s %9.3f %9.3f %9.3f %10.0f %10d"
    print("ganeti-mond on %s: %d fake instances, %d built-in collectors; %d sequential requests per path over one "
          "kept-alive connection, then 8 connections for %.0f s" % (ADDRESS, args.instances, len(reports),
                                                                    args.requests, args.seconds))
    print("%-16s %9s %9s %9s %10s %10s" % ("path", "p50 ms", "p90 ms", "p99 ms", "req/s (8)", "bytes"))
    print(row % ("/1/report/all", percentile(report_times, 50) * 1e3, percentile(report_times, 90) * 1e3,
                 percentile(report_times, 99) * 1e3, report_rps, report_size))
    print(row % ("/metrics", percentile(metrics_times, 50) * 1e3, percentile(metrics_times, 90) * 1e3,
                 percentile(metrics_times, 99) * 1e3, metrics_rps, metrics_size))
    print("MonD RSS: %.1f MB idle, %.1f MB after the load (peak %.1f MB); %.1f CPU s for %d requests" % (
        idle, loaded, peak, cpu_used, 2 * args.requests + int((report_rps + metrics_rps) * args.seconds)))
    print("Ganeti 3.0.2's MonD idles at %d MB RSS; targets: both p50 <= 5 ms, RSS <= 40 MB" % GANETI_RSS_MB)
    print(orjson.dumps({
        "report_all_p50_ms": round(percentile(report_times, 50) * 1e3, 3),
        "report_all_p99_ms": round(percentile(report_times, 99) * 1e3, 3),
        "metrics_p50_ms": round(percentile(metrics_times, 50) * 1e3, 3),
        "metrics_p99_ms": round(percentile(metrics_times, 99) * 1e3, 3),
        "report_all_rps": round(report_rps, 1),
        "metrics_rps": round(metrics_rps, 1),
        "mond_rss_mb": round(idle, 1),
        "mond_rss_load_mb": round(loaded, 1),
        "mond_rss_peak_mb": round(peak, 1),
        "report_all_bytes": report_size,
        "metrics_bytes": metrics_size,
        "instances": args.instances,
    }).decode())


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench mond", description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per path (default 2000)")
    parser.add_argument("--instances", type=int, default=100, help="fake instances on the node (default 100)")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of parallel load per path (default 5)")
    args = parser.parse_args()
    task.react(lambda reactor: defer.ensureDeferred(run(reactor, args)))


if __name__ == "__main__":
    main()
