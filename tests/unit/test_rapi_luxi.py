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


class FailoverTests(SynchronousTestCase):
    """With a window, the pool rides through a failover as the CLI does (issue 23)."""

    def setUp(self) -> None:
        from twisted.internet.task import Clock

        self.clock = Clock()
        self.pool = LuxiPool(self.clock, "/nowhere", window=10.0)
        self.outcomes: list[Any] = []
        self.sent: list[tuple[Any, ...]] = []

        async def once(method: str, *args: Any) -> Any:
            self.sent.append((method, *args))
            outcome = self.outcomes.pop(0)
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        self.pool._call_once = once
        self.pool._call_alone_once = once

    def run_until_done(self, d: Deferred[Any]) -> None:
        for _ in range(200):
            if d.called:
                return
            self.clock.advance(0.5)

    def test_wait_goes_on_at_the_new_master(self) -> None:
        from ganeti.rapi.luxi import LuxidUnreachable

        self.outcomes = [LuxidUnreachable("lost", sent=True), LuxidUnreachable("refused"), [["success"], []]]
        d = ensureDeferred(self.pool.call_alone("WaitForJobChange", 7, ["status"], None, None, 10))
        self.run_until_done(d)
        self.assertEqual(self.successResultOf(d), [["success"], []])
        self.assertEqual(len(self.sent), 3)

    def test_submission_gets_an_id_and_is_sent_again(self) -> None:
        from ganeti.luxi.submitid import submission_id
        from ganeti.rapi.luxi import LuxidUnreachable

        self.outcomes = [LuxidUnreachable("lost", sent=True), 12]
        d = ensureDeferred(self.pool.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]))
        self.run_until_done(d)
        self.assertEqual(self.successResultOf(d), 12)
        self.assertEqual(self.sent[0], self.sent[1])
        self.assertIsNotNone(submission_id(self.sent[0][1]))

    def test_lost_cancel_is_outcome_unknown_and_refusals_end(self) -> None:
        from ganeti.rapi.luxi import LuxidUnreachable

        self.outcomes = [LuxidUnreachable("lost", sent=True)]
        d = ensureDeferred(self.pool.call("CancelJob", 7))
        self.assertIn("outcome unknown", str(self.failureResultOf(d, LuxidUnreachable).value))
        self.outcomes = [LuxidUnreachable("refused")] * 100
        d = ensureDeferred(self.pool.call("QueryClusterInfo"))
        self.run_until_done(d)
        self.failureResultOf(d, LuxidUnreachable)
        self.assertGreaterEqual(self.clock.seconds(), 10.0)
