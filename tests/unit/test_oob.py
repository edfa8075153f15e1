"""Tests for the out-of-band protocol (L{ganeti.oob}), OP_OOB_COMMAND's LU
(L{ganeti.cmdlib.oob}) and the argument checks of NodeD's C{run_oob}.

The LU runs through the processor on an in-memory WConfD; node RPC is a
fake that records the calls and answers as the helper would.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import attrs
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import oob
from ganeti.cmdlib.oob import oob_program
from ganeti.noded.failure import RpcFailure
from ganeti.noded.oob import OobProcedures, check_program
from ganeti.rpc import RpcResult
from tests.unit.test_cmdlib_node import MASTER, N2, N3, N4, FakeRpc, NodeLUTestCase, cluster
from tests.unit.test_processor import Env

HELPER = "/usr/lib/ganeti/oob-helper"


class DecodeTests(SynchronousTestCase):
    def test_empty_output_is_null(self) -> None:
        self.assertIsNone(oob.decode(b""))
        self.assertIsNone(oob.decode(b"  \n"))

    def test_json(self) -> None:
        self.assertEqual(oob.decode(b'{"powered": true}\n'), {"powered": True})
        self.assertEqual(oob.decode(b'[["fan1", "OK"]]'), [["fan1", "OK"]])

    def test_bad_json_says_so(self) -> None:
        with self.assertRaises(oob.OobError) as cm:
            oob.decode(b"power is on")
        self.assertIn("not valid JSON", str(cm.exception))
        self.assertIn("power is on", str(cm.exception))
        self.assertRaises(oob.OobError, oob.decode, b"\xff\xfe")


class CheckPayloadTests(SynchronousTestCase):
    def test_power_commands_answer_nothing(self) -> None:
        for command in (oob.POWER_ON, oob.POWER_OFF, oob.POWER_CYCLE):
            self.assertEqual(oob.check_payload(command, None), [])
            self.assertEqual(oob.check_payload(command, {"x": 1}),
                             ["%s is expected to not return payload but got '{'x': 1}'" % command])

    def test_power_status_needs_a_boolean_powered(self) -> None:
        self.assertEqual(oob.check_payload(oob.POWER_STATUS, {"powered": False}), [])
        self.assertTrue(oob.check_payload(oob.POWER_STATUS, [True]))
        self.assertTrue(oob.check_payload(oob.POWER_STATUS, {"powered": "yes"}))
        self.assertTrue(oob.check_payload(oob.POWER_STATUS, None))

    def test_health_items(self) -> None:
        self.assertEqual(oob.check_payload(oob.HEALTH, [["disk", "OK"], ["fan", "CRITICAL"]]), [])
        self.assertEqual(oob.check_payload(oob.HEALTH, [["disk", "BROKEN"]]),
                         ["health item 'disk' has invalid status 'BROKEN'"])
        self.assertEqual(oob.check_payload(oob.HEALTH, {"disk": "OK"}),
                         ["command 'health' is expected to return a list but got dict"])
        self.assertTrue(oob.check_payload(oob.HEALTH, [["disk", "OK", "extra"]]))
        self.assertTrue(oob.check_payload(oob.HEALTH, ["disk"]))

    def test_health_warnings(self) -> None:
        items = [["a", "OK"], ["b", "WARNING"], ["c", "CRITICAL"], ["d", "UNKNOWN"]]
        self.assertEqual(oob.health_warnings(items), [("b", "WARNING"), ("c", "CRITICAL")])


class RunOobArgumentTests(SynchronousTestCase):
    """C{run_oob} refuses bad input before it starts anything."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.plain = os.path.join(self.dir, "plain")
        with open(self.plain, "w") as handle:
            handle.write("#!/bin/sh\n")
        os.chmod(self.plain, 0o644)

    def test_program_checks(self) -> None:
        self.assertRaisesRegex(RpcFailure, "not an absolute path", check_program, "oob")
        self.assertRaisesRegex(RpcFailure, "does not exist", check_program, self.dir + "/missing")
        self.assertRaisesRegex(RpcFailure, "does not exist", check_program, self.dir)
        self.assertRaisesRegex(RpcFailure, "is not executable", check_program, self.plain)
        os.chmod(self.plain, 0o755)
        self.assertEqual(check_program(self.plain), self.plain)

    def _refused(self, *args: Any) -> str:
        clock = Clock()
        d = ensureDeferred(OobProcedures(clock).run_oob(*args))
        return str(self.failureResultOf(d, RpcFailure).value)

    def test_bad_arguments_are_refused(self) -> None:
        os.chmod(self.plain, 0o755)
        self.assertIn("Unknown out-of-band command", self._refused(self.plain, "power-up", "n1", 60))
        self.assertIn("Invalid node name", self._refused(self.plain, "health", "-rf", 60))
        self.assertIn("OOB timeout", self._refused(self.plain, "health", "n1", 0))
        self.assertIn("OOB timeout", self._refused(self.plain, "health", "n1", True))
        self.assertIn("does not exist", self._refused(self.dir + "/gone", "health", "n1", 60))


