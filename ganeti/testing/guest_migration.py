"""A real guest on an rbd disk, migrated live between the nodes of a running
loopback cluster, the way an admin does it; its memory and disk checked
after every migration.

L{GuestOnRbd} works on a started L{ganeti.testing.cluster.LoopbackCluster}
whose nodes use a L{ganeti.testing.ceph.CephCluster} (C{install_client}):

  1. L{GuestOnRbd.enable}: C{gnt-cluster modify} enables the kvm hypervisor
     (qemu's path, a free migration port, Ganeti's C{migration_bandwidth}
     and C{migration_downtime}) and the rbd template with
     C{access=userspace} (qemu opens the image through librbd);
  2. L{GuestOnRbd.add}: C{gnt-instance add -t rbd} of an instance that boots
     the kernel and initramfs of L{ganeti.testing.guest} on its serial
     console, not started; a marker is written into its image (through
     qemu, on the image the node names) before the first boot;
  3. L{GuestOnRbd.boot}: C{gnt-instance startup}; on the console the guest
     says it read the marker from C{/dev/vda}; then through its shell it
     keeps a token in its memory (a file of its RAM-backed root) and writes
     another to its disk at 1 MiB (C{dd ... conv=fsync});
  4. L{GuestOnRbd.migrate}: C{gnt-instance migrate -f -n TARGET}, timed from
     the command to its end (the job succeeded), with the downtime qemu
     measured (C{query-migrate}'s C{downtime}, in the job's log line
     C{* migration completed: downtime N ms});
  5. L{GuestOnRbd.check}: on the console of the new primary, the guest's
     tick counter goes on where it was (no reboot), the memory token is
     still there, and the disk token reads back from C{/dev/vda} with the
     guest's page cache dropped (through the target's librbd); read from
     the host, the image holds it at 1 MiB too.

Every qemu under the cluster's roots is killed by L{GuestOnRbd.kill_all}
(callers do it in their C{finally}).  Synchronous (subprocesses): run it in
a thread.  Used by C{tests/integration/test_rbd_guest.py} and C{scripts/bench
storage}.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import time
from typing import Any

from ganeti.backend.storage import rbd
from ganeti.paths import Paths
from ganeti.testing import guest, procs
from ganeti.testing.ceph import CephCluster, qemu_io, read_drive
from ganeti.testing.cluster import ok
from ganeti.testing.guest_cluster import ConsoleReader, GuestError, favour_qemus, kill_qemus, qemu_pids

#: where, in bytes, the guest writes its disk token
DISK_TOKEN_OFFSET = 1024 * 1024
#: the job log line with the downtime qemu measured
DOWNTIME = re.compile(r"\* migration completed: downtime (\d+) ms")
TICK = re.compile(re.escape(guest.READY_LINE) + r", tick (\d+),")


class GuestOnRbd:
    """One guest on an rbd disk in a running cluster; see the module docstring."""

    def __init__(self, master: Paths, roots: list[Paths], ceph: CephCluster, qemu: str, scratch: str,
                 name: str = "rbdguest.test") -> None:
        self.master, self.roots, self.ceph, self.qemu = master, roots, ceph, qemu
        self.scratch, self.name = scratch, name
        self.token = secrets.token_hex(6)
        self.marker = "GANETI-RBD-MARKER-" + self.token
        self.image: str | None = None
        self.primary: str | None = None
        self.last_tick = -1
        self.console_text: list[str] = []
        self.typed = 0

    # --- setting up ------------------------------------------------------------
    def enable(self, migration_port: int, bandwidth_mib: int = 32, downtime_ms: int = 30,
               templates: str = "rbd,diskless") -> None:
        """kvm and rbd (userspace) on the cluster (Ganeti's default bandwidth and downtime)."""
        ok(self.master, "gnt-cluster", "modify", "--enabled-disk-templates", templates,
           "-D", "rbd:pool=%s,access=userspace" % self.ceph.pool, "--enabled-hypervisors", "kvm,fake",
           "-H", "kvm:kvm_path=%s,vnc_bind_address=,migration_port=%d,migration_bandwidth=%d,"
                 "migration_downtime=%d" % (self.qemu, migration_port, bandwidth_mib, downtime_ms))

    def add(self, node: str, memory_mib: int = 128, disk_mib: int = 64) -> str:
        """The instance, not started, with the marker in its image; the image's name."""
        kernel = guest.kernel_image()
        initrd = guest.build_initramfs(os.path.join(self.scratch, "initrd.cpio"))
        ok(self.master, "gnt-instance", "add", "-t", "rbd", "--disk", "0:size=%dM" % disk_mib, "-n", node,
           "-o", "noop", "--no-install", "--no-start", "--no-nics", "--no-name-check", "--no-ip-check",
           "-B", "memory=%dM" % memory_mib, "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s" % (kernel, initrd, guest.KERNEL_ARGS),
           self.name)
        self.primary = node
        images = [i for i in self.ceph.images() if i.endswith(".rbd.disk0")]
        if len(images) != 1:
            raise GuestError("expected the one image of %s in the pool, found %s" % (self.name, images))
        self.image = images[0]
        marker = os.path.join(self.scratch, "marker")
        with open(marker, "w") as handle:
            handle.write(self.marker + "\n")
        qemu_io(self.drive(), "write -s %s 0 %d" % (marker, len(self.marker) + 1))
        return self.image

    def drive(self, node_index: int = 0) -> str:
        """The librbd URI of the image, as node C{node_index} hands it to qemu."""
        assert self.image is not None
        return "rbd:%s/%s:id=%s:conf=%s" % (self.ceph.pool, self.image, self.ceph.user,
                                            os.path.join(self.roots[node_index].root, rbd.CONF_FILE))

    # --- the guest ---------------------------------------------------------------
    def _console(self, t0: float | None = None) -> ConsoleReader:
        return ConsoleReader(self.master, self.name, time.monotonic() if t0 is None else t0)

    def _closed(self, console: ConsoleReader) -> None:
        console.close()
        self.console_text.append(console.text())
        for _, line in console.lines:
            found = TICK.search(line)
            if found:
                self.last_tick = max(self.last_tick, int(found.group(1)))

    def _type(self, console: ConsoleReader, command: str, expect: str | None = None,
              timeout: float = 60.0) -> tuple[float, str]:
        """Type one shell line on the console; the line matching C{expect},
        else wait for a sentinel typed after it.  Lines stay under 80
        columns with the prompt: busybox's line editor asks the terminal
        where its cursor is, which nobody answers here, and longer lines
        went wrong in trials."""
        if len(command) > 74:
            raise ValueError("console line too long: %r" % command)
        console.send(command.encode() + b"\n")
        if expect is not None:
            return console.wait_for(expect, timeout)
        self.typed += 1
        console.send(b"echo typed-$((%d+1))\n" % self.typed)
        return console.wait_for("^typed-%d$" % (self.typed + 1), timeout)

    def boot(self, timeout: float = 120.0) -> dict[str, Any]:
        """Start it; it reads the marker, keeps a token in memory, writes one to its disk."""
        result: dict[str, Any] = {}
        t0 = time.monotonic()
        ok(self.master, "gnt-instance", "startup", self.name)
        favour_qemus(self.roots)
        console = self._console(t0)
        try:
            at, line = console.wait_for("^" + re.escape(guest.READY_LINE), timeout)
            result["boot_to_console_s"] = round(at, 3)
            _, result["disk_line"] = console.wait_for(re.escape(guest.DISK_PREFIX), 60)
            if self.marker not in result["disk_line"]:
                raise GuestError("the guest did not read the marker from its disk: %r" % result["disk_line"])
            self._type(console, "echo MEM-%s > /tmp/mem" % self.token)
            self._type(console, "echo DISK-%s|dd of=/dev/vda bs=512 seek=%d conv=fsync"
                       % (self.token, DISK_TOKEN_OFFSET // 512))
            console.wait_for(TICK.pattern, 30)      # at least one tick seen before the move
        finally:
            self._closed(console)
        return result

    def migrate(self, target: str) -> dict[str, Any]:
        """C{gnt-instance migrate -f -n target}: its time and qemu's downtime."""
        start = time.perf_counter()
        out = ok(self.master, "gnt-instance", "migrate", "-f", "-n", target, self.name)
        took = time.perf_counter() - start
        favour_qemus(self.roots)  # the new one, on the target
        found = DOWNTIME.search(out)
        if found is None or "* done" not in out:
            raise GuestError("gnt-instance migrate said no downtime:\n%s" % out)
        self.primary = target
        return {"total_s": round(took, 3), "downtime_ms": int(found.group(1)), "output": out}

    def check(self, node_index: int, timeout: float = 60.0) -> dict[str, Any]:
        """On the new primary's console: ticks go on, memory and disk tokens are there."""
        result: dict[str, Any] = {}
        before = self.last_tick
        console = self._console()
        try:
            try:
                _, line = console.wait_for(TICK.pattern, timeout / 2)
            except GuestError:
                # seen once on a loaded machine: a console attached right after the move got
                # nothing; attach again (and wake the shell) before judging the guest
                self._closed(console)
                console = self._console()
                console.send(b"\n")
                try:
                    _, line = console.wait_for(TICK.pattern, timeout)
                except GuestError as e:
                    raise GuestError("%s\n%s" % (e, self.diagnose(node_index))) from None
            found = TICK.search(line)
            assert found is not None
            result["tick_before"], result["tick_after"] = before, int(found.group(1))
            if int(found.group(1)) < before:
                raise GuestError("the guest's ticks started again (%s after %d): it was rebooted, not migrated"
                                 % (found.group(1), before))
            _, result["memory_line"] = self._type(console, "cat /tmp/mem", "^MEM-%s$" % self.token)
            self._type(console, "echo 3 > /proc/sys/vm/drop_caches")
            _, result["disk_line"] = self._type(
                console, "dd if=/dev/vda bs=512 skip=%d count=1 2>/dev/null|tr -cd A-Za-z0-9-;echo"
                % (DISK_TOKEN_OFFSET // 512), "^DISK-%s$" % self.token)
            result["rebooted"] = any(re.search(re.escape(guest.READY_LINE) + " after", text)
                                     for _, text in console.lines)
        finally:
            self._closed(console)
        stored = read_drive(self.drive(node_index), DISK_TOKEN_OFFSET, 64)
        result["image_at_1MiB"] = stored.split(b"\n", 1)[0].decode("ascii", "replace")
        return result

    def diagnose(self, node_index: int) -> str:
        """What the qemus under the roots are doing, for a report: their
        process state, the serial socket they were given, and qemu's own
        status (QMP C{query-status}) on node C{node_index}."""
        found = []
        for root, pids in sorted(self.qemus().items()):
            for pid in pids:
                state, argv = procs.state(pid), procs.argv(pid)
                if state is None:
                    found.append("qemu %d under %s: gone" % (pid, root))
                    continue
                serial = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("-serial", "-chardev")]
                found.append("qemu %d under %s: state %s, %s" % (pid, root, state, serial))
        ctrl = qmp_socket(self.roots[node_index], self.name)
        found.append("QMP %s: %s" % (ctrl, qmp_status(ctrl)))
        return "\n".join(found)

    def qemus(self) -> dict[str, list[int]]:
        """The qemu processes per node root, by their pid file (a migration
        target's command line names the source's ceph.conf: its runtime came
        with the instance)."""
        out: dict[str, list[int]] = {paths.root: [] for paths in self.roots}
        for pid in qemu_pids(self.roots):
            argv = procs.argv(pid)
            pidfile = argv[argv.index("-pidfile") + 1] if "-pidfile" in argv[:-1] else ""
            for paths in self.roots:
                if pidfile.startswith(paths.root.rstrip("/") + "/"):
                    out[paths.root].append(pid)
        return out

    def remove(self) -> None:
        ok(self.master, "gnt-instance", "shutdown", "--timeout", "1", self.name)
        ok(self.master, "gnt-instance", "remove", "-f", self.name)

    def kill_all(self) -> list[int]:
        return kill_qemus([self.master] + self.roots)


def qmp_socket(paths: Paths, name: str) -> str:
    """The QMP socket of instance C{name}'s qemu on the node rooted at C{paths}
    (L{ganeti.backend.hypervisor.kvm.KvmHypervisor.files})."""
    return os.path.join(paths.run_dir, "kvm-hypervisor", "ctrl", name + ".qmp")


def qmp_status(path: str, timeout: float = 5.0) -> str:
    """qemu's C{query-status} and C{query-chardev} answers on the QMP socket
    C{path}, and where the guest's first CPU is three times a second apart (HMP
    C{info registers}: a guest that moves on changes its RIP; RAX and RDX
    after a C{rdtsc} show whether its clock moves), or why not."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            reader = sock.makefile("rb")
            reader.readline()  # the greeting
            answers = []

            def execute(command: str, arguments: dict[str, Any] | None = None) -> Any:
                request: dict[str, Any] = {"execute": command}
                if arguments:
                    request["arguments"] = arguments
                sock.sendall(json.dumps(request).encode() + b"\n")
                while True:
                    answer = json.loads(reader.readline() or b"{}")
                    if "event" not in answer:
                        return answer.get("return", answer)

            execute("qmp_capabilities")
            answers.append(json.dumps(execute("query-status")))
            answers.append(json.dumps(execute("query-chardev")))
            for _ in range(3):
                registers = str(execute("human-monitor-command", {"command-line": "info registers"}))
                answers.append(" ".join(re.findall(r"\b(?:RIP|EIP|HLT|RAX|RDX|RFL)=\S+", registers))
                               or registers[:200])
                time.sleep(1)
            return "\n".join(answers)
    except (OSError, ValueError) as e:
        return "no answer (%s)" % e


#: bytes of code a loop the guest spins in spans at most (the delay loop here: two samples 25 bytes apart)
SPIN_SPAN = 64


def spins_in_place(diagnosis: str) -> bool:
    """Whether L{qmp_status}'s register samples, a second apart, find the
    guest's CPU within one short loop (L{SPIN_SPAN} bytes) each time: its
    kernel spins there (an emulated guest's delay loop or a held spinlock
    after some live migrations here, its clock moving on) instead of running."""
    rips = [int(rip, 16) for rip in re.findall(r"\bRIP=([0-9a-fA-F]+)", diagnosis)]
    return len(rips) >= 2 and max(rips) - min(rips) <= SPIN_SPAN
