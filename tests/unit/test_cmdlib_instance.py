"""Tests for the instance LUs: creation and removal (L{ganeti.cmdlib.instance}),
the operations (L{ganeti.cmdlib.instance_ops}), set-params and query-data.

The LUs run through the processor on an in-memory WConfD (the L{Env} of the
processor tests); node RPC is L{FakeNodes}, a model of the nodes that
records every call.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import stat
import sys
import tempfile
from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import instance_params as params
from ganeti.jobs import model
from ganeti.objects import ConfigData, Instance
from ganeti.paths import Paths
from tests.unit.instance_fakes import MASTER, N2, N3, N4, FakeNodes, change_node, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

WEB = "web1.example.test"


def create(name: str = WEB, **extra: Any) -> dict[str, Any]:
    op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": "file",
          "disks": [{"size": 1024}], "nics": [{}], "os_type": "noop"}
    op.update(extra)
    return op


def op(op_id: str, name: str = WEB, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_" + op_id, "instance_name": name}, **extra)


class InstanceTestCase(LUTestCase):
    config: ConfigData | None = None

    def setUp(self) -> None:
        self.env = Env(self.config if self.config is not None else cluster())
        self.rpc = FakeNodes()
        self.next_id = 100

    def cfg(self) -> ConfigData:
        return self.env.read_config()

    def instance(self, name: str = WEB) -> Instance | None:
        return self.cfg().find_instance(name)

    def node_of(self, name: str = WEB) -> str:
        cfg = self.cfg()
        inst = cfg.find_instance(name)
        assert inst is not None
        return cfg.nodes[inst.primary_node].name

    def disks(self, name: str = WEB) -> list[Any]:
        cfg = self.cfg()
        inst = cfg.find_instance(name)
        assert inst is not None
        return [cfg.disks[d] for d in inst.disks]

    def lock_names(self) -> set[str]:
        return set(self.env.service.locks._known)


# --- creation ---------------------------------------------------------------------------


class CreateTests(InstanceTestCase):
    def test_on_an_explicit_node(self) -> None:
        self.assertEqual(self.ok(create(pnode="node2", beparams={"memory": 512}, tags=["web"])), [N2])
        inst = self.instance()
        assert inst is not None
        self.assertEqual((inst.admin_state, inst.os, inst.hypervisor, inst.disk_template),
                         ("up", "noop", "fake", "file"))
        self.assertEqual(inst.beparams, {"maxmem": 512, "minmem": 512})
        self.assertEqual(inst.tags, ["web"])
        (nic,) = inst.nics
        self.assertTrue(nic.mac.startswith("aa:00:00:"), nic.mac)
        self.assertTrue(params.valid_mac(nic.mac))
        (disk,) = self.disks()
        self.assertEqual(disk.logical_id, ["loop", "/srv/ganeti/file-storage/%s/disk0" % WEB])
        self.assertEqual((disk.size, disk.mode, disk.iv_name, disk.dev_type), (1024, "rw", "disk/0", "file"))
        self.assertEqual(self.rpc.procedures(), ["os_diagnose", "node_info", "blockdev_create", "instance_os_add",
                                                 "instance_start"])
        self.assertEqual({n for n, _p in [(c[1], c[0]) for c in self.rpc.calls]}, {N2})
        (_node, args), = self.rpc.calls_of("blockdev_create")
        self.assertEqual(args[1:], [1024, WEB, True, "originstname+%s" % WEB, False])
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertIn("instance/%s" % WEB, self.lock_names())

    def test_dry_run_answers_the_node_uuids_and_creates_nothing(self) -> None:
        node = self.cfg().find_node(N2)
        assert node is not None
        self.assertEqual(self.ok(create(pnode="node2", dry_run=True)), [node.uuid])
        self.assertIsNone(self.instance())
        self.assertEqual(self.rpc.procedures(), [])

    def test_no_install_no_start(self) -> None:
        self.ok(create(pnode=N3, no_install=True, start=False, os_type=None))
        self.assertEqual(self.rpc.procedures(), ["blockdev_create"])
        self.assertEqual(self.instance().admin_state, "down")

    def test_diskless_and_sharedfile(self) -> None:
        self.ok(create("d.example.test", pnode=N2, disk_template="diskless", disks=[]))
        self.assertNotIn("blockdev_create", self.rpc.procedures())
        self.assertEqual(self.disks("d.example.test"), [])
        self.ok(create("s.example.test", pnode=N3, disk_template="sharedfile",
                       disks=[{"size": "2G", "mode": "ro", "name": "data"}, {"size": 100}]))
        first, second = self.disks("s.example.test")
        self.assertEqual(first.logical_id, ["loop", "/srv/ganeti/shared-file-storage/s.example.test/disk0"])
        self.assertEqual((first.size, first.mode, first.name, first.dev_type), (2048, "ro", "data", "sharedfile"))
        self.assertEqual((second.iv_name, second.logical_id[1][-5:]), ("disk/1", "disk1"))

    def test_allocator_picks_the_node_with_most_free_memory(self) -> None:
        self.rpc.memory = {MASTER: 1024, N2: 8192, N3: 4096, N4: 2048}
        self.assertEqual(self.ok(create(iallocator="builtin")), [N2])
        self.assertIn(" - INFO: Selected node %s for instance %s (allocator builtin)" % (N2, WEB), self.log)
        # node2 has 8192-128 left, node3 4096: the next goes to node2 again
        self.assertEqual(self.ok(create("web2.example.test")), [N2])
        self.rpc.memory[N2] = 256
        self.assertEqual(self.ok(create("web3.example.test")), [N3])

    def test_hail_that_is_not_installed_is_refused_not_replaced(self) -> None:
        looked: list[str] = []
        isfile = os.path.isfile
        self.patch(os.path, "isfile", lambda path: looked.append(str(path)) or isfile(path))
        message = self.error(create(iallocator="hail"), code=errors.ECODE_NOENT)
        self.assertIn("Can't find allocator 'hail'", message)
        self.assertEqual([p for p in looked if "iallocators" in p], [], "hermetic: no host search path")
        self.assertIsNone(self.instance())
        self.assertNotIn("blockdev_create", self.rpc.procedures())

    def test_allocator_finds_no_room(self) -> None:
        self.rpc.memory = {MASTER: 100, N2: 100, N3: 100, N4: 100}
        message = self.error(create(beparams={"maxmem": 512, "minmem": 512}), code=errors.ECODE_NORES)
        self.assertIn("no node has the resources", message)
        self.assertIn("not enough memory (100 MiB free, 512 MiB needed)", message)
        self.assertIsNone(self.instance())

    def test_not_enough_memory_on_the_node(self) -> None:
        self.rpc.memory = {N2: 256}
        message = self.error(create(pnode=N2, beparams={"memory": 512}), code=errors.ECODE_NORES)
        self.assertIn("Not enough memory on node %s" % N2, message)
        self.assertNotIn("blockdev_create", self.rpc.procedures())
        self.ok(create(pnode=N2, beparams={"memory": 512}, start=False))

    def test_refusals(self) -> None:
        cases = [
            (create(pnode="nope"), "Node 'nope' not known", errors.ECODE_NOENT),
            (create(disk_template="plain"), "Disk template 'plain' is not supported", errors.ECODE_INVAL),
            (create(disk_template="drbd"), "not supported", errors.ECODE_INVAL),
            (create(mode="remote-import"), "A remote import needs source_handshake", errors.ECODE_INVAL),
            (create(mode="import"), "An import needs the export's name or path (src_path)", errors.ECODE_INVAL),
            (create(pnode=N2, iallocator="hail"), "either a primary node or an allocator", errors.ECODE_INVAL),
            (create(disk_template="diskless"), "takes no disks", errors.ECODE_INVAL),
            (create(disks=[]), "needs at least one disk", errors.ECODE_INVAL),
            (create(disks=[{"mode": "rw"}]), "missing size", errors.ECODE_INVAL),
            (create(disks=[{"size": 1, "adopt": "lv"}]), "disk adoption", errors.ECODE_INVAL),
            (create(nics=[{"mac": "zz:00"}]), "invalid MAC address", errors.ECODE_INVAL),
            (create(nics=[{"mac": "01:00:00:00:00:01"}]), "multicast", errors.ECODE_INVAL),
            (create(nics=[{"mode": "routed"}]), "routed mode needs an IP", errors.ECODE_INVAL),
            (create(nics=[{"ip": "300.1.1.1"}]), "invalid IP address", errors.ECODE_INVAL),
            (create(beparams={"colour": "red"}), "Unknown backend parameter 'colour'", errors.ECODE_INVAL),
            (create(beparams={"vcpus": "many"}), "Backend parameter 'vcpus' must be an integer, got 'many'",
             errors.ECODE_INVAL),
            (create(beparams={"minmem": 512, "maxmem": 256}), "greater than maximum", errors.ECODE_INVAL),
            (create(hvparams={"kernel_path": "/x"}), "Unknown hypervisor parameter 'kernel_path' for hypervisor 'fake'",
             errors.ECODE_INVAL),
            (create(hypervisor="kvm", pnode=N2), "not enabled in the cluster", errors.ECODE_STATE),
            (create(os_type=None), "No guest OS", errors.ECODE_INVAL),
            (create(pnode=N2, os_type="nosuchos"), "not in supported OS list", errors.ECODE_INVAL),
            (create(pnode=N2, os_type="debootstrap"), "must include a variant", errors.ECODE_INVAL),
            (create(pnode=N2, os_type="debootstrap+big"), "Unsupported OS variant", errors.ECODE_INVAL),
            (create(pnode=N2, os_type="debootstrap+default", osparams={"colour": "x"}), "Unknown OS parameter",
             errors.ECODE_INVAL),
            (create(ip_check=True), "without a name check", errors.ECODE_INVAL),
            (create(tags=["bad tag!"]), "Invalid tag", errors.ECODE_INVAL),
            (create(file_storage_dir="../x"), "without '..'", errors.ECODE_INVAL),
        ]
        for opcode, text, code in cases:
            self.assertIn(text, self.error(opcode, code=code), opcode)
        self.assertIsNone(self.instance())
        self.assertNotIn("blockdev_create", self.rpc.procedures())
        self.ok(create(pnode=N2, os_type="debootstrap+minimal", osparams={"dhcp": "yes"}))

    def test_offline_and_drained_nodes_are_refused(self) -> None:
        self.env = Env(change_node(change_node(cluster(), N2, offline=True), N3, drained=True))
        self.assertIn("Can't use offline node: %s" % N2, self.error(create(pnode=N2), code=errors.ECODE_STATE))
        self.assertIn("Can't use drained node %s" % N3, self.error(create(pnode=N3), code=errors.ECODE_STATE))
        # the allocator does not consider them either
        self.rpc.memory = {MASTER: 100, N2: 99999, N3: 99999, N4: 8192}
        self.assertEqual(self.ok(create()), [N4])
        self.assertNotIn(N2, [n for _p, n, _a in self.rpc.calls])

    def test_template_must_be_enabled(self) -> None:
        self.env = Env(cluster(enabled_disk_templates=["file"]))
        self.assertIn("not enabled in the cluster", self.error(create(pnode=N2, disk_template="sharedfile"),
                                                               code=errors.ECODE_STATE))

    def test_name_taken(self) -> None:
        self.ok(create(pnode=N2))
        self.assertIn("already in the cluster", self.error(create(pnode=N3), code=errors.ECODE_EXISTS))

    def test_explicit_macs_must_be_unique(self) -> None:
        self.ok(create(pnode=N2, nics=[{"mac": "AA:00:00:11:22:33"}]))
        self.assertEqual(self.instance().nics[0].mac, "aa:00:00:11:22:33")
        message = self.error(create("web2.example.test", pnode=N2, nics=[{"mac": "aa:00:00:11:22:33"}]),
                             code=errors.ECODE_NOTUNIQUE)
        self.assertIn("already in use", message)
        message = self.error(create("web3.example.test", pnode=N2,
                                    nics=[{"mac": "aa:00:00:11:22:44"}, {"mac": "aa:00:00:11:22:44"}]))
        self.assertIn("two NICs", message)

    def test_nic_parameters(self) -> None:
        self.ok(create(pnode=N2, nics=[{"mac": "generate", "ip": "192.0.2.77", "mode": "routed", "link": "rt1",
                                        "name": "eth0"}, {"bridge": "br7"}, {}]))
        first, second, third = self.instance().nics
        self.assertEqual((first.ip, first.name, first.nicparams), ("192.0.2.77", "eth0",
                                                                   {"mode": "routed", "link": "rt1"}))
        self.assertEqual(second.nicparams, {"link": "br7"})
        self.assertEqual(third.nicparams, {})
        self.assertEqual(len({first.mac, second.mac, third.mac}), 3)


class ExternalAllocatorTests(InstanceTestCase):
    """An external allocator found under the LU's node root (a temp root)."""

    def setUp(self) -> None:
        super().setUp()
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        directory = os.path.join(self.root, "usr/lib/ganeti/iallocators")
        os.makedirs(directory)
        self.seen = os.path.join(self.root, "seen.json")
        # chooses the node with the LEAST free memory (the built-in takes the most),
        # unknown counting as least
        script = os.path.join(directory, "least")
        with open(script, "w") as handle:
            handle.write("#!%s\nimport json, shutil, sys\n"
                         "shutil.copy(sys.argv[1], %r)\n"
                         "json.dump(sys.argv[2:], open(%r, 'w'))\n"
                         "data = json.load(open(sys.argv[1]))\n"
                         "nodes = data['nodes']\n"
                         "print(json.dumps({'success': True, 'info': 'ok',"
                         " 'result': [min(nodes, key=lambda n: nodes[n].get('free_memory', -1))]}))\n"
                         % (sys.executable, self.seen, self.seen + ".args"))
        os.chmod(script, stat.S_IRWXU)

    def execute_options(self) -> dict[str, Any]:
        return {"paths": Paths(self.root)}

    def test_the_allocator_chooses_with_ganetis_input(self) -> None:
        self.rpc.memory = {MASTER: 1024, N2: 8192, N3: 4096, N4: 2048}
        self.assertEqual(self.ok(create(iallocator="least")), [MASTER])
        self.assertIn(" - INFO: Selected node %s for instance %s (allocator least)" % (MASTER, WEB), self.log)
        with open(self.seen) as handle:
            data = json.load(handle)
        request = data["request"]
        self.assertEqual((request["type"], request["name"], request["required_nodes"], request["disk_space_total"]),
                         ("allocate", WEB, 1, 1024))
        self.assertNotIn("restrict-to-nodes", request)
        self.assertEqual(request["disks"][0]["dev_type"], "file")
        group = list(data["nodegroups"].values())[0]
        self.assertEqual(group["ipolicy"]["minmax"], data["ipolicy"]["minmax"], "the group's policy is filled")
        self.assertEqual(data["nodes"][N2]["free_memory"], 8192)

    def test_cluster_default_and_its_parameters(self) -> None:
        self.env = Env(cluster(default_iallocator="least", default_iallocator_params={"alpha": "1", "beta": None}))
        self.rpc.memory = {MASTER: 8192, N2: 1024, N3: 4096, N4: 2048}
        self.assertEqual(self.ok(create()), [N2])
        with open(self.seen + ".args") as handle:
            self.assertEqual(json.load(handle), ["--alpha=1", "--beta"])

    def test_default_allocator_must_be_installed(self) -> None:
        """As Ganeti: OP_CLUSTER_SET_PARAMS refuses a default allocator not installed under the root."""
        message = self.error({"OP_ID": "OP_CLUSTER_SET_PARAMS", "default_iallocator": "hail"},
                             code=errors.ECODE_INVAL)
        self.assertIn("Invalid default iallocator script 'hail' specified", message)
        self.assertEqual(self.cfg().cluster.default_iallocator, "")
        for name in ("least", "builtin", ""):
            self.ok({"OP_ID": "OP_CLUSTER_SET_PARAMS", "default_iallocator": name})
            self.assertEqual(self.cfg().cluster.default_iallocator, name)

    def test_an_answer_naming_an_unusable_node_changes_nothing(self) -> None:
        self.rpc.memory = {MASTER: 1024, N2: 8192, N3: 4096, N4: 2048}
        self.env = Env(change_node(cluster(), MASTER, drained=True))
        message = self.error(create(iallocator="least"), code=errors.ECODE_FAULT)
        self.assertIn("not among the usable ones", message)
        self.assertIsNone(self.instance())


