"""The HA cluster parameters: OP_CLUSTER_SET_PARAMS's fields, WConfD's keeper
(durable first, then every node, nodes that lag caught up), NodeD's
C{ha_params_store}, the cluster information and the last failover record."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.ha import epoch
from ganeti.ha import params as ha_params
from ganeti.ha.keeper import HaKeeper, HaStage, lagging
from ganeti.ha.params import HaParams
from ganeti.jobs import model
from ganeti.noded.failure import RpcFailure
from ganeti.noded.procedures import NodeProcedures
from ganeti.paths import Paths
from ganeti.rpc.client import RpcResult
from ganeti.rpc.contract import Runner
from tests.unit.test_processor import ProcessorTestCase
from tests.unit.wconfd_helpers import make_config


def _root(case: SynchronousTestCase) -> Paths:
    root = tempfile.mkdtemp(prefix="ha-params-")
    case.addCleanup(shutil.rmtree, root, True)
    return Paths(root)


class FakeRpc(Runner):
    """Node RPC recording C{ha_params_store} calls; nodes in C{down} fail."""

    def __init__(self, order: list[str] | None = None) -> None:
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.down: set[str] = set()
        self.order = order if order is not None else []
        #: node -> the record it holds
        self.held: dict[str, dict[str, Any]] = {}

    async def call(self, nodes: dict[str, str], procedure: str, args: list[Any], **kwargs: Any) -> dict[str, RpcResult]:
        assert procedure == "ha_params_store"
        self.order.append("rpc")
        self.calls.append((sorted(nodes), args[0]))
        results = {}
        for name in nodes:
            if name in self.down:
                results[name] = RpcResult(name, False, fail_msg="node unreachable: connection refused")
            else:
                held = self.held.get(name, {"serial_no": -1})
                stored = (held.get("epoch", 0), held["serial_no"]) <= (args[0].get("epoch", 0), args[0]["serial_no"])
                if stored:
                    self.held[name] = dict(args[0])
                results[name] = RpcResult(name, True, payload=[stored, self.held[name]])
        return results


def _run(coro: Any) -> Any:
    results: list[Any] = []
    ensureDeferred(coro).addBoth(results.append)
    assert results, "did not finish"
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


class OpcodeTests(SynchronousTestCase):
    def test_types_and_bounds(self) -> None:
        base = {"OP_ID": "OP_CLUSTER_SET_PARAMS"}
        opcodes.validate(dict(base, liveness_timeout=5, auto_failover=True, failover_timeout=12.5))
        for bad in ({"liveness_timeout": 0.1}, {"liveness_timeout": 301}, {"liveness_timeout": "5"},
                    {"auto_failover": "yes"}, {"failover_timeout": 1}, {"failover_timeout": True}):
            error = self.assertRaises(errors.OpPrereqError, opcodes.validate, dict(base, **bad))
            self.assertIn(next(iter(bad)), str(error), "the message names the parameter")


class KeeperTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = _root(self)
        self.config = make_config(nodes=3)
        self.clock = Clock()
        self.order: list[str] = []
        self.rpc = FakeRpc(self.order)
        self.keeper = HaKeeper(self.paths, self.clock, lambda: self.config, rpc=lambda: self.rpc)
        real_write = ha_params.write

        def write(paths: Paths, params: HaParams) -> None:
            self.order.append("write")
            real_write(paths, params)

        self.patch(ha_params, "write", write)
        self.others = sorted(n.name for n in self.config.nodes.values() if n.uuid != self.config.cluster.master_node)

    def test_durable_here_before_any_node(self) -> None:
        params = _run(self.keeper.change({"liveness_timeout": 5.0}))
        self.assertEqual((params.liveness_timeout, params.serial_no), (5.0, 1))
        self.assertEqual(self.order, ["write", "rpc"], "the master's copy is durable before any node gets it")
        self.assertEqual(ha_params.read(self.paths), params)
        self.assertEqual(self.rpc.calls, [(self.others, params.to_dict())], "every node but the master")

    def test_bad_value_changes_nothing(self) -> None:
        for changes in ({"liveness_timeout": 0.0}, {"failover_timeout": 1.5}, {"liveness_timeout": 20.0},
                        {"speed": 3}):
            error = self.assertRaises(errors.OpPrereqError, _run, self.keeper.change(changes))
            self.assertIn(next(iter(changes)), str(error))
        self.assertFalse(os.path.exists(ha_params.params_path(self.paths)))
        self.assertEqual((self.order, self.keeper.current), ([], HaParams()))

    def test_lagging_node_retried_until_it_confirms(self) -> None:
        self.rpc.down = {self.others[0]}
        _run(self.keeper.change({"auto_failover": True}))
        self.assertEqual(self.keeper.confirmed, {name: (0, 1) for name in self.others[1:]})
        self.rpc.down = set()
        self.clock.advance(self.keeper.retry_interval)
        self.assertEqual(self.rpc.calls[-1][0], [self.others[0]], "only the node that missed it")
        self.assertEqual(self.keeper.confirmed, {name: (0, 1) for name in self.others})
        self.clock.advance(60)
        self.assertEqual(len(self.rpc.calls), 2, "nothing more once every node holds it")

    def test_new_node_gets_it_after_the_config_push(self) -> None:
        _run(self.keeper.change({"liveness_timeout": 3.0}))
        newcomer = make_config(nodes=4)
        self.config = newcomer
        pushed: list[int] = []
        stage = HaStage(lambda data, serial: succeed(pushed.append(serial)), self.keeper)
        self.successResultOf(stage(b"{}", 7))
        self.assertEqual(pushed, [7])
        added = sorted(set(ha_params_targets(newcomer)) - set(self.others))
        self.assertEqual(self.rpc.calls[-1][0], added, "the new node, and only it")

    def test_master_behind_adopts_the_newer_version(self) -> None:
        """A master that missed a change (down, then failed over to) learns the
        newer version from a node's answer, keeps it and sends it on."""
        ha_params.write(self.paths, HaParams(liveness_timeout=3.0, serial_no=2))
        self.keeper = HaKeeper(self.paths, self.clock, lambda: self.config, rpc=lambda: self.rpc)
        newer = HaParams(liveness_timeout=7.0, failover_timeout=20.0, serial_no=5)
        self.rpc.held[self.others[0]] = newer.to_dict()
        _run(self.keeper.replicate())
        self.assertEqual((self.keeper.current, ha_params.read(self.paths)), (newer, newer))
        self.clock.advance(0)
        self.assertEqual(self.rpc.calls[-1], (self.others[1:], newer.to_dict()), "sent on to the others")
        self.assertEqual({name: self.rpc.held[name]["serial_no"] for name in self.others}, dict.fromkeys(self.others, 5))

    def test_nothing_sent_while_defaults(self) -> None:
        self.successResultOf(HaStage(lambda data, serial: None, self.keeper)(b"{}", 1))
        self.assertEqual(self.rpc.calls, [], "no file anywhere means the defaults everywhere")

    def test_lagging(self) -> None:
        nodes = {"a": "1", "b": "2", "c": "3"}
        self.assertEqual(lagging(nodes, {"a": (1, 3), "b": (1, 2)}, (1, 3)), {"b": "2", "c": "3"})
        self.assertEqual(lagging(nodes, {"a": (2, 1), "b": (1, 9)}, (2, 1)), {"b": "2", "c": "3"})


