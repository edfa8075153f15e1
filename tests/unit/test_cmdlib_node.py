"""Tests for the node LUs (L{ganeti.cmdlib.node}): roles, the candidate pool,
add/remove, verify, redist-conf and test delay on nodes.

The LUs run through the processor on an in-memory WConfD (L{Env}); node
RPC is a fake that records the calls and answers as told.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase

from ganeti import ssconf
from ganeti.cmdlib import node as cmdnode
from ganeti.cmdlib import verify
from ganeti.config.bootstrap import grow, initial_config
from ganeti.jobs import model
from ganeti.objects import ConfigData
from ganeti.rpc import RpcResult, wire
from ganeti.rpc.contract import Runner
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

MASTER = "node1.example.test"
N2, N3, N4 = "node2.example.test", "node3.example.test", "node4.example.test"


def cluster(nodes: int = 3, pool: int = 3, candidates: tuple[str, ...] = (N2,), instances: int = 0) -> ConfigData:
    """The master plus C{nodes} nodes; C{candidates} are candidates besides the master."""
    config = grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=nodes, instances=instances)
    changed = {}
    for uuid, node in config.nodes.items():
        if node.name in candidates:
            node = attrs.evolve(node, master_candidate=True)
        changed[uuid] = node
    return attrs.evolve(config, nodes=changed, cluster=attrs.evolve(config.cluster, candidate_pool_size=pool))


def digest_of(name: str) -> str:
    """The client certificate digest the fake node C{name} tells."""
    return ":".join("%02X" % b for b in hashlib.sha1(name.encode()).digest())


class FakeRpc(Runner):
    """Records calls; answers from C{answers[procedure]} (a payload, or a callable)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], list[Any]]] = []
        self.down: set[str] = set()
        self.answers: dict[str, Any] = {"version": wire.PROTOCOL_VERSION, "node_verify": {},
                                        "node_crypto_tokens": lambda name, args: [["ssl", digest_of(name)]]}

    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> dict[str, RpcResult]:
        nodes = dict(nodes)
        if procedure == "hooks_runner":  # not counted among the LU's calls
            return {name: RpcResult(name, True, []) for name in nodes}
        self.calls.append((procedure, nodes, list(args)))
        results = {}
        for name in nodes:
            if name in self.down:
                results[name] = RpcResult.failure(name, "node unreachable: connection refused")
                continue
            answer = self.answers.get(procedure)
            payload = answer(name, args) if callable(answer) else answer
            if isinstance(payload, Deferred):
                payload = await payload
            results[name] = RpcResult(name, True, payload)
        return results

    def procedures(self) -> list[str]:
        return [c[0] for c in self.calls]


class NodeLUTestCase(LUTestCase):
    config: ConfigData | None = None

    def setUp(self) -> None:
        self.env = Env(self.config if self.config is not None else cluster())
        self.rpc = FakeRpc()
        self.next_id = 100

    def node(self, name: str) -> Any:
        found = [n for n in self.env.read_config().nodes.values() if n.name == name]
        return found[0] if found else None

    def roles(self) -> dict[str, tuple[bool, bool, bool]]:
        return {
            n.name: (bool(n.master_candidate), bool(n.drained), bool(n.offline))
            for n in self.env.read_config().nodes.values()
        }

    def certs(self) -> dict[str, str]:
        """C{candidate_certs} by node name."""
        cfg = self.env.read_config()
        return {cfg.nodes[uuid].name: digest for uuid, digest in (cfg.cluster.candidate_certs or {}).items()}

    def candidates(self) -> list[str]:
        return sorted(n.name for n in self.env.read_config().nodes.values() if n.master_candidate)