class FailedCreateTests(InstanceTestCase):
    def assert_nothing_left(self) -> None:
        self.assertIsNone(self.instance())
        self.assertEqual(self.rpc.disks.get(N2, set()), set(), "every disk made was removed")
        self.assertEqual(self.rpc.running_on(N2), set())
        self.assertEqual(self.env.locks_of(self.env.wires[-1].client and _owner(self.next_id)), [])

    def test_second_disk_fails(self) -> None:
        calls = []
        original = self.rpc._blockdev_create

        def second_fails(node: str, disk: Any, *args: Any) -> Any:
            calls.append(disk)
            if len(calls) == 2:
                from tests.unit.instance_fakes import _Refused

                raise _Refused("disk full")
            return original(node, disk, *args)

        self.rpc._blockdev_create = second_fails
        message = self.error(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]), kind="OpExecError")
        self.assertIn("Could not create disk disk/1 of instance %s on node %s: disk full" % (WEB, N2), message)
        removed = [a[0]["logical_id"][1] for _n, a in self.rpc.calls_of("blockdev_remove")]
        self.assertEqual(removed, ["/srv/ganeti/file-storage/%s/disk0" % WEB])
        self.assert_nothing_left()

    def test_os_install_fails(self) -> None:
        self.rpc.fail[("instance_os_add", N2)] = "create script failed: exit 1"
        message = self.error(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]), kind="OpExecError")
        self.assertIn("create script failed", message)
        self.assertEqual(len(self.rpc.calls_of("blockdev_remove")), 2)
        self.assertTrue(any("removing what was made" in line for line in self.log), self.log)
        self.assert_nothing_left()
        self.assertEqual(self.cfg().disks, {})

    def test_start_fails_and_the_name_can_be_used_again(self) -> None:
        self.rpc.fail[("instance_start", N2)] = "hypervisor refused"
        self.assertIn("Could not start instance %s on node %s: hypervisor refused" % (WEB, N2),
                      self.error(create(pnode=N2), kind="OpExecError"))
        self.assertIn("instance_shutdown", self.rpc.procedures())
        self.assert_nothing_left()
        del self.rpc.fail[("instance_start", N2)]
        self.assertEqual(self.ok(create(pnode=N2)), [N2])
        self.assertEqual(self.rpc.running_on(N2), {WEB})

    def test_unreachable_node(self) -> None:
        self.rpc.down.add(N2)
        message = self.error(create(pnode=N2), kind="OpExecError")
        self.assertIn("connection refused", message)
        self.assertIsNone(self.instance())


