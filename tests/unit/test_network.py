"""Networks: the address pools (L{ganeti.network}), the network LUs
(L{ganeti.cmdlib.network}) run through the processor on an in-memory WConfD,
WConfD's bookkeeping of instance addresses, and the C{network} query fields."""

from __future__ import annotations

from typing import Any

import attrs
from twisted.trial.unittest import SynchronousTestCase

from ganeti import network as netpool
from ganeti.config.bootstrap import grow, initial_config
from ganeti.errors import IpInUse
from ganeti.jobs import model
from ganeti.objects import NIC, ConfigData, Network, NodeGroup, new_uuid
from ganeti.query import engine
from ganeti.query.fields import QueryContext
from ganeti.query.resources import RESOURCES
from ganeti.wconfd.store import ConfigStore
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

MASTER = "node1.example.test"
STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}


class PoolTests(SynchronousTestCase):
    def test_initialize_reserves_network_broadcast_and_gateway(self) -> None:
        pool = netpool.Pool.initialize(Network(name="n", network="192.0.2.0/28", gateway="192.0.2.1"))
        net = pool.apply(Network(name="n", network="192.0.2.0/28"))
        self.assertEqual(net.reservations, "0" * 16)
        self.assertEqual(net.ext_reservations, "11" + "0" * 13 + "1")
        self.assertEqual(pool.external_reservations(), ["192.0.2.0", "192.0.2.1", "192.0.2.15"])
        self.assertEqual((pool.free_count(), pool.reserved_count()), (13, 3))
        self.assertEqual(pool.map(), "XX.............X")

    def test_free_address_is_the_lowest_free_one_and_full_is_an_error(self) -> None:
        pool = netpool.Pool.initialize(Network(network="10.0.0.0/30"))
        self.assertEqual(pool.free_address(), "10.0.0.1")
        pool.reserve("10.0.0.1")
        self.assertEqual(pool.free_address(), "10.0.0.2")
        with self.assertRaisesRegex(netpool.AddressPoolError, "is full"):
            pool.free_address(skip={"10.0.0.2"})
        pool.reserve("10.0.0.2")
        with self.assertRaisesRegex(netpool.AddressPoolError, "10.0.0.0/30 is full"):
            pool.free_address()

    def test_reserve_twice_and_release_unreserved_fail(self) -> None:
        pool = netpool.Pool.initialize(Network(network="10.0.0.0/24"))
        pool.reserve("10.0.0.7")
        with self.assertRaisesRegex(netpool.AddressPoolError, "already used by an instance"):
            pool.reserve("10.0.0.7")
        with self.assertRaisesRegex(netpool.AddressPoolError, "already externally reserved"):
            pool.reserve("10.0.0.0", external=True)
        with self.assertRaisesRegex(netpool.AddressPoolError, "not used by an instance"):
            pool.release("10.0.0.8")
        with self.assertRaisesRegex(netpool.AddressPoolError, "does not contain"):
            pool.reserve("10.0.1.1")

    def test_sizes_outside_16_to_30_are_refused(self) -> None:
        with self.assertRaisesRegex(netpool.AddressPoolError, "at most a /16"):
            netpool.parse_network("10.0.0.0/15")
        with self.assertRaisesRegex(netpool.AddressPoolError, "at least a /30"):
            netpool.parse_network("10.0.0.0/31")
        with self.assertRaisesRegex(netpool.AddressPoolError, "Invalid IPv4 network"):
            netpool.parse_network("10.0.0.1/24")

    def test_missing_strings_are_all_zeros_and_malformed_ones_refused(self) -> None:
        pool = netpool.Pool.of(Network(network="10.0.0.0/30"))
        self.assertEqual(pool.free_count(), 4)
        with self.assertRaisesRegex(netpool.AddressPoolError, "malformed"):
            netpool.Pool.of(Network(network="10.0.0.0/30", reservations="01"))
        self.assertIsNone(netpool.stats(Network(network="10.0.0.0/30")), "Ganeti shows 0/0/'' without pools")


def network_config() -> ConfigData:
    """node1..node3 in group "default" (node IPs 127.1.0.2...), inst1..inst2
    on them, and a second empty group "rack2"."""
    cfg = grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=2, instances=2)
    rack2 = NodeGroup(name="rack2", uuid=new_uuid(), alloc_policy="preferred", **STAMP)
    return attrs.evolve(cfg, nodegroups=dict(cfg.nodegroups, **{rack2.uuid: rack2}))


def add(name: str, network: str, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_NETWORK_ADD", "network_name": name, "network": network}, **extra)


def connect(name: str, group: str, mode: str = "bridged", link: str = "br0", **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_NETWORK_CONNECT", "network_name": name, "group_name": group,
                 "network_mode": mode, "network_link": link}, **extra)


