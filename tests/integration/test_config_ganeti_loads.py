"""Our config.data stays readable by Ganeti 3.0's own tools: the file WConfD
writes after a cluster's creation and a few changes (cluster parameters,
the HA parameters, a tag, an instance) loads with Ganeti 3.0.2's
C{objects.ConfigData.FromDict} and C{UpgradeConfig}, run from the extracted
package in a subprocess (tests/compat/ganeti_config_load.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import serializer
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from ganeti.testing.ganeti_tools import GANETI_LIB

CHECKOUT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not (GANETI_LIB / "ganeti" / "objects.py").exists(),
                                reason="Ganeti 3.0.2's package is not extracted (scripts/install-ganeti-clients)")


def ganeti_load(config_data: str) -> dict:
    done = subprocess.run([sys.executable, str(CHECKOUT / "tests" / "compat" / "ganeti_config_load.py"), config_data],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(GANETI_LIB)),
                          cwd="/")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest_twisted.ensureDeferred
async def test_ganeti_loads_our_config_data(root):
    async with LoopbackCluster(reactor, root, loopback_config(2), prefix="gntcl") as cluster:
        ok(root, "gnt-cluster", "modify", "--max-running-jobs", "7", "--liveness-timeout", "4",
           "--auto-failover", "yes")
        ok(root, "gnt-cluster", "add-tags", "ha-test")
        ok(root, "gnt-instance", "add", "-t", "diskless", "-n", "node2.test", "-o", "noop", "-H", "fake",
           "-B", "memory=64M", "--no-name-check", "--no-ip-check", "--no-start", "web1.test")
        await cluster.until(lambda: "web1.test" in serializer.read_file(root.config_data).decode(), timeout=30)
        loaded = ganeti_load(root.config_data)
        assert loaded["nodes"] == ["node1.test", "node2.test"] and loaded["instances"] == ["web1.test"], loaded
        assert (loaded["tags"], loaded["max_running_jobs"]) == (["ha-test"], 7), loaded
        assert "liveness" not in serializer.read_file(root.config_data).decode(), "HA parameters stay in ha.data"