def _owner(ident: int) -> Any:
    from tests.unit.wconfd_helpers import job

    return job(ident)


class ParallelCreateTests(InstanceTestCase):
    """Creations with opportunistic locking, many at once on few nodes."""

    def run_parallel(self, count: int, **extra: Any) -> list[model.QueuedOpCode]:
        runs = []
        for index in range(count):
            opcode = create("p%02d.example.test" % index, opportunistic_locking=True, **extra)
            runs.append(self.env.start(500 + index, [opcode], settle=False, rpc_factory=lambda: self.rpc))
        self.env.settle()
        for _ in range(1000):
            if all(r.done.called for r in runs):
                break
            self.env.advance(0.25)
        self.assertTrue(all(r.done.called for r in runs))
        return [r.ops[0] for r in runs]

    def test_twenty_small_creations_on_three_nodes_all_succeed(self) -> None:
        self.env = Env(cluster(nodes=2))
        results = self.run_parallel(20)
        self.assertEqual([q.status for q in results], [model.SUCCESS] * 20, [q.result for q in results])
        cfg = self.cfg()
        spread = collections.Counter(cfg.nodes[i.primary_node].name for i in cfg.instances.values())
        self.assertEqual(sum(spread.values()), 20)
        self.assertEqual(len(spread), 3, spread)
        self.assertTrue(max(spread.values()) - min(spread.values()) <= 2, spread)
        macs = [i.nics[0].mac for i in cfg.instances.values()]
        self.assertEqual(len(set(macs)), 20)
        self.assertEqual(self.env.service.locks.all_owners(), [])

    def test_those_without_room_fail_with_no_resources(self) -> None:
        self.env = Env(cluster(nodes=2))
        self.rpc = FakeNodes(default_memory=256)  # two instances of 128 MiB per node
        results = self.run_parallel(8)
        statuses = collections.Counter(q.status for q in results)
        self.assertEqual(statuses, {model.SUCCESS: 6, model.ERROR: 2}, [q.result for q in results])
        for qop in results:
            if qop.status == model.ERROR:
                self.assertEqual(qop.result[0], "OpPrereqError")
                self.assertEqual(qop.result[1][1], errors.ECODE_NORES)
                self.assertIn("not enough memory", qop.result[1][0])
        self.assertEqual(len(self.cfg().instances), 6)

    def test_a_creation_waits_for_a_busy_node_with_room(self) -> None:
        """The free node is full: the creation waits for the busy ones."""
        self.env = Env(cluster(nodes=2))
        self.rpc = FakeNodes(memory={MASTER: 100})
        self.rpc.clock = self.env.clock
        cfg = self.cfg()
        busy = sorted(n.name for n in cfg.nodes.values() if n.name != MASTER)
        delay = self.env.start(800, [{"OP_ID": "OP_TEST_DELAY", "duration": 30, "on_nodes": busy,
                                      "on_master": False, "no_locks": False}], rpc_factory=lambda: self.rpc)
        self.assertEqual(delay.ops[0].status, model.RUNNING)
        run = self.env.start(801, [create(opportunistic_locking=True)], rpc_factory=lambda: self.rpc)
        self.env.advance(20)
        self.assertEqual(run.ops[0].status, model.WAITING)
        self.assertNotIn("blockdev_create", self.rpc.procedures())
        self.env.finish(delay)
        self.env.finish(run)
        self.assertEqual(run.ops[0].status, model.SUCCESS, run.ops[0].result)
        self.assertIn(run.ops[0].result[0], busy)

    def test_no_node_with_room_fails_at_once(self) -> None:
        self.rpc = FakeNodes(default_memory=64)
        message = self.error(create(opportunistic_locking=True), code=errors.ECODE_NORES)
        self.assertIn("No node has the resources for instance %s" % WEB, message)
        self.assertNotIn("instance/%s" % WEB, self.lock_names())

    def test_a_creation_keeps_only_its_node_locks(self) -> None:
        run = self.env.start(900, [create(opportunistic_locking=True, start=False)], settle=False,
                             rpc_factory=lambda: self.rpc)
        held: list[Any] = []
        original = self.rpc._blockdev_create

        def spy(node: str, *args: Any) -> Any:
            held.append(self.env.locks_of(run.owner))
            return original(node, *args)

        self.rpc._blockdev_create = spy
        self.env.finish(run)
        self.assertEqual(run.ops[0].status, model.SUCCESS, run.ops[0].result)
        (locks,) = held
        node_locks = [name for name, _mode in locks if name.startswith(("node/", "node-res/"))]
        uuid = self.cfg().find_instance(WEB).primary_node
        self.assertEqual(node_locks, ["node/%s" % uuid, "node-res/%s" % uuid])

    def test_allocations_hold_the_node_allocation_lock_until_placed(self) -> None:
        """An allocating creation holds node-alloc/NAL while it places the
        instance (shared when opportunistic, exclusive otherwise) and lets it
        go once the node is chosen; one on an explicit node never takes it."""
        from ganeti.cmdlib import allocator

        original_place = allocator.place
        for number, (opportunistic, mode) in enumerate(((True, "shared"), (False, "exclusive"))):
            run = self.env.start(910 + number, [create(instance_name="nal%d.example.com" % number,
                                                       opportunistic_locking=opportunistic, start=False)],
                                 settle=False, rpc_factory=lambda: self.rpc)
            at_placement: list[Any] = []
            at_disk: list[Any] = []
            original_disk = self.rpc._blockdev_create

            def place(*args: Any, run: Any = run, seen: list[Any] = at_placement) -> Any:
                seen.append(self.env.locks_of(run.owner))
                return original_place(*args)

            def disk(node: str, *args: Any, run: Any = run, seen: list[Any] = at_disk,
                     original: Any = original_disk) -> Any:
                seen.append(self.env.locks_of(run.owner))
                return original(node, *args)

            self.rpc._blockdev_create = disk
            allocator.place = place
            try:
                self.env.finish(run)
            finally:
                allocator.place = original_place
                self.rpc._blockdev_create = original_disk
            self.assertEqual(run.ops[0].status, model.SUCCESS, run.ops[0].result)
            self.assertIn(("node-alloc/NAL", mode), at_placement[-1])
            self.assertNotIn("node-alloc/NAL", [name for name, _ in at_disk[0]])
        seen: list[Any] = []
        original_disk = self.rpc._blockdev_create
        fixed = self.env.start(920, [create(instance_name="fixed.example.com", pnode=N2, start=False)],
                               settle=False, rpc_factory=lambda: self.rpc)

        def disk_fixed(node: str, *args: Any) -> Any:
            seen.append(self.env.locks_of(fixed.owner))
            return original_disk(node, *args)

        self.rpc._blockdev_create = disk_fixed
        self.env.finish(fixed)
        self.assertEqual(fixed.ops[0].status, model.SUCCESS, fixed.ops[0].result)
        self.assertNotIn("node-alloc/NAL", [name for name, _ in seen[0]])