class NetworkLUTestCase(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(network_config())
        self.rpc = None  # network LUs do not talk to the nodes
        self.next_id = 100

    def net(self, name: str) -> Network:
        found = [n for n in self.env.read_config().networks.values() if n.name == name]
        self.assertEqual(len(found), 1)
        return found[0]

    def fails(self, op: dict[str, Any], pattern: str) -> None:
        before = self.env.read_config()
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.ERROR, qop.result)
        self.assertRegex(str(qop.result), pattern)
        self.assertEqual(self.env.read_config().serial_no, before.serial_no, "nothing changed")

    def query(self, fields: list[str], names: list[str] | None = None) -> list[Any]:
        cfg = self.env.read_config()
        return engine.legacy_query("network", names or [], fields, QueryContext(config=cfg))


class AddTests(NetworkLUTestCase):
    def test_add_makes_pools_as_ganeti_does(self) -> None:
        self.ok(add("net1", "192.0.2.0/24", gateway="192.0.2.254", mac_prefix="AA:BB:CC",
                    add_reserved_ips=["192.0.2.10"], tags=["a"]))
        net = self.net("net1")
        self.assertEqual(net.mac_prefix, "aa:bb:cc")
        self.assertEqual(net.tags, ["a"])
        self.assertEqual(net.reservations, "0" * 256)
        pool = netpool.Pool.of(net)
        # network, master IP 192.0.2.1 (conflicts check), .10, gateway, broadcast
        self.assertEqual(pool.external_reservations(),
                         ["192.0.2.0", "192.0.2.1", "192.0.2.10", "192.0.2.254", "192.0.2.255"])
        self.assertIn(" - INFO: Reserved IP address of node 'node1.example.test' (192.0.2.1)", self.log)

    def test_node_addresses_reserved_unless_no_conflicts_check(self) -> None:
        self.ok(add("lo", "127.1.0.0/24"))
        self.assertIn("127.1.0.2", netpool.Pool.of(self.net("lo")).external_reservations())
        self.ok(add("lo2", "127.1.1.0/24", conflicts_check=False))
        self.assertEqual(netpool.Pool.of(self.net("lo2")).external_reservations(), ["127.1.1.0", "127.1.1.255"])

    def test_bad_networks_are_refused_and_change_nothing(self) -> None:
        self.ok(add("net1", "10.0.0.0/24"))
        self.fails(add("net1", "10.1.0.0/24"), "already exists")
        self.fails(add("big", "10.0.0.0/8"), "at most a /16")
        self.fails(add("host", "10.9.0.1/24"), "network")
        self.fails(add("gw", "10.2.0.0/24", gateway="10.3.0.1"), "does not contain")
        self.fails(add("over", "10.0.0.128/25"), "overlaps network 'net1'")
        self.fails(add("res", "10.4.0.0/24", add_reserved_ips=["10.5.0.1"]), "Cannot reserve")
        self.fails(add("mac", "10.6.0.0/24", mac_prefix="aa:bb"), "MAC address prefix")
        self.ok(add("over", "10.0.0.128/25", conflicts_check=False))


