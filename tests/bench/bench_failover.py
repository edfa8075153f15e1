"""scripts/bench failover [--rounds N] [--kills N] [--failover-timeout S]: master failovers under a job stream.

Anchors: Ganeti 3.0 has manual failover only (an admin must notice; its
watcher runs every 5 minutes); Proxmox VE HA relocates in about 2 minutes;
Kubernetes notices a dead node in 40-50 s.  Targets on a 3-node loopback
cluster: C{gnt-cluster master-failover} completes in at most 5 s; with
automatic failover and the default 10 s timeout, from the master's death to
the new master accepting a job at most 13 s; over 20 master kills during
job streams, no acknowledged job lost, none given twice, and no job whose
reported success lacks its effect.

A 3-node L{LoopbackCluster} (free ports, temporary roots; every node a
master candidate) runs a stream of cluster-tag jobs (one tag per job)
submitted to whichever node is master.  First the master role goes round
the nodes C{--rounds} times by C{gnt-cluster master-failover}; then, with
automatic failover on (C{--failover-timeout}, default 10 s), the master is
killed C{--kills} times (C{kill -9} of every process of its root): the time
from the kill until another node accepts a job is C{auto_failover_s}; the
dead node's NodeD is started again (a plain node now) before the next
kill.  Afterwards every acknowledged job must be known to the last master
and final, no job id given twice, and every job reported successful must
have its tag in the config.  Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti import daemons
from ganeti.ha import params as ha_params
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.auto_failover import TagStream, enable_auto_failover, kill_root, try_submit
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, serial_of, ssconf_of
from ganeti.testing.daemons import make_root, remove_root

NODES = ["node1.test", "node2.test", "node3.test"]
FINAL = ("success", "error", "canceled")
#: seconds between two submissions of the stream (one cluster tag each: keep below Ganeti's tag limit)
STREAM_INTERVAL = 0.1


def failover(cluster: LoopbackCluster, paths: Paths) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, "master-failover",
                           "--rpc-port", str(cluster.rpc_port)], capture_output=True, text=True, timeout=300)
    return time.monotonic() - start, done


def wait_final(client: LuxiClient, ids: list[int], timeout: float = 300) -> dict[int, Any]:
    deadline = time.monotonic() + timeout
    found: dict[int, Any] = {}
    while True:
        pending = [i for i in ids if found.get(i) not in FINAL]
        for start in range(0, len(pending), 500):
            rows = client.query_jobs(pending[start:start + 500], ["id", "status"])
            found.update({row[0]: row[1] for row in rows if row is not None})
        if all(found.get(i) in FINAL for i in ids) or time.monotonic() > deadline:
            return {i: found.get(i) for i in ids}
        time.sleep(0.2)


def cluster_tags(paths: Paths) -> set[str]:
    done = subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, "list-tags"], capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise SystemExit("gnt-cluster list-tags failed: %s" % done.stderr)
    return set(done.stdout.split())


def master_name(paths: Paths) -> str | None:
    value = ssconf_of(paths, "master_node")
    return value.strip() if value else None


async def kill_and_wait(reactor: Any, cluster: LoopbackCluster, stream: TagStream, index: int,
                        limit: float) -> tuple[float, int]:
    """Kill the master (node C{index}); the seconds until another node
    accepts a job, and that node's index."""
    roots = cluster.roots
    kill_root(roots[index])
    died = time.monotonic()
    stream.master = None
    others = [i for i in range(len(roots)) if i != index]
    while True:
        for i in others:
            if await threads.deferToThread(try_submit, roots[i]) is not None:
                elapsed = time.monotonic() - died
                stream.master = roots[i]
                return elapsed, i
        if time.monotonic() - died > limit:
            raise SystemExit("no new master %.0f s after the kill of %s" % (limit, NODES[index]))
        await task.deferLater(reactor, 0.05, lambda: None)


async def revive(cluster: LoopbackCluster, index: int, master: int) -> None:
    """Start the dead node's NodeD again; wait until it holds the new master's config."""
    roots = cluster.roots
    await cluster.start_daemon(cluster.nodeds[index])
    await cluster.until(lambda: master_name(roots[index]) == NODES[master]
                        and serial_of(roots[index]) == serial_of(roots[master]), timeout=120)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench failover")
    parser.add_argument("--rounds", type=int, default=6, help="manual failovers (default 6)")
    parser.add_argument("--kills", type=int, default=20, help="master kills with automatic failover (default 20)")
    parser.add_argument("--failover-timeout", type=float, default=ha_params.DEFAULT_FAILOVER_TIMEOUT,
                        help="the automatic failover's timeout (default %(default)s s)")
    return parser.parse_args(argv)


