"""scripts/bench scale: listing and updating at 1,000 nodes with 1k and 10k instances.

For each size (1,000 then 10,000 instances, spread over 1,000 nodes, every
one C{admin_state} up): real WConfD, LuxiD (its heartbeat listener on
127.0.1.1) and C{ganeti-rapi} in a temporary root, and 1,000 simulated
nodes as in C{scripts/bench liveness}: the real NodeD heartbeat client
(L{ganeti.heartbeat.client.HeartbeatClient}, mutual TLS, a beat every 5 s),
many per worker process, each node pushing a full report of its instances
running (what a NodeD's reporter pushes).  Measured, as medians:

  - C{gnt-instance list} (default fields: name, os, pnode, status,
    oper_ram; live ones from the pushed reports), the whole command as
    users run it (a new process);
  - C{GET /2/instances?bulk=1} over one HTTPS connection;
  - the live list: LUXI query C{instance} with C{name, status, oper_state,
    oper_ram, oper_vcpus} (what C{gnt-instance list} asks), for 1,000
    instances (a filter on 1,000 names is not what users send: at 10k the
    whole list is measured too);
  - a config update: C{update_instance} of one instance through WConfD,
    durable (one client, sequential).

Each figure carries the CPU the serving daemons (and, for the command, the
client process) spent per operation, which depends less on the machine's
load than wall time; the load average is recorded before and after.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import ssl
import subprocess
import sys
import time
from http.client import HTTPSConnection
from typing import Any

import attrs
import orjson
from twisted.internet import defer, task

from ganeti import crypto
from ganeti.config.bootstrap import grow, initial_config
from ganeti.daemons import free_port, write_node_identity
from ganeti.ha import params as ha_params
from ganeti.paths import Paths
from ganeti.rapi.testing import RapiDaemon
from ganeti.testing.chaos import cpu_seconds
from ganeti.testing.cluster import BIN
from ganeti.testing.daemons import Daemon, LiveOwner, make_root, remove_root, seed_config

NODES = 1000
WORKERS = 5
MASTER = "node1.test"
ADDRESS = "127.0.1.1"
SIZES = (1000, 10000)
LIVE_FIELDS = ["name", "status", "oper_state", "oper_ram", "oper_vcpus"]
LIVENESS_TIMEOUT = 60.0
#: seconds between a simulated node's beats (a NodeD beats every second; what 1,000 beats a second cost LuxiD is
#: bench liveness's matter, and on a loaded 2-core machine they starve the queries measured here)
BEAT_INTERVAL = 5.0
#: TLS handshakes under way at most per worker
HANDSHAKES = 4
#: seconds LuxiD's CPU is watched with nobody asking (its idle rate, taken off the net figures)
IDLE_SECONDS = 10.0
TARGETS = {"list_10k_s": 1.0, "rapi_bulk_10k_s": 1.0, "live_list_1k_ms": 100.0}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]



def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def nodes_up(path: str) -> set[str]:
    """The nodes whose last transition in LuxiD's C{liveness.log} is to up."""
    state: dict[str, str] = {}
    try:
        with open(path, "rb") as handle:
            for line in handle:
                if line.strip():
                    record = orjson.loads(line)
                    state[record["node"]] = record["state"]
    except FileNotFoundError:
        pass
    return {node for node, now in state.items() if now == "up"}


# --- the worker processes: many simulated nodes each -----------------------------------------------------------


