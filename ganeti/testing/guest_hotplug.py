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
from ganeti.testing.guest_cluster import N1, NAME, ConsoleReader, GuestError, kill_qemus, qemu_pids
from ganeti.testing.guest_migration import qmp_socket, qmp_status
from ganeti.testing.netns import Namespaces, NetnsCluster


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
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s" % (kernel, initrd, guest.KERNEL_ARGS),
           NAME)
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
        await _tear_down(result, console, cluster, roots, root, scratch)
    return result


# --- NICs and disks hot-added, then a live migration ----------------------------
#: the hot-added NIC: routed, an address of TEST-NET-1, its link a routing table (the node routes the
#: address to the NIC's tap there and adds a policy rule for the tap, as Ganeti's kvm-ifup), each node in a
#: network namespace of the test's (L{ganeti.testing.netns}), so the host's routing is not touched
NIC_SPEC = "add:mode=routed,ip=192.0.2.10,link=%d" % (20000 + os.getpid() % 10000)
N2 = "node2.test"


def _nets(console: ConsoleReader, tag: str, timeout: float) -> dict[str, str]:
    """The guest's network interfaces (C{/sys/class/net}) and their MACs, asked on its console."""
    # lines stay short: busybox's line editor goes wrong past the terminal's 80 columns
    console.send(b"n(){ for i in /sys/class/net/*;do echo ${i##*/}=$(cat $i/address);done;}\n")
    console.send(b"echo %s-$(n|tr '\\n' ,)\n" % tag.encode())
    _when, line = console.wait_for("^%s-" % re.escape(tag), timeout)
    return dict(item.split("=", 1) for item in line.split("-", 1)[1].split(",") if "=" in item)


def _until(probe: Any, done: Any, tag: str, timeout: float = 30.0) -> Any:
    """Ask C{probe(tag-N)} until C{done(answer)} (the guest's kernel probes a new PCI device, or lets go of
    one, in its own time); the last answer."""
    deadline = time.monotonic() + timeout
    attempt = 0
    seen = probe("%s%d" % (tag, attempt))
    while not done(seen) and time.monotonic() < deadline:
        time.sleep(0.5)
        attempt += 1
        seen = probe("%s%d" % (tag, attempt))
    return seen


def _macs(root: Paths) -> list[str]:
    return [m for m in ok(root, "gnt-instance", "list", "--no-headers", "-o", "nic.macs", NAME).strip().split(",")
            if m and m != "-"]