# --- removal ---------------------------------------------------------------------------


class RemoveTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]))
        self.rpc.calls.clear()

    def test_remove(self) -> None:
        self.assertIsNone(self.ok(op("REMOVE")))
        self.assertEqual(self.rpc.procedures(), ["instance_shutdown", "blockdev_remove", "blockdev_remove"])
        self.assertIsNone(self.instance())
        self.assertEqual(self.cfg().disks, {})
        self.assertEqual(self.rpc.disks[N2], set())
        self.assertNotIn("instance/%s" % WEB, self.lock_names())
        self.assertIn("not known", self.error(op("REMOVE"), code=errors.ECODE_NOENT))

    def test_failures(self) -> None:
        self.rpc.fail[("instance_shutdown", N2)] = "stuck"
        self.assertIn("Could not shutdown instance %s on node %s: stuck" % (WEB, N2),
                      self.error(op("REMOVE"), kind="OpExecError"))
        self.assertIsNotNone(self.instance())
        self.rpc.fail[("blockdev_remove", N2)] = "busy"
        self.ok(op("REMOVE", ignore_failures=True))
        self.assertIsNone(self.instance())
        self.assertTrue(any("WARNING: Could not shutdown" in line for line in self.log), self.log)
        self.assertTrue(any("could not remove disk disk/1" in line for line in self.log), self.log)

    def test_disk_failure_without_ignore_keeps_the_instance(self) -> None:
        self.rpc.fail[("blockdev_remove", N2)] = "busy"
        self.assertIn("Can't remove instance's disks", self.error(op("REMOVE"), kind="OpExecError"))
        self.assertIsNotNone(self.instance())


