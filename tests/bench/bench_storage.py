"""scripts/bench storage: shared storage and real guests on a real 3-node
loopback cluster, all figures of issue 25 in one JSON object.

One throw-away Ceph (L{ganeti.testing.ceph}: 1 mon, 1 mgr, 1 BlueStore OSD,
cephx on) serves the cluster's C{rbd} template (C{access=userspace}).
Measured (median over L{ROUNDS} rounds, and the worst, where rounds apply):

  - C{rbd_create_s}: an OP_INSTANCE_CREATE of an instance with one 1 GiB
    rbd disk (no OS install, fake hypervisor, started), from submission
    until the job succeeded (target 5 s);
  - C{rbd_remove_s}: the OP_INSTANCE_REMOVE of that instance, whose disk
    removal (C{rbd rm}) is the bulk of it, until the job succeeded
    (target 2 s);
  - C{ext_create_s}, C{ext_remove_s}: the same with a 1 GiB C{ext} disk of
    the shipped C{loopback} provider (L{bench_extstorage.measure_ext});
  - C{migration_total_s}: C{gnt-instance migrate} of a running 512 MiB kvm
    guest (TCG; a Debian kernel and busybox initramfs) whose disk is an rbd
    image, from the command until it returned (the job succeeded), over
    L{MIGRATIONS} moves node1 -> node2 -> node3 -> node1, each checked: the
    guest's memory and disk tokens are there afterwards
    (L{ganeti.testing.guest_migration}) (target 10 s);
  - C{migration_downtime_ms}: qemu's own measure of the guest's downtime
    (C{query-migrate}'s C{downtime}), the worst of those moves, with
    Ganeti's default hvparams C{migration_downtime=30} (qemu's downtime
    limit, ms) and C{migration_bandwidth=32} (MiB/s) (target 300 ms);
  - C{boot_to_console_s}: L{ganeti.testing.guest_cluster.boot_guest} (the
    figure of C{scripts/bench guest}): C{gnt-instance startup} of a 128 MiB
    guest until its first console line, the median of the boots after the
    first (target 15 s); at most two qemu run at any time (a migration);

with, for scale, C{rbd create}/C{rbd rm} of a 1 GiB image run directly and
the time Ceph took to come up.  Prints a table, then one JSON line.
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
from ganeti.testing import guest_cluster
from ganeti.testing.ceph import CephCluster
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from ganeti.testing.guest_migration import GuestOnRbd
from tests.bench import bench_extstorage
from tests.bench.jobs import run_job

ROUNDS = 5
SIZE_MIB = 1024
N1, N2, N3 = "node1.test", "node2.test", "node3.test"
TARGETS = {"rbd_create_s": 5.0, "rbd_remove_s": 2.0, "ext_create_s": 5.0, "ext_remove_s": 2.0,
           "migration_total_s": 10.0, "migration_downtime_ms": 300, "boot_to_console_s": 15.0}
TEMPLATES = "diskless,file,sharedfile,rbd,ext"
#: the moves of the migration guest: (target, index of its root)
MIGRATIONS = ((N2, 1), (N3, 2), (N1, 0))
GUEST_MIB = 512
BOOTS = 3


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
    ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", TEMPLATES,
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


def measure_migration(ceph: CephCluster, master: Paths, roots: list[Paths], qemu: str) -> dict[str, Any]:
    """Boot the 512 MiB guest on rbd on node1 and migrate it around the
    nodes (L{MIGRATIONS}), checking it after each move."""
    from ganeti.daemons import free_port

    scratch = tempfile.mkdtemp(prefix="gntbench-mig-")
    vm = GuestOnRbd(master, roots, ceph, qemu, scratch)
    try:
        vm.enable(free_port("127.0.1.1"), templates=TEMPLATES)
        vm.add(N1, memory_mib=GUEST_MIB, disk_mib=1024)
        booted = vm.boot()
        moves = []
        for target, index in MIGRATIONS:
            moved = vm.migrate(target)
            seen = vm.check(index)
            if seen["rebooted"] or seen["image_at_1MiB"] != "DISK-" + vm.token:
                raise SystemExit("the guest did not survive its migration to %s intact: %s" % (target, seen))
            moves.append({"target": target, "total_s": moved["total_s"], "downtime_ms": moved["downtime_ms"]})
        vm.remove()
    finally:
        vm.kill_all()
        shutil.rmtree(scratch, ignore_errors=True)
    return {"moves": moves, "rbd_guest_boot_to_console_s": booted["boot_to_console_s"]}


async def measure_boot(reactor: Any, qemu: str) -> dict[str, Any]:
    """C{scripts/bench guest}'s boots (its own one-node cluster, a file disk)."""
    result = await guest_cluster.boot_guest(reactor, qemu, boots=BOOTS)
    runs = result["boots"]
    later = [one["boot_to_console_s"] for one in runs[1:]] or [runs[0]["boot_to_console_s"]]
    return {"boot_to_console_s": statistics.median(later), "first": runs[0]["boot_to_console_s"],
            "accel": runs[0]["accel"]}