def ha_params_targets(config: Any) -> list[str]:
    from ganeti.ha.keeper import targets

    return list(targets(config))


class NodeStoreTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = _root(self)
        self.node = NodeProcedures(self.paths, Clock())

    def store(self, params: HaParams | dict[str, Any]) -> Any:
        record = params.to_dict() if isinstance(params, HaParams) else params
        d: Deferred = self.node.lookup("ha_params_store")(record)
        return self.successResultOf(d)

    def test_newest_by_serial_wins(self) -> None:
        newer = HaParams(liveness_timeout=4.0, serial_no=5)
        self.assertEqual(self.store(newer), [True, newer.to_dict()])
        self.assertEqual(self.store(HaParams(liveness_timeout=9.0, serial_no=4)), [False, newer.to_dict()],
                         "the answer tells the master of the newer version")
        self.assertEqual(ha_params.read(self.paths), newer, "an older copy never replaces a newer one")

    def test_bad_record_refused(self) -> None:
        for bad in ({"liveness_timeout": -1, "serial_no": 2}, ["x"], {"serial_no": "2"}):
            self.assertRaises(RpcFailure, self.node.lookup("ha_params_store"), bad)
        self.assertFalse(os.path.exists(ha_params.params_path(self.paths)))


class ClusterFieldsTests(SynchronousTestCase):
    def test_defaults_epoch_and_last_failover(self) -> None:
        paths = _root(self)
        fields = ha_params.cluster_fields(paths)
        self.assertEqual(fields, {"ha_liveness_timeout": 2.0, "ha_auto_failover": False, "ha_failover_timeout": 10.0,
                                  "ha_serial_no": 0, "ha_master_epoch": 0, "ha_last_failover": None})
        os.makedirs(paths.data_dir)
        epoch.write_epoch(paths, 3, "node2.test")
        ha_params.record_failover(paths, 3, "node2.test", "node1.test", now=1764000000.0)
        ha_params.write(paths, HaParams(auto_failover=True, serial_no=2))
        fields = ha_params.cluster_fields(paths)
        self.assertEqual((fields["ha_auto_failover"], fields["ha_serial_no"], fields["ha_master_epoch"]), (True, 2, 3))
        self.assertEqual(fields["ha_last_failover"], {"time": 1764000000.0, "epoch": 3, "node": "node2.test",
                                                      "old_master": "node1.test"})

    def test_damaged_failover_record_is_none(self) -> None:
        paths = _root(self)
        os.makedirs(paths.data_dir, exist_ok=True)
        with open(ha_params.failover_path(paths), "w") as handle:
            handle.write('{"node": 3}')
        self.assertIsNone(ha_params.last_failover(paths))