# --- startup, shutdown, reboot ------------------------------------------------------------


class StateTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, start=False, beparams={"memory": 512}))
        self.rpc.calls.clear()

    def admin(self) -> tuple[str | None, str | None]:
        inst = self.instance()
        assert inst is not None
        return inst.admin_state, inst.admin_state_source

    def test_startup_and_shutdown(self) -> None:
        self.assertIsNone(self.ok(op("STARTUP")))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "node_info", "instance_start"])
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.admin()[0], "up")
        self.ok(op("STARTUP"))
        self.assertIn("Instance %s is already running" % WEB, self.log)
        self.ok(op("SHUTDOWN", timeout=7, admin_state_source="user"))
        self.assertEqual(self.rpc.running_on(N2), set())
        self.assertEqual(self.admin(), ("down", "user"))
        self.assertEqual(self.rpc.calls_of("instance_shutdown")[-1][1][1], 7)

    def test_startup_of_a_powered_off_guest(self) -> None:
        """An instance whose guest powered itself off is stopped, then
        started, without a memory check (it still holds its memory)."""
        self.ok(op("STARTUP"))
        self.rpc.powered_off.add(WEB)
        self.rpc.memory[N2] = 600
        self.rpc.calls.clear()
        self.ok(op("STARTUP"))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "instance_shutdown", "instance_start"])
        self.assertEqual(self.rpc.calls_of("instance_shutdown")[0][1][1], 0)
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.rpc.powered_off, set())
        self.assertNotIn("already running", self.log)

    def test_startup_checks_memory_and_takes_overrides(self) -> None:
        self.rpc.memory[N2] = 256
        self.assertIn("Not enough memory on node %s for starting instance %s: needed 512 MiB, available 256 MiB"
                      % (N2, WEB), self.error(op("STARTUP"), code=errors.ECODE_NORES))
        self.ok(op("STARTUP", beparams={"maxmem": 200}, hvparams={"migration_mode": "non-live"},
                   startup_paused=True))
        (_node, args), = self.rpc.calls_of("instance_start")
        self.assertEqual(args[0]["beparams"]["maxmem"], 200)
        self.assertEqual(args[0]["hvparams"]["migration_mode"], "non-live")
        self.assertTrue(args[1])
        self.assertEqual(self.instance().beparams, {"maxmem": 512, "minmem": 512}, "overrides are not stored")
        self.assertIn("Unknown backend parameter", self.error(op("STARTUP", beparams={"x": 1})))

    def test_no_remember(self) -> None:
        self.ok(op("STARTUP", no_remember=True))
        self.assertEqual(self.admin()[0], "down")
        self.ok(op("STARTUP"))
        self.ok(op("SHUTDOWN", no_remember=True))
        self.assertEqual(self.admin()[0], "up")

    def test_offline_node(self) -> None:
        cfg = self.cfg()
        node = next(n for n in cfg.nodes.values() if n.name == N2)
        self.env.call(self.env.admin.client.lock_config(_owner(1)))
        self.env.call(self.env.admin.client.write_config_and_unlock(
            _owner(1), attrs.evolve(cfg, nodes=dict(cfg.nodes, **{node.uuid: attrs.evolve(node, offline=True)}))))
        self.assertIn("Can't use offline node", self.error(op("STARTUP"), code=errors.ECODE_STATE))
        self.ok(op("STARTUP", ignore_offline_nodes=True))
        self.assertEqual(self.admin()[0], "up")
        self.assertEqual(self.rpc.calls, [])
        self.ok(op("SHUTDOWN", ignore_offline_nodes=True))
        self.assertEqual(self.admin()[0], "down")

    def test_offline_instance(self) -> None:
        self.ok(op("SET_PARAMS", offline=True))
        self.assertEqual(self.admin()[0], "offline")
        self.assertIn("is marked to be offline", self.error(op("STARTUP"), code=errors.ECODE_STATE))
        self.assertIn("is marked to be offline", self.error(op("REBOOT", reboot_type="soft")))
        self.ok(op("SET_PARAMS", offline=False))
        self.assertEqual(self.admin()[0], "down")
        self.ok(op("STARTUP"))
        self.assertIn("is marked to be up, cannot set it offline", self.error(op("SET_PARAMS", offline=True)))

    def test_reboot(self) -> None:
        self.assertIn("is not running, cannot reboot", self.error(op("REBOOT", reboot_type="soft"),
                                                                  code=errors.ECODE_STATE))
        self.ok(op("STARTUP"))
        self.rpc.calls.clear()
        self.ok(op("REBOOT", reboot_type="hard", shutdown_timeout=9))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "instance_reboot"])
        self.assertEqual(self.rpc.calls_of("instance_reboot")[0][1][1:3], ["hard", 9])
        self.rpc.calls.clear()
        self.ok(op("REBOOT", reboot_type="full"))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "instance_shutdown", "instance_start"])
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.admin()[0], "up")

    def test_console(self) -> None:
        self.assertIn("is not running", self.error(op("CONSOLE"), kind="OpExecError"))
        self.ok(op("STARTUP"))
        console = self.ok(op("CONSOLE"))
        self.assertEqual(console, {"instance": WEB, "kind": "msg", "message": "fake console"})
        self.rpc.running.clear()
        self.assertIn("marked to be up, but not running", self.error(op("CONSOLE"), kind="OpExecError"))

    def test_unknown_instance(self) -> None:
        for name in ("STARTUP", "SHUTDOWN", "CONSOLE", "REINSTALL"):
            self.assertIn("not known", self.error(op(name, "nope"), code=errors.ECODE_NOENT))


