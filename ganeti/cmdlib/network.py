"""Network LUs: OP_NETWORK_ADD, OP_NETWORK_REMOVE, OP_NETWORK_SET_PARAMS,
OP_NETWORK_CONNECT and OP_NETWORK_DISCONNECT (Ganeti 3.0's locks and checks).

The address pools are L{ganeti.network.Pool}s.  The pool of instance NICs
(C{reservations}) is kept by WConfD itself as instances are added, changed
and removed; these LUs change the external reservations only.

One addition to Ganeti: with C{conflicts_check} (the default) a new network
whose IPv4 subnet overlaps an existing network's is refused, naming it;
C{--no-conflicts-check} allows it (as Ganeti always does).
"""

from __future__ import annotations

import ipaddress
from typing import Any, TypeVar

import attrs

from ganeti import errors
from ganeti import network as netpool
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NETWORK,
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    lookup_group,
    lookup_network,
    register,
)
from ganeti.cmdlib.instance_params import check_nicparams
from ganeti.cmdlib.tags import TagError, validate_tag
from ganeti.cmdlib.verify import group_instances
from ganeti.objects import ConfigData, Instance, Network, new_uuid, nice_sort
from ganeti.opcodes.typed import (
    OpNetworkAdd,
    OpNetworkConnect,
    OpNetworkDisconnect,
    OpNetworkRemove,
    OpNetworkSetParams,
)

VALUE_NONE = netpool.VALUE_NONE


def _none_to_null(value: str | None) -> str | None:
    return None if value is None or value == VALUE_NONE else value


def overlapping(cfg: ConfigData, cidr: str) -> Network | None:
    """An existing network whose IPv4 subnet overlaps C{cidr}, if any."""
    new = ipaddress.IPv4Network(cidr)
    for net in sorted(cfg.networks.values(), key=lambda n: n.name or ""):
        try:
            if net.network and ipaddress.IPv4Network(net.network).overlaps(new):
                return net
        except ValueError:
            continue
    return None


@register
class LUNetworkAdd(LogicalUnit[OpNetworkAdd]):
    """Create a network and its address pool under a fresh UUID.

    Locks: the new network's (created); every node shared when checking
    for conflicts (their addresses are reserved in the new pool).
    """

    OP_ID = "OP_NETWORK_ADD"
    REQ_BGL = False

    def check_arguments(self) -> None:
        if self.op.mac_prefix:
            self.op = attrs.evolve(self.op, mac_prefix=netpool.normalize_mac_prefix(self.op.mac_prefix))
        try:
            netpool.parse_network(self.op.network)
        except netpool.AddressPoolError as e:
            raise errors.OpPrereqError("Cannot create IP address pool for network '%s': %s"
                                       % (self.op.network_name, e), errors.ECODE_INVAL) from None
        for tag in self.op.tags:
            try:
                validate_tag(tag)
            except TagError as e:
                raise errors.OpPrereqError("Invalid tag '%s': %s" % (tag, e), errors.ECODE_INVAL) from None

    def expand_names(self) -> None:
        self.network_uuid = new_uuid()
        if self.op.conflicts_check:
            self.needed_locks[LEVEL_NODE] = ALL_SET
            self.share_locks[LEVEL_NODE] = True
        self.add_locks[LEVEL_NETWORK] = [self.network_uuid]

    def check_prereq(self) -> None:
        op, cfg = self.op, self.cfg
        for net in cfg.networks.values():
            if net.name == op.network_name:
                raise errors.OpPrereqError("Desired network name '%s' already exists as a network (UUID: %s)"
                                           % (op.network_name, net.uuid), errors.ECODE_EXISTS)
        if op.conflicts_check:
            other = overlapping(cfg, op.network)
            if other is not None:
                raise errors.OpPrereqError(
                    "Network %s overlaps network '%s' (%s); use --no-conflicts-check to add it anyway"
                    % (op.network, other.name, other.network), errors.ECODE_STATE)
        self.record = Network(name=op.network_name, network=op.network, gateway=op.gateway,
                              network6=_none_to_null(op.network6), gateway6=_none_to_null(op.gateway6),
                              mac_prefix=op.mac_prefix, uuid=self.network_uuid, tags=list(op.tags))
        try:
            self.pool = netpool.Pool.initialize(self.record)
        except netpool.AddressPoolError as e:
            raise errors.OpPrereqError("Cannot create IP address pool for network '%s': %s"
                                       % (op.network_name, e), errors.ECODE_INVAL) from None
        self.messages: list[tuple[bool, str]] = []
        if op.conflicts_check:
            for node in sorted(cfg.nodes.values(), key=lambda n: n.name or ""):
                for ip in dict.fromkeys([node.primary_ip, node.secondary_ip]):
                    self._reserve_known(ip, "IP address of node '%s'" % node.name)
            self._reserve_known(cfg.cluster.master_ip, "cluster master IP address")
        for ip in op.add_reserved_ips or []:
            try:
                self.pool.reserve(ip, external=True)
            except netpool.AddressPoolError as e:
                raise errors.OpPrereqError("Cannot reserve IP address '%s': %s" % (ip, e), errors.ECODE_INVAL) from None

    def _reserve_known(self, ip: str | None, what: str) -> None:
        if not ip or not self.pool.contains(ip):
            return
        try:
            self.pool.reserve(ip, external=True)
            self.messages.append((True, "Reserved %s (%s)" % (what, ip)))
        except netpool.AddressPoolError as e:
            self.messages.append((False, "Cannot reserve %s (%s): %s" % (what, ip, e)))

    async def exec_(self, feedback: Feedback) -> Any:
        for ok, text in self.messages:
            await (self.log_info(text) if ok else self.log_warning(text))
        await self.add("network", self.pool.apply(self.record))
        return None


