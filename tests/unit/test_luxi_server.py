"""The LUXI server protocol over a StringTransport: no reactor, no sockets."""

from typing import Any

import orjson
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ConnectionDone
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.luxi import wire
from ganeti.luxi.server import LuxiServerFactory, LuxiServerProtocol, MethodHandler


def request(method: str, *args: Any) -> bytes:
    return wire.encode_request(method, args, wire.LUXI_VERSION)


class Recorder:
    """A handler that answers from a script: method -> callable(*args)."""

    def __init__(self, **methods: Any) -> None:
        self.methods = methods
        self.calls: list[tuple[str, list[Any]]] = []

    def handle(self, method: str, args: list[Any]) -> Any:
        self.calls.append((method, args))
        return self.methods[method](*args)


class Cluster(MethodHandler):
    def __init__(self) -> None:
        self.waiters: list[Deferred[Any]] = []

    def luxi_QueryTags(self, kind, name):
        return ["%s:%s" % (kind, name)]

    def luxi_CancelJob(self, job_id, kill=False):
        return [True, "cancel %s kill=%s" % (job_id, kill)]

    def luxi_SubmitManyJobs(self, *jobs):
        return len(jobs)

    async def luxi_Echo(self, value):
        return value

    def luxi_Fail(self):
        raise errors.JobLost("job 7 lost")

    luxi_NotCallable = 3


class ServerTestCase(SynchronousTestCase):
    def connect(self, handler: Any, **kwargs: Any) -> tuple[LuxiServerProtocol, StringTransport]:
        protocol = LuxiServerFactory(handler, **kwargs).buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        return protocol, transport

    def answers(self, transport: StringTransport) -> list[dict[str, Any]]:
        """The responses written so far, decoded; clears the transport."""
        data = transport.value()
        transport.clear()
        assert data == b"" or data.endswith(wire.ETX), data
        return [orjson.loads(p) for p in data.split(wire.ETX)[:-1]]