# --- rename, reinstall ------------------------------------------------------------------


class RenameReinstallTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2))
        self.ok(create("other.example.test", pnode=N3, start=False))
        self.rpc.calls.clear()

    def test_rename(self) -> None:
        new = "a-renamed.example.test"
        self.assertIn("is marked to be up", self.error(op("RENAME", new_name=new), code=errors.ECODE_STATE))
        self.ok(op("SHUTDOWN"))
        self.assertIn("already in the cluster", self.error(op("RENAME", new_name="other.example.test"),
                                                           code=errors.ECODE_NOTUNIQUE))
        disks = self.disks()
        self.assertEqual(self.ok(op("RENAME", new_name=new)), new)
        self.assertIsNone(self.instance())
        self.assertEqual(self.disks(new), disks, "disks keep their paths")
        (_node, args), = self.rpc.calls_of("instance_run_rename")
        self.assertEqual((args[0]["name"], args[1]), (new, WEB))
        self.assertNotIn("instance/%s" % WEB, self.lock_names())
        self.assertIn("instance/%s" % new, self.lock_names())
        # and to a name after the old one in lock order
        self.assertEqual(self.ok(op("RENAME", new, new_name="z.example.test")), "z.example.test")
        # a new instance under the old name gets its own disk directory
        self.ok(create(pnode=N2, start=False))
        self.assertNotEqual(self.disks()[0].logical_id, disks[0].logical_id)

    def test_rename_script_failure_is_a_warning(self) -> None:
        self.ok(op("SHUTDOWN"))
        self.rpc.fail[("instance_run_rename", None)] = "script broke"
        self.ok(op("RENAME", new_name="b.example.test"))
        self.assertTrue(any("Could not run OS rename script" in line for line in self.log), self.log)

    def test_reinstall(self) -> None:
        self.assertIn("is marked to be up", self.error(op("REINSTALL")))
        self.ok(op("SHUTDOWN"))
        self.rpc.start(N2, WEB)  # running behind our back
        self.assertIn("is running", self.error(op("REINSTALL"), code=errors.ECODE_STATE))
        self.rpc.running.clear()
        self.rpc.calls.clear()
        self.ok(op("REINSTALL", os_type="debootstrap+default", osparams={"dhcp": "no"}))
        (_node, args), = self.rpc.calls_of("instance_os_add")
        self.assertEqual(args[1], True)
        self.assertEqual(args[0]["os"], "debootstrap+default")
        self.assertEqual(args[0]["osparams"], {"dhcp": "no"})
        inst = self.instance()
        assert inst is not None
        self.assertEqual((inst.os, inst.osparams), ("debootstrap+default", {}))
        self.rpc.fail[("instance_os_add", None)] = "no space"
        self.assertIn("no space", self.error(op("REINSTALL"), kind="OpExecError"))