#: the opcodes of the LUs on one existing network
_NetOpT = TypeVar("_NetOpT", bound=OpNetworkRemove | OpNetworkSetParams | OpNetworkConnect | OpNetworkDisconnect,
                  covariant=True)
#: the opcodes of the LUs on a network and a node group
_GroupOpT = TypeVar("_GroupOpT", bound=OpNetworkConnect | OpNetworkDisconnect, covariant=True)


class _OneNetworkLU(LogicalUnit[_NetOpT]):
    REQ_BGL = False
    network_uuid: str

    def _network(self) -> Network:
        net = self.cfg.networks.get(self.network_uuid)
        if net is None:
            raise errors.OpPrereqError("Network '%s' not found" % self.op.network_name, errors.ECODE_NOENT)
        return net


@register
class LUNetworkRemove(_OneNetworkLU[OpNetworkRemove]):
    """Remove a network that no node group is connected to (and no NIC uses)."""

    OP_ID = "OP_NETWORK_REMOVE"

    def expand_names(self) -> None:
        op: OpNetworkRemove = self.op
        self.network_uuid = lookup_network(self.cfg, op.network_name)
        self.needed_locks[LEVEL_NETWORK] = [self.network_uuid]
        self.needed_locks[LEVEL_NODEGROUP] = ALL_SET
        self.share_locks[LEVEL_NODEGROUP] = True

    def check_prereq(self) -> None:
        self._network()
        groups = [g.name or "" for g in self.cfg.nodegroups.values() if self.network_uuid in (g.networks or {})]
        if groups:
            self.connected_to = nice_sort(groups)
            raise errors.OpPrereqError("Network '%s' is still connected to node groups: %s"
                                       % (self.op.network_name, ", ".join(self.connected_to)), errors.ECODE_STATE)
        users = nice_sort(i.name or "" for i in self.cfg.instances.values()
                          if any(nic.network == self.network_uuid for nic in i.nics))
        if users:
            raise errors.OpPrereqError("Network '%s' is still used by instances: %s"
                                       % (self.op.network_name, ", ".join(users)), errors.ECODE_STATE)

    async def exec_(self, feedback: Feedback) -> Any:
        try:
            await self.remove("network", self.network_uuid)
        except errors.UnknownEntity:
            raise errors.OpExecError("Network '%s' with UUID %s disappeared"
                                     % (self.op.network_name, self.network_uuid)) from None
        return None