async def bench(reactor: Any, options: argparse.Namespace) -> None:
    config = loopback_config(3, candidate_pool_size=10, candidates=NODES[1:])
    root = make_root("gntbf")
    cluster = LoopbackCluster(reactor, root, config, prefix="gntbf")
    await cluster.start()
    stream = TagStream(None, prefix="bench", interval=STREAM_INTERVAL)
    manual: list[float] = []
    auto: list[float] = []
    try:
        for paths, (name, address) in zip(cluster.roots, cluster.nodes.items()):
            daemons.write_node_identity(paths, name, address)
        await cluster.until(lambda: all(serial_of(p) for p in cluster.roots), timeout=60)
        stream.master = cluster.roots[0]
        stream.start()
        await task.deferLater(reactor, 1.0, lambda: None)
        master = 0
        for number in range(options.rounds):
            master = (number + 1) % 3
            elapsed, done = await threads.deferToThread(failover, cluster, cluster.roots[master])
            if done.returncode != 0:
                raise SystemExit("failover %d failed:\n%s%s" % (number + 1, done.stdout, done.stderr))
            stream.master = cluster.roots[master]
            manual.append(elapsed)
            await task.deferLater(reactor, 1.0, lambda: None)
        enable_auto_failover(cluster.roots, options.failover_timeout)
        for number in range(options.kills):
            await task.deferLater(reactor, 1.5, lambda: None)  # jobs flowing to this master
            dead = master
            elapsed, master = await kill_and_wait(reactor, cluster, stream, dead, options.failover_timeout + 120)
            auto.append(elapsed)
            print("kill %2d: %s died, %s accepts jobs after %.2f s" % (number + 1, NODES[dead], NODES[master],
                                                                       elapsed), flush=True)
            await revive(cluster, dead, master)
        await threads.deferToThread(stream.stop)
        final = LuxiClient(cluster.roots[master].luxi_socket, timeout=120)
        acknowledged = sorted(stream.acknowledged)
        statuses = await threads.deferToThread(wait_final, final, acknowledged)
        tags = await threads.deferToThread(cluster_tags, cluster.roots[master])
        lost = sorted(i for i, s in statuses.items() if s is None)
        duplicates = len(stream.ids) - len(set(stream.ids))
        failed = sorted(i for i, s in statuses.items() if s == "error")
        no_effect = sorted(i for i, s in statuses.items() if s == "success" and stream.acknowledged[i] not in tags)
        print("%-40s %s" % ("manual failovers", options.rounds))
        if manual:
            print("%-40s %.2f s (max %.2f s)" % ("gnt-cluster master-failover", statistics.median(manual),
                                                 max(manual)))
        print("%-40s %s (timeout %g s)" % ("master kills (auto failover)", options.kills, options.failover_timeout))
        if auto:
            print("%-40s %.2f s (max %.2f s)" % ("death to a new master accepting a job", statistics.median(auto),
                                                 max(auto)))
        print("%-40s %d (%d refused while no master)" % ("jobs acknowledged", len(acknowledged), stream.refused))
        print("%-40s %d" % ("acknowledged jobs lost", len(lost)))
        print("%-40s %d" % ("job ids given twice", duplicates))
        print("%-40s %d" % ("reported success without its effect", len(no_effect)))
        print("%-40s %d (ran on a dead or old master)" % ("jobs ended in error", len(failed)))
        print(orjson.dumps({
            "manual_failover_s": round(statistics.median(manual), 3) if manual else None,
            "manual_failover_max_s": round(max(manual), 3) if manual else None,
            "failovers": options.rounds,
            "failover_timeout_s": options.failover_timeout,
            "auto_failover_s": round(statistics.median(auto), 3) if auto else None,
            "auto_failover_max_s": round(max(auto), 3) if auto else None,
            "kills": options.kills,
            "jobs": len(acknowledged),
            "lost_jobs": len(lost),
            "duplicate_jobs": duplicates,
            "success_without_effect": len(no_effect),
            "failed_jobs": len(failed),
        }).decode())
    finally:
        stream.stopped.set()
        for paths in cluster.roots:
            daemons.stop(paths, ["ganeti-luxid", "ganeti-rapi", "ganeti-wconfd"], out=lambda _line: None)
        await cluster.stop()
        remove_root(root)


def main() -> None:
    options = parse_args(sys.argv[1:])
    task.react(lambda reactor: defer.ensureDeferred(bench(reactor, options)))


if __name__ == "__main__":
    main()
