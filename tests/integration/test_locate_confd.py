"""A client whose node's ssconf is stale finds the master through the master
candidates' confd (issue 23, L{ganeti.luxi.locate}), on a real 3-node
loopback cluster with a real confd, over UDP, on the two master candidates.

The client is L{ganeti.luxi.master.MasterClient} on a copy of node3's files
(its identity, ssconf, certificate and HMAC key) whose ssconf names node2
master: what a node holds that missed the last failover.  node2 runs no
LuxiD: the client's attempt there fails, it asks the candidates' confd,
which name node1, and its call is answered by node1's LuxiD over TLS.
"""

from __future__ import annotations

import os
import shutil

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import serializer
from ganeti.daemons import free_port
from ganeti.luxi import locate
from ganeti.luxi.master import MasterClient
from ganeti.paths import Paths
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ssconf_of
from ganeti.testing.daemons import Daemon, make_root, remove_root
from tests.integration.test_liveness import liveness


def stale_copy(node: Paths, master: str) -> Paths:
    """A new root holding the files of C{node}'s data directory, its ssconf naming C{master} master."""
    copy = make_root("gntlc")
    os.makedirs(copy.data_dir)
    for name in os.listdir(node.data_dir):
        path = os.path.join(node.data_dir, name)
        if os.path.isfile(path) and not os.path.islink(path):
            shutil.copy2(path, os.path.join(copy.data_dir, name))
    serializer.write_file(copy.ssconf("master_node"), master + "\n")
    return copy


@pytest_twisted.ensureDeferred
async def test_a_client_with_a_stale_ssconf_finds_the_master_through_confd(root, monkeypatch):
    config = loopback_config(3, candidate_pool_size=2, candidates=["node2.test"])
    async with LoopbackCluster(reactor, root, config, prefix="gntlc") as cluster:
        node1, node2, node3 = cluster.roots
        addresses = list(cluster.nodes.values())
        await cluster.until(lambda: set(liveness(cluster).values()) == {"up"}, timeout=60)
        await cluster.until(lambda: os.path.exists(node2.config_data), timeout=60)  # what its confd answers from
        for paths in (node2, node3):  # confd's key (WConfD sends it; copied in case it has not yet)
            if not os.path.exists(paths.hmac_key):
                shutil.copy(node1.hmac_key, paths.hmac_key)
        await cluster.until(lambda: sorted((ssconf_of(node3, "master_candidates_ips") or "").split())
                            == addresses[:2], timeout=60)
        confd_port = free_port(addresses[0], udp=True)
        confds = [Daemon(paths, "ganeti-confd", "--bind", address, "--port", str(confd_port))
                  for paths, address in zip((node1, node2), addresses)]
        client_root = stale_copy(node3, "node2.test")
        monkeypatch.setenv(locate.CONFD_PORT_ENV, str(confd_port))
        monkeypatch.setenv("GANETI_HEARTBEAT_PORT", str(cluster.heartbeat_port))
        try:
            for confd in confds:
                confd.start()
            # what each source says: ssconf the stale master, confd (once it answers) the real one
            assert locate.from_ssconf(client_root) == ("node2.test", addresses[1])
            named = None
            for _ in range(60):
                named = await threads.deferToThread(locate.from_confd, client_root, 1.0)
                if named is not None:
                    break
            assert named == ("node1.test", addresses[0])

            waits: list[str] = []
            client = MasterClient(client_root, timeout=60, on_wait=waits.append, window=60)
            try:
                info = await threads.deferToThread(client.query_cluster_info)
                assert info["master"] == "node1.test"
                assert client.target == locate.Target("node1.test", addresses[0], cluster.heartbeat_port)
                # a change goes the same way: a job submitted, and run, on node1
                job_id = await threads.deferToThread(
                    client.submit_job, [{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["viaconfd"],
                                         "reason": [["gnt:client:test", "", 0]]}])
                assert int(job_id) > 0
            finally:
                client.close()
            await cluster.until(lambda: "viaconfd" in (serializer.loads(serializer.read_file(node1.config_data))
                                                        ["cluster"].get("tags") or []), timeout=60)
        finally:
            for confd in confds:
                confd.stop()
            remove_root(client_root)
