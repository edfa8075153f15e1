"""The node RPC client connects to a node's address directly: a refused
connection (a dead node) is its answer at once, not after the 0.3 s
"happy eyeballs" delay of Twisted's C{HostnameEndpoint} (every call of a
failover that includes the dead old master waited for it)."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.ssl import optionsForClientTLS
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rpc.client import RpcClient


class NoTls:
    """A TLS policy never used: the connection fails before any handshake."""

    def __init__(self) -> None:
        self.netlocs: list[tuple[bytes, int]] = []

    def creatorForNetloc(self, host: bytes, port: int) -> Any:
        self.netlocs.append((host, port))
        return optionsForClientTLS("node")


class RefusedConnectionTests(SynchronousTestCase):
    def refused(self, address: str) -> tuple[MemoryReactorClock, NoTls, Any]:
        reactor = MemoryReactorClock()
        policy = NoTls()
        client = RpcClient(reactor, policy, port=1811)
        d = defer.ensureDeferred(client.call({"n1": address}, "version", timeout=10))
        self.assertEqual(len(reactor.tcpClients), 1, "no connection attempted right away")
        host, port, factory, _timeout, _bind = reactor.tcpClients[0]
        self.assertEqual((host, port), (address, 1811))
        factory.clientConnectionFailed(None, Failure(ConnectionRefusedError()))
        return reactor, policy, d

    def test_a_refused_ipv4_node_answers_at_once(self) -> None:
        reactor, policy, d = self.refused("127.0.1.1")
        result = self.successResultOf(d)["n1"]  # the clock never moved
        self.assertEqual(result.fail_msg, "node unreachable: connection refused")
        self.assertEqual(policy.netlocs, [(b"127.0.1.1", 1811)])
        self.assertEqual(reactor.seconds(), 0)

    def test_a_refused_ipv6_node_answers_at_once(self) -> None:
        _reactor, policy, d = self.refused("::1")
        self.assertEqual(self.successResultOf(d)["n1"].fail_msg, "node unreachable: connection refused")
        self.assertEqual(policy.netlocs, [(b"::1", 1811)])