class SetParamsTests(ProcessorTestCase):
    """OP_CLUSTER_SET_PARAMS through a WConfD with a keeper."""

    def setUp(self) -> None:
        super().setUp()
        self.paths = _root(self)
        self.rpc = FakeRpc()
        self.env.service.ha = HaKeeper(self.paths, self.env.clock, lambda: self.env.service.config_store.config(),
                                       rpc=lambda: self.rpc)

    def test_change_with_other_parameters(self) -> None:
        job = self.env.execute(1, [{"OP_ID": "OP_CLUSTER_SET_PARAMS", "liveness_timeout": 4.5,
                                    "failover_timeout": 20, "max_running_jobs": 7}])
        self.assertEqual(job.status, model.SUCCESS, job.ops[0].result)
        stored = ha_params.read(self.paths)
        self.assertEqual((stored.liveness_timeout, stored.failover_timeout, stored.serial_no), (4.5, 20.0, 1))
        self.assertEqual(self.env.read_config().cluster.max_running_jobs, 7)
        self.assertEqual(len(self.rpc.calls), 1)

    def test_refused_change_changes_nothing(self) -> None:
        """failover_timeout must stay above liveness_timeout: refused with both names, nothing written."""
        before = self.env.read_config().cluster
        job = self.env.execute(1, [{"OP_ID": "OP_CLUSTER_SET_PARAMS", "liveness_timeout": 30,
                                    "max_running_jobs": 7}])
        self.assertEqual(job.status, model.ERROR)
        self.assertEqual(job.ops[0].result[0], "OpPrereqError")
        self.assertIn("liveness_timeout", str(job.ops[0].result[1]))
        self.assertEqual(self.env.read_config().cluster, before)
        self.assertFalse(os.path.exists(ha_params.params_path(self.paths)))
        self.assertEqual(self.rpc.calls, [])


class LivenessFollowsTests(SynchronousTestCase):
    """LuxiD's liveness timeout is the cluster's, changed without a restart;
    C{--liveness-timeout} (a fixed timeout) overrides it."""

    def setUp(self) -> None:
        from tests.unit.test_heartbeat_protocol import make_root

        self.clock = Clock()
        self.clock.advance(1000)
        self.paths = make_root()

    def service(self, timeout: float | None = None) -> Any:
        from ganeti.heartbeat.server import LivenessService
        from ganeti.heartbeat.store import LivenessStore

        store = LivenessStore(os.path.join(self.paths.data_dir, "liveness.log"))
        service = LivenessService(self.paths, self.clock, store, port=4242, timeout=timeout)
        service.startService()
        self.addCleanup(service.stopService)
        return service

    def test_follows_ha_data(self) -> None:
        ha_params.write(self.paths, HaParams(liveness_timeout=6.0, serial_no=1))
        service = self.service()
        self.assertEqual(service.roster.timeout, 6.0)
        ha_params.write(self.paths, HaParams(liveness_timeout=3.5, serial_no=2))
        self.clock.pump([0.25] * 9)  # a membership refresh (every 2 s) rereads it
        self.assertEqual(service.roster.timeout, 3.5)

    def test_silent_node_after_the_new_timeout(self) -> None:
        from ganeti.heartbeat.server import HeartbeatFactory
        from tests.unit.test_heartbeat_protocol import AbortableTransport, frame

        service = self.service()
        ha_params.write(self.paths, HaParams(liveness_timeout=5.0, serial_no=1))
        self.clock.pump([0.25] * 9)
        proto = HeartbeatFactory(service, max_connections=2).buildProtocol(None)
        proto.makeConnection(AbortableTransport())
        from ganeti.heartbeat import wire

        proto.dataReceived(frame(wire.hello("node2.test", "", "b1", 3, "0.1")))
        self.clock.pump([0.25] * 16)  # 4 s of silence: up under 5 s (unreachable under the old 2 s)
        self.assertEqual(service.snapshot()["node2.test"]["liveness"], "up")
        self.clock.pump([0.25] * 5)
        self.assertEqual(service.snapshot()["node2.test"]["liveness"], "unreachable")

    def test_explicit_timeout_overrides(self) -> None:
        ha_params.write(self.paths, HaParams(liveness_timeout=6.0, serial_no=1))
        service = self.service(timeout=1.5)
        self.clock.pump([0.25] * 9)
        self.assertEqual(service.roster.timeout, 1.5)


