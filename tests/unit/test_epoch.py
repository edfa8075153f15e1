"""Fencing by master epoch: NodeD refuses stale masters, masters learn and stop."""

from __future__ import annotations

import os

import pytest
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock

from ganeti.ha import epoch, epochwatch
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import NodeRpcResource
from ganeti.rpc import wire
from ganeti.rpc.client import RpcClient
from tests.unit.http_helpers import in_memory


@pytest.fixture(autouse=True)
def no_process_epoch():
    epoch.forget()
    yield
    epoch.forget()


def successful(d):
    out = []
    d.addBoth(out.append)
    assert out, "deferred did not fire"
    if hasattr(out[0], "raiseException"):
        out[0].raiseException()
    return out[0]


class Node:
    def __init__(self, paths):
        paths.ensure_dirs()
        self.paths = paths
        self.procs = NodeProcedures(paths, Clock())
        self.resource = NodeRpcResource(self.procs)

    def call(self, with_epoch, procedure, *args):
        client = RpcClient(Clock(), None, epoch=with_epoch)
        link = in_memory(client, self.resource)  # the real HTTP client, the real NodeD resource
        d = ensureDeferred(client.call({"node": "127.0.0.1"}, procedure, list(args)))
        link.flush()
        return successful(d)["node"]


@pytest.fixture
def node(root):
    return Node(root)


def test_guard_records_the_highest_epoch_durably(root):
    root.ensure_dirs()
    guard = epoch.EpochGuard(root)
    assert guard.highest == 0
    guard.check(None)
    guard.check(0)
    assert not os.path.exists(epoch.epoch_path(root))
    guard.check(3)
    assert epoch.read_epoch(root) == 3
    assert epoch.EpochGuard(root).highest == 3  # survives a restart
    with pytest.raises(epoch.StaleEpoch) as caught:
        guard.check(2)
    assert "stale master epoch 2" in str(caught.value) and "epoch 3" in str(caught.value)
    assert epoch.read_epoch(root) == 3


def test_parse_refuses_garbage():
    assert epoch.parse(b"12") == 12
    assert epoch.parse(" 7\n") == 7
    for bad in (None, b"", b"-1", b"1.5", b"x", b"9" * 40):
        assert epoch.parse(bad) is None


def test_noded_refuses_a_call_with_a_lower_epoch_and_changes_nothing(node):
    assert node.call(5, "version").payload == wire.PROTOCOL_VERSION
    assert epoch.read_epoch(node.paths) == 5
    details = wire.file_details(wire.virtual_path(node.paths.root, node.paths.config_data), b"{}", mode=0o640)
    result = node.call(4, "upload_file", details)
    assert result.failed
    assert "HTTP 409" in result.fail_msg and "stale master epoch 4" in result.fail_msg
    assert not os.path.exists(node.paths.config_data)
    assert epoch.read_epoch(node.paths) == 5
    # the same write from the current master, and one from a client without epoch, work
    assert node.call(5, "upload_file", details).success
    assert node.call(None, "version").success


def test_a_refused_master_learns_the_newer_epoch(node):
    learnt = []
    epoch.adopt(2, learnt.append)
    node.call(3, "version")
    assert node.call(2, "version").failed
    assert learnt == [3]


def test_an_adopted_epoch_is_the_process_epoch_children_inherit():
    assert epoch.process_epoch() is None
    epoch.adopt(7)
    assert epoch.process_epoch() == 7 and os.environ[epoch.ENV] == "7"


def test_epoch_watch_stops_a_master_once_its_node_saw_a_newer_epoch(root):
    root.ensure_dirs()
    epoch.write_epoch(root, 4)
    clock = Clock()
    stopped = []
    watch = epochwatch.EpochWatch(root, clock, "ganeti-luxid", lambda: stopped.append(True), interval=1.0)
    assert watch.epoch == 4 and epoch.process_epoch() is None
    watch.startService()
    assert epoch.process_epoch() == 4
    clock.advance(1)
    assert stopped == []
    epoch.write_epoch(root, 5)  # a new master raised the epoch on this node
    clock.advance(1)
    assert stopped == [True]
    epoch.fenced(6)
    clock.advance(1)
    assert stopped == [True]  # stops once
    watch.stopService()


def test_epoch_watch_stops_when_a_node_refuses(root):
    root.ensure_dirs()
    stopped = []
    watch = epochwatch.EpochWatch(root, Clock(), "ganeti-wconfd", lambda: stopped.append(True))
    watch.startService()
    epoch.fenced(0)
    assert stopped == []
    epoch.fenced(1)
    assert stopped == [True]
    watch.stopService()