class AnswerTests(ServerTestCase):
    def test_success(self):
        handler = Recorder(QueryTags=lambda kind, name: ["a", "b"])
        protocol, transport = self.connect(handler)
        protocol.dataReceived(request("QueryTags", "node", "node1"))
        self.assertEqual(self.answers(transport), [{"success": True, "result": ["a", "b"]}])
        self.assertEqual(handler.calls, [("QueryTags", ["node", "node1"])])
        self.assertFalse(transport.disconnecting)

    def test_request_split_across_reads(self):
        protocol, transport = self.connect(Recorder(SubmitJob=lambda ops: 17))
        data = request("SubmitJob", [{"OP_ID": "OP_TEST_DELAY"}])
        for i in range(len(data)):
            protocol.dataReceived(data[i : i + 1])
        self.assertEqual(self.answers(transport), [{"success": True, "result": 17}])

    def test_generic_error(self):
        def drained(ops):
            raise errors.GenericError("Queue drained")

        protocol, transport = self.connect(Recorder(SubmitJob=drained))
        protocol.dataReceived(request("SubmitJob", []))
        self.assertEqual(self.answers(transport), [{"success": False, "result": ["GenericError", ["Queue drained"]]}])
        self.assertFalse(transport.disconnecting)

    def test_op_prereq_error_keeps_its_code(self):
        def missing(names, fields, locking):
            raise errors.OpPrereqError("Instance 'x' not known", errors.ECODE_NOENT)

        protocol, transport = self.connect(Recorder(QueryInstances=missing))
        protocol.dataReceived(request("QueryInstances", ["x"], ["name"], False))
        self.assertEqual(
            self.answers(transport),
            [{"success": False, "result": ["OpPrereqError", ["Instance 'x' not known", "unknown_entity"]]}],
        )

    def test_failed_deferred_is_encoded_too(self):
        protocol, transport = self.connect(Recorder(ArchiveJob=lambda job: Deferred.fromCoroutine(self._lost())))
        protocol.dataReceived(request("ArchiveJob", 3))
        self.assertEqual(self.answers(transport), [{"success": False, "result": ["JobLost", ["job 3"]]}])

    async def _lost(self):
        raise errors.JobLost("job 3")

    def test_cancelled_by_a_stopping_daemon_closes_without_answer(self):
        """A WaitForJobChange cancelled because LuxiD stops (a failover) is not
        answered with an error: the connection closes, so the client asks again."""
        waiting: Deferred[Any] = Deferred()
        protocol, transport = self.connect(Recorder(WaitForJobChange=lambda *args: waiting))
        protocol.dataReceived(request("WaitForJobChange", 3, ["status"], None, None, 60))
        waiting.cancel()
        self.assertEqual(self.answers(transport), [])
        self.assertTrue(transport.disconnecting)

    def test_unexpected_exception_is_logged_and_answered(self):
        protocol, transport = self.connect(Recorder(Query=lambda *a: 1 / 0))
        protocol.dataReceived(request("Query", "node", ["name"], None) + request("Query", "node", ["name"], None))
        expected = {"success": False, "result": ["GenericError", ["ZeroDivisionError: division by zero"]]}
        self.assertEqual(self.answers(transport), [expected, expected])
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 2)
        self.assertFalse(transport.disconnecting)

    def test_unencodable_result_is_a_generic_error(self):
        protocol, transport = self.connect(Recorder(Query=lambda: {1, 2}, Echo=lambda v: v))
        protocol.dataReceived(request("Query") + request("Echo", "still open"))
        bad, good = self.answers(transport)
        self.assertEqual(bad["success"], False)
        self.assertEqual(bad["result"][0], "GenericError")
        self.assertIn("Cannot encode the result of Query", bad["result"][1][0])
        self.assertEqual(good, {"success": True, "result": "still open"})
        self.assertFalse(transport.disconnecting)

    def test_coroutine_handler(self):
        class Async:
            async def handle(self, method, args):
                return [method, args]

        protocol, transport = self.connect(Async())
        protocol.dataReceived(request("Echo", 1))
        self.assertEqual(self.answers(transport), [{"success": True, "result": ["Echo", [1]]}])

    def test_many_synchronous_requests_in_one_chunk(self):
        """Synchronous answers do not recurse: thousands in one read work."""
        protocol, transport = self.connect(Recorder(Echo=lambda v: v))
        protocol.dataReceived(b"".join(request("Echo", i) for i in range(3000)))
        self.assertEqual([a["result"] for a in self.answers(transport)], list(range(3000)))

    def test_version_is_never_echoed(self):
        protocol, transport = self.connect(Recorder(Echo=lambda v: v))
        protocol.dataReceived(request("Echo", 1))
        self.assertNotIn(b"version", transport.value())


class MethodHandlerTests(ServerTestCase):
    def test_dispatch(self):
        protocol, transport = self.connect(Cluster())
        protocol.dataReceived(
            request("QueryTags", "node", "n1")
            + request("CancelJob", 4)
            + request("CancelJob", 4, True)
            + request("SubmitManyJobs", [], [], [])
            + request("Echo", "coroutine")
        )
        self.assertEqual(
            [a["result"] for a in self.answers(transport)],
            [["node:n1"], [True, "cancel 4 kill=False"], [True, "cancel 4 kill=True"], 3, "coroutine"],
        )

    def test_unknown_method(self):
        protocol, transport = self.connect(Cluster())
        protocol.dataReceived(request("NoSuchMethod") + request("NotCallable") + request("QueryTags", "cluster", ""))
        self.assertEqual(
            self.answers(transport),
            [
                {"success": False, "result": ["LuxiError", ["Unknown method 'NoSuchMethod'"]]},
                {"success": False, "result": ["LuxiError", ["Unknown method 'NotCallable'"]]},
                {"success": True, "result": ["cluster:"]},
            ],
        )

    def test_wrong_number_of_arguments(self):
        protocol, transport = self.connect(Cluster())
        protocol.dataReceived(request("QueryTags", "node") + request("CancelJob", 1, True, 3) + request("SubmitManyJobs"))
        self.assertEqual(
            self.answers(transport),
            [
                {"success": False, "result": ["LuxiError", ["Wrong number of arguments for QueryTags: expected 2, got 1"]]},
                {"success": False, "result": ["LuxiError", ["Wrong number of arguments for CancelJob: expected 1 to 2, got 3"]]},
                {"success": True, "result": 0},  # SubmitManyJobs(*jobs) accepts none
            ],
        )
        self.assertFalse(transport.disconnecting)

    def test_handler_errors_are_encoded(self):
        protocol, transport = self.connect(Cluster())
        protocol.dataReceived(request("Fail"))
        self.assertEqual(self.answers(transport), [{"success": False, "result": ["JobLost", ["job 7 lost"]]}])

    def test_direct_use(self):
        cluster = Cluster()
        self.assertEqual(cluster.handle("QueryTags", ["instance", "i1"]), ["instance:i1"])
        with self.assertRaises(errors.LuxiError) as caught:
            cluster.handle("QueryTags", [])
        self.assertEqual(str(caught.exception), "Wrong number of arguments for QueryTags: expected 2, got 0")


