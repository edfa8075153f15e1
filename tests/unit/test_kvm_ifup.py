"""A kvm NIC's tap set up as Ganeti's kvm-ifup (L{ganeti.backend.hypervisor.kvm_ifup}), against a fake runner."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import attrs
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.trial.unittest import SynchronousTestCase

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm_ifup
from ganeti.objects import NIC, Instance
from tests.unit.test_kvm_hypervisor import NAME, UUID, KVMTestCase, instance

TAP = "gk0123456789n0"


class FakeRunner:
    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str]] | None = None) -> None:
        self.ran: list[list[str]] = []
        self.envs: list[dict[str, str] | None] = []
        self.answers = answers or {}

    def __call__(self, argv: list[str], env: dict[str, str] | None = None) -> Deferred[tuple[int, str]]:
        self.ran.append(argv)
        self.envs.append(env)
        return succeed(self.answers.get(tuple(argv), (0, "")))


def env(**extra: str) -> dict[str, str]:
    return dict({"INSTANCE": "web1", "MAC": "aa:00:00:11:22:33", "INTERFACE": TAP, "INTERFACE_INDEX": "0"}, **extra)


class IfupTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.conf = tempfile.mkdtemp(prefix="gntifup")
        self.addCleanup(lambda: __import__("shutil").rmtree(self.conf, ignore_errors=True))

    def up(self, runner: FakeRunner, **extra: str) -> Any:
        return ensureDeferred(kvm_ifup.Ifup(runner, self.conf).up(env(**extra)))

    def test_bridged_as_ganeti(self) -> None:
        """fix_mac (first octet fe), up, the bridge's MTU, then the bridge."""
        runner = FakeRunner({
            ("ip", "-o", "link", "show", "dev", TAP): (0, "9: %s: <BROADCAST> mtu 1500 qdisc noop\\    "
                                                          "link/ether 5a:11:22:33:44:55 brd ff:ff:ff:ff:ff:ff" % TAP),
            ("ip", "-o", "-d", "link", "show", "dev", "br0"): (0, "3: br0: <UP> mtu 9000 qdisc noqueue\\ bridge "
                                                                  "forward_delay 1500 vlan_filtering 0")})
        self.successResultOf(self.up(runner, MODE="bridged", LINK="br0", BRIDGE="br0"))
        self.assertEqual(runner.ran[1:], [
            ["ip", "link", "set", "dev", TAP, "address", "fe:11:22:33:44:55"], ["ip", "link", "set", "dev", TAP, "up"],
            ["ip", "-o", "-d", "link", "show", "dev", "br0"], ["ip", "link", "set", "dev", TAP, "mtu", "9000"],
            ["ip", "link", "set", "dev", TAP, "master", "br0"]])

    def test_bridged_vlans_need_vlan_filtering(self) -> None:
        runner = FakeRunner({("ip", "-o", "-d", "link", "show", "dev", "br0"): (0, "br0: mtu 1500 vlan_filtering 0")})
        failure = self.failureResultOf(self.up(runner, MODE="bridged", LINK="br0", VLAN=".100"), kvm_ifup.IfupError)
        self.assertIn("configured for VLAN support, but bridge br0 has VLAN filtering disabled", str(failure.value))

    def test_bridged_vlans_on_the_tap_and_the_uplinks(self) -> None:
        """First VLAN untagged (PVID), the others tagged; the bridge's uplinks (not taps) get them too."""
        runner = FakeRunner({
            ("ip", "-o", "-d", "link", "show", "dev", "br0"): (0, "br0: mtu 1500 vlan_filtering 1"),
            ("ip", "-o", "link", "show", "master", "br0"): (0, "4: eth1@if5: <UP> mtu 1500 master br0"
                                                               "\n7: gkffffffffffn0: <UP> mtu 1500 master br0\n"
                                                               "8: tap3: <UP> mtu 1500 master br0")})
        self.successResultOf(self.up(runner, MODE="bridged", LINK="br0", VLAN="100:200"))
        self.assertEqual([argv for argv in runner.ran if argv[0] == "bridge"], [
            ["bridge", "vlan", "add", "dev", TAP, "vid", "100", "pvid", "untagged", "master"],
            ["bridge", "vlan", "add", "dev", "eth1", "vid", "100", "master"],
            ["bridge", "vlan", "add", "dev", TAP, "vid", "200", "master"],
            ["bridge", "vlan", "add", "dev", "eth1", "vid", "200", "master"]])

    def test_vlan_syntax(self) -> None:
        self.assertEqual(kvm_ifup.parse_vlan(".10"), ("10", []))
        self.assertEqual(kvm_ifup.parse_vlan("10"), ("10", []))
        self.assertEqual(kvm_ifup.parse_vlan(":10:20"), (None, ["10", "20"]))
        self.assertEqual(kvm_ifup.parse_vlan(".10:20:30"), ("10", ["20", "30"]))
        self.assertEqual(kvm_ifup.parse_vlan(""), (None, []))
        self.assertRaises(kvm_ifup.IfupError, kvm_ifup.parse_vlan, ".ten")

    def test_openvswitch_trunks(self) -> None:
        runner = FakeRunner()
        self.successResultOf(self.up(runner, MODE="openvswitch", LINK="ovs0", VLAN=":20:30"))
        self.assertEqual(runner.ran[-1], ["ovs-vsctl", "--timeout=30", "set", "port", TAP, "trunks=20,30"])
        self.assertNotIn("tag=", " ".join(" ".join(argv) for argv in runner.ran))

    def test_routed_without_a_link_uses_the_main_table(self) -> None:
        runner = FakeRunner()
        self.successResultOf(self.up(runner, MODE="routed", IP="192.0.2.5"))
        self.assertEqual(runner.ran[1], ["ip", "route", "replace", "192.0.2.5", "proto", "static", "dev", TAP])
        self.assertFalse([argv for argv in runner.ran if argv[:2] == ["ip", "rule"]])

    def test_a_failing_command_names_itself(self) -> None:
        runner = FakeRunner({("ip", "link", "set", "dev", TAP, "master", "br9"): (1, 'Cannot find device "br9"')})
        failure = self.failureResultOf(self.up(runner, MODE="bridged", LINK="br9"), kvm_ifup.IfupError)
        self.assertEqual(str(failure.value), "Failed to configure interface %s: ip link set dev %s master br9 "
                                             'failed: Cannot find device "br9"' % (TAP, TAP))

    def test_custom_script_replaces_the_built_in_setup(self) -> None:
        """An executable kvm-vif-bridge in the configuration directory runs with Ganeti's environment
        instead (Ganeti's kvm-ifup execs it); its failure is the NIC's."""
        script = os.path.join(self.conf, "kvm-vif-bridge")
        with open(script, "w") as handle:
            handle.write("#!/bin/sh\nexit 0\n")
        os.chmod(script, 0o755)
        runner = FakeRunner()
        self.successResultOf(self.up(runner, MODE="bridged", LINK="br0"))
        self.assertEqual(runner.ran, [[script]])
        self.assertEqual(runner.envs[0], env(MODE="bridged", LINK="br0"))
        runner = FakeRunner({(script,): (3, "no such bridge")})
        failure = self.failureResultOf(self.up(runner, MODE="bridged", LINK="br0"), kvm_ifup.IfupError)
        self.assertIn("exited with 3; network configuration script output: no such bridge", str(failure.value))

    def test_environment_as_ganeti(self) -> None:
        entry = kvm_ifup.nic_entry("web1", 1, {"mac": "aa:00:00:00:00:01", "uuid": "u1",
                                               "nicparams": {"mode": "bridged", "link": "br0"}}, TAP)
        self.assertEqual(kvm_ifup.environment("web1", ["a", "b"], 1, entry), {
            "INSTANCE": "web1", "MAC": "aa:00:00:00:00:01", "MODE": "bridged", "INTERFACE": TAP,
            "INTERFACE_INDEX": "1", "INTERFACE_UUID": "u1", "TAGS": "a b", "LINK": "br0", "BRIDGE": "br0"})

    def test_bad_nics_refused(self) -> None:
        for params, message in (({"mode": "pool", "link": "x"}, "mode 'pool' is not supported"),
                                ({"mode": "openvswitch"}, "mode openvswitch needs a link")):
            with self.assertRaises(kvm_ifup.hv.HypervisorError) as caught:
                kvm_ifup.nic_entry("web1", 0, {"nicparams": params}, TAP)
            self.assertIn(message, str(caught.exception))

    def test_down_removes_ports_rules_and_a_left_tap(self) -> None:
        runner = FakeRunner({("ip", "rule", "del", "dev", TAP): (2, "")})
        self.successResultOf(ensureDeferred(kvm_ifup.Ifup(runner, self.conf).down(
            {"tap": TAP, "mode": "openvswitch", "link": "ovs0"})))
        self.assertEqual(runner.ran, [["ovs-vsctl", "--timeout=30", "--if-exists", "del-port", TAP],
                                      ["ip", "link", "show", "dev", TAP], ["ip", "link", "delete", "dev", TAP]])
        self.assertLessEqual(len(kvm_ifup.tap_name("/" * 200, "u" * 36, 31)), 15)


