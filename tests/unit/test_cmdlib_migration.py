"""Tests for L{ganeti.cmdlib.instance_migration}: migration, failover, node
migrate and node evacuate, and the follow-up jobs of L{ganeti.jobs.followup}.

The LUs run through the processor on an in-memory WConfD (the L{Env} of
the processor tests).  Node RPC is L{FakeNodes}: a small model of the
nodes' hypervisors (which instance runs where, free memory) that records
every call and fails the calls it is told to.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from typing import Any

import attrs
from twisted.internet.defer import ensureDeferred
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, opcodes
from ganeti.cmdlib import allocator
from ganeti.cmdlib import instance_migration as im
from ganeti.cmdlib import node_evacuation as ne
from ganeti.config.bootstrap import grow, initial_config
from ganeti.jobs import followup
from ganeti.objects import NIC, ConfigData, Disk, Instance, new_uuid
from ganeti.opcodes import typed
from ganeti.paths import Paths
from ganeti.rpc import RpcResult
from ganeti.rpc.contract import Runner
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env
from tests.unit.wconfd_helpers import job

MASTER = "node1.example.test"
N2, N3, N4 = "node2.example.test", "node3.example.test", "node4.example.test"
SHARED = "shared1.example.test"
NODISK = "nodisk1.example.test"
LOCAL = "local1.example.test"
DOWN = "down1.example.test"
STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}

MIGRATION_STEPS = [
    ("migration_info", N2),
    ("accept_instance", N3),
    ("instance_migrate", N2),
    ("instance_get_migration_status", N2),
    ("instance_finalize_migration_dst", N3),
    ("instance_finalize_migration_src", N2),
]


def _instance(cfg: ConfigData, name: str, primary: str, template: str, state: str = "up",
              memory: int = 512) -> ConfigData:
    node = next(uuid for uuid, n in cfg.nodes.items() if n.name == primary)
    disks: dict[str, Disk] = {}
    if template != "diskless":
        base = cfg.cluster.shared_file_storage_dir if template == "sharedfile" else cfg.cluster.file_storage_dir
        disk_uuid = new_uuid()
        disks[disk_uuid] = Disk(uuid=disk_uuid, dev_type=template, logical_id=["loop", "%s/%s/disk0" % (base, name)],
                                nodes=[node], iv_name="disk/0", size=1024, mode="rw", **STAMP)
    inst_uuid = new_uuid()
    inst = Instance(
        name=name, uuid=inst_uuid, primary_node=node, os="noop", hypervisor="fake", admin_state=state,
        admin_state_source="admin", disk_template=template, disks_active=state == "up", beparams={"maxmem": memory},
        nics=[NIC(mac="aa:00:00:00:%02x:01" % len(cfg.instances), uuid=new_uuid())], disks=list(disks),
        **STAMP,
    )
    return attrs.evolve(cfg, instances=dict(cfg.instances, **{inst_uuid: inst}), disks=dict(cfg.disks, **disks))


def cluster() -> ConfigData:
    """The master and nodes 2-4, all in one group; instances on node 2."""
    cfg = grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=3)
    cfg = _instance(cfg, SHARED, N2, "sharedfile", memory=1024)
    cfg = _instance(cfg, NODISK, N2, "diskless", memory=512)
    cfg = _instance(cfg, DOWN, N2, "sharedfile", state="down", memory=256)
    return cfg


def change_node(cfg: ConfigData, name: str, **changes: Any) -> ConfigData:
    nodes = {u: (attrs.evolve(n, **changes) if n.name == name else n) for u, n in cfg.nodes.items()}
    return attrs.evolve(cfg, nodes=nodes)


class FakeNodes(Runner):
    """Node RPC against a model of the nodes' hypervisors.

    @ivar running: node name -> names of the instances running there
    @ivar free: node name -> free memory (MiB)
    @ivar fail: C{(procedure, node name)} or C{procedure} -> error message
    @ivar statuses: migration statuses to answer before C{completed}
    """

    def __init__(self, running: dict[str, set[str]] | None = None) -> None:
        self.calls: list[tuple[str, str, list[Any]]] = []
        self.running: dict[str, set[str]] = running or {}
        self.incoming: dict[str, set[str]] = {}
        self.free: dict[str, int] = {}
        self.fail: dict[Any, str] = {}
        self.statuses: list[dict[str, Any]] = []
        #: called with the procedure before each call
        self.hook: Any = None

    def on(self, node: str) -> set[str]:
        return self.running.setdefault(node, set())

    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> dict[str, RpcResult]:
        out = {}
        if self.hook is not None:
            self.hook(procedure)
        for name in dict(nodes):
            args = list(args)
            self.calls.append((procedure, name, args))
            why = self.fail.get((procedure, name), self.fail.get(procedure))
            if why is not None:
                out[name] = RpcResult.failure(name, why)
                continue
            try:
                out[name] = RpcResult(name, True, getattr(self, "do_" + procedure)(name, *args))
            except ValueError as e:
                out[name] = RpcResult.failure(name, str(e))
        return out

    def steps(self, *procedures: str) -> list[tuple[str, str]]:
        """The calls made, (procedure, node), without the ones in C{procedures}."""
        return [(p, n) for p, n, _ in self.calls if p not in procedures]

    # --- the procedures -----------------------------------------------------------
    def do_node_info(self, node: str, storage: Any, hvs: Any) -> Any:
        return ["boot-id", [], [{"memory_total": 8192, "memory_free": self.free.get(node, 4096), "cpu_total": 4}]]

    def do_instance_info(self, node: str, name: str, hv: str, hvparams: Any) -> Any:
        return {"memory": 1000, "vcpus": 1, "state": "running", "time": 1} if name in self.on(node) else {}

    def do_instance_list(self, node: str, hvs: Any, hvparams: Any) -> Any:
        return sorted(self.on(node))

    def do_instance_shutdown(self, node: str, inst: Any, timeout: int, reason: Any) -> None:
        self.on(node).discard(inst["name"])

    def do_instance_start(self, node: str, inst: Any, paused: bool, reason: Any) -> None:
        self.on(node).add(inst["name"])

    def do_migration_info(self, node: str, inst: Any) -> Any:
        if inst["name"] not in self.on(node):
            raise ValueError("not running")
        return {"from": node}

    def do_accept_instance(self, node: str, inst: Any, info: Any, address: str) -> None:
        self.incoming.setdefault(node, set()).add(inst["name"])

    def do_instance_migrate(self, node: str, cluster: str, inst: Any, address: str, live: bool) -> None:
        pass

    def do_instance_get_migration_status(self, node: str, inst: Any) -> Any:
        return self.statuses.pop(0) if self.statuses else {"status": "completed"}

    def do_instance_finalize_migration_dst(self, node: str, inst: Any, info: Any, success: bool) -> None:
        self.incoming.get(node, set()).discard(inst["name"])
        if success:
            self.on(node).add(inst["name"])

    def do_instance_finalize_migration_src(self, node: str, inst: Any, success: bool, live: bool) -> None:
        if success:
            self.on(node).discard(inst["name"])


class MoveTestCase(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(self.config())
        self.rpc = FakeNodes({N2: {SHARED, NODISK}})
        self.submitted: list[list[list[dict[str, Any]]]] = []
        self.next_id = 100

    def config(self) -> ConfigData:
        return cluster()

    async def submit(self, jobs: list[list[dict[str, Any]]]) -> list[Any]:
        self.submitted.append(jobs)
        return [[True, 1000 + index] for index in range(len(jobs))]

    def execute_options(self) -> dict[str, Any]:
        return {"submit_jobs": self.submit}

    def instance(self, name: str) -> Instance:
        (found,) = [i for i in self.env.read_config().instances.values() if i.name == name]
        return found

    def primary(self, name: str) -> str:
        cfg = self.env.read_config()
        return cfg.nodes[self.instance(name).primary_node].name

    def uuid(self, node: str) -> str:
        return next(n.uuid for n in self.env.read_config().nodes.values() if n.name == node)


def migrate(name: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": name}, **params)


def failover(name: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": name}, **params)


class MigrateTests(MoveTestCase):
    def test_migration_sequence(self) -> None:
        """The RPCs go in the contract's order, the config follows, the log tells."""
        self.assertIsNone(self.ok(migrate(SHARED, target_node=N3)))
        self.assertEqual(self.rpc.steps("instance_info", "node_info"), MIGRATION_STEPS)
        self.assertEqual(self.primary(SHARED), N3)
        self.assertEqual(self.rpc.running[N3], {SHARED})
        self.assertNotIn(SHARED, self.rpc.running[N2])
        disk = self.env.read_config().disks[self.instance(SHARED).disks[0]]
        self.assertEqual(disk.nodes, [self.uuid(N3)])
        self.assertIn("* checking disk consistency between source and target", self.log)
        self.assertIn("* migrating instance to %s" % N3, self.log)
        self.assertEqual(self.log[-1], "* done")

    def test_arguments_of_the_calls(self) -> None:
        self.ok(migrate(NODISK, target_node=N3, mode="non-live"))
        calls = {(p, n): a for p, n, a in self.rpc.calls}
        target_ip = self.env.read_config().nodes[self.uuid(N3)].secondary_ip
        accept = calls[("accept_instance", N3)]
        self.assertEqual(accept[0]["name"], NODISK)
        self.assertEqual(accept[1], {"from": N2})
        self.assertEqual(accept[2], target_ip)
        self.assertEqual(calls[("instance_migrate", N2)][0], "cluster.example.test")
        self.assertEqual(calls[("instance_migrate", N2)][2:], [target_ip, False])
        self.assertEqual(calls[("instance_finalize_migration_dst", N3)][1:], [{"from": N2}, True])
        self.assertEqual(calls[("instance_finalize_migration_src", N2)][1:], [True, False])

    def test_mode_from_live_and_hvparams(self) -> None:
        self.ok(migrate(NODISK, target_node=N3, live=False))
        self.assertEqual([a for p, _, a in self.rpc.calls if p == "instance_migrate"][0][3], False)
        self.ok(migrate(NODISK, target_node=N2))
        self.assertEqual([a for p, _, a in self.rpc.calls if p == "instance_migrate"][1][3], True)
        self.assertIn("either", self.error(migrate(NODISK, target_node=N2, live=True, mode="live")))

    def test_polls_until_completed(self) -> None:
        self.rpc.statuses = [{"status": "setup"}] + [
            {"status": "active", "transferred_ram": n, "total_ram": 100} for n in range(0, 100, 5)
        ]
        self.ok(migrate(SHARED, target_node=N3))
        polls = [p for p, _, _ in self.rpc.calls if p == "instance_get_migration_status"]
        self.assertEqual(len(polls), 22)
        self.assertTrue(any(line.startswith("* memory transfer progress: ") for line in self.log), self.log)
        self.assertEqual(self.primary(SHARED), N3)
        self.assertFalse(any(line.startswith("* migration completed") for line in self.log), self.log)

    def test_tells_the_downtime_the_hypervisor_measured(self) -> None:
        self.rpc.statuses = [{"status": "active"}, {"status": "completed", "transferred_ram": 3 * 1048576,
                                                    "total_ram": 100, "downtime_ms": 57, "total_time_ms": 2500}]
        self.ok(migrate(SHARED, target_node=N3))
        self.assertIn("* migration completed: downtime 57 ms, 3.0 MiB of memory sent, in 2.50 s", self.log)

    def assert_rolled_back(self) -> None:
        finals = [(p, n, a[-1] if p.endswith("_dst") else a[1]) for p, n, a in self.rpc.calls
                  if p.startswith("instance_finalize_migration")]
        self.assertEqual(finals, [("instance_finalize_migration_dst", N3, False),
                                  ("instance_finalize_migration_src", N2, False)])
        self.assertEqual(self.primary(SHARED), N2)
        self.assertEqual(self.instance(SHARED).serial_no, 1)
        self.assertIn(SHARED, self.rpc.running[N2])
        self.assertNotIn(SHARED, self.rpc.running.get(N3, set()))

    def test_failed_migrate_call_rolls_back(self) -> None:
        self.rpc.fail[("instance_migrate", N2)] = "qemu said no"
        message = self.error(migrate(SHARED, target_node=N3), "OpExecError")
        self.assertIn("qemu said no", message)
        self.assertIn("stays on node %s" % N2, message)
        self.assert_rolled_back()

    def test_failed_status_rolls_back(self) -> None:
        self.rpc.statuses = [{"status": "active"}, {"status": "failed", "info": "link down"}]
        self.assertIn("link down", self.error(migrate(SHARED, target_node=N3), "OpExecError"))
        self.assert_rolled_back()

    def test_failed_target_finalize_rolls_back(self) -> None:
        self.rpc.fail[("instance_finalize_migration_dst", N3)] = "cannot resume"
        self.error(migrate(SHARED, target_node=N3), "OpExecError")
        finals = [(p, n) for p, n, _ in self.rpc.calls if p.startswith("instance_finalize")]
        self.assertEqual(finals[-2:], [("instance_finalize_migration_dst", N3),
                                       ("instance_finalize_migration_src", N2)])
        self.assertEqual(self.primary(SHARED), N2)

    def test_refused_accept_aborts_target_only(self) -> None:
        self.rpc.fail[("accept_instance", N3)] = "disk missing"
        self.assertIn("disk missing", self.error(migrate(SHARED, target_node=N3), "OpExecError"))
        self.assertEqual(self.rpc.steps("instance_info", "node_info"),
                         [("migration_info", N2), ("accept_instance", N3), ("instance_finalize_migration_dst", N3)])
        self.assertEqual(self.primary(SHARED), N2)

    def test_failed_source_cleanup_is_a_warning(self) -> None:
        self.rpc.fail[("instance_finalize_migration_src", N2)] = "stale pid"
        self.ok(migrate(SHARED, target_node=N3))
        self.assertEqual(self.primary(SHARED), N3)
        self.assertTrue(any("WARNING" in line and "stale pid" in line for line in self.log), self.log)

    # --- refusals ---------------------------------------------------------------------
    def test_file_template_refused(self) -> None:
        self.env = Env(_instance(cluster(), LOCAL, N2, "file"))
        message = self.error(migrate(LOCAL, target_node=N3))
        self.assertIn("local to node %s" % N2, message)
        self.assertIn("file", message)
        self.assertEqual(self.rpc.calls, [])

    def test_offline_target_refused(self) -> None:
        self.env = Env(change_node(cluster(), N3, offline=True))
        self.assertIn("offline", self.error(migrate(SHARED, target_node=N3)))

    def test_drained_and_non_vm_capable_targets_refused(self) -> None:
        self.env = Env(change_node(change_node(cluster(), N3, drained=True), N4, vm_capable=False))
        self.assertIn("drained", self.error(migrate(SHARED, target_node=N3)))
        self.assertIn("vm_capable", self.error(migrate(SHARED, target_node=N4)))

    def test_target_is_primary_refused(self) -> None:
        self.assertIn("primary node", self.error(migrate(SHARED, target_node=N2)))

    def test_not_enough_memory_refused(self) -> None:
        self.rpc.free[N3] = 999  # the instance uses 1000 MiB
        message = self.error(migrate(SHARED, target_node=N3))
        self.assertIn("Not enough memory on node %s" % N3, message)
        self.assertNotIn("accept_instance", [p for p, _, _ in self.rpc.calls])
        self.assertEqual(self.primary(SHARED), N2)

    def test_stopped_instance_refused_without_allow_failover(self) -> None:
        self.assertIn("use failover", self.error(migrate(DOWN, target_node=N3)))

    def test_not_running_instance_refused_without_allow_failover(self) -> None:
        self.rpc.running[N2].discard(SHARED)
        self.assertIn("does not run", self.error(migrate(SHARED, target_node=N3)))

    def test_allow_failover_moves_a_stopped_instance(self) -> None:
        self.ok(migrate(DOWN, target_node=N3, allow_failover=True))
        self.assertEqual(self.primary(DOWN), N3)
        self.assertEqual(self.rpc.steps(), [("instance_shutdown", N2)])

    def test_allow_failover_when_not_running(self) -> None:
        self.rpc.running[N2].discard(SHARED)
        self.ok(migrate(SHARED, target_node=N3, allow_failover=True))
        self.assertEqual(self.primary(SHARED), N3)
        self.assertEqual(self.rpc.running[N3], {SHARED})

    # --- target choice, locks -----------------------------------------------------------
    def test_allocator_takes_the_node_with_most_free_memory(self) -> None:
        self.rpc.free = {N3: 2000, N4: 3000, MASTER: 2500}
        self.ok(migrate(SHARED))
        self.assertEqual(self.primary(SHARED), N4)

    def test_node_locks_narrowed_once_the_target_is_chosen(self) -> None:
        held: dict[str, list[str]] = {}

        def record(procedure: str) -> None:
            held.setdefault(procedure, [name for name, _ in self.env.locks_of(job(self.next_id))])

        self.rpc.hook = record
        self.rpc.free = {N3: 2000, N4: 3000, MASTER: 2500}
        self.ok(migrate(SHARED))
        self.assertIn("node/[lockset]", held["node_info"])
        nodes = sorted("node/%s" % self.uuid(n) for n in (N2, N4))
        self.assertEqual([n for n in held["migration_info"] if n.startswith("node/")], nodes)
        self.assertEqual([n for n in held["migration_info"] if n.startswith("node-res/")],
                         [n.replace("node/", "node-res/") for n in nodes])

    def test_allocator_skips_nodes_without_room(self) -> None:
        self.rpc.free = {N3: 100, N4: 100, MASTER: 100}
        self.assertIn("No node can take", self.error(migrate(SHARED)))

    def test_locks_with_and_without_target(self) -> None:
        cfg = self.env.read_config()
        lu = im.LUInstanceMigrate(typed.from_dict(opcodes.validate(migrate(SHARED, target_node=N3))), None, cfg)
        lu.expand_names()
        lu.declare_locks("node")
        lu.declare_locks("node-res")
        self.assertEqual(lu.needed_locks["instance"], [SHARED])
        self.assertEqual(sorted(lu.needed_locks["node"]), sorted([self.uuid(N2), self.uuid(N3)]))
        self.assertEqual(lu.needed_locks["node-res"], lu.needed_locks["node"])
        self.assertEqual(lu.share_locks, {})
        other = im.LUInstanceFailover(typed.from_dict(opcodes.validate(failover(SHARED))), None, cfg)
        other.expand_names()
        other.declare_locks("node")
        self.assertIs(other.needed_locks["node"], im.ALL_SET)

    # --- cleanup --------------------------------------------------------------------------
    def test_cleanup_finds_the_instance_on_the_target(self) -> None:
        self.rpc.running = {N2: set(), N3: {SHARED}}
        self.ok(migrate(SHARED, target_node=N3, cleanup=True))
        self.assertEqual(self.primary(SHARED), N3)
        self.assertEqual(self.rpc.steps(), [("instance_list", N2), ("instance_list", N3)])

    def test_cleanup_confirms_the_primary(self) -> None:
        self.ok(migrate(SHARED, cleanup=True))
        self.assertEqual(self.primary(SHARED), N2)
        self.assertEqual(sorted(n for p, n, _ in self.rpc.calls), sorted([MASTER, N2, N3, N4]))
        self.assertTrue(any("confirmed" in line for line in self.log))

    def test_cleanup_refuses_two_or_no_places(self) -> None:
        self.rpc.running = {N2: {SHARED}, N3: {SHARED}}
        self.assertIn("several nodes", self.error(migrate(SHARED, target_node=N3, cleanup=True), "OpExecError"))
        self.rpc.running = {}
        self.assertIn("none of", self.error(migrate(SHARED, target_node=N3, cleanup=True), "OpExecError"))


