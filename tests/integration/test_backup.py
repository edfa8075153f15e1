"""gnt-backup end to end on a real 2-node loopback cluster (fake hypervisor,
the shipped C{image} and C{noop} OSes): export, list, remove, import with
checksums of the disk bytes, with and without compression; bad input."""

from __future__ import annotations

import hashlib
import os

import pytest_twisted
from twisted.internet import reactor

from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok

N1, N2 = "node1.test", "node2.test"
MIB = 1024 * 1024


def digest(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def fill(path: str, size: int, seed: bytes) -> None:
    """Write C{size} bytes of varied content into the existing file C{path}."""
    block = hashlib.sha512(seed).digest() * 2048  # 128 KiB
    with open(path, "r+b") as handle:
        written = 0
        while written < size:
            chunk = block[: size - written]
            handle.write(chunk)
            written += len(chunk)
            block = hashlib.sha512(block[:64]).digest() * 2048


def add(root, name: str, node: str, template: str = "file", size: str = "8M", os_name: str = "noop",
        *extra: str) -> str:
    return ok(root, "gnt-instance", "add", "-t", template, "--disk", "0:size=%s" % size, "-n", node, "-o", os_name,
              "-H", "fake", "-B", "memory=64M", "--no-name-check", "--no-ip-check", "--no-start", *extra, name)


@pytest_twisted.ensureDeferred
async def test_export_remove_import_keeps_the_bytes(root):
    cluster = await LoopbackCluster(reactor, root, loopback_config(2), prefix="gntbk").start()
    try:
        add(root, "web1.test", N1, "file", "8M", "noop", "--disk", "1:size=4M")
        disk0 = node_path(cluster.roots[0].root, "/srv/ganeti/file-storage/web1.test/disk0")
        disk1 = node_path(cluster.roots[0].root, "/srv/ganeti/file-storage/web1.test/disk1")
        fill(disk0, 8 * MIB, b"zero")
        fill(disk1, 3 * MIB, b"one")
        sums = [digest(disk0), digest(disk1)]

        out = ok(root, "gnt-backup", "export", "-n", N2, "web1.test")
        assert "disk/0: done" in out and "Finalizing export on %s" % N2 in out, out
        export_dir = os.path.join(cluster.roots[1].export_dir, "web1.test")
        assert sorted(os.listdir(cluster.roots[1].export_dir)) == ["web1.test"]
        with open(os.path.join(export_dir, "config.ini")) as handle:
            config = handle.read()
        assert "[export]" in config and "os = noop" in config and "disk_count = 2" in config, config
        assert "disk0_size = 8" in config and "compression = none" in config, config
        assert ok(root, "gnt-backup", "list", "--no-headers").split() == [N2, "web1.test"]

        ok(root, "gnt-instance", "remove", "-f", "web1.test")
        out = ok(root, "gnt-backup", "import", "-n", N1, "--src-node", N2, "--src-dir", "web1.test",
                 "--no-name-check", "--no-ip-check", "--no-start", "web1.test")
        assert [digest(disk0), digest(disk1)] == sums
        assert os.path.getsize(disk0) == 8 * MIB

        # again with compression, into another node and name
        ok(root, "gnt-backup", "import", "-n", N2, "--src-node", N2, "--src-dir", "web1.test", "--compress", "gzip",
           "--no-name-check", "--no-ip-check", "--no-start", "web2.test")
        copy0 = node_path(cluster.roots[1].root, "/srv/ganeti/file-storage/web2.test/disk0")
        copy1 = node_path(cluster.roots[1].root, "/srv/ganeti/file-storage/web2.test/disk1")
        assert [digest(copy0), digest(copy1)] == sums

        # bad input: an unknown export, an existing name, an offline target
        refused = gnt(root, "gnt-backup", "import", "-n", N1, "--src-dir", "nosuch.test", "--no-name-check",
                      "--no-ip-check", "nosuch.test")
        assert refused.returncode == 1 and "No export 'nosuch.test' found" in refused.stderr, refused.stderr
        refused = gnt(root, "gnt-backup", "import", "-n", N1, "--src-dir", "web1.test", "--no-name-check",
                      "--no-ip-check", "web2.test")
        assert refused.returncode == 1 and "already in the cluster" in refused.stderr, refused.stderr
        refused = gnt(root, "gnt-backup", "remove", "nosuch.test")
        assert refused.returncode == 1 and "No export found" in refused.stderr, refused.stderr

        ok(root, "gnt-backup", "remove", "web1.test")
        assert ok(root, "gnt-backup", "list", "--no-headers") == ""
        assert os.listdir(cluster.roots[1].export_dir) == []
    finally:
        await cluster.stop()
