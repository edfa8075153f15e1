"""scripts/bench storage: shared storage on a real 3-node loopback cluster.

One throw-away Ceph (L{ganeti.testing.ceph}: 1 mon, 1 mgr, 1 BlueStore OSD,
cephx on) serves the cluster's C{rbd} template (C{access=userspace}, fake
hypervisor).  Measured, each over L{ROUNDS} rounds (median, and the worst):

  - C{rbd_create_s}: an OP_INSTANCE_CREATE of an instance with one 1 GiB
    rbd disk (no OS install, started), from submission until the job
    succeeded (target 5 s);
  - C{rbd_remove_s}: the OP_INSTANCE_REMOVE of that instance, whose disk
    removal (C{rbd rm}) is the bulk of it, until the job succeeded
    (target 2 s);

with, for scale, C{rbd create}/C{rbd rm} of a 1 GiB image run directly and
the time Ceph took to come up.  Prints a table, then one JSON line (later
parts of issue 25 add C{ext_create_s}, C{migration_total_s},
C{migration_downtime_ms}, C{boot_to_console_s}).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.ceph import CephCluster
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from tests.bench import jobs

ROUNDS = 5
SIZE_MIB = 1024
N1 = "node1.test"
TARGETS = {"rbd_create_s": 5.0, "rbd_remove_s": 2.0}


def create_op(name: str) -> dict[str, Any]:
    return jobs.create_op(name, "rbd", {}, SIZE_MIB, N1)


def timed(call: Any, *args: Any) -> float:
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start


def measure(ceph: CephCluster, master: Paths) -> dict[str, Any]:
    ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "diskless,file,sharedfile,rbd",
       "-D", "rbd:pool=%s,access=userspace" % ceph.pool)
    client = LuxiClient(master.luxi_socket, timeout=120)
    raw_creates: list[float] = []
    raw_removes: list[float] = []

    def raw() -> None:  # for scale: the same image size by the rbd command alone
        raw_creates.append(timed(ceph.rbd, "create", "-p", ceph.pool, "raw", "--size", "%dM" % SIZE_MIB))
        raw_removes.append(timed(ceph.rbd, "rm", "-p", ceph.pool, "raw", "--no-progress"))

    try:
        figures = jobs.create_remove_rounds(client, create_op, ceph.images, ROUNDS, "rbd", between=raw)
    finally:
        client.close()
    return dict(figures, raw_create=raw_creates, raw_remove=raw_removes)


async def run(reactor: Any) -> None:
    directory = tempfile.mkdtemp(prefix="cephbench", dir="/tmp")
    ceph_start = time.perf_counter()
    ceph = await threads.deferToThread(CephCluster.start_in, directory)
    ceph_up = time.perf_counter() - ceph_start
    root = Paths(tempfile.mkdtemp(prefix="gntbench-storage-"))
    try:
        async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntbs") as cluster:
            for paths in cluster.roots:
                ceph.install_client(paths.root)
            figures = await threads.deferToThread(measure, ceph, cluster.master)
    finally:
        ceph.stop()
        shutil.rmtree(root.root, ignore_errors=True)
    med = {key: statistics.median(values) for key, values in figures.items()}
    results = {
        **jobs.rounds_figures("rbd", figures),
        "rbd_cli_create_s": round(med["raw_create"], 3),
        "rbd_cli_remove_s": round(med["raw_remove"], 3),
        "ceph_start_s": round(ceph_up, 1),
        "rounds": ROUNDS,
        "targets": TARGETS,
    }
    print("%-58s %9s %9s %7s" % ("measurement (3 nodes, 1 GiB rbd disk, userspace, fake hv)", "median", "worst",
                                "target"))
    print("%-58s %8.3fs %8.3fs %6.1fs" % ("create instance (job submitted -> success, started)", med["create"],
                                          max(figures["create"]), TARGETS["rbd_create_s"]))
    print("%-58s %8.3fs %8.3fs %6.1fs" % ("remove instance (stop + rbd rm + config)", med["remove"],
                                          max(figures["remove"]), TARGETS["rbd_remove_s"]))
    print("%-58s %8.3fs %8.3fs" % ("rbd create, 1 GiB, alone", med["raw_create"], max(figures["raw_create"])))
    print("%-58s %8.3fs %8.3fs" % ("rbd rm, 1 GiB, alone", med["raw_remove"], max(figures["raw_remove"])))
    print("%-58s %8.1fs" % ("Ceph up (mon, mgr, OSD, pool)", ceph_up))
    print(orjson.dumps(results).decode())


def main() -> None:
    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


if __name__ == "__main__":
    main()