# --- set params ------------------------------------------------------------------------


class SetParamsTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, start=False, nics=[{"name": "eth0"}]))
        self.rpc.calls.clear()

    def test_parameters(self) -> None:
        result = self.ok(op("SET_PARAMS", beparams={"memory": 256, "vcpus": 2},
                            hvparams={"migration_mode": "non-live"}, osparams={"x": "1"}))
        self.assertEqual(result, [["be/maxmem", 256], ["be/minmem", 256], ["be/vcpus", 2],
                                  ["hv/migration_mode", "non-live"], ["os/x", "1"]])
        inst = self.instance()
        assert inst is not None
        self.assertEqual(inst.beparams, {"maxmem": 256, "minmem": 256, "vcpus": 2})
        self.assertEqual(inst.hvparams, {"migration_mode": "non-live"})
        result = self.ok(op("SET_PARAMS", beparams={"vcpus": "default"}, hvparams={"migration_mode": "default"}))
        self.assertEqual(result, [["be/vcpus", "default"], ["hv/migration_mode", "default"]])
        self.assertEqual(self.instance().beparams, {"maxmem": 256, "minmem": 256})
        self.assertEqual(self.instance().hvparams, {})

    def test_refusals(self) -> None:
        for opcode, text in [
            (op("SET_PARAMS"), "No changes submitted"),
            (op("SET_PARAMS", disk_template="plain"), "Changing the disk template is not supported"),
            (op("SET_PARAMS", pnode=N3), "Changing the primary node is not supported"),
            (op("SET_PARAMS", beparams={"minmem": 4096}), "greater than maximum"),
            (op("SET_PARAMS", hvparams={"acpi": True}), "Unknown hypervisor parameter 'acpi' for hypervisor 'fake'"),
            (op("SET_PARAMS", disks=[["attach", -1, {}]]), "not supported"),
            (op("SET_PARAMS", disks=[["modify", 0, {"size": 5}]]), "grow the disk"),
            (op("SET_PARAMS", disks=[["remove", 7, {}]]), "Invalid disk index 7"),
            (op("SET_PARAMS", disks=[["remove", 0, {}]]), "Cannot remove the last disk"),
            (op("SET_PARAMS", nics=[["remove", "nosuch", {}]]), "No NIC named 'nosuch'"),
            (op("SET_PARAMS", nics=[["add", {"mac": "bad"}]]), "invalid MAC"),
        ]:
            self.assertIn(text, self.error(opcode), opcode)
        self.assertEqual(self.rpc.calls, [])

    def test_add_and_remove_disks(self) -> None:
        result = self.ok(op("SET_PARAMS", disks=[["add", {"size": 512, "mode": "ro", "name": "logs"}]]))
        self.assertEqual(result, [["disk/1", "add:size=512,mode=ro"]])
        first, second = self.disks()
        self.assertEqual((second.size, second.mode, second.name, second.iv_name), (512, "ro", "logs", "disk/1"))
        self.assertEqual(second.logical_id, ["loop", "/srv/ganeti/file-storage/%s/disk1" % WEB])
        self.assertEqual(self.rpc.procedures(), ["blockdev_create"])
        # the new format, at index 0, then remove by name
        self.ok(op("SET_PARAMS", disks=[["add", 0, {"size": 64}]]))
        disks = self.disks()
        self.assertEqual([d.size for d in disks], [64, 1024, 512])
        self.assertEqual([d.iv_name for d in disks], ["disk/0", "disk/1", "disk/2"])
        self.assertEqual(disks[0].logical_id[1][-5:], "disk2", "a free file name")
        self.rpc.calls.clear()
        self.assertEqual(self.ok(op("SET_PARAMS", disks=[["remove", "logs", {}]])), [["disk/2", "remove"]])
        self.assertEqual([d.size for d in self.disks()], [64, 1024])
        self.assertNotIn(second.uuid, self.cfg().disks)
        self.assertEqual(self.rpc.procedures(), ["blockdev_remove"])
        self.assertEqual(self.ok(op("SET_PARAMS", disks=[["modify", 1, {"mode": "ro"}]])), [["disk.mode/1", "ro"]])
        self.assertEqual(self.disks()[1].mode, "ro")

    def test_disk_removal_needs_a_stopped_instance(self) -> None:
        self.ok(op("SET_PARAMS", disks=[["add", {"size": 1}]]))
        self.ok(op("STARTUP"))
        self.assertIn("stop it before removing disks", self.error(op("SET_PARAMS", disks=[["remove", {}]])))

    def test_failed_disk_creation_changes_nothing(self) -> None:
        self.rpc.fail[("blockdev_create", N2)] = "no space"
        self.assertIn("no space", self.error(op("SET_PARAMS", disks=[["add", {"size": 1}]]), kind="OpExecError"))
        self.assertEqual(len(self.disks()), 1)

    def test_nics(self) -> None:
        result = self.ok(op("SET_PARAMS", nics=[["add", {"ip": "192.0.2.9", "link": "br1"}]]))
        self.assertEqual(result[0][0], "nic.1")
        nics = self.instance().nics
        self.assertEqual((nics[1].ip, nics[1].nicparams), ("192.0.2.9", {"link": "br1"}))
        self.assertNotEqual(nics[0].mac, nics[1].mac)
        result = self.ok(op("SET_PARAMS", nics=[["modify", "eth0", {"mac": "aa:00:00:01:02:03", "vlan": "5"}]]))
        self.assertEqual(result, [["nic.mac/0", "aa:00:00:01:02:03"], ["nic.vlan/0", "5"]])
        self.ok(op("SET_PARAMS", nics=[[1, {"mode": "routed"}]]))
        self.assertEqual(self.instance().nics[1].nicparams, {"link": "br1", "mode": "routed"})
        self.assertEqual(self.ok(op("SET_PARAMS", nics=[["remove", {}]])), [["nic.1", "remove"]])
        self.assertEqual(len(self.instance().nics), 1)
        self.ok(create("other.example.test", pnode=N3, start=False))
        self.assertIn("already in use", self.error(op("SET_PARAMS", "other.example.test",
                                                      nics=[[0, {"mac": "aa:00:00:01:02:03"}]]),
                                                   code=errors.ECODE_NOTUNIQUE))