def test_an_epoch_is_claimed_once_by_one_node(root):
    root.ensure_dirs()
    guard = epoch.EpochGuard(root)
    guard.check(1)
    guard.claim(2, "node2.test")
    guard.claim(2, "node2.test")  # the same claim again: fine
    with pytest.raises(epoch.StaleEpoch):
        guard.claim(2, "node3.test")  # a concurrent failover to another node
    with pytest.raises(epoch.StaleEpoch):
        guard.claim(1, "node3.test")
    assert epoch.read_record(root) == (2, "node2.test")
    assert epoch.EpochGuard(root).holder == "node2.test"  # durable
    guard.check(2)  # the new master's own calls carry epoch 2
    guard.claim(3, "node3.test")
    assert epoch.read_record(root) == (3, "node3.test")


def test_epoch_claim_procedure(node):
    assert node.call(None, "epoch_claim", 4, "node2.test").payload == 4
    refused = node.call(None, "epoch_claim", 4, "node3.test")
    assert refused.failed and "claimed by node2.test" in refused.fail_msg
    for bad in ((-1, "n"), (True, "n"), (5, ""), (5, "a b"), ("5", "n")):
        assert node.call(None, "epoch_claim", *bad).failed
    assert epoch.read_record(node.paths) == (4, "node2.test")


def test_noded_refuses_a_config_delta_with_a_lower_epoch(node):
    from ganeti import serializer
    from tests.unit.wconfd_helpers import make_config

    config = make_config(nodes=1, instances=1)
    serializer.write_file(node.paths.config_data, config.to_json(), mode=0o640)
    before = serializer.read_file(node.paths.config_data)
    assert node.call(5, "version").success
    record = {"s": config.serial_no + 1, "t": 2.0, "c": []}
    result = node.call(4, "config_delta", config.serial_no, [record])
    assert result.failed and "stale master epoch 4" in result.fail_msg
    assert serializer.read_file(node.paths.config_data) == before
    assert not os.path.exists(node.paths.config_data + ".delta")
    assert node.call(5, "config_delta", config.serial_no, [record]).payload == config.serial_no + 1


def test_noded_records_the_epoch_of_the_master_that_wrote_its_config(node, monkeypatch):
    from twisted.internet import defer, threads

    from ganeti import serializer
    from tests.unit.wconfd_helpers import make_config

    monkeypatch.setattr(threads, "deferToThreadPool", lambda _reactor, _pool, f, *a: defer.maybeDeferred(f, *a))
    monkeypatch.setattr(node.procs.master._reactor, "getThreadPool", lambda: None, raising=False)
    config = make_config(nodes=1, instances=1)
    assert epoch.read_config_epoch(node.paths) == 0  # none recorded yet: counts as epoch 0
    details = wire.file_details(wire.virtual_path(node.paths.root, node.paths.config_data), config.to_json(),
                                mode=0o640)
    assert node.call(3, "upload_file", details).success
    assert epoch.read_config_epoch(node.paths) == 3
    status = node.call(None, "failover_status").payload
    assert (status["config_epoch"], status["config_serial"]) == (3, config.serial_no)
    # a delta from the master of a later epoch: its config now
    record = {"s": config.serial_no + 1, "t": 2.0, "c": []}
    assert node.call(4, "config_delta", config.serial_no, [record]).success
    assert epoch.read_config_epoch(node.paths) == 4
    assert node.call(None, "failover_status").payload["config_epoch"] == 4
    # a refused delta and a call without an epoch leave the record as it is
    assert node.call(4, "config_delta", config.serial_no, [record]).failed
    assert node.call(None, "upload_file", details).success
    assert epoch.read_config_epoch(node.paths) == 4
    # a stale master's upload is refused before it writes anything
    assert node.call(3, "upload_file", details).failed
    assert epoch.read_config_epoch(node.paths) == 4
    assert serializer.loads(serializer.read_file(node.paths.config_data))["serial_no"] == config.serial_no
    # a replaced master's node (here at serial + 1 from epoch 4) takes its successor's config even at a
    # lower serial number
    assert node.call(4, "config_delta", config.serial_no, [record]).success
    assert node.call(None, "failover_status").payload["config_serial"] == config.serial_no + 1
    assert node.call(5, "upload_file", details).success
    status = node.call(None, "failover_status").payload
    assert (status["config_epoch"], status["config_serial"]) == (5, config.serial_no)


def test_a_master_from_before_the_config_record_marks_its_config_with_its_own_epoch(root):
    root.ensure_dirs()
    assert not epoch.mark_upgraded_config(root, None, "n1")  # not a master daemon
    epoch.write_epoch(root, 3, "n1")
    assert not epoch.mark_upgraded_config(root, 2, "n1")  # not the epoch this node holds
    epoch.write_epoch(root, 3, "n2")
    assert not epoch.mark_upgraded_config(root, 3, "n1")  # n2 claimed it: a take-over is under way
    assert epoch.read_config_epoch(root) == 0
    epoch.write_epoch(root, 3, "n1")
    assert epoch.mark_upgraded_config(root, 3, "n1")
    assert epoch.read_config_epoch(root) == 3
    epoch.write_config_epoch(root, 2)
    assert not epoch.mark_upgraded_config(root, 3, "n1")  # a recorded epoch is never replaced here
    assert epoch.read_config_epoch(root) == 2
