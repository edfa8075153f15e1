"""The bridges_exist node RPC where Ganeti calls it: a kvm instance with a
bridged NIC is created, started, failed over only where its bridge exists
(Ganeti's "Missing bridges" error otherwise), and cluster verify reports a
node that lacks one.  The node lives in a network namespace the test makes,
and the bridge is made and removed there."""

from __future__ import annotations

import os
import subprocess

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.testing.cluster import gnt, loopback_config, ok
from ganeti.testing.netns import Namespaces, NetnsCluster

BRIDGE = "gbrt0"
MISSING = "Error checking bridges on destination node 'node1.test': Missing bridges %s" % BRIDGE


def _ip(namespace: str, *args: str) -> None:
    subprocess.run(["ip", "-n", namespace, *args], check=True, capture_output=True, timeout=30)


@pytest_twisted.ensureDeferred
async def test_bridged_nics_need_their_bridge_on_the_node(root):
    why = Namespaces.unavailable()
    if why is not None:
        pytest.skip(why)
    spaces = Namespaces.create("gntb%d" % os.getpid(), 1)
    try:
        async with NetnsCluster(reactor, root, loopback_config(1), spaces, prefix="gntbr") as _cluster:
            node = spaces.nodes[0]
            ok(root, "gnt-cluster", "modify", "--enabled-hypervisors", "fake,kvm", "-H", "kvm:kvm_path=/bin/true")
            add = ["gnt-instance", "add", "-t", "diskless", "-o", "noop", "-n", "node1.test", "--no-name-check",
                   "--no-ip-check", "--no-start", "--net", "0:mode=bridged,link=%s" % BRIDGE]
            refused = gnt(root, *add, "-H", "kvm", "inst1.test")
            assert refused.returncode != 0 and MISSING in refused.stderr, refused.stderr
            assert "inst1.test" not in ok(root, "gnt-instance", "list", "--no-headers", "-o", "name")
            # the fake hypervisor attaches its NICs to nothing: no bridge is needed
            ok(root, *add, "-H", "fake", "fake1.test")

            _ip(node, "link", "add", BRIDGE, "type", "bridge")
            ok(root, *add, "-H", "kvm", "inst1.test")
            verified = gnt(root, "gnt-cluster", "verify")
            assert "missing bridges" not in verified.stdout, verified.stdout

            _ip(node, "link", "del", BRIDGE)
            verified = gnt(root, "gnt-cluster", "verify")
            assert verified.returncode == 1, verified.stdout
            assert "ERROR: node node1.test: missing bridges: %s" % BRIDGE in verified.stdout, verified.stdout
            started = gnt(root, "gnt-instance", "startup", "inst1.test")
            assert started.returncode != 0 and MISSING in started.stderr, started.stderr
            ok(root, "gnt-instance", "remove", "-f", "inst1.test")
    finally:
        spaces.destroy()