async def worker(reactor: Any, root: str, port: int, plan_path: str, first: int, count: int) -> None:
    from ganeti.heartbeat import wire
    from ganeti.heartbeat.client import HeartbeatClient, tls_creator

    with open(plan_path, "rb") as handle:
        plan = orjson.loads(handle.read())[first:first + count]
    creator = tls_creator(Paths(root))

    async def lookup(_failed: bool) -> Any:
        return (MASTER, ADDRESS, port)

    clients = []
    for node, _instances in plan:
        hello = wire.hello(node, "", "boot-%s" % node, None, "bench")
        client = HeartbeatClient(reactor, lambda h=hello: h, lookup, creator, interval=BEAT_INTERVAL)
        clients.append(client)
        client.startService()
        # a few TLS handshakes at a time: a storm of them on a loaded machine misses LuxiD's hello deadline
        while sum(1 for c in clients if c.protocol is None) >= HANDSHAKES:
            await task.deferLater(reactor, 0.02, lambda: None)
    sent: set[int] = set()
    now = time.time()
    while len(sent) < count:
        for index, client in enumerate(clients):
            if index not in sent and client.protocol is not None:
                running = {name: {"state": "running", "memory": 128, "vcpus": 1, "time": now}
                           for name in plan[index][1]}
                if client.send(wire.report(True, instances=running)):
                    sent.add(index)
        await task.deferLater(reactor, 0.1, lambda: None)
    sys.stdout.write("ready %d\n" % count)
    sys.stdout.flush()
    await defer.Deferred()  # beat until killed


# --- one size ----------------------------------------------------------------------------------------------------


def make_config(instances: int) -> Any:
    base = grow(initial_config("bench.test", MASTER, ADDRESS), nodes=NODES - 1, instances=instances)
    return attrs.evolve(base, instances={u: attrs.evolve(i, admin_state="up") for u, i in base.instances.items()})


def timed_cli(root: Paths, luxid_pid: int, *args: str) -> tuple[float, float]:
    """Wall ms of a C{gnt-instance} command, and CPU ms of it plus LuxiD."""
    cpu0, luxid0 = children_cpu(), cpu_seconds(luxid_pid)
    start = time.perf_counter()
    done = subprocess.run([os.path.join(BIN, "gnt-instance"), "--root", root.root, *args], capture_output=True,
                          timeout=300)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit("gnt-instance %s failed: %s" % (" ".join(args), done.stderr.decode()[-2000:]))
    return wall * 1000, (children_cpu() - cpu0 + cpu_seconds(luxid_pid) - luxid0) * 1000