class HypervisorTests(KVMTestCase):
    """The kvm hypervisor runs L{kvm_ifup} at start, stop and migration (the fake node answers C{(0, "")})."""

    def test_routed_nic_gets_its_route_in_the_link_table(self) -> None:
        """A routed NIC (e.g. on a network connected with mode=routed,link=100), as Ganeti's kvm-ifup:
        its tap up, traffic from the tap looked up in table 100, its address routed to the tap there,
        proxy ARP and forwarding on the tap; stopped, the tap's rules go too."""
        inst = Instance(name=NAME, uuid=UUID, hypervisor="kvm", beparams={"maxmem": 256},
                        hvparams={"kvm_path": "/bin/sh"},
                        nics=[NIC(mac="aa:00:00:11:22:34", ip="10.9.0.2", nicparams={"mode": "routed", "link": "100"})])
        self.successResultOf(self.drive(self.kvm.start_instance(inst, [], False)))
        [(argv, _log)] = self.node.spawned
        [tap] = [arg.split("ifname=")[1].split(",")[0] for arg in argv if "ifname=" in arg]
        self.assertEqual(self.node.ran[:2], [["ip", "link", "set", "dev", tap, "up"], ["ip", "rule", "del", "dev", tap]])
        self.assertEqual(self.node.ran[-4:], [
            ["ip", "rule", "add", "dev", tap, "table", "100"],
            ["ip", "route", "replace", "10.9.0.2", "table", "100", "proto", "static", "dev", tap],
            ["sysctl", "-q", "-w", "net.ipv4.conf.%s.proxy_arp=1" % tap, "net.ipv4.conf.%s.forwarding=1" % tap],
            ["sysctl", "-q", "-e", "-w", "net.ipv6.conf.%s.proxy_ndp=1" % tap, "net.ipv6.conf.%s.forwarding=1" % tap],
        ])
        self.node.ran.clear()
        self.node.answers[("ip", "rule", "del", "dev", tap)] = (2, "RTNETLINK answers: No such file or directory")
        self.node.answers[("ip", "link", "show", "dev", tap)] = (1, 'Device "%s" does not exist.' % tap)
        self.successResultOf(self.drive(self.kvm.stop_instance(inst, force=True, timeout=0)))
        self.assertEqual(self.node.ran, [["ip", "rule", "del", "dev", tap], ["ip", "link", "show", "dev", tap]])

    def test_routed_nic_without_an_address_is_refused(self) -> None:
        """As Ganeti's kvm-ifup: "Routed NIC but no IP address specified"; qemu does not stay."""
        inst = Instance(name=NAME, uuid=UUID, hypervisor="kvm", beparams={"maxmem": 256},
                        hvparams={"kvm_path": "/bin/sh"},
                        nics=[NIC(mac="aa:00:00:11:22:35", nicparams={"mode": "routed", "link": "100"})])
        failure = self.failureResultOf(self.drive(self.kvm.start_instance(inst, [], False)), hv.HypervisorError)
        self.assertIn("routed NIC but no IP address specified", str(failure.value))
        self.assertEqual(self.kvm.list_instances(), [])

    def test_target_connects_routed_nics_at_the_finalize(self) -> None:
        """As Ganeti: the target's bridged tap joins its bridge when its qemu starts, its routed tap gets
        its route only once the migration is finalized (the guest runs there); the source's routed tap
        loses its policy rule when the source's qemu ends."""
        inst = attrs.evolve(instance(migration_port=8200), nics=[
            NIC(mac="aa:00:00:00:00:01", nicparams={"mode": "bridged", "link": "br0"}, uuid="n1"),
            NIC(mac="aa:00:00:00:00:02", ip="192.0.2.9", nicparams={"mode": "routed", "link": "7"}, uuid="n2")])
        self.start(inst)
        self.node.ran.clear()
        self.target = self.make(self.short_root())
        info = self.kvm.migration_info(inst)
        self.successResultOf(self.drive(self.target.accept_instance(inst, json.loads(json.dumps(info)), "192.0.2.2")))
        target = self.node.qemu_of(self.target)
        tap0, tap1 = (n["tap"] for n in json.loads(open(self.target.files(NAME).conf).read())["nics"])
        self.assertIn(["ip", "link", "set", "dev", tap0, "master", "br0"], self.node.ran)
        self.assertFalse([argv for argv in self.node.ran if tap1 in argv])
        self.successResultOf(self.drive(self.kvm.migrate_instance(inst, "192.0.2.2")))
        self.node.ran.clear()
        self.successResultOf(self.drive(self.target.finalize_migration(inst, None, True)))
        self.assertEqual(target.commands()[-1], "cont")
        self.assertIn(["ip", "route", "replace", "192.0.2.9", "table", "7", "proto", "static", "dev", tap1],
                      self.node.ran)
        self.assertFalse([argv for argv in self.node.ran if tap0 in argv])
        self.node.ran.clear()
        source_tap = json.loads(open(self.kvm.files(NAME).conf).read())["nics"][1]["tap"]
        self.node.answers[("ip", "rule", "del", "dev", source_tap)] = (2, "no such rule")
        self.successResultOf(self.drive(self.kvm.finalize_migration(inst, None, True)))
        self.assertIn(["ip", "rule", "del", "dev", source_tap], self.node.ran)
        self.assertEqual(self.target.list_instances(), [NAME])

