"""The C{network} query resource: Ganeti's 19 network fields (C{Query.Network}).

Pure: no Twisted, no I/O.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from ganeti import network as netpool
from ganeti.objects import Network
from ganeti.query import common
from ganeti.query.common import by_name, common_fields, known, present
from ganeti.query.fields import QFT_NUMBER, QFT_OTHER, QFT_TEXT, FieldDef, QueryContext, Resource, field_table


def _stats(net: Network) -> tuple[int, int, str]:
    return netpool.stats(net) or (0, 0, "")


def group_connections(net: Network, ctx: QueryContext) -> list[list[str]]:
    """C{[group name, mode, link, vlan]} of each group the network is
    connected to, in the config's (UUID) order; a missing value is C{"-"}."""
    out = []
    for _uuid, group in sorted(ctx.config.nodegroups.items()):
        params = (group.networks or {}).get(net.uuid or "")
        if params is None:
            continue
        params = params if isinstance(params, dict) else {}
        out.append([group.name or "", *(str(params.get(k)) if params.get(k) is not None else "-"
                                        for k in ("mode", "link", "vlan"))])
    return out


def network_instances(net: Network, ctx: QueryContext) -> list[str]:
    """The names of the instances with a NIC on the network, in UUID order."""
    return [inst.name or "" for _uuid, inst in sorted(ctx.config.instances.items())
            if any(nic.network == net.uuid for nic in inst.nics)]


def _external(net: Network, ctx: QueryContext) -> str:
    if not net.ext_reservations or not net.network:
        return ""
    try:
        base = int(ipaddress.IPv4Network(net.network, strict=False).network_address)
    except ValueError:
        return ""
    return ", ".join(str(ipaddress.IPv4Address(base + i)) for i, bit in enumerate(net.ext_reservations) if bit == "1")


def _network_fields() -> list[FieldDef]:
    out = [
        FieldDef("name", "Network", QFT_TEXT, "Name", lambda n, c: known(n.name)),
        FieldDef("network", "Subnet", QFT_TEXT, "IPv4 subnet", lambda n, c: known(n.network)),
        FieldDef("gateway", "Gateway", QFT_OTHER, "IPv4 gateway", lambda n, c: present(n.gateway)),
        FieldDef("network6", "IPv6Subnet", QFT_OTHER, "IPv6 subnet", lambda n, c: present(n.network6)),
        FieldDef("gateway6", "IPv6Gateway", QFT_OTHER, "IPv6 gateway", lambda n, c: present(n.gateway6)),
        FieldDef("mac_prefix", "MacPrefix", QFT_OTHER, "MAC address prefix", lambda n, c: present(n.mac_prefix)),
        FieldDef("free_count", "FreeCount", QFT_NUMBER, "Number of available addresses",
                 lambda n, c: _stats(n)[0]),
        FieldDef("map", "Map", QFT_TEXT, "Actual mapping", lambda n, c: _stats(n)[2]),
        FieldDef("reserved_count", "ReservedCount", QFT_NUMBER, "Number of reserved addresses",
                 lambda n, c: _stats(n)[1]),
        FieldDef("group_list", "GroupList", QFT_OTHER, "List of nodegroups (group name, NIC mode, NIC link)",
                 group_connections),
        FieldDef("group_cnt", "NodeGroups", QFT_NUMBER, "Number of nodegroups",
                 lambda n, c: len(group_connections(n, c))),
        FieldDef("inst_list", "InstanceList", QFT_OTHER, "List of instances", network_instances),
        FieldDef("inst_cnt", "Instances", QFT_NUMBER, "Number of instances", lambda n, c: len(network_instances(n, c))),
        FieldDef("external_reservations", "ExternalReservations", QFT_TEXT, "External reservations", _external),
    ]
    return out + common_fields("Network")


NETWORK_FIELDS = field_table(_network_fields())


def _find(ctx: QueryContext, name: Any) -> Any:
    return common.find(ctx.config.networks, name)


NETWORK_RESOURCE = Resource(
    "network", "Network", NETWORK_FIELDS, lambda ctx: by_name(ctx.config.networks.values()), _find
)
