"""The rbd disk template on a real 3-node loopback cluster and a real Ceph
(L{ganeti.testing.ceph}: 1 mon, 1 mgr, 1 BlueStore OSD, cephx on), with
the fake hypervisor and C{access=userspace}: create (the image has the
disk's size), grow, migrate and failover (no copy), rename (the image
stays), remove (the image is gone); bad input (a missing pool,
C{access=kernelspace} without the kernel module, a wrong parameter) gets a
clear error and creates nothing.  qemu (C{-drive file=<the URI the node
gives>}) opens the image through librbd with cephx; and a real qemu guest
(kvm hypervisor) whose disk is an rbd image migrates live between two
nodes, the target's qemu opening the same image.

Without Ceph installed this test fails (it does not skip): run
C{scripts/install-ceph}.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.backend.storage import rbd
from ganeti.testing.ceph import CephCluster, qemu_image_size, require_ceph
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from tests.integration.test_luxid import in_thread

N1, N2, N3 = "node1.test", "node2.test", "node3.test"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def ceph():
    require_ceph()  # fails with the install hint when Ceph is missing
    cluster = CephCluster.start_in(tempfile.mkdtemp(prefix="cephit", dir="/tmp"))
    try:
        yield cluster
    finally:
        cluster.stop()


def disks_of(root: Any, name: str) -> list[dict[str, Any]] | None:
    """The disks of instance C{name} in the master's config.data (None: not there yet)."""
    with open(root.config_data) as handle:
        config = json.load(handle)
    found = [i for i in config["instances"].values() if i["name"] == name]
    return [config["disks"][uuid] for uuid in found[0]["disks"]] if found else None


def refused(root: Any, text: str, *args: str) -> str:
    done = gnt(root, *args)
    assert done.returncode != 0, (args, done.stdout, done.stderr)
    assert text in done.stdout + done.stderr, (text, done.stdout, done.stderr)
    return done.stdout + done.stderr


ADD = ("gnt-instance", "add", "-t", "rbd", "-o", "noop", "--no-install", "--no-nics", "--no-name-check",
       "--no-ip-check", "-B", "memory=64M", "-H", "fake")


@pytest_twisted.ensureDeferred
async def test_rbd_instances(root, ceph):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntr") as cluster:
        for paths in cluster.roots:
            ceph.install_client(paths.root)
        master = cluster.master
        ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "diskless,file,sharedfile,rbd",
           "-D", "rbd:pool=%s,access=userspace" % ceph.pool)
        assert ceph.images() == []

        # --- create: 1 GiB image named <uuid>.rbd.disk0, params filled, started with the librbd URI
        ok(master, *ADD, "--disk", "0:size=1G", "-n", N1, "rbd1")
        await cluster.until(lambda: disks_of(master, "rbd1") is not None)
        (disk,) = disks_of(master, "rbd1") or []
        assert disk["dev_type"] == "rbd" and disk["logical_id"][0] == "rbd", disk
        image = disk["logical_id"][1]
        assert image.endswith(".rbd.disk0") and len(image) == 36 + len(".rbd.disk0"), image
        assert disk["params"] == {"pool": ceph.pool, "access": "userspace"} and disk["nodes"] == []
        assert ceph.images() == [image]
        assert ceph.image_size(image) == 1024 * MIB
        assert await cluster.running() == {N1: ["rbd1"], N2: [], N3: []}
        uri = "rbd:%s/%s:id=%s:conf=%s" % (ceph.pool, image, ceph.user,
                                           os.path.join(cluster.roots[0].root, rbd.CONF_FILE))
        with open(os.path.join(cluster.roots[0].run_dir, "fake-hypervisor", "rbd1")) as handle:
            assert json.load(handle)["disks"] == [uri]  # what the fake hypervisor was started with
        assert qemu_image_size(uri) == 1024 * MIB  # qemu opens that URI through librbd, with cephx

        # --- verify knows rbd disks have no node-local files
        await cluster.until(lambda: gnt(master, "gnt-cluster", "verify").returncode == 0, timeout=60)
        ok(master, "gnt-cluster", "verify-disks")

        # --- the pool as every node's storage unit of type rados
        listed = ok(master, "gnt-node", "list-storage", "-t", "rados", "--no-headers", "--separator", "|",
                    "-o", "node,type,name,size,free,allocatable")
        rows = [line.split("|") for line in listed.split()]
        assert [(r[0], r[1], r[2], r[5]) for r in rows] == [(n, "rados", ceph.pool, "Y") for n in (N1, N2, N3)], rows
        assert all(int(r[3]) >= int(r[4]) > 0 for r in rows), rows
        refused(master, "No disk template of storage type 'lvm-vg'", "gnt-node", "list-storage", "-t", "lvm-vg")

        # --- grow: rbd resize to old + amount
        ok(master, "gnt-instance", "grow-disk", "rbd1", "0", "512M")
        assert ceph.image_size(image) == 1536 * MIB
        await cluster.until(lambda: (disks_of(master, "rbd1") or [{}])[0].get("size") == 1536)

        # --- migrate and failover: shared storage, no copy
        ok(master, "gnt-instance", "migrate", "-f", "-n", N2, "rbd1")
        assert await cluster.running() == {N1: [], N2: ["rbd1"], N3: []}
        ok(master, "gnt-instance", "failover", "-f", "-n", N3, "rbd1")
        assert await cluster.running() == {N1: [], N2: [], N3: ["rbd1"]}
        assert ceph.images() == [image]

        # --- rename: the image keeps its name
        ok(master, "gnt-instance", "shutdown", "rbd1")
        ok(master, "gnt-instance", "rename", "-f", "--no-name-check", "--no-ip-check", "rbd1", "rbd2")
        await cluster.until(lambda: disks_of(master, "rbd2") is not None)  # config.data is written shortly after
        assert [d["logical_id"][1] for d in disks_of(master, "rbd2") or []] == [image]
        assert ceph.images() == [image]

        # --- a second disk, added and removed by gnt-instance modify
        ok(master, "gnt-instance", "modify", "--disk", "add:size=256M", "rbd2")
        await cluster.until(lambda: len(disks_of(master, "rbd2") or []) == 2)
        second = (disks_of(master, "rbd2") or [])[1]["logical_id"][1]
        assert second.endswith(".rbd.disk1") and sorted(ceph.images()) == sorted([image, second])
        assert ceph.image_size(second) == 256 * MIB
        ok(master, "gnt-instance", "modify", "--disk", "1:remove", "rbd2")
        assert ceph.images() == [image]

        # --- remove: the image is gone
        ok(master, "gnt-instance", "remove", "-f", "rbd2")
        assert ceph.images() == []

        # --- bad input: a clear error, nothing created
        out = refused(master, "kernel rbd module", *ADD, "--disk", "0:size=1G,access=kernelspace", "-n", N1, "bad1")
        assert "access=userspace" in out
        refused(master, "invalid access mode", *ADD, "--disk", "0:size=1G,access=sideways", "-n", N1, "bad2")
        refused(master, "Unknown disk parameter 'flavour'", "gnt-cluster", "modify", "-D", "rbd:flavour=x")
        refused(master, "Invalid rbd access mode", "gnt-cluster", "modify", "-D", "rbd:access=sideways")
        refused(master, "Invalid rbd pool", "gnt-cluster", "modify", "-D", "rbd:pool=a/b")
        ok(master, "gnt-cluster", "modify", "-D", "rbd:pool=nopool")
        refused(master, "error opening pool 'nopool'", *ADD, "--disk", "0:size=1G", "-n", N1, "bad3")
        ok(master, "gnt-cluster", "modify", "-D", "rbd:pool=%s" % ceph.pool)
        assert ceph.images() == []
        listed = await in_thread(lambda: ok(master, "gnt-instance", "list", "--no-headers", "-o", "name"))
        assert listed.split() == []


