"""Tests for the config deltas of L{ganeti.wconfd.replication.ConfigPusher}.

A candidate that acknowledged serial C{n} gets the journal records after
C{n} (C{config_delta}) instead of the whole config.data; the whole file only
when its serial is unknown, it refused a delta, or the records are gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

from ganeti.paths import Paths
from ganeti.rpc.client import RpcResult
from ganeti.wconfd import replication
from ganeti.wconfd.replication import ConfigPusher
from tests.unit.test_wconfd_majority import FakeRpc, Reactor, cluster


class DeltaRpc(FakeRpc):
    """Also C{config_delta}, answered by the test like uploads."""

    def __init__(self) -> None:
        super().__init__()
        #: (node, base, last serial, Deferred) of every delta not answered yet
        self.delta_calls: list[tuple[str, int, int, Deferred]] = []

    def call(self, nodes: dict[str, str], procedure: str, args: list[Any], timeout: float | None = None) -> Deferred:
        if procedure != "config_delta":
            return super().call(nodes, procedure, args, timeout)
        (name,) = nodes
        base, records = args
        assert [r["s"] for r in records] == list(range(base + 1, base + 1 + len(records)))
        assert all("r" not in r for r in records)  # the requests' answers stay on the master
        d: Deferred = Deferred()
        self.delta_calls.append((name, base, records[-1]["s"], d))
        return d

    def answer_delta(self, name: str, error: str | None = None) -> tuple[int, int]:
        for index, (node, base, last, d) in enumerate(self.delta_calls):
            if node == name:
                del self.delta_calls[index]
                d.callback({name: RpcResult(name, True, last) if error is None else RpcResult.failure(name, error)})
                return base, last
        raise AssertionError("no delta to %s pending" % name)

    def pending_deltas(self) -> list[tuple[str, int, int]]:
        return [(node, base, last) for node, base, last, _d in self.delta_calls]


class DeltaTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = Reactor()
        self.rpc = DeltaRpc()
        self.serial = 0
        self.snapshots = 0
        config = self.config = cluster(2)

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
        """A change journalled here (its record noted), then waiting for a majority."""
        self.serial += 1
        self.pusher.note({"s": self.serial, "t": 1.0, "c": [], "r": ["owner", 1, "answer"]})
        return self.pusher.majority(self.serial)

    def start(self) -> None:
        """Both candidates get the whole file of serial 1 first (their serial is unknown)."""
        d = self.commit()
        self.assertEqual(sorted(self.rpc.pending()), [("node1", 1), ("node2", 1)])
        self.rpc.answer("node1")
        self.rpc.answer("node2")
        self.successResultOf(d)

    def test_after_the_whole_file_changes_go_as_deltas(self) -> None:
        self.start()
        snapshots = self.snapshots
        d = self.commit()
        self.assertEqual(sorted(self.rpc.pending_deltas()), [("node1", 1, 2), ("node2", 1, 2)])
        self.assertEqual(self.rpc.pending(), [])
        self.rpc.answer_delta("node2")
        self.assertEqual(self.successResultOf(d), 2)
        # a burst: node2 takes the first change at once, then the four others in one delta
        burst = [self.commit() for _ in range(5)]
        self.assertEqual(self.rpc.pending_deltas(), [("node1", 1, 2), ("node2", 2, 3)])
        self.rpc.answer_delta("node2")
        self.assertEqual(self.rpc.pending_deltas(), [("node1", 1, 2), ("node2", 3, 7)])
        self.rpc.answer_delta("node2")
        self.assertEqual([self.successResultOf(b) for b in burst], [3, 4, 5, 6, 7])
        self.rpc.answer_delta("node1")
        self.assertEqual(self.rpc.pending_deltas(), [("node1", 2, 7)])
        self.rpc.answer_delta("node1")
        self.assertEqual(self.pusher.held, {"node1": 7, "node2": 7})
        self.assertEqual(self.snapshots, snapshots)
        self.assertEqual(self.pusher.uploads, 2)

    def test_a_refused_delta_is_followed_by_the_whole_current_file(self) -> None:
        self.start()
        d = self.commit()
        self.commit()
        self.rpc.answer_delta("node1", "config_delta refused: this node holds config serial 9, not 1")
        # the whole file, taken now (serial 3), never the older prepared one (serial 1)
        self.assertEqual(self.rpc.pending(), [("node1", 3)])
        self.rpc.answer("node1")
        self.assertEqual(self.successResultOf(d), 2)
        self.assertEqual(self.pusher.held["node1"], 3)
        self.commit()
        self.assertIn(("node1", 3, 4), self.rpc.pending_deltas())  # deltas again from there

    def test_an_unreachable_candidate_is_retried_with_a_delta(self) -> None:
        self.start()
        d = self.commit()
        self.rpc.answer_delta("node1", "connection refused")
        self.assertEqual(self.pusher.lagging, {"node1"})
        self.rpc.answer_delta("node2")
        self.successResultOf(d)
        self.reactor.advance(replication.RETRY_INTERVAL)
        self.assertEqual(self.rpc.pending(), [])
        self.assertEqual(self.rpc.pending_deltas(), [("node1", 1, 2)])
        self.rpc.answer_delta("node1")
        self.assertEqual(self.pusher.lagging, set())

    def test_a_candidate_behind_the_kept_records_gets_the_whole_file(self) -> None:
        self.patch(replication, "RECORD_LIMIT", 3)
        self.start()
        # node1 is slow: its first delta (serial 2) is still on its way while six more changes come
        self.commit()
        for _ in range(6):
            d = self.commit()
            self.rpc.answer_delta("node2")
        self.rpc.answer_delta("node2")
        self.assertEqual(self.successResultOf(d), 8)
        self.assertEqual(sorted(self.pusher.records), [6, 7, 8])
        self.rpc.answer_delta("node1")  # holds 2 now; 3..5 are gone
        self.assertEqual(self.rpc.pending_deltas(), [])
        self.assertEqual(self.rpc.pending(), [("node1", 8)])
        self.rpc.answer("node1")
        self.assertEqual(self.pusher.held["node1"], 8)

    def test_a_whole_config_written_goes_as_the_whole_file(self) -> None:
        self.start()
        self.serial += 1
        self.pusher.note({"s": self.serial, "t": 1.0, "full": {"serial_no": self.serial}})
        d = self.pusher.majority(self.serial)
        self.assertEqual(self.rpc.pending_deltas(), [])
        self.assertEqual(sorted(self.rpc.pending()), [("node1", 2), ("node2", 2)])
        self.rpc.answer("node1")
        self.assertEqual(self.successResultOf(d), 2)
        self.assertEqual(self.pusher.records, {})

    def test_a_candidate_promoted_while_another_is_demoted_gets_the_change(self) -> None:
        """node2 demoted, then promoted again by the change that demotes node1
        (a drain with auto-promote): once that change is distributed, node2
        alone (with the master) makes the majority, and is sent the change."""
        self.start()
        self.config.nodes["uuid2"].master_candidate = False
        d = self.commit()  # serial 2: node2 demoted
        self.successResultOf(self.pusher(b"config 2", 2))
        self.rpc.answer_delta("node1")
        self.rpc.answer_delta("node2")
        self.successResultOf(d)
        self.config.nodes["uuid1"].master_candidate = False
        self.config.nodes["uuid2"].master_candidate = True
        d = self.commit()  # serial 3: node1 demoted, node2 promoted
        self.assertEqual(self.rpc.pending_deltas(), [("node1", 2, 3)])  # the members known when it was made
        self.successResultOf(self.pusher(b"config 3", 3))  # distributed before node1 answers
        self.assertIn(("node2", 2, 3), self.rpc.pending_deltas())
        self.rpc.answer_delta("node2")
        self.assertEqual(self.successResultOf(d), 3)
        self.rpc.answer_delta("node1")
