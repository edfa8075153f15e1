"""Node management on a real 3-node cluster on loopback: add, roles, test delay
on nodes, redist-conf, verify, remove, through the gnt-* commands.

A L{LoopbackCluster}: three roots share the cluster certificate (copied,
as an installer would); node daemons listen on 127.0.1.1-3 on a free port
that WConfD and LuxiD are given (C{--rpc-port}; LuxiD hands it to the job processes).  Only
node1 is in the config: nodes 2 and 3 are added with OP_NODE_ADD without
a join token.
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest_twisted
from twisted.internet import reactor

from ganeti import daemons
from ganeti.daemons import free_port
from ganeti.ha import params as ha_params
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok, serial_of, ssconf_of


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
async def test_add_modify_delay_verify_remove(root):
    config = loopback_config(1, candidate_pool_size=3)
    async with LoopbackCluster(reactor, root, config, nodes=3, prefix="gntn") as cluster:
        roots, nodeds = cluster.roots, cluster.nodeds
        # add: both new nodes fill the pool of 3 and get config.data, ssconf and the HA parameters
        ok(root, "gnt-cluster", "modify", "--liveness-timeout", "3")
        for number in (2, 3):
            out = ok(root, "gnt-node", "add", "--primary-ip", "127.0.1.%d" % number, "node%d.test" % number)
            assert "WARNING" not in out, out
        assert roles(root) == {"node1.test": "M", "node2.test": "C", "node3.test": "C"}
        # a new candidate runs confd and RAPI (it has the RAPI certificate from the add)
        rapi, confd = daemons.BY_NAME["ganeti-rapi"], daemons.BY_NAME["ganeti-confd"]
        assert all(daemons.running_pid(paths, rapi) for paths in roots[1:])
        assert all(daemons.accepts_tcp(address, cluster.rapi_port) for address in ("127.0.1.2", "127.0.1.3"))
        assert all(daemons.running_pid(paths, confd) for paths in roots[1:])
        assert all(daemons.udp_bound(address, cluster.confd_port) for address in ("127.0.1.2", "127.0.1.3"))
        refused = gnt(root, "gnt-node", "add", "--primary-ip", "127.0.1.2", "node4.test")
        assert refused.returncode != 0 and "conflict with existing node node2.test" in refused.stderr
        await cluster.until(lambda: serial_of(roots[1]) is not None and serial_of(roots[1]) == serial_of(roots[0]))
        await cluster.until(lambda: serial_of(roots[2]) == serial_of(roots[0]))
        await cluster.until(lambda: candidates_of(roots[2]) == {"node1.test", "node2.test", "node3.test"})
        await cluster.until(lambda: [ha_params.read(p).serial_no for p in roots] == [1, 1, 1], timeout=30)
        assert ha_params.read(roots[2]).liveness_timeout == 3.0

        # node3 offline and back: it leaves the candidates and promotes itself again
        out = ok(root, "gnt-node", "modify", "--offline", "yes", "node3.test")
        assert out == "Modified node node3.test\n - master_candidate -> False\n - offline -> True\n"
        assert roles(root)["node3.test"] == "O"
        await cluster.until(lambda: candidates_of(roots[1]) == {"node1.test", "node2.test"})
        # no longer a candidate: its confd stopped and gave its port back
        assert daemons.running_pid(roots[2], confd) is None and not daemons.udp_bound("127.0.1.3", cluster.confd_port)
        refused = gnt(root, "gnt-node", "modify", "--drained", "yes", "node1.test")
        assert refused.returncode != 0 and "master-failover" in refused.stderr
        out = ok(root, "gnt-node", "modify", "--offline", "no", "node3.test")
        assert " - INFO: Auto-promoting node to master candidate\n" in out
        assert "WARNING: Transitioning node from offline to online state" in out
        assert out.endswith("Modified node node3.test\n - master_candidate -> True\n - offline -> False\n")
        assert roles(root)["node3.test"] == "C"
        # a candidate again: confd runs on the same port again
        assert daemons.running_pid(roots[2], confd) and daemons.udp_bound("127.0.1.3", cluster.confd_port)

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
        await cluster.start_daemon(nodeds[1])

        # node3, a candidate, runs confd (its NodeD started it) and MonD, as every node does (here on a free
        # port): leaving the cluster stops them
        left, node_daemons = roots[2], [daemons.BY_NAME[n] for n in ("ganeti-confd", "ganeti-mond")]
        try:
            mond = daemons.MOND
            argv, env = daemons.twistd_command(left, mond, ["--root", left.root, "--bind", "127.0.1.3",
                                                            "--port", str(free_port("127.0.1.3"))])
            started = subprocess.run(argv, cwd=left.root, env=env, capture_output=True, text=True)
            assert started.returncode == 0, started.stdout + started.stderr
            await cluster.until(lambda: all(daemons.running_pid(left, spec) is not None for spec in node_daemons))

            # remove node3: it leaves the cluster (its daemons stop, its files go)
            ok(root, "gnt-node", "remove", "node3.test")
            await cluster.until(lambda: all(daemons.running_pid(left, spec) is None for spec in node_daemons))
        finally:
            daemons.stop(left, [spec.name for spec in node_daemons], out=lambda _line: None)
        assert roles(root) == {"node1.test": "M", "node2.test": "C"}
        assert nodeds[2].process is not None
        nodeds[2].process.wait(timeout=20)
        assert not os.path.exists(roots[2].server_pem)
        assert serial_of(roots[2]) is None
        refused = gnt(root, "gnt-node", "remove", "node1.test")
        assert refused.returncode != 0 and "is the master node" in refused.stderr
        out = verify_passes(root)
        assert "Gathering data (2 nodes)" in out
