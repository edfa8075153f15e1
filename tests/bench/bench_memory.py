"""scripts/bench memory: the idle memory of a one-node master's daemons.

Starts a one-node loopback master (ganeti-noded, ganeti-wconfd,
ganeti-luxid with its fork server, ganeti-rapi, ganeti-confd and
ganeti-mond, each under ganeti-twistd), runs a few jobs so the fork server and
the daemons have done real work, lets them settle, then reads every
process's RSS, PSS and anonymous memory from C{/proc/PID/smaps_rollup}.

Each daemon's floor is measured in the same run (L{tests.bench.memfloor}):
a fresh interpreter that imports the same libraries as the daemon (Twisted,
pyOpenSSL, the standard library...) but none of Ganeti's modules.  The
daemon cannot go under it without dropping a library it uses; what it
takes above it ("ours") is Ganeti's code and data.

Prints a table, then one JSON line: C{rss_<daemon>_mib},
C{pss_<daemon>_mib}, C{anon_<daemon>_mib} and the floor's
C{floor_rss_<daemon>_mib}, C{floor_pss_<daemon>_mib},
C{floor_anon_<daemon>_mib} per daemon; C{rss_total_mib},
C{pss_total_mib}, C{anon_total_mib}, C{floor_rss_total_mib},
C{floor_pss_total_mib}, C{floor_anon_total_mib} over all of them; the
totals without MonD (C{*_total_no_mond_mib}); the runtime's layers
(L{memfloor.LAYERS}): C{python_rss_mib}, a bare interpreter's RSS, and
C{layer_twistd_rss_mib}, C{layer_tls_rss_mib}, C{layer_web_rss_mib}.

Reference: Ganeti 3.0.2 measured on this machine idles at 156 MiB RSS in
total (issue 13: confd 15, wconfd 23, MonD 17 MiB, ...).

With C{--instances N} the cluster's configuration holds N instances
(diskless, down), to see what a large configuration costs each daemon.

    scripts/bench memory [--jobs N] [--settle SECONDS] [--instances N]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti.config.bootstrap import grow
from ganeti.daemons import free_port
from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from ganeti.testing.daemons import make_root, remove_root
from ganeti.testing.mond import ConfdDaemon, MondDaemon
from tests.bench import memfloor
from tests.bench.jobs import follow

#: Ganeti 3.0.2's idle total RSS on this machine (issue 13)
GANETI_RSS_TOTAL_MIB = 156
USERS = "bench secret write\n"


#: one process's figures: rss, pss, anon, floor rss, floor pss, floor anon (MiB)
Figures = tuple[float, float, float, float, float, float]


def smaps_rollup(pid: int) -> tuple[float, float, float]:
    """C{(rss, pss, anon)} of one process, in MiB."""
    values = {"Rss:": 0, "Pss:": 0, "Anonymous:": 0}
    with open("/proc/%d/smaps_rollup" % pid) as handle:
        for line in handle:
            fields = line.split()
            if fields and fields[0] in values:
                values[fields[0]] = int(fields[1])
    return values["Rss:"] / 1024.0, values["Pss:"] / 1024.0, values["Anonymous:"] / 1024.0


def children(pid: int) -> list[int]:
    """The direct children of C{pid}."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def run_jobs(paths: Any, count: int) -> None:
    client = LuxiClient(paths.luxi_socket)
    try:
        for _ in range(count):
            job_id = client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.001}])
            status = follow(client, job_id)
            assert status == "success", (job_id, status)
    finally:
        client.close()


