"""A kvm NIC's tap on its network, as Ganeti 3.0's C{kvm-ifup} (C{net-common}).

qemu opens each NIC's tap by name (C{-netdev tap,ifname=...}, L{tap_name}),
so the tap exists once qemu runs and goes away when qemu (or a hot-removed
NIC's netdev) lets go of it.  Then the node connects it, as Ganeti's
C{kvm-ifup} does with the same environment (L{environment}: C{INSTANCE},
C{MAC}, C{MODE}, C{INTERFACE}, C{INTERFACE_INDEX}, C{INTERFACE_UUID},
C{TAGS}, C{IP}, C{INTERFACE_NAME}, C{LINK}, C{VLAN}, C{BRIDGE} and the
C{NETWORK_*} of the NIC's network):

  - an executable C{<sysconfdir>/ganeti/kvm-vif-bridge} (Ganeti's custom
    network script) does it all instead, like Ganeti's C{kvm-ifup} that
    C{exec}s it;
  - C{bridged}: the tap's MAC gets C{fe} as first octet (so the bridge
    does not take it), the tap comes up with the bridge's MTU and joins the
    bridge C{LINK}; with a C{VLAN}, on a VLAN-filtering bridge only, the
    first VLAN untagged (PVID) unless it starts with C{:}, the others
    tagged, each also added to the bridge's uplinks (its ports but taps);
  - C{openvswitch}: a stale port of the tap's name is deleted, the tap
    comes up and is added to the switch C{LINK}; C{VLAN} C{.N} or C{N}
    makes it an access port (C{tag=N}), C{:N:M} adds trunks (C{N,M});
  - C{routed}: the tap comes up; a routed NIC needs an address; with a
    C{LINK}, traffic from the tap is looked up in routing table C{LINK}
    (C{ip rule ... dev TAP table LINK}, old rules of the tap deleted first)
    and the address is routed to the tap there, else in the main table;
    proxy ARP (IPv6: proxy NDP) and forwarding are switched on for the tap.

Unlike Ganeti, which leaves the stale Open vSwitch port and policy rules
behind until a tap of the same name comes up again, L{ifdown} removes them
(and the tap, should it still exist) when the instance stops, migrates
away or loses the NIC by hotplug.

On a migration target, bridged and Open vSwitch taps are connected when
the target's qemu starts, routed ones only when the migration is finalized
(as Ganeti's C{FinalizeMigrationDst}), so the route does not take the
guest's traffic before the guest runs there.

The helper commands (C{ip}, C{bridge}, C{ovs-vsctl}, C{sysctl}) run through
C{run(argv, env)}, a Deferred of C{(exit code, output)}.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ganeti.backend import hypervisor as hv

MODES = ("bridged", "routed", "openvswitch")
#: Ganeti's custom network script, under the node's configuration directory
CUSTOM_SCRIPT = "kvm-vif-bridge"
#: the prefix of every tap this node makes (L{tap_name})
TAP_PREFIX = "gk"
#: ovs-vsctl waits for ovsdb-server and ovs-vswitchd at most this long
OVS_TIMEOUT = "--timeout=30"
#: the keys of a NIC in the runtime record that a migration carries to the target
RECORD_KEYS = ("mac", "mode", "link", "vlan", "ip", "name", "network", "netinfo", "id", "pci", "uuid")

Runner = Callable[..., Awaitable[tuple[int, str]]]


class IfupError(hv.HypervisorError):
    """A NIC could not be connected; the message names the command and its output."""


def tap_name(root: str, uuid: str, index: int) -> str:
    """The tap of NIC C{index} of the instance with C{uuid} on the node rooted at C{root}.

    Ganeti lets the kernel name its taps (C{tapN}); here the name is fixed
    by the node and the NIC, so that several nodes sharing one kernel (a
    test cluster) never collide, and fits the kernel's 15 characters."""
    digest = hashlib.sha1(("%s\0%s" % (root, uuid)).encode()).hexdigest()
    return "%s%sn%d" % (TAP_PREFIX, digest[:9], index)


def _get(nic: Any, key: str) -> Any:
    return nic.get(key) if isinstance(nic, Mapping) else getattr(nic, key, None)


def nic_entry(instance_name: str, index: int, nic: Any, tap: str) -> dict[str, Any]:
    """The runtime record's entry of C{nic} (an L{objects.NIC} or its dict)
    with filled nicparams; refuses a mode it cannot set up."""
    params = _get(nic, "nicparams") or {}
    mode = params.get("mode") or "bridged"
    link = params.get("link") or ""
    if mode not in MODES:
        raise hv.HypervisorError("NIC %d of %s: mode %r is not supported" % (index, instance_name, mode))
    if mode != "routed" and not link:
        raise hv.HypervisorError("NIC %d of %s: mode %s needs a link" % (index, instance_name, mode))
    return {"mac": _get(nic, "mac"), "mode": mode, "link": link, "vlan": params.get("vlan") or "",
            "ip": _get(nic, "ip"), "name": _get(nic, "name"), "network": _get(nic, "network"),
            "netinfo": _get(nic, "netinfo") if isinstance(_get(nic, "netinfo"), Mapping) else None,
            "tap": tap, "uuid": _get(nic, "uuid")}


