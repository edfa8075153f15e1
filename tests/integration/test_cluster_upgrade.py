"""gnt-cluster upgrade against real daemons: every NodeD must report the
version, Ganeti's refusals, the intent file and --resume; gnt-debug metad."""

from __future__ import annotations

import os

import pytest_twisted
from twisted.internet import reactor

from ganeti import GANETI_RELEASE
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok


@pytest_twisted.ensureDeferred
async def test_upgrade_checks_every_node_and_finishes(root):
    config = loopback_config(2, candidate_pool_size=2, candidates=["node2.test"])
    async with LoopbackCluster(reactor, root, config, prefix="gntup") as cluster:
        port = ("--rpc-port", str(cluster.rpc_port))
        intent = os.path.join(root.data_dir, "intent-to-upgrade")

        both = gnt(root, "gnt-cluster", "upgrade", "--to", GANETI_RELEASE, "--resume")
        assert both.returncode == 1 and "Precisely one of the options --to and --resume" in both.stderr
        for version, message in (("3.x", "Could not parse version string 3.x"),
                                 ("2.9", "automatic upgrades only supported from 2.10 onwards"),
                                 ("2.16", "a downgrade below it is refused")):
            bad = gnt(root, "gnt-cluster", "upgrade", "--to", version, *port)
            assert bad.returncode == 1 and message in bad.stderr, (version, bad.stderr)
            assert not os.path.exists(intent)

        # the watcher's pause reaches the other master candidates (Ganeti's set_watcher_pause), to outlive a failover
        ok(root, "gnt-cluster", "watcher", "pause", "1h")
        pause = os.path.join(cluster.roots[1].data_dir, "watcher.pause")
        assert os.path.exists(pause)
        ok(root, "gnt-cluster", "watcher", "continue")
        assert not os.path.exists(pause)

        # a version the nodes do not run: Ganeti's message, nothing changed
        newer = gnt(root, "gnt-cluster", "upgrade", "--to", "3.0.99", *port)
        assert newer.returncode == 1, newer.stdout + newer.stderr
        assert "Ganeti version 3.0.99 not installed on nodes node1.test, node2.test" in newer.stderr, newer.stderr
        assert not os.path.exists(intent)
        assert ok(root, "gnt-cluster", "queue", "info").strip() == "The drain flag is unset"

        # the version every node runs: the steps, then the queue is undrained again
        done = gnt(root, "gnt-cluster", "upgrade", "--to", GANETI_RELEASE, *port)
        steps = ["Verifying %s present on all nodes" % GANETI_RELEASE, "Draining queue",
                 "Pausing the watcher for one hour.", "Redistributing the configuration.", "Undraining the queue.",
                 "Unpausing the watcher.", "Verifying cluster."]
        positions = [done.stdout.find(step) for step in steps]
        assert -1 not in positions and positions == sorted(positions), done.stdout
        assert ok(root, "gnt-cluster", "queue", "info").strip() == "The drain flag is unset"
        assert not os.path.exists(intent)
        assert ok(root, "gnt-cluster", "watcher", "info").strip() == "The watcher is not paused."

        # an interrupted upgrade: another target is refused, --resume finishes it
        with open(intent, "w") as handle:
            handle.write("%s,%s,1" % (GANETI_RELEASE, GANETI_RELEASE))
        other = gnt(root, "gnt-cluster", "upgrade", "--to", "3.0.99", *port)
        assert other.returncode == 1 and "use --resume to finish it first" in other.stderr, other.stderr
        resumed = gnt(root, "gnt-cluster", "upgrade", "--resume", *port)
        assert "Undraining the queue." in resumed.stdout, resumed.stdout + resumed.stderr
        assert not os.path.exists(intent)
        nothing = gnt(root, "gnt-cluster", "upgrade", "--resume", *port)
        assert nothing.returncode == 0 and "No upgrade in progress" in nothing.stdout

        # gnt-debug metad: Ganeti's argument checks, then the clear answer
        metad = gnt(root, "gnt-debug", "metad", "echo", "hello")
        assert metad.returncode == 1 and "There is no metadata daemon on this cluster" in metad.stderr
        wrong = gnt(root, "gnt-debug", "metad", "ping")
        assert wrong.returncode == 1 and "Command 'ping' not supported" in wrong.stderr