class BadRequestTests(ServerTestCase):
    def test_parse_failure_answers_then_closes(self):
        handler = Recorder(Echo=lambda v: v)
        protocol, transport = self.connect(handler)
        protocol.dataReceived(request("Echo", 1) + b"[1, 2]" + wire.ETX + request("Echo", 2))
        self.assertEqual(
            self.answers(transport),
            [
                {"success": True, "result": 1},
                {"success": False, "result": "Failed to parse request: request is not a JSON object but an array"},
            ],
        )
        self.assertTrue(transport.disconnecting)
        self.assertEqual(handler.calls, [("Echo", [1])])  # the request after it is dropped
        protocol.dataReceived(request("Echo", 3))
        self.assertEqual(transport.value(), b"")

    def test_missing_args(self):
        protocol, transport = self.connect(Recorder())
        protocol.dataReceived(b'{"method": "SubmitJob"}' + wire.ETX)
        self.assertEqual(
            self.answers(transport),
            [{"success": False, "result": "Failed to parse request: request for SubmitJob has no 'args'"}],
        )
        self.assertTrue(transport.disconnecting)

    def test_invalid_json(self):
        protocol, transport = self.connect(Recorder())
        protocol.dataReceived(b"{oops" + wire.ETX)
        (answer,) = self.answers(transport)
        self.assertTrue(answer["result"].startswith("Failed to parse request: request is not valid JSON"))
        self.assertTrue(transport.disconnecting)

    def test_too_large_answers_then_closes(self):
        handler = Recorder(Echo=lambda v: v)
        protocol, transport = self.connect(handler, max_message_size=100)
        protocol.dataReceived(request("Echo", "small"))
        protocol.dataReceived(b'{"method": "Echo", "args": ["' + b"x" * 60)
        self.assertFalse(transport.disconnecting)
        protocol.dataReceived(b"x" * 60)
        self.assertEqual(
            self.answers(transport),
            [
                {"success": True, "result": "small"},
                {"success": False, "result": "Failed to parse request: message too large (at least 149 bytes, the limit is 100)"},
            ],
        )
        self.assertTrue(transport.disconnecting)
        self.assertEqual(len(handler.calls), 1)

    def test_too_large_waits_for_the_running_request(self):
        running: Deferred[Any] = Deferred()
        protocol, transport = self.connect(Recorder(Wait=lambda: running), max_message_size=50)
        protocol.dataReceived(request("Wait") + b"y" * 51)
        self.assertEqual(transport.value(), b"")
        self.assertFalse(transport.disconnecting)
        running.callback("done")
        first, second = self.answers(transport)
        self.assertEqual(first, {"success": True, "result": "done"})
        self.assertIn("message too large", second["result"])
        self.assertTrue(transport.disconnecting)


