"""OP_QUERY and OP_QUERY_FIELDS (cluster, os, extstorage), OP_CLUSTER_CONFIG_QUERY,
OP_CLUSTER_POST_INIT and the master IP opcodes (L{ganeti.cmdlib.queries}), run
through the processor against fake nodes."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.querydefs import RS_NORMAL
from tests.unit.instance_fakes import MASTER, N2, FakeNodes, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_cmdlib_os import DEB, NOOP
from tests.unit.test_processor import Env

HIDDEN = ["hiddenos", "/srv/ganeti/os/hiddenos", True, "", [], [], [20], True]


class _Nodes(FakeNodes):
    def __init__(self) -> None:
        super().__init__()
        self.master_ip: list[str] = []

    def _node_activate_master_ip(self, node: str, params: Any, use_external: bool) -> None:
        self.master_ip.append("up %s %s" % (node, params["ip"]))

    def _node_deactivate_master_ip(self, node: str, params: Any, use_external: bool) -> None:
        self.master_ip.append("down %s %s" % (node, params["ip"]))


class QueryOpcodeTests(LUTestCase):
    def setUp(self) -> None:
        import attrs

        cfg = cluster(nodes=2)
        self.env = Env(attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, hidden_os=["hiddenos"])))
        self.rpc = _Nodes()
        self.rpc.os_list = [NOOP, DEB, HIDDEN]
        self.next_id = 100

    def test_query_os_with_a_filter_and_fielddefs(self) -> None:
        """Every OS the nodes have (hidden ones too), Ganeti's fielddefs, a qlang filter applied."""
        answer = self.ok({"OP_ID": "OP_QUERY", "what": "os", "fields": ["name", "hidden", "variants"]})
        self.assertEqual([f["name"] for f in answer["fields"]], ["name", "hidden", "variants"])
        self.assertEqual(answer["fields"][1], {"name": "hidden", "title": "Hidden", "kind": "bool",
                                               "doc": "Whether operating system is hidden"})
        self.assertEqual(answer["data"], [
            [[RS_NORMAL, "debootstrap"], [RS_NORMAL, False], [RS_NORMAL, ["default", "minimal"]]],
            [[RS_NORMAL, "hiddenos"], [RS_NORMAL, True], [RS_NORMAL, []]],
            [[RS_NORMAL, "noop"], [RS_NORMAL, False], [RS_NORMAL, []]]])
        only = self.ok({"OP_ID": "OP_QUERY", "what": "os", "fields": ["name"], "qfilter": ["?", "hidden"]})
        self.assertEqual(only["data"], [[[RS_NORMAL, "hiddenos"]]])

    def test_query_cluster_and_fields(self) -> None:
        answer = self.ok({"OP_ID": "OP_QUERY", "what": "cluster", "fields": ["name", "master_node"]})
        self.assertEqual([cell[1] for cell in answer["data"][0]], [self.env.config.cluster.cluster_name, MASTER])
        fields = self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "extstorage"})["fields"]
        self.assertEqual([f["name"] for f in fields], ["name", "node_status", "nodegroup_status", "parameters"])
        self.assertEqual(self.ok({"OP_ID": "OP_QUERY_FIELDS", "what": "os", "fields": ["trusted"]})["fields"][0]["kind"],
                         "bool")

    def test_unknown_fields_and_bad_queries(self) -> None:
        """An unknown field is answered as LUXI's Query answers it (kind unknown); locking is refused
        before any node is asked; a resource LUXI serves is no OP_QUERY resource."""
        answer = self.ok({"OP_ID": "OP_QUERY", "what": "os", "fields": ["name", "colour"]})
        self.assertEqual(answer["fields"][1]["kind"], "unknown")
        self.rpc.calls.clear()
        self.assertIn("Sync queries", self.error({"OP_ID": "OP_QUERY", "what": "os", "fields": ["name"],
                                                  "use_locking": True}))
        self.assertIn("Unknown filter operator", self.error({"OP_ID": "OP_QUERY", "what": "cluster", "fields": ["name"],
                                                    "qfilter": ["~~", "name"]}, kind="QueryFilterParseError"))
        self.assertEqual(self.rpc.procedures(), [])
        with self.assertRaises(errors.OpPrereqError):  # a resource LUXI serves is not an OP_QUERY resource
            from ganeti import opcodes

            opcodes.validate({"OP_ID": "OP_QUERY", "what": "instance", "fields": ["name"]})

    def test_config_query_and_post_init(self) -> None:
        cfg = self.env.config
        self.assertEqual(self.ok({"OP_ID": "OP_CLUSTER_CONFIG_QUERY", "output_fields": ["name", "master_node"]}),
                         [cfg.cluster.cluster_name, MASTER])
        self.assertIs(self.ok({"OP_ID": "OP_CLUSTER_POST_INIT"}), True)
        # its cluster-init hooks: post phase on the master only
        phases = [(node, args[0], args[1]) for node, args in self.env.hook_calls]
        self.assertEqual(phases, [(MASTER, "cluster-init", "post")])

    def test_master_ip_on_the_master(self) -> None:
        ip = self.env.config.cluster.master_ip
        self.ok({"OP_ID": "OP_CLUSTER_DEACTIVATE_MASTER_IP"})
        self.ok({"OP_ID": "OP_CLUSTER_ACTIVATE_MASTER_IP"})
        self.assertEqual(self.rpc.master_ip, ["down %s %s" % (MASTER, ip), "up %s %s" % (MASTER, ip)])
        self.rpc.fail[("node_activate_master_ip", None)] = "cannot add the address"
        self.assertIn("Could not activate the master IP: cannot add the address",
                      self.error({"OP_ID": "OP_CLUSTER_ACTIVATE_MASTER_IP"}, kind="OpExecError"))
        self.assertNotIn(N2, [n for n, _ in self.rpc.calls_of("node_activate_master_ip")])
