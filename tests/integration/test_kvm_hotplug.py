"""Hotplug of a disk into a real running kvm guest (TCG here) through the
cluster: C{gnt-instance modify --hotplug --disk add/N:remove}, the guest's
C{/sys/block} read on its serial console (L{ganeti.testing.guest_hotplug}).

Needs qemu-system-x86_64 (scripts/install-qemu) and the kernel and busybox
of scripts/install-guest; without them the test fails and says so.  One
qemu guest (128 MiB) runs at a time; every qemu is killed at the end.
"""

from __future__ import annotations

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
