"""The network opcodes: OP_NETWORK_ADD, _REMOVE, _SET_PARAMS, _CONNECT and
_DISCONNECT (Ganeti 3.0's parameters; all answer null).

Declared with L{ganeti.opcodes.base.define}; imported by L{ganeti.opcodes}.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Callable

from ganeti.opcodes.base import (
    ABSENT,
    P_FORCE,
    P_GROUP_NAME,
    REQUIRED,
    T_BOOL,
    T_NONEMPTY_STR,
    T_STR,
    Param,
    Type,
    define,
    t_list,
    t_maybe,
    t_one_of,
)

#: the modes a NIC can have (and C{pool}, which Ganeti's type of
#: C{network_mode} also accepts)
NIC_VALID_MODES = ("bridged", "routed", "openvswitch", "pool")

#: "none" clears a gateway, IPv6 subnet, IPv6 gateway or MAC prefix in OP_NETWORK_SET_PARAMS
VALUE_NONE = "none"


def _parses(parse: Callable[[str], Any]) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            parse(value)
        except ValueError:
            return False
        return True

    return check


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v == VALUE_NONE or check(v)


_IPV4 = _parses(ipaddress.IPv4Address)
_IPV6 = _parses(ipaddress.IPv6Address)
_NET4 = _parses(ipaddress.IPv4Network)
_NET6 = _parses(ipaddress.IPv6Network)

T_IPV4_ADDRESS = Type("an IPv4 address", _IPV4, "str")
T_IPV4_NETWORK = Type("an IPv4 network in CIDR notation (host bits zero)", _NET4, "str")
#: OP_NETWORK_SET_PARAMS also takes "none" (clear)
T_IPV4_ADDRESS_OR_NONE = Type('an IPv4 address or "none"', _or_none(_IPV4), "str")
T_IPV6_ADDRESS_OR_NONE = Type('an IPv6 address or "none"', _or_none(_IPV6), "str")
T_IPV6_NETWORK_OR_NONE = Type('an IPv6 network in CIDR notation or "none"', _or_none(_NET6), "str")

P_NETWORK_NAME = Param("network_name", T_NONEMPTY_STR, REQUIRED, "network name")
P_MAC_PREFIX = Param(
    "mac_prefix", t_maybe(T_NONEMPTY_STR), ABSENT, "network specific MAC prefix (overrides the cluster's)"
)
P_ADD_RESERVED_IPS = Param(
    "add_reserved_ips", t_maybe(t_list(T_IPV4_ADDRESS)), ABSENT, "IP addresses to reserve externally"
)
P_CONFLICTS_CHECK = Param("conflicts_check", T_BOOL, True, "whether to check for conflicting IP addresses")

define(
    "OP_NETWORK_ADD",
    [
        P_NETWORK_NAME,
        Param("network", T_IPV4_NETWORK, REQUIRED, "network address (IPv4 subnet, /16 to /30)"),
        Param("gateway", t_maybe(T_IPV4_ADDRESS), ABSENT, "network gateway (IPv4 address)"),
        Param("network6", t_maybe(T_IPV6_NETWORK_OR_NONE), ABSENT, "network address (IPv6 subnet)"),
        Param("gateway6", t_maybe(T_IPV6_ADDRESS_OR_NONE), ABSENT, "network gateway (IPv6 address)"),
        P_MAC_PREFIX,
        P_ADD_RESERVED_IPS,
        P_CONFLICTS_CHECK,
        Param("tags", t_list(T_NONEMPTY_STR), [], "network tags"),
    ],
    doc="Add an IP network to the cluster.",
    summary="network_name",
)

define(
    "OP_NETWORK_REMOVE",
    [P_NETWORK_NAME, P_FORCE],
    doc="Remove a network; it must not be connected to any node group.",
    summary="network_name",
)

define(
    "OP_NETWORK_SET_PARAMS",
    [
        P_NETWORK_NAME,
        Param("gateway", t_maybe(T_IPV4_ADDRESS_OR_NONE), ABSENT, 'network gateway (IPv4 address; "none" clears)'),
        Param("network6", t_maybe(T_IPV6_NETWORK_OR_NONE), ABSENT, 'IPv6 subnet ("none" clears)'),
        Param("gateway6", t_maybe(T_IPV6_ADDRESS_OR_NONE), ABSENT, 'IPv6 gateway ("none" clears)'),
        P_MAC_PREFIX,
        P_ADD_RESERVED_IPS,
        Param("remove_reserved_ips", t_maybe(t_list(T_IPV4_ADDRESS)), ABSENT, "external reservations to release"),
    ],
    doc="Change a network's parameters (not its IPv4 subnet).",
    summary="network_name",
)

define(
    "OP_NETWORK_CONNECT",
    [
        P_GROUP_NAME,
        P_NETWORK_NAME,
        Param("network_mode", t_one_of(*NIC_VALID_MODES), REQUIRED, "NIC mode of the network in the group"),
        Param("network_link", T_NONEMPTY_STR, REQUIRED, "NIC link of the network in the group"),
        Param("network_vlan", T_STR, "", "NIC vlan of the network in the group"),
        P_CONFLICTS_CHECK,
    ],
    doc="Connect a network to a node group with NIC parameters its NICs inherit there.",
    summary="network_name",
)

define(
    "OP_NETWORK_DISCONNECT",
    [P_GROUP_NAME, P_NETWORK_NAME],
    doc="Disconnect a network from a node group; refused while NICs in the group use it.",
    summary="network_name",
)
