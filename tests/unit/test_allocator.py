"""Tests for L{ganeti.cmdlib.allocator}: placement, the iallocator protocol,
finding and running an external allocator."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.cmdlib import allocator
from ganeti.cmdlib.allocator import NodeState, Request

from tests.unit.instance_fakes import MASTER, N2, N3, cluster


def request(memory: int = 512, disks: tuple[int, ...] = (1024,), template: str = "file") -> Request:
    return Request(name="new.example.test", memory=memory, vcpus=1, disk_template=template,
                   disks=[{"size": s, "mode": "rw"} for s in disks])


class PlaceTests(SynchronousTestCase):
    def test_most_free_memory_after_placement_wins(self) -> None:
        nodes = [NodeState("a", "a.test", free_memory=2048, free_disk=5000),
                 NodeState("b", "b.test", free_memory=4096, free_disk=5000),
                 NodeState("c", "c.test", free_memory=3000, free_disk=5000)]
        self.assertEqual(allocator.place(request(), nodes).node.uuid, "b")  # type: ignore[union-attr]

    def test_ties_go_to_fewer_instances_then_name(self) -> None:
        nodes = [NodeState("a", "node10", free_memory=2048, instances=3),
                 NodeState("b", "node2", free_memory=2048, instances=1),
                 NodeState("c", "node9", free_memory=2048, instances=1)]
        self.assertEqual(allocator.place(request(), nodes).node.name, "node2")  # type: ignore[union-attr]

    def test_nodes_without_room_or_data_are_rejected_with_reasons(self) -> None:
        nodes = [NodeState("a", "a.test", free_memory=256, free_disk=5000),
                 NodeState("b", "b.test", free_memory=4096, free_disk=100),
                 NodeState("c", "c.test", error="node unreachable"),
                 NodeState("d", "d.test")]
        placement = allocator.place(request(), nodes)
        self.assertIsNone(placement.node)
        self.assertIn("not enough memory (256 MiB free, 512 MiB needed)", placement.rejected["a.test"])
        self.assertIn("not enough disk space (100 MiB free, 1024 MiB needed)", placement.rejected["b.test"])
        self.assertIn("node unreachable", placement.rejected["c.test"])
        self.assertIn("free memory unknown", placement.explain())

    def test_diskless_needs_no_disk_and_unknown_disk_is_accepted(self) -> None:
        small = [NodeState("a", "a.test", free_memory=1024, free_disk=0)]
        self.assertIsNotNone(allocator.place(request(template="diskless", disks=()), small).node)
        self.assertIsNone(allocator.place(request(), small).node)
        self.assertIsNotNone(allocator.place(request(), [NodeState("a", "a.test", free_memory=1024)]).node)

    def test_disk_space(self) -> None:
        self.assertEqual(request(disks=(100, 200)).disk_space, 300)
        self.assertEqual(request(template="diskless", disks=(100,)).disk_space, 0)


class ProtocolTests(SynchronousTestCase):
    def test_input_has_the_cluster_the_nodes_and_the_request(self) -> None:
        cfg = cluster(nodes=2)
        uuids = {n.name: u for u, n in cfg.nodes.items()}
        states = [NodeState(uuids[N2], N2, free_memory=1000, total_memory=2000, free_disk=50, total_disk=100)]
        data = allocator.build_input(cfg, request(), states)
        self.assertEqual(data["version"], 2)
        self.assertEqual(data["cluster_name"], "cluster.example.test")
        self.assertEqual(data["request"]["type"], "allocate")
        self.assertEqual(data["request"]["memory"], 512)
        self.assertEqual(data["request"]["disk_space_total"], 1024)
        self.assertEqual(data["request"]["required_nodes"], 1)
        self.assertEqual(set(data["nodes"]), {MASTER, N2, N3})
        self.assertFalse(data["nodes"][N2]["offline"])
        self.assertEqual(data["nodes"][N2]["free_memory"], 1000)
        self.assertEqual(data["nodes"][N2]["total_disk"], 100)
        self.assertTrue(data["nodes"][N3]["offline"], "no figures: shown offline")
        self.assertNotIn("free_memory", data["nodes"][N3])
        self.assertEqual(data["instances"], {})
        self.assertEqual(list(data["nodegroups"].values())[0]["name"], "default")
        serializer.dumps(data)

    def test_output(self) -> None:
        self.assertEqual(allocator.parse_output("x", b'{"success": true, "info": "", "result": ["n1"]}'), ["n1"])
        self.assertEqual(allocator.parse_output("x", '{"success": true, "nodes": ["n2"]}'), ["n2"])
        e = self.assertRaises(errors.OpPrereqError, allocator.parse_output, "x",
                              b'{"success": false, "info": "no room", "result": []}')
        self.assertIn("no room", str(e))
        self.assertEqual(e.args[1], errors.ECODE_NORES)
        for bad in (b"nope", b"[]", b'{"success": true, "result": [1]}', b'{"success": true, "result": []}'):
            e = self.assertRaises(errors.OpPrereqError, allocator.parse_output, "x", bad)
            self.assertEqual(e.args[1], errors.ECODE_FAULT)


class ExternalTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.root = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.root))
        self.dir = os.path.join(self.root, "usr/lib/ganeti/iallocators")
        os.makedirs(self.dir)

    def script(self, name: str, body: str) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "w") as handle:
            handle.write("#!%s\n%s" % (sys.executable, body))
        os.chmod(path, stat.S_IRWXU)
        return path

    def test_resolve(self) -> None:
        self.assertEqual(allocator.resolve(None, None, self.root), ("builtin", None))
        self.assertEqual(allocator.resolve(None, "", self.root), ("builtin", None))
        self.assertEqual(allocator.resolve("builtin", "other", self.root), ("builtin", None))
        path = self.script("mine", "")
        self.assertEqual(allocator.resolve(None, "mine", self.root), ("mine", path))
        self.assertEqual(allocator.resolve("mine", None, self.root), ("mine", path))
        e = self.assertRaises(errors.OpPrereqError, allocator.resolve, "hail", None, self.root)
        self.assertIn("Can't find allocator 'hail' (searched %s/usr/local/lib/ganeti/iallocators, %s" % (self.root, self.root),
                      str(e))
        self.assertEqual(e.args[1], errors.ECODE_NOENT)
        hail = self.script("hail", "")
        self.assertEqual(allocator.resolve(None, "hail", self.root), ("hail", hail))
        e = self.assertRaises(errors.OpPrereqError, allocator.resolve, "no-such-allocator", None, self.root)
        self.assertIn("Can't find allocator 'no-such-allocator'", str(e))

    def test_run_external_reads_the_input_file(self) -> None:
        path = self.script("echoer", (
            "import json, sys\n"
            "data = json.load(open(sys.argv[1]))\n"
            "nodes = sorted(n for n, v in data['nodes'].items() if not v['offline'])\n"
            "print(json.dumps({'success': True, 'info': data['request']['name'], 'result': nodes[-1:]}))\n"))
        d = allocator.run_external("echoer", path, {"nodes": {"a": {"offline": False}, "b": {"offline": True}},
                                                    "request": {"name": "x"}})
        self.assertEqual(self.successResultOf(d), ["a"])

    def test_failing_external(self) -> None:
        path = self.script("broken", "import sys\nsys.stderr.write('boom')\nsys.exit(3)\n")
        failure = self.failureResultOf(allocator.run_external("broken", path, {}), errors.OpPrereqError)
        self.assertIn("exit code 3", str(failure.value))
        self.assertIn("boom", str(failure.value))