async def nic_migration_scenario(reactor: Any, qemu: str, migration_port: int,
                                 timeout: float = 120.0) -> dict[str, Any]:
    """A two-node cluster (each node in a network namespace), a C{sharedfile} instance of the busybox guest
    without NICs; hot-add a NIC (refused while it is stopped) and a disk,
    write a token to the new disk, migrate live to node2, look again from
    inside the guest, then hot-remove both there.  What each step showed."""
    kernel = guest.kernel_image()
    scratch = tempfile.mkdtemp(prefix="gnthm-")
    root = Paths(tempfile.mkdtemp(prefix="gnthm-r"))
    cluster = None
    roots = [root]
    result: dict[str, Any] = {"console_text": ""}
    console = None
    token = "HOTDISK-%d" % os.getpid()
    spaces: Namespaces | None = None
    try:
        initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
        spaces = Namespaces.create("gnthm%d" % (os.getpid() % 100000), 2)
        cluster = await NetnsCluster(reactor, root, loopback_config(2, candidate_pool_size=2), spaces,
                                     shared_file_storage=True, prefix="gnthm-n").start()
        roots = [root] + list(cluster.roots)
        ok(root, "gnt-cluster", "modify", "--enabled-disk-templates", "sharedfile,file,diskless",
           "--enabled-hypervisors", "kvm,fake", "-H",
           "kvm:kvm_path=%s,vnc_bind_address=,migration_port=%d" % (qemu, migration_port))
        ok(root, "gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=32M", "-n", N1, "-o", "noop",
           "--no-nics", "-B", "memory=128M", "--no-name-check", "--no-ip-check", "--no-start", "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s" % (kernel, initrd, guest.KERNEL_ARGS),
           NAME)
        refused = gnt(root, "gnt-instance", "modify", "--hotplug", "--net", NIC_SPEC, NAME)
        result["stopped_refusal"] = (refused.returncode, refused.stderr + refused.stdout)
        result["macs_after_refusal"] = _macs(root)
        ok(root, "gnt-instance", "startup", NAME)
        console = ConsoleReader(root, NAME, time.monotonic())
        console.wait_for("^" + re.escape(guest.READY_LINE), timeout)
        console.wait_for(re.escape(guest.DISK_PREFIX), 30)
        result["nets_before"] = _nets(console, "netsbefore", 30)

        result["nic_add_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--net", NIC_SPEC, NAME)
        result["macs"] = _macs(root)
        reader = console
        result["nets_after_add"] = _until(lambda tag: _nets(reader, tag, 30), lambda seen: "eth0" in seen, "netsadd")
        result["disk_add_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--disk", "add:size=16M", NAME)
        result["blocks_after_add"] = _until(lambda tag: _block_devices(reader, tag, 30),
                                            lambda seen: "vdb" in seen, "blocksadd")
        console.send(b"echo %s|dd of=/dev/vdb conv=fsync 2>/dev/null;echo written-$?\n" % token.encode())
        console.wait_for("^written-0$", 30)
        ticks = [line for _, line in console.lines if ", tick " in line]
        if not ticks:  # none yet: on a loaded machine the guest's first ticks come late; wait for one
            ticks = [console.wait_for(", tick ", 30)[1]]
        result["tick_before"] = int(ticks[-1].split(", tick ")[1].split(",")[0])
        console.close()
        result["console_text"] += console.text()
        console = None

        result["migrate_output"] = ok(root, "gnt-instance", "migrate", "-f", "-n", N2, NAME)
        # the live status catches up with the move (the source's qemu ends, the nodes report) in its own time
        result["primary"] = _until(
            lambda _tag: ok(root, "gnt-instance", "list", "--no-headers", "-o", "pnode,status", NAME).split(),
            lambda seen: seen == [N2, "running"], "status", 60)
        console = ConsoleReader(root, NAME, time.monotonic())
        console.send(b"\n")
        try:
            _when, line = console.wait_for(", tick ", 30)
        except GuestError:
            # as in guest_migration: on a loaded machine a console attached right after the move
            # sometimes gets nothing; attach again and wake the shell before judging the guest
            result["console_text"] += console.text()
            console.close()
            result["silent_console"] = gnt(root, "gnt-instance", "list", "--no-headers", "-o",
                                           "pnode,status,oper_state", NAME).stdout.split()
            # running, paused, or moving on without a word
            result["silent_qemu"] = qmp_status(qmp_socket(cluster.roots[1], NAME))
            console = ConsoleReader(root, NAME, time.monotonic())
            console.send(b"\n")
            try:
                _when, line = console.wait_for(", tick ", 60)
            except GuestError as e:
                raise GuestError("%s\nafter the migration: %s; qemu on %s: %s" % (
                    e, result["silent_console"], N2, result["silent_qemu"])) from None
        result["tick_after"] = int(line.split(", tick ")[1].split(",")[0])
        result["nets_after_migration"] = _nets(console, "netsmigrated", 30)
        result["blocks_after_migration"] = _block_devices(console, "blocksmigrated", 30)
        console.send(b"echo 3 > /proc/sys/vm/drop_caches\n")
        # one echo, one write: the guest's own ticks cannot come between the token and its end
        console.send(b"echo token=$(head -c %d /dev/vdb|tr -cd A-Z0-9-)=end\n" % len(token))
        _when, line = console.wait_for("^token=.*=end", 30)
        result["token_after_migration"] = line.split("=")[1]

        result["nic_remove_output"] = ok(root, "gnt-instance", "modify", "--hotplug-if-possible", "--net",
                                         "0:remove", NAME)
        reader = console
        result["nets_after_remove"] = _until(lambda tag: _nets(reader, tag, 30), lambda seen: "eth0" not in seen,
                                             "netsremoved")
        result["disk_remove_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--disk", "1:remove", NAME)
        result["blocks_after_remove"] = _until(lambda tag: _block_devices(reader, tag, 30),
                                               lambda seen: "vdb" not in seen, "blocksremoved")
        result["macs_after_remove"] = _macs(root)
        result["console_exit"] = console.close()
        result["console_text"] += console.text()
        console = None
        ok(root, "gnt-instance", "shutdown", "--timeout", "1", NAME)
        ok(root, "gnt-instance", "remove", "-f", NAME)
        result["qemu_left"] = qemu_pids(roots)
    finally:
        await _tear_down(result, console, cluster, roots, root, scratch)
        if spaces is not None:
            spaces.destroy()
    return result


async def _tear_down(result: dict[str, Any], console: Any, cluster: Any, roots: Any, root: Any, scratch: str) -> None:
    """End a guest run: keep the console's text (after any read before), kill
    the qemus, stop the cluster, remove the roots (unless C{GUEST_KEEP})."""
    if console is not None:
        result["console_text"] = result.get("console_text", "") + console.text()
        console.close()
    result["killed"] = kill_qemus(roots)
    if cluster is not None:
        await cluster.stop()
    kill_qemus(roots)
    if not os.environ.get("GUEST_KEEP"):
        shutil.rmtree(root.root, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
