"""Tests for L{ganeti.cmdlib.allocator}: placement, the iallocator protocol,
finding and running an external allocator."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.cmdlib import allocator, iallocator
from ganeti.cmdlib.allocator import NodeState, Request
from ganeti.objects import NIC, ConfigData, Disk, Instance
from tests.unit.instance_fakes import MASTER, N2, N3, cluster


def request(memory: int = 512, disks: tuple[int, ...] = (1024,), template: str = "file") -> Request:
    return Request(name="new.example.test", memory=memory, vcpus=1, disk_template=template,
                   disks=[{"size": s, "mode": "rw"} for s in disks])


class PlaceTests(SynchronousTestCase):
    def test_most_free_memory_after_placement_wins(self) -> None:
        nodes = [NodeState("a", "a.test", free_memory=2048, free_disk=5000),
                 NodeState("b", "b.test", free_memory=4096, free_disk=5000),
                 NodeState("c", "c.test", free_memory=3000, free_disk=5000)]
        self.assertEqual(allocator.place(request(), nodes).node.uuid, "b")

    def test_ties_go_to_fewer_instances_then_name(self) -> None:
        nodes = [NodeState("a", "node10", free_memory=2048, instances=3),
                 NodeState("b", "node2", free_memory=2048, instances=1),
                 NodeState("c", "node9", free_memory=2048, instances=1)]
        self.assertEqual(allocator.place(request(), nodes).node.name, "node2")

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

    def test_only_the_roots_search_path_is_searched(self) -> None:
        elsewhere = tempfile.mkdtemp()
        self.addCleanup(__import__("shutil").rmtree, elsewhere)
        outside = os.path.join(elsewhere, "onpath")
        with open(outside, "w") as handle:
            handle.write("#!/bin/sh\n")
        os.chmod(outside, stat.S_IRWXU)
        self.patch(os, "environ", dict(os.environ, PATH=elsewhere))
        self.assertIsNone(allocator.find_allocator("onpath", self.root))
        self.assertIsNone(allocator.find_allocator(outside, self.root))
        self.assertIsNone(allocator.find_allocator("mine", None), "no root: no search path")
        e = self.assertRaises(errors.OpPrereqError, allocator.resolve, outside, None, self.root)
        self.assertIn("Invalid allocator name", str(e))
        local = os.path.join(self.root, "usr/local/lib/ganeti/iallocators")
        os.makedirs(local)
        self.script("mine", "")
        os.rename(os.path.join(self.dir, "mine"), os.path.join(local, "mine"))
        self.assertEqual(allocator.find_allocator("mine", self.root), os.path.join(local, "mine"))

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


class GanetiFormatTests(SynchronousTestCase):
    """The pieces of Ganeti's iallocator format (L{ganeti.cmdlib.iallocator})."""

    def test_group_policy_is_the_clusters_filled_with_the_groups(self) -> None:
        cluster_policy = {"minmax": [{"min": {"cpu-count": 1}, "max": {"cpu-count": 8}}],
                          "std": {"cpu-count": 1, "memory-size": 128}, "vcpu-ratio": 4.0, "disk-templates": ["file"]}
        filled = iallocator.filled_ipolicy(cluster_policy, {"vcpu-ratio": 2.0, "std": {"memory-size": 256}})
        self.assertEqual(filled["minmax"], cluster_policy["minmax"])
        self.assertEqual(filled["vcpu-ratio"], 2.0)
        self.assertEqual(filled["std"], {"cpu-count": 1, "memory-size": 256})
        self.assertEqual(iallocator.filled_ipolicy(cluster_policy, {}), cluster_policy)
        filled["minmax"][0]["min"]["cpu-count"] = 99
        self.assertEqual(cluster_policy["minmax"][0]["min"]["cpu-count"], 1, "a copy")

    def test_every_group_gets_a_full_policy_and_nodes_the_groups_ndparams(self) -> None:
        cfg = cluster(nodes=1)
        group_uuid = next(iter(cfg.nodegroups))
        groups = {group_uuid: attrs.evolve(cfg.nodegroups[group_uuid], ipolicy={"vcpu-ratio": 2.0},
                                           ndparams={"spindle_count": 3})}
        cfg = attrs.evolve(cfg, nodegroups=groups)
        data = allocator.build_input(cfg, request(), [])
        policy = data["nodegroups"][group_uuid]["ipolicy"]
        self.assertEqual(set(policy), set(cfg.cluster.ipolicy))
        self.assertEqual(policy["vcpu-ratio"], 2.0)
        self.assertEqual(data["nodes"][MASTER]["ndparams"]["spindle_count"], 3)

    def test_disk_space_and_required_nodes(self) -> None:
        self.assertEqual(iallocator.disk_space("drbd", [1024, 100]), 1024 + 100 + 2 * 128)
        self.assertEqual(iallocator.disk_space("sharedfile", [1024, 100]), 1124)
        self.assertEqual(iallocator.disk_space("diskless", [1024]), 0)
        drbd = request(template="drbd").to_dict()
        self.assertEqual((drbd["required_nodes"], drbd["disk_space_total"]), (2, 1024 + 128))
        whitelisted = attrs.evolve(request(), restrict_to=[N2]).to_dict()
        self.assertEqual(whitelisted["restrict-to-nodes"], [N2])
        self.assertNotIn("restrict-to-nodes", request().to_dict())

    def test_move_requests(self) -> None:
        cfg = with_instance(cluster(nodes=2))
        reloc = iallocator.RelocateRequest("inst1.test", [N2]).to_dict(cfg)
        self.assertEqual(reloc, {"type": "relocate", "name": "inst1.test", "disk_space_total": 2048,
                                 "required_nodes": 1, "relocate_from": [N2]})
        self.assertRaises(errors.OpPrereqError, iallocator.RelocateRequest("nope", [N2]).to_dict, cfg)
        evac = iallocator.NodeEvacRequest(["inst1.test"], "primary-only", ignore_soft_errors=True)
        self.assertEqual(evac.to_dict(cfg), {"type": "node-evacuate", "instances": ["inst1.test"],
                                             "evac_mode": "primary-only"})
        self.assertEqual(evac.extra_args(), ["--ignore-soft-errors"])
        self.assertRaises(errors.OpPrereqError, iallocator.NodeEvacRequest, ["x"], "sideways")
        change = iallocator.ChangeGroupRequest(["inst1.test"], ["g2"]).to_dict(cfg)
        self.assertEqual(change, {"type": "change-group", "instances": ["inst1.test"], "target_groups": ["g2"]})

    def test_instances_in_the_input(self) -> None:
        cfg = with_instance(cluster(nodes=2))
        data = allocator.build_input(cfg, iallocator.RelocateRequest("inst1.test", [N2]), [])
        inst = data["instances"]["inst1.test"]
        self.assertEqual(inst["nodes"], [N2])
        self.assertEqual(inst["disks"], [{"dev_type": "sharedfile", "size": 2048, "mode": "rw", "spindles": None}])
        self.assertEqual((inst["disk_space_total"], inst["memory"], inst["disk_template"]), (2048, 512, "sharedfile"))
        self.assertEqual(inst["nics"], [{"mac": "aa:00:00:00:00:01", "ip": None, "mode": "bridged",
                                         "link": "br0", "bridge": "br0"}])
        self.assertFalse(inst["disks_active"])

    def test_option_args(self) -> None:
        self.assertEqual(allocator.option_args({"a": "1", "b": None}, ["--ignore-soft-errors"]),
                         ["--a=1", "--b", "--ignore-soft-errors"])
        self.assertEqual(allocator.option_args(None), [])

    def test_evacuation_result(self) -> None:
        result = iallocator.evacuation("x", [[["i1", "default", [N2]]], [["i2", "no room"]], []])
        self.assertEqual(result.moved, [("i1", "default", [N2])])
        self.assertEqual(result.failed, [("i2", "no room")])
        for bad in ([], [[], []], [[["i1", "g"]], [], []], [[], [["i2"]], []], "x"):
            e = self.assertRaises(errors.OpPrereqError, iallocator.evacuation, "x", bad)
            self.assertEqual(e.args[1], errors.ECODE_FAULT)

    def test_node_names_count(self) -> None:
        self.assertEqual(iallocator.node_names("x", [N2, N3], 2), [N2, N3])
        e = self.assertRaises(errors.OpPrereqError, iallocator.node_names, "x", [N2], 2)
        self.assertIn("1 node(s)", str(e))


