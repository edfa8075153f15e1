"""The watcher on events, on a real 3-node loopback cluster: a fake
instance whose state changed under it (its state file removed, as if it
crashed) is restarted by an ordinary job naming the watcher, not while
the watcher is paused (our CLI and Ganeti's own), and at most 3 times in
30 minutes; gnt-instance list shows it live from the nodes' reports.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok

CHECKOUT = Path(__file__).resolve().parents[2]
GANETI_LIB = CHECKOUT / ".venv" / "ganeti-3.0" / "usr" / "share" / "ganeti" / "3.0"
SCRIPT = CHECKOUT / "tests" / "compat" / "ganeti_watcher.py"
VM = "vm1.test"


def state_file(cluster: LoopbackCluster) -> str:
    return os.path.join(cluster.roots[1].run_dir, "fake-hypervisor", VM)


def status(cluster: LoopbackCluster) -> str:
    out = ok(cluster.master, "gnt-instance", "list", "--no-headers", "-o", "status", VM)
    return out.strip()


def watcher_jobs(cluster: LoopbackCluster) -> list[list]:
    client = LuxiClient(cluster.master.luxi_socket, timeout=30)
    rows = client.query("job", ["id", "status", "ops"], None)["data"]
    return [[r[0][1], r[1][1]] for r in rows
            if any(op.get("OP_ID") == "OP_INSTANCE_STARTUP"
                   and any(entry[0] == "gnt:watcher" for entry in op.get("reason", [])) for op in r[2][1])]


async def crash_and_wait(cluster: LoopbackCluster, restarted: bool) -> None:
    os.unlink(state_file(cluster))
    if restarted:  # generous bounds: a loaded machine is slow, and Ganeti's cron watcher takes 5 min
        await cluster.until(lambda: os.path.exists(state_file(cluster)), timeout=60)
        await cluster.until(lambda: status(cluster) == "running", timeout=60)
    else:
        await cluster.until(lambda: status(cluster) == "ERROR_down", timeout=60)
        await deferLater(reactor, 6, lambda: None)
        assert not os.path.exists(state_file(cluster))


def ganeti_watcher(socket: str, *args: str) -> str:
    """Ganeti 3.0.2's own C{gnt-cluster watcher ARGS} against our LuxiD."""
    env = dict(os.environ, PYTHONPATH=str(GANETI_LIB))
    done = subprocess.run([sys.executable, str(SCRIPT), socket, *args], capture_output=True, text=True, timeout=60,
                          env=env, cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest_twisted.ensureDeferred
async def test_watcher_restarts_pauses_and_budget(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), prefix="gntw") as cluster:
        ok(cluster.master, "gnt-instance", "add", "-t", "diskless", "-o", "noop", "--no-nics", "--no-name-check",
           "--no-ip-check", "-n", "node2.test", VM)
        await cluster.until(lambda: status(cluster) == "running", timeout=60)

        # crashed: restarted by a job whose reason trail names the watcher
        start = time.monotonic()
        await crash_and_wait(cluster, restarted=True)
        assert time.monotonic() - start < 120  # on the event, not on Ganeti's 5-minute cron
        jobs = await threads.deferToThread(watcher_jobs, cluster)
        assert len(jobs) == 1 and jobs[0][1] == "success", jobs

        # paused (our CLI): left down, shown as ERROR_down from the node's report
        out = ok(cluster.master, "gnt-cluster", "watcher", "pause", "1h")
        assert "The watcher is paused until" in out
        assert "paused until" in ok(cluster.master, "gnt-cluster", "watcher", "info")
        await crash_and_wait(cluster, restarted=False)
        # continue: it catches up at once (restart 2 of 3)
        assert "no longer paused" in ok(cluster.master, "gnt-cluster", "watcher", "continue")
        await cluster.until(lambda: os.path.exists(state_file(cluster)), timeout=60)
        assert "not paused" in ok(cluster.master, "gnt-cluster", "watcher", "info")

        # Ganeti's own gnt-cluster watcher against our LuxiD
        if (GANETI_LIB / "ganeti" / "luxi.py").exists():
            sock = cluster.master.luxi_socket
            assert "paused until" in await threads.deferToThread(ganeti_watcher, sock, "pause", "30m")
            assert "paused until" in await threads.deferToThread(ganeti_watcher, sock, "info")
            info = ok(cluster.master, "gnt-cluster", "watcher", "info")
            assert "paused until" in info
            assert "no longer paused" in await threads.deferToThread(ganeti_watcher, sock, "continue")
            assert "not paused" in ok(cluster.master, "gnt-cluster", "watcher", "info")

        # restart 3 of 3, then the budget is spent: left down
        await cluster.until(lambda: status(cluster) == "running", timeout=60)
        await crash_and_wait(cluster, restarted=True)
        await crash_and_wait(cluster, restarted=False)
        jobs = await threads.deferToThread(watcher_jobs, cluster)
        assert len(jobs) == 3, jobs
        assert "leaving it down (ERROR_down)" in cluster.luxid.output() or "leaving it down" in open(
            cluster.luxid.log_path).read()