class FailoverTests(MoveTestCase):
    def test_running_instance(self) -> None:
        self.ok(failover(SHARED, target_node=N3))
        self.assertEqual(self.rpc.steps("node_info"), [("instance_shutdown", N2), ("instance_start", N3)])
        self.assertEqual(self.primary(SHARED), N3)
        self.assertEqual(self.rpc.running[N3], {SHARED})
        self.assertIn("* starting the instance on the target node %s" % N3, self.log)

    def test_stopped_instance_is_not_started(self) -> None:
        self.ok(failover(DOWN, target_node=N4))
        self.assertEqual(self.rpc.steps(), [("instance_shutdown", N2)])
        self.assertEqual(self.primary(DOWN), N4)
        self.assertNotIn(DOWN, self.rpc.running.get(N4, set()))

    def test_shutdown_timeout_is_passed(self) -> None:
        self.ok(failover(DOWN, target_node=N4, shutdown_timeout=7))
        self.assertEqual(self.rpc.calls[0][2][1], 7)

    def test_failed_shutdown_aborts(self) -> None:
        self.rpc.fail["instance_shutdown"] = "node unreachable"
        self.assertIn("node unreachable", self.error(failover(SHARED, target_node=N3), "OpExecError"))
        self.assertEqual(self.primary(SHARED), N2)

    def test_failed_shutdown_ignored_on_request(self) -> None:
        self.rpc.fail["instance_shutdown"] = "node unreachable"
        self.ok(failover(SHARED, target_node=N3, ignore_consistency=True))
        self.assertEqual(self.primary(SHARED), N3)
        self.assertTrue(any("WARNING" in line for line in self.log))

    def test_offline_source_is_not_contacted(self) -> None:
        self.env = Env(change_node(cluster(), N2, offline=True))
        self.ok(failover(SHARED, target_node=N3))
        self.assertEqual(self.rpc.steps("node_info"), [("instance_start", N3)])
        self.assertEqual(self.primary(SHARED), N3)

    def test_memory_checked_only_for_instances_marked_up(self) -> None:
        self.rpc.free[N3] = 100
        self.assertIn("Not enough memory", self.error(failover(SHARED, target_node=N3)))
        self.ok(failover(DOWN, target_node=N3))

    def test_file_template_refused(self) -> None:
        self.env = Env(_instance(cluster(), LOCAL, N2, "file"))
        self.assertIn("local to node", self.error(failover(LOCAL, target_node=N3)))


