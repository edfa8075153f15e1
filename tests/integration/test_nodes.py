"""Node management on a real 3-node cluster on loopback: add, roles, test delay
on nodes, redist-conf, verify, remove, through the gnt-* commands.

Three roots share the cluster certificate (copied by the test, as an
installer would); node daemons listen on 127.0.1.1-3 on a free port that
WConfD, LuxiD and the job processes (C{GANETI_RPC_PORT}) use.  Nodes 2 and
3 are added with OP_NODE_ADD without a join token.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest_twisted
from twisted.internet import reactor

from ganeti import crypto
from ganeti.config.bootstrap import initial_config
from ganeti.testing.daemons import Daemon, make_root, remove_root, seed_config

from ganeti.daemons import free_port
from tests.integration.test_replication import serial_of, ssconf_of, until

BIN = os.path.dirname(sys.executable)


def gnt(root, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.path.join(BIN, tool), "--root", root.root, *args], capture_output=True, text=True,
                          timeout=120)


def ok(root, tool: str, *args: str) -> str:
    done = gnt(root, tool, *args)
    assert done.returncode == 0, (tool, args, done.stdout, done.stderr)
    return done.stdout


def candidates_of(paths) -> set[str]:
    return set((ssconf_of(paths, "master_candidates") or "").split())


def roles(root) -> dict[str, str]:
    out = ok(root, "gnt-node", "list", "--no-headers", "--separator", "|", "-o", "name,role,pip")
    return {line.split("|")[0]: line.split("|")[1] for line in out.splitlines()}


def verify_passes(root) -> str:
    """gnt-cluster verify, retried while the last change is still being distributed."""
    deadline = time.monotonic() + 20
    while True:
        done = gnt(root, "gnt-cluster", "verify")
        if done.returncode == 0 or time.monotonic() > deadline:
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout
        time.sleep(0.5)


@pytest_twisted.ensureDeferred
async def test_add_modify_delay_verify_remove(root, monkeypatch):
    roots = [root, make_root("gntn2"), make_root("gntn3")]
    crypto.bootstrap_secrets(roots[0], "cluster.test", node_name="node1.test")
    for paths in roots[1:]:
        os.makedirs(paths.data_dir, exist_ok=True)
        shutil.copy(roots[0].server_pem, paths.server_pem)
    seed_config(roots[0], initial_config("cluster.test", "node1.test", "127.0.1.1", candidate_pool_size=3))
    port = free_port()
    monkeypatch.setenv("GANETI_RPC_PORT", str(port))  # inherited by LuxiD's job processes
    nodeds = [
        Daemon(paths, "ganeti-noded", "--bind", "127.0.1.%d" % n, "--port", str(port), tcp=("127.0.1.%d" % n, port))
        for n, paths in enumerate(roots, 1)
    ]
    wconfd = Daemon(roots[0], "ganeti-wconfd", "--rpc-port", str(port))
    luxid = Daemon(roots[0], "ganeti-luxid", "--rpc-port", str(port))
    try:
        for daemon in nodeds:
            daemon.start()
        for daemon in nodeds:
            await daemon.ready(reactor)
        wconfd.start()
        await wconfd.ready(reactor)
        luxid.start()
        await luxid.ready(reactor)

        # add: both new nodes fill the pool of 3 and get config.data and ssconf
        ok(root, "gnt-node", "add", "--primary-ip", "127.0.1.2", "node2.test")
        ok(root, "gnt-node", "add", "--primary-ip", "127.0.1.3", "node3.test")
        assert roles(root) == {"node1.test": "M", "node2.test": "C", "node3.test": "C"}
        refused = gnt(root, "gnt-node", "add", "--primary-ip", "127.0.1.2", "node4.test")
        assert refused.returncode != 0 and "conflict with existing node node2.test" in refused.stderr
        await until(lambda: serial_of(roots[1]) is not None and serial_of(roots[1]) == serial_of(roots[0]))
        await until(lambda: serial_of(roots[2]) == serial_of(roots[0]))
        await until(lambda: candidates_of(roots[2]) == {"node1.test", "node2.test", "node3.test"})

        # node3 offline and back: it leaves the candidates and promotes itself again
        out = ok(root, "gnt-node", "modify", "--offline", "yes", "node3.test")
        assert out == "Modified node node3.test\n - master_candidate -> False\n - offline -> True\n"
        assert roles(root)["node3.test"] == "O"
        await until(lambda: candidates_of(roots[1]) == {"node1.test", "node2.test"})
        refused = gnt(root, "gnt-node", "modify", "--drained", "yes", "node1.test")
        assert refused.returncode != 0 and "master-failover" in refused.stderr
        out = ok(root, "gnt-node", "modify", "--offline", "no", "node3.test")
        assert " - INFO: Auto-promoting node to master candidate\n" in out
        assert "WARNING: Transitioning node from offline to online state" in out
        assert out.endswith("Modified node node3.test\n - master_candidate -> True\n - offline -> False\n")
        assert roles(root)["node3.test"] == "C"

        # test delay on the nodes, through their node daemons
        started = time.monotonic()
        ok(root, "gnt-debug", "delay", "--no-master", "-n", "node2.test", "-n", "node3", "0.5")
        assert time.monotonic() - started >= 0.5

        ok(root, "gnt-cluster", "redist-conf")
        out = verify_passes(root)
        assert "* Verifying node status" in out and "ERROR" not in out

        # a node daemon that is down is an error of verify
        nodeds[1].stop()
        failed = gnt(root, "gnt-cluster", "verify")
        assert failed.returncode == 1
        assert "ERROR: node node2.test: while contacting node: node unreachable" in failed.stdout
        assert "ERROR: node node1.test: tcp communication with node 'node2.test'" in failed.stdout
        nodeds[1].start()
        await nodeds[1].ready(reactor)

        # remove node3: it leaves the cluster (its daemon stops, its files go)
        ok(root, "gnt-node", "remove", "node3.test")
        assert roles(root) == {"node1.test": "M", "node2.test": "C"}
        assert nodeds[2].process is not None
        nodeds[2].process.wait(timeout=20)
        assert not os.path.exists(roots[2].server_pem)
        assert serial_of(roots[2]) is None
        refused = gnt(root, "gnt-node", "remove", "node1.test")
        assert refused.returncode != 0 and "is the master node" in refused.stderr
        out = verify_passes(root)
        assert "Gathering data (2 nodes)" in out
    finally:
        luxid.stop()
        wconfd.stop()
        for daemon in nodeds:
            daemon.stop()
        for paths in roots[1:]:
            remove_root(paths)
