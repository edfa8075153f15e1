"""Templates ext and blockdev on a real 2-node loopback cluster (fake
hypervisor, the shipped noop OS), driven with gnt-instance:

  - ext with the shipped C{loopback} provider: add makes a sparse file and
    a real loop device, the instance starts on it, grow-disk grows both,
    failover and migrate move it between the nodes, remove detaches and
    deletes them;
  - ext with a provider this test writes under each node's root, which
    records every action's arguments, directory and environment;
  - blockdev adopting a loop device this test makes: its size is the
    device's, remove leaves it alone;
  - gnt-storage diagnose and info with those providers and a broken one;
  - refusals that change nothing: unknown provider, provider without
    parameters.list, unknown parameter, adopted path that does not exist.

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

from ganeti.backend.storage import extstorage as es
from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok


@pytest.fixture(autouse=True)
def loop_devices() -> None:
    """Loop devices need root and losetup: without them the test fails and says so (never skipped)."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.fail("loop devices need root and losetup (Debian package mount)")

N1, N2 = "node1.test", "node2.test"
TEMPLATES = ("diskless", "file", "sharedfile", "ext", "blockdev")
MIB = 1024 * 1024

RECORDER = """#!/bin/sh
# records its action, arguments, directory and volume environment
{
  echo "action=$(basename "$0") argc=$# pwd=$(pwd)"
  env | grep -E '^(VOL_|EXTP_|LC_ALL=)' | sort
  echo "--"
} >> "$EXTP_RECORD"
if [ "$(basename "$0")" = attach ]; then
  echo
  echo "kvm:file:/nonexistent/$VOL_NAME"
fi
"""


def loops_of(path: str) -> list[str]:
    out = subprocess.run(["losetup", "-j", path], capture_output=True, text=True, check=True).stdout
    return [line.split(":", 1)[0] for line in out.splitlines() if line]


def release(directory: str) -> None:
    """Detach every loop device over a file in C{directory}, then remove it."""
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        for dev in loops_of(os.path.join(directory, name)):
            subprocess.run(["losetup", "-d", dev], check=False)
    shutil.rmtree(directory, ignore_errors=True)