class NodeMigrateTests(MoveTestCase):
    def test_one_job_per_primary_instance(self) -> None:
        result = self.ok({"OP_ID": "OP_NODE_MIGRATE", "node_name": "node2", "mode": "non-live", "target_node": N3})
        self.assertEqual(result, {"jobs": [[True, 1000], [True, 1001], [True, 1002]]})
        (jobs,) = self.submitted
        self.assertEqual([[op["OP_ID"] for op in job] for job in jobs], [["OP_INSTANCE_MIGRATE"]] * 3)
        self.assertEqual([job[0]["instance_name"] for job in jobs], sorted([SHARED, NODISK, DOWN]))
        for (op,) in jobs:
            self.assertEqual(op["mode"], "non-live")
            self.assertEqual(op["target_node"], N3)
            self.assertEqual(op["allow_runtime_changes"], True)
            self.assertNotIn("iallocator", op)
            self.assertTrue(op["comment"].startswith("Submitted by job"))
            self.assertEqual(op["priority"], 0)
            self.assertTrue(any(r[0] == "gnt:opcode:node_migrate" for r in op["reason"]), op["reason"])

    def test_iallocator_passed_on(self) -> None:
        self.ok({"OP_ID": "OP_NODE_MIGRATE", "node_name": N2, "iallocator": "hail"})
        self.assertEqual({op["iallocator"] for (op,) in self.submitted[0]}, {"hail"})

    def test_node_without_instances(self) -> None:
        self.assertEqual(self.ok({"OP_ID": "OP_NODE_MIGRATE", "node_name": N3}), {"jobs": []})
        self.assertEqual(self.submitted, [])

    def test_lock_is_the_node_shared(self) -> None:
        cfg = self.env.read_config()
        opcode = typed.from_dict(opcodes.validate({"OP_ID": "OP_NODE_MIGRATE", "node_name": N2}))
        lu = ne.LUNodeMigrate(opcode, None, cfg)
        lu.expand_names()
        self.assertEqual(lu.needed_locks, {"node": [self.uuid(N2)]})
        self.assertTrue(lu.share_locks["node"])


