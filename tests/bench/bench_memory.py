"""scripts/bench memory: the idle memory of a one-node master's daemons.

Starts a one-node loopback master (ganeti-noded, ganeti-wconfd,
ganeti-luxid with its fork server, ganeti-rapi, ganeti-confd and
ganeti-mond, each under twistd), runs a few jobs so the fork server and
the daemons have done real work, lets them settle, then reads every
process's RSS and PSS from C{/proc/PID/smaps_rollup}.  Prints a table,
then one JSON line: C{rss_<daemon>_mib} and C{pss_<daemon>_mib} per
daemon, C{rss_total_mib} and C{pss_total_mib} over all of them, and the
same totals without MonD (C{*_total_no_mond_mib}).

Reference: Ganeti 3.0.2 measured on this machine idles at 156 MiB RSS in
total (issue 13: confd 15, wconfd 23, MonD 17 MiB, ...).

    scripts/bench memory [--jobs N] [--settle SECONDS]
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti.daemons import free_port
from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from ganeti.testing.daemons import make_root, remove_root
from ganeti.testing.mond import ConfdDaemon, MondDaemon

#: Ganeti 3.0.2's idle total RSS on this machine (issue 13)
GANETI_RSS_TOTAL_MIB = 156
USERS = "bench secret write\n"


def smaps_rollup(pid: int) -> tuple[float, float]:
    """C{(rss, pss)} of one process, in MiB."""
    values = {"Rss:": 0, "Pss:": 0}
    with open("/proc/%d/smaps_rollup" % pid) as handle:
        for line in handle:
            fields = line.split()
            if fields and fields[0] in values:
                values[fields[0]] = int(fields[1])
    return values["Rss:"] / 1024.0, values["Pss:"] / 1024.0


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
            prev = None
            while True:
                answer = client.wait_for_job_change(job_id, ["status"], prev, None, 30)
                if answer == "nochange":
                    continue
                prev = answer[0]
                if prev[0] in ("success", "error", "canceled"):
                    assert prev[0] == "success", prev
                    break
    finally:
        client.close()


async def measure(reactor: Any, jobs: int, settle: float) -> dict[str, tuple[float, float]]:
    root = make_root("gntbm")
    cluster = LoopbackCluster(reactor, root, loopback_config(1), rapi_users=USERS, prefix="gntbm")
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
        figures = {}
        for name, daemon in pids.items():
            assert daemon.process is not None
            figures[name] = smaps_rollup(daemon.process.pid)
        forks = children(cluster.luxid.process.pid)
        assert len(forks) == 1, "expected one fork server under LuxiD, found %r" % forks
        figures["forkserver"] = smaps_rollup(forks[0])
        return figures
    finally:
        for daemon in (mond, confd):
            if daemon is not None:
                daemon.stop()
        await cluster.stop()
        remove_root(root)


def main(reactor: Any) -> defer.Deferred[None]:
    parser = argparse.ArgumentParser(prog="scripts/bench memory")
    parser.add_argument("--jobs", type=int, default=20, help="jobs run before measuring (default 20)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds idle before measuring (default 3)")
    options = parser.parse_args()

    async def run() -> None:
        figures = await measure(reactor, options.jobs, options.settle)
        result: dict[str, float] = {}
        print("%-12s %9s %9s" % ("daemon", "RSS MiB", "PSS MiB"))
        for name, (rss, pss) in figures.items():
            print("%-12s %9.1f %9.1f" % (name, rss, pss))
            result["rss_%s_mib" % name] = round(rss, 1)
            result["pss_%s_mib" % name] = round(pss, 1)
        rss_total = sum(rss for rss, _ in figures.values())
        pss_total = sum(pss for _, pss in figures.values())
        mond_rss, mond_pss = figures["mond"]
        print("%-12s %9.1f %9.1f" % ("total", rss_total, pss_total))
        print("%-12s %9.1f %9.1f" % ("w/o mond", rss_total - mond_rss, pss_total - mond_pss))
        print("Ganeti 3.0.2 (issue 13): %d MiB RSS in total" % GANETI_RSS_TOTAL_MIB)
        result.update(rss_total_mib=round(rss_total, 1), pss_total_mib=round(pss_total, 1),
                      rss_total_no_mond_mib=round(rss_total - mond_rss, 1),
                      pss_total_no_mond_mib=round(pss_total - mond_pss, 1),
                      ganeti_rss_total_mib=GANETI_RSS_TOTAL_MIB)
        print(orjson.dumps(result).decode())
    return defer.ensureDeferred(run())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    started = time.monotonic()
    task.react(main)
