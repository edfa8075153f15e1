"""Real kvm guests on bridged, routed and openvswitch NICs, each node in a network namespace.

L{nic_modes_scenario}: a one-node cluster whose daemons run in a network
namespace the test makes (L{ganeti.testing.netns}); in it the test makes,
as an admin would:

  - a Linux bridge C{gbr0} with 10.88.0.1/24;
  - routing table 100 for routed NICs and a rule sending 10.88.1.0/24 there
    (the admin's part of Ganeti's routed mode), and network C{rnet}
    (10.88.1.0/24) connected to the default group with mode=routed,link=100;
  - Open vSwitch: ovsdb-server and ovs-vswitchd started in the namespace
    with their files in a temporary directory (C{OVS_RUNDIR}, which NodeD
    gets too), and switch C{govs0} with the userspace datapath
    (C{datapath_type=netdev}), its internal port 10.88.2.1/24 on VLAN 10.

An instance of the busybox guest (L{ganeti.testing.guest}) gets three NICs:
bridged on C{gbr0} (10.88.0.2), one on network C{rnet} with C{ip=pool}
(mode and link from the connection) and openvswitch on C{govs0} with VLAN
C{.10} (10.88.2.2).  Once it runs, each interface is configured on the
serial console (found by its MAC), and the node's namespace pings each
address: through the bridge, through the route to the routed tap, through
the switch.  Then a bridged NIC is hot-added (and pinged), hot-removed;
the instance stops, and the node is left without its taps, switch ports
and policy rules.

L{nic_migration_scenario}: two nodes, each in its namespace with its own
C{gbr0}, table 100 and Open vSwitch; the guest (bridged, routed and
openvswitch NICs) answers pings in node1's namespace, migrates live to
node2 and answers there, while node1 has no tap, route, rule or switch port
of it left.

Every qemu and Open vSwitch daemon is killed and every namespace deleted
at the end, also on failure.  Used by C{tests/integration/test_kvm_nic_modes.py}.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any

from ganeti.paths import Paths
from ganeti.testing import guest, procs
from ganeti.testing.cluster import gnt, loopback_config, ok
from ganeti.testing.guest_cluster import NAME, ConsoleReader, GuestError, kill_qemus, qemu_pids
from ganeti.testing.guest_migration import qmp_socket, qmp_status
from ganeti.testing.netns import Namespaces, NetnsCluster

N1, N2 = "node1.test", "node2.test"
BRIDGE, OVS, TABLE = "gbr0", "govs0", "100"
BRIDGED_NET, ROUTED_NET, OVS_NET = "10.88.0", "10.88.1", "10.88.2"
OVS_VLAN = "10"


class NetError(Exception):
    """A network command in a test namespace failed."""


def in_ns(namespace: str, *argv: str, env: dict[str, str] | None = None, check: bool = True,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run C{argv} in C{namespace}."""
    done = subprocess.run(["ip", "netns", "exec", namespace, *argv], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **env) if env else None)
    if check and done.returncode != 0:
        raise NetError("%s in %s: %s" % (" ".join(argv), namespace, (done.stderr or done.stdout).strip()))
    return done


def unavailable() -> str | None:
    """Why these scenarios cannot run here (C{None}: they can)."""
    return Namespaces.unavailable()


def openvswitch_missing() -> str | None:
    for tool in ("ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovsdb-tool"):
        if shutil.which(tool) is None and not os.path.exists("/usr/sbin/" + tool):
            return "%s is not installed: run scripts/install-openvswitch (Debian: openvswitch-switch)" % tool
    return None


def _tool(name: str) -> str:
    return shutil.which(name) or os.path.join("/usr/sbin", name)


