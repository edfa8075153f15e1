"""LuxiPool.read: identical concurrent reads share one fresh LUXI call."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rapi.luxi import LuxiPool


class SharedReadTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.pool = LuxiPool(None, "/nowhere")
        self.pending: list[tuple[tuple[Any, ...], Deferred[Any]]] = []

        def call(method: str, *args: Any) -> Deferred[Any]:
            d: Deferred[Any] = Deferred()
            self.pending.append(((method, *args), d))
            return d

        self.pool.call = call

    def test_waiting_requests_share_the_next_call(self) -> None:
        first = ensureDeferred(self.pool.read("Query", "instance", ["name"], None))
        second = ensureDeferred(self.pool.read("Query", "instance", ["name"], None))
        third = ensureDeferred(self.pool.read("Query", "instance", ["name"], None))
        other = ensureDeferred(self.pool.read("Query", "node", ["name"], None))
        self.assertEqual(len(self.pending), 2, "one call per distinct read")
        self.pending[0][1].callback("old")
        self.assertEqual(self.successResultOf(first), "old")
        self.assertNoResult(second)  # arrived during the first call: never gets its answer
        self.assertEqual(len(self.pending), 3)
        self.pending[2][1].callback("fresh")
        self.assertEqual((self.successResultOf(second), self.successResultOf(third)), ("fresh", "fresh"))
        self.pending[1][1].callback("nodes")
        self.assertEqual(self.successResultOf(other), "nodes")
        ensureDeferred(self.pool.read("Query", "instance", ["name"], None))
        self.assertEqual(len(self.pending), 4, "nothing running: a new call at once")

    def test_errors_and_cancellation(self) -> None:
        first = ensureDeferred(self.pool.read("QueryClusterInfo"))
        second = ensureDeferred(self.pool.read("QueryClusterInfo"))
        gone = ensureDeferred(self.pool.read("QueryClusterInfo"))
        gone.cancel()
        self.pending[0][1].callback({})
        self.successResultOf(first)
        self.pending[1][1].errback(RuntimeError("boom"))
        self.failureResultOf(second, RuntimeError)
        self.failureResultOf(gone)