def modify(name: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": name}, **params)


def add(name: str, ip: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_NODE_ADD", "node_name": name, "primary_ip": ip}, **params)


class PoolLogicTests(SynchronousTestCase):
    def test_stats_count_capable_online_nodes(self) -> None:
        cfg = cluster(nodes=3, pool=10, candidates=(N2,))
        self.assertEqual(cmdnode.candidate_stats(cfg), (2, 4, 4))
        uuid3 = next(n.uuid for n in cfg.nodes.values() if n.name == N3)
        cfg = attrs.evolve(cfg, nodes=dict(cfg.nodes, **{uuid3: attrs.evolve(cfg.nodes[uuid3], offline=True)}))
        self.assertEqual(cmdnode.candidate_stats(cfg), (2, 3, 3))
        self.assertEqual(cmdnode.candidate_stats(cfg, [uuid3]), (2, 3, 3))

    def test_self_promotion_up_to_the_pool_size(self) -> None:
        self.assertTrue(cmdnode.decide_self_promotion(cluster(pool=3, candidates=(N2,))))
        self.assertFalse(cmdnode.decide_self_promotion(cluster(pool=3, candidates=(N2, N3))))
        self.assertFalse(cmdnode.decide_self_promotion(cluster(pool=1, candidates=())))

    def test_nodes_to_promote_fills_the_pool_in_name_order(self) -> None:
        cfg = cluster(nodes=3, pool=3, candidates=())
        self.assertEqual([n.name for n in cmdnode.nodes_to_promote(cfg)], [N2, N3])
        uuid2 = next(n.uuid for n in cfg.nodes.values() if n.name == N2)
        self.assertEqual([n.name for n in cmdnode.nodes_to_promote(cfg, [uuid2])], [N3, N4])


class NodeAddTests(NodeLUTestCase):
    def test_add_auto_promotes_while_the_pool_is_short(self) -> None:
        self.assertIsNone(self.ok(add("node5.example.test", "192.0.2.5", secondary_ip="198.51.100.5")))
        node = self.node("node5.example.test")
        self.assertEqual((node.primary_ip, node.secondary_ip), ("192.0.2.5", "198.51.100.5"))
        self.assertEqual((node.master_candidate, node.offline, node.drained), (True, False, False))
        self.assertEqual((node.master_capable, node.vm_capable), (True, True))
        self.assertEqual(node.group, next(iter(self.env.read_config().nodegroups)))
        # a new candidate's client certificate digest is asked (the candidates still missing one too)
        # and it starts RAPI once the configuration holds it
        self.assertEqual(self.rpc.procedures(), ["version", "node_verify_light", "node_verify", "node_crypto_tokens",
                                                 "node_promote_to_mc"])
        self.assertEqual(sorted(self.rpc.calls[3][1]), [MASTER, N2, "node5.example.test"])
        self.assertEqual(self.rpc.calls[3][2], [[["ssl", "get", {}]]])
        self.assertEqual(self.certs(), {n: digest_of(n) for n in (MASTER, N2, "node5.example.test")})
        self.assertEqual(self.rpc.calls[4][1], {"node5.example.test": "192.0.2.5"})
        self.assertEqual(self.rpc.calls[0][1], {"node5.example.test": "192.0.2.5"})
        # Ganeti's node_verify_light on the joining node (here: its software version)
        self.assertEqual((self.rpc.calls[1][1], self.rpc.calls[1][2][0]),
                         ({"node5.example.test": "192.0.2.5"}, {"version": None}))
        self.assertEqual(self.rpc.calls[2][1], {MASTER: "192.0.2.1"}, "the master checks it can reach the node")
        self.assertEqual(self.rpc.calls[2][2][0], {"nodelist": [["node5.example.test", "192.0.2.5"]]})
        # the pool is now full (master, node2, node5): the next one is a plain node
        self.ok(add("node6.example.test", "192.0.2.6"))
        self.assertFalse(self.node("node6.example.test").master_candidate)
        self.assertEqual(self.rpc.procedures()[-1], "node_verify", "a plain node starts no RAPI")
        self.assertEqual(self.node("node6.example.test").secondary_ip, "192.0.2.6")

    def test_not_master_capable_is_never_promoted(self) -> None:
        self.ok(add("node5.example.test", "192.0.2.5", master_capable=False, vm_capable=False))
        node = self.node("node5.example.test")
        self.assertEqual((node.master_candidate, node.master_capable, node.vm_capable), (False, False, False))

    def test_duplicates_are_refused(self) -> None:
        self.assertIn("already in the configuration", self.error(add(N2, "192.0.2.77")))
        ip2 = self.node(N2).primary_ip
        self.assertIn("conflict with existing node %s" % N2, self.error(add("node9.example.test", ip2)))
        self.assertIn("conflict", self.error(add("node9.example.test", "192.0.2.9", secondary_ip=ip2)))
        self.assertEqual(self.rpc.calls, [], "nothing contacted")

    def test_bad_ip_and_unknown_group(self) -> None:
        self.assertIn("Invalid primary ip", self.error(add("node9.example.test", "not-an-ip")))
        self.assertIn("not found", self.error(add("node9.example.test", "192.0.2.9", group="nope")))

    def test_unreachable_node_is_not_added(self) -> None:
        self.rpc.down.add("node5.example.test")
        message = self.error(add("node5.example.test", "192.0.2.5"))
        self.assertIn("Can't get version information from node node5.example.test", message)
        self.assertIsNone(self.node("node5.example.test"))

    def test_version_mismatch_and_failed_reachability(self) -> None:
        self.rpc.answers["version"] = wire.PROTOCOL_VERSION + 1
        self.assertIn("Version mismatch", self.error(add("node5.example.test", "192.0.2.5"), "OpExecError"))
        self.rpc.answers["version"] = wire.PROTOCOL_VERSION
        self.rpc.answers["node_verify"] = {"nodelist": {"node5.example.test": "TCP connection failed"}}
        self.assertIn("verification failed", self.error(add("node5.example.test", "192.0.2.5"), "OpExecError"))
        self.assertIsNone(self.node("node5.example.test"))

    def test_join_token_joins_first(self) -> None:
        """The join goes to the node daemon port the job process got from LuxiD."""
        import sys
        import types

        self.execute_options = lambda: {"rpc_port": 4711}

        joined: list[tuple[Any, ...]] = []

        async def join_node_async(reactor: Any, paths: Any, ip: str, token: str, name: str, port: int = 0) -> None:
            joined.append((ip, token, name, port))

        module = types.ModuleType("ganeti.rpc.join")
        module.join_node_async = join_node_async
        saved = sys.modules.get("ganeti.rpc.join")
        sys.modules["ganeti.rpc.join"] = module
        try:
            self.ok(add("node5.example.test", "192.0.2.5", join_token="s3cret"))
        finally:
            if saved is None:
                del sys.modules["ganeti.rpc.join"]
            else:
                sys.modules["ganeti.rpc.join"] = saved
        self.assertEqual(joined, [("192.0.2.5", "s3cret", "node5.example.test", 4711)])
        self.assertIsNotNone(self.node("node5.example.test"))

    def test_readd_resets_flags(self) -> None:
        self.ok(modify(N3, offline=True))
        self.ok(add(N3, self.node(N3).primary_ip, readd=True))
        self.assertEqual(self.roles()[N3], (True, False, False), "readded into a short pool: candidate")
        self.assertIn("not in the configuration", self.error(add("node9.example.test", "192.0.2.9", readd=True)))


class NodeRoleDaemonTests(NodeLUTestCase):
    """RAPI follows the candidate role: the LU tells the node after the config changed."""

    config = cluster(pool=2, candidates=(N2,))

    def role_calls(self) -> list[tuple[str, list[str]]]:
        return [(procedure, sorted(nodes)) for procedure, nodes, _args in self.rpc.calls
                if procedure in ("node_promote_to_mc", "node_demote_from_mc")]

    def test_promote_and_demote_tell_the_node(self) -> None:
        self.ok(modify(N3, master_candidate=True))
        self.assertEqual(self.role_calls(), [("node_promote_to_mc", [N3])])
        self.ok(modify(N3, master_candidate=False))
        self.assertEqual(self.role_calls()[-1], ("node_demote_from_mc", [N3]))
        self.ok(modify(N3, master_candidate=True))
        self.ok(modify(N3, drained=True))
        self.assertEqual(self.role_calls()[-1], ("node_demote_from_mc", [N3]), "draining demotes")
        self.ok(modify(N4, master_candidate=True))
        self.ok(modify(N4, offline=True))
        self.assertEqual(self.role_calls()[-1], ("node_demote_from_mc", [N4]), "offlining demotes")
        self.assertEqual(len(self.role_calls()), 6)

    def test_changes_that_keep_the_role_tell_nothing(self) -> None:
        self.ok(modify(N4, drained=True))
        self.ok(modify(N4, offline=True))
        self.ok(modify(N2, vm_capable=False))
        self.assertEqual(self.role_calls(), [])

    def test_auto_promoted_nodes_start_rapi(self) -> None:
        self.ok(modify(N2, offline=True, auto_promote=True))
        self.assertEqual(self.role_calls(), [("node_promote_to_mc", [N3]), ("node_demote_from_mc", [N2])])

    def test_an_unreachable_node_is_a_warning_and_the_role_changes(self) -> None:
        self.rpc.down.add(N3)
        self.ok(modify(N3, master_candidate=True))
        self.assertEqual(self.roles()[N3], (True, False, False))
        self.assertTrue(any("WARNING: Node %s failed to start its master candidate daemons" % N3 in line
                            for line in self.log), self.log)
        self.ok(modify(N3, master_candidate=False))
        self.assertEqual(self.roles()[N3], (False, False, False))
        self.assertTrue(any("WARNING: Node %s failed to demote itself" % N3 in line for line in self.log), self.log)

    def test_readd_as_non_candidate_demotes(self) -> None:
        self.env = Env(cluster(pool=2, candidates=(N2,)))
        self.ok(add(N2, self.node(N2).primary_ip, readd=True))
        self.assertEqual(self.role_calls()[-1], ("node_promote_to_mc", [N2]), "still a candidate")
        self.ok(modify(N3, master_candidate=True))
        self.ok(add(N2, self.node(N2).primary_ip, readd=True))
        self.assertFalse(self.node(N2).master_candidate)
        self.assertEqual(self.role_calls()[-1], ("node_demote_from_mc", [N2]))


class NodeRemoveTests(NodeLUTestCase):
    def test_remove_promotes_a_replacement_and_tells_the_node(self) -> None:
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": N2})
        self.assertIsNone(self.node(N2))
        self.assertEqual(self.candidates(), [MASTER, N3, N4], "the pool of 3 is filled")
        self.assertIn(" - INFO: Promoted nodes to master candidate role: %s, %s" % (N3, N4), self.log)
        leave = [c for c in self.rpc.calls if c[0] == "node_leave_cluster"]
        self.assertEqual([list(c[1]) for c in leave], [[N2]])
        self.assertEqual(self.rpc.calls[-1][0], "node_crypto_tokens", "then the promoted nodes' digests")
        self.assertEqual(self.certs(), {n: digest_of(n) for n in (MASTER, N3, N4)}, "node2's is gone")

    def test_short_name_and_unreachable_node_warns(self) -> None:
        self.rpc.down.add(N4)
        self.ok({"OP_ID": "OP_NODE_REMOVE", "node_name": "node4"})
        self.assertIsNone(self.node(N4))
        self.assertTrue(any("WARNING: Errors encountered on the remote node" in line for line in self.log), self.log)

    def test_master_and_unknown_refused(self) -> None:
        self.assertIn("is the master node", self.error({"OP_ID": "OP_NODE_REMOVE", "node_name": MASTER}))
        self.assertIn("not known", self.error({"OP_ID": "OP_NODE_REMOVE", "node_name": "nope"}))
        self.assertEqual(self.rpc.calls, [])


class NodeRemoveWithInstancesTests(NodeLUTestCase):
    config = cluster(nodes=2, instances=2)

    def test_node_with_instances_is_refused(self) -> None:
        cfg = self.env.read_config()
        used = {i.primary_node for i in cfg.instances.values()}
        name = next(n.name for n in cfg.nodes.values() if n.uuid in used and n.uuid != cfg.cluster.master_node)
        self.assertIn("is still running on the node", self.error({"OP_ID": "OP_NODE_REMOVE", "node_name": name}))
        self.assertIsNotNone(self.node(name))
        self.assertIn("hosts instances", self.error(modify(name, vm_capable=False)))


class NodeSetParamsTests(NodeLUTestCase):
    def test_offline_demotes_when_the_pool_allows_it(self) -> None:
        env = Env(cluster(pool=2, candidates=(N2, N3)))
        self.env = env
        self.assertEqual(self.ok(modify(N2, offline=True)), [["master_candidate", "False"], ["offline", "True"]])
        self.assertEqual(self.roles()[N2], (False, False, True))

    def test_demotion_below_the_pool_needs_auto_promote(self) -> None:
        message = self.error(modify(N2, offline=True))
        self.assertIn("Not enough master candidates", message)
        self.assertEqual(self.roles()[N2], (True, False, False))
        result = self.ok(modify(N2, offline=True, auto_promote=True))
        self.assertEqual(result, [["master_candidate", "False"], ["offline", "True"]])
        self.assertEqual(self.candidates(), [MASTER, N3, N4])
        self.assertIn(" - INFO: Promoted nodes to master candidate role: %s, %s" % (N3, N4), self.log)

    def test_back_online_promotes_itself_if_the_pool_is_short(self) -> None:
        self.ok(modify(N3, drained=True))
        self.assertEqual(self.roles()[N3], (False, True, False))
        self.assertEqual(self.ok(modify(N3, drained=False)), [["master_candidate", "True"], ["drained", "False"]])
        self.assertIn(" - INFO: Auto-promoting node to master candidate", self.log)
        self.ok(modify(N4, offline=True))
        result = self.ok(modify(N4, offline=False))
        self.assertEqual(result, [["offline", "False"]], "the pool is full now")
        self.assertTrue(any("Transitioning node from offline to online" in line for line in self.log))
        self.assertIn("version", self.rpc.procedures())

    def test_de_offline_needs_the_node_to_answer(self) -> None:
        self.ok(modify(N4, offline=True))
        self.rpc.down.add(N4)
        self.assertIn("fails to report its version", self.error(modify(N4, offline=False)))
        self.assertEqual(self.roles()[N4], (False, False, True))

    def test_flags_are_exclusive(self) -> None:
        self.assertIn("more than one state", self.error(modify(N3, offline=True, drained=True)))
        self.assertIn("at least one modification", self.error(modify(N3)))
        self.ok(modify(N3, master_candidate=True))
        self.assertEqual(self.roles()[N3], (True, False, False))
        self.ok(modify(N4, drained=True))
        self.ok(modify(N4, offline=True))
        self.assertEqual(self.roles()[N4], (False, False, True), "offline replaces drained")

    def test_master_role_cannot_change(self) -> None:
        for flag, value in (("offline", True), ("drained", True), ("master_candidate", False)):
            self.assertIn("only via master-failover", self.error(modify(MASTER, **{flag: value})))
        self.assertIn("Master must remain master capable", self.error(modify(MASTER, master_capable=False, auto_promote=True)))

    def test_capabilities(self) -> None:
        self.ok(modify(N4, master_capable=False))
        self.assertIn("not master capable", self.error(modify(N4, master_candidate=True)))
        self.assertEqual(self.ok(modify(N4, vm_capable=False)), [["vm_capable", "False"]])
        self.assertFalse(self.node(N4).vm_capable)
        # no longer master capable: a candidate is demoted (and replaced with auto_promote)
        result = self.ok(modify(N2, master_capable=False, auto_promote=True))
        self.assertEqual(result, [["master_capable", "False"], ["master_candidate", "False"]])
        self.assertEqual(self.candidates(), [MASTER, N3])

    def test_unset_unset_flag_is_ignored(self) -> None:
        self.assertEqual(self.ok(modify(N3, offline=False)), [])
        self.assertIn(" - INFO: Ignoring request to unset flag offline, already unset", self.log)

    def test_locks(self) -> None:
        from tests.unit.test_cmdlib import make_lu

        cfg = self.env.config
        uuid = next(n.uuid for n in cfg.nodes.values() if n.name == N2)
        lu = make_lu(modify(N2, offline=True), cfg)
        self.assertEqual((lu.needed_locks["node"], lu.REQ_BGL), ([uuid], False))
        lu = make_lu(modify(N2, offline=True, auto_promote=True), cfg)
        self.assertIs(lu.needed_locks["node"], cmdnode.ALL_SET)
        lu = make_lu(modify(N2, offline=False, auto_promote=True), cfg)
        self.assertEqual(lu.needed_locks["node"], [uuid], "no demotion: only the node")
        self.assertTrue(make_lu(add("x.example.test", "192.0.2.99"), cfg).REQ_BGL)
        self.assertTrue(make_lu({"OP_ID": "OP_NODE_REMOVE", "node_name": N2}, cfg).REQ_BGL)


class CandidateCertsTests(NodeLUTestCase):
    """C{candidate_certs}: the master's and each candidate's own client certificate digest, as Ganeti keeps it."""

    def test_promotion_adds_and_demotion_removes_the_digest(self) -> None:
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertEqual(self.certs(), {MASTER: digest_of(MASTER), N2: digest_of(N2)})
        self.ok(modify(N3, master_candidate=True))
        self.assertEqual(self.certs(), {n: digest_of(n) for n in (MASTER, N2, N3)})
        self.assertEqual(list(self.rpc.calls[-1][1]), [N3], "only the promoted node is asked")
        self.ok(modify(N2, master_candidate=False, auto_promote=True))
        self.assertEqual(self.certs(), {n: digest_of(n) for n in (MASTER, N3, N4)}, "node4 was auto-promoted")
        self.ok(modify(N4, offline=True, auto_promote=True))
        self.assertNotIn(N4, self.certs())
        # ssconf_master_candidates_certs follows: one "uuid=digest" line per candidate
        cfg = self.env.read_config()
        lines = ssconf.compute(cfg)["master_candidates_certs"]
        self.assertEqual(sorted(lines), sorted("%s=%s" % item for item in cfg.cluster.candidate_certs.items()))

    def test_readd_asks_for_the_new_certificate(self) -> None:
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.rpc.answers["node_crypto_tokens"] = lambda name, args: [["ssl", "AA:BB"]]
        self.ok(add(N2, self.node(N2).primary_ip, readd=True))
        self.assertEqual(self.certs()[N2], "AA:BB")
        self.assertEqual(self.certs()[MASTER], digest_of(MASTER), "known digests are kept")

    def test_unreachable_candidate_is_a_warning_and_left_out(self) -> None:
        self.rpc.down.add(N3)
        self.ok(modify(N3, master_candidate=True))
        self.assertTrue(self.roles()[N3][0])
        self.assertNotIn(N3, self.certs())
        self.assertTrue(any("Could not fetch the client certificate digest of node %s" % N3 in line
                            for line in self.log), self.log)
        self.rpc.down.clear()
        self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"})
        self.assertEqual(self.certs()[N3], digest_of(N3), "redist-conf fills it in")


class RenewCryptoTests(NodeLUTestCase):
    def test_new_node_certificates_replace_the_candidate_digests(self) -> None:
        self.rpc.down.add(N4)
        self.rpc.answers["node_crypto_tokens"] = lambda name, args: [["ssl", "NEW:" + name]]
        self.ok({"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "node_certificates": True})
        creates = [c for c in self.rpc.calls if c[0] == "node_crypto_tokens"]
        self.assertEqual(creates[0][2], [[["ssl", "create", {}]]])
        self.assertEqual(sorted(creates[0][1]), [MASTER, N2, N3, N4], "every online node")
        self.assertEqual([sorted(c[1]) for c in creates[1:]], [[N4], [N4]], "three tries for a failing node")
        self.assertEqual(self.certs(), {MASTER: "NEW:" + MASTER.upper(), N2: "NEW:" + N2.upper()},
                         "the master and the candidate")
        self.assertIn("Node %s: node unreachable: connection refused" % N4, "".join(self.log))

    def test_nothing_asked_renews_nothing(self) -> None:
        self.ok({"OP_ID": "OP_CLUSTER_RENEW_CRYPTO"})
        self.assertEqual(self.rpc.calls, [])


class VerifyRedistTests(NodeLUTestCase):
    def good_verify(self, name: str, args: Any) -> dict[str, Any]:
        from ganeti import GANETI_RELEASE

        return {"nodelist": {}, "ssconf": {}, "version": [wire.PROTOCOL_VERSION, GANETI_RELEASE],
                "cluster_name": "cluster.example.test"}

    def test_verify_healthy_cluster(self) -> None:
        self.rpc.answers["node_verify"] = self.good_verify
        self.assertIs(self.verify_cluster(), True)
        self.assertEqual(self.log, ["* Verifying cluster config", "* Verifying group 'default'",
                                    "* Gathering data (4 nodes)", "* Verifying node status"])
        (call,) = self.rpc.calls
        self.assertEqual(call[0], "node_verify")
        self.assertEqual(sorted(call[1]), sorted([MASTER, N2, N3, N4]))
        checks = call[2][0]
        self.assertEqual(len(checks["nodelist"]), 4)
        self.assertEqual(checks["ssconf"], verify.expected_ssconf(self.env.read_config()))
        self.assertIn("master_node", checks["ssconf"])

    def test_verify_reports_node_problems(self) -> None:
        def answer(name: str, args: Any) -> dict[str, Any]:
            result = self.good_verify(name, args)
            if name == N3:
                result["nodelist"] = {N2: "TCP connection to 127.1.0.3:1811 failed: ConnectionRefusedError"}
                result["ssconf"] = {"master_node": None}
            return result

        self.rpc.answers["node_verify"] = answer
        self.rpc.down.add(N4)
        self.ok(modify(N2, offline=True, auto_promote=True))
        self.rpc.calls.clear()
        self.assertIs(self.verify_cluster(), False)
        self.assertNotIn(N2, self.rpc.calls[0][1], "offline nodes are not contacted")
        self.assertIn("  - ERROR: node %s: tcp communication with node '%s': TCP connection to 127.1.0.3:1811 failed:"
                      " ConnectionRefusedError" % (N3, N2), self.log)
        self.assertIn("  - ERROR: node %s: ssconf files differ from the configuration: master_node" % N3, self.log)
        self.assertIn("  - ERROR: node %s: while contacting node: node unreachable: connection refused" % N4, self.log)
        self.assertIn("  - NOTICE: 1 offline node(s) found.", self.log)
        self.verify_cluster(error_codes=True)
        self.assertIn("  - ERROR:ENODERPC:node:%s:while contacting node: node unreachable: connection refused" % N4,
                      self.log)

    def test_verify_simulated_error_and_ignored_codes(self) -> None:
        self.rpc.answers["node_verify"] = self.good_verify
        self.assertIs(self.verify_cluster(debug_simulate_errors=True), False)
        self.rpc.down.add(N4)
        self.assertIs(self.verify_cluster(ignore_errors=["ENODERPC"]), True)
        self.assertTrue(any(line.startswith("  - WARNING: node %s" % N4) for line in self.log), self.log)

    def test_redist_conf_pushes_config_and_ssconf(self) -> None:
        self.rpc.down.add(N4)
        self.assertIsNone(self.ok({"OP_ID": "OP_CLUSTER_REDIST_CONF"}))
        tokens, uploads, writes = self.rpc.calls
        self.assertEqual((tokens[0], sorted(tokens[1])), ("node_crypto_tokens", [MASTER, N2]),
                         "the candidates missing from candidate_certs are asked first")
        self.assertEqual((uploads[0], list(uploads[1])), ("upload_file", [N2]), "config.data only to candidates")
        details = uploads[2][0]
        self.assertEqual(details[0], "/var/lib/ganeti/config.data")
        self.assertEqual(ConfigData.from_json(wire.decompress(details[1])).serial_no,
                         self.env.read_config().serial_no)
        self.assertEqual((writes[0], sorted(writes[1])), ("write_ssconf_files", [N2, N3, N4]))
        self.assertEqual(writes[2][0], ssconf.compute(self.env.read_config()))
        self.assertIn(" - WARNING: Copy of ssconf to node %s failed: node unreachable: connection refused" % N4,
                      self.log)


class TestDelayOnNodesTests(NodeLUTestCase):
    def test_locks_and_rpc(self) -> None:
        from tests.unit.test_cmdlib import make_lu

        cfg = self.env.config
        uuids = {n.name: n.uuid for n in cfg.nodes.values()}
        op = {"OP_ID": "OP_TEST_DELAY", "duration": 2.0, "on_nodes": ["node3", N2], "no_locks": False}
        lu = make_lu(op, cfg)
        self.assertEqual(lu.needed_locks["node"], [uuids[N3], uuids[N2], cfg.cluster.master_node])
        # as Ganeti: on_master adds the master to the nodes slept on by RPC
        self.assertEqual(lu.op.on_node_uuids, [uuids[N3], uuids[N2], cfg.cluster.master_node])
        end = self.env.clock.seconds() + 2.0  # every node sleeps until then
        self.rpc.answers["test_delay"] = lambda name, args: deferLater(
            self.env.clock, end - self.env.clock.seconds(), lambda: None)
        run = self.env.start(1, [op], rpc_factory=lambda: self.rpc)
        locks = self.env.locks_of(run.owner)
        self.assertEqual(sorted(name for name, mode in locks[1:] if mode == "exclusive"),
                         sorted("node/" + u for u in (uuids[N2], uuids[N3], cfg.cluster.master_node)))
        self.assertEqual(self.rpc.calls, [("test_delay", {N3: cfg.nodes[uuids[N3]].primary_ip,
                                                          N2: cfg.nodes[uuids[N2]].primary_ip,
                                                          MASTER: cfg.nodes[cfg.cluster.master_node].primary_ip},
                                           [2.0])])
        self.env.advance(2.0)
        self.assertEqual(run.job.ops[0].status, model.SUCCESS)

    def test_failure_on_a_node_fails_the_opcode(self) -> None:
        self.rpc.down.add(N3)
        qop = self.run_op({"OP_ID": "OP_TEST_DELAY", "duration": 0.5, "on_nodes": [N3], "on_master": False})
        self.assertEqual(qop.status, model.ERROR)
        self.assertIn("Failure during rpc call to node %s" % N3, qop.result[1][0])


# --- the CLI: gnt-node add/remove/modify, gnt-cluster verify/redist-conf ----------------------


def _gnt(module: Any, tool: str, fake: Any, *argv: str) -> tuple[int, str, str]:
    import io

    from ganeti.client import runner

    out, err = io.StringIO(), io.StringIO()
    code = runner.run(tool, module.COMMANDS, list(argv), client_factory=lambda ctx: fake, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_gnt_node_add_remove_modify() -> None:
    from ganeti.client import gnt_node
    from tests.unit.test_cli_commands import following, submitted_op

    fake = following()
    code, _, err = _gnt(gnt_node, "gnt-node", fake, "add", "--primary-ip", "127.0.1.2", "-s", "10.0.0.2", "-g", "rack1",
                        "--join-token", "tok", "--vm-capable", "no", "node2.test")
    assert (code, err) == (0, "")
    op = submitted_op(fake)
    assert {k: op.get(k) for k in ("OP_ID", "node_name", "primary_ip", "secondary_ip", "group", "join_token",
                                   "vm_capable", "readd")} == {
        "OP_ID": "OP_NODE_ADD", "node_name": "node2.test", "primary_ip": "127.0.1.2", "secondary_ip": "10.0.0.2",
        "group": "rack1", "join_token": "tok", "vm_capable": False, "readd": False,
    }
    assert "master_capable" not in op
    fake = following()
    assert _gnt(gnt_node, "gnt-node", fake, "remove", "node3.test")[0] == 0
    assert (submitted_op(fake)["OP_ID"], submitted_op(fake)["node_name"]) == ("OP_NODE_REMOVE", "node3.test")
    fake = following(opresult=[["master_candidate", "False"], ["offline", "True"]])
    code, out, _ = _gnt(gnt_node, "gnt-node", fake, "modify", "--offline", "yes", "--auto-promote", "node3.test")
    assert code == 0
    assert out == "Modified node node3.test\n - master_candidate -> False\n - offline -> True\n"
    op = submitted_op(fake)
    assert (op["OP_ID"], op["offline"], op["auto_promote"], op["force"]) == ("OP_NODE_SET_PARAMS", True, True, False)
    assert "drained" not in op and "master_candidate" not in op
    fake = following()
    _gnt(gnt_node, "gnt-node", fake, "modify", "-C", "yes", "--master-capable", "yes", "--force", "node3.test")
    op = submitted_op(fake)
    assert (op["master_candidate"], op["master_capable"], op["force"]) == (True, True, True)
    code, _, err = _gnt(gnt_node, "gnt-node", following(), "modify", "node3.test")
    assert code == 1 and "at least one" in err
    code, _, err = _gnt(gnt_node, "gnt-node", following(), "modify", "--offline", "maybe", "node3.test")
    assert code != 0 and "yes or no" in err


def test_gnt_cluster_redist_conf() -> None:
    from ganeti.client import gnt_cluster
    from tests.unit.test_cli_commands import following, submitted_op

    fake = following()
    assert _gnt(gnt_cluster, "gnt-cluster", fake, "redist-conf")[0] == 0
    assert submitted_op(fake)["OP_ID"] == "OP_CLUSTER_REDIST_CONF"
