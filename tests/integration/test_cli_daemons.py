"""The gnt-* commands as an admin types them, against real daemons."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest_twisted
from twisted.internet import reactor, threads
from twisted.internet.task import deferLater

from ganeti.config.bootstrap import initial_config
from ganeti.testing.daemons import Daemon, seed_config

BIN = os.path.dirname(sys.executable)


def gnt(root, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.path.join(BIN, tool), "--root", root.root, *args], capture_output=True, text=True, timeout=120)


async def run(root, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return await threads.deferToThread(gnt, root, tool, *args)


@pytest_twisted.ensureDeferred
async def test_an_admin_session(root):
    seed_config(root, initial_config("cluster.test", "node1.test", "127.0.1.1"))
    wconfd, luxid = Daemon(root, "ganeti-wconfd"), Daemon(root, "ganeti-luxid")
    wconfd.start()
    await wconfd.ready(reactor)
    luxid.start()
    await luxid.ready(reactor)
    try:
        delay = await run(root, "gnt-debug", "delay", "--no-master", "--repeat", "2", "0.01")
        assert delay.returncode == 0, delay.stderr
        assert "Test delay iteration 0/1" in delay.stdout and "Test delay iteration 1/1" in delay.stdout

        submitted = await run(root, "gnt-debug", "delay", "--no-master", "--submit", "--print-jobid", "0.01")
        assert submitted.returncode == 0 and submitted.stdout.strip().isdigit()
        job_id = submitted.stdout.strip()
        watched = await run(root, "gnt-job", "watch", job_id)
        assert watched.returncode == 0, watched.stderr

        listing = await run(root, "gnt-job", "list", "--no-headers", "--separator=|", "-o", "id,status,summary")
        rows = [line.split("|") for line in listing.stdout.splitlines()]
        assert ["2", "success", "TEST_DELAY(1.0e-2)"] in rows, listing.stdout

        assert (await run(root, "gnt-group", "add", "rack2")).returncode == 0
        duplicate = await run(root, "gnt-group", "add", "rack2")
        assert duplicate.returncode == 1 and "already exists" in duplicate.stdout + duplicate.stderr
        groups = await run(root, "gnt-group", "list", "--no-headers", "-o", "name")
        assert groups.stdout.split() == ["default", "rack2"]
        for _ in range(100):  # WConfD rewrites this node's ssconf after the change (coalesced)
            with open(root.ssconf("nodegroups")) as handle:
                if handle.read().endswith(" rack2\n"):
                    break
            await deferLater(reactor, 0.05, lambda: None)
        else:
            raise AssertionError("ssconf_nodegroups did not follow the new group")
        assert (await run(root, "gnt-group", "rename", "rack2", "rack3")).returncode == 0
        assert (await run(root, "gnt-group", "remove", "rack3")).returncode == 0

        assert (await run(root, "gnt-cluster", "add-tags", "prod", "web")).returncode == 0
        tags = await run(root, "gnt-cluster", "list-tags")
        assert tags.stdout.split() == ["prod", "web"]

        assert (await run(root, "gnt-cluster", "queue", "drain")).returncode == 0
        refused = await run(root, "gnt-debug", "delay", "0.01")
        assert refused.returncode == 1 and "marked for drain" in refused.stdout + refused.stderr
        assert (await run(root, "gnt-cluster", "queue", "undrain")).returncode == 0
        info = await run(root, "gnt-cluster", "queue", "info")
        assert "not set" in info.stdout or "unset" in info.stdout, info.stdout

        locks = await run(root, "gnt-debug", "locks", "--no-headers")
        assert locks.returncode == 0

        bad = await run(root, "gnt-debug", "delay", "not-a-number")
        assert bad.returncode == 2
    finally:
        luxid.stop()
        wconfd.stop()

    down = await run(root, "gnt-job", "list")
    assert down.returncode == 1 and "master daemon" in down.stdout + down.stderr
