"""A node's own NodeD is called over its Unix socket, without TCP and TLS
(L{ganeti.rpc.local}); every other node, and a NodeD without the socket,
over TCP and TLS."""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import defer
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti import crypto
from ganeti.daemons import write_node_identity
from ganeti.paths import Paths
from ganeti.rpc.client import RpcClient
from ganeti.rpc.local import LocalNoded
from tests.tempdirs import TempDirs
from tests.unit.test_rpc_endpoints import NoTls


def node_root(tmp: str, address: str = "127.0.1.1", socket: bool = True) -> Paths:
    paths = Paths(tmp)
    write_node_identity(paths, "node1.example.com", address)
    os.makedirs(paths.socket_dir, exist_ok=True)
    if socket:
        open(paths.noded_socket, "w").close()  # (what is there is not looked at, only that it is)
    return paths


class LocalNodedTests(TempDirs, SynchronousTestCase):
    def test_own_address_and_port_go_to_the_socket(self) -> None:
        paths = node_root(self.mktemp())
        local = LocalNoded(paths, 1811)
        self.assertEqual(local.socket_for("127.0.1.1", 1811), paths.noded_socket)

    def test_other_nodes_and_ports_go_over_tcp(self) -> None:
        local = LocalNoded(node_root(self.mktemp()), 1811)
        self.assertIsNone(local.socket_for("127.0.1.2", 1811))
        self.assertIsNone(local.socket_for("127.0.1.1", 1812))  # another NodeD (a test's second port)

    def test_without_the_socket_over_tcp(self) -> None:
        """A NodeD that does not serve the socket (not started yet, or older)."""
        local = LocalNoded(node_root(self.mktemp(), socket=False), 1811)
        self.assertIsNone(local.socket_for("127.0.1.1", 1811))

    def test_a_changed_address_is_followed(self) -> None:
        """The node's address read anew: a node whose address changed is not taken for this one."""
        paths = node_root(self.mktemp())
        local = LocalNoded(paths, 1811)
        write_node_identity(paths, "node1.example.com", "127.0.1.9")
        self.assertIsNone(local.socket_for("127.0.1.1", 1811))
        self.assertEqual(local.socket_for("127.0.1.9", 1811), paths.noded_socket)

    def test_the_identity_is_read_again_only_when_it_changed(self) -> None:
        """Asked for every request: an unchanged C{node.json} is not read again."""
        from ganeti import daemons

        paths = node_root(self.mktemp())
        local = LocalNoded(paths, 1811)
        reads: list[Paths] = []
        real = daemons.node_address
        self.patch(daemons, "node_address", lambda p: reads.append(p) or real(p))
        for _ in range(5):
            self.assertEqual(local.socket_for("127.0.1.1", 1811), paths.noded_socket)
        self.assertEqual(len(reads), 1)
        write_node_identity(paths, "node1.example.com", "127.0.1.1")
        local.socket_for("127.0.1.1", 1811)
        self.assertEqual(len(reads), 2)

    def test_without_an_identity_over_tcp(self) -> None:
        paths = node_root(self.mktemp())
        os.unlink(os.path.join(paths.data_dir, "node.json"))
        self.assertIsNone(LocalNoded(paths, 1811).socket_for("127.0.1.1", 1811))


class ClientRouteTests(TempDirs, SynchronousTestCase):
    def call(self, paths: Paths, nodes: dict[str, str]) -> tuple[MemoryReactorClock, NoTls, Any]:
        reactor = MemoryReactorClock()
        policy = NoTls()
        client = RpcClient(reactor, policy, port=1811, local=LocalNoded(paths, 1811))
        d = defer.ensureDeferred(client.call(nodes, "version", timeout=10))
        return reactor, policy, d

    def test_own_node_over_the_socket_without_tls(self) -> None:
        paths = node_root(self.mktemp())
        reactor, policy, d = self.call(paths, {"node1": "127.0.1.1"})
        self.assertEqual(reactor.tcpClients, [])
        self.assertEqual([c[0] for c in reactor.unixClients], [paths.noded_socket])
        self.assertEqual(policy.netlocs, [], "a TLS policy asked for the local socket")
        reactor.unixClients[0][1].clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        self.assertEqual(self.successResultOf(d)["node1"].fail_msg, "node unreachable: connection refused")

    def test_other_nodes_over_tls(self) -> None:
        paths = node_root(self.mktemp())
        reactor, policy, d = self.call(paths, {"node1": "127.0.1.1", "node2": "127.0.1.2"})
        self.assertEqual([c[0] for c in reactor.unixClients], [paths.noded_socket])
        self.assertEqual([c[:2] for c in reactor.tcpClients], [("127.0.1.2", 1811)])
        self.assertEqual(policy.netlocs, [(b"127.0.1.2", 1811)])
        reactor.unixClients[0][1].clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        reactor.tcpClients[0][2].clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        self.assertEqual(sorted(self.successResultOf(d)), ["node1", "node2"])

    def test_from_paths_routes_the_own_node(self) -> None:
        paths = node_root(self.mktemp())
        crypto.write_pem_file(paths.server_pem, *crypto.generate_key_and_cert("cluster.example.com"))
        reactor = MemoryReactorClock()
        client = RpcClient.from_paths(reactor, paths, port=1811, epoch=None)
        defer.ensureDeferred(client.call({"node1": "127.0.1.1"}, "version", timeout=10))
        self.assertEqual([c[0] for c in reactor.unixClients], [paths.noded_socket])
        self.assertEqual(reactor.tcpClients, [])