class OobRpc(FakeRpc):
    """Answers C{run_oob} as a helper would: C{self.oob[(command, node)]}
    (a payload, or an L{RpcResult} failure message as C{("fail", msg)})."""

    def __init__(self) -> None:
        super().__init__()
        self.oob: dict[tuple[str, str], Any] = {}
        self.answers["run_oob"] = lambda name, args: self.oob.get((args[1], args[2]))

    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> dict[str, RpcResult]:
        if procedure == "run_oob":
            answer = self.oob.get((args[1], args[2]))
            if isinstance(answer, tuple) and answer[0] == "fail":
                self.calls.append((procedure, dict(nodes), list(args)))
                return {name: RpcResult.failure(name, answer[1]) for name in dict(nodes)}
        return await super().call(nodes, procedure, args, **kwargs)

    def oob_calls(self) -> list[tuple[list[str], list[Any]]]:
        return [(sorted(nodes), args) for proc, nodes, args in self.calls if proc == "run_oob"]


def with_oob(program: str = HELPER, nodes: tuple[str, ...] = (MASTER, N2, N3, N4)) -> Any:
    config = cluster(nodes=3)
    changed = {u: attrs.evolve(n, ndparams={"oob_program": program}) if n.name in nodes else n
               for u, n in config.nodes.items()}
    return attrs.evolve(config, nodes=changed)


