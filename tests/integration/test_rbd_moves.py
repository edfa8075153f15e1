"""rbd instances move between nodes without copying, on a real 3-node
loopback cluster (fake hypervisor) and a real Ceph
(L{ganeti.testing.ceph}, cephx on): failover (to a named node and to one
the allocator picks), node evacuation with Ganeti's own C{hail} (running
instances migrate, stopped ones fail over), and C{hail} placing new rbd
and file instances from the disk figures of the iallocator input (the
rbd pool's from C{ceph df}; Ganeti 3.0 sends 0 there and hail answers
"FailDisk").  The images never change name nor count: nothing is copied.

Without Ceph or hail this test fails (it does not skip): scripts/install-ceph,
scripts/install-htools.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.testing.ceph import CephCluster, require_ceph
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from tests.integration.test_luxid import in_thread

N1, N2, N3 = "node1.test", "node2.test", "node3.test"
HAIL = Path(__file__).resolve().parents[2] / ".venv" / "htools-3.0" / "hail"
ADD = ("gnt-instance", "add", "-o", "noop", "--no-install", "--no-nics", "--no-name-check", "--no-ip-check",
       "-B", "memory=128M", "-H", "fake")


@pytest.fixture(scope="module")
def ceph():
    require_ceph()  # fails with the install hint when Ceph is missing
    cluster = CephCluster.start_in(tempfile.mkdtemp(prefix="cephmv", dir="/tmp"))
    try:
        yield cluster
    finally:
        cluster.stop()


def placed(master, *names: str) -> dict[str, tuple[str, str]]:
    """C{{name: (primary node, status)}} from C{gnt-instance list}."""
    out = ok(master, "gnt-instance", "list", "--no-headers", "--separator", "|", "-o", "name,pnode,status", *names)
    return {name: (node, status) for name, node, status in (line.split("|") for line in out.split())}


@pytest_twisted.ensureDeferred
async def test_rbd_failover_evacuate_and_hail(root, ceph):
    assert os.access(HAIL, os.X_OK), "no hail at %s: run scripts/install-htools" % HAIL
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntmv") as cluster:
        for paths in cluster.roots:
            ceph.install_client(paths.root)
        master = cluster.master
        ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "rbd,file,diskless",
           "-D", "rbd:pool=%s,access=userspace" % ceph.pool)
        directory = os.path.join(master.root, "usr/lib/ganeti/iallocators")
        os.makedirs(directory, exist_ok=True)
        shutil.copy(HAIL, os.path.join(directory, "hail"))

        # --- hail places rbd and file instances: the input has the pool's and the directory's figures
        for name, template in (("hailrbd", "rbd"), ("hailfile", "file")):
            out = await in_thread(ok, master, *ADD, "-t", template, "--disk", "0:size=1G", "-I", "hail", name)
            assert "allocator hail" in out, out
        where = placed(master, "hailrbd", "hailfile")
        assert {s for _, s in where.values()} == {"running"} and all(n in (N1, N2, N3) for n, _ in where.values())
        assert len(ceph.images()) == 1
        for name in ("hailrbd", "hailfile"):
            await in_thread(ok, master, "gnt-instance", "remove", "-f", name)
        assert ceph.images() == []

        # --- three rbd instances on node1, one of them stopped
        for name, extra in (("rbd1", ()), ("rbd2", ()), ("rbd3", ("--no-start",))):
            await in_thread(ok, master, *ADD, "-t", "rbd", "--disk", "0:size=256M", "-n", N1, *extra, name)
        images = sorted(ceph.images())
        assert len(images) == 3
        assert await cluster.running() == {N1: ["rbd1", "rbd2"], N2: [], N3: []}

        # --- failover to a named node, then to the node the allocator picks: stopped, started there
        await in_thread(ok, master, "gnt-instance", "failover", "-f", "-n", N2, "rbd1")
        assert placed(master, "rbd1") == {"rbd1": (N2, "running")}
        out = await in_thread(ok, master, "gnt-instance", "failover", "-f", "rbd1")
        (node, status) = placed(master, "rbd1")["rbd1"]
        assert node in (N1, N3) and status == "running", out
        assert sorted(ceph.images()) == images

        # --- evacuate node1's primaries with hail: rbd2 migrates, rbd3 (stopped) fails over
        await in_thread(ok, master, "gnt-instance", "failover", "-f", "-n", N1, "rbd1")
        out = await in_thread(ok, master, "gnt-node", "evacuate", "-f", "-p", "-I", "hail", N1)
        now = placed(master, "rbd1", "rbd2", "rbd3")
        assert all(node in (N2, N3) for node, _ in now.values()), (now, out)
        assert {name: status for name, (_, status) in now.items()} == {
            "rbd1": "running", "rbd2": "running", "rbd3": "ADMIN_down"}, now
        running = await cluster.running()
        assert running[N1] == [] and sorted(running[N2] + running[N3]) == ["rbd1", "rbd2"]
        assert sorted(ceph.images()) == images          # nothing copied, nothing left behind

        for name in ("rbd1", "rbd2", "rbd3"):
            await in_thread(ok, master, "gnt-instance", "remove", "-f", name)
        assert ceph.images() == []
