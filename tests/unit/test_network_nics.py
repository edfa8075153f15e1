"""NICs on networks (L{ganeti.cmdlib.instance_networks}): creation, modification and
removal of instances reserve and release pool addresses, NICs inherit the group
connection's mode and link, and bad requests change nothing."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti import network as netpool
from ganeti.cmdlib import instance_networks as inetworks
from ganeti.jobs import model
from ganeti.objects import Network
from tests.unit.instance_fakes import N2, FakeNodes, cluster
from tests.unit.test_cmdlib_instance import WEB, InstanceTestCase, create, op
from tests.unit.test_processor import Env


class NicNetworkTests(InstanceTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = FakeNodes()
        self.next_id = 100
        self.ok({"OP_ID": "OP_NETWORK_ADD", "network_name": "net1", "network": "10.9.0.0/29", "gateway": "10.9.0.1",
                 "mac_prefix": "aa:11:22"})
        self.ok({"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1", "group_name": "default",
                 "network_mode": "routed", "network_link": "rt100", "network_vlan": ""})

    def net(self) -> Network:
        (net,) = self.cfg().networks.values()
        return net

    def error(self, op: dict[str, Any], kind: str = "OpPrereqError", code: str | None = None) -> str:
        """L{LUTestCase.error}, and the config unchanged."""
        before = self.cfg().serial_no
        message = super().error(op, kind, code)
        self.assertEqual(self.cfg().serial_no, before, "nothing changed")
        return message

    def test_pool_addresses_inherited_params_and_release_on_remove(self) -> None:
        self.ok(create(pnode=N2, nics=[{"network": "net1", "ip": "pool"}, {"network": "net1", "ip": "pool"}]))
        first, second = self.instance().nics
        self.assertEqual((first.ip, second.ip), ("10.9.0.2", "10.9.0.3"))
        self.assertEqual(first.network, self.net().uuid)
        self.assertEqual(first.nicparams, {"mode": "routed", "link": "rt100", "vlan": ""})
        self.assertTrue(first.mac.startswith("aa:11:22:"), "the network's MAC prefix")
        self.assertIn(" - INFO: Chose IP 10.9.0.2 from network net1", self.log)
        self.assertEqual(self.net().reservations, "00110000")
        self.ok(create("web2.example.test", pnode=N2, nics=[{"network": "net1", "ip": "10.9.0.5"}]))
        self.assertEqual(self.net().reservations, "00110100")
        message = self.error(create("web3.example.test", pnode=N2, nics=[{"network": "net1", "ip": "10.9.0.5"}]),
                             code=errors.ECODE_NOTUNIQUE)
        self.assertIn("IP address 10.9.0.5 already in use or does not belong to network net1", message)
        self.ok(create("web3.example.test", pnode=N2, nics=[{"network": "net1", "ip": "pool"}]))
        self.assertEqual(self.net().reservations, "00111100")
        self.ok(create("web4.example.test", pnode=N2, nics=[{"network": "net1", "ip": "pool"}]))
        message = self.error(create("web5.example.test", pnode=N2, nics=[{"network": "net1", "ip": "pool"}]),
                             code=errors.ECODE_STATE)
        self.assertIn("Unable to get a free IP for NIC 0 from the address pool", message)
        self.ok(op("REMOVE"))
        self.assertEqual(self.net().reservations, "00001110")
        self.assertIn("web2.example.test: nic0/10.9.0.5", self.error(
            {"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": "net1", "group_name": "default"}, code=errors.ECODE_STATE))

    def test_refusals(self) -> None:
        cases = [
            ({"network": "net1", "mode": "bridged"}, "no mode or link"),
            ({"ip": "pool"}, "ip=pool, parameter network must be passed too"),
            ({"network": "nope"}, "network 'nope' not found"),
            ({"network": "net1", "ip": "10.8.0.1"}, "does not belong to network net1"),
            ({"network": "net1", "ip": "10.9.0.1"}, "already in use"),  # the gateway (external)
            ({"ip": "10.9.0.4"}, "belongs to network net1, but the target NIC does not"),
        ]
        for nic, pattern in cases:
            self.assertIn(pattern, self.error(create(pnode=N2, nics=[nic])))
        self.ok(create(pnode=N2, nics=[{"network": "net1", "ip": "10.9.0.1"}], conflicts_check=False))
        self.assertEqual(self.instance().nics[0].ip, "10.9.0.1")

    def test_not_connected_to_the_group(self) -> None:
        self.ok({"OP_ID": "OP_NETWORK_ADD", "network_name": "net2", "network": "10.10.0.0/24"})
        self.assertIn("No netparams found for network net2",
                      self.error(create(pnode=N2, nics=[{"network": "net2", "ip": "pool"}])))

    def test_modify_moves_addresses(self) -> None:
        self.ok(create(pnode=N2, nics=[{}]))
        self.ok(op("SET_PARAMS", nics=[["modify", 0, {"network": "net1", "ip": "pool"}]]))
        (nic,) = self.instance().nics
        self.assertEqual((nic.ip, nic.nicparams["mode"]), ("10.9.0.2", "routed"))
        self.assertTrue(nic.mac.startswith("aa:11:22:"), "a new MAC under the network's prefix: %s" % nic.mac)
        self.assertEqual(self.net().reservations, "00100000")
        self.ok(op("SET_PARAMS", nics=[["modify", 0, {"ip": "10.9.0.6"}]]))
        self.assertEqual(self.net().reservations, "00000010")
        self.ok(op("SET_PARAMS", nics=[["add", -1, {"network": "net1", "ip": "pool"}]]))
        self.assertEqual(self.net().reservations, "00100010")
        self.ok(op("SET_PARAMS", nics=[["remove", 0, {}]]))
        self.assertEqual(self.net().reservations, "00100000")
        self.assertEqual(netpool.Pool.of(self.net()).free_count(), 4)
        self.assertEqual(self.cfg().find_instance(WEB).nics[0].ip, "10.9.0.2")

    def test_parallel_creations_get_distinct_addresses(self) -> None:
        """Creations on different nodes draw from one pool at once: each ends with its own
        address (one that lost a race draws again), and the pool lists exactly theirs."""
        self.ok({"OP_ID": "OP_NETWORK_ADD", "network_name": "big", "network": "10.11.0.0/24"})
        self.ok({"OP_ID": "OP_NETWORK_CONNECT", "network_name": "big", "group_name": "default",
                 "network_mode": "bridged", "network_link": "br1"})
        nodes = sorted(n.name for n in self.cfg().nodes.values())
        draws: list[dict[int, str]] = []
        draw = inetworks.draw_pool_ips

        def counting(*args: Any, **kwargs: Any) -> dict[int, str]:
            draws.append(draw(*args, **kwargs))
            return draws[-1]

        self.patch(inetworks, "draw_pool_ips", counting)
        runs = [self.env.start(700 + i, [create("p%02d.example.test" % i, pnode=nodes[i % len(nodes)],
                                                nics=[{"network": "big", "ip": "pool"}])],
                               settle=False, rpc_factory=lambda: self.rpc) for i in range(6)]
        self.env.settle()
        for _ in range(1000):
            if all(r.done.called for r in runs):
                break
            self.env.advance(0.25)
        self.assertEqual([r.ops[0].status for r in runs], [model.SUCCESS] * 6, [r.ops[0].result for r in runs])
        cfg = self.cfg()
        ips = sorted(i.nics[0].ip for i in cfg.instances.values())
        self.assertEqual(ips, ["10.11.0.%d" % n for n in range(1, 7)])
        (big,) = [n for n in cfg.networks.values() if n.name == "big"]
        self.assertEqual(big.reservations, "0" + "1" * 6 + "0" * 249)
        self.assertGreater(len(draws), 6, "some creation lost a race and drew again")