@register
class LUNetworkSetParams(_OneNetworkLU[OpNetworkSetParams]):
    """Change a network's gateway, IPv6 subnet and gateway, MAC prefix and
    external reservations (never its IPv4 subnet nor instance reservations)."""

    OP_ID = "OP_NETWORK_SET_PARAMS"

    def check_arguments(self) -> None:
        op: OpNetworkSetParams = self.op
        if op.gateway and (op.add_reserved_ips or op.remove_reserved_ips):
            raise errors.OpPrereqError("Cannot modify gateway and reserved ips at once", errors.ECODE_INVAL)
        if op.mac_prefix and op.mac_prefix != VALUE_NONE:
            self.op = attrs.evolve(op, mac_prefix=netpool.normalize_mac_prefix(op.mac_prefix))

    def expand_names(self) -> None:
        self.network_uuid = lookup_network(self.cfg, self.op.network_name)
        self.needed_locks[LEVEL_NETWORK] = [self.network_uuid]

    def check_prereq(self) -> None:
        op: OpNetworkSetParams = self.op
        net = self._network()
        pool = netpool.Pool.of(net)
        if op.gateway and op.gateway != VALUE_NONE:
            if not pool.contains(op.gateway):
                raise errors.OpPrereqError("Gateway IP address '%s' is not in network %s" % (op.gateway, net.network),
                                           errors.ECODE_INVAL)
            if op.gateway != net.gateway and pool.is_reserved(op.gateway):
                raise errors.OpPrereqError("Gateway IP address '%s' is already reserved" % op.gateway,
                                           errors.ECODE_STATE)

    def _change(self, net: Network, warn: list[str]) -> Network:
        """C{net} changed as the opcode asks; warnings appended to C{warn}."""
        op: OpNetworkSetParams = self.op
        pool = netpool.Pool.of(net)
        changes: dict[str, Any] = {}
        if op.gateway:
            gateway = _none_to_null(op.gateway)
            if gateway == net.gateway:
                warn.append("Gateway is already %s" % gateway)
            else:
                if gateway:
                    try:
                        pool.reserve(gateway, external=True)
                    except netpool.AddressPoolError:
                        pass  # an address reserved by the admin becomes the gateway
                if net.gateway and pool.contains(net.gateway) and pool.is_reserved(net.gateway, external=True):
                    pool.release(net.gateway, external=True)
                changes["gateway"] = gateway
        for ip in op.add_reserved_ips or []:
            try:
                pool.reserve(ip, external=True)
            except netpool.AddressPoolError as e:
                warn.append("Cannot reserve IP address %s: %s" % (ip, e))
        for ip in op.remove_reserved_ips or []:
            if ip == net.gateway:
                warn.append("Cannot unreserve Gateway's IP")
                continue
            try:
                pool.release(ip, external=True)
            except netpool.AddressPoolError as e:
                warn.append("Cannot release IP address %s: %s" % (ip, e))
        for key in ("mac_prefix", "network6", "gateway6"):
            value = getattr(op, key)
            if value:
                changes[key] = _none_to_null(value)
        return pool.apply(attrs.evolve(net, **changes))

    async def exec_(self, feedback: Feedback) -> Any:
        warnings: list[str] = []

        def change(net: Network) -> Network:
            del warnings[:]
            return self._change(net, warnings)

        await self.modify("network", self.network_uuid, change)
        for text in warnings:
            await self.log_warning(text)
        return None


def _format_conflicts(conflicts: list[tuple[str, list[tuple[int, str | None]]]]) -> str:
    return ", ".join("%s: %s" % (name, ", ".join("nic%d/%s" % (idx, ip) for idx, ip in details))
                     for name, details in conflicts)