async def run(reactor: Any) -> None:
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise SystemExit("qemu-system-x86_64 is not installed: run scripts/install-qemu")
    directory = tempfile.mkdtemp(prefix="cephbench", dir="/tmp")
    ceph_start = time.perf_counter()
    ceph = await threads.deferToThread(CephCluster.start_in, directory)
    ceph_up = time.perf_counter() - ceph_start
    root = Paths(tempfile.mkdtemp(prefix="gntbench-storage-"))
    volumes = tempfile.mkdtemp(prefix="gntbench-ext-vol-")
    try:
        async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntbs") as cluster:
            for paths in cluster.roots:
                ceph.install_client(paths.root)
            figures = await threads.deferToThread(measure, ceph, cluster.master)
            ext = await threads.deferToThread(bench_extstorage.measure_ext, cluster.master, volumes, ROUNDS)
            migration = await threads.deferToThread(measure_migration, ceph, cluster.master, list(cluster.roots),
                                                    qemu)
    finally:
        ceph.stop()
        bench_extstorage.release(volumes)
        shutil.rmtree(root.root, ignore_errors=True)
    boot = await measure_boot(reactor, qemu)
    report(figures, ext, migration, boot, ceph_up)


def report(figures: dict[str, list[float]], ext: dict[str, list[float]], migration: dict[str, Any],
           boot: dict[str, Any], ceph_up: float) -> None:
    """The table, then the JSON line."""
    med = {key: statistics.median(values) for key, values in figures.items()}
    ext_med = {key: statistics.median(values) for key, values in ext.items()}
    totals = [m["total_s"] for m in migration["moves"]]
    downtimes = [m["downtime_ms"] for m in migration["moves"]]
    results = {
        "rbd_create_s": round(med["create"], 3),
        "rbd_remove_s": round(med["remove"], 3),
        "ext_create_s": round(ext_med["create"], 3),
        "ext_remove_s": round(ext_med["remove"], 3),
        "migration_total_s": round(statistics.median(totals), 3),
        "migration_downtime_ms": max(downtimes),
        "boot_to_console_s": round(boot["boot_to_console_s"], 3),
        "rbd_create_max_s": round(max(figures["create"]), 3),
        "rbd_remove_max_s": round(max(figures["remove"]), 3),
        "ext_create_max_s": round(max(ext["create"]), 3),
        "ext_remove_max_s": round(max(ext["remove"]), 3),
        "migration_total_max_s": max(totals),
        "migration_downtime_median_ms": statistics.median(downtimes),
        "migrations": migration["moves"],
        "migration_guest_mib": GUEST_MIB,
        "rbd_guest_boot_to_console_s": migration["rbd_guest_boot_to_console_s"],
        "first_boot_to_console_s": boot["first"],
        "accel": boot["accel"],
        "rbd_cli_create_s": round(med["raw_create"], 3),
        "rbd_cli_remove_s": round(med["raw_remove"], 3),
        "ceph_start_s": round(ceph_up, 1),
        "rounds": ROUNDS,
        "targets": TARGETS,
    }
    row = "%-58s %9.3f %9.3f %9.1f"
    print("%-58s %9s %9s %9s" % ("measurement (3 nodes, one Ceph; seconds unless ms)", "median", "worst", "target"))
    print(row % ("rbd: create instance, 1 GiB (job -> success, fake hv)", med["create"], max(figures["create"]),
                 TARGETS["rbd_create_s"]))
    print(row % ("rbd: remove instance (stop + rbd rm + config)", med["remove"], max(figures["remove"]),
                 TARGETS["rbd_remove_s"]))
    print(row % ("ext: create instance, 1 GiB, loopback provider", ext_med["create"], max(ext["create"]),
                 TARGETS["ext_create_s"]))
    print(row % ("ext: remove instance (stop, detach, remove, config)", ext_med["remove"], max(ext["remove"]),
                 TARGETS["ext_remove_s"]))
    print(row % ("migrate %d MiB kvm guest on rbd (command -> done)" % GUEST_MIB, statistics.median(totals),
                 max(totals), TARGETS["migration_total_s"]))
    print(row % ("  its downtime, qemu's query-migrate (ms)", statistics.median(downtimes), max(downtimes),
                 TARGETS["migration_downtime_ms"]))
    print(row % ("boot: startup -> first console line (%s)" % boot["accel"], boot["boot_to_console_s"],
                 boot["first"], TARGETS["boot_to_console_s"]))
    print("%-58s %9.3f %9.3f" % ("rbd create, 1 GiB, alone", med["raw_create"], max(figures["raw_create"])))
    print("%-58s %9.3f %9.3f" % ("rbd rm, 1 GiB, alone", med["raw_remove"], max(figures["raw_remove"])))
    print("%-58s %9.1f" % ("Ceph up (mon, mgr, OSD, pool)", ceph_up))
    print(orjson.dumps(results).decode())


def main() -> None:
    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


if __name__ == "__main__":
    main()
