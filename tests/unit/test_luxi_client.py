"""LUXI clients: the blocking one against a socketpair-backed fake server in a
thread, the asynchronous one over an in-memory pipe (twisted.test.iosim)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable

import orjson
import pytest
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.error import ConnectError, ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.test.iosim import connectedServerAndClient
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.luxi import wire
from ganeti.luxi.client import AsyncLuxiClient, LuxiClient, LuxiClientProtocol
from ganeti.luxi.server import LuxiServerProtocol

#: an answer a script may give instead of bytes
CLOSE = "close"  # close the connection without answering
HANG = "hang"  # never answer; wait until the client goes away

Script = Callable[[int, str, list], Any]


def serve(sock: socket.socket, connection: int, script: Script, seen: list) -> None:
    """Answer the requests arriving on C{sock} as C{script} says."""
    framer = wire.Framer()
    with sock:
        while True:
            data = sock.recv(65536)
            if not data:
                return
            for payload in framer.feed(data):
                seen.append((connection, orjson.loads(payload)))
                method, args = wire.decode_request(payload)
                answer = script(connection, method, args)
                if answer == CLOSE:
                    return
                if answer == HANG:
                    while sock.recv(65536):
                        pass
                    return
                if isinstance(answer, tuple):  # (answer, CLOSE): answer, then close
                    sock.sendall(answer[0])
                    return
                if isinstance(answer, list):  # send in these pieces
                    for piece in answer:
                        sock.sendall(piece)
                else:
                    sock.sendall(answer)


class PairClient(LuxiClient):
    """A LuxiClient whose connections are socketpairs served by threads."""

    def __init__(self, script: Script, **kwargs: Any) -> None:
        super().__init__("/nonexistent/ganeti-query", **kwargs)
        self.script = script
        self.seen: list[tuple[int, dict]] = []
        self.threads: list[threading.Thread] = []

    def _open_socket(self) -> socket.socket:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        thread = threading.Thread(target=serve, args=(theirs, len(self.threads), self.script, self.seen), daemon=True)
        self.threads.append(thread)
        thread.start()
        return mine

    def join(self) -> None:
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()

    @property
    def requests(self) -> list[tuple[int, str, list]]:
        return [(c, r["method"], r["args"]) for c, r in self.seen]


def ok(result: Any) -> bytes:
    return wire.encode_response(True, result)


def echo(connection: int, method: str, args: list) -> bytes:
    return ok([method, args])


@pytest.fixture
def make_client():
    clients: list[PairClient] = []

    def make(script: Script, **kwargs: Any) -> PairClient:
        client = PairClient(script, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()
        client.join()


# --- blocking client ----------------------------------------------------------
def test_call_returns_the_result_and_sends_ganeti_shaped_requests(make_client):
    client = make_client(lambda c, method, args: ok(17))
    assert client.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY", "duration": 1}]) == 17
    assert client.seen == [
        (0, {"method": "SubmitJob", "args": [[{"OP_ID": "OP_TEST_DELAY", "duration": 1}]], "version": 3000000})
    ]


def test_one_connection_serves_many_calls(make_client):
    client = make_client(echo)
    for i in range(20):
        assert client.call("Echo", i) == ["Echo", [i]]
    assert {c for c, _ in client.seen} == {0}


def test_convenience_methods_use_ganeti_argument_shapes(make_client):
    client = make_client(echo)
    ops = [{"OP_ID": "OP_CLUSTER_VERIFY"}]
    calls = [
        (client.submit_job(ops), ["SubmitJob", [ops]]),
        (client.submit_job_to_drained_queue(ops), ["SubmitJobToDrainedQueue", [ops]]),
        (client.submit_many_jobs([ops, ops]), ["SubmitManyJobs", [[ops, ops]]]),
        (client.wait_for_job_change(5, ["status"], None, None, 60), ["WaitForJobChange", [5, ["status"], None, None, 60]]),
        (client.cancel_job(5), ["CancelJob", [5, False]]),
        (client.cancel_job(5, kill=True), ["CancelJob", [5, True]]),
        (client.archive_job(5), ["ArchiveJob", [5]]),
        (client.auto_archive_jobs(-1, 30), ["AutoArchiveJobs", [-1, 30]]),
        (client.change_job_priority(5, -10), ["ChangeJobPriority", [5, -10]]),
        (client.query("node", ["name"], ["=", "name", "n1"]), ["Query", ["node", ["name"], ["=", "name", "n1"]]]),
        (client.query_fields("node", None), ["QueryFields", ["node", None]]),
        (client.query_jobs(None, ["id"]), ["QueryJobs", [None, ["id"]]]),
        (client.query_instances([], ["name"], False), ["QueryInstances", [[], ["name"], False]]),
        (client.query_nodes(["n1"], ["name"], False), ["QueryNodes", [["n1"], ["name"], False]]),
        (client.query_groups([], ["uuid"], False), ["QueryGroups", [[], ["uuid"], False]]),
        (client.query_networks([], ["name"]), ["QueryNetworks", [[], ["name"], False]]),
        (client.query_exports(["n1"]), ["QueryExports", [["n1"], False]]),
        (client.query_cluster_info(), ["QueryClusterInfo", []]),
        (client.query_config_values(["cluster_name"]), ["QueryConfigValues", [["cluster_name"]]]),
        (client.query_tags("cluster", ""), ["QueryTags", ["cluster", ""]]),
        (client.set_drain_flag(True), ["SetDrainFlag", [True]]),
        (client.set_watcher_pause(None), ["SetWatcherPause", [None]]),
    ]
    for got, expected in calls:
        assert got == expected


def test_ganeti_style_errors_are_raised(make_client):
    answers = {
        "Query": wire.encode_error(errors.OpPrereqError("Instance 'x' not known", errors.ECODE_NOENT)),
        "SubmitJob": b'{"success": false, "result": ["GenericError", ["Queue drained"]]}\x03',
        "WaitForJobChange": b'{"success": false, "result": ["JobLost", ["Job 9 not found"]]}\x03',
        "Bad": wire.encode_parse_failure("request is not valid JSON"),
    }
    client = make_client(lambda c, method, args: answers[method])
    with pytest.raises(errors.OpPrereqError) as caught:
        client.query("instance", ["name"], None)
    assert caught.value.args == ("Instance 'x' not known", "unknown_entity")
    with pytest.raises(errors.GenericError, match="Queue drained"):
        client.submit_job([])
    with pytest.raises(errors.JobLost, match="Job 9 not found"):
        client.wait_for_job_change(9, [], None, None, 1)
    with pytest.raises(errors.LuxiError, match="^Failed to parse request: request is not valid JSON$"):
        client.call("Bad")
    # Error answers are normal answers: the connection is kept.
    assert {c for c, _ in client.seen} == {0}


def test_answer_arriving_in_pieces(make_client):
    answer = ok({"name": "cluster.example.com", "tags": ["a"] * 100})
    pieces = [answer[i : i + 1] for i in range(len(answer))]
    client = make_client(lambda c, method, args: pieces)
    assert client.query_cluster_info() == {"name": "cluster.example.com", "tags": ["a"] * 100}


def test_missing_socket_says_the_daemon_is_not_running():
    path = os.path.join(tempfile.mkdtemp(prefix="luxi", dir="/tmp"), "ganeti-query")
    try:
        with pytest.raises(errors.LuxiError) as caught:
            LuxiClient(path).query_cluster_info()
        assert str(caught.value) == (
            "cannot connect to the master daemon at %s: No such file or directory; is ganeti-luxid running?" % path
        )
    finally:
        os.rmdir(os.path.dirname(path))


def test_refused_connection_says_the_daemon_is_not_running():
    directory = tempfile.mkdtemp(prefix="luxi", dir="/tmp")
    path = os.path.join(directory, "ganeti-query")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # bound but not listening: like a socket left by a dead daemon
    try:
        with pytest.raises(errors.LuxiError) as caught:
            LuxiClient(path).call("QueryClusterInfo")
        assert str(caught.value) == (
            "cannot connect to the master daemon at %s: Connection refused; is ganeti-luxid running?" % path
        )
    finally:
        stale.close()
        os.unlink(path)
        os.rmdir(directory)


def test_timeout_raises_and_drops_the_connection(make_client):
    client = make_client(lambda c, method, args: HANG if c == 0 else ok("fresh"), timeout=0.2)
    with pytest.raises(errors.LuxiError, match=r"^WaitForJobChange timed out after 0.2s waiting for the master daemon"):
        client.call("WaitForJobChange", 1, [], None, None, 60)
    # A late answer on the old connection can never be mistaken for the next one.
    assert client.call("Echo") == "fresh"
    assert len(client.threads) == 2


def test_reconnects_once_when_the_idle_connection_was_closed(make_client):
    client = make_client(lambda c, method, args: (ok(c), CLOSE) if c == 0 else ok(c))
    assert client.call("Echo") == 0
    client.threads[0].join(10)  # the server has closed connection 0
    assert client.call("Echo") == 1
    assert client.call("Echo") == 1
    assert client.requests == [(0, "Echo", []), (1, "Echo", []), (1, "Echo", [])]


def test_resends_once_when_sending_on_a_closed_idle_connection_fails(make_client, monkeypatch):
    client = make_client(lambda c, method, args: (ok(c), CLOSE) if c == 0 else ok(c))
    assert client.call("Echo") == 0
    client.threads[0].join(10)
    # As if the server closed the connection just after the idle check.
    monkeypatch.setattr(client, "_idle_connection_usable", lambda sock: True)
    assert client.call("SubmitJob", []) == 1
    assert client.requests == [(0, "Echo", []), (1, "SubmitJob", [[]])]


def test_server_closing_after_the_request_is_an_error_and_not_retried(make_client):
    client = make_client(lambda c, method, args: CLOSE)
    with pytest.raises(errors.LuxiError, match="^SubmitJob failed: the master daemon at .* closed the connection before answering$"):
        client.submit_job([{"OP_ID": "OP_TEST_DELAY"}])
    client.join()
    assert client.requests == [(0, "SubmitJob", [[{"OP_ID": "OP_TEST_DELAY"}]])]
    assert client._sock is None


def test_malformed_answer_is_a_protocol_error(make_client):
    client = make_client(lambda c, method, args: b"[1, 2]\x03")
    with pytest.raises(wire.LuxiProtocolError, match="response is not a JSON object"):
        client.call("Echo")
    assert client._sock is None


def test_oversized_answer_is_refused(make_client):
    client = make_client(lambda c, method, args: ok("x" * 1000), max_message_size=100)
    with pytest.raises(wire.LuxiProtocolError, match="message too large"):
        client.call("Echo")
    assert client._sock is None


def test_unencodable_arguments():
    client = LuxiClient("/nonexistent")
    with pytest.raises(errors.LuxiError, match="cannot encode the arguments of SubmitJob"):
        client.submit_job([{object()}])


def test_context_manager_closes(make_client):
    client = make_client(echo)
    with client as luxi:
        luxi.call("Echo")
        assert luxi._sock is not None
    assert client._sock is None
    client.join()  # the server saw the connection close


def test_importing_the_client_does_not_import_twisted_or_attrs():
    code = "import sys, ganeti.luxi.client; print(sorted(m for m in sys.modules if m.split('.')[0] in ('twisted', 'attr', 'attrs', 'zope')))"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


# --- asynchronous client --------------------------------------------------------
class Handler:
    """Answers from a dict of method -> callable; records the calls."""

    def __init__(self, **methods: Any) -> None:
        self.methods = methods
        self.calls: list[str] = []

    def handle(self, method: str, args: list) -> Any:
        self.calls.append(method)
        return self.methods[method](*args)


class AsyncClientTests(SynchronousTestCase):
    def connect(self, handler: Any) -> tuple[AsyncLuxiClient, Any, Any]:
        client, server, pump = connectedServerAndClient(
            lambda: LuxiServerProtocol(handler), lambda: LuxiClientProtocol("/run/ganeti-query")
        )
        return AsyncLuxiClient(client), server, pump

    def test_calls_are_pipelined_and_answered_in_order(self):
        slow: Deferred[Any] = Deferred()
        handler = Handler(Wait=lambda: slow, Echo=lambda v: v)
        client, _server, pump = self.connect(handler)
        first, second, third = client.call("Wait"), client.call("Echo", 2), client.call("Echo", [3])
        pump.flush()
        self.assertNoResult(first)
        self.assertNoResult(second)
        slow.callback({"one": 1})
        pump.flush()
        self.assertEqual(self.successResultOf(first), {"one": 1})
        self.assertEqual(self.successResultOf(second), 2)
        self.assertEqual(self.successResultOf(third), [3])

    def test_errors_are_decoded(self):
        def missing(*args):
            raise errors.OpPrereqError("Instance 'x' not known", errors.ECODE_NOENT)

        client, _server, pump = self.connect(Handler(QueryInstances=missing, Echo=lambda v: v))
        failed = client.call("QueryInstances", ["x"], ["name"], False)
        unknown = client.call("NoSuchMethod")
        after = client.call("Echo", "ok")
        pump.flush()
        error = self.failureResultOf(failed, errors.OpPrereqError).value
        self.assertEqual(error.args, ("Instance 'x' not known", "unknown_entity"))
        self.failureResultOf(unknown, errors.GenericError)  # KeyError in the handler
        self.flushLoggedErrors(KeyError)
        self.assertEqual(self.successResultOf(after), "ok")

    def test_connection_loss_fails_pending_calls(self):
        never: Deferred[Any] = Deferred()
        client, server, pump = self.connect(Handler(Wait=lambda: never))
        pending = client.call("Wait")
        pump.flush()
        server.transport.loseConnection()
        pump.flush()
        error = self.failureResultOf(pending, errors.LuxiError).value
        self.assertIn("Wait failed: connection to /run/ganeti-query lost", str(error))
        later = client.call("Echo")
        self.assertIn("Echo not sent", str(self.failureResultOf(later, errors.LuxiError).value))

    def test_parse_failure_answer_then_loss(self):
        client, _server, pump = self.connect(Handler())
        bad = client.protocol.transport
        first = Deferred()
        client.protocol._pending.append(("Raw", first))
        bad.write(b"{broken" + wire.ETX)
        second = client.call("Echo", 1)
        pump.flush()
        self.assertIn("Failed to parse request", str(self.failureResultOf(first, errors.LuxiError).value))
        self.failureResultOf(second, errors.LuxiError)

    def test_cancelled_call_does_not_shift_the_answers(self):
        client, _server, pump = self.connect(Handler(Echo=lambda v: v))
        first, second = client.call("Echo", 1), client.call("Echo", 2)
        first.cancel()
        pump.flush()
        self.failureResultOf(first, CancelledError)
        self.assertEqual(self.successResultOf(second), 2)

    def test_unsolicited_answer_drops_the_connection(self):
        client, server, pump = self.connect(Handler())
        server.transport.write(wire.encode_response(True, 1))
        pump.flush()
        self.assertIn("answer without a request", client.protocol.lost)
        self.assertFalse(client.connected)
        self.failureResultOf(client.call("Echo"), errors.LuxiError)

    def test_malformed_answer_fails_the_call_and_drops_the_connection(self):
        client, server, pump = self.connect(Handler(Wait=lambda: Deferred()))
        first, second = client.call("Wait"), client.call("Wait")
        pump.flush()
        server.transport.write(b'{"success": "yes"}' + wire.ETX)
        pump.flush()
        self.assertIn("Wait: response lacks", str(self.failureResultOf(first, wire.LuxiProtocolError).value))
        self.failureResultOf(second, errors.LuxiError)

    def test_close(self):
        client, _server, pump = self.connect(Handler())
        closed = client.close()
        pump.flush()
        self.assertIsNone(self.successResultOf(closed))
        self.assertIsNone(self.successResultOf(client.close()))

    def test_unencodable_arguments(self):
        client, _server, _pump = self.connect(Handler())
        self.failureResultOf(client.call("SubmitJob", {object()}), errors.LuxiError)


class AsyncConnectTests(SynchronousTestCase):
    def attempt(self, reason: Exception) -> Failure:
        reactor = MemoryReactorClock()
        d = Deferred.fromCoroutine(AsyncLuxiClient.connect(reactor, "/run/ganeti-query", timeout=5))
        address, factory, timeout, _ = reactor.unixClients[0]
        self.assertEqual((address, timeout), ("/run/ganeti-query", 5))
        factory.clientConnectionFailed(None, Failure(reason))
        return self.failureResultOf(d, errors.LuxiError)

    def test_missing_socket(self):
        failure = self.attempt(ConnectError(osError=errno.ENOENT, string="No such file or directory"))
        self.assertEqual(
            str(failure.value),
            "cannot connect to the master daemon at /run/ganeti-query: No such file or directory; is ganeti-luxid running?",
        )

    def test_refused(self):
        failure = self.attempt(ConnectionRefusedError())
        self.assertEqual(
            str(failure.value),
            "cannot connect to the master daemon at /run/ganeti-query: Connection refused; is ganeti-luxid running?",
        )

    def test_connected(self):
        reactor = MemoryReactorClock()
        d = Deferred.fromCoroutine(AsyncLuxiClient.connect(reactor, "/run/ganeti-query"))
        _, factory, _, _ = reactor.unixClients[0]
        protocol = factory.buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        client = self.successResultOf(d)
        client.call("QueryClusterInfo")
        self.assertEqual(
            orjson.loads(transport.value()[:-1]), {"method": "QueryClusterInfo", "args": [], "version": 3000000}
        )