# --- query data ---------------------------------------------------------------------------


class RuntimeMemoryTests(InstanceTestCase):
    """runtime_mem: ballooning a running instance, within minmem..maxmem."""

    def setUp(self) -> None:
        super().setUp()
        self.rpc.memory[N2] = 1024
        self.ok(create(pnode=N2, beparams={"minmem": 128, "maxmem": 512}))
        self.rpc.calls.clear()

    def test_balloon_down_and_up(self) -> None:
        serial = self.instance().serial_no
        self.assertEqual(self.ok(op("SET_PARAMS", runtime_mem=256)), [["runtime_memory", 256]])
        self.assertEqual(self.rpc.running[N2][WEB], 256)
        ((node, args),) = self.rpc.calls_of("instance_balloon_memory")
        self.assertEqual((node, args[0]["name"], args[1]), (N2, WEB, 256))
        self.assertEqual(self.ok(op("SET_PARAMS", runtime_mem=512)), [["runtime_memory", 512]])
        self.assertEqual(self.rpc.running[N2][WEB], 512)
        inst = self.instance()
        assert inst is not None
        self.assertEqual(inst.beparams, {"minmem": 128, "maxmem": 512})  # the configuration keeps its memory
        self.assertGreaterEqual(inst.serial_no, serial)

    def test_outside_minmem_maxmem_needs_force(self) -> None:
        for memory in (64, 1024):
            message = self.error(op("SET_PARAMS", runtime_mem=memory), code=errors.ECODE_INVAL)
            self.assertEqual(message, "Instance %s must have memory between 128 and 512 MB of memory unless --force"
                                      " is given" % WEB)
        self.assertEqual(self.rpc.calls_of("instance_balloon_memory"), [])
        self.ok(op("SET_PARAMS", runtime_mem=64, force=True))
        self.assertEqual(self.rpc.running[N2][WEB], 64)

    def test_growing_needs_free_memory_on_the_node(self) -> None:
        self.rpc.start(N2, "other", 700)
        self.ok(op("SET_PARAMS", runtime_mem=128))  # shrinking needs nothing: 1024 - 128 - 700 = 196 MiB free
        message = self.error(op("SET_PARAMS", runtime_mem=512))  # 384 more
        self.assertIn("ballooning memory for instance %s" % WEB, message)
        self.assertEqual(self.rpc.running[N2][WEB], 128)
        self.ok(op("SET_PARAMS", runtime_mem=320))  # 192 more
        self.assertEqual(self.rpc.running[N2][WEB], 320)

    def test_checked_before_other_changes(self) -> None:
        self.error(op("SET_PARAMS", runtime_mem=4096, beparams={"vcpus": 4}))
        self.assertNotIn("vcpus", self.instance().beparams)
        self.ok(op("SHUTDOWN"))
        self.assertIn("is not running", self.error(op("SET_PARAMS", runtime_mem=256), code=errors.ECODE_STATE))


class QueryDataTests(InstanceTestCase):
    def test_data(self) -> None:
        self.ok(create(pnode=N2, nics=[{"name": "eth0", "ip": "192.0.2.5"}], tags=["a"]))
        self.ok(create("other.example.test", pnode=N3, start=False, disk_template="diskless", disks=[]))
        result = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["web1"]})
        (data,) = result.values()
        inst = self.instance()
        assert inst is not None
        self.assertEqual((data["name"], data["config_state"], data["run_state"]), (WEB, "up", "up"))
        self.assertEqual((data["pnode"], data["snodes"], data["os"], data["hypervisor"]), (N2, [], "noop", "fake"))
        self.assertEqual(data["pnode_group_name"], "default")
        self.assertEqual(data["nics"], [["eth0", inst.nics[0].uuid, "192.0.2.5", inst.nics[0].mac, "bridged", "br0",
                                         "", None, None]])
        (disk,) = data["disks"]
        self.assertEqual((disk["iv_name"], disk["size"], disk["mode"], disk["dev_type"], disk["pstatus"]),
                         ("disk/0", 1024, "rw", "file", None))
        self.assertEqual(data["be_actual"]["maxmem"], 128)
        self.assertEqual(data["be_instance"], {})
        self.assertEqual(data["hv_actual"], {"migration_mode": "live"})
        self.assertEqual((data["uuid"], data["serial_no"], data["tags"]), (inst.uuid, inst.serial_no, ["a"]))
        everything = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "static": True})
        self.assertEqual(sorted(everything), ["other.example.test", WEB])
        self.assertIsNone(everything[WEB]["run_state"])
        locked = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "use_locking": True})
        self.assertEqual(locked["other.example.test"]["run_state"], "down")
        self.assertIn("not known", self.error({"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["nope"]}))