def with_instance(cfg: ConfigData) -> ConfigData:
    """C{cfg} with a sharedfile instance on N2 (512 MiB, one 2 GiB disk, one bridged NIC)."""
    node = next(u for u, n in cfg.nodes.items() if n.name == N2)
    disk = Disk(uuid="disk-1", dev_type="sharedfile", size=2048, mode="rw", nodes=[node])
    inst = Instance(name="inst1.test", uuid="inst-1", primary_node=node, disk_template="sharedfile", disks=["disk-1"],
                    hypervisor="fake", os="noop", admin_state="up", beparams={"maxmem": 512, "minmem": 512},
                    nics=[NIC(mac="aa:00:00:00:00:01", nicparams={"mode": "bridged", "link": "br0"})])
    return attrs.evolve(cfg, instances={"inst-1": inst}, disks={"disk-1": disk})


class NodeFiguresTests(SynchronousTestCase):
    def test_node_info_to_allocator_figures(self) -> None:
        """What node_info says (total storage, the node's own memory and
        CPUs) reaches the allocator input."""
        from ganeti.cmdlib.instance_utils import parse_node_info

        res = parse_node_info(["boot", [{"type": "sharedfile", "name": "/srv", "storage_free": 700,
                                         "storage_size": 1000}],
                               [{"memory_total": 4096, "memory_free": 3000, "memory_dom0": 512, "cpu_total": 8,
                                 "cpu_dom0": 1}]])
        self.assertEqual((res.storage_free, res.storage_size, res.memory_dom0, res.cpu_dom0),
                         ({"sharedfile": 700}, {"sharedfile": 1000}, 512, 1))
        cfg = cluster(nodes=1)
        uuid = next(u for u, n in cfg.nodes.items() if n.name == MASTER)
        state = NodeState(uuid, MASTER, free_memory=res.memory_free, total_memory=res.memory_total,
                          free_disk=700, total_disk=1000, total_cpus=8, reserved_memory=512, reserved_cpus=1)
        node = allocator.build_input(cfg, request(template="sharedfile"), [state])["nodes"][MASTER]
        self.assertEqual({k: node[k] for k in ("total_memory", "free_memory", "reserved_memory", "total_disk",
                                               "free_disk", "total_cpus", "reserved_cpus")},
                         {"total_memory": 4096, "free_memory": 3000, "reserved_memory": 512, "total_disk": 1000,
                          "free_disk": 700, "total_cpus": 8, "reserved_cpus": 1})
