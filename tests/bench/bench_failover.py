"""scripts/bench failover: manual master failovers under a job stream.

Anchors: Ganeti 3.0 has manual failover only (an admin must notice; its
watcher runs every 5 minutes); Proxmox VE HA relocates in about 2 minutes;
Kubernetes notices a dead node in 40-50 s.  Target: C{gnt-cluster
master-failover} completes in at most 5 s on a 3-node loopback cluster.

A 3-node L{LoopbackCluster} (free ports, temporary roots; every node a
master candidate) runs a stream of short jobs submitted to whichever node
is master, while the master role goes round the nodes C{ROUNDS} times by
C{gnt-cluster master-failover}.  Afterwards every acknowledged job must be
known to the last master, finished, and no job id given twice.  Automatic
failover is not built yet: C{auto_failover_s} and C{kills} are null.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti import daemons
from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, serial_of
from ganeti.testing.daemons import make_root, remove_root

ROUNDS = 6
NODES = ["node1.test", "node2.test", "node3.test"]
FINAL = ("success", "error", "canceled")


class Stream:
    """Submits one short job after another to the current master."""

    def __init__(self) -> None:
        self.master: Paths | None = None
        self.acknowledged: list[int] = []
        self.refused = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            master = self.master
            try:
                client = LuxiClient(master.luxi_socket, timeout=10)
                answers = client.submit_many_jobs([[{"OP_ID": "OP_TEST_DELAY", "duration": 0.05,
                                                     "reason": [["gnt:client:bench", "", time.time_ns()]]}]])
                client.close()
                self.acknowledged += [job_id for ok, job_id in answers if ok]
                self.refused += sum(1 for ok, _ in answers if not ok)
            except Exception:  # no master right now: not acknowledged
                self.refused += 1
                time.sleep(0.02)


def failover(cluster: LoopbackCluster, paths: Paths) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.monotonic()
    done = subprocess.run([os.path.join(BIN, "gnt-cluster"), "--root", paths.root, "master-failover",
                           "--rpc-port", str(cluster.rpc_port)], capture_output=True, text=True, timeout=300)
    return time.monotonic() - start, done


def wait_final(client: LuxiClient, ids: list[int], timeout: float = 300) -> dict[int, Any]:
    deadline = time.monotonic() + timeout
    while True:
        rows = client.query_jobs(ids, ["id", "status"])
        found = {row[0]: row[1] for row in rows if row is not None}
        if all(found.get(i) in FINAL for i in ids) or time.monotonic() > deadline:
            return {i: found.get(i) for i in ids}
        time.sleep(0.1)


async def bench(reactor: Any) -> None:
    config = loopback_config(3, candidate_pool_size=10, candidates=NODES[1:])
    root = make_root("gntbf")
    cluster = LoopbackCluster(reactor, root, config, prefix="gntbf")
    await cluster.start()
    stream = Stream()
    times: list[float] = []
    try:
        for paths, (name, address) in zip(cluster.roots, cluster.nodes.items()):
            daemons.write_node_identity(paths, name, address)
        await cluster.until(lambda: all(serial_of(p) for p in cluster.roots), timeout=60)
        stream.master = cluster.roots[0]
        worker = threading.Thread(target=stream.run, daemon=True)
        worker.start()
        await task.deferLater(reactor, 1.0, lambda: None)
        for number in range(ROUNDS):
            target = cluster.roots[(number + 1) % 3]
            elapsed, done = await threads.deferToThread(failover, cluster, target)
            if done.returncode != 0:
                raise SystemExit("failover %d failed:\n%s%s" % (number + 1, done.stdout, done.stderr))
            stream.master = target
            times.append(elapsed)
            await task.deferLater(reactor, 1.0, lambda: None)
        stream.stopped.set()
        await threads.deferToThread(worker.join)
        final = LuxiClient(stream.master.luxi_socket, timeout=60)
        statuses = await threads.deferToThread(wait_final, final, stream.acknowledged)
        lost = sorted(i for i, s in statuses.items() if s is None)
        duplicates = len(stream.acknowledged) - len(set(stream.acknowledged))
        failed = sorted(i for i, s in statuses.items() if s == "error")
        print("%-34s %s" % ("failovers", ROUNDS))
        print("%-34s %.2f s (max %.2f s)" % ("gnt-cluster master-failover", statistics.median(times), max(times)))
        print("%-34s %d (%d refused while no master)" % ("jobs acknowledged", len(stream.acknowledged),
                                                         stream.refused))
        print("%-34s %d" % ("acknowledged jobs lost", len(lost)))
        print("%-34s %d" % ("job ids given twice", duplicates))
        print("%-34s %d (ran on an old master: 'master failover')" % ("jobs ended in error", len(failed)))
        print(orjson.dumps({
            "manual_failover_s": round(statistics.median(times), 3),
            "manual_failover_max_s": round(max(times), 3),
            "failovers": ROUNDS,
            "auto_failover_s": None,
            "kills": None,
            "jobs": len(stream.acknowledged),
            "lost_jobs": len(lost),
            "duplicate_jobs": duplicates,
            "failed_jobs": len(failed),
        }).decode())
    finally:
        stream.stopped.set()
        for paths in cluster.roots:
            daemons.stop(paths, ["ganeti-luxid", "ganeti-rapi", "ganeti-wconfd"], out=lambda _line: None)
        await cluster.stop()
        remove_root(root)


def main() -> None:
    task.react(lambda reactor: defer.ensureDeferred(bench(reactor)))


if __name__ == "__main__":
    main()
