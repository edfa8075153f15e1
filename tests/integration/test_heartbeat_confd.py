"""A node's heartbeat finds the master through the candidates' confd when
its own ssconf names a wrong master (issue 15: ssconf first, then confd,
highest serial wins), on a real 3-node loopback cluster with confd on the
two master candidates."""

from __future__ import annotations

import os
import shutil

import pytest_twisted
from twisted.internet import reactor

from ganeti import serializer
from ganeti.daemons import free_port
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ssconf_of
from ganeti.testing.daemons import Daemon
from tests.integration.test_liveness import liveness


@pytest_twisted.ensureDeferred
async def test_wrong_ssconf_master_found_through_confd(root):
    config = loopback_config(3, candidate_pool_size=2, candidates=["node2.test"])
    async with LoopbackCluster(reactor, root, config, prefix="gnthc") as cluster:
        node1, node2, node3 = cluster.roots
        addresses = list(cluster.nodes.values())
        await cluster.until(lambda: set(liveness(cluster).values()) == {"up"}, timeout=30)
        await cluster.until(lambda: os.path.exists(node2.config_data), timeout=30)
        for paths in (node2, node3):  # confd's key (WConfD sends it; copied in case it has not yet)
            if not os.path.exists(paths.hmac_key):
                shutil.copy(node1.hmac_key, paths.hmac_key)
        assert sorted((ssconf_of(node3, "master_candidates_ips") or "").split()) == addresses[:2]
        confd_port = free_port(addresses[0], udp=True)
        confds = [Daemon(paths, "ganeti-confd", "--bind", address, "--port", str(confd_port))
                  for paths, address in zip((node1, node2), addresses)]
        try:
            for confd in confds:
                confd.start()
            # node3 restarted believing node2 is the master: node2 runs no LuxiD, so the attempt
            # fails and the candidates' confd names node1
            noded3 = cluster.nodeds[2]
            noded3.stop()
            serializer.write_file(node3.ssconf("master_node"), "node2.test\n")
            cluster.nodeds[2] = Daemon(node3, "ganeti-noded", "--bind", addresses[2], "--port",
                                       str(cluster.rpc_port), "--confd-port", str(confd_port),
                                       tcp=(addresses[2], cluster.rpc_port),
                                       env={"GANETI_HEARTBEAT_PORT": str(cluster.heartbeat_port)})
            await cluster.until(lambda: liveness(cluster).get("node3.test") == "unreachable", timeout=30)
            await cluster.start_daemon(cluster.nodeds[2])
            await cluster.until(lambda: liveness(cluster).get("node3.test") == "up", timeout=60)
            assert ssconf_of(node3, "master_node") == "node2.test\n", "found through confd, not a fixed ssconf"
            assert "confd names node1.test" in cluster.nodeds[2].output()
        finally:
            for confd in confds:
                confd.stop()
