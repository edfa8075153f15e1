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

ROUNDS = 5
SIZE_MIB = 1024
N1 = "node1.test"
FINAL = ("success", "error", "canceled")
TARGETS = {"rbd_create_s": 5.0, "rbd_remove_s": 2.0}


def run_job(client: LuxiClient, op: dict[str, Any], timeout: float = 300) -> float:
    """Submit one job and wait for its success; the seconds it took."""
    start = time.perf_counter()
    job_id = client.submit_job([op])
    deadline = time.monotonic() + timeout
    while True:
        ((status, result),) = client.query_jobs([job_id], ["status", "opresult"])
        if status in FINAL:
            break
        if time.monotonic() > deadline:
            raise SystemExit("job %s still %s after %ss" % (job_id, status, timeout))
        time.sleep(0.005)
    took = time.perf_counter() - start
    if status != "success":
        raise SystemExit("job %s (%s) ended %s: %s" % (job_id, op["OP_ID"], status, str(result)[:500]))
    return took


def create_op(name: str) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": "rbd",
            "disks": [{"size": SIZE_MIB}], "nics": [], "os_type": "noop", "no_install": True, "hypervisor": "fake",
            "pnode": N1, "beparams": {"maxmem": 64, "minmem": 64}, "name_check": False, "ip_check": False,
            "start": True}


def timed(call: Any, *args: Any) -> float:
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start


def measure(ceph: CephCluster, master: Paths) -> dict[str, Any]:
    ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "diskless,file,sharedfile,rbd",
       "-D", "rbd:pool=%s,access=userspace" % ceph.pool)
    client = LuxiClient(master.luxi_socket, timeout=120)
    creates, removes, raw_creates, raw_removes = [], [], [], []
    try:
        run_job(client, create_op("warm.test"))  # the first job pays for imports and caches
        run_job(client, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "warm.test"})
        for n in range(ROUNDS):
            name = "rbd%d.test" % n
            creates.append(run_job(client, create_op(name)))
            if len(ceph.images()) != 1:
                raise SystemExit("expected one image after creating %s: %s" % (name, ceph.images()))
            removes.append(run_job(client, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": name}))
            if ceph.images():
                raise SystemExit("images left after removing %s: %s" % (name, ceph.images()))
            raw_creates.append(timed(ceph.rbd, "create", "-p", ceph.pool, "raw", "--size", "%dM" % SIZE_MIB))
            raw_removes.append(timed(ceph.rbd, "rm", "-p", ceph.pool, "raw", "--no-progress"))
    finally:
        client.close()
    return {"create": creates, "remove": removes, "raw_create": raw_creates, "raw_remove": raw_removes}


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
        "rbd_create_s": round(med["create"], 3),
        "rbd_remove_s": round(med["remove"], 3),
        "rbd_create_max_s": round(max(figures["create"]), 3),
        "rbd_remove_max_s": round(max(figures["remove"]), 3),
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
