"""Hotplug of a disk into a real running kvm guest (TCG here) through the
cluster: C{gnt-instance modify --hotplug --disk add/N:remove}, the guest's
C{/sys/block} read on its serial console (L{ganeti.testing.guest_hotplug}).

Needs qemu-system-x86_64 (scripts/install-qemu) and the kernel and busybox
of scripts/install-guest; without them the test fails and says so.  One
qemu guest (128 MiB) runs at a time; every qemu is killed at the end.
"""

from __future__ import annotations

import os

import pytest_twisted
from twisted.internet import reactor

from ganeti.testing import guest_hotplug
from tests.integration.test_kvm_guest import need_guest_files, need_qemu


@pytest_twisted.ensureDeferred
async def test_disk_hotplug_into_a_running_guest():
    qemu = need_qemu()
    need_guest_files()
    result = await guest_hotplug.hotplug_scenario(reactor, qemu)
    text = result.get("console_text", "")
    print({k: v for k, v in result.items() if k != "console_text"})
    code, message = result["stopped_refusal"]
    assert code != 0 and "Hotplug is not possible" in message and "not running" in message, message
    assert result["disks_after_refusal"] == ["32"], result
    assert result["before"] == ["vda"], text
    assert "hotplug:done" in result["add_output"], result["add_output"]
    assert "next starts" not in result["add_output"], result["add_output"]
    assert result["disks_after_add"] == ["32", "16"], result
    assert result["after_add"] == ["vda", "vdb"], text
    code, message = result["running_refusal"]
    assert code != 0 and "stop it before removing disks, or remove them with --hotplug" in message, message
    assert result["disks_after_running_refusal"] == ["32", "16"], result
    assert "hotplug:done" in result["remove_output"], result["remove_output"]
    assert result["after_remove"] == ["vda"], text
    assert result["disks_after_remove"] == ["32"], result
    assert result["qemu_left"] == [] and result["killed"] == [], result


@pytest_twisted.ensureDeferred
async def test_nic_and_disk_hotplug_survive_a_live_migration():
    """A NIC and a disk hot-added into the running guest (seen in its /sys), a live migration to the
    other node (the target's qemu has them at the same PCI slots: the guest keeps both, its disk
    token reads back), then both hot-removed on the new primary."""
    from ganeti.daemons import free_port

    qemu = need_qemu()
    need_guest_files()
    result = await guest_hotplug.nic_migration_scenario(reactor, qemu, free_port("127.0.1.1"))
    text = result.get("console_text", "")
    print({k: v for k, v in result.items() if k != "console_text"})
    code, message = result["stopped_refusal"]
    assert code != 0 and "Hotplug is not possible" in message, message
    assert result["macs_after_refusal"] == [], result
    assert list(result["nets_before"]) == ["lo"], text
    assert "hotplug:done" in result["nic_add_output"], result["nic_add_output"]
    (mac,) = result["macs"]
    assert result["nets_after_add"] == {"lo": "00:00:00:00:00:00", "eth0": mac}, text
    assert "hotplug:done" in result["disk_add_output"], result["disk_add_output"]
    assert result["blocks_after_add"] == ["vda", "vdb"], text
    assert "* done" in result["migrate_output"], result["migrate_output"]
    assert result["primary"] == [guest_hotplug.N2, "running"], result
    assert result["tick_after"] >= result["tick_before"] >= 0, text    # the same guest, not rebooted
    assert result["nets_after_migration"] == {"lo": "00:00:00:00:00:00", "eth0": mac}, text
    assert result["blocks_after_migration"] == ["vda", "vdb"], text
    assert result["token_after_migration"] == "HOTDISK-%d" % os.getpid(), text
    assert "hotplug:done" in result["nic_remove_output"], result["nic_remove_output"]
    assert list(result["nets_after_remove"]) == ["lo"], text
    assert "hotplug:done" in result["disk_remove_output"], result["disk_remove_output"]
    assert result["blocks_after_remove"] == ["vda"], text
    assert result["macs_after_remove"] == [], result
    assert result["qemu_left"] == [] and result["killed"] == [], result
