"""kvm NICs in bridged, routed and openvswitch mode with a real guest (TCG here), the nodes in network
namespaces the test makes (L{ganeti.testing.guest_nics}): the guest configures each interface on its serial
console and answers pings from its node's namespace through the bridge, the route to its tap and an Open
vSwitch switch with the userspace datapath; a NIC on a network takes the mode and link of the network's
connection to the group; a hot-added NIC answers too; a live migration takes the setup to the target.

Needs qemu-system-x86_64 (scripts/install-qemu), the kernel and busybox of scripts/install-guest and Open
vSwitch (scripts/install-openvswitch); without them the tests fail and say so.  One guest (128 MiB) at a time.
"""

from __future__ import annotations

import os

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.testing import guest_nics
from ganeti.testing.guest_migration import spins_in_place
from tests.integration.test_kvm_guest import need_guest_files, need_qemu


def need_namespaces() -> None:
    why = guest_nics.unavailable()
    if why is not None:
        pytest.fail("network namespaces are needed: %s" % why)


@pytest_twisted.ensureDeferred
async def test_bridged_routed_and_openvswitch_nics_answer_pings():
    qemu = need_qemu()
    need_guest_files()
    need_namespaces()
    missing = guest_nics.openvswitch_missing()
    if missing is not None:
        pytest.fail(missing)
    result = await guest_nics.nic_modes_scenario(reactor, qemu, "gntnm%d" % (os.getpid() % 100000))
    text = result.get("console_text", "")
    print({k: v for k, v in result.items() if k not in ("console_text", "ovs_log")})
    bridged, routed, ovs = result["nics"]
    assert (bridged["mode"], bridged["link"]) == ("bridged", guest_nics.BRIDGE), result["nics"]
    # the NIC on network rnet took the connection's mode and link, and the pool's first address
    assert (routed["mode"], routed["link"], routed["network"]) == ("routed", guest_nics.TABLE, "rnet"), routed
    assert routed["ip"] == guest_nics.ROUTED_NET + ".1", routed
    assert (ovs["mode"], ovs["link"]) == ("openvswitch", guest_nics.OVS), result["nics"]
    running = result["taps_running"]
    assert len(running["taps"]) == 3, running
    assert running["ports"] and all(port in running["taps"] for port in running["ports"]), running
    assert any(routed["ip"] in route and "proto static" in route for route in running["routes"]), running
    assert len(running["rules"]) == 1 and "lookup %s" % guest_nics.TABLE in running["rules"][0], running
    assert result["routed_proxy_arp"] == "1", result
    assert result["ovs_tag"] == guest_nics.OVS_VLAN, result
    assert result["pings"]["bridged"] > 0, text
    assert result["pings"]["routed"] > 0, text
    assert result["pings"]["openvswitch"] > 0, (text, result["ovs_log"])
    assert "hotplug:done" in result["hot_add_output"], result["hot_add_output"]
    assert result["hot_ping"] > 0, text
    assert "hotplug:done" in result["hot_remove_output"], result["hot_remove_output"]
    assert len(result["taps_after_hot_remove"]) == 3, result
    assert result["after_stop"] == {"taps": [], "rules": [], "routes": [], "ports": []}, result
    assert result["qemu_left"] == [] and result["killed"] == [], result


@pytest_twisted.ensureDeferred
async def test_nics_follow_a_live_migration():
    qemu = need_qemu()
    need_guest_files()
    need_namespaces()
    missing = guest_nics.openvswitch_missing()
    if missing is not None:
        pytest.fail(missing)
    result = await guest_nics.nic_migration_scenario(reactor, qemu, "gntnv%d" % (os.getpid() % 100000))
    text = result.get("console_text", "")
    print({k: v for k, v in result.items() if k != "console_text"})
    assert all(result["pings_before"].values()), (result, text)
    assert "* done" in result["migrate_output"], result["migrate_output"]
    assert result["primary"] == [guest_nics.N2, "running"], result
    assert result["node1_after"] == {"taps": [], "rules": [], "routes": [], "ports": []}, result
    node2 = result["node2_after"]
    assert len(node2["taps"]) == 3 and len(node2["rules"]) == 1 and len(node2["ports"]) == 1, result
    assert result["node2_after_stop"] == {"taps": [], "rules": [], "routes": [], "ports": []}, result
    assert result["remove_exit"] == 0, result
    assert result["qemu_left"] == [] and result["killed"] == [], result
    if not all(result["pings_after"].values()):
        seen = result["guest_after"]
        livelocked = "soft lockup" in result["console_after"] or spins_in_place(seen["qmp"])
        if seen["tcg"] and livelocked:
            # The emulated (TCG) guest's kernel stuck in one short loop after its move, as in test_rbd: what
            # the cluster did (the NICs' taps, rule, route and port on node2, none left on node1) is checked above.
            pytest.xfail("the emulated (TCG) guest's kernel livelocked after its live migration: %s" % seen["qmp"])
    assert result["pings_after"]["bridged"] > 0, result
    assert result["pings_after"]["routed"] > 0, result
    assert result["pings_after"]["openvswitch"] > 0, result