async def measure(reactor: Any, jobs: int, settle: float,
                  instances: int = 0) -> tuple[dict[str, Figures], dict[str, float]]:
    """Each daemon's figures and its floor's, and the runtime's layers' RSS."""
    root = make_root("gntbm")
    probe_dir = os.path.join(root.root, "bench-probe")
    os.mkdir(probe_dir)
    plain_env = dict(os.environ)
    os.environ.update(memfloor.install_probe(probe_dir))  # the daemons started below inherit it
    config = loopback_config(1)
    if instances:
        config = grow(config, instances=instances, disks_per_instance=0)
    cluster = LoopbackCluster(reactor, root, config, rapi_users=USERS, prefix="gntbm")
    confd: ConfdDaemon | None = None
    mond: MondDaemon | None = None
    try:
        await cluster.start()
        confd = ConfdDaemon(root, "127.0.1.1", free_port("127.0.1.1", udp=True))
        confd.start()
        await confd.ready(reactor)
        mond = MondDaemon(root, "node1.test", "127.0.1.1", free_port("127.0.1.1"), confd.port)
        mond.start()
        await mond.ready(reactor)
        await threads.deferToThread(run_jobs, root, jobs)
        await task.deferLater(reactor, settle, lambda: None)
        assert cluster.rapi is not None and cluster.luxid.process is not None
        pids = {"noded": cluster.nodeds[0], "wconfd": cluster.wconfd, "luxid": cluster.luxid,
                "rapi": cluster.rapi, "confd": confd, "mond": mond}
        processes = {}
        for name, daemon in pids.items():
            assert daemon.process is not None
            processes[name] = daemon.process.pid
        forks = children(cluster.luxid.process.pid)
        assert len(forks) == 1, "expected one fork server under LuxiD, found %r" % forks
        processes["forkserver"] = forks[0]
        figures = {}
        for name, pid in processes.items():
            own = smaps_rollup(pid)
            listing = await threads.deferToThread(memfloor.loaded_modules, pid, probe_dir)
            figures[name] = own + await threads.deferToThread(memfloor.floor, listing, plain_env)
        runtime = await threads.deferToThread(memfloor.layers, plain_env)
        return figures, runtime
    finally:
        os.environ.clear()
        os.environ.update(plain_env)
        for daemon in (mond, confd):
            if daemon is not None:
                daemon.stop()
        await cluster.stop()
        remove_root(root)


def totals(figures: dict[str, Figures], skip: str | None = None) -> list[float]:
    """The six figures summed over the daemons (all, or all but C{skip})."""
    return [sum(values[i] for name, values in figures.items() if name != skip) for i in range(6)]


def report(figures: dict[str, Figures], runtime: dict[str, float]) -> str:
    """The table and, last, the JSON line."""
    lines = ["%-12s %8s %8s %8s | %10s %10s %10s | %8s" % (
        "MiB", "RSS", "PSS", "anon", "floor RSS", "floor PSS", "floor anon", "ours RSS")]
    row = "%-12s %8.1f %8.1f %8.1f | %10.1f %10.1f %10.1f | %8.1f"
    result: dict[str, float] = {}
    for name, values in figures.items():
        lines.append(row % (name, *values, values[0] - values[3]))
        for key, value in zip(("rss", "pss", "anon", "floor_rss", "floor_pss", "floor_anon"), values):
            result["%s_%s_mib" % (key, name)] = round(value, 1)
    every = totals(figures)
    no_mond = totals(figures, "mond")
    lines.append(row % ("total", *every, every[0] - every[3]))
    lines.append(row % ("w/o mond", *no_mond, no_mond[0] - no_mond[3]))
    lines.append("floor: a fresh interpreter importing the daemon's libraries, none of Ganeti's modules;")
    lines.append("the runtime alone (RSS): an interpreter %.1f MiB; with twistd's runner and the reactor %.1f;"
                 % (runtime["python"], runtime["twistd"]))
    lines.append("  with pyOpenSSL and cryptography (all but confd and mond) %.1f; with twisted.web's server"
                 " (noded, rapi) %.1f" % (runtime["tls"], runtime["web"]))
    lines.append("Ganeti 3.0.2 (issue 13): %d MiB RSS in total" % GANETI_RSS_TOTAL_MIB)
    for key, value in zip(("rss", "pss", "anon", "floor_rss", "floor_pss", "floor_anon"), every):
        result["%s_total_mib" % key] = round(value, 1)
    for key, value in zip(("rss", "pss", "anon", "floor_rss", "floor_pss", "floor_anon"), no_mond):
        result["%s_total_no_mond_mib" % key] = round(value, 1)
    result.update(python_rss_mib=round(runtime["python"], 1), ganeti_rss_total_mib=GANETI_RSS_TOTAL_MIB)
    for name in ("twistd", "tls", "web"):
        result["layer_%s_rss_mib" % name] = round(runtime[name], 1)
    lines.append(orjson.dumps(result).decode())
    return "\n".join(lines)


def main(reactor: Any) -> defer.Deferred[None]:
    parser = argparse.ArgumentParser(prog="scripts/bench memory")
    parser.add_argument("--jobs", type=int, default=20, help="jobs run before measuring (default 20)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds idle before measuring (default 3)")
    parser.add_argument("--instances", type=int, default=0, help="instances in the configuration (default 0)")
    options = parser.parse_args()

    async def run() -> None:
        figures, runtime = await measure(reactor, options.jobs, options.settle, options.instances)
        print(report(figures, runtime))
    return defer.ensureDeferred(run())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    started = time.monotonic()
    task.react(main)
