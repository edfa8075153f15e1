"""A throw-away Ceph cluster for tests and benchmarks: 1 mon, 1 mgr, 1 OSD.

    ceph = CephCluster.start_in(tempfile.mkdtemp(prefix="ceph"))   # blocking
    try:
        ceph.rbd("ls", "-p", ceph.pool) ...
        # nodes use ceph.conf + client.<ceph.user> (its keyring is named in ceph.conf)
    finally:
        ceph.stop()

Everything lives in one directory: C{ceph.conf}, the keyrings, the daemons'
data, logs, admin sockets and the OSD's BlueStore block file (sparse,
L{BLOCK_SIZE}).  cephx is on (C{auth * required = cephx}); the client the
nodes use, C{client.ganeti}, has the C{rbd} profile on the pool only;
C{client.admin} sets the cluster up.  The monitor listens on a loopback
address of its own (C{127.<a>.<b>.<c>}, from the process id, checked free)
on Ceph's standard ports, so it collides with no other test, helper or
Ceph.  The daemons run in the foreground as our children, each in its own
session; L{CephCluster.stop} ends them (SIGTERM, then SIGKILL) and removes
the directory.  A failed start stops whatever it had started.

The recipe is the one measured on Debian bookworm's Ceph 16.2
(spec/storage.md section 10); L{CephCluster.timings} says how long each
step took.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from typing import Any

#: the programs this harness needs (Debian: ceph-mon ceph-mgr ceph-osd ceph-common)
PROGRAMS = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rbd")
#: size of the OSD's BlueStore block file (sparse)
BLOCK_SIZE = 4 * 1024**3
#: seconds the whole start may take before it is given up
START_TIMEOUT = 120.0
MON_ID, MGR_ID, OSD_ID = "a", "x", 0
CLIENT = "ganeti"

INSTALL_HINT = "scripts/install-ceph installs Debian's ceph-mon, ceph-mgr, ceph-osd and ceph-common"


class CephError(Exception):
    """The test Ceph could not be started or a command on it failed."""


def missing_programs() -> list[str]:
    """The programs of L{PROGRAMS} not on C{$PATH}."""
    return [p for p in PROGRAMS if shutil.which(p) is None]


def require_ceph() -> None:
    """Fail (not skip) with a clear message when Ceph is not installed.
    @raise CephError: a program is missing
    """
    missing = missing_programs()
    if missing:
        raise CephError("Ceph is not installed (missing %s): %s" % (", ".join(missing), INSTALL_HINT))


def qemu_image_size(drive: str, timeout: float = 60.0) -> int:
    """The size in bytes qemu sees for the drive C{drive} (e.g. the librbd
    URI a node hands kvm), opened the way kvm does (C{-drive file=...}).
    @raise CephError: qemu is missing or cannot open the drive
    """
    import re

    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise CephError("qemu-system-x86_64 is not installed (scripts/install-qemu installs it; qemu-block-extra"
                        " from scripts/install-ceph gives it librbd)")
    done = subprocess.run([qemu, "-machine", "none", "-nodefaults", "-display", "none", "-monitor", "stdio",
                           "-drive", "file=%s,format=raw,if=none,id=d0" % drive.replace(",", ",,")],
                          input="info block -v d0\nquit\n", capture_output=True, text=True, timeout=timeout,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    found = re.search(r"virtual size: .*\((\d+) bytes\)", done.stdout)
    if done.returncode != 0 or found is None:
        raise CephError("qemu cannot open %s (%s): %s" % (drive, done.returncode, (done.stderr or done.stdout)[-1000:]))
    return int(found.group(1))


def qemu_io(drive: str, command: str, readonly: bool = False, timeout: float = 60.0) -> str:
    """Run one C{qemu-io} command (C{write -s FILE OFFSET LENGTH},
    C{read -v OFFSET LENGTH}, ...) on the drive C{drive}, opened as kvm
    opens it, through qemu's monitor (Debian's qemu-system has no
    C{qemu-io} program); what it printed.
    @raise CephError: qemu is missing, cannot open the drive, or the command failed
    """
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise CephError("qemu-system-x86_64 is not installed (scripts/install-qemu installs it)")
    if '"' in command:
        raise CephError("a qemu-io command cannot hold a double quote: %r" % command)
    option = ",readonly=on" if readonly else ""
    done = subprocess.run([qemu, "-machine", "none", "-nodefaults", "-display", "none", "-monitor", "stdio",
                           "-drive", "file=%s,format=raw,if=none,id=d0%s" % (drive.replace(",", ",,"), option)],
                          input='qemu-io d0 "%s"\nquit\n' % command, capture_output=True, text=True,
                          timeout=timeout, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    output = done.stdout.split('"%s"' % command, 1)[-1]
    if done.returncode != 0 or "bytes at offset" not in output:
        raise CephError("qemu-io %r on %s failed (%s): %s" % (command, drive, done.returncode,
                                                             (done.stderr or output)[-1000:]))
    return output


def read_drive(drive: str, offset: int, length: int) -> bytes:
    """C{length} bytes at C{offset} of C{drive}, read through qemu (read-only)."""
    import re

    data = bytearray()
    for line in qemu_io(drive, "read -v %d %d" % (offset, length), readonly=True).splitlines():
        found = re.match(r"^[0-9a-f]{8}:((?:\s+[0-9a-f]{2})+)", line.strip())
        if found:
            data += bytes(int(byte, 16) for byte in found.group(1).split())
    return bytes(data[:length])


def free_loopback_address() -> str:
    """A 127.x.y.z address on which Ceph's ports (3300, 6789) are free."""
    base = os.getpid()
    for attempt in range(200):
        n = (base * 7919 + attempt * 104729) % (250 * 250 * 250)
        address = "127.%d.%d.%d" % (n // 62500 % 250 + 2, n // 250 % 250 + 1, n % 250 + 2)
        if all(_port_free(address, port) for port in (3300, 6789)):
            return address
    raise CephError("no free loopback address for a Ceph monitor")


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


CONF = """\
[global]
fsid = {fsid}
mon initial members = {mon}
mon host = [v2:{addr}:3300,v1:{addr}:6789]
public addr = {addr}
cluster addr = {addr}
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = {dir}/$name.keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
run dir = {dir}/run
log file = {dir}/log/$name.log
admin socket = {dir}/run/$name.asok
pid file = {dir}/run/$name.pid
log to stderr = false
err to stderr = true

[mon]
mon data = {dir}/mon/$cluster-$id
keyring = {dir}/mon/$cluster-$id/keyring

[mgr]
mgr data = {dir}/mgr/$cluster-$id
keyring = {dir}/mgr/$cluster-$id/keyring

[osd]
osd data = {dir}/osd/$cluster-$id
keyring = {dir}/osd/$cluster-$id/keyring
osd objectstore = bluestore
bluestore block path = {dir}/osd/$cluster-$id/block.file
bluestore block create = true
bluestore block size = {block}
osd memory target = 943718400
bluestore fsck on mount = false
"""


class CephCluster:
    """A running test Ceph in C{directory} (see the module docstring)."""

    def __init__(self, directory: str, address: str, pool: str = "rbd", user: str = CLIENT) -> None:
        self.directory = os.path.abspath(directory)
        self.address = address
        self.pool = pool
        self.user = user
        self.fsid = str(uuid.uuid4())
        self.conf = os.path.join(self.directory, "ceph.conf")
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        #: seconds per start step (C{mon}, C{mgr}, C{osd}, C{pool}, C{total})
        self.timings: dict[str, float] = {}

    @property
    def keyring(self) -> str:
        """The keyring of the nodes' client (named in C{ceph.conf} too)."""
        return os.path.join(self.directory, "client.%s.keyring" % self.user)

    @classmethod
    def start_in(cls, directory: str, pool: str = "rbd", user: str = CLIENT,
                 timeout: float = START_TIMEOUT) -> CephCluster:
        """Set up and start a Ceph in C{directory} (created if needed); on
        any failure everything started is stopped before the error.
        @raise CephError: Ceph is missing or did not come up in C{timeout}
        """
        require_ceph()
        os.makedirs(directory, exist_ok=True)
        ceph = cls(directory, free_loopback_address(), pool, user)
        try:
            ceph._start(time.monotonic() + timeout)
        except BaseException:
            ceph.stop(remove=False)
            raise
        return ceph

    # --- commands ----------------------------------------------------------------

    def _run(self, *argv: str, timeout: float = 60.0) -> str:
        try:
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, env=self.env())
        except subprocess.TimeoutExpired:
            raise CephError("%s: no answer within %ss" % (" ".join(argv), timeout)) from None
        if done.returncode != 0:
            raise CephError("%s failed (%d): %s" % (" ".join(argv), done.returncode,
                                                    (done.stderr or done.stdout).strip()[-2000:]))
        return done.stdout

    def env(self) -> dict[str, str]:
        """An environment for Ceph's tools that never reads /etc/ceph."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("CEPH_")}
        env["CEPH_CONF"] = self.conf
        return env

    def ceph(self, *args: str, timeout: float = 60.0) -> str:
        """C{ceph ARGS} as client.admin; its stdout."""
        return self._run("ceph", "-c", self.conf, "-n", "client.admin", *args, timeout=timeout)

    def rbd(self, *args: str, timeout: float = 60.0) -> str:
        """C{rbd ARGS} as the nodes' client; its stdout."""
        return self._run("rbd", "-c", self.conf, "--id", self.user, *args, timeout=timeout)

    def images(self) -> list[str]:
        """The images in the pool."""
        return self.rbd("ls", "-p", self.pool).split()

    def image_size(self, name: str) -> int:
        """The size of image C{name} in bytes."""
        import json

        return int(json.loads(self.rbd("info", "-p", self.pool, name, "--format", "json"))["size"])

    def install_client(self, root: str) -> None:
        """Make the node rooted at C{root} use this Ceph as C{client.<user>}:
        C{<root>/etc/ceph/ceph.conf} and C{<root>/etc/ganeti/ceph-client}
        (see L{ganeti.backend.storage.rbd})."""
        from ganeti.backend.storage import rbd

        conf = os.path.join(root, rbd.CONF_FILE)
        os.makedirs(os.path.dirname(conf), exist_ok=True)
        shutil.copyfile(self.conf, conf)
        client = os.path.join(root, rbd.CLIENT_FILE)
        os.makedirs(os.path.dirname(client), exist_ok=True)
        with open(client, "w") as handle:
            handle.write(self.user + "\n")

    # --- start / stop --------------------------------------------------------------

    def _spawn(self, name: str, *argv: str) -> None:
        log = open(os.path.join(self.directory, "log", "%s.out" % name), "ab")
        try:
            self.processes[name] = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                    start_new_session=True, env=self.env())
        finally:
            log.close()

    def _wait(self, what: str, deadline: float, check: Any) -> None:
        while True:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise CephError("ceph %s ended (%s) while waiting for %s; see %s/log"
                                    % (name, process.returncode, what, self.directory))
            try:
                if check():
                    return
            except CephError:
                pass
            if time.monotonic() > deadline:
                raise CephError("Ceph: %s did not happen in time; logs in %s/log" % (what, self.directory))
            time.sleep(0.2)

    def _start(self, deadline: float) -> None:
        d = self.directory
        begin = time.monotonic()
        for sub in ("run", "log", "mon/ceph-%s" % MON_ID, "mgr/ceph-%s" % MGR_ID, "osd/ceph-%d" % OSD_ID):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        with open(self.conf, "w") as handle:
            handle.write(CONF.format(fsid=self.fsid, mon=MON_ID, addr=self.address, dir=d, block=BLOCK_SIZE))
        mon_keyring = os.path.join(d, "mon.keyring")
        admin = os.path.join(d, "client.admin.keyring")
        self._run("ceph-authtool", "--create-keyring", mon_keyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *")
        self._run("ceph-authtool", "--create-keyring", admin, "--gen-key", "-n", "client.admin",
                  "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *",
                  "--cap", "mgr", "allow *")
        self._run("ceph-authtool", mon_keyring, "--import-keyring", admin)
        monmap = os.path.join(d, "monmap")
        self._run("monmaptool", "--create", "--addv", MON_ID,
                  "[v2:%s:3300,v1:%s:6789]" % (self.address, self.address), "--fsid", self.fsid, monmap)
        self._run("ceph-mon", "-c", self.conf, "--mkfs", "-i", MON_ID, "--monmap", monmap, "--keyring", mon_keyring)
        self._spawn("mon", "ceph-mon", "-c", self.conf, "-f", "-i", MON_ID)
        self._wait("the monitor to answer", deadline, lambda: self.ceph("mon", "stat", timeout=10) is not None)
        self.timings["mon"] = time.monotonic() - begin
        self.ceph("auth", "get-or-create", "mgr.%s" % MGR_ID, "mon", "allow profile mgr", "osd", "allow *",
                  "mds", "allow *", "-o", os.path.join(d, "mgr/ceph-%s/keyring" % MGR_ID))
        self._spawn("mgr", "ceph-mgr", "-c", self.conf, "-f", "-i", MGR_ID)
        osd_uuid = str(uuid.uuid4())
        osd_id = self.ceph("osd", "new", osd_uuid).strip()
        if osd_id != str(OSD_ID):
            raise CephError("ceph osd new gave id %r, not %d" % (osd_id, OSD_ID))
        osd_dir = os.path.join(d, "osd/ceph-%d" % OSD_ID)
        self._run("ceph-osd", "-c", self.conf, "-i", str(OSD_ID), "--mkfs", "--mkkey", "--osd-uuid", osd_uuid, "--no-mon-config",
                  timeout=120)
        self.ceph("auth", "add", "osd.%d" % OSD_ID, "osd", "allow *", "mon", "allow profile osd",
                  "mgr", "allow profile osd", "-i", os.path.join(osd_dir, "keyring"))
        self._spawn("osd", "ceph-osd", "-c", self.conf, "-f", "-i", str(OSD_ID))
        self._wait("the OSD to be up", deadline,
                   lambda: '"num_up_osds":1' in self.ceph("osd", "stat", "--format", "json", timeout=10)
                   .replace(" ", ""))
        self.timings["osd"] = time.monotonic() - begin
        self.ceph("osd", "pool", "create", self.pool, "8", "8")
        self.ceph("osd", "pool", "application", "enable", self.pool, "rbd")
        self._run("rbd", "-c", self.conf, "-n", "client.admin", "pool", "init", self.pool, timeout=120)
        self.ceph("auth", "get-or-create", "client.%s" % self.user, "mon", "profile rbd",
                  "osd", "profile rbd pool=%s" % self.pool, "-o", self.keyring)
        self.timings["pool"] = time.monotonic() - begin
        self.timings["total"] = self.timings["pool"]

    def stop(self, remove: bool = True) -> None:
        """End every daemon (SIGTERM, after 10 s SIGKILL) and, with
        C{remove}, delete the directory."""
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except OSError:
                    pass
        end = time.monotonic() + 10
        for process in self.processes.values():
            try:
                process.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:
                    pass
                process.wait(10)
        self.processes.clear()
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)