def evacuate(node: str, mode: str = "all", **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_NODE_EVACUATE", "node_name": node, "mode": mode}, **params)


class NodeEvacuateTests(MoveTestCase):
    def test_to_remote_node(self) -> None:
        result = self.ok(evacuate(N2, remote_node=N4))
        self.assertEqual(result, {"jobs": [[True, 1000], [True, 1001], [True, 1002]]})
        ops = {op["instance_name"]: op for (op,) in self.submitted[0]}
        self.assertEqual(ops[DOWN], {**ops[DOWN], "OP_ID": "OP_INSTANCE_FAILOVER", "target_node": N4})
        self.assertNotIn("allow_failover", ops[DOWN])
        for name in (SHARED, NODISK):
            self.assertEqual(ops[name]["OP_ID"], "OP_INSTANCE_MIGRATE")
            self.assertEqual(ops[name]["target_node"], N4)
            self.assertIs(ops[name]["allow_failover"], True)

    def test_allocator_spreads_the_instances(self) -> None:
        self.rpc.free = {MASTER: 1500, N3: 1200, N4: 600}
        self.ok(evacuate(N2, "primary-only"))
        targets = {op["instance_name"]: op["target_node"] for (op,) in self.submitted[0]}
        # biggest running first: SHARED (1024) to the master, NODISK (512) to node3,
        # then the stopped one where most memory is left (node3: 688)
        self.assertEqual(targets, {SHARED: MASTER, NODISK: N3, DOWN: N3})

    def test_allocator_without_room(self) -> None:
        self.rpc.free = {MASTER: 600, N3: 600, N4: 600}
        message = self.error(evacuate(N2))
        self.assertIn(SHARED, message)
        self.assertNotIn(NODISK, message)
        self.assertEqual(self.submitted, [])

    def test_secondary_only_has_nothing_to_do(self) -> None:
        self.assertEqual(self.ok(evacuate(N2, "secondary-only")), {"jobs": []})
        self.assertEqual(self.submitted, [])

    def test_local_disks_refused_with_their_names(self) -> None:
        cfg = _instance(_instance(cluster(), LOCAL, N2, "file"), "local2.example.test", N2, "file", state="down")
        self.env = Env(cfg)
        message = self.error(evacuate(N2, remote_node=N3))
        self.assertIn("%s (disk template file)" % LOCAL, message)
        self.assertIn("local2.example.test", message)
        self.assertNotIn(SHARED, message)
        self.assertEqual(self.submitted, [])

    def test_offline_remote_refused(self) -> None:
        self.env = Env(change_node(cluster(), N4, offline=True))
        self.assertIn("offline", self.error(evacuate(N2, remote_node=N4)))
        self.assertIn("itself", self.error(evacuate(N2, remote_node=N2)))
        self.assertIn("not both", self.error(evacuate(N2, remote_node=N3, iallocator="hail")))

    def test_locks(self) -> None:
        cfg = self.env.read_config()
        lu = ne.LUNodeEvacuate(typed.from_dict(opcodes.validate(evacuate(N2, remote_node=N3))), None, cfg)
        lu.expand_names()
        self.assertEqual(lu.needed_locks["instance"], sorted([SHARED, NODISK, DOWN]))
        self.assertEqual(lu.needed_locks["node"], [self.uuid(N2), self.uuid(N3)])
        self.assertEqual(lu.needed_locks["nodegroup"], [cfg.nodes[self.uuid(N2)].group])
        self.assertTrue(all(lu.share_locks[level] for level in ("instance", "nodegroup", "node")))
        lu = ne.LUNodeEvacuate(typed.from_dict(opcodes.validate(evacuate(N2))), None, cfg)
        lu.expand_names()
        self.assertIs(lu.needed_locks["node"], im.ALL_SET)


#: a scripted allocator: relocates to node4, evacuates everything to node4
#: but fails "down1"; keeps its input next to itself
SCRIPTED = """
import json, shutil, sys
shutil.copy(sys.argv[1], sys.argv[0] + ".input")
request = json.load(open(sys.argv[1]))["request"]
if request["type"] == "relocate":
    result = ["%(n4)s"]
else:
    moved = [[i, "default", ["%(n4)s"]] for i in request["instances"] if i != "%(down)s"]
    result = [moved, [[i, "no room"] for i in request["instances"] if i == "%(down)s"], []]
print(json.dumps({"success": True, "info": "", "result": result}))
""" % {"n4": N4, "down": DOWN}


class ExternalAllocatorTests(MoveTestCase):
    """Failover, migration and evacuation with an external allocator under the node root."""

    def setUp(self) -> None:
        super().setUp()
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        directory = os.path.join(self.root, "usr/lib/ganeti/iallocators")
        os.makedirs(directory)
        self.script = os.path.join(directory, "scripted")
        with open(self.script, "w") as handle:
            handle.write("#!%s\n%s" % (sys.executable, SCRIPTED))
        os.chmod(self.script, stat.S_IRWXU)

    def execute_options(self) -> dict[str, Any]:
        return {"submit_jobs": self.submit, "paths": Paths(self.root)}

    def request(self) -> dict[str, Any]:
        with open(self.script + ".input") as handle:
            return json.load(handle)["request"]

    def test_failover_relocates_where_the_allocator_says(self) -> None:
        self.rpc.free = {MASTER: 8000, N3: 8000, N4: 600}
        self.ok(failover(SHARED, iallocator="scripted"))
        self.assertEqual(self.primary(SHARED), N4)
        self.assertEqual(self.request(), {"type": "relocate", "name": SHARED, "disk_space_total": 1024,
                                          "required_nodes": 1, "relocate_from": [N2]})
        self.assertIn("Selected node %s for instance %s (allocator scripted)" % (N4, SHARED), "\n".join(self.log))

    def test_hail_missing_is_refused(self) -> None:
        message = self.error(migrate(SHARED, iallocator="hail"), code=errors.ECODE_NOENT)
        self.assertIn("Can't find allocator 'hail'", message)
        self.assertEqual(self.primary(SHARED), N2)
        message = self.error(evacuate(N2, iallocator="hail"), code=errors.ECODE_NOENT)
        self.assertEqual(self.submitted, [])

    def test_evacuation_asks_a_node_evacuate_request(self) -> None:
        message = self.error(evacuate(N2, "primary-only", iallocator="scripted"), code=errors.ECODE_NORES)
        self.assertIn("Unable to evacuate instances %s (no room)" % DOWN, message)
        self.assertEqual(self.submitted, [])
        self.assertEqual(self.request(), {"type": "node-evacuate", "instances": sorted([DOWN, NODISK, SHARED]),
                                          "evac_mode": "primary-only"})
        bare = grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=3)
        self.env = Env(_instance(_instance(bare, "a.example.test", N2, "sharedfile"),
                                 "b.example.test", N2, "diskless", state="down"))
        self.ok(evacuate(N2, "all", iallocator="scripted"))
        targets = {op["instance_name"]: (op["OP_ID"], op["target_node"]) for (op,) in self.submitted[0]}
        self.assertEqual(targets, {"a.example.test": ("OP_INSTANCE_MIGRATE", N4),
                                   "b.example.test": ("OP_INSTANCE_FAILOVER", N4)})


