"""The watcher with real qemu, on a 2-node loopback cluster: a kvm
instance whose qemu is killed, and one whose guest powers itself off
(a boot sector that writes ACPI S5 to the PM control port; qemu runs with
-no-shutdown and stays, its status "shutdown"), are restarted by the
watcher; the guest that keeps powering off is restarted 3 times, then
left ERROR_down.  NodeD learns of the power-off from qemu's QMP event
(SHUTDOWN, reason guest-shutdown) on its own monitor socket.

Skipped without qemu-system-x86_64 (scripts/install-qemu installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti.paths import Paths
from ganeti.testing import procs
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok

QEMU = shutil.which("qemu-system-x86_64")
N2 = "node2.test"
CRASH, POWEROFF = "kvmcrash.test", "kvmoff.test"
#: the statuses of a job that has not ended
PENDING = ("queued", "waiting", "running", "canceling")

pytestmark = pytest.mark.skipif(
    QEMU is None, reason="qemu-system-x86_64 is not installed (scripts/install-qemu installs it)")

#: mov dx, 0x604; mov ax, 0x2000; out dx, ax; hlt; jmp $-1: ACPI S5 (power off) on qemu's pc machine
#: a boot sector that waits 3 s (BIOS INT 15h, AH=86h: CX:DX microseconds),
#: then powers the VM off through ACPI (the PM1a control port of QEMU's PIIX4)
#: and halts; the wait lets NodeD's event monitor connect first, as it would
#: for any guest that does not power off within its first second
POWEROFF_CODE = bytes.fromhex("b486" "b92d00" "bac0c6" "cd15" "ba0406b80020eff4ebfd")


def boot_sector(path: str) -> str:
    with open(path, "wb") as handle:
        handle.write(POWEROFF_CODE + b"\0" * (510 - len(POWEROFF_CODE)) + b"\x55\xaa" + b"\0" * (1024 * 1024 - 512))
    return path


def qemu_pid(paths: Paths, name: str) -> int | None:
    pattern = "^%s .*-name %s" % (re.escape(QEMU or ""), re.escape(name))
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    pids = [int(p) for p in found.stdout.split()]
    return pids[0] if pids else None


def status(cluster: LoopbackCluster, name: str) -> str:
    return ok(cluster.master, "gnt-instance", "list", "--no-headers", "-o", "status", name).strip()


def watcher_jobs(cluster: LoopbackCluster, name: str) -> list[list]:
    from ganeti.luxi.client import LuxiClient

    client = LuxiClient(cluster.master.luxi_socket, timeout=30)
    rows = client.query("job", ["id", "status", "ops"], None)["data"]
    return [[r[0][1], r[1][1]] for r in rows
            if any(op.get("OP_ID") == "OP_INSTANCE_STARTUP" and op.get("instance_name") == name
                   and any(e[0] == "gnt:watcher" for e in op.get("reason", [])) for op in r[2][1])]


def watcher_jobs_ended(cluster: LoopbackCluster, name: str) -> bool:
    """Whether the watcher made jobs for C{name} and all have ended."""
    jobs = watcher_jobs(cluster, name)
    return bool(jobs) and all(j[1] not in PENDING for j in jobs)


@pytest_twisted.ensureDeferred
async def test_kvm_crash_and_guest_poweroff_restarted(root, tmp_path):
    cluster = LoopbackCluster(reactor, root, loopback_config(2), prefix="gntwk")
    try:
        await cluster.start()
        ok(cluster.master, "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake",
           "-H", "kvm:kvm_path=%s,vnc_bind_address=" % QEMU)
        add = ["gnt-instance", "add", "-H", "kvm", "--no-nics", "-B", "memory=64M", "-n", N2, "--no-name-check",
               "--no-ip-check"]
        ok(cluster.master, *add, "-t", "diskless", "-o", "noop", CRASH)
        await cluster.until(lambda: status(cluster, CRASH) == "running", timeout=90)

        # the real qemu killed: restarted by the watcher
        first = qemu_pid(cluster.roots[1], CRASH)
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await cluster.until(lambda: qemu_pid(cluster.roots[1], CRASH) not in (None, first), timeout=90)
        await cluster.until(lambda: status(cluster, CRASH) == "running", timeout=90)
        # (the instance is reported running while the watcher's job still ends: its final write follows)
        await cluster.until(lambda: watcher_jobs_ended(cluster, CRASH), timeout=60)
        jobs = await threads.deferToThread(watcher_jobs, cluster, CRASH)
        assert [j[1] for j in jobs] == ["success"], jobs
        # qemu runs with a second QMP monitor, NodeD's event watcher's
        pid = qemu_pid(cluster.roots[1], CRASH)
        argv = procs.argv(pid)
        assert any(arg.endswith("/%s.kvmd,server=on,wait=off" % CRASH) for arg in argv), argv

        # a guest that powers itself off: restarted, 3 times in all, then left down
        image = boot_sector(str(tmp_path / "poweroff.img"))
        ok(cluster.master, *add, "-t", "file", "--disk", "0:size=1M", "-o", "image", "-O", "image=%s" % image,
           POWEROFF)

        def three_restarts() -> bool:
            return len(watcher_jobs(cluster, POWEROFF)) >= 3

        def given_up() -> bool:  # the watcher saw it down a 4th time and left it (its budget)
            with open(cluster.luxid.log_path, errors="replace") as handle:
                return "instance %s stopped again; 3 restarts" % POWEROFF in handle.read()

        # generous bounds (a loaded machine boots slowly); what is checked is the count
        await cluster.until(three_restarts, timeout=300)
        await cluster.until(lambda: status(cluster, POWEROFF) == "ERROR_down", timeout=120)
        await cluster.until(given_up, timeout=180)
        await cluster.until(lambda: watcher_jobs_ended(cluster, POWEROFF), timeout=60)
        jobs = await threads.deferToThread(watcher_jobs, cluster, POWEROFF)
        assert len(jobs) == 3, jobs
        with open(cluster.nodeds[1].log_path, errors="replace") as handle:
            noded_log = handle.read()
        # told by qemu at once: the guest's own power-off (its reason), and the killed qemu
        assert "kvm events: instance %s: SHUTDOWN" % POWEROFF in noded_log and "guest-shutdown" in noded_log
        assert status(cluster, POWEROFF) == "ERROR_down"
        for name in (CRASH, POWEROFF):
            ok(cluster.master, "gnt-instance", "remove", "-f", "--shutdown-timeout", "1", name)
    finally:
        await cluster.stop()
        for paths in cluster.roots:
            pattern = "^%s .*%s/" % (re.escape(QEMU or ""), re.escape(paths.root))
            found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
            for pid in found.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