async def measure_size(reactor: Any, instances: int) -> dict[str, Any]:
    from ganeti.luxi.client import LuxiClient

    config = make_config(instances)
    root = make_root("gntsc")
    crypto.bootstrap_secrets(root, "bench.test", node_name=MASTER)
    write_node_identity(root, MASTER, ADDRESS)
    seed_config(root, config)
    # on a loaded 2-core machine LuxiD gets a tenth of a core: with the default 2 s a stall of the reactor (a
    # query) makes the 1,000 nodes flap, each transition costs a log line and an fsync, the stall grows, and
    # every node not up is asked by RPC (which fails) instead of read from its report
    ha_params.write(root, ha_params.HaParams(liveness_timeout=LIVENESS_TIMEOUT,
                                                   failover_timeout=3 * LIVENESS_TIMEOUT))
    key_pem, cert_pem = crypto.generate_key_and_cert("bench.test")
    crypto.write_pem_file(root.rapi_pem, key_pem, cert_pem)
    os.makedirs(os.path.dirname(root.rapi_users), exist_ok=True)
    with open(root.rapi_users, "w") as handle:
        handle.write("")
    by_node: dict[str, list[str]] = {n.name: [] for n in config.nodes.values()}
    node_name = {n.uuid: n.name for n in config.nodes.values()}
    for inst in config.instances.values():
        by_node[node_name[inst.primary_node]].append(inst.name)
    plan_path = os.path.join(root.root, "plan.json")
    with open(plan_path, "wb") as handle:
        handle.write(orjson.dumps(sorted(by_node.items())))
    port = free_port(ADDRESS)
    rapi_port = free_port("127.0.0.1")
    wconfd = Daemon(root, "ganeti-wconfd")
    luxid = Daemon(root, "ganeti-luxid", "--heartbeat-bind", ADDRESS, "--heartbeat-port", str(port),
                   "--no-forkserver", "--no-watcher", "--no-voting", "--yes-do-it")
    rapi = RapiDaemon(root, "127.0.0.1", rapi_port)
    workers: list[subprocess.Popen[bytes]] = []
    out: dict[str, Any] = {"instances": instances, "load_before": os.getloadavg()[0]}
    try:
        for daemon in (wconfd, luxid, rapi):
            daemon.start()
            await daemon.ready(reactor, timeout=180)
        assert luxid.process is not None and rapi.process is not None and wconfd.process is not None
        per = -(-NODES // WORKERS)
        for first in range(0, NODES, per):
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "tests.bench.bench_scale", "--worker", root.root, str(port), plan_path,
                 str(first), str(min(per, NODES - first))], stdout=subprocess.DEVNULL))
        log_path = os.path.join(root.data_dir, "liveness.log")
        deadline = time.monotonic() + 300
        while len(nodes_up(log_path)) < NODES:  # no query before: it would ask the nodes not up yet by RPC
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for %d nodes up (%d)" % (NODES, len(nodes_up(log_path))))
            await task.deferLater(reactor, 0.5, lambda: None)
        out["connect_all_s"] = time.monotonic() + 300 - deadline
        client = LuxiClient(root.luxi_socket, timeout=120)
        names = sorted(i.name for i in config.instances.values())[:1000]
        name_filter = ["|"] + [["=", "name", n] for n in names]

        def running_count() -> int:
            rows = client.query("instance", ["status"], None)["data"]
            return sum(1 for r in rows if r[0][1] == "running")

        deadline = time.monotonic() + 300
        while running_count() < instances:
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for %d instances reported running (%d)"
                                 % (instances, running_count()))
            await task.deferLater(reactor, 0.5, lambda: None)
        await task.deferLater(reactor, 2, lambda: None)  # settle
        # what LuxiD spends with nobody asking (the 1,000 nodes' beats): taken off its CPU per operation
        # for the net figures, which the load moves less (the longer a query waits for the CPU, the more
        # beats LuxiD handles meanwhile)
        idle_cpu0, idle_wall0 = cpu_seconds(luxid.process.pid), time.perf_counter()
        await task.deferLater(reactor, IDLE_SECONDS, lambda: None)
        idle_rate = (cpu_seconds(luxid.process.pid) - idle_cpu0) / (time.perf_counter() - idle_wall0)
        out["luxid_idle_cpu_ms_per_s"] = idle_rate * 1000

        def luxi_series(qfilter: Any, rounds: int) -> tuple[float, float, float]:
            cpu0 = cpu_seconds(luxid.process.pid)
            samples = []
            for _ in range(rounds):
                start = time.perf_counter()
                rows = client.query("instance", LIVE_FIELDS, qfilter)["data"]
                samples.append((time.perf_counter() - start) * 1000)
            assert all(r[1][1] == "running" for r in rows)
            cpu = (cpu_seconds(luxid.process.pid) - cpu0) * 1000
            return percentile(samples, 50), cpu / rounds, max(0.0, cpu - idle_rate * sum(samples)) / rounds

        if instances == 1000:
            out["live_list_ms"], out["live_list_cpu_ms"], out["live_list_net_ms"] = luxi_series(None, 30)
        else:
            (out["live_list_1k_of_10k_ms"], out["live_list_1k_of_10k_cpu_ms"],
             out["live_list_1k_of_10k_net_ms"]) = luxi_series(name_filter, 20)
            out["live_list_ms"], out["live_list_cpu_ms"], out["live_list_net_ms"] = luxi_series(None, 10)
        client.close()

        cli = [timed_cli(root, luxid.process.pid, "list") for _ in range(5)]
        out["list_ms"] = percentile([w for w, _ in cli], 50)
        out["list_cpu_ms"] = percentile([c for _, c in cli], 50)
        out["list_net_ms"] = percentile([max(0.0, c - idle_rate * w) for w, c in cli], 50)

        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = HTTPSConnection("127.0.0.1", rapi_port, context=ctx, timeout=300)
        bulk: list[float] = []
        rapi_cpu0 = cpu_seconds(rapi.process.pid) + cpu_seconds(luxid.process.pid)
        rounds = 5
        for _ in range(rounds):
            start = time.perf_counter()
            conn.request("GET", "/2/instances?bulk=1", headers={"Accept": "application/json"})
            response = conn.getresponse()
            body = response.read()
            bulk.append((time.perf_counter() - start) * 1000)
            if response.status != 200:
                raise SystemExit("bulk: %s %s" % (response.status, body[:200]))
        assert len(json.loads(body)) == instances
        out["rapi_bulk_ms"] = percentile(bulk, 50)
        out["rapi_bulk_cold_ms"] = bulk[0]  # its config-only columns not kept yet (as after a config change)
        out["rapi_bulk_cpu_ms"] = (cpu_seconds(rapi.process.pid) + cpu_seconds(luxid.process.pid)
                                   - rapi_cpu0) * 1000 / rounds
        out["rapi_bulk_net_ms"] = max(0.0, out["rapi_bulk_cpu_ms"] - idle_rate * sum(bulk) / rounds)
        out["rapi_bulk_mib"] = len(body) / 2**20
        conn.close()

    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for daemon in (rapi, luxid, wconfd):
            daemon.stop()
        remove_root(root)
    out.update(await measure_updates(reactor, config))
    out["load_after"] = os.getloadavg()[0]
    return out


