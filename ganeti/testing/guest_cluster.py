"""A real guest on a real one-node loopback cluster, the way an admin runs it.

L{boot_guest}: a L{LoopbackCluster} with kvm enabled (C{gnt-cluster
modify}), C{gnt-instance add -t file} of an instance whose hvparams boot
the kernel and initramfs of L{ganeti.testing.guest} from its serial console
(C{kernel_path}, C{initrd_path}, C{serial_console}), not started; a marker
written to the start of its disk; then C{gnt-instance startup} and at once
C{gnt-instance console --attach}, whose output is read line by line with
the time since the startup command began.  Through the console it waits
for the guest's L{READY_LINE}, the line saying what C{/dev/vda} holds, and
the answer to a shell command it types.  C{gnt-instance info} tells the
accelerator.  Then shutdown and removal; every qemu of the cluster's roots
is killed whatever happens.

Used by C{tests/integration/test_kvm_guest.py} and C{scripts/bench guest}.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from ganeti.paths import Paths
from ganeti.rpc.instances import node_path
from ganeti.testing import guest, procs
from ganeti.testing.cluster import BIN, LoopbackCluster, loopback_config, ok

NAME = "guest1.test"
N1 = "node1.test"
DISK_MARKER = "GANETI-DISK-MARKER-0451"
#: the name the root file system image of the image OS test carries
IMAGE_NAME = "busybox-root-image-1"
#: what the test types on the console, and the answer it waits for
COMMAND, ANSWER = b"echo $((6*7))-answered\n", "42-answered"


class GuestError(Exception):
    """The guest did not get where it should; the message has the console output."""


def qemu_pids(roots: list[Paths]) -> list[int]:
    """The live processes whose command line names one of C{roots}."""
    pids = []
    for pid, words in procs.processes(live=True):
        line = "\0".join(words)
        if words and "qemu" in words[0] and any(paths.root + "/" in line for paths in roots):
            pids.append(pid)
    return pids


def kill_qemus(roots: list[Paths]) -> list[int]:
    """SIGKILL every qemu under C{roots}; the pids found."""
    found = qemu_pids(roots)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return found


def favour_qemus(roots: list[Paths], niceness: int = -10) -> list[int]:
    """Give every thread of every qemu under C{roots} the scheduling
    priority C{niceness}: an emulated (TCG) guest on a host loaded by the
    rest of the suite got so little CPU after a live migration that its
    kernel reported soft lockups and its console stayed silent for minutes.
    Where the priority cannot be raised (not root), nothing changes.  The
    pids found."""
    found = qemu_pids(roots)
    for pid in found:
        try:
            threads = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in threads:
            try:
                os.setpriority(os.PRIO_PROCESS, int(tid), niceness)
            except OSError:  # gone meanwhile, or not permitted
                pass
    return found


class ConsoleReader:
    """C{gnt-instance console --attach}, its output as timed lines."""

    def __init__(self, root: Paths, name: str, t0: float) -> None:
        self.t0 = t0
        self.process = subprocess.Popen([os.path.join(BIN, "gnt-instance"), "--root", root.root, "console",
                                         "--attach", name], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.lines: list[tuple[float, str]] = []
        self.first_byte: float | None = None
        self._partial = b""

    def wait_for(self, pattern: str, timeout: float) -> tuple[float, str]:
        """The first line matching C{pattern} (a regex) and when it came."""
        regex = re.compile(pattern)
        for when, line in self.lines:
            if regex.search(line):
                return when, line
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GuestError("no console line matched %r within %s s; the console said:\n%s"
                                 % (pattern, timeout, self.text()))
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            data = os.read(fd, 65536)
            now = time.monotonic() - self.t0
            if not data:
                try:
                    code = self.process.wait(5)
                except subprocess.TimeoutExpired:
                    code = None
                raise GuestError("gnt-instance console ended (exit code %s) before %r; it said:\n%s\nstderr: %s"
                                 % (code, pattern, self.text(), self._stderr()))
            if self.first_byte is None:
                self.first_byte = now
            self._partial += data
            *complete, self._partial = self._partial.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                self.lines.append((now, line))
                if regex.search(line):
                    return now, line

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def close(self, timeout: float = 10.0) -> int | None:
        """End the input; the console leaves after its linger."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            return self.process.wait(timeout)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            self.process.kill()
            self.process.wait()
            return None

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines) + ("\n" + self._partial.decode("utf-8", "replace")
                                                             if self._partial else "")

    def _stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read().decode("utf-8", "replace")


