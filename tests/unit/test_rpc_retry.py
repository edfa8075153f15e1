"""A job's node RPC rides through a NodeD restart (issue 23): a call that
cannot have reached the node (connection refused) is sent again for a
bounded time; a procedure declared idempotent also after a connection lost
before the answer; anything else is tried once."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet import error as ierror
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rpc import procedures, wire
from ganeti.rpc.client import RpcClient
from ganeti.rpc.http import NoAnswer, NotSent

OK = (200, wire.encode_response(True, 7), None)


class ScriptedClient(RpcClient):
    """Each try takes the next outcome of C{script}: an exception or an answer."""

    def __init__(self, reactor: Any, script: list[Any], **kwargs: Any) -> None:
        super().__init__(reactor, None, **kwargs)
        self.script = script
        self.tries: list[float] = []

    async def _exchange(self, address: Any, procedure: str, body: bytes) -> Any:
        self.tries.append(self._reactor.seconds())
        outcome = self.script.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def lost() -> NoAnswer:
    return NoAnswer([Failure(ierror.ConnectionLost())])


class RetryTests(SynchronousTestCase):
    def call(self, script: list[Any], procedure: str = "instance_reboot", window: float = wire.RETRY_WINDOW,
             timeout: float = 60) -> tuple[MemoryReactorClock, ScriptedClient, defer.Deferred[Any]]:
        reactor = MemoryReactorClock()
        client = ScriptedClient(reactor, script, retry_window=window)
        d = defer.ensureDeferred(client.call({"n1": "127.0.1.1"}, procedure, [], timeout=timeout))
        return reactor, client, d

    def settle(self, reactor: MemoryReactorClock, seconds: float) -> None:
        """Move the clock C{seconds} on, running each timer at its time."""
        end = reactor.seconds() + seconds
        while True:
            pending = [c.getTime() for c in reactor.getDelayedCalls() if c.getTime() <= end]
            if not pending:
                break
            reactor.advance(max(0.0, min(pending) - reactor.seconds()))
        reactor.advance(max(0.0, end - reactor.seconds()))

    def test_a_refused_call_is_sent_again_until_the_node_answers(self) -> None:
        """NodeD restarting for 3 s: the call (not idempotent) succeeds once it is back."""
        script: list[Any] = [ierror.ConnectionRefusedError()] * 6 + [OK]
        reactor, client, d = self.call(script)
        self.assertNoResult(d)
        self.settle(reactor, 5)
        result = self.successResultOf(d)["n1"]
        self.assertTrue(result.success, result)
        self.assertEqual(result.payload, 7)
        self.assertEqual(len(client.tries), 7)
        # 0.1 s, doubling, at most 1 s apart
        gaps = [round(b - a, 1) for a, b in zip(client.tries, client.tries[1:])]
        self.assertEqual(gaps, [0.1, 0.2, 0.4, 0.8, 1.0, 1.0])

    def test_a_request_not_sent_in_full_is_sent_again(self) -> None:
        script: list[Any] = [NotSent([Failure(ierror.ConnectionLost())]), OK]
        reactor, client, d = self.call(script)
        self.settle(reactor, 1)
        self.assertTrue(self.successResultOf(d)["n1"].success)

    def test_a_node_that_stays_refused_fails_after_the_window(self) -> None:
        reactor, client, d = self.call([ierror.ConnectionRefusedError()] * 100)
        self.settle(reactor, 14)
        self.assertNoResult(d)
        self.settle(reactor, 2)
        result = self.successResultOf(d)["n1"]
        self.assertTrue(result.fail_msg.startswith("node unreachable: connection refused ("), result.fail_msg)
        self.assertLessEqual(client.tries[-1], wire.RETRY_WINDOW)
        self.assertGreater(len(client.tries), 10)

    def test_the_call_timeout_bounds_the_retries(self) -> None:
        reactor, client, d = self.call([ierror.ConnectionRefusedError()] * 100, timeout=3)
        self.settle(reactor, 4)
        self.assertFalse(self.successResultOf(d)["n1"].success)
        self.assertLessEqual(client.tries[-1], 3)

    def test_a_lost_answer_of_a_procedure_with_effects_is_not_sent_again(self) -> None:
        """instance_reboot may have run: it is not repeated."""
        reactor, client, d = self.call([lost(), OK], procedure="instance_reboot")
        result = self.successResultOf(d)["n1"]
        self.assertEqual(len(client.tries), 1)
        self.assertTrue(result.fail_msg.startswith("connection lost"), result.fail_msg)

    def test_a_lost_answer_of_an_idempotent_procedure_is_sent_again(self) -> None:
        self.assertTrue(procedures.instance_list.idempotent)
        reactor, client, d = self.call([lost(), lost(), OK], procedure="instance_list")
        self.settle(reactor, 1)
        self.assertTrue(self.successResultOf(d)["n1"].success)
        self.assertEqual(len(client.tries), 3)

    def test_the_nodes_own_error_and_connect_timeouts_are_not_retried(self) -> None:
        for outcome in [(200, wire.encode_response(False, "disk full"), None), ierror.TimeoutError()]:
            reactor, client, d = self.call([outcome, OK], procedure="instance_list")
            self.assertFalse(self.successResultOf(d)["n1"].success)
            self.assertEqual(len(client.tries), 1)

    def test_without_a_window_every_call_is_tried_once(self) -> None:
        """The election, the failover and the replication: no pause on a dead node."""
        reactor, client, d = self.call([ierror.ConnectionRefusedError(), OK], window=0)
        self.assertEqual(self.successResultOf(d)["n1"].fail_msg, "node unreachable: connection refused")
        self.assertEqual(len(client.tries), 1)


def test_what_is_declared_idempotent() -> None:
    """Reads and writes of a state are; what acts once (a reboot, a create, an OS script) is not."""
    idempotent = {name for name in procedures.TABLE.names() if procedures.procedure(name).idempotent}
    assert {"version", "node_info", "instance_list", "instance_start", "instance_shutdown", "blockdev_remove",
            "jobqueue_update", "upload_file", "write_ssconf_files"} <= idempotent
    assert not {"instance_reboot", "blockdev_create", "instance_os_add", "instance_migrate", "export_remove",
                "node_leave_cluster", "epoch_claim", "election_vote"} & idempotent


class OnceTests(SynchronousTestCase):
    def test_a_call_made_once_is_not_retried_by_a_retrying_client(self) -> None:
        """gnt-cluster verify asks whether a node answers now: no 15 s wait."""
        reactor = MemoryReactorClock()
        client = ScriptedClient(reactor, [ierror.ConnectionRefusedError(), OK], retry_window=wire.RETRY_WINDOW)
        call = procedures.node_verify.call({}, "cluster").once()
        d = defer.ensureDeferred(client.run({"n1": "127.0.1.1"}, call))
        self.assertEqual(self.successResultOf(d)["n1"].fail_msg, "node unreachable: connection refused")
        self.assertEqual(len(client.tries), 1)
