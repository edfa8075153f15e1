"""LUXI over a real Unix socket: the server in the global reactor, the
blocking client in a thread, the asynchronous client in the reactor."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXServerEndpoint
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from ganeti import errors
from ganeti.luxi.client import AsyncLuxiClient, LuxiClient
from ganeti.luxi.server import LuxiServerFactory, MethodHandler


class Handler(MethodHandler):
    def __init__(self) -> None:
        self.next_job = 1
        self.waiting: list[int] = []
        self.cancelled: list[int] = []

    def luxi_SubmitJob(self, ops):
        job_id, self.next_job = self.next_job, self.next_job + 1
        return job_id

    def luxi_QueryTags(self, kind, name):
        if kind != "cluster":
            raise errors.OpPrereqError("Unknown tag kind %r" % kind, errors.ECODE_INVAL)
        return ["a", "b"]

    async def luxi_WaitForJobChange(self, job_id, fields, prev_job_info, prev_log_serial, timeout):
        def cancel(d: Deferred) -> None:
            timer.cancel()
            self.cancelled.append(job_id)

        waiter: Deferred = Deferred(cancel)
        timer = reactor.callLater(timeout, waiter.callback, None)
        self.waiting.append(job_id)
        await waiter
        return [["success"], []]

    def luxi_Big(self, size):
        return "x" * size


async def until(condition, limit: float = 10.0) -> None:
    """Poll C{condition} every 10 ms until it holds (at most C{limit} s)."""
    for _ in range(int(limit / 0.01)):
        if condition():
            return
        await deferLater(reactor, 0.01, lambda: None)
    raise AssertionError("condition never held")


@pytest.fixture
def server():
    directory = tempfile.mkdtemp(prefix="luxi", dir="/tmp")
    path = os.path.join(directory, "ganeti-query")
    handler = Handler()
    port = pytest_twisted.blockon(UNIXServerEndpoint(reactor, path).listen(LuxiServerFactory(handler)))
    yield path, handler
    pytest_twisted.blockon(port.stopListening())
    shutil.rmtree(directory)


@pytest_twisted.ensureDeferred
async def test_blocking_client_in_a_thread(server):
    path, _handler = server

    def session():
        with LuxiClient(path, timeout=10) as luxi:
            job = luxi.submit_job([{"OP_ID": "OP_TEST_DELAY"}])
            change = luxi.wait_for_job_change(job, ["status"], None, None, 0.05)
            tags = luxi.query_tags("cluster", "")
            try:
                luxi.query_tags("bogus", "x")
            except errors.OpPrereqError as e:
                error = e.args
            big = luxi.call("Big", 1_000_000)
            return job, change, tags, error, len(big)

    job, change, tags, error, size = await deferToThread(session)
    assert (job, change, tags, size) == (1, [["success"], []], ["a", "b"], 1_000_000)
    assert error == ("Unknown tag kind 'bogus'", "wrong_input")


@pytest_twisted.ensureDeferred
async def test_async_client(server):
    path, _handler = server
    client = await AsyncLuxiClient.connect(reactor, path)
    try:
        calls = [client.call("SubmitJob", []), client.call("WaitForJobChange", 1, [], None, None, 0.05), client.call("SubmitJob", [])]
        assert [await d for d in calls] == [1, [["success"], []], 2]
        with pytest.raises(errors.LuxiError, match="Unknown method 'Nope'"):
            await client.call("Nope")
        assert await client.call("QueryTags", "cluster", "") == ["a", "b"]
    finally:
        await client.close()


@pytest_twisted.ensureDeferred
async def test_client_going_away_cancels_its_waiter(server):
    path, handler = server
    client = await AsyncLuxiClient.connect(reactor, path)
    pending = client.call("WaitForJobChange", 7, [], None, None, 60)
    await until(lambda: handler.waiting == [7])
    await client.close()
    with pytest.raises(errors.LuxiError):
        await pending
    await until(lambda: handler.cancelled)
    assert handler.cancelled == [7]


@pytest_twisted.ensureDeferred
async def test_missing_socket(server):
    path, _handler = server
    missing = path + "-missing"
    with pytest.raises(errors.LuxiError, match="is ganeti-luxid running"):
        await AsyncLuxiClient.connect(reactor, missing)
    with pytest.raises(errors.LuxiError, match="cannot connect to the master daemon at %s: No such file" % missing):
        await deferToThread(LuxiClient(missing).query_cluster_info)