async def boot_guest(reactor: Any, qemu: str, memory_mib: int = 128, timeout: float = 120.0,
                     boots: int = 1, from_image: bool = False) -> dict[str, Any]:
    """Run the scenario of the module docstring (C{boots} times startup to
    shutdown); the measurements of the first boot, and of each in C{boots}.

    With C{from_image}, the instance is made with OS C{image} instead of
    C{noop}: its create script writes a root file system image
    (L{guest.build_root_image}, named L{IMAGE_NAME}) onto disk 0 offline,
    the hvparam C{root_path=/dev/vda} points the kernel at it, and the
    initramfs switches to that root, whose init then prints
    L{guest.ROOT_LINE} with the image's name: the guest runs from its disk.

    @raise guest.GuestFilesMissing: no kernel or busybox (scripts/install-guest).
    @raise GuestError: the guest or its console failed.
    """
    kernel = guest.kernel_image()
    scratch = tempfile.mkdtemp(prefix="gntguest-")
    root = Paths(tempfile.mkdtemp(prefix="gntguest-r"))
    cluster = None
    roots = [root]
    result: dict[str, Any] = {}
    try:
        initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
        cluster = await LoopbackCluster(reactor, root, loopback_config(1), prefix="gntguest-n").start()
        roots = [root] + list(cluster.roots)
        ok(root, "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake", "-H", "kvm:kvm_path=%s" % qemu)
        os_args = ["-o", "noop"]
        root_path = ""
        if from_image:
            image = guest.build_root_image(os.path.join(scratch, "root.img"), IMAGE_NAME)
            os_args = ["-o", "image", "-O", "image=%s" % image]
            root_path = "/dev/vda"
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=32M", "-n", N1, *os_args, "--no-nics",
           "-B", "memory=%dM" % memory_mib, "--no-name-check", "--no-ip-check", "--no-start", "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s,root_path=%s"
           % (kernel, initrd, guest.KERNEL_ARGS, root_path), NAME)
        if not from_image:
            disk = node_path(cluster.roots[0].root, "/srv/ganeti/file-storage/%s/disk0" % NAME)
            with open(disk, "r+b") as handle:
                handle.write(DISK_MARKER.encode() + b"\n")
        runs = [_boot_once(root, timeout, from_image) for _ in range(boots)]
        result.update(runs[0])
        result["boots"] = runs
        ok(root, "gnt-instance", "remove", "-f", NAME)
        result["qemu_left"] = qemu_pids(roots)
    finally:
        result["killed"] = kill_qemus(roots)
        if cluster is not None:
            await cluster.stop()
        kill_qemus(roots)           # one a daemon started while it stopped (an instance restart)
        if not os.environ.get("GUEST_KEEP"):
            shutil.rmtree(root.root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _boot_once(root: Paths, timeout: float, from_image: bool) -> dict[str, Any]:
    """Start the instance, follow its console, ask its info, shut it down."""
    result: dict[str, Any] = {}
    t0 = time.monotonic()
    ok(root, "gnt-instance", "startup", NAME)
    result["startup_command_s"] = round(time.monotonic() - t0, 3)
    console = ConsoleReader(root, NAME, t0)
    try:
        result["console_attached_s"] = round(time.monotonic() - t0, 3)
        ready_at, ready = console.wait_for("^" + re.escape(guest.READY_LINE), timeout)
        result["first_console_byte_s"] = round(console.first_byte or ready_at, 3)
        result["boot_to_console_s"] = round(ready_at, 3)
        result["ready_line"] = ready
        found = re.search(r"after ([0-9.]+) s", ready)
        result["guest_uptime_at_init_s"] = float(found.group(1)) if found else None
        if from_image:
            root_at, root_line = console.wait_for("^" + re.escape(guest.ROOT_LINE + IMAGE_NAME), timeout)
            result["root_line"] = root_line
            result["root_from_disk_s"] = round(root_at, 3)
        else:
            _, disk_line = console.wait_for(re.escape(guest.DISK_PREFIX), 30)
            result["disk_line"] = disk_line
        console.send(COMMAND)
        answered_at, _ = console.wait_for("^" + re.escape(ANSWER), 30)
        result["shell_answer_s"] = round(answered_at, 3)
    finally:
        result["console_exit"] = console.close()
        result["console_text"] = console.text()
    info = ok(root, "gnt-instance", "info", NAME)
    found = re.search(r"Acceleration: (\S+)", info)
    result["accel"] = found.group(1) if found else None
    result["info"] = info
    ok(root, "gnt-instance", "shutdown", "--timeout", "1", NAME)
    return result
