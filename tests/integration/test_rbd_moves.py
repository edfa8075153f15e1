"""rbd instances move between nodes without copying, on a real 3-node
loopback cluster (fake hypervisor) and a real Ceph
(L{ganeti.testing.ceph}, cephx on): failover (to a named node and to one
the allocator picks), node evacuation with Ganeti's own C{hail} (running
instances migrate, stopped ones fail over), and C{hail} placing new rbd
and file instances from the iallocator input, whose disk figures are real
(the rbd pool's from C{ceph df}; Ganeti 3.0 sends 0 there), once the
instance policy allows rbd (else hail answers "FailDisk").  The images never change name nor count: nothing is copied.

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
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
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
        # hail places only templates the instance policy allows (Ganeti's init restricts it to the ones
        # enabled then): the refusal says so; allow rbd, as an admin of Ganeti's does
        refused = await in_thread(gnt, master, *ADD, "-t", "rbd", "--disk", "0:size=1G", "-I", "hail", "early")
        assert refused.returncode != 0 and "FailDisk" in refused.stderr, refused
        assert "gnt-group modify --ipolicy-disk-templates" in refused.stderr, refused.stderr
        ok(master, "gnt-group", "modify", "--ipolicy-disk-templates", "rbd,file,diskless", "default")

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
            "rbd1": "running", "rbd2": "running", "rbd3": "ADMIN_down"}, (now, out)
        running = await cluster.running()
        assert running[N1] == [] and sorted(running[N2] + running[N3]) == ["rbd1", "rbd2"]
        assert sorted(ceph.images()) == images          # nothing copied, nothing left behind

        for name in ("rbd1", "rbd2", "rbd3"):
            await in_thread(ok, master, "gnt-instance", "remove", "-f", name)
        assert ceph.images() == []


def export_dump(paths, name: str) -> bytes:
    """The first bytes of the one disk dump of export C{name} on the node of C{paths}."""
    directory = os.path.join(paths.export_dir, name)
    (dump,) = [n for n in os.listdir(directory) if n != "config.ini"]
    with open(os.path.join(directory, dump), "rb") as handle:
        return handle.read(64)


@pytest_twisted.ensureDeferred
async def test_rbd_and_ext_export_import(root, ceph):
    """A running rbd instance is exported from an rbd snapshot without being
    stopped (--noshutdown), or stopped only while the snapshot is taken (the
    default); the snapshot is gone afterwards; the dump has the image's
    content and an import into rbd on another node recreates the image with
    it.  An ext instance (the shipped loopback provider, which has a snapshot
    script) exports from a snapshot, or stopped with --long-sleep, and
    imports into ext."""
    from ganeti.backend.storage import rbd
    from ganeti.testing.ceph import qemu_io, read_drive
    from tests.bench.bench_extstorage import release

    volumes = tempfile.mkdtemp(prefix="gntmvx")
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntbk") as cluster:
        try:
            for paths in cluster.roots:
                ceph.install_client(paths.root)
            master, roots = cluster.master, cluster.roots
            ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "rbd,ext,file,diskless",
               "-D", "rbd:pool=%s,access=userspace" % ceph.pool)

            def drive(image: str, index: int = 0) -> str:
                return "rbd:%s/%s:id=%s:conf=%s" % (ceph.pool, image, ceph.user,
                                                    os.path.join(roots[index].root, rbd.CONF_FILE))

            await in_thread(ok, master, *ADD, "-t", "rbd", "--disk", "0:size=64M", "-n", N1, "exp1")
            (image,) = ceph.images()
            marker = os.path.join(volumes, "marker")
            with open(marker, "wb") as handle:
                handle.write(b"RBD-EXPORT-MARKER\n")
            await in_thread(qemu_io, drive(image), "write -s %s 0 18" % marker)

            # --- live: from a snapshot, the instance keeps running, the snapshot is removed
            out = await in_thread(ok, master, "gnt-backup", "export", "-n", N2, "--noshutdown", "exp1")
            assert "Creating a snapshot of disk/0" in out and "Removing the snapshot of disk/0" in out, out
            assert "Shutting down" not in out, out
            assert ceph.rbd("snap", "ls", "%s/%s" % (ceph.pool, image)).strip() == ""
            assert export_dump(roots[1], "exp1").startswith(b"RBD-EXPORT-MARKER\n")
            assert await cluster.running() == {N1: ["exp1"], N2: [], N3: []}
            # --- the default (shutdown): stopped for the snapshot only, running again
            out = await in_thread(ok, master, "gnt-backup", "export", "-n", N2, "exp1")
            assert out.index("Shutting down") < out.index("Creating a snapshot") < out.index("Starting instance")
            assert out.index("Starting instance") < out.index("disk/0: done"), out
            assert await cluster.running() == {N1: ["exp1"], N2: [], N3: []}
            assert ceph.rbd("snap", "ls", "%s/%s" % (ceph.pool, image)).strip() == ""

            # --- import into rbd on node3: a new image with the exported content
            await in_thread(ok, master, "gnt-backup", "import", "-n", N3, "--src-node", N2, "--src-dir", "exp1",
                            "-t", "rbd", "--no-name-check", "--no-ip-check", "--no-start", "imp1")
            (new,) = [i for i in ceph.images() if i != image]
            assert ceph.image_size(new) == 64 * 1024 * 1024
            assert (await in_thread(read_drive, drive(new, 2), 0, 18)) == b"RBD-EXPORT-MARKER\n"
            assert not any(i.endswith(".import") for i in ceph.images())

            # --- ext: no snapshots, so a running instance needs --long-sleep; import into ext
            await in_thread(ok, master, *ADD, "-t", "ext", "--disk", "0:size=32M,provider=loopback,dir=%s" % volumes,
                            "-n", N1, "ext1")
            (volume,) = [n for n in os.listdir(volumes) if n.endswith(".ext.disk0")]
            with open(os.path.join(volumes, volume), "r+b") as handle:
                handle.write(b"EXT-EXPORT-MARKER\n")
            # the shipped provider has a snapshot script: exported from a snapshot, as rbd is
            out = await in_thread(ok, master, "gnt-backup", "export", "-n", N2, "ext1")
            assert "Creating a snapshot of disk/0" in out and "Removing the snapshot of disk/0" in out, out
            assert export_dump(roots[1], "ext1").startswith(b"EXT-EXPORT-MARKER\n")
            assert not [n for n in os.listdir(volumes) if ".ganeti-export-" in n]  # the snapshot is gone
            await in_thread(ok, master, "gnt-backup", "export", "-n", N2, "--long-sleep", "ext1")
            assert export_dump(roots[1], "ext1").startswith(b"EXT-EXPORT-MARKER\n")
            assert await cluster.running() == {N1: ["exp1", "ext1"], N2: [], N3: []}
            await in_thread(ok, master, "gnt-backup", "import", "-n", N3, "--src-node", N2, "--src-dir", "ext1",
                            "-t", "ext", "--disk", "0:size=32M,provider=loopback,dir=%s" % volumes,
                            "--no-name-check", "--no-ip-check", "--no-start", "imp2")
            (copy,) = [n for n in os.listdir(volumes) if n.endswith(".ext.disk0") and n != volume]
            with open(os.path.join(volumes, copy), "rb") as handle:
                assert handle.read(18) == b"EXT-EXPORT-MARKER\n"

            for name in ("exp1", "imp1", "ext1", "imp2"):
                await in_thread(ok, master, "gnt-instance", "remove", "-f", name)
            assert ceph.images() == []
        finally:
            release(volumes)


@pytest_twisted.ensureDeferred
async def test_verify_checks_rbd_ext_and_blockdev_disks(root, ceph):
    """gnt-cluster verify asks the primary about each rbd image, ext volume
    and adopted block device: all there, it passes; an image removed behind
    the cluster's back, an ext volume gone and an adopted device of another
    size are errors of their instances."""
    import subprocess

    from tests.bench.bench_extstorage import release

    volumes, adopted = tempfile.mkdtemp(prefix="gntvfx"), tempfile.mkdtemp(prefix="gntvfb")
    loop = None
    async with LoopbackCluster(reactor, root, loopback_config(2), prefix="gntvf") as cluster:
        try:
            for paths in cluster.roots:
                ceph.install_client(paths.root)
            master = cluster.master
            ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "rbd,ext,blockdev,diskless",
               "-D", "rbd:pool=%s,access=userspace" % ceph.pool)
            backing = os.path.join(adopted, "disk")
            with open(backing, "wb") as handle:
                handle.truncate(48 * 1024 * 1024)
            loop = subprocess.run(["losetup", "--find", "--show", backing], capture_output=True, text=True,
                                  check=True).stdout.strip()
            for name, disk in (("vrbd", ("-t", "rbd", "--disk", "0:size=64M")),
                               ("vext", ("-t", "ext", "--disk", "0:size=32M,provider=loopback,dir=%s" % volumes)),
                               ("vblk", ("-t", "blockdev", "--disk", "0:adopt=%s" % loop))):
                await in_thread(ok, master, *ADD, *disk, "-n", N1, name)
            await cluster.until(lambda: gnt(master, "gnt-cluster", "verify").returncode == 0, timeout=90)

            (image,) = ceph.images()
            ceph.rbd("rm", "--no-progress", "%s/%s" % (ceph.pool, image))
            (volume,) = [n for n in os.listdir(volumes) if n.endswith(".ext.disk0")]
            release(volumes)                                  # its loop device detached, its file gone
            with open(backing, "r+b") as handle:
                handle.truncate(40 * 1024 * 1024)
            subprocess.run(["losetup", "-c", loop], check=True)  # the adopted device shrinks to 40 MiB
            done = await in_thread(gnt, master, "gnt-cluster", "verify")
            text = done.stdout + done.stderr
            assert done.returncode != 0, text
            assert "disk/0 (rbd image %s/%s) missing or unreachable on node %s" % (ceph.pool, image, N1) in text
            assert "disk/0 (ext volume %s (provider loopback)) missing or unreachable" % volume in text, text
            assert "disk/0 (block device %s) on node %s is 40 MiB, the configuration says 48 MiB" % (loop, N1) in text
            assert "vrbd" in text and "vext" in text and "vblk" in text
        finally:
            if loop:
                subprocess.run(["losetup", "-d", loop], check=False)
            release(volumes)
            release(adopted)
