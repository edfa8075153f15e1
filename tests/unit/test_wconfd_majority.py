"""Tests for the majority acknowledgment of config changes.

L{ganeti.wconfd.replication.ConfigPusher} with a fake RPC whose uploads the
test answers itself, on a L{Clock}; and L{ganeti.wconfd.service} answering
a change only once its quorum hook says a majority holds it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from types import SimpleNamespace
from typing import Any, Callable

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.paths import Paths
from ganeti.rpc import wire
from ganeti.rpc.client import RpcResult
from ganeti.rpc.contract import Runner
from ganeti.wconfd.replication import ConfigPusher, needed
from tests.unit.test_wconfd_service import LOCK1, ServiceTestCase


class SyncPool:
    """A thread pool that runs its work at once, in the caller's thread."""

    def callInThreadWithCallback(self, on_result: Callable[[bool, Any], None], f: Callable[..., Any],
                                 *args: Any, **kwargs: Any) -> None:
        try:
            result = f(*args, **kwargs)
        except Exception:
            on_result(False, Failure())
        else:
            on_result(True, result)


class Reactor(Clock):
    def getThreadPool(self) -> SyncPool:
        return SyncPool()

    def callFromThread(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        f(*args, **kwargs)


class FakeRpc(Runner):
    """Uploads wait for the test (L{answer}); ssconf writes succeed at once."""

    def __init__(self) -> None:
        #: (node, config serial, Deferred) of every upload not answered yet
        self.uploads: list[tuple[str, int, Deferred]] = []
        self.sent: list[tuple[str, int]] = []

    def call(self, nodes: dict[str, str], procedure: str, args: list[Any], timeout: float | None = None) -> Deferred:
        if procedure != "upload_file":
            return _answered({name: RpcResult(name, True) for name in nodes})
        (name,) = nodes
        serial = int(wire.decompress(args[0][1]).split()[1])
        d: Deferred = Deferred()
        self.uploads.append((name, serial, d))
        self.sent.append((name, serial))
        return d

    def answer(self, name: str, ok: bool = True) -> int:
        """Answer the oldest pending upload to C{name}; returns its serial."""
        for index, (node, serial, d) in enumerate(self.uploads):
            if node == name:
                del self.uploads[index]
                d.callback({name: RpcResult(name, True) if ok else RpcResult.failure(name, "connection refused")})
                return serial
        raise AssertionError("no upload to %s pending" % name)

    def pending(self) -> list[tuple[str, int]]:
        return [(node, serial) for node, serial, _d in self.uploads]


def _answered(value: Any) -> Deferred:
    d: Deferred = Deferred()
    d.callback(value)
    return d


def cluster(candidates: int, offline: tuple[int, ...] = ()) -> SimpleNamespace:
    """The master (node0) and C{candidates} other master candidates, plus one plain node."""
    nodes = {
        "uuid%d" % i: SimpleNamespace(uuid="uuid%d" % i, name="node%d" % i, primary_ip="127.0.0.%d" % (i + 1),
                                      master_candidate=i <= candidates, offline=i in offline)
        for i in range(candidates + 2)
    }
    return SimpleNamespace(cluster=SimpleNamespace(master_node="uuid0"), nodes=nodes)


class MajorityTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = Reactor()
        self.rpc = FakeRpc()
        self.serial = 0
        self.snapshots = 0
        self.make(2)

    def make(self, candidates: int, offline: tuple[int, ...] = ()) -> None:
        config = cluster(candidates, offline)

        def snapshot() -> tuple[bytes, int]:
            self.snapshots += 1
            return b"config %d" % self.serial, self.serial

        self.pusher = ConfigPusher(Paths(self.empty_root()), self.reactor, lambda: config, snapshot,
                                   rpc=self.rpc, majority_timeout=30.0, values=lambda _c: {})

    def empty_root(self) -> str:
        """A root with no files (a temporary directory's missing child, not the host's /)."""
        parent = tempfile.mkdtemp(prefix="gntpush")
        self.addCleanup(shutil.rmtree, parent, True)
        return os.path.join(parent, "nonexistent-root")

    def commit(self) -> Deferred:
        """A change made durable here: serial + 1, waiting for a majority."""
        self.serial += 1
        return self.pusher.majority(self.serial)

    def test_needed(self) -> None:
        self.assertEqual([needed(n) for n in (1, 2, 3, 4, 5)], [1, 2, 2, 3, 3])

    def test_the_master_alone_acknowledges_at_once(self) -> None:
        self.make(0)
        self.assertEqual(self.successResultOf(self.commit()), 1)
        self.assertEqual(self.rpc.sent, [])

    def test_offline_candidates_do_not_count(self) -> None:
        self.make(2, offline=(1, 2))
        self.successResultOf(self.commit())
        self.assertEqual(self.rpc.sent, [])

    def test_one_of_two_other_candidates_makes_a_majority_a_slow_one_delays_nothing(self) -> None:
        d = self.commit()
        self.assertEqual(sorted(self.rpc.pending()), [("node1", 1), ("node2", 1)])
        self.assertNoResult(d)
        self.rpc.answer("node2")
        self.assertEqual(self.successResultOf(d), 1)
        self.assertEqual(self.rpc.pending(), [("node1", 1)])  # node1 is still silent: nobody waits for it
        d2 = self.commit()
        self.assertEqual(self.rpc.pending(), [("node1", 1), ("node2", 2)])
        self.rpc.answer("node2")
        self.successResultOf(d2)

    def test_a_burst_is_one_push_and_acks_come_in_serial_order(self) -> None:
        first = self.commit()
        burst = [self.commit() for _ in range(10)]
        # serial 1 is on its way; serial 2 is prepared ahead; 3..11 wait for the next one
        self.assertEqual(self.snapshots, 2)
        released: list[int] = []
        for d in [first] + burst:
            d.addCallback(released.append)
        self.rpc.answer("node1")
        self.assertEqual(released, [1])
        self.assertEqual(self.snapshots, 3)  # one more snapshot for all nine others
        self.rpc.answer("node1")
        self.assertEqual(released, [1, 2])
        self.rpc.answer("node1")
        self.assertEqual(released, list(range(1, 12)))
        self.assertEqual([s for n, s in self.rpc.sent if n == "node1"], [1, 2, 11])
        self.assertEqual(self.rpc.pending(), [("node2", 1)])  # node2 is slow: nobody waited for it
        self.assertEqual(self.snapshots, 3)

    def test_five_candidates_need_three(self) -> None:
        self.make(4)
        d = self.commit()
        self.rpc.answer("node3")
        self.assertNoResult(d)
        self.rpc.answer("node1")
        self.successResultOf(d)

    def test_no_majority_no_ack_but_an_error_after_the_timeout(self) -> None:
        d = self.commit()
        self.rpc.answer("node1", ok=False)
        self.reactor.advance(29)
        self.assertNoResult(d)
        self.reactor.advance(1)
        error = self.failureResultOf(d, errors.ConfigurationError).value
        self.assertIn("only 1 of 3 master candidates hold it after 30s", str(error))

    def test_a_candidate_that_failed_is_tried_again_and_releases_the_change(self) -> None:
        d = self.commit()
        self.rpc.answer("node1", ok=False)
        self.rpc.answer("node2", ok=False)
        self.assertEqual(self.rpc.pending(), [])
        self.reactor.advance(self.pusher.retry_interval)
        self.assertEqual(sorted(self.rpc.pending()), [("node1", 1), ("node2", 1)])
        self.rpc.answer("node1")
        self.successResultOf(d)
        self.assertEqual(self.pusher.lagging, {"node2"})

    def test_a_candidate_gets_one_upload_at_a_time_newest_last(self) -> None:
        self.commit()
        self.commit()
        self.commit()
        self.rpc.answer("node2")
        self.rpc.answer("node2")
        self.rpc.answer("node2")
        self.assertEqual([s for n, s in self.rpc.sent if n == "node1"], [1])  # never two at once
        self.rpc.answer("node1")
        self.assertEqual([s for n, s in self.rpc.sent if n == "node1"], [1, 3])  # then the newest
        self.rpc.answer("node1")
        self.assertEqual(self.pusher.held, {"node1": 3, "node2": 3})
        self.assertEqual(self.rpc.pending(), [])

    def test_already_held_is_acknowledged_at_once(self) -> None:
        self.commit()
        self.rpc.answer("node1")
        self.successResultOf(self.pusher.majority(1))


class ServiceQuorumTests(ServiceTestCase):
    """WConfD answers a change (and frees the locks it releases) only with a majority."""

    def service_options(self) -> dict[str, Any]:
        self.quorum: list[tuple[int, Deferred]] = []

        def quorum(serial: int) -> Deferred:
            d: Deferred = Deferred()
            self.quorum.append((serial, d))
            return d

        return {"quorum": quorum}

    def test_a_change_waits_for_its_majority(self) -> None:
        self.service.startService()
        self.hold(self.a, LOCK1)
        before = self.service.config_store.serial_no
        d = self.change(self.a, release=[LOCK1], os="majority-os")
        self.assertNoResult(d)
        self.assertEqual([s for s, _ in self.quorum], [before + 1])
        self.assertIn(LOCK1, self.owned(self.a))
        self.quorum[0][1].callback(before + 1)
        self.assertEqual(self.successResultOf(d)[1], before + 1)
        self.assertNotIn(LOCK1, self.owned(self.a))

    def test_no_majority_is_an_error_not_an_answer(self) -> None:
        self.service.startService()
        self.hold(self.a, LOCK1)
        d = self.change(self.a, release=[LOCK1], os="majority-os")
        self.quorum[0][1].errback(errors.ConfigurationError("not acknowledged"))
        self.failureResultOf(d, errors.ConfigurationError)
        self.assertIn(LOCK1, self.owned(self.a))

    def test_a_retried_request_waits_for_the_majority_too(self) -> None:
        self.service.startService()
        self.hold(self.a, LOCK1)
        data = dict(self.instance().to_dict(), os="retried-os")
        first = ensureDeferred(self.service.once(
            self.a, 7, lambda: self.service.update_entity(self.a, "instance", data, [], rid=7)))
        self.quorum[0][1].errback(errors.ConfigurationError("not acknowledged"))
        self.failureResultOf(first, errors.ConfigurationError)
        again = ensureDeferred(self.service.replayed(self.a, 7))
        self.assertNoResult(again)
        self.quorum[1][1].callback(self.quorum[1][0])
        self.assertEqual(self.successResultOf(again)["config_serial"], self.quorum[1][0])