def qemu_pids(roots: list[Any]) -> list[int]:
    """The qemu processes of the nodes at C{roots}, by their pid file (a target's
    argv names the source's ceph.conf: its runtime came with the migration)."""
    import subprocess

    pids = []
    for paths in roots:
        found = subprocess.run(["pgrep", "-f", "^%s .*-pidfile %s/" % (re.escape(shutil.which("qemu-system-x86_64")
                                                                               or "qemu"), re.escape(paths.root))],
                               capture_output=True, text=True)
        pids += [int(pid) for pid in found.stdout.split()]
    return sorted(pids)


@pytest_twisted.ensureDeferred
async def test_kvm_guest_on_rbd_migrates(root, ceph):
    """A real qemu (kvm hypervisor, TCG where /dev/kvm is unusable) whose disk is the rbd image, opened
    through librbd with cephx, migrates live to the other node, whose qemu opens the same image."""
    from tests.integration.test_kvm_cluster import QEMU, cmdline, qmp_status

    assert QEMU is not None, "qemu-system-x86_64 is not installed (scripts/install-qemu installs it)"
    from ganeti.daemons import free_port

    async with LoopbackCluster(reactor, root, loopback_config(2, candidate_pool_size=2), prefix="gntrk") as cluster:
        roots = cluster.roots
        try:
            for paths in roots:
                ceph.install_client(paths.root)
            master = cluster.master
            port = free_port("127.0.1.2")
            ok(master, "gnt-cluster", "modify", "--enabled-disk-templates", "rbd,diskless",
               "-D", "rbd:pool=%s,access=userspace" % ceph.pool, "--enabled-hypervisors", "kvm,fake",
               "-H", "kvm:kvm_path=%s,vnc_bind_address=,migration_port=%d,migration_bandwidth=1000,"
                     "migration_downtime=300" % (QEMU, port))
            ok(master, "gnt-instance", "add", "-t", "rbd", "--disk", "0:size=64M", "-H", "kvm", "-o", "noop",
               "--no-install", "--no-nics", "-B", "memory=64M", "-n", N1, "--no-name-check", "--no-ip-check",
               "kvmrbd")
            await cluster.until(lambda: disks_of(master, "kvmrbd") is not None, timeout=60)
            (disk,) = disks_of(master, "kvmrbd") or []
            image = disk["logical_id"][1]
            assert ceph.images() == [image] and ceph.image_size(image) == 64 * MIB
            (pid,) = qemu_pids(roots[:1])
            drive = "file=rbd:%s/%s:id=%s:conf=%s" % (ceph.pool, image, ceph.user,
                                                      os.path.join(roots[0].root, rbd.CONF_FILE))
            assert any(arg.startswith(drive + ",") for arg in cmdline(pid)), cmdline(pid)
            assert await qmp_status(roots[0], "kvmrbd") == "running"

            out = ok(master, "gnt-instance", "migrate", "-f", "-n", N2, "kvmrbd")
            assert "* done" in out, out
            await cluster.until(lambda: qemu_pids(roots[:1]) == [], timeout=60)  # the source's qemu quits
            (pid,) = qemu_pids(roots[1:])
            assert any(arg.startswith("file=rbd:%s/%s:" % (ceph.pool, image)) for arg in cmdline(pid))
            assert await qmp_status(roots[1], "kvmrbd") == "running"

            ok(master, "gnt-instance", "shutdown", "--timeout", "1", "kvmrbd")
            await cluster.until(lambda: qemu_pids(roots) == [], timeout=60)
            ok(master, "gnt-instance", "remove", "-f", "kvmrbd")
            assert ceph.images() == []
        finally:
            for pid in qemu_pids(roots):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