async def measure_updates(reactor: Any, config: Any) -> dict[str, float]:
    """Durable C{update_instance} round trips to a WConfD of its own holding
    C{config}, one client, sequential.  As in C{scripts/bench wconfd}, this
    root has no node certificate, so WConfD pushes nothing to the simulated
    nodes: with one it retries the ssconf push to each of the 1,000 nodes
    without a NodeD every few seconds, which measures their absence."""
    from ganeti.wconfd.client import WConfdClient

    root = make_root("gntsu")
    seed_config(root, config)
    wconfd = Daemon(root, "ganeti-wconfd")
    out: dict[str, float] = {}
    try:
        wconfd.start()
        await wconfd.ready(reactor, timeout=180)
        assert wconfd.process is not None
        target = sorted(i.name for i in config.instances.values())[0]
        wclient = await WConfdClient.connect(reactor, root.wconfd_socket)
        owner = LiveOwner(root, 300).owner
        assert await wclient.try_update_locks(owner, [("cluster/BGL", "shared"), ("instance/" + target, "exclusive")]) == []
        inst = await wclient.read_instance(target)
        updates: list[float] = []
        wcpu0 = cpu_seconds(wconfd.process.pid)
        for i in range(100):
            start = time.perf_counter()
            inst = await wclient.update_instance(owner, attrs.evolve(inst, os="img-%d" % i))
            updates.append((time.perf_counter() - start) * 1000)
        out["update_ms"] = percentile(updates, 50)
        out["update_cpu_ms"] = (cpu_seconds(wconfd.process.pid) - wcpu0) * 1000 / 100
        await wclient.close()
        return out
    finally:
        wconfd.stop()
        remove_root(root)