def op(command: str, *names: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_OOB_COMMAND", "command": command, "node_names": list(names)}, **params)


class LUOobCommandTests(NodeLUTestCase):
    def setUp(self) -> None:
        self.config = with_oob(nodes=(MASTER, N2, N3))
        super().setUp()
        self.rpc = OobRpc()

    def test_program_resolution_node_group_cluster(self) -> None:
        cfg = cluster(nodes=1)
        node = next(n for n in cfg.nodes.values() if n.name == N2)
        self.assertEqual(oob_program(cfg, node), "")
        cfg = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, ndparams=dict(cfg.cluster.ndparams,
                                                                                 oob_program="/c")))
        self.assertEqual(oob_program(cfg, node), "/c")
        group = cfg.nodegroups[node.group]
        cfg = attrs.evolve(cfg, nodegroups={group.uuid: attrs.evolve(group, ndparams={"oob_program": "/g"})})
        self.assertEqual(oob_program(cfg, node), "/g")
        self.assertEqual(oob_program(cfg, attrs.evolve(node, ndparams={"oob_program": "/n"})), "/n")

    def test_power_status_runs_the_helper_on_the_master(self) -> None:
        self.rpc.oob = {("power-status", N2): {"powered": True}, ("power-status", N3): {"powered": False}}
        result = self.ok(op("power-status", N3, N2))
        self.assertEqual(result, [[[0, N2], [0, {"powered": True}]], [[0, N3], [0, {"powered": False}]]])
        self.assertEqual(self.rpc.oob_calls(), [([MASTER], [HELPER, "power-status", N2, 60]),
                                                ([MASTER], [HELPER, "power-status", N3, 60])])

    def test_node_without_helper_is_unavailable(self) -> None:
        self.assertEqual(self.ok(op("health", N4)), [[[0, N4], [oob.RS_UNAVAIL, None]]])
        self.assertEqual(self.rpc.oob_calls(), [])

    def test_power_on_records_powered_and_waits_between_nodes(self) -> None:
        self._unpower(N2, N3)
        start = self.env.clock.seconds()
        result = self.ok(op("power-on", N2, N3, power_delay=5.0))
        self.assertEqual([entry[1] for entry in result], [[0, None], [0, None]])
        self.assertTrue(self.node(N2).powered)
        self.assertTrue(self.node(N3).powered)
        self.assertGreaterEqual(self.env.clock.seconds() - start, 5.0)

    def _unpower(self, *names: str) -> None:
        config = self.env.read_config()
        nodes = {u: attrs.evolve(n, powered=False) if n.name in names else n for u, n in config.nodes.items()}
        self.env = Env(attrs.evolve(config, nodes=nodes))

    def test_power_off_needs_offline_unless_ignore_status(self) -> None:
        message = self.error(op("power-off", N2), code="wrong_state")
        self.assertEqual(message, "Cannot power off node %s because it is not marked offline" % N2)
        self.assertEqual(self.rpc.oob_calls(), [])
        self.assertTrue(self.node(N2).powered)
        self.ok(op("power-off", N2, ignore_status=True))
        self.assertFalse(self.node(N2).powered)

    def test_master_refused_for_power_off_and_cycle(self) -> None:
        for command in ("power-off", "power-cycle"):
            message = self.error(op(command, MASTER, ignore_status=True), code="wrong_input")
            self.assertIn("Operating on the master node %s is not allowed for %s" % (MASTER, command), message)
            self.assertIn("run '%s %s %s'" % (HELPER, command, MASTER), message)
        self.assertEqual(self.rpc.oob_calls(), [])

    def test_all_nodes_leaves_the_master_out_of_power_cycle(self) -> None:
        result = self.ok(op("power-cycle"))
        self.assertEqual([entry[0][1] for entry in result], [N2, N3, N4])
        self.assertEqual(result[2], [[0, N4], [oob.RS_UNAVAIL, None]])
        result = self.ok(op("health"))
        self.assertEqual([entry[0][1] for entry in result], [MASTER, N2, N3, N4])

    def test_failed_helper_is_nodata_with_a_warning(self) -> None:
        self.rpc.oob = {("power-on", N2): ("fail", "'%s power-on %s' failed with reason 'timeout'" % (HELPER, N2))}
        self._unpower(N2)
        result = self.ok(op("power-on", N2))
        self.assertEqual(result, [[[0, N2], [oob.RS_NODATA, None]]])
        self.assertFalse(self.node(N2).powered)
        self.assertTrue(any("Out-of-band RPC failed on node '%s'" % N2 in line and "timeout" in line
                            for line in self.log), self.log)

    def test_wrong_shape_is_nodata_and_changes_nothing(self) -> None:
        self.rpc.oob = {("power-off", N2): {"unexpected": 1}}
        result = self.ok(op("power-off", N2, ignore_status=True))
        self.assertEqual(result, [[[0, N2], [oob.RS_NODATA, None]]])
        self.assertTrue(self.node(N2).powered)
        self.assertTrue(any("is not valid" in line for line in self.log), self.log)

    def test_health_warns_about_critical_items(self) -> None:
        self.rpc.oob = {("health", N2): [["psu", "OK"], ["fan", "CRITICAL"]]}
        result = self.ok(op("health", N2))
        self.assertEqual(result, [[[0, N2], [0, [["psu", "OK"], ["fan", "CRITICAL"]]]]])
        self.assertIn(" - WARNING: Item 'fan' on node '%s' has status 'CRITICAL'" % N2, self.log)

    def test_unknown_node_and_command_refused(self) -> None:
        self.error(op("health", "nosuchnode"), code="unknown_entity")
        self.error(op("power-up", N2))
        self.assertEqual(self.rpc.oob_calls(), [])