def _network_env(netinfo: Mapping[str, Any]) -> dict[str, str]:
    """Ganeti's C{Network.HooksDict()}."""
    env = {"NETWORK_NAME": str(netinfo.get("name") or ""), "NETWORK_UUID": str(netinfo.get("uuid") or ""),
           "NETWORK_TAGS": " ".join(netinfo.get("tags") or [])}
    for key, name in (("network", "SUBNET"), ("gateway", "GATEWAY"), ("network6", "SUBNET6"),
                      ("gateway6", "GATEWAY6"), ("mac_prefix", "MAC_PREFIX")):
        if netinfo.get(key):
            env["NETWORK_" + name] = str(netinfo[key])
    return env


def environment(instance_name: str, tags: Any, index: int, entry: Mapping[str, Any]) -> dict[str, str]:
    """The environment of Ganeti's network script for NIC C{index} (its record C{entry})."""
    env = {"INSTANCE": instance_name, "MAC": str(entry.get("mac") or ""), "MODE": str(entry["mode"]),
           "INTERFACE": str(entry["tap"]), "INTERFACE_INDEX": str(index),
           "INTERFACE_UUID": str(entry.get("uuid") or ""), "TAGS": " ".join(tags or [])}
    if entry.get("ip"):
        env["IP"] = str(entry["ip"])
    if entry.get("name"):
        env["INTERFACE_NAME"] = str(entry["name"])
    if entry.get("link"):
        env["LINK"] = str(entry["link"])
    if entry.get("vlan"):
        env["VLAN"] = str(entry["vlan"])
    if entry.get("network") and isinstance(entry.get("netinfo"), Mapping):
        env.update(_network_env(entry["netinfo"]))
    if entry["mode"] == "bridged":
        env["BRIDGE"] = str(entry.get("link") or "")
    return env


def _field(output: str, word: str) -> str | None:
    """The word after C{word} in C{ip -o -d link show} output."""
    parts = output.split()
    for position, part in enumerate(parts[:-1]):
        if part == word:
            return parts[position + 1]
    return None


def parse_vlan(vlan: str) -> tuple[str | None, list[str]]:
    """C{(access VLAN or None, trunk VLANs)} of Ganeti's C{vlan} nicparam
    (C{.N} or C{N}: access; C{:N:M}: trunks; C{.N:M:K}: both)."""
    if not vlan:
        return None, []
    head, _sep, rest = vlan.partition(":")
    access = head.lstrip(".") or None
    trunks = [v for v in rest.split(":") if v]
    for value in ([access] if access else []) + trunks:
        if not value.isdigit():
            raise IfupError("Bad VLAN %r: use .N, N, :N[:M...] or .N:M[:K...]" % vlan)
    return access, trunks