class BeatIntervalTests(SynchronousTestCase):
    def test_half_a_short_timeout(self) -> None:
        self.assertEqual(ha_params.beat_interval(HaParams()), 1.0)
        self.assertEqual(ha_params.beat_interval(HaParams(liveness_timeout=0.8)), 0.4)

    def test_client_beats_faster_when_the_timeout_shrinks(self) -> None:
        from twisted.internet.testing import StringTransport

        from ganeti.heartbeat import wire
        from ganeti.heartbeat.client import HeartbeatClient, HeartbeatClientProtocol
        from tests.unit.test_heartbeat_protocol import frames

        paths = _root(self)
        watch = ha_params.Watch(paths)
        clock = Clock()

        async def lookup(failed: bool) -> Any:
            return None

        client = HeartbeatClient(clock, lambda: None, lookup, None,
                                 interval=lambda: ha_params.beat_interval(watch.current()))
        client.running = True
        client.hello = wire.hello("node2.test", "", "b1", None, "0.1")
        proto = HeartbeatClientProtocol(client)
        transport = StringTransport()
        proto.makeConnection(transport)
        transport.clear()
        clock.pump([0.5] * 4)
        self.assertEqual(len(frames(transport.value())), 2, "one beat a second by default")
        os.makedirs(paths.data_dir, exist_ok=True)
        ha_params.write(paths, HaParams(liveness_timeout=0.6, failover_timeout=5, serial_no=1))
        transport.clear()
        clock.pump([0.1] * 31)  # taken up at the next beat, then one every 0.3 s
        self.assertGreaterEqual(len(frames(transport.value())), 7, "a beat every 0.3 s once the timeout is 0.6 s")
        proto.connectionLost(None)


class CommandTests(SynchronousTestCase):
    def test_modify_options(self) -> None:
        from tests.unit.test_cli_commands import following, gnt, submitted_op

        fake = following()
        code, _out, err = gnt("gnt-cluster", "modify", "--liveness-timeout", "3.5", "--auto-failover", "yes",
                              "--failover-timeout", "12", fake=fake)
        self.assertEqual((code, err), (0, ""))
        op = submitted_op(fake)
        self.assertEqual((op["liveness_timeout"], op["auto_failover"], op["failover_timeout"]), (3.5, True, 12.0))
        code, _out, err = gnt("gnt-cluster", "modify", "--liveness-timeout", "soon", fake=following())
        self.assertEqual(code, 2)
        self.assertIn("--liveness-timeout", err)

    def test_info_shows_high_availability(self) -> None:
        from tests.unit.test_cli import FakeClient
        from tests.unit.test_cli_commands import gnt

        info = {"name": "c", "uuid": "u", "ctime": 0, "mtime": 0, "master": "n1", "architecture": ["64bits", "x"],
                "tags": [], "default_hypervisor": "fake", "enabled_hypervisors": ["fake"],
                "enabled_disk_templates": ["diskless"], "candidate_pool_size": 10, "master_netdev": "none",
                "file_storage_dir": "", "shared_file_storage_dir": "", "max_running_jobs": 20,
                "max_tracked_jobs": 25, "ha_liveness_timeout": 3.5, "ha_auto_failover": True,
                "ha_failover_timeout": 12.0, "ha_serial_no": 2, "ha_master_epoch": 4,
                "ha_last_failover": {"time": 0, "epoch": 4, "node": "n1", "old_master": "n2"}}

        class InfoClient(FakeClient):
            def query_cluster_info(self) -> Any:
                return self._answer("QueryClusterInfo")

        code, out, _err = gnt("gnt-cluster", "info", fake=InfoClient(QueryClusterInfo=info))
        self.assertEqual(code, 0)
        section = out[out.index("High availability:\n"):].splitlines()
        self.assertEqual(section[1:4], ["  Liveness timeout: 3.5s", "  Automatic failover: yes",
                                        "  Failover timeout: 12s"])
        self.assertTrue(section[4].startswith("  Master epoch (this node): "))
        self.assertRegex(section[5], r"^  Last failover: \S+ \S+, to n1 from n2 \(epoch 4\)$")
