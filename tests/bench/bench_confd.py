"""scripts/bench confd: RConfD queries/s and latency on loopback.

One ganeti-confd daemon (twistd, 127.0.1.1, a 1,000-node config) and a load
generator in a separate process: a raw non-blocking UDP socket that keeps 64
pre-signed requests in flight (each slot resends as soon as its reply is
in) and times every reply.  The generator's own CPU use is reported beside
the daemon's, to show which one is the bottleneck.  Prints a table, then
one JSON line.

    scripts/bench confd [--seconds N] [--inflight N]
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import subprocess
import sys
import time
from typing import Any

import orjson

from ganeti.confd import wire

KEY = b"00112233445566778899aabbccddeeff00112233\n"  # the integration tests' key (wait_ready uses it)
ADDRESS = "127.0.1.1"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


def loadgen(port: int, qtype: int, names: list[str] | None, inflight: int, seconds: float, warmup: float = 0.5) -> dict[str, Any]:
    """Run in the generator process: closed loop with C{inflight} slots."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
    sock.connect((ADDRESS, port))
    sock.setblocking(False)
    now = time.time()
    packets = []
    for slot in range(inflight):
        query = names[(slot * 37) % len(names)] if names else None
        packets.append(wire.pack_request(KEY, wire.request(qtype, query, "s%d" % slot), now))
    # check one answer end to end, signature included
    sock.send(packets[0])
    select.select([sock], [], [], 2)
    rep, salt = wire.unpack_reply(KEY, sock.recv(65536))
    assert salt == "s0" and rep["status"] == wire.REPL_STATUS_OK, rep
    sent_at = [0.0] * inflight
    latencies: list[float] = []
    done = resent = 0
    clock = time.perf_counter
    cpu0 = os.times()
    start = clock()
    measure_from = start + warmup
    end = measure_from + seconds
    for slot in range(inflight):
        sent_at[slot] = clock()
        sock.send(packets[slot])
    recv, send = sock.recv, sock.send
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    cpu_measure = None
    while True:
        t = clock()
        if t >= end:
            break
        if cpu_measure is None and t >= measure_from:
            cpu_measure = os.times()
        if not poll.poll(200):
            for slot in range(inflight):  # lost packets: resend what is overdue
                if clock() - sent_at[slot] > 0.5:
                    sent_at[slot] = clock()
                    send(packets[slot])
                    resent += 1
            continue
        while True:
            try:
                data = recv(65536)
            except BlockingIOError:
                break
            t = clock()
            i = data.index(b'"salt":"s', len(data) - 80) + 9
            slot = int(data[i : data.index(b'"', i)])
            if t >= measure_from:
                latencies.append(t - sent_at[slot])
                done += 1
            sent_at[slot] = t
            send(packets[slot])
    elapsed = clock() - measure_from
    cpu1 = os.times()
    cpu_m = cpu_measure or cpu0
    return {
        "qps": done / elapsed,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "max_ms": max(latencies) * 1000,
        "replies": done,
        "resent": resent,
        "gen_cpu": ((cpu1.user + cpu1.system) - (cpu_m.user + cpu_m.system)) / elapsed,
    }


def proc_cpu(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_generator(port: int, qtype: int, names: list[str] | None, inflight: int, seconds: float) -> dict[str, Any]:
    args = orjson.dumps({"port": port, "qtype": qtype, "names": names, "inflight": inflight, "seconds": seconds})
    out = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_confd", "--loadgen"], input=args, capture_output=True, check=True, timeout=seconds + 60
    )
    return orjson.loads(out.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="scripts/bench confd")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--loadgen", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loadgen:
        spec = orjson.loads(sys.stdin.buffer.read())
        print(orjson.dumps(loadgen(spec["port"], spec["qtype"], spec["names"], spec["inflight"], spec["seconds"])).decode())
        return

    from ganeti.config.bootstrap import grow, initial_config
    from ganeti.daemons import free_port
    from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config
    from tests.integration.test_confd import wait_ready

    config = grow(initial_config("bench.test", "node1.example.test", ADDRESS), nodes=args.nodes - 1, instances=args.nodes)
    names = sorted(n.name for n in config.nodes.values())
    paths = make_root("gcfb")
    seed_config(paths, config)
    with open(paths.hmac_key, "wb") as handle:
        handle.write(KEY)
    port = free_port(udp=True)
    daemon = Daemon(paths, "ganeti-confd", "--bind", ADDRESS, "--port", str(port))
    daemon.start()
    results: dict[str, dict[str, Any]] = {}
    try:
        wait_ready(daemon, ADDRESS, port)
        assert daemon.process is not None
        for label, qtype, qnames in [
            ("CLUSTER_MASTER", wire.REQ_CLUSTER_MASTER, None),
            ("NODE_ROLE_BYNAME", wire.REQ_NODE_ROLE_BYNAME, names),
        ]:
            cpu0, t0 = proc_cpu(daemon.process.pid), time.monotonic()
            result = run_generator(port, qtype, qnames, args.inflight, args.seconds)
            # daemon CPU over the whole generator run (includes warm-up and start-up idle time)
            result["daemon_cpu"] = (proc_cpu(daemon.process.pid) - cpu0) / (time.monotonic() - t0)
            results[label] = result
    finally:
        daemon.stop()
        remove_root(paths)

    print("confd on %s, %d nodes, %d requests in flight, %.0f s per query type, load generator: separate process, "
          "raw non-blocking UDP socket" % (ADDRESS, args.nodes, args.inflight, args.seconds))
    header = "%-18s %10s %8s %8s %8s %8s %11s %11s" % ("query", "q/s", "p50 ms", "p99 ms", "max ms", "resent", "daemon cpu", "loadgen cpu")
    print(header)
    print("-" * len(header))
    for label, r in results.items():
        print("%-18s %10.0f %8.3f %8.3f %8.3f %8d %10.0f%% %10.0f%%" % (
            label, r["qps"], r["p50_ms"], r["p99_ms"], r["max_ms"], r["resent"], r["daemon_cpu"] * 100, r["gen_cpu"] * 100))
    cm, nr = results["CLUSTER_MASTER"], results["NODE_ROLE_BYNAME"]
    print("Ganeti 3.0.2 (100 in flight): 3,300 q/s CLUSTER_MASTER, 780 q/s NODE_ROLE_BYNAME; target >= 10,000 q/s, p99 < 5 ms")
    print(orjson.dumps({
        "cluster_master_qps": round(cm["qps"], 1),
        "node_role_qps": round(nr["qps"], 1),
        "p50_ms": round(max(cm["p50_ms"], nr["p50_ms"]), 3),
        "p99_ms": round(max(cm["p99_ms"], nr["p99_ms"]), 3),
        "cluster_master_p50_ms": round(cm["p50_ms"], 3),
        "cluster_master_p99_ms": round(cm["p99_ms"], 3),
        "node_role_p50_ms": round(nr["p50_ms"], 3),
        "node_role_p99_ms": round(nr["p99_ms"], 3),
        "inflight": args.inflight,
        "nodes": args.nodes,
        "loadgen_cpu": round(max(cm["gen_cpu"], nr["gen_cpu"]), 3),
    }).decode())


if __name__ == "__main__":
    main()