class Ifup:
    """Connects (L{up}) and cleans up after (L{down}) one NIC's tap."""

    def __init__(self, run: Runner, conf_dir: str) -> None:
        self._run = run
        self.script = os.path.join(conf_dir, CUSTOM_SCRIPT)

    async def _must(self, env: Mapping[str, str], *argv: str) -> str:
        code, output = await self._run(list(argv))
        if code != 0:
            raise IfupError("Failed to configure interface %s: %s failed: %s"
                            % (env["INTERFACE"], " ".join(argv), output or "exit code %d" % code))
        return output

    async def _may(self, *argv: str) -> tuple[int, str]:
        return await self._run(list(argv))

    async def up(self, env: Mapping[str, str]) -> None:
        """Connect the tap of C{env} (L{environment}) as Ganeti's C{kvm-ifup}."""
        if os.access(self.script, os.X_OK) and os.path.isfile(self.script):
            code, output = await self._run([self.script], env=dict(env))
            if code != 0:
                raise IfupError("Failed to configure interface %s: %s exited with %d; network configuration "
                                "script output: %s" % (env["INTERFACE"], self.script, code, output))
            return
        mode = env["MODE"]
        if mode == "bridged":
            await self._bridged(env)
        elif mode == "openvswitch":
            await self._openvswitch(env)
        elif mode == "routed":
            await self._routed(env)
        else:
            raise IfupError("Interface %s: unknown NIC mode %r" % (env["INTERFACE"], mode))

    async def _bridged(self, env: Mapping[str, str]) -> None:
        tap, link = env["INTERFACE"], env.get("LINK", "")
        shown = await self._must(env, "ip", "-o", "link", "show", "dev", tap)
        mac = _field(shown, "link/ether")
        if mac and len(mac) == 17:                    # Ganeti's fix_mac
            await self._may("ip", "link", "set", "dev", tap, "address", "fe" + mac[2:])
        await self._must(env, "ip", "link", "set", "dev", tap, "up")
        bridge = await self._must(env, "ip", "-o", "-d", "link", "show", "dev", link)
        mtu = _field(bridge, "mtu")
        if mtu and mtu.isdigit():
            await self._must(env, "ip", "link", "set", "dev", tap, "mtu", mtu)
        await self._must(env, "ip", "link", "set", "dev", tap, "master", link)
        if env.get("VLAN"):
            await self._bridge_vlans(env, bridge)

    async def _bridge_vlans(self, env: Mapping[str, str], bridge: str) -> None:
        tap, link, vlan = env["INTERFACE"], env.get("LINK", ""), env["VLAN"]
        if _field(bridge, "vlan_filtering") != "1":
            raise IfupError("Instance %s NIC %s configured for VLAN support, but bridge %s has VLAN filtering "
                            "disabled" % (env.get("INSTANCE"), env.get("INTERFACE_INDEX"), link))
        ports = await self._must(env, "ip", "-o", "link", "show", "master", link)
        uplinks = []
        for line in ports.splitlines():
            fields = line.split(":")
            name = fields[1].strip().split("@")[0] if len(fields) > 1 else ""
            if name and not name.startswith(("tap", TAP_PREFIX)):
                uplinks.append(name)
        access, trunks = parse_vlan(vlan)
        first_untagged = not vlan.startswith(":")
        for position, vid in enumerate(([access] if access else []) + trunks):
            extra = ["pvid", "untagged"] if position == 0 and first_untagged and access else []
            await self._must(env, "bridge", "vlan", "add", "dev", tap, "vid", vid, *extra, "master")
            for uplink in uplinks:
                await self._must(env, "bridge", "vlan", "add", "dev", uplink, "vid", vid, "master")

    async def _openvswitch(self, env: Mapping[str, str]) -> None:
        tap, link = env["INTERFACE"], env.get("LINK", "")
        await self._may("ovs-vsctl", OVS_TIMEOUT, "--if-exists", "del-port", tap)
        await self._must(env, "ip", "link", "set", "dev", tap, "up")
        await self._must(env, "ovs-vsctl", OVS_TIMEOUT, "add-port", link, tap)
        access, trunks = parse_vlan(env.get("VLAN", ""))
        if access:
            await self._must(env, "ovs-vsctl", OVS_TIMEOUT, "set", "port", tap, "tag=%s" % access)
        if trunks:
            await self._must(env, "ovs-vsctl", OVS_TIMEOUT, "set", "port", tap, "trunks=%s" % ",".join(trunks))

    async def _routed(self, env: Mapping[str, str]) -> None:
        tap, link, ip = env["INTERFACE"], env.get("LINK", ""), env.get("IP", "")
        await self._must(env, "ip", "link", "set", "dev", tap, "up")
        if not ip:
            raise IfupError("Failed to configure interface %s: routed NIC but no IP address specified" % tap)
        if link:
            await self._delete_rules(tap)
            await self._must(env, "ip", "rule", "add", "dev", tap, "table", link)
            await self._must(env, "ip", "route", "replace", ip, "table", link, "proto", "static", "dev", tap)
        else:
            await self._must(env, "ip", "route", "replace", ip, "proto", "static", "dev", tap)
        await self._must(env, "sysctl", "-q", "-w", "net.ipv4.conf.%s.proxy_arp=1" % tap,
                         "net.ipv4.conf.%s.forwarding=1" % tap)
        # as Ganeti, only where the tap has IPv6 (-e: no such keys is no error)
        await self._may("sysctl", "-q", "-e", "-w", "net.ipv6.conf.%s.proxy_ndp=1" % tap,
                        "net.ipv6.conf.%s.forwarding=1" % tap)

    async def _delete_rules(self, tap: str) -> None:
        for _ in range(64):                 # Ganeti: while ip rule del dev $INTERFACE; do :; done
            code, _output = await self._may("ip", "rule", "del", "dev", tap)
            if code != 0:
                return

    async def down(self, entry: Mapping[str, Any]) -> None:
        """Remove what L{up} left that outlives the tap: an Open vSwitch port,
        the policy rules of a routed tap; and the tap itself if it is still there.
        Failures only get logged by the caller: nothing here is worth failing a stop."""
        tap = str(entry.get("tap") or "")
        if not tap:
            return
        if entry.get("mode") == "openvswitch":
            await self._may("ovs-vsctl", OVS_TIMEOUT, "--if-exists", "del-port", tap)
        if entry.get("mode") == "routed" and entry.get("link"):
            await self._delete_rules(tap)
        code, _output = await self._may("ip", "link", "show", "dev", tap)
        if code == 0:
            await self._may("ip", "link", "delete", "dev", tap)


__all__ = ["CUSTOM_SCRIPT", "Ifup", "IfupError", "MODES", "RECORD_KEYS", "environment", "nic_entry",
           "parse_vlan", "tap_name"]
