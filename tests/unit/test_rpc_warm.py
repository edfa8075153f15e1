"""A warm-up call (L{RpcClient.warm}: the spare job process's first call to
its own node, made before its job comes) opens the node's connection; a job's
call to that node made while the warm-up is under way waits for it and then
uses its connection, instead of paying for a second TCP and TLS handshake."""

from __future__ import annotations

import gc
from typing import Any

from twisted.internet import defer
from twisted.internet import error as ierror
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rpc import procedures, wire
from ganeti.rpc.client import RpcClient


def answer(value: Any) -> tuple[int, bytes, None]:
    return (200, wire.encode_response(True, value), None)


class HeldClient(RpcClient):
    """Every exchange waits for the test: C{exchanges} lists (address, procedure, its Deferred)."""

    def __init__(self, reactor: Any) -> None:
        super().__init__(reactor, None)
        self.exchanges: list[tuple[Any, str, defer.Deferred[Any]]] = []

    def _exchange(self, address: Any, procedure: str, body: bytes) -> defer.Deferred[Any]:  # type: ignore[override]
        d: defer.Deferred[Any] = defer.Deferred()
        self.exchanges.append((address, procedure, d))
        return d


class WarmTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.client = HeldClient(self.reactor)
        self.warming = defer.ensureDeferred(
            self.client.warm("node1", "127.0.1.1", procedures.version.call().within(5)))

    def call(self, address: str = "127.0.1.1", name: str = "node1") -> defer.Deferred[Any]:
        return defer.ensureDeferred(self.client.run_one(name, address, procedures.test_delay.call(0.001)))

    def test_a_call_made_during_the_warm_up_is_sent_after_it(self) -> None:
        """The job's call is not sent while the warm-up's connection is being made; once the
        warm-up has its answer, the call goes out (on the connection the pool now keeps)."""
        self.assertEqual([p for _a, p, _d in self.client.exchanges], ["version"])
        called = self.call()
        self.assertEqual(len(self.client.exchanges), 1, "a second connection opened during the warm-up")
        self.client.exchanges[0][2].callback(answer(1))
        self.successResultOf(self.warming)
        self.assertEqual([p for _a, p, _d in self.client.exchanges], ["version", "test_delay"])
        self.client.exchanges[1][2].callback(answer(None))
        self.assertTrue(self.successResultOf(called).success)

    def test_another_node_is_not_held_up(self) -> None:
        called = self.call("127.0.1.2", "node2")
        self.assertEqual([(a, p) for a, p, _d in self.client.exchanges],
                         [("127.0.1.1", "version"), ("127.0.1.2", "test_delay")])
        self.client.exchanges[1][2].callback(answer(None))
        self.assertTrue(self.successResultOf(called).success)
        self.assertNoResult(self.warming)

    def test_a_failed_warm_up_lets_the_waiting_calls_connect_themselves(self) -> None:
        called = self.call()
        self.client.exchanges[0][2].errback(ierror.ConnectionLost())
        self.assertIsNone(self.successResultOf(self.warming))  # never raises
        self.assertEqual([p for _a, p, _d in self.client.exchanges], ["version", "test_delay"])
        self.client.exchanges[1][2].callback(answer(None))
        self.assertTrue(self.successResultOf(called).success)

    def test_a_waiting_call_given_up_leaves_the_warm_up_alone(self) -> None:
        """A killed job cancels its call while it waits: no error, the warm-up ends normally."""
        called = self.call()
        called.cancel()
        failure = self.failureResultOf(called, defer.FirstError)  # as a call cancelled while it is sent
        self.assertIsInstance(failure.value.subFailure.value, defer.CancelledError)
        del failure, called
        gc.collect()  # (the gathered call's own failure is logged when it goes)
        self.flushLoggedErrors(defer.CancelledError)
        self.client.exchanges[0][2].callback(answer(1))
        self.successResultOf(self.warming)
        self.assertEqual(len(self.client.exchanges), 1)

    def test_after_the_warm_up_calls_go_at_once(self) -> None:
        self.client.exchanges[0][2].callback(answer(1))
        self.successResultOf(self.warming)
        self.call()
        self.assertEqual(len(self.client.exchanges), 2)

    def test_a_second_warm_up_of_the_same_node_is_not_made(self) -> None:
        again = defer.ensureDeferred(self.client.warm("node1", "127.0.1.1", procedures.version.call().within(5)))
        self.successResultOf(again)
        self.assertEqual(len(self.client.exchanges), 1)


class SparePreparesItsNodeRpcTests(SynchronousTestCase):
    """A spare job process makes its node RPC client (no connection) while it
    waits for its job, so a job whose spare had no time to warm up does not make it in its first RPC."""

    def setUp(self) -> None:
        from ganeti.cmdlib import base
        from tests.unit.queue_helpers import temp_root

        self.paths = temp_root(self, "gntp")
        self.clients = base._PROCESS_RPC
        self.addCleanup(self.clients.clear)

    def test_the_client_is_made_before_the_job_and_kept_for_it(self) -> None:
        from ganeti import crypto
        from ganeti.cmdlib.base import process_rpc
        from ganeti.jobs.spare import prepare

        crypto.bootstrap_secrets(self.paths, "cluster.example.test", node_name="node1.example.test")
        reactor = MemoryReactorClock()
        prepare(reactor, self.paths, 1811)
        (made,) = self.clients.values()
        self.assertIs(process_rpc(reactor, self.paths, 1811), made)
        self.assertEqual(reactor.tcpClients, [], "nothing connected before the job calls")

    def test_a_node_without_credentials_yet_leaves_it_to_the_job(self) -> None:
        from ganeti.jobs.spare import prepare

        prepare(MemoryReactorClock(), self.paths, 1811)
        self.assertEqual(self.clients, {})