class FollowUpTests(SynchronousTestCase):
    def test_prepare_inherits_from_the_parent(self) -> None:
        parent = {"OP_ID": "OP_NODE_EVACUATE", "priority": -10, "debug_level": 2, "reason": [["a", "b", 1]]}
        jobs = followup.prepare(parent, [[{"OP_ID": "OP_TEST_DELAY", "priority": 10, "comment": "mine"}]], 5)
        (op,) = jobs[0]
        self.assertEqual(op["priority"], 10)
        self.assertEqual(op["debug_level"], 2)
        self.assertEqual(op["comment"], "mine")
        self.assertEqual(op["reason"], [["a", "b", 1]])
        (op,) = followup.prepare(parent, [[{"OP_ID": "OP_TEST_DELAY"}]], 5)[0]
        self.assertEqual((op["priority"], op["comment"]), (-10, "Submitted by job 5 (OP_NODE_EVACUATE)"))

    def test_no_queue(self) -> None:
        d = ensureDeferred(followup.submit(None, {}, followup.ResultWithJobs([[{"OP_ID": "OP_TEST_DELAY"}]]), 1))
        self.failureResultOf(d, errors.OpExecError)
        d = ensureDeferred(followup.submit(None, {}, followup.ResultWithJobs([], {"x": 1}), 1))
        self.assertEqual(self.successResultOf(d), {"x": 1, "jobs": []})

    def test_refused_submission(self) -> None:
        async def refuse(jobs: Any) -> Any:
            raise errors.JobQueueDrainError("Queue drained")

        d = ensureDeferred(followup.submit(refuse, {}, followup.ResultWithJobs([[{"OP_ID": "OP_TEST_DELAY"}]]), 1))
        self.assertIn("Queue drained", str(self.failureResultOf(d, errors.OpExecError).value))

    def test_plan_running_first_and_spread(self) -> None:
        cfg = cluster()
        by_name = {i.name: i for i in cfg.instances.values()}
        small = attrs.evolve(by_name[NODISK], name="small.example.test", uuid="small")
        states = [allocator.NodeState("x", "n1", free_memory=600), allocator.NodeState("y", "n2", free_memory=500)]
        wanted = [(by_name[DOWN], 256, False), (small, 100, True), (by_name[NODISK], 512, True),
                  (by_name[SHARED], 1024, True)]
        placed, homeless = ne.plan_evacuation(cfg, wanted, states)
        self.assertEqual(homeless, [by_name[SHARED]])
        # NODISK (512) where most is left after it (n1: 88), small then n2 (400),
        # the stopped one where most is left (n2: 400)
        self.assertEqual(placed, {by_name[NODISK].uuid: "x", "small": "y", by_name[DOWN].uuid: "y"})
