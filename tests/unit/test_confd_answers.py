"""The confd index: every request type answered from a config."""

from __future__ import annotations

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti.confd import wire
from ganeti.confd.answers import Index
from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import NIC, ConfigData, Disk, Instance


def sample_config() -> ConfigData:
    """Master node1, candidate node2, offline node3, drained node4, regular node5; one DRBD instance."""
    cfg = grow(initial_config("cluster.test", "node1.example.test", "192.0.2.1", cluster_ip="192.0.2.100"), nodes=4)
    nodes = {}
    for node in cfg.nodes.values():
        number = int(node.name.split(".")[0][4:])
        changes = {1: {}, 2: {"master_candidate": True}, 3: {"offline": True}, 4: {"drained": True, "offline": True}}.get(number, {})
        nodes[node.uuid] = attrs.evolve(node, primary_ip="192.0.2.%d" % number, serial_no=10 + number, **changes)
    by_name = {n.name: n for n in nodes.values()}
    n1, n2 = by_name["node1.example.test"].uuid, by_name["node2.example.test"].uuid
    drbd = Disk(uuid="disk-drbd", dev_type="drbd", logical_id=[n1, n2, 11000, 0, 5, "secret"], nodes=[n1, n2],
                iv_name="disk/0", size=1024, mode="rw", serial_no=1,
                children=[Disk(dev_type="plain", logical_id=["xenvg", "data"], size=1024)])
    inst = Instance(name="inst1.example.test", uuid="inst-uuid", primary_node=n1, serial_no=3, disks=["disk-drbd"],
                    disk_template="drbd",
                    nics=[NIC(ip="198.51.100.5", nicparams={}), NIC(ip="198.51.100.6", nicparams={"link": "br1"})])
    inst2 = Instance(name="inst2.example.test", uuid="inst2-uuid", primary_node=n2, serial_no=4, disks=[],
                     nics=[NIC(ip="198.51.100.7")])
    cluster = attrs.evolve(cfg.cluster, serial_no=42)
    return attrs.evolve(cfg, nodes=nodes, instances={inst.uuid: inst, inst2.uuid: inst2}, disks={drbd.uuid: drbd},
                        cluster=cluster, serial_no=99)


class AnswerTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.cfg = sample_config()
        self.index = Index.build(self.cfg.to_json())

    def ask(self, qtype: int, query: object = None) -> tuple[int, object, int]:
        rep = self.index.answer({"protocol": 1, "type": qtype, "query": query, "rsalt": "r"})
        self.assertEqual(rep["protocol"], 1)
        return rep["status"], rep["answer"], rep["serial"]

    def test_ping(self) -> None:
        self.assertEqual(self.ask(wire.REQ_PING), (0, self.cfg.version, 0))

    def test_cluster_master(self) -> None:
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER), (0, "node1.example.test", 42))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {"3": [0, 1, 2]}),
                         (0, ["node1.example.test", "192.0.2.100", "192.0.2.1"], 42))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {"3": [2]}), (0, ["192.0.2.1"], 42))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, "node1"), (1, wire.ERROR_ARGUMENT, 0))
        self.assertEqual(self.ask(wire.REQ_CLUSTER_MASTER, {"3": [7]}), (1, wire.ERROR_ARGUMENT, 0))

    def test_node_roles(self) -> None:
        """Precedence: master, drained, offline, candidate, regular."""
        expected = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4}
        for number, role in expected.items():
            self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, "node%d.example.test" % number), (0, role, 42))

    def test_short_names(self) -> None:
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, "node2"), (0, 1, 42))
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, "node2.example"), (0, 1, 42))
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, "node"), (1, 0, 0))
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, "nosuch"), (1, wire.ERROR_UNKNOWN_ENTRY, 0))
        self.assertEqual(self.ask(wire.REQ_NODE_ROLE_BYNAME, None), (1, wire.ERROR_ARGUMENT, 0))

    def test_pip_lists(self) -> None:
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_LIST), (0, ["192.0.2.%d" % n for n in range(1, 6)], 42))
        self.assertEqual(self.ask(wire.REQ_MC_PIP_LIST), (0, ["192.0.2.1", "192.0.2.2"], 42))

    def test_node_pip_by_instance_ip(self) -> None:
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": "198.51.100.5"}), (0, "192.0.2.1", 42))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": "198.51.100.7", "0": "br0"}), (0, "192.0.2.2", 42))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": "198.51.100.6"}), (1, 0, 0))
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"1": "198.51.100.6", "0": "br1"}), (0, "192.0.2.1", 42))
        self.assertEqual(
            self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, {"2": ["198.51.100.5", "10.0.0.1"]}),
            (0, [[0, "192.0.2.1", 42], [1, 0, 0]], 42),
        )
        self.assertEqual(self.ask(wire.REQ_NODE_PIP_BY_INSTANCE_IP, 5), (1, wire.ERROR_ARGUMENT, 0))

    def test_instances_ips(self) -> None:
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST), (0, ["198.51.100.5", "198.51.100.7"], 42))
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST, "br1"), (0, ["198.51.100.6"], 42))
        self.assertEqual(self.ask(wire.REQ_INSTANCES_IPS_LIST, "none"), (0, [], 42))

    def test_node_drbd(self) -> None:
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, "node1.example.test"),
                         (0, [["node1.example.test", 0, "inst1.example.test", "disk/0", "primary", "node2.example.test"]], 11))
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, "node2"),
                         (0, [["node2.example.test", 5, "inst1.example.test", "disk/0", "secondary", "node1.example.test"]], 12))
        self.assertEqual(self.ask(wire.REQ_NODE_DRBD, "node5"), (0, [], 15))

    def test_node_instances(self) -> None:
        status, answer, serial = self.ask(wire.REQ_NODE_INSTANCES, "node2")
        self.assertEqual((status, serial), (0, 12))
        primary, secondary = answer
        self.assertEqual([i["name"] for i in primary], ["inst2.example.test"])
        self.assertEqual([i["name"] for i in secondary], ["inst1.example.test"])
        self.assertEqual(secondary[0], self.cfg.instances["inst-uuid"].to_dict())

    def test_instance_disks(self) -> None:
        status, answer, serial = self.ask(wire.REQ_INSTANCE_DISKS, "inst1")
        self.assertEqual((status, serial), (0, 3))
        self.assertEqual(answer, [self.cfg.disks["disk-drbd"].to_dict()])
        self.assertEqual(self.ask(wire.REQ_INSTANCE_DISKS, "nosuch"), (1, 0, 0))

    def test_config_query(self) -> None:
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "/cluster/cluster_name"), (0, "cluster.test", 42))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "/instances/inst-uuid/nics/1/ip"), (0, "198.51.100.6", 42))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "/serial_no"), (0, 99, 42))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "/cluster/nosuch"), (1, 0, 0))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "/instances/inst-uuid/nics/9"), (1, 0, 0))
        self.assertEqual(self.ask(wire.REQ_CONFIG_QUERY, "cluster"), (1, 0, 0))

    def test_data_collectors(self) -> None:
        status, answer, serial = self.ask(wire.REQ_DATA_COLLECTORS)
        self.assertEqual((status, serial), (0, 42))
        self.assertEqual(answer["cpu-avg-load"], {"active": True, "interval": 5000000})

    def test_unknown_type(self) -> None:
        self.assertEqual(self.ask(12), (2, None, 0))
        self.assertEqual(self.ask(-1), (2, None, 0))

    def test_encoded_answer_cached(self) -> None:
        first = self.index.encoded_answer(wire.REQ_CLUSTER_MASTER, None)
        self.assertEqual(first, '{"protocol":1,"status":0,"answer":"node1.example.test","serial":42}')
        self.assertIs(self.index.encoded_answer(wire.REQ_CLUSTER_MASTER, None), first)
        self.assertEqual(self.index.encoded_answer(wire.REQ_NODE_ROLE_BYNAME, {"a": [1, {"b": None}]}),
                         '{"protocol":1,"status":1,"answer":2,"serial":0}')

    def test_bad_config(self) -> None:
        for data in [b"", b"{", b"[]", b'{"cluster": 5}', b'{"cluster": {}, "nodes": []}']:
            self.assertRaises((ValueError, TypeError), Index.build, data)

    def test_testdata_config(self) -> None:
        """The Ganeti 3.0.2 test cluster's config.data builds an index."""
        from tests.testdata import TESTDATA

        with open(TESTDATA / "config.data", "rb") as handle:
            index = Index.build(handle.read())
        status, answer, _ = index.status_answer(wire.REQ_CLUSTER_MASTER, None)
        self.assertEqual(status, 0)
        self.assertIsInstance(answer, str)
