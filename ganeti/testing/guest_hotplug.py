"""Hotplug of a disk into a real running guest, the way an admin does it.

L{hotplug_scenario}: a one-node loopback cluster with kvm (as
L{guest_cluster.boot_guest}), a file instance with one disk and the
busybox guest of L{ganeti.testing.guest}, not started.  Then:

  1. C{gnt-instance modify --hotplug --disk add:size=16M} of the stopped
     instance is refused and changes nothing;
  2. it starts, its console shows the guest up;
  3. C{modify --hotplug --disk add:size=16M}: the guest's C{/sys/block}
     lists C{vdb} (asked on the console);
  4. C{modify --disk 1:remove} without hotplug is refused (the instance
     is marked up) and changes nothing;
  5. C{modify --hotplug --disk 1:remove}: C{vdb} is gone from the guest
     and the instance has one disk again.

Every qemu of the cluster's roots is killed at the end, also on failure.
Used by C{tests/integration/test_kvm_hotplug.py}.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from typing import Any

from ganeti.paths import Paths
from ganeti.testing import guest
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.guest_cluster import N1, NAME, ConsoleReader, kill_qemus, qemu_pids


def _disks(root: Paths) -> list[str]:
    return ok(root, "gnt-instance", "list", "--no-headers", "-o", "disk.sizes", NAME).strip().split(",")


def _block_devices(console: ConsoleReader, tag: str, timeout: float) -> list[str]:
    """The guest's C{/sys/block} entries, asked on its console."""
    console.send(b"echo %s-$(ls /sys/block | tr '\\n' ,)\n" % tag.encode())
    _when, line = console.wait_for("^%s-" % re.escape(tag), timeout)
    return [name for name in line.split("-", 1)[1].split(",") if name]


async def hotplug_scenario(reactor: Any, qemu: str, timeout: float = 120.0) -> dict[str, Any]:
    """Run the steps of the module docstring; what each step showed."""
    kernel = guest.kernel_image()
    scratch = tempfile.mkdtemp(prefix="gnthot-")
    root = Paths(tempfile.mkdtemp(prefix="gnthot-r"))
    cluster = None
    roots = [root]
    result: dict[str, Any] = {}
    console = None
    try:
        initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
        cluster = await LoopbackCluster(reactor, root, loopback_config(1), prefix="gnthot-n").start()
        roots = [root] + list(cluster.roots)
        ok(root, "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake", "-H", "kvm:kvm_path=%s" % qemu)
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=32M", "-n", N1, "-o", "noop", "--no-nics",
           "-B", "memory=128M", "--no-name-check", "--no-ip-check", "--no-start", "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=quiet" % (kernel, initrd), NAME)
        refused = gnt(root, "gnt-instance", "modify", "--hotplug", "--disk", "add:size=16M", NAME)
        result["stopped_refusal"] = (refused.returncode, refused.stderr + refused.stdout)
        result["disks_after_refusal"] = _disks(root)
        t0 = time.monotonic()
        ok(root, "gnt-instance", "startup", NAME)
        console = ConsoleReader(root, NAME, t0)
        console.wait_for("^" + re.escape(guest.READY_LINE), timeout)
        console.wait_for(re.escape(guest.DISK_PREFIX), 30)
        result["before"] = _block_devices(console, "before", 30)
        start = time.monotonic()
        result["add_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--disk", "add:size=16M", NAME)
        result["add_s"] = round(time.monotonic() - start, 3)
        result["disks_after_add"] = _disks(root)
        deadline = time.monotonic() + 30
        seen = _block_devices(console, "added0", 30)
        attempt = 1
        while "vdb" not in seen and time.monotonic() < deadline:  # the guest's kernel probes the new PCI device
            time.sleep(0.5)
            seen = _block_devices(console, "added%d" % attempt, 30)
            attempt += 1
        result["after_add"] = seen
        refused = gnt(root, "gnt-instance", "modify", "--disk", "1:remove", NAME)
        result["running_refusal"] = (refused.returncode, refused.stderr + refused.stdout)
        result["disks_after_running_refusal"] = _disks(root)
        start = time.monotonic()
        result["remove_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--disk", "1:remove", NAME)
        result["remove_s"] = round(time.monotonic() - start, 3)
        result["after_remove"] = _block_devices(console, "removed", 30)
        result["disks_after_remove"] = _disks(root)
        result["console_exit"] = console.close()
        console = None
        ok(root, "gnt-instance", "shutdown", "--timeout", "1", NAME)
        ok(root, "gnt-instance", "remove", "-f", NAME)
        result["qemu_left"] = qemu_pids(roots)
    finally:
        if console is not None:
            result["console_text"] = console.text()
            console.close()
        result["killed"] = kill_qemus(roots)
        if cluster is not None:
            await cluster.stop()
        kill_qemus(roots)
        if not os.environ.get("GUEST_KEEP"):
            shutil.rmtree(root.root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return result
