"""Issue 14, end to end on a real 3-node loopback cluster: C{gnt-cluster
verify} the Ganeti way (OP_CLUSTER_VERIFY submits the config job and one
job per group; the client follows them), C{verify-disks} and
C{repair-disk-sizes}, with our commands and with Ganeti 3.0.2's own
C{VerifyCluster} and C{VerifyDisks} client code against our LuxiD.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok, ssconf_of

CHECKOUT = Path(__file__).resolve().parents[2]
GANETI_LIB = CHECKOUT / ".venv" / "ganeti-3.0" / "usr" / "share" / "ganeti" / "3.0"
SCRIPT = CHECKOUT / "tests" / "compat" / "ganeti_verify.py"

N2 = "node2.test"
VM = "vm1.test"
FILE_DIR = "/srv/ganeti/file-storage"
MIB = 1024 * 1024


def ganeti_verify(socket: str) -> dict | None:
    """Ganeti 3.0.2's verify and verify-disks against our LuxiD (None when
    its Python package is not installed here)."""
    if not (GANETI_LIB / "ganeti" / "cli.py").exists():
        return None
    env = dict(os.environ, PYTHONPATH=str(GANETI_LIB))
    done = subprocess.run([sys.executable, str(SCRIPT), socket], capture_output=True, text=True, timeout=180,
                          env=env, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def failing(root, tool: str, *args: str) -> str:  # type: ignore[no-untyped-def]
    done = gnt(root, tool, *args)
    assert done.returncode == 1, (tool, args, done.stdout, done.stderr)
    return done.stdout + done.stderr


@pytest_twisted.ensureDeferred
async def test_verify_jobs_verify_disks_and_repair_disk_sizes(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntcv") as cluster:
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-B", "memory=64", "-o", "noop",
           "--no-name-check", "--no-ip-check", "-n", N2, VM)
        disk = node_path(cluster.roots[1].root, "%s/%s/disk0" % (FILE_DIR, VM))

        # --- a sound cluster: the config job, then the group's job, followed; at once after the addition
        # (the group's job waits until the change reached every node's ssconf, or it would report them)
        out = ok(root, "gnt-cluster", "verify")
        lines = out.splitlines()
        assert lines[0].startswith("Submitted jobs ") and len(lines[0].split(",")) == 2, out
        assert "* Verifying cluster config" in out and "* Verifying group 'default'" in out, out
        assert out.index("* Verifying cluster config") < out.index("* Verifying group 'default'"), out
        assert "ERROR" not in out, out
        assert ok(root, "gnt-cluster", "verify-disks").splitlines()[-1] == "No disks need to be activated."
        assert ok(root, "gnt-cluster", "repair-disk-sizes") is not None
        got = await threads.deferToThread(ganeti_verify, root.luxi_socket)
        if got is not None:
            assert got["verify_exit"] == 0, got
            assert any("* Verifying group 'default'" in line for line in got["verify"]), got
            assert (got["verify_disks_exit"], got["verify_disks"][-1]) == (0, "No disks need to be activated."), got
            # Ganeti's watcher: one OP_GROUP_VERIFY_DISKS job (the group's uuid, low priority), archived
            watched = {k: v for k, v in got.items() if k.startswith("watcher")}
            assert (got["watcher_jobs"], got["watcher_archived"]) == (1, [True]), watched
            ((ops, results),) = got["watcher_job"]
            assert [(op["OP_ID"], op["priority"]) for op in ops] == [("OP_GROUP_VERIFY_DISKS", 10)], watched
            assert results == [[{}, [], {}]], watched

        # --- ganeti-wconfd-client flush --distributed returns once every node's ssconf has the last change;
        # a verify right after a removal waits for it as well
        ok(root, "gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", N2, "--no-name-check",
           "--no-ip-check", "--no-start", "vm2.test")
        out = ok(root, "ganeti-wconfd-client", "flush", "--distributed")
        assert out.startswith("config.data holds serial ") and out.rstrip().endswith(", distributed"), out
        lists = [(ssconf_of(r, "instance_list") or "").split() for r in cluster.roots]
        assert all("vm2.test" in names for names in lists), lists
        ok(root, "gnt-instance", "remove", "-f", "vm2.test")
        out = ok(root, "gnt-cluster", "verify")
        assert "ERROR" not in out, out

        # --- an instance marked down that runs (started behind Ganeti's back): an error, until marked up
        vm_file = os.path.join(cluster.roots[1].root, "var", "run", "ganeti", "fake-hypervisor", VM)
        with open(vm_file, "rb") as handle:
            running = handle.read()
        ok(root, "gnt-instance", "shutdown", VM)
        assert not os.path.exists(vm_file)
        ok(root, "gnt-cluster", "verify")
        with open(vm_file, "wb") as handle:
            handle.write(running)
        out = failing(root, "gnt-cluster", "verify")
        assert "ERROR: instance %s: instance is marked down but runs on its primary node %s" % (VM, N2) in out, out
        out = failing(root, "gnt-cluster", "verify", "--error-codes")
        assert "ERROR:EINSTANCEUNEXPECTEDLYRUNNING:instance:%s:" % VM in out, out
        ok(root, "gnt-instance", "startup", VM)
        ok(root, "gnt-cluster", "verify")
        # and the reverse: marked up, not running (the watcher paused, or it would restart it)
        ok(root, "gnt-cluster", "watcher", "pause", "1h")
        os.unlink(vm_file)
        out = failing(root, "gnt-cluster", "verify")
        assert "ERROR: instance %s: instance not running on its primary node %s" % (VM, N2) in out, out
        ok(root, "gnt-instance", "startup", VM)
        ok(root, "gnt-cluster", "watcher", "continue")
        assert os.path.exists(vm_file)

        # --- a disk file truncated by hand: verify fails; repair-disk-sizes records the actual size
        os.truncate(disk, 8 * MIB)
        out = failing(root, "gnt-cluster", "verify")
        assert "ERROR: instance %s: disk disk/0 (file %s/%s/disk0) on node %s is 8 MiB, the configuration says" \
            " 16 MiB" % (VM, FILE_DIR, VM, N2) in out, out
        out = ok(root, "gnt-cluster", "repair-disk-sizes", VM)
        assert "Disk 0 of instance %s has mismatched size, correcting: recorded 16, actual 8" % VM in out, out
        size = ok(root, "gnt-instance", "list", "--no-headers", "--units", "m", "-o", "disk.size/0", VM).strip()
        assert size == "8", size
        ok(root, "gnt-cluster", "verify")

        # --- a disk file deleted by hand: verify and verify-disks fail, naming it
        os.unlink(disk)
        out = failing(root, "gnt-cluster", "verify")
        assert "ERROR: instance %s: disk disk/0 (file %s/%s/disk0) missing on node %s" % (VM, FILE_DIR, VM, N2) \
            in out, out
        out = failing(root, "gnt-cluster", "verify-disks")
        assert "Instance %s has missing logical volumes:\n\t%s %s/%s/disk0\n" % (VM, N2, FILE_DIR, VM) in out, out
        got = await threads.deferToThread(ganeti_verify, root.luxi_socket)
        if got is not None:
            assert got["verify_exit"] == 1, got
            assert any("missing on node %s" % N2 in line for line in got["verify"]), got
            assert got["verify_disks_exit"] == 1, got
            assert "Instance %s has missing logical volumes:" % VM in got["verify_disks"], got
            assert "\t%s /dev/%s/%s/disk0" % (N2, FILE_DIR, VM) in got["verify_disks"], got
