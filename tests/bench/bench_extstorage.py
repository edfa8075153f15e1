"""scripts/bench extstorage: the C{ext} template on a real 3-node loopback
cluster, with the shipped C{loopback} ExtStorage provider (sparse files and
real loop devices) and the fake hypervisor.  Measured over L{ROUNDS} rounds
(median, and the worst):

  - C{ext_create_s}: an OP_INSTANCE_CREATE of an instance with one 1 GiB
    ext disk (no OS install, started), from submission until the job
    succeeded: the provider's create, attach, open and setinfo run on the
    primary, then the start attaches and opens again;
  - C{ext_remove_s}: its OP_INSTANCE_REMOVE (stop, close, detach, remove)
    until the job succeeded.

L{measure_ext} takes a running cluster's master root, so C{scripts/bench
storage} (ceph branch) can fold it in.  Prints a table, then one JSON line.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
from typing import Any

import orjson
from twisted.internet import defer, task, threads

from ganeti.luxi.client import LuxiClient
from ganeti.paths import Paths
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from tests.bench import jobs

ROUNDS = 5
SIZE_MIB = 1024
N1 = "node1.test"
TEMPLATES = ("diskless", "file", "sharedfile", "ext")


def create_op(name: str, volumes: str) -> dict[str, Any]:
    return jobs.create_op(name, "ext", {"provider": "loopback", "dir": volumes}, SIZE_MIB, N1)


def _volumes(directory: str) -> list[str]:
    return [n for n in os.listdir(directory) if not n.endswith(".meta")]


def release(directory: str) -> None:
    """Detach the loop devices over files in C{directory} and remove it."""
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        out = subprocess.run(["losetup", "-j", os.path.join(directory, name)], capture_output=True, text=True)
        for line in out.stdout.splitlines():
            subprocess.run(["losetup", "-d", line.split(":", 1)[0]], check=False)
    shutil.rmtree(directory, ignore_errors=True)


def measure_ext(master: Paths, volumes: str, rounds: int = ROUNDS) -> dict[str, list[float]]:
    """C{{"create": [s...], "remove": [s...]}} of ext instances with a 1 GiB
    loopback disk in C{volumes} on a cluster whose templates include ext."""
    client = LuxiClient(master.luxi_socket, timeout=120)
    try:
        return jobs.create_remove_rounds(client, lambda name: create_op(name, volumes), lambda: _volumes(volumes),
                                         rounds, "ext")
    finally:
        client.close()


async def run(reactor: Any) -> None:
    volumes = tempfile.mkdtemp(prefix="gntbench-ext-vol-")
    root = Paths(tempfile.mkdtemp(prefix="gntbench-ext-"))
    try:
        async with LoopbackCluster(reactor, root, loopback_config(3, enabled_disk_templates=TEMPLATES),
                                   prefix="gntbx") as cluster:
            figures = await threads.deferToThread(measure_ext, cluster.master, volumes)
    finally:
        release(volumes)
        shutil.rmtree(root.root, ignore_errors=True)
    med = {key: statistics.median(values) for key, values in figures.items()}
    results = dict(jobs.rounds_figures("ext", figures), rounds=len(figures["create"]))
    print("%-62s %9s %9s" % ("measurement (3 nodes, 1 GiB ext disk, loopback provider, fake hv)", "median", "worst"))
    print("%-62s %8.3fs %8.3fs" % ("create instance (job submitted -> success, started)", med["create"],
                                   max(figures["create"])))
    print("%-62s %8.3fs %8.3fs" % ("remove instance (stop, close, detach, remove, config)", med["remove"],
                                   max(figures["remove"])))
    print(orjson.dumps(results).decode())


def main() -> None:
    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


if __name__ == "__main__":
    main()
