"""Disk operations admins use daily, on a real 1-node loopback cluster (fake
hypervisor, the shipped noop OS and C{loopback} ExtStorage provider, loop
devices for blockdev):

  - recreate-disks makes a file disk removed by hand again; an unknown
    index and a disk that still exists are clear errors that change nothing;
  - modify --disk add of an ext volume (provider from the first disk) makes
    a volume; an unknown provider is refused before anything is made;
    detach keeps the volume, attach gives it to another instance;
  - modify --disk add:adopt= adopts one more block device; a missing device
    is refused and nothing changes;
  - --hotplug under the fake hypervisor is refused and changes nothing;
    --hotplug-if-possible warns and makes the change;
  - Ganeti 3.0.2's own gnt-instance (when its package is there) does the
    same recreate-disks and modify against this cluster.

Every loop device and file the test makes is detached and removed, also on
failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_extstorage import N1, add, release

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("losetup") is None,
                                reason="loop devices need root and losetup (Debian package mount)")


def disk_sizes(root, name: str) -> str:
    return ok(root, "gnt-instance", "list", "--no-headers", "-o", "disk.sizes", name).strip()


def refused(root, *argv: str) -> str:
    done = gnt(root, "gnt-instance", *argv)
    assert done.returncode != 0, (argv, done.stdout)
    return done.stderr + done.stdout


@pytest_twisted.ensureDeferred
async def test_recreate_modify_attach_detach(root):
    work = tempfile.mkdtemp(prefix="gnt-dops-")
    volumes = os.path.join(work, "volumes")
    devices = os.path.join(work, "devices")
    os.makedirs(volumes)
    os.makedirs(devices)
    cfg = loopback_config(1, enabled_disk_templates=("file", "ext", "blockdev"))
    loops: list[str] = []
    try:
        for index in range(2):
            backing = os.path.join(devices, "dev%d" % index)
            with open(backing, "wb") as handle:
                handle.truncate((8 + 4 * index) << 20)
            loops.append(subprocess.run(["losetup", "-f", "--show", backing], capture_output=True, text=True,
                                        check=True).stdout.strip())
        async with LoopbackCluster(reactor, root, cfg, prefix="gntdops") as cluster:
            node_root = cluster.roots[0]

            # --- recreate-disks of a file instance whose disk file was lost
            done = add(root, "file1", "file", "size=16M", "--no-start")
            assert done.returncode == 0, done.stderr
            path = node_path(node_root.root, "/srv/ganeti/file-storage/file1/disk0")
            os.remove(path)
            assert "Invalid disk index '3'" in refused(root, "recreate-disks", "--disk", "3", "file1")
            assert not os.path.exists(path)
            ok(root, "gnt-instance", "recreate-disks", "file1")
            assert os.path.getsize(path) == 16 << 20
            message = refused(root, "recreate-disks", "file1")
            assert "Could not create disk disk/0 of instance file1" in message, message
            assert os.path.getsize(path) == 16 << 20

            # Ganeti 3.0.2's own gnt-instance (when its package is there): the same recreation and refusal
            if unavailable_reason() is None:
                tools = GanetiTools.for_root(root.root, N1, work)
                os.remove(path)
                tools.ok("gnt-instance", "recreate-disks", "--disk", "0:size=20M", "file1")
                assert os.path.getsize(path) == 20 << 20 and disk_sizes(root, "file1") == "20"
                done = tools.run("gnt-instance", "recreate-disks", "file1")
                assert done.returncode != 0 and "Could not create disk disk/0" in done.stderr, done.stderr
                os.remove(path)
                ok(root, "gnt-instance", "recreate-disks", "--disk", "0:size=16M", "file1")

            # --- hotplug under the fake hypervisor
            ok(root, "gnt-instance", "startup", "file1")
            message = refused(root, "modify", "--hotplug", "--disk", "add:size=8M", "file1")
            assert "Hotplug is not possible: Hotplug is not supported by hypervisor fake" in message, message
            assert disk_sizes(root, "file1") == "16"
            out = ok(root, "gnt-instance", "modify", "--hotplug-if-possible", "--disk", "add:size=8M", "file1")
            assert "disk/1 -> add:size=8,mode=rw" in out and "next start" in out, out
            assert disk_sizes(root, "file1") == "16,8"
            if unavailable_reason() is None:   # Ganeti's client: the same refusal and fallback
                done = tools.run("gnt-instance", "modify", "--hotplug", "--disk", "add:size=8M", "file1")
                assert done.returncode != 0 and "Hotplug is not possible" in done.stderr, done.stderr
                out = tools.ok("gnt-instance", "modify", "--hotplug-if-possible", "--disk", "add:size=8M", "file1")
                assert "disk/2 -> add:size=8,mode=rw" in out, out
                done = tools.run("gnt-instance", "modify", "--disk", "2:remove", "file1")
                assert done.returncode != 0 and "remove them with --hotplug" in done.stderr, done.stderr
                assert disk_sizes(root, "file1") == "16,8,8"

            # --- ext: add (the first disk's provider), refusal, detach and attach elsewhere
            assert add(root, "ext1", "ext", "size=16M,provider=loopback,dir=%s" % volumes, "--no-start").returncode == 0
            assert add(root, "ext2", "ext", "size=16M,provider=loopback,dir=%s" % volumes, "--no-start").returncode == 0
            before = sorted(os.listdir(volumes))
            message = refused(root, "modify", "--disk", "add:size=8M,provider=nope,dir=%s" % volumes, "ext1")
            assert "ExtStorage provider nope not found on node" in message, message
            assert sorted(os.listdir(volumes)) == before and disk_sizes(root, "ext1") == "16"
            ok(root, "gnt-instance", "modify", "--disk", "add:size=8M,name=data,dir=%s" % volumes, "ext1")
            assert disk_sizes(root, "ext1") == "16,8" and len(os.listdir(volumes)) > len(before)
            ok(root, "gnt-instance", "modify", "--disk", "data:detach", "ext1")
            assert disk_sizes(root, "ext1") == "16"
            out = ok(root, "gnt-instance", "modify", "--disk", "attach:name=data", "ext2")
            assert "disk/1 -> attach:size=8,mode=rw" in out, out
            assert disk_sizes(root, "ext2") == "16,8"
            assert "is attached to instance ext2" in refused(root, "modify", "--disk", "attach:name=data", "ext1")

            # --- blockdev: one more adopted device; a missing one is refused
            done = add(root, "blk1", "blockdev", "adopt=%s" % loops[0], "--no-start")
            assert done.returncode == 0, done.stderr
            message = refused(root, "modify", "--disk", "add:adopt=/dev/nosuchdevice", "blk1")
            assert "Missing block device(s) on node" in message and "/dev/nosuchdevice" in message, message
            assert disk_sizes(root, "blk1") == "8"
            ok(root, "gnt-instance", "modify", "--disk", "add:adopt=%s" % loops[1], "blk1")
            assert disk_sizes(root, "blk1") == "8,12"
            ok(root, "gnt-instance", "modify", "--disk", "1:remove", "blk1")
            assert os.path.exists(loops[1])                      # adopted devices are never removed

            for name in ("blk1", "ext2", "ext1", "file1"):
                ok(root, "gnt-instance", "remove", "-f", name)
    finally:
        release(volumes)
        for dev in loops:
            subprocess.run(["losetup", "-d", dev], check=False)
        shutil.rmtree(work, ignore_errors=True)
