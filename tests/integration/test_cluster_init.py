"""gnt-cluster init / ganeti-daemons / gnt-cluster destroy on a fresh root."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

BIN = os.path.dirname(sys.executable)


def run(root, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.path.join(BIN, tool), "--root", root.root, *args], capture_output=True, text=True, timeout=120)


def test_init_run_restart_and_destroy(root):
    init = run(root, "gnt-cluster", "init", "--primary-ip", "127.0.1.1", "--node-name", "node1.test", "cluster.test")
    try:
        assert init.returncode == 0, init.stdout + init.stderr
        assert "ganeti-wconfd: started" in init.stdout and "ganeti-luxid: started" in init.stdout
        data = root.data_dir
        for name in ("config.data", "server.pem", "client.pem", "rapi.pem", "hmac.key", "ssconf_master_node"):
            assert os.path.exists(os.path.join(data, name)), name
        assert stat.S_IMODE(os.stat(os.path.join(data, "hmac.key")).st_mode) == 0o400
        with open(root.ssconf("master_node")) as handle:
            assert handle.read() == "node1.test\n"
        assert run(root, "gnt-cluster", "getmaster").stdout == "node1.test\n"
        again = run(root, "gnt-cluster", "init", "--primary-ip", "127.0.1.1", "other.test")
        assert again.returncode == 1 and "already part of a cluster" in again.stderr

        listing = run(root, "gnt-node", "list", "--no-headers", "-o", "name,role,pip")
        assert listing.stdout.split() == ["node1.test", "M", "127.0.1.1"]
        info = run(root, "gnt-node", "info", "node1.test")
        assert "primary ip: 127.0.1.1" in info.stdout and "master candidate: True" in info.stdout
        assert run(root, "gnt-node", "add-tags", "node1.test", "rack1").returncode == 0
        assert run(root, "gnt-node", "list-tags", "node1.test").stdout == "rack1\n"
        missing = run(root, "gnt-node", "info", "nosuch")
        assert missing.returncode == 1 and "Node 'nosuch' not known" in missing.stderr

        modified = run(root, "gnt-cluster", "modify", "-C", "3", "--max-running-jobs", "5", "-B", "maxmem=256,vcpus=2")
        assert modified.returncode == 0, modified.stdout + modified.stderr
        info = run(root, "gnt-cluster", "info").stdout
        assert "Candidate pool size: 3" in info and "Maximum running jobs: 5" in info
        bad = run(root, "gnt-cluster", "modify", "--max-tracked-jobs", "2")
        assert bad.returncode == 1 and "max_tracked_jobs" in bad.stderr
        assert run(root, "gnt-cluster", "modify").returncode == 1  # nothing to change

        assert run(root, "ganeti-daemons", "restart").returncode == 0
        delay = run(root, "gnt-debug", "delay", "0.01")
        assert delay.returncode == 0, delay.stderr
        status = run(root, "ganeti-daemons", "status")
        assert status.returncode == 0 and "ganeti-luxid: running" in status.stdout

        refused = run(root, "gnt-cluster", "destroy")
        assert refused.returncode == 1 and "--yes-do-it" in refused.stderr
    finally:
        destroyed = run(root, "gnt-cluster", "destroy", "--yes-do-it")
    assert destroyed.returncode == 0, destroyed.stderr
    assert not os.path.exists(os.path.join(root.data_dir, "config.data"))
    assert run(root, "ganeti-daemons", "status").returncode != 0  # stopped, and no longer a cluster node