async def main(reactor: Any) -> None:
    sizes = {n: await measure_size(reactor, n) for n in SIZES}
    small, large = sizes[1000], sizes[10000]
    results: dict[str, Any] = {
        "nodes": NODES,
        "list_1k_s": round(small["list_ms"] / 1000, 3),
        "list_10k_s": round(large["list_ms"] / 1000, 3),
        "list_cpu_1k_ms": round(small["list_cpu_ms"], 1),
        "list_cpu_10k_ms": round(large["list_cpu_ms"], 1),
        "rapi_bulk_1k_s": round(small["rapi_bulk_ms"] / 1000, 3),
        "rapi_bulk_10k_s": round(large["rapi_bulk_ms"] / 1000, 3),
        "rapi_bulk_cpu_1k_ms": round(small["rapi_bulk_cpu_ms"], 1),
        "rapi_bulk_cpu_10k_ms": round(large["rapi_bulk_cpu_ms"], 1),
        "rapi_bulk_10k_mib": round(large["rapi_bulk_mib"], 2),
        "rapi_bulk_cold_1k_s": round(small["rapi_bulk_cold_ms"] / 1000, 3),
        "rapi_bulk_cold_10k_s": round(large["rapi_bulk_cold_ms"] / 1000, 3),
        "live_list_1k_ms": round(small["live_list_ms"], 2),
        "live_list_cpu_1k_ms": round(small["live_list_cpu_ms"], 2),
        "live_list_1k_of_10k_ms": round(large["live_list_1k_of_10k_ms"], 2),
        "live_list_10k_ms": round(large["live_list_ms"], 2),
        "live_list_cpu_10k_ms": round(large["live_list_cpu_ms"], 2),
        "list_net_1k_ms": round(small["list_net_ms"], 1),
        "list_net_10k_ms": round(large["list_net_ms"], 1),
        "rapi_bulk_net_1k_ms": round(small["rapi_bulk_net_ms"], 1),
        "rapi_bulk_net_10k_ms": round(large["rapi_bulk_net_ms"], 1),
        "live_list_net_1k_ms": round(small["live_list_net_ms"], 2),
        "live_list_net_10k_ms": round(large["live_list_net_ms"], 2),
        "luxid_idle_cpu_ms_per_s": [round(small["luxid_idle_cpu_ms_per_s"], 1),
                                    round(large["luxid_idle_cpu_ms_per_s"], 1)],
        "update_1k_ms": round(small["update_ms"], 2),
        "update_10k_ms": round(large["update_ms"], 2),
        "update_cpu_1k_ms": round(small["update_cpu_ms"], 2),
        "update_cpu_10k_ms": round(large["update_cpu_ms"], 2),
        "load_1min": [round(small["load_before"], 2), round(large["load_after"], 2)],
    }
    results["growth_list"] = round(large["list_ms"] / small["list_ms"], 2)
    results["growth_rapi_bulk"] = round(large["rapi_bulk_ms"] / small["rapi_bulk_ms"], 2)
    results["growth_live_list"] = round(large["live_list_ms"] / small["live_list_ms"], 2)
    results["growth_update"] = round(large["update_ms"] / small["update_ms"], 2)
    print("%-44s %12s %12s %7s  %s" % ("1,000 nodes (simulated)", "1k inst.", "10k inst.", "growth", "target"))

    def row(label: str, key: str, unit: str, target: str, growth: str | None = None) -> None:
        print("%-44s %9.1f %s %9.1f %s %7s  %s" % (label, small[key], unit, large[key], unit,
                                                   growth or "%.1fx" % (large[key] / small[key]), target))

    row("gnt-instance list, wall", "list_ms", "ms", "<= 1 s at 10k")
    row("  CPU (client + LuxiD)", "list_cpu_ms", "ms", "")
    row("  net of LuxiD's idle CPU", "list_net_ms", "ms", "")
    row("GET /2/instances?bulk=1, wall", "rapi_bulk_ms", "ms", "<= 1 s at 10k")
    row("  CPU (RAPI + LuxiD)", "rapi_bulk_cpu_ms", "ms", "")
    row("  net of LuxiD's idle CPU", "rapi_bulk_net_ms", "ms", "")
    row("  the first one (no columns kept), wall", "rapi_bulk_cold_ms", "ms", "")
    row("live list (LUXI, all instances), wall", "live_list_ms", "ms", "<= 100 ms at 1k")
    row("  CPU (LuxiD)", "live_list_cpu_ms", "ms", "")
    row("  net of LuxiD's idle CPU", "live_list_net_ms", "ms", "")
    print("%-44s %12s %9.1f ms" % ("live list of 1,000 of the 10k, wall", "", large["live_list_1k_of_10k_ms"]))
    row("config update (WConfD, durable), wall", "update_ms", "ms", "flat")
    row("  CPU (WConfD)", "update_cpu_ms", "ms", "")
    row("LuxiD's idle CPU (the nodes' beats)", "luxid_idle_cpu_ms_per_s", "ms/s", "")
    print("%-44s %12.2f %12.2f" % ("load average (1 min), before / after", small["load_before"], large["load_after"]))
    print(orjson.dumps(results).decode())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        root_dir, port_s, plan, first_s, count_s = sys.argv[2:7]
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        task.react(lambda reactor: defer.ensureDeferred(worker(reactor, root_dir, int(port_s), plan, int(first_s),
                                                               int(count_s))))
    else:
        task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