class VerifyOobPathsTests(NodeLUTestCase):
    """Cluster verify checks every node's helper path on each node (Ganeti's C{ENODEOOBPATH})."""

    def setUp(self) -> None:
        self.config = with_oob(nodes=(N2,))
        super().setUp()

    def test_bad_helper_path_is_an_error(self) -> None:
        from ganeti import GANETI_RELEASE
        from ganeti.rpc import wire

        def answer(name: str, args: Any) -> dict[str, Any]:
            paths = args[0].get("oob-paths")
            self.assertEqual(paths, [HELPER])
            problems = ["out of band helper %s is not executable" % HELPER] if name == N3 else [None]
            return {"nodelist": {}, "ssconf": {}, "version": [wire.PROTOCOL_VERSION, GANETI_RELEASE],
                    "cluster_name": "cluster.example.test", "oob-paths": problems}

        self.rpc.answers["node_verify"] = answer
        self.assertIs(self.verify_cluster(), False)
        self.assertIn("  - ERROR: node %s: out of band helper %s is not executable" % (N3, HELPER), self.log)

    def test_node_side_check(self) -> None:
        from ganeti.noded.oob import verify_paths

        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory, True)
        good, plain = os.path.join(directory, "good"), os.path.join(directory, "plain")
        for path, mode in ((good, 0o755), (plain, 0o644)):
            with open(path, "w") as handle:
                handle.write("#!/bin/sh\n")
            os.chmod(path, mode)
        problems = verify_paths([good, plain, directory, directory + "/gone"])
        self.assertEqual(problems[:3], [None, "out of band helper %s is not executable" % plain,
                                        "out of band helper %s is not a file" % directory])
        self.assertIn("error stating out of band helper", problems[3] or "")
        self.assertRaises(RpcFailure, verify_paths, "not-a-list")


class PowercycleTests(NodeLUTestCase):
    def test_master_needs_force(self) -> None:
        message = self.error({"OP_ID": "OP_NODE_POWERCYCLE", "node_name": MASTER}, code="wrong_input")
        self.assertEqual(message, "The node is the master and the force parameter was not set")
        self.assertEqual(self.rpc.calls, [])

    def test_the_node_is_asked_with_the_default_hypervisor(self) -> None:
        self.rpc.answers["node_powercycle"] = "Reboot scheduled in 5 seconds"
        result = self.ok({"OP_ID": "OP_NODE_POWERCYCLE", "node_name": N2.split(".")[0]})
        self.assertEqual(result, "Reboot scheduled in 5 seconds")
        ((procedure, nodes, args),) = self.rpc.calls
        config = self.env.read_config()
        hypervisor = config.cluster.enabled_hypervisors[0]
        self.assertEqual((procedure, list(nodes), args[0]), ("node_powercycle", [N2], hypervisor))

    def test_a_failed_node_fails_the_job(self) -> None:
        self.rpc.down.add(N2)
        message = self.error({"OP_ID": "OP_NODE_POWERCYCLE", "node_name": N2}, kind="OpExecError")
        self.assertIn("Failed to schedule the reboot", message)


class NodePowercycleHandlerTests(SynchronousTestCase):
    def test_reboot_scheduled_after_the_answer(self) -> None:
        clock, reboots = Clock(), []
        procs = OobProcedures(clock, "/", powercycle=lambda: reboots.append(clock.seconds()))
        self.assertEqual(procs.node_powercycle("kvm", {}), "Reboot scheduled in 5 seconds")
        self.assertEqual(reboots, [])
        clock.advance(5)
        self.assertEqual(reboots, [5])

    def test_refused_under_another_root_or_for_an_unknown_hypervisor(self) -> None:
        clock, reboots = Clock(), []
        procs = OobProcedures(clock, "/tmp/node2", powercycle=lambda: reboots.append(1))
        self.assertRaisesRegex(RpcFailure, "shares its machine", procs.node_powercycle, "kvm", {})
        procs = OobProcedures(clock, "/", powercycle=lambda: reboots.append(1))
        self.assertRaisesRegex(RpcFailure, "Unknown hypervisor", procs.node_powercycle, "vmware", {})
        clock.advance(10)
        self.assertEqual(reboots, [])
