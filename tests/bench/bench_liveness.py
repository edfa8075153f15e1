"""scripts/bench liveness: node liveness at 1,000 nodes, and live instance lists.

Anchors: Ganeti notices a dead node at its next 5-minute watcher run or
failed RPC; Triton CNAPI 11-16 s; Kubernetes 40-50 s; Proxmox ~2 min.

Part 1: one real LuxiD (twistd, its heartbeat listener on 127.0.1.1) and
1,000 simulated nodes: the real NodeD heartbeat client
(L{ganeti.heartbeat.client.HeartbeatClient}, mutual TLS, a beat a second),
many per process from a few worker processes.  Measured: LuxiD's CPU
while the 1,000 beat, durable writes per beat (lines of liveness.log),
and the detection latency of killed nodes (a worker with 100 nodes killed
with SIGKILL: connections close; another stopped with SIGSTOP: connected
but silent), from the kill to the transition LuxiD records.

Part 2: a real 3-node loopback cluster with 1,000 fake instances (running)
spread over the nodes: the LUXI query behind C{gnt-instance list} with the
live fields (status, oper_state, oper_ram, oper_vcpus), answered from the
nodes' pushed reports; and the whole C{gnt-instance list} command.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import attrs
import orjson
from twisted.internet import defer, task

from ganeti import crypto, serializer, ssconf
from ganeti.daemons import free_port, write_node_identity
from ganeti.paths import Paths
from ganeti.testing.chaos import cpu_seconds
from ganeti.testing.daemons import Daemon, make_root, remove_root

NODES = 1000
STEADY_WORKERS = 4
VICTIMS = 100
STEADY_SECONDS = 20.0
INSTANCES = 1000
MASTER = "sim0000.bench"
ADDRESS = "127.0.1.1"


def name_of(index: int) -> str:
    return "sim%04d.bench" % index


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


# --- the worker processes: many real heartbeat clients each ------------------------------------------------------

async def worker(reactor: Any, root: str, port: int, first: int, count: int) -> None:
    from ganeti.heartbeat import wire
    from ganeti.heartbeat.client import HeartbeatClient, tls_creator

    paths = Paths(root)
    creator = tls_creator(paths)

    async def lookup(_failed: bool) -> Any:
        return (MASTER, ADDRESS, port)

    clients = []
    for index in range(first, first + count):
        hello = wire.hello(name_of(index), "", "boot-%d" % index, None, "bench")
        client = HeartbeatClient(reactor, lambda h=hello: h, lookup, creator)
        clients.append(client)
        client.startService()
        if index % 20 == 0:
            await task.deferLater(reactor, 0.05, lambda: None)  # spread the TLS handshakes
    while sum(1 for c in clients if c.protocol is not None) < count:
        await task.deferLater(reactor, 0.1, lambda: None)
    sys.stdout.write("ready %d\n" % count)
    sys.stdout.flush()
    await defer.Deferred()  # beat until killed


def start_worker(root: Paths, port: int, first: int, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.bench.bench_liveness", "--worker", root.root, str(port),
                             str(first), str(count)], stdout=subprocess.PIPE)


# --- part 1 --------------------------------------------------------------------------------------------------------

def records(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as handle:
            return [orjson.loads(line) for line in handle if line.strip()]
    except FileNotFoundError:
        return []



async def wait_for(reactor: Any, check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for %s" % what)
        await task.deferLater(reactor, 0.05, lambda: None)


async def part_liveness(reactor: Any) -> dict[str, Any]:
    root = make_root("gntbl")
    crypto.bootstrap_secrets(root, "bench.test", node_name=MASTER)
    write_node_identity(root, MASTER, ADDRESS)
    names = [name_of(i) for i in range(1, NODES + 1)]
    ssconf.write_files(root, {
        "master_node": MASTER, "node_list": names, "online_nodes": names,
        "node_primary_ips": ["%s %s" % (MASTER, ADDRESS)] + ["%s 127.0.2.1" % n for n in names],
    }, max_size=None)
    port = free_port(ADDRESS)
    luxid = Daemon(root, "ganeti-luxid", "--heartbeat-bind", ADDRESS, "--heartbeat-port", str(port),
                   "--no-forkserver", "--no-watcher", "--no-voting", "--yes-do-it")  # simulated nodes run no NodeD
    log_path = os.path.join(root.data_dir, "liveness.log")
    workers: list[subprocess.Popen[bytes]] = []
    try:
        luxid.start()
        await luxid.ready(reactor)
        steady = NODES - 2 * VICTIMS
        per = steady // STEADY_WORKERS
        first = 1
        plan = [per] * STEADY_WORKERS + [VICTIMS, VICTIMS]
        for count in plan:
            workers.append(start_worker(root, port, first, count))
            first += count
        start = time.monotonic()
        await wait_for(reactor, lambda: len({r["node"] for r in records(log_path) if r["state"] == "up"}) >= NODES,
                       180, "1,000 nodes up")
        connect_s = time.monotonic() - start
        await task.deferLater(reactor, 3, lambda: None)  # settle

        # steady state: CPU and writes while 1,000 nodes beat
        assert luxid.process is not None
        writes_before = len(records(log_path))
        cpu_before, wall_before = cpu_seconds(luxid.process.pid), time.monotonic()
        await task.deferLater(reactor, STEADY_SECONDS, lambda: None)
        cpu_after, wall_after = cpu_seconds(luxid.process.pid), time.monotonic()
        writes = len(records(log_path)) - writes_before
        cpu_pct = 100 * (cpu_after - cpu_before) / (wall_after - wall_before)
        beats = NODES * (wall_after - wall_before)

        # detection: SIGKILL one worker (connections close), SIGSTOP another (silent)
        def victims(first: int) -> set[str]:
            return {name_of(i) for i in range(first, first + VICTIMS)}

        detect: dict[str, list[float]] = {}
        for label, proc, first_index, sig in (
            ("closed", workers[-2], steady + 1, signal.SIGKILL),
            ("silent", workers[-1], steady + VICTIMS + 1, signal.SIGSTOP),
        ):
            wanted = victims(first_index)
            skip = len(records(log_path))
            killed_at = time.time()
            proc.send_signal(sig)

            def seen() -> dict[str, float]:
                return {r["node"]: r["time"] for r in records(log_path)[skip:]
                        if r["node"] in wanted and r["state"] == "unreachable"}

            await wait_for(reactor, lambda: len(seen()) >= VICTIMS, 30, "%s nodes unreachable" % label)
            detect[label] = [t - killed_at for t in seen().values()]
        workers[-1].send_signal(signal.SIGCONT)
        all_detect = detect["closed"] + detect["silent"]
        return {
            "nodes_simulated": NODES,
            "worker_processes": len(workers),
            "connect_all_s": round(connect_s, 2),
            "detect_p50_s": round(percentile(all_detect, 50), 3),
            "detect_p99_s": round(percentile(all_detect, 99), 3),
            "detect_closed_p99_s": round(percentile(detect["closed"], 99), 3),
            "detect_silent_p99_s": round(percentile(detect["silent"], 99), 3),
            "luxid_cpu_pct_1000_nodes": round(cpu_pct, 1),
            "writes_per_beat": writes / beats,
            "durable_writes_steady": writes,
        }
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
        luxid.stop()
        remove_root(root)


# --- part 2 --------------------------------------------------------------------------------------------------------

async def part_instances(reactor: Any) -> dict[str, Any]:
    from ganeti.config.bootstrap import grow
    from ganeti.luxi.client import LuxiClient
    from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok

    base = grow(loopback_config(3), instances=INSTANCES, disks_per_instance=0)
    config = attrs.evolve(base, instances={u: attrs.evolve(i, admin_state="up") for u, i in base.instances.items()})
    root = make_root("gntbi")
    cluster = LoopbackCluster(reactor, root, config, luxid=False, prefix="gntbi")
    try:
        await cluster.start()
        uuid_to_root = {uuid: paths for uuid, paths in zip(
            [n.uuid for n in sorted(config.nodes.values(), key=lambda n: n.name or "")], cluster.roots)}
        now = time.time()
        for inst in config.instances.values():
            paths = uuid_to_root[inst.primary_node]
            directory = os.path.join(paths.run_dir, "fake-hypervisor")
            os.makedirs(directory, exist_ok=True)
            serializer.write_file(os.path.join(directory, inst.name), orjson.dumps(
                {"name": inst.name, "memory": 128, "vcpus": 1, "state": "running", "started": now, "disks": []}),
                durable=False)
        await cluster.start_daemon(cluster.luxid)
        client = LuxiClient(cluster.master.luxi_socket, timeout=60)
        fields = ["name", "status", "oper_state", "oper_ram", "oper_vcpus"]

        def all_running() -> bool:
            rows = client.query("instance", fields, None)["data"]
            return len(rows) == INSTANCES and all(r[1][1] == "running" for r in rows)

        await wait_for(reactor, all_running, 120, "1,000 instances reported running")
        samples = []
        for _ in range(50):
            start = time.perf_counter()
            client.query("instance", fields, None)
            samples.append((time.perf_counter() - start) * 1000)
        cli = []
        for _ in range(5):
            start = time.perf_counter()
            ok(cluster.master, "gnt-instance", "list", "-o", "name,status,oper_ram,oper_vcpus")
            cli.append((time.perf_counter() - start) * 1000)
        client.close()
        return {
            "instance_list_live_1000_ms": round(percentile(samples, 50), 2),
            "instance_list_live_1000_p99_ms": round(percentile(samples, 99), 2),
            "gnt_instance_list_1000_cli_ms": round(percentile(cli, 50), 1),
        }
    finally:
        await cluster.stop()
        remove_root(root)


async def main(reactor: Any) -> None:
    results = await part_liveness(reactor)
    results.update(await part_instances(reactor))
    rows = [
        ("simulated nodes (worker processes)", "%d (%d)" % (results["nodes_simulated"], results["worker_processes"]),
         ""),
        ("all connected and up after", "%.2f s" % results["connect_all_s"], ""),
        ("detection of a dead node p50", "%.2f s" % results["detect_p50_s"], "Ganeti: 5 min watcher"),
        ("detection of a dead node p99", "%.2f s" % results["detect_p99_s"], "Triton 11-16 s, k8s 40-50 s"),
        ("  connection closed (SIGKILL) p99", "%.2f s" % results["detect_closed_p99_s"], ""),
        ("  connected but silent (SIGSTOP) p99", "%.2f s" % results["detect_silent_p99_s"], "target <= 3 s"),
        ("LuxiD CPU, 1,000 nodes beating", "%.1f %%" % results["luxid_cpu_pct_1000_nodes"], "target <= 25 %"),
        ("durable writes per beat", "%g" % results["writes_per_beat"], "target 0"),
        ("live instance list, 1,000 instances p50", "%.2f ms" % results["instance_list_live_1000_ms"],
         "target <= 100 ms"),
        ("  p99", "%.2f ms" % results["instance_list_live_1000_p99_ms"], ""),
        ("gnt-instance list (whole command) p50", "%.0f ms" % results["gnt_instance_list_1000_cli_ms"], ""),
    ]
    print("%-42s %16s  %s" % ("Node liveness benchmark", "measured", "anchor / target"))
    for row in rows:
        print("%-42s %16s  %s" % row)
    print(orjson.dumps(results).decode())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        root_dir, port_s, first_s, count_s = sys.argv[2:6]
        task.react(lambda reactor: defer.ensureDeferred(worker(reactor, root_dir, int(port_s), int(first_s),
                                                               int(count_s))))
    else:
        task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