class ModifyConnectRemoveTests(NetworkLUTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(add("net1", "10.0.0.0/24", gateway="10.0.0.1"))

    def test_set_params(self) -> None:
        self.ok({"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": "net1", "gateway": "10.0.0.254",
                 "mac_prefix": "aa:00:01", "network6": "2001:db8::/64", "gateway6": "2001:db8::1"})
        net = self.net("net1")
        self.assertEqual((net.gateway, net.mac_prefix, net.network6, net.gateway6),
                         ("10.0.0.254", "aa:00:01", "2001:db8::/64", "2001:db8::1"))
        self.assertEqual(netpool.Pool.of(net).external_reservations(), ["10.0.0.0", "10.0.0.254", "10.0.0.255"])
        self.ok({"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": "net1", "add_reserved_ips": ["10.0.0.5", "10.0.0.0"],
                 "remove_reserved_ips": ["10.0.0.254", "10.0.0.77"]})
        self.assertIn(" - WARNING: Cannot unreserve Gateway's IP", self.log)
        self.assertTrue(any("Cannot release IP address 10.0.0.77" in line for line in self.log))
        self.assertIn("10.0.0.5", netpool.Pool.of(self.net("net1")).external_reservations())
        self.ok({"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": "net1", "gateway": "none", "mac_prefix": "none"})
        net = self.net("net1")
        self.assertEqual((net.gateway, net.mac_prefix), (None, None))
        self.assertNotIn("10.0.0.254", netpool.Pool.of(net).external_reservations())
        self.fails({"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": "net1", "gateway": "10.0.0.9",
                    "add_reserved_ips": ["10.0.0.8"]}, "Cannot modify gateway and reserved ips at once")

    def test_connect_disconnect_remove(self) -> None:
        self.ok(connect("net1", "rack2", "routed", "100", network_vlan=""))
        self.ok(connect("net1", "rack2"))
        self.assertIn(" - WARNING: Network 'net1' is already mapped to group 'rack2'", self.log)
        cfg = self.env.read_config()
        rack2 = cfg.find_group("rack2")
        assert rack2 is not None
        self.assertEqual(rack2.networks, {self.net("net1").uuid: {"mode": "routed", "link": "100", "vlan": ""}})
        self.assertEqual(self.query(["name", "group_list", "group_cnt", "inst_cnt"]),
                         [["net1", [["rack2", "routed", "100", ""]], 1, 0]])
        self.fails({"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"}, "still connected to node groups: rack2")
        self.ok({"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": "net1", "group_name": "rack2"})
        self.ok({"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": "net1", "group_name": "rack2"})
        self.assertIn(" - WARNING: Network 'net1' is not mapped to group 'rack2'", self.log)
        self.ok({"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"})
        self.assertEqual(self.env.read_config().networks, {})
        self.fails({"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"}, "Network 'net1' not found")

    def test_connect_refuses_nics_with_addresses_in_the_subnet(self) -> None:
        cfg = self.env.read_config()
        inst = cfg.find_instance("inst1.example.test")
        assert inst is not None
        nic = NIC(mac="aa:00:00:00:00:01", ip="10.0.0.50")
        cfg = attrs.evolve(cfg, instances=dict(cfg.instances, **{inst.uuid: attrs.evolve(inst, nics=[nic])}))
        self.env = Env(cfg)
        self.fails(connect("net1", "default"), r"Conflicting IP addresses found.*inst1.example.test: nic0/10.0.0.50")
        self.ok(connect("net1", "default", conflicts_check=False))

    def test_query_fields(self) -> None:
        self.assertEqual(len(RESOURCES["network"].fields), 19)
        row = self.query(["name", "network", "gateway", "network6", "mac_prefix", "free_count", "reserved_count",
                          "external_reservations", "inst_list", "tags", "serial_no"])
        self.assertEqual(row, [["net1", "10.0.0.0/24", "10.0.0.1", None, None, 253, 3,
                                "10.0.0.0, 10.0.0.1, 10.0.0.255", [], [], 1]])
        (mapping,) = self.query(["map"])[0]
        self.assertEqual(mapping, "XX" + "." * 253 + "X")


class StoreReservationTests(SynchronousTestCase):
    """WConfD keeps the instance pool with the instances, in the same change."""

    def setUp(self) -> None:
        cfg = network_config()
        net = netpool.Pool.initialize(Network(network="10.0.0.0/29")).apply(
            Network(name="net1", network="10.0.0.0/29", uuid=new_uuid(), **STAMP))
        self.net_uuid = net.uuid
        self.store = ConfigStore(attrs.evolve(cfg, networks={net.uuid: net}))

    def reservations(self) -> str:
        return self.store.maps["network"][self.net_uuid].reservations

    def test_add_update_remove_instance_reserve_and_release(self) -> None:
        inst = next(iter(self.store.maps["instance"].values()))
        nic = NIC(mac="aa:00:00:11:22:33", ip="10.0.0.2", network=self.net_uuid)
        stored, record = self.store.update("instance", attrs.evolve(inst, nics=[nic]).to_dict())
        self.assertEqual(self.reservations(), "00100000")
        self.assertIn(["network", self.net_uuid, self.store.maps["network"][self.net_uuid].to_dict()], record["c"])
        other = next(i for i in self.store.maps["instance"].values() if i.uuid != inst.uuid)
        with self.assertRaisesRegex(IpInUse, "10.0.0.2 is already in use in network net1"):
            self.store.update("instance", attrs.evolve(other, nics=[attrs.evolve(nic, mac="aa:00:00:11:22:34")]).to_dict())
        self.assertEqual(self.reservations(), "00100000", "a refused change reserves nothing")
        moved = attrs.evolve(stored, nics=[attrs.evolve(nic, ip="10.0.0.3")])
        stored, _ = self.store.update("instance", moved.to_dict())
        self.assertEqual(self.reservations(), "00010000")
        _, record = self.store.remove("instance", stored.uuid)
        self.assertEqual(self.reservations(), "00000000")
        replica = ConfigStore(network_config())
        replica.replay({"full": self.store.config().to_dict()})
        self.assertEqual(replica.maps["network"][self.net_uuid].reservations, "00000000")
