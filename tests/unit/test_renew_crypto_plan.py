"""gnt-cluster renew-crypto's rounds, applied one file at a time to three nodes' files: at every moment each
node's NodeD accepts every other node's RPC client (and the reverse), and each node's confd accepts every
other node's HMAC key; only the last round makes the old certificate and key refused.  No sockets: the
handshakes run through memory BIOs with the daemons' own reloading contexts."""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import unittest

from twisted.internet.task import Clock

from ganeti import crypto as gcrypto
from ganeti import serializer
from ganeti.client.renew_crypto import Plan, _plan
from ganeti.confd.service import ConfdService
from ganeti.paths import Paths
from ganeti.rpc.tls import Credentials, PinnedPolicy, ReloadingPolicy, ReloadingServerContextFactory
from tests.unit.test_rpc_tls import CLUSTER, handshake

KEY = b"0123456789abcdef0123456789abcdef01234567"


def options(**given: object) -> argparse.Namespace:
    opts = dict(new_cluster_cert=True, new_confd_hmac_key=True, new_rapi_cert=False, rapi_cert=None,
                new_cluster_domain_secret=False, cluster_domain_secret=None)
    opts.update(given)
    return argparse.Namespace(**opts)


class Node:
    """One node's files and the contexts its daemons build from them."""

    def __init__(self, name: str) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="renew-%s-" % name))
        os.makedirs(self.paths.data_dir)
        gcrypto.write_pem_file(self.paths.server_pem, *CLUSTER, mode=0o600)
        gcrypto.write_hmac_key(self.paths.hmac_key, KEY)
        self.noded = ReloadingServerContextFactory(self.paths)
        self.rpc = ReloadingPolicy(self.paths)
        self.confd = ConfdService(self.paths, Clock())

    def accepts_rpc_from(self, other: Node) -> bool:
        return handshake(self.noded, other.rpc.creatorForNetloc(b"x", 1)) == (True, True)

    def accepts_confd_key_of(self, other: Node) -> bool:
        for confd in (self.confd, other.confd):
            confd.load_key()
            confd.load_accepted_keys()
        return other.confd.key in (self.confd.key, *self.confd.accepted_keys)

    def write(self, master: Paths, path: str, data: bytes, mode: int) -> None:
        serializer.write_file(os.path.join(self.paths.root, os.path.relpath(path, master.root)), data, mode=mode)


class RenewalPlanTests(unittest.TestCase):
    def setUp(self) -> None:
        self.nodes = [Node(n) for n in ("master", "node2", "node3")]
        self.master = self.nodes[0]

    def tearDown(self) -> None:
        for node in self.nodes:
            shutil.rmtree(node.paths.root)

    def all_accept_each_other(self, when: str) -> None:
        for server in self.nodes:
            for client in self.nodes:
                self.assertTrue(server.accepts_rpc_from(client), "RPC %s -> %s %s" % (
                    client.paths.root, server.paths.root, when))
                self.assertTrue(server.accepts_confd_key_of(client), "confd key %s" % when)

    def apply(self, plan: Plan, rounds: tuple[str, ...], nodes: list[Node] | None = None) -> None:
        """The rounds of C{plan} to C{nodes} (every node, the master last, as the command does), one file at
        a time, checking every pair after each write."""
        for round_name in rounds:
            for node in nodes if nodes is not None else self.nodes[1:] + [self.master]:
                for path, data, mode in getattr(plan, round_name):
                    node.write(self.master.paths, path, data, mode)
                    self.all_accept_each_other("after %s of round %s on %s" % (
                        os.path.basename(path), round_name, node.paths.root))

    def test_every_write_of_a_renewal_keeps_every_node_talking(self) -> None:
        self.all_accept_each_other("before")
        plan = _plan(self.master.paths, options())
        self.apply(plan, ("trust", "switch"))
        new_server = open(self.master.paths.server_pem, "rb").read()
        for node in self.nodes:
            self.assertEqual(open(node.paths.server_pem, "rb").read(), new_server)
        self.apply(plan, ("retire",))
        # the old certificate and key are refused now, the new ones work
        old_client = PinnedPolicy(Credentials(CLUSTER[0], CLUSTER[1], CLUSTER[1]))
        for node in self.nodes:
            self.assertFalse(handshake(node.noded, old_client.creatorForNetloc(b"x", 1))[1])
            node.confd.load_key()
            node.confd.load_accepted_keys()
            self.assertEqual((node.confd.key.strip(), node.confd.accepted_keys), (
                open(self.master.paths.hmac_key, "rb").read().strip(), ()))
            self.assertNotEqual(node.confd.key.strip(), KEY)
        self.all_accept_each_other("after the renewal")

    def test_a_run_again_after_a_failed_switch_keeps_every_node_talking(self) -> None:
        """The first run stopped after switching node2 alone; the second starts from the master's files (the
        old certificate and key) and must keep trusting node2's until its last round."""
        first = _plan(self.master.paths, options())
        self.apply(first, ("trust",))
        self.apply(first, ("switch",), nodes=[self.nodes[1]])
        second = _plan(self.master.paths, options())
        self.apply(second, ("trust", "switch", "retire"))
        for node in self.nodes:
            self.assertEqual(open(node.paths.server_pem, "rb").read(), second.switch[0][1])


if __name__ == "__main__":
    unittest.main()