class OpenVSwitch:
    """ovsdb-server and ovs-vswitchd in C{namespace}, their files in a temporary directory."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.directory = tempfile.mkdtemp(prefix="gntovs")
        #: what ovs-vsctl (ours and NodeD's) needs to find the database
        self.env = {"OVS_RUNDIR": self.directory, "OVS_DBDIR": self.directory, "OVS_LOGDIR": self.directory,
                    "OVS_SYSCONFDIR": self.directory}
        self.processes: list[subprocess.Popen[bytes]] = []

    def _spawn(self, *argv: str) -> None:
        log = open(os.path.join(self.directory, os.path.basename(argv[0]) + ".out"), "ab")
        self.processes.append(subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv], stdout=log,
                                               stderr=subprocess.STDOUT, env=dict(os.environ, **self.env)))
        log.close()

    def start(self) -> None:
        db = os.path.join(self.directory, "conf.db")
        schema = "/usr/share/openvswitch/vswitch.ovsschema"
        subprocess.run([_tool("ovsdb-tool"), "create", db, schema], check=True, capture_output=True, timeout=60)
        self._spawn(_tool("ovsdb-server"), db, "--remote=punix:" + os.path.join(self.directory, "db.sock"),
                    "--no-chdir", "--log-file")
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.directory, "db.sock")):
            if time.monotonic() > deadline or self.processes[0].poll() is not None:
                raise NetError("ovsdb-server did not start: %s" % self.log("ovsdb-server"))
            time.sleep(0.05)
        self.vsctl("--no-wait", "init")
        self._spawn(_tool("ovs-vswitchd"), "--no-chdir", "--log-file")

    def vsctl(self, *args: str) -> str:
        return in_ns(self.namespace, _tool("ovs-vsctl"), "--timeout=30", *args, env=self.env).stdout.strip()

    def log(self, daemon: str) -> str:
        try:
            with open(os.path.join(self.directory, daemon + ".out"), "rb") as handle:
                return handle.read().decode(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


class GuestNetCluster(NetnsCluster):
    """A L{NetnsCluster} whose NodeDs get C{node_envs} (each node's Open vSwitch directories), in node order."""

    def __init__(self, *args: Any, node_envs: list[dict[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.node_envs = list(node_envs or [])

    def _prepare(self) -> None:
        super()._prepare()
        for daemon, env in zip(self.nodeds, self.node_envs):
            daemon.env.update(env)


def start_switch(namespace: str) -> OpenVSwitch:
    """Open vSwitch in C{namespace} with switch L{OVS} (userspace datapath), its internal port
    C{OVS_NET}.1/24 on VLAN L{OVS_VLAN}."""
    ovs = OpenVSwitch(namespace)
    ovs.start()
    ovs.vsctl("add-br", OVS, "--", "set", "bridge", OVS, "datapath_type=netdev")
    ovs.vsctl("set", "port", OVS, "tag=" + OVS_VLAN)
    in_ns(namespace, "ip", "address", "add", OVS_NET + ".1/24", "dev", OVS)
    in_ns(namespace, "ip", "link", "set", OVS, "up")
    return ovs


def prepare_node(namespace: str) -> None:
    """The bridge and the routing of routed NICs in a node's namespace (see the module docstring)."""
    for argv in (("link", "add", BRIDGE, "type", "bridge"), ("address", "add", BRIDGED_NET + ".1/24", "dev", BRIDGE),
                 ("link", "set", BRIDGE, "up"), ("rule", "add", "to", ROUTED_NET + ".0/24", "table", TABLE)):
        in_ns(namespace, "ip", *argv)


def ping(namespace: str, address: str, tries: int = 15) -> int:
    """Ping C{address} from C{namespace} (busybox's ping) until it answers; the tries it took
    (the guest's interface may still be coming up), 0 if it never answered."""
    _kernel, busybox, _modules = guest.guest_files()
    for attempt in range(1, tries + 1):
        if in_ns(namespace, busybox, "ping", "-c", "1", "-W", "2", address, check=False).returncode == 0:
            return attempt
    return 0


def _diagnose(roots: list[Paths]) -> dict[str, Any]:
    """Whether the instance's qemu emulates its CPU (TCG) and where that CPU is
    (L{ganeti.testing.guest_migration.qmp_status} on its QMP socket)."""
    for paths in roots:
        ctrl = qmp_socket(paths, NAME)
        if os.path.exists(ctrl):
            tcg = any("accel=tcg" in " ".join(procs.argv(pid)) for pid in qemu_pids([paths]))
            return {"tcg": tcg, "qmp": qmp_status(ctrl)}
    return {"tcg": False, "qmp": "no QMP socket of %s under %s" % (NAME, [p.root for p in roots])}


def _console_now(root: Paths) -> str:
    """The guest's console for a few seconds (does it still run, and since when)."""
    try:
        reader = ConsoleReader(root, NAME, time.monotonic())
    except (GuestError, OSError) as e:
        return "no console: %s" % e
    try:
        reader.send(b"\necho alive-$(cut -d' ' -f1 /proc/uptime)\n")
        reader.wait_for(r"^alive-\d", 20)
    except GuestError:
        pass
    finally:
        reader.close()
    return reader.text()


def configure(console: ConsoleReader, mac: str, address: str, tag: str, routed: bool = False) -> str:
    """Give the guest's interface with C{mac} C{address} (a /24, or a /32 with the default route for a
    routed NIC), on its serial console; the interface's name."""
    # short lines: busybox's line editor goes wrong past 80 columns
    console.send(b"c(){ for i in /sys/class/net/*;do [ $(cat $i/address) = $1 ]&&echo ${i##*/};done;}\n")
    deadline = time.monotonic() + 30
    name = ""
    attempt = 0
    while not name and time.monotonic() < deadline:   # a hot-added NIC appears when the guest probes it
        console.send(b"echo %s%d-$(c %s)-\n" % (tag.encode(), attempt, mac.encode()))
        # the answer, not the shell's echo of the command (which may come back on a line of its own)
        _when, line = console.wait_for(r"^%s%d-\w*-\s*$" % (re.escape(tag), attempt), 30)
        name = line.split("-")[1]
        attempt += 1
        if not name:
            time.sleep(0.5)
    if not name:
        raise GuestError("the guest has no interface with MAC %s:\n%s" % (mac, console.text()))
    prefix = "32" if routed else "24"
    console.send(b"ip a add %s/%s dev %s;ip l set %s up\n" % (address.encode(), prefix.encode(), name.encode(),
                                                               name.encode()))
    if routed:
        console.send(b"ip r add default dev %s\n" % name.encode())
    console.send(b"echo %s-done-$(ip -o a show dev %s|grep -c %s)\n" % (tag.encode(), name.encode(),
                                                                         address.encode()))
    _when, line = console.wait_for(r"^%s-done-\d+\s*$" % re.escape(tag), 30)
    if not line.rstrip().endswith("-1"):
        raise GuestError("the guest did not take %s on %s:\n%s" % (address, name, console.text()))
    return name


def nics_of(root: Paths) -> list[dict[str, str]]:
    """The instance's NICs as C{gnt-instance list} shows them."""
    fields = ("nic.macs", "nic.ips", "nic.modes", "nic.links", "nic.networks.names")
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator=|", "-o", ",".join(fields), NAME).strip()
    columns = [value.split(",") for value in out.split("|")]
    return [dict(zip(("mac", "ip", "mode", "link", "network"), row)) for row in zip(*columns)]


def leftovers(namespace: str, ovs: OpenVSwitch | None = None) -> dict[str, Any]:
    """What of the node's taps is left in C{namespace}: taps, policy rules, routes of table 100, switch ports."""
    links = in_ns(namespace, "ip", "-o", "link", "show").stdout
    result: dict[str, Any] = {
        "taps": sorted(set(re.findall(r"^\d+: (gk[0-9a-f]+n\d+)", links, re.M))),
        "rules": [line for line in in_ns(namespace, "ip", "rule").stdout.splitlines() if "iif gk" in line],
        "routes": in_ns(namespace, "ip", "route", "show", "table", TABLE, check=False).stdout.split("\n")[:-1],
    }
    if ovs is not None:
        result["ports"] = ovs.vsctl("list-ports", OVS).split()
    return result


def _kernel_args() -> tuple[str, str]:
    return guest.kernel_image(), guest.KERNEL_ARGS


async def nic_modes_scenario(reactor: Any, qemu: str, prefix: str, timeout: float = 120.0) -> dict[str, Any]:
    """Run the first scenario of the module docstring; what each step showed."""
    kernel, kernel_args = _kernel_args()
    scratch = tempfile.mkdtemp(prefix="gntnic-")
    root = Paths(tempfile.mkdtemp(prefix="gntnic-r"))
    spaces = Namespaces.create(prefix, 1)
    node_ns = spaces.nodes[0]
    ovs: OpenVSwitch | None = None
    cluster = None
    roots = [root]
    result: dict[str, Any] = {"console_text": ""}
    console = None
    try:
        prepare_node(node_ns)
        ovs = start_switch(node_ns)
        initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
        cluster = await GuestNetCluster(reactor, root, loopback_config(1), spaces, prefix="gntnic-n",
                                        node_envs=[ovs.env]).start()
        roots = [root] + list(cluster.roots)
        ok(root, "gnt-cluster", "modify", "--enabled-hypervisors", "kvm,fake", "-H",
           "kvm:kvm_path=%s,vnc_bind_address=" % qemu)
        ok(root, "gnt-network", "add", "--network=%s.0/24" % ROUTED_NET, "rnet")
        ok(root, "gnt-network", "connect", "-N", "mode=routed,link=" + TABLE, "rnet", "default")
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-n", N1, "-o", "noop",
           "--net", "0:mode=bridged,link=%s,ip=%s.2" % (BRIDGE, BRIDGED_NET),
           "--net", "1:network=rnet,ip=pool",
           "--net", "2:mode=openvswitch,link=%s,vlan=.%s,ip=%s.2" % (OVS, OVS_VLAN, OVS_NET),
           "-B", "memory=128M", "--no-name-check", "--no-ip-check", "--no-start", "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s" % (kernel, initrd, kernel_args),
           NAME)
        result["nics"] = nics = nics_of(root)
        ok(root, "gnt-instance", "startup", NAME)
        result["taps_running"] = leftovers(node_ns, ovs)
        result["bridge_ports"] = in_ns(node_ns, "ip", "-o", "link", "show", "master", BRIDGE).stdout
        tap_of = {n["mode"]: t for n, t in zip(nics, _record_taps(cluster.roots[0]))}
        result["routed_proxy_arp"] = in_ns(node_ns, "sysctl", "-n",
                                           "net.ipv4.conf.%s.proxy_arp" % tap_of["routed"]).stdout.strip()
        result["ovs_tag"] = ovs.vsctl("get", "port", tap_of["openvswitch"], "tag")
        console = ConsoleReader(root, NAME, time.monotonic())
        console.wait_for("^" + re.escape(guest.READY_LINE), timeout)
        console.wait_for(re.escape(guest.DISK_PREFIX), 30)
        pings: dict[str, int] = {}
        for nic, tag in zip(nics, ("bridged", "routed", "ovs")):
            configure(console, nic["mac"], nic["ip"], tag, routed=nic["mode"] == "routed")
        for nic in nics:
            pings[nic["mode"]] = ping(node_ns, nic["ip"])
        result["pings"] = pings

        address = BRIDGED_NET + ".3"
        result["hot_add_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--net",
                                      "add:mode=bridged,link=%s,ip=%s" % (BRIDGE, address), NAME)
        added = nics_of(root)[-1]
        configure(console, added["mac"], address, "hot")
        result["hot_ping"] = ping(node_ns, address)
        result["hot_remove_output"] = ok(root, "gnt-instance", "modify", "--hotplug", "--net", "3:remove", NAME)
        result["taps_after_hot_remove"] = leftovers(node_ns, ovs)["taps"]
        result["console_exit"] = console.close()
        result["console_text"] += console.text()
        console = None
        ok(root, "gnt-instance", "shutdown", "--timeout", "1", NAME)
        result["after_stop"] = leftovers(node_ns, ovs)
        ok(root, "gnt-instance", "remove", "-f", NAME)
        result["qemu_left"] = qemu_pids(roots)
    finally:
        if console is not None:
            result["console_text"] += console.text()
            console.close()
        result["killed"] = kill_qemus(roots)
        if cluster is not None:
            await cluster.stop()
        kill_qemus(roots)
        if ovs is not None:
            result["ovs_log"] = ovs.log("ovs-vswitchd")
            ovs.stop()
        spaces.destroy()
        if not os.environ.get("GUEST_KEEP"):
            shutil.rmtree(root.root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _record_taps(node_root: Paths) -> list[str]:
    """The taps of the instance's NICs, in order, from the node's kvm runtime record."""
    with open(os.path.join(node_root.run_dir, "kvm-hypervisor", "conf", NAME)) as handle:
        return [nic["tap"] for nic in json.load(handle)["nics"]]


async def nic_migration_scenario(reactor: Any, qemu: str, prefix: str, timeout: float = 120.0) -> dict[str, Any]:
    """Run the second scenario of the module docstring; what each step showed."""
    kernel, kernel_args = _kernel_args()
    scratch = tempfile.mkdtemp(prefix="gntnim-")
    root = Paths(tempfile.mkdtemp(prefix="gntnim-r"))
    spaces = Namespaces.create(prefix, 2)
    switches: list[OpenVSwitch] = []
    cluster = None
    roots = [root]
    result: dict[str, Any] = {"console_text": ""}
    console = None
    try:
        for namespace in spaces.nodes:
            prepare_node(namespace)
            switches.append(start_switch(namespace))
        initrd = guest.build_initramfs(os.path.join(scratch, "initrd.cpio"))
        cluster = await GuestNetCluster(reactor, root, loopback_config(2, candidate_pool_size=2), spaces,
                                        shared_file_storage=True, prefix="gntnim-n",
                                        node_envs=[ovs.env for ovs in switches]).start()
        roots = [root] + list(cluster.roots)
        ok(root, "gnt-cluster", "modify", "--enabled-disk-templates", "sharedfile,file,diskless",
           "--enabled-hypervisors", "kvm,fake", "-H", "kvm:kvm_path=%s,vnc_bind_address=" % qemu)
        ok(root, "gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=16M", "-n", N1, "-o", "noop",
           "--net", "0:mode=bridged,link=%s,ip=%s.2" % (BRIDGE, BRIDGED_NET),
           "--net", "1:mode=routed,link=%s,ip=%s.2" % (TABLE, ROUTED_NET),
           "--net", "2:mode=openvswitch,link=%s,vlan=.%s,ip=%s.2" % (OVS, OVS_VLAN, OVS_NET),
           "-B", "memory=128M", "--no-name-check", "--no-ip-check", "--no-start", "-H",
           "kvm:kernel_path=%s,initrd_path=%s,serial_console=true,kernel_args=%s" % (kernel, initrd, kernel_args),
           NAME)
        nics = nics_of(root)
        ok(root, "gnt-instance", "startup", NAME)
        console = ConsoleReader(root, NAME, time.monotonic())
        console.wait_for("^" + re.escape(guest.READY_LINE), timeout)
        console.wait_for(re.escape(guest.DISK_PREFIX), 30)
        for nic, tag in zip(nics, ("bridged", "routed", "ovs")):
            configure(console, nic["mac"], nic["ip"], tag, routed=nic["mode"] == "routed")
        result["pings_before"] = {nic["mode"]: ping(spaces.nodes[0], nic["ip"]) for nic in nics}
        result["console_text"] += console.text()
        console.close()
        console = None
        result["migrate_output"] = ok(root, "gnt-instance", "migrate", "-f", "-n", N2, NAME)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = ok(root, "gnt-instance", "list", "--no-headers", "-o", "pnode,status", NAME).split()
            if status == [N2, "running"]:
                break
            time.sleep(0.5)
        result["primary"] = status
        result["pings_after"] = {nic["mode"]: ping(spaces.nodes[1], nic["ip"]) for nic in nics}
        if not all(result["pings_after"].values()):  # what the guest says and does now, for the report
            result["console_after"] = _console_now(root)
            result["guest_after"] = _diagnose(roots)
        result["node1_after"] = leftovers(spaces.nodes[0], switches[0])
        result["node2_after"] = leftovers(spaces.nodes[1], switches[1])
        ok(root, "gnt-instance", "shutdown", "--timeout", "1", NAME)
        result["node2_after_stop"] = leftovers(spaces.nodes[1], switches[1])
        refused = gnt(root, "gnt-instance", "remove", "-f", NAME)
        result["remove_exit"] = refused.returncode
        result["qemu_left"] = qemu_pids(roots)
    finally:
        if console is not None:
            result["console_text"] += console.text()
            console.close()
        result["killed"] = kill_qemus(roots)
        if cluster is not None:
            await cluster.stop()
        kill_qemus(roots)
        for ovs in switches:
            ovs.stop()
        spaces.destroy()
        if not os.environ.get("GUEST_KEEP"):
            shutil.rmtree(root.root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return result


__all__ = ["GuestNetCluster", "OpenVSwitch", "nic_migration_scenario", "nic_modes_scenario", "openvswitch_missing",
           "ping", "start_switch", "unavailable"]