class _GroupNetworkLU(_OneNetworkLU[_GroupOpT]):
    """Connect/disconnect: the group exclusively, its instances shared."""

    def expand_names(self) -> None:
        self.network_uuid = lookup_network(self.cfg, self.op.network_name)
        self.group_uuid = lookup_group(self.cfg, self.op.group_name)
        self.needed_locks[LEVEL_NODEGROUP] = [self.group_uuid]
        self.needed_locks[LEVEL_INSTANCE] = []
        self.share_locks[LEVEL_INSTANCE] = True

    def _lock_instances(self) -> bool:
        return True

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_INSTANCE and self._lock_instances():
            # optimistic: checked again once the group is locked
            self.needed_locks[LEVEL_INSTANCE] = [i.name for i in group_instances(self.cfg, self.group_uuid)]

    def _check_instances(self) -> list[Instance]:
        instances = group_instances(self.cfg, self.group_uuid)
        if not self._lock_instances():
            return instances
        owned = self.owned_locks(LEVEL_INSTANCE)
        if {i.name for i in instances} - owned:
            raise errors.OpPrereqError("Instances of node group '%s' changed since locks were acquired, wanted"
                                       " %s, have %s; retry the operation"
                                       % (self.op.group_name, ", ".join(i.name or "" for i in instances),
                                          ", ".join(sorted(owned))), errors.ECODE_STATE)
        return instances

    def _conflict_check(self, instances: list[Instance], matches: Any, action: str) -> None:
        conflicts = []
        for inst in instances:
            found = [(idx, nic.ip) for idx, nic in enumerate(inst.nics) if matches(nic)]
            if found:
                conflicts.append((inst.name or "", found))
        if conflicts:
            group = self.cfg.nodegroups[self.group_uuid].name
            raise errors.OpPrereqError(
                "Conflicting IP addresses found; remove/modify the corresponding network interfaces: IP addresses"
                " from network '%s', which is about to %s node group '%s', are in use: %s"
                % (self.op.network_name, action, group, _format_conflicts(conflicts)), errors.ECODE_STATE)


@register
class LUNetworkConnect(_GroupNetworkLU[OpNetworkConnect]):
    """Connect a network to a node group with the NIC mode, link and vlan
    its NICs in that group inherit."""

    OP_ID = "OP_NETWORK_CONNECT"

    def expand_names(self) -> None:
        super().expand_names()
        if self.op.conflicts_check:
            self.needed_locks[LEVEL_NETWORK] = [self.network_uuid]
            self.share_locks[LEVEL_NETWORK] = True

    def _lock_instances(self) -> bool:
        op: OpNetworkConnect = self.op
        return op.conflicts_check

    def check_prereq(self) -> None:
        op: OpNetworkConnect = self.op
        net = self._network()
        instances = self._check_instances()
        self.netparams = {"mode": op.network_mode, "link": op.network_link, "vlan": op.network_vlan}
        if op.network_mode != "pool":
            check_nicparams(dict(self.netparams))
        group = self.cfg.nodegroups[self.group_uuid]
        self.connected = self.network_uuid in (group.networks or {})
        if not self.connected and op.conflicts_check:
            pool = netpool.Pool.of(net)
            self._conflict_check(instances, lambda nic: pool.contains(nic.ip), "connect to")

    async def exec_(self, feedback: Feedback) -> Any:
        group = self.cfg.nodegroups[self.group_uuid]
        if self.connected:
            await self.log_warning("Network '%s' is already mapped to group '%s'", self.op.network_name, group.name)
            return None
        await self.modify("nodegroup", self.group_uuid,
                          lambda g: attrs.evolve(g, networks=dict(g.networks or {}, **{self.network_uuid:
                                                                                      dict(self.netparams)})))
        return None


@register
class LUNetworkDisconnect(_GroupNetworkLU[OpNetworkDisconnect]):
    """Disconnect a network from a node group; refused while an instance
    there has a NIC on it."""

    OP_ID = "OP_NETWORK_DISCONNECT"

    def check_prereq(self) -> None:
        self._network()
        instances = self._check_instances()
        group = self.cfg.nodegroups[self.group_uuid]
        self.connected = self.network_uuid in (group.networks or {})
        if self.connected:
            self._conflict_check(instances, lambda nic: nic.network == self.network_uuid, "disconnect from")

    async def exec_(self, feedback: Feedback) -> Any:
        group = self.cfg.nodegroups[self.group_uuid]
        if not self.connected:
            await self.log_warning("Network '%s' is not mapped to group '%s'", self.op.network_name, group.name)
            return None

        def drop(g: Any) -> Any:
            networks = dict(g.networks or {})
            networks.pop(self.network_uuid, None)
            return attrs.evolve(g, networks=networks)

        await self.modify("nodegroup", self.group_uuid, drop)
        return None