def add(root, name: str, template: str, disk: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return gnt(root, "gnt-instance", "add", "-t", template, "--disk", "0:" + disk, "-n", N1, "-o", "noop",
               "-H", "fake", "-B", "memory=64M", "--no-name-check", "--no-ip-check", *extra, name)


def write_provider(root_dir: str, name: str, with_params: bool = True) -> None:
    directory = os.path.join(root_dir, "srv/ganeti/extstorage", name)
    os.makedirs(directory)
    for script in ("create", "attach", "detach", "remove", "grow", "setinfo", "verify", "open", "close"):
        path = os.path.join(directory, script)
        with open(path, "w") as handle:
            handle.write(RECORDER)
        os.chmod(path, 0o755)
    if with_params:
        with open(os.path.join(directory, "parameters.list"), "w") as handle:
            handle.write("record File the actions are recorded in\n")


def records(path: str) -> list[dict[str, str]]:
    out = []
    with open(path) as handle:
        for block in handle.read().split("--\n"):
            lines = block.strip().splitlines()
            if not lines:
                continue
            entry = dict(field.split("=", 1) for field in lines[0].split())
            entry.update(line.split("=", 1) for line in lines[1:])
            out.append(entry)
    return out


@pytest_twisted.ensureDeferred
async def test_ext_and_blockdev_templates(root):
    work = tempfile.mkdtemp(prefix="gnt-ext-")
    volumes, adopted = os.path.join(work, "volumes"), os.path.join(work, "adopted")
    os.makedirs(volumes)
    os.makedirs(adopted)
    cfg = loopback_config(2, enabled_disk_templates=TEMPLATES)
    (group,) = cfg.nodegroups.values()
    GROUP = group.name
    try:
        async with LoopbackCluster(reactor, root, cfg, prefix="gntext") as cluster:
            client = LuxiClient(cluster.master.luxi_socket, timeout=60)
            for node_root in cluster.roots:
                write_provider(node_root.root, "recorder")
            write_provider(cluster.roots[0].root, "broken", with_params=False)

            # --- gnt-storage: what the nodes have
            diagnosed = ok(root, "gnt-storage", "diagnose")
            shipped = os.path.join(es.SHIPPED_DIR, "loopback")
            for node in (N1, N2):
                assert "  Node: %s, status: valid (path: %s) [parameters: dir]\n" % (node, shipped) in diagnosed
            broken = diagnosed[diagnosed.index("Provider: broken"):].split("\n\n")[0]
            assert "Node: node1.test, status: invalid - " in broken and "parameters.list" in broken, broken
            assert "Node: node2.test, status: ExtStorage provider not found" in broken, broken
            assert "For nodegroup: %s --> invalid" % GROUP in broken, broken
            assert "For nodegroup: %s --> valid" % GROUP in diagnosed
            assert ok(root, "gnt-storage", "info", "recorder", "nope") == (
                "recorder:\n  - Valid for nodegroups:\n      %s\n  - Supported parameters:\n"
                "      record: File the actions are recorded in\n\nnope: Not Found\n\n" % GROUP)

            def names() -> set[str]:
                return {row[0] for row in client.query_instances([], ["name"], False)}

            # --- the shipped loopback provider, end to end
            done = add(root, "ext1", "ext", "size=64M,provider=loopback,dir=%s" % volumes)
            assert done.returncode == 0, done.stderr
            (volume,) = [n for n in os.listdir(volumes) if not n.endswith(".meta")]
            assert volume.endswith(".ext.disk0")
            backing = os.path.join(volumes, volume)
            assert os.stat(backing).st_size == 64 * MIB and os.stat(backing).st_blocks * 512 < 64 * MIB  # sparse
            (dev,) = loops_of(backing)
            row = client.query_instances(["ext1"], ["disk_template", "disk.sizes", "status"], False)[0]
            assert row == ["ext", [64], "running"]
            with open(backing + ".meta") as handle:  # setinfo
                assert handle.read() == "originstname+ext1\n"
            logs = os.listdir(os.path.join(cluster.roots[0].root, "var/log/ganeti/extstorage"))
            assert any(log.startswith("create-loopback-%s-" % volume) for log in logs), logs

            ok(root, "gnt-instance", "grow-disk", "ext1", "0", "64M")
            assert os.stat(backing).st_size == 128 * MIB
            assert es.device_size(dev) == 128 * MIB  # losetup -c: the device sees it
            assert client.query_instances(["ext1"], ["disk.sizes"], False)[0] == [[128]]

            # shared storage: the instance changes node without copying (both nodes see the directory)
            ok(root, "gnt-instance", "failover", "-f", "-n", N2, "ext1")
            assert client.query_instances(["ext1"], ["pnode", "status"], False)[0] == [N2, "running"]
            ok(root, "gnt-instance", "migrate", "-f", "-n", N1, "ext1")
            assert client.query_instances(["ext1"], ["pnode", "status"], False)[0] == [N1, "running"]
            assert loops_of(backing) == [dev]

            ok(root, "gnt-instance", "remove", "-f", "ext1")
            assert os.listdir(volumes) == [] and "ext1" not in names()
            # detached (the device may meanwhile hold another test's file; one still held open by someone
            # else is detached by the kernel at its last close, which the provider waits for)
            bound = subprocess.run(["losetup", dev], capture_output=True, text=True)
            assert bound.returncode != 0 or volume not in bound.stdout, bound.stdout

            # --- a provider of the test's own: what the scripts are given
            record = os.path.join(work, "record")
            done = add(root, "rec1", "ext", "size=32M,provider=recorder,record=%s,name=data0" % record,
                       "--no-start", "--no-install")
            assert done.returncode == 0, done.stderr
            made = records(record)
            assert [r["action"] for r in made] == ["create", "attach", "open", "setinfo"]
            provider_dir = os.path.join(cluster.roots[0].root, "srv/ganeti/extstorage/recorder")
            for entry in made:
                assert entry["argc"] == "0" and entry["pwd"] == provider_dir and entry["LC_ALL"] == "C"
                assert entry["EXTP_PROVIDER"] == "recorder" and entry["EXTP_RECORD"] == record
                assert entry["EXTP_ACCESS"] == "kernelspace"  # filled in as Ganeti's RPC does
                assert entry["VOL_NAME"].endswith(".ext.disk0") and entry["VOL_CNAME"] == "data0"
            create, _attach, opened, setinfo = made
            assert create["VOL_SIZE"] == "32" and "VOL_NEW_SIZE" not in create
            assert opened["VOL_OPEN_EXCLUSIVE"] == "True"
            assert setinfo["VOL_METADATA"] == "originstname+rec1"
            (disk_uuid,) = client.query_instances(["rec1"], ["disk.uuids"], False)[0]
            assert create["VOL_UUID"] == disk_uuid[0]
            os.unlink(record)
            ok(root, "gnt-instance", "remove", "-f", "rec1")
            assert [r["action"] for r in records(record)] == ["close", "detach", "remove"]
            placed = gnt(root, "gnt-instance", "add", "-t", "ext", "--disk", "0:size=8M,provider=recorder,record=%s"
                         % record, "-I", "builtin", "-o", "noop", "-H", "fake", "-B", "memory=64M", "--no-name-check",
                         "--no-ip-check", "--no-start", "--no-install", "rec2")  # through the allocator
            assert placed.returncode == 0, placed.stderr
            ok(root, "gnt-instance", "remove", "-f", "rec2")

            # --- blockdev: a loop device the test made, adopted and left alone
            backing_file = os.path.join(adopted, "disk")
            with open(backing_file, "wb") as handle:
                handle.truncate(48 * MIB)
            loop = subprocess.run(["losetup", "--find", "--show", backing_file], capture_output=True, text=True,
                                  check=True).stdout.strip()
            done = add(root, "blk1", "blockdev", "adopt=%s" % loop, "--no-install")
            assert done.returncode == 0, done.stderr
            assert client.query_instances(["blk1"], ["disk_template", "disk.sizes", "status"], False)[0] == [
                "blockdev", [48], "running"]
            refused = gnt(root, "gnt-instance", "grow-disk", "blk1", "0", "16M")
            assert refused.returncode != 0 and "cannot grow" in refused.stderr, refused.stderr
            again = add(root, "blk2", "blockdev", "adopt=%s" % loop, "--no-install")
            assert again.returncode != 0 and "already adopted" in again.stderr, again.stderr
            ok(root, "gnt-instance", "remove", "-f", "blk1")
            assert loops_of(backing_file) == [loop] and os.stat(backing_file).st_size == 48 * MIB

            # --- refusals: clear errors, nothing made
            for disk, template, text in [
                ("size=64M,provider=nope", "ext", "ExtStorage provider nope not found on node node1.test"),
                ("size=64M,provider=broken,record=/x", "ext", "ExtStorage provider broken is invalid on node"),
                ("size=64M,provider=loopback,dir=%s,pool=x" % volumes, "ext", "does not take the parameter(s) pool"),
                ("adopt=/dev/does-not-exist-gnt", "blockdev", "Missing block device(s) on node node1.test"),
            ]:
                done = add(root, "bad1", template, disk, "--no-start")
                assert done.returncode != 0 and text in done.stderr, (disk, done.stderr)
            broken = add(root, "bad1", "ext", "size=64M,provider=broken,record=/x", "--no-start")
            assert "parameters.list" in broken.stderr, broken.stderr
            assert names() == set() and os.listdir(volumes) == []
    finally:
        release(volumes)
        release(adopted)
        shutil.rmtree(work, ignore_errors=True)


@pytest_twisted.ensureDeferred
async def test_ext_export_of_a_running_instance_from_a_snapshot(root):
    """gnt-backup export --noshutdown of a running ext instance: the shipped loopback provider's
    snapshot script makes a volume the export reads, removed afterwards, while the instance keeps
    running; a provider without the script refuses the live export clearly and exports the stopped
    instance with --long-sleep."""
    work = tempfile.mkdtemp(prefix="gnt-exs-")
    volumes = os.path.join(work, "volumes")
    os.makedirs(volumes)
    cfg = loopback_config(2, enabled_disk_templates=TEMPLATES)
    try:
        async with LoopbackCluster(reactor, root, cfg, prefix="gntexs") as cluster:
            client = LuxiClient(cluster.master.luxi_socket, timeout=60)
            for node_root in cluster.roots:  # the shipped provider without its snapshot script
                copy = os.path.join(node_root.root, "srv/ganeti/extstorage/nosnap")
                shutil.copytree(os.path.join(es.SHIPPED_DIR, "loopback"), copy)
                os.unlink(os.path.join(copy, "snapshot"))
            marker = b"GANETI-EXT-SNAPSHOT-MARKER\n"
            for name, provider in (("snap1", "loopback"), ("nosnap1", "nosnap")):
                known = set(os.listdir(volumes))
                done = add(root, name, "ext", "size=16M,provider=%s,dir=%s" % (provider, volumes))
                assert done.returncode == 0, done.stderr
                (volume,) = [n for n in set(os.listdir(volumes)) - known if not n.endswith(".meta")]
                (dev,) = loops_of(os.path.join(volumes, volume))
                with open(dev, "r+b") as handle:  # what the running instance wrote
                    handle.write(marker)
                    handle.flush()
                    os.fsync(handle.fileno())
            before = sorted(os.listdir(volumes))

            out = ok(root, "gnt-backup", "export", "-n", N2, "--noshutdown", "snap1")
            assert "Creating a snapshot of disk/0" in out and "Removing the snapshot of disk/0" in out, out
            assert "Shutting down" not in out, out
            assert client.query_instances(["snap1"], ["status"], False)[0] == ["running"]
            assert sorted(os.listdir(volumes)) == before  # the snapshot volume is gone
            (disk_uuid,) = client.query_instances(["snap1"], ["disk.uuids"], False)[0][0]
            with open(os.path.join(cluster.roots[1].export_dir, "snap1", disk_uuid), "rb") as handle:
                dump = handle.read()
            assert dump[:len(marker)] == marker and len(dump) == 16 * MIB

            refused = gnt(root, "gnt-backup", "export", "-n", N2, "--noshutdown", "nosnap1")
            assert refused.returncode != 0 and "provider nosnap has no snapshot script" in refused.stderr, \
                refused.stderr
            assert "export the instance stopped (with --long-sleep)" in refused.stderr, refused.stderr
            assert client.query_instances(["nosnap1"], ["status"], False)[0] == ["running"]
            assert sorted(os.listdir(cluster.roots[1].export_dir)) == ["snap1"]
            out = ok(root, "gnt-backup", "export", "-n", N2, "--long-sleep", "nosnap1")
            assert "exporting the stopped instance instead" in out and "Shutting down" in out, out
            assert client.query_instances(["nosnap1"], ["status"], False)[0] == ["running"]
            assert sorted(os.listdir(cluster.roots[1].export_dir)) == ["nosnap1", "snap1"]
            assert sorted(os.listdir(volumes)) == before
            for name in ("snap1", "nosnap1"):
                ok(root, "gnt-instance", "remove", "-f", name)
    finally:
        release(volumes)
        shutil.rmtree(work, ignore_errors=True)
