"""Tests for instance creation (L{ganeti.cmdlib.instance}): on a node or placed by an
allocator (built-in or external), the clean-up of a failed creation, and many creations
at once with opportunistic locking.

The LUs run as in L{tests.unit.test_cmdlib_instance}: through the processor on an
in-memory WConfD, node RPC being L{FakeNodes}.
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

from ganeti import errors
from ganeti.cmdlib import instance_params as params
from ganeti.jobs import model
from ganeti.paths import Paths
from tests.unit.instance_fakes import MASTER, N2, N3, N4, FakeNodes, change_node, cluster
from tests.unit.test_cmdlib_instance import WEB, InstanceTestCase, _owner, create
from tests.unit.test_processor import Env

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
        self.assertEqual(self.rpc.procedures(), ["os_diagnose", "os_validate", "node_info", "blockdev_create",
                                                 "instance_os_add",
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
            (create(mode="import"), "No export '%s' found on any node" % WEB, errors.ECODE_NOENT),
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

    def test_import_defaults_to_the_export_named_after_the_instance(self) -> None:
        """Issue 26: as Ganeti's, an import without C{src_path} (Ganeti's
        C{gnt-backup import} without C{--src-dir}) reads the export named
        after the instance, looked for on every online node, or on
        C{src_node} only."""
        self.assertIn("No export '%s' found on any node" % WEB, self.error(create(mode="import"),
                                                                          code=errors.ECODE_NOENT))
        self.assertEqual({n for n, _a in self.rpc.calls_of("export_list")},
                         {n.name for n in self.cfg().nodes.values()})
        self.rpc.exports = {N3: {WEB: "[export]\nversion = 0\n"}}  # no [instance]: refused once read
        self.assertIn("Export %s is not usable" % WEB, self.error(create(mode="import"), code=errors.ECODE_INVAL))
        self.assertEqual(self.rpc.calls_of("export_info"), [(N3, [WEB])])
        self.rpc.calls.clear()
        self.assertIn("No export '%s' found on node %s" % (WEB, N2),
                      self.error(create(mode="import", src_node=N2), code=errors.ECODE_NOENT))
        self.assertEqual([n for n, _a in self.rpc.calls_of("export_list")], [N2])
        self.assertEqual((self.rpc.calls_of("export_info"), self.instance()), ([], None))

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