class OrderingTests(ServerTestCase):
    def test_second_request_waits_for_the_first(self):
        first: Deferred[Any] = Deferred()
        handler = Recorder(WaitForJobChange=lambda *args: first, QueryJobs=lambda ids, fields: [[1]])
        protocol, transport = self.connect(handler)
        protocol.dataReceived(request("WaitForJobChange", 1, ["status"], None, None, 60))
        protocol.dataReceived(request("QueryJobs", [1], ["id"]))
        self.assertEqual(transport.value(), b"")
        # Strictly one at a time: the second handler has not even started.
        self.assertEqual([c[0] for c in handler.calls], ["WaitForJobChange"])
        first.callback([["running"], []])
        self.assertEqual(
            self.answers(transport),
            [{"success": True, "result": [["running"], []]}, {"success": True, "result": [[1]]}],
        )
        self.assertEqual([c[0] for c in handler.calls], ["WaitForJobChange", "QueryJobs"])

    def test_answers_in_request_order_whatever_the_completion_order(self):
        pending = [Deferred(), Deferred(), Deferred()]
        handler = Recorder(Wait=lambda i: pending[i])
        protocol, transport = self.connect(handler)
        protocol.dataReceived(request("Wait", 0) + request("Wait", 1) + request("Wait", 2))
        pending[0].callback("zero")
        self.assertEqual(self.answers(transport), [{"success": True, "result": "zero"}])
        pending[1].errback(errors.JobQueueError("one"))
        pending[2].callback("two")
        self.assertEqual(
            self.answers(transport),
            [{"success": False, "result": ["JobQueueError", ["one"]]}, {"success": True, "result": "two"}],
        )

    def test_disconnect_cancels_the_running_handler(self):
        cancelled: list[Deferred[Any]] = []
        waiter: Deferred[Any] = Deferred(cancelled.append)
        handler = Recorder(WaitForJobChange=lambda *args: waiter, QueryJobs=lambda *a: [])
        protocol, transport = self.connect(handler)
        protocol.dataReceived(request("WaitForJobChange", 1, [], None, None, 60) + request("QueryJobs", None, []))
        protocol.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(cancelled, [waiter])
        self.assertEqual(transport.value(), b"")
        self.assertEqual([c[0] for c in handler.calls], ["WaitForJobChange"])  # queued ones dropped
        self.assertEqual(self.flushLoggedErrors(), [])

    def test_disconnect_cancels_a_coroutine_handler(self):
        inner: Deferred[Any] = Deferred()
        cleaned = []

        async def wait(*args):
            try:
                return await inner
            finally:
                cleaned.append(True)

        protocol, transport = self.connect(Recorder(WaitForJobChange=wait))
        protocol.dataReceived(request("WaitForJobChange", 1, [], None, None, 60))
        protocol.connectionLost(Failure(ConnectionDone()))
        self.assertEqual(cleaned, [True])
        self.assertEqual(transport.value(), b"")

    def test_answer_after_disconnect_is_not_written(self):
        waiter: Deferred[Any] = Deferred()  # no canceller: a late callback is ignored
        protocol, transport = self.connect(Recorder(Wait=lambda: waiter))
        protocol.dataReceived(request("Wait"))
        protocol.connectionLost(Failure(ConnectionDone()))
        waiter.callback("late")  # ignored: the Deferred was cancelled
        self.assertEqual(transport.value(), b"")

    def test_reading_pauses_while_too_many_requests_wait(self):
        first: Deferred[Any] = Deferred()
        handler = Recorder(Wait=lambda: first, Echo=lambda v: v)
        protocol, transport = self.connect(handler)
        protocol.max_queued = 4
        protocol.dataReceived(request("Wait") + b"".join(request("Echo", i) for i in range(3)))
        self.assertEqual(transport.producerState, "producing")
        protocol.dataReceived(request("Echo", 3))
        self.assertEqual(transport.producerState, "paused")
        first.callback(None)
        self.assertEqual(transport.producerState, "producing")
        self.assertEqual([a["result"] for a in self.answers(transport)], [None, 0, 1, 2, 3])


class FactoryTests(SynchronousTestCase):
    def test_each_connection_gets_its_own_protocol_with_the_shared_handler(self):
        handler = Recorder(Echo=lambda v: succeed(v))
        factory = LuxiServerFactory(handler, max_message_size=1234)
        one, two = factory.buildProtocol(None), factory.buildProtocol(None)
        self.assertIsNot(one, two)
        self.assertIs(one.handler, handler)
        self.assertIs(one.factory, factory)
        self.assertEqual(one._framer.max_message_size, 1234)
        self.assertEqual(LuxiServerFactory(handler).max_message_size, 16 * 1024 * 1024)
