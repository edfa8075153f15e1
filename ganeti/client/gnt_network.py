"""gnt-network: IP network commands (Ganeti's names, options and output).

    gnt-network add --network=CIDR [--gateway=IP] [--network6=CIDR] [--gateway6=IP]
                    [-m PREFIX] [--add-reserved-ips=IP,...] [--no-conflicts-check] [--tags=T,...] NAME
    gnt-network modify [--gateway|--network6|--gateway6|-m|--add-reserved-ips|--remove-reserved-ips] NAME
    gnt-network connect [-N mode=M,link=L,vlan=V] [--no-conflicts-check] NAME [GROUP...]
    gnt-network disconnect NAME [GROUP...]       gnt-network remove NAME
    gnt-network list [-o FIELDS] [NAME...]       gnt-network info [NAME...]
    gnt-network list-fields                      gnt-network {list,add,remove}-tags NAME [TAG...]
"""

from __future__ import annotations

import argparse
import textwrap

from ganeti import errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import opcode, submit_opcodes, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_force_option,
    add_list_fields_options,
    add_list_options,
    add_priority_option,
    add_submit_options,
    make_simple_filter,
    parse_fields,
)
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import run
from ganeti.client.tags import tag_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TAG_NETWORK = "network"

#: default fields of C{gnt-network list}
LIST_DEF_FIELDS = ["name", "network", "gateway", "mac_prefix", "group_list", "tags"]

#: Ganeti's C{NICC_DEFAULTS}: what C{connect -N} fills in
NICC_DEFAULTS = {"mode": "bridged", "link": "xen-br0", "vlan": ""}

#: the fields C{gnt-network info} shows
INFO_FIELDS = ["name", "network", "gateway", "network6", "gateway6", "mac_prefix", "free_count", "reserved_count",
               "map", "group_list", "inst_list", "external_reservations", "serial_no", "uuid"]


def _join(value: Any) -> str:
    return ",".join(str(item) for item in value) if isinstance(value, (list, tuple)) else str(value)


def _groups(value: Any) -> str:
    return ", ".join("%s (%s, %s, %s)" % tuple(item) for item in value or [])


#: how C{gnt-network list} shows fields
LIST_FORMAT = {
    "group_list": (_groups, False),
    "inst_list": (_join, False),
    "tags": (_join, False),
}


def _reserved_ips(text: str | None) -> list[str] | None:
    """Ganeti's C{_HandleReservedIPs}: C{None}, C{[]} for an empty string, else the comma-separated list."""
    if text is None:
        return None
    if not text:
        return []
    from ganeti.client import instance_opts as iopts

    return [ip for ip in iopts.split_escaped(text)]


def add_network(ctx: Context, opts: argparse.Namespace) -> int:
    if opts.network is None:
        raise errors.OpPrereqError("The --network option must be given", errors.ECODE_INVAL)
    params: dict[str, Any] = {
        "network_name": opts.network_name, "network": opts.network, "conflicts_check": opts.conflicts_check,
        "tags": opts.tags.split(",") if opts.tags is not None else [],
    }
    for key in ("gateway", "network6", "gateway6", "mac_prefix"):
        if getattr(opts, key) is not None:
            params[key] = getattr(opts, key)
    reserved = _reserved_ips(opts.add_reserved_ips)
    if reserved is not None:
        params["add_reserved_ips"] = reserved
    submit_or_send(ctx, opcode(ctx, "OP_NETWORK_ADD", **params))
    return EXIT_SUCCESS


def modify_network(ctx: Context, opts: argparse.Namespace) -> int:
    changes = {
        "gateway": opts.gateway,
        "add_reserved_ips": _reserved_ips(opts.add_reserved_ips),
        "remove_reserved_ips": _reserved_ips(opts.remove_reserved_ips),
        "mac_prefix": opts.mac_prefix,
        "gateway6": opts.gateway6,
        "network6": opts.network6,
    }
    if all(value is None for value in changes.values()):
        ctx.err("Please give at least one of the parameters.")
        return EXIT_FAILURE
    params = {key: value for key, value in changes.items() if value is not None}
    submit_or_send(ctx, opcode(ctx, "OP_NETWORK_SET_PARAMS", network_name=opts.network_name, **params))
    return EXIT_SUCCESS


def remove_network(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, opcode(ctx, "OP_NETWORK_REMOVE", network_name=opts.network_name, force=opts.force))
    return EXIT_SUCCESS


def _target_groups(ctx: Context, groups: list[str]) -> list[str]:
    """C{groups}, or every group of the cluster (by UUID) when none is given."""
    if groups:
        return groups
    return [row[0] for row in ctx.client().query_groups([], ["uuid"], False)]


def connect_network(ctx: Context, opts: argparse.Namespace) -> int:
    nicparams = dict(NICC_DEFAULTS, **(opts.nicparams or {}))
    for group in _target_groups(ctx, opts.groups):
        op = opcode(ctx, "OP_NETWORK_CONNECT", group_name=group, network_name=opts.network_name,
                    network_mode=nicparams["mode"], network_link=nicparams["link"],
                    network_vlan=nicparams["vlan"], conflicts_check=opts.conflicts_check)
        submit_opcodes(ctx, [op])
    return EXIT_SUCCESS


def disconnect_network(ctx: Context, opts: argparse.Namespace) -> int:
    for group in _target_groups(ctx, opts.groups):
        submit_opcodes(ctx, [opcode(ctx, "OP_NETWORK_DISCONNECT", group_name=group,
                                    network_name=opts.network_name)])
    return EXIT_SUCCESS


def list_networks(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    return generic_list(ctx, "network", fields, make_simple_filter("name", opts.networks), LIST_FORMAT)


def list_network_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "network")


def show_network(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{ShowNetworkConfig}."""
    client = ctx.client()
    for row in client.query_networks(list(opts.networks), INFO_FIELDS, False):
        (name, network, gateway, network6, gateway6, mac_prefix, free_count, reserved_count, mapping,
         group_list, instances, ext_res, serial, uuid) = row
        size = free_count + reserved_count
        ctx.out("Network name: %s" % name)
        ctx.out("UUID: %s" % uuid)
        ctx.out("Serial number: %d" % serial)
        ctx.out("  Subnet: %s" % network)
        ctx.out("  Gateway: %s" % gateway)
        ctx.out("  IPv6 Subnet: %s" % network6)
        ctx.out("  IPv6 Gateway: %s" % gateway6)
        ctx.out("  Mac Prefix: %s" % mac_prefix)
        ctx.out("  Size: %d" % size)
        ctx.out("  Free: %d (%.2f%%)" % (free_count, 100 * float(free_count) / float(size) if size else 0.0))
        ctx.out("  Usage map:")
        for idx in range(0, len(mapping), 64):
            ctx.out("     %s %s %d" % (str(idx).rjust(4), mapping[idx:idx + 64].ljust(64), idx + 63))
        ctx.out("         (X) used    (.) free")
        if ext_res:
            ctx.out("  externally reserved IPs:")
            for line in textwrap.wrap(ext_res, width=64):
                ctx.out("    %s" % line)
        if group_list:
            ctx.out("  connected to node groups:")
            for group, mode, link, vlan in group_list:
                ctx.out("    %s (mode:%s link:%s vlan:%s)" % (group, mode, link, vlan))
        else:
            ctx.out("  not connected to any node group")
        if instances:
            ctx.out("  used by %d instances:" % len(instances))
            for inst in instances:
                ((ips, networks),) = client.query_instances([inst], ["nic.ips", "nic.networks"], False)
                used = ", ".join("%d:%s" % (idx, ip) for idx, (ip, net) in enumerate(zip(ips, networks))
                                 if net == uuid)
                ctx.out("    %s: %s" % (inst, used))
        else:
            ctx.out("  not used by any instances")
    return EXIT_SUCCESS


def _nicparams(text: str) -> dict[str, Any]:
    from ganeti.client import instance_opts as iopts

    values = iopts.key_values(text)
    unknown = sorted(set(values) - set(NICC_DEFAULTS))
    if unknown:
        raise argparse.ArgumentTypeError("unknown NIC parameter(s) %s (give mode, link, vlan)" % ", ".join(unknown))
    return values


def _network_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gateway", default=None, help="IP address of the router (gateway)")
    parser.add_argument("--network6", default=None, help="IP network in CIDR notation")
    parser.add_argument("--gateway6", default=None, help="IP6 address of the router (gateway)")
    parser.add_argument("-m", "--mac-prefix", dest="mac_prefix", default=None, metavar="PREFIX",
                        help="Specify the mac prefix for the instance IP addresses, in the format XX:XX:XX")
    parser.add_argument("--add-reserved-ips", default=None, metavar="IP,...",
                        help="Comma-separated list of reserved IPs to add")


def _job_options(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)


def _setup_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--network", default=None, help="IP network in CIDR notation")
    _network_options(parser)
    parser.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false",
                        help="Don't check for conflicting IPs")
    parser.add_argument("--tags", default=None, help="Comma-separated list of network tags")
    _job_options(parser)
    parser.add_argument("network_name", metavar="NETWORK")


def _setup_modify(parser: argparse.ArgumentParser) -> None:
    _network_options(parser)
    parser.add_argument("--remove-reserved-ips", default=None, metavar="IP,...",
                        help="Comma-delimited list of reserved IPs to remove")
    _job_options(parser)
    parser.add_argument("network_name", metavar="NETWORK")


def _setup_remove(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser)
    _job_options(parser)
    parser.add_argument("network_name", metavar="NETWORK")


def _setup_connect(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-N", "--nic-parameters", dest="nicparams", type=_nicparams, default={},
                        metavar="mode=MODE,link=LINK,vlan=VLAN",
                        help="NIC parameters of the connection (default mode=bridged, link=xen-br0)")
    parser.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false",
                        help="Don't check for conflicting IPs")
    add_priority_option(parser)
    parser.add_argument("network_name", metavar="NETWORK")
    parser.add_argument("groups", nargs="*", metavar="GROUP", help="node groups (default: all)")


def _setup_disconnect(parser: argparse.ArgumentParser) -> None:
    add_priority_option(parser)
    parser.add_argument("network_name", metavar="NETWORK")
    parser.add_argument("groups", nargs="*", metavar="GROUP", help="node groups (default: all)")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS)
    parser.add_argument("networks", nargs="*", metavar="NETWORK", help="networks to list (default: all)")


def _setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("networks", nargs="*", metavar="NETWORK", help="networks to show (default: all)")


COMMANDS: dict[str, Command] = {
    "add": Command(add_network, _setup_add, "Add a new IP network to the cluster"),
    "list": Command(
        list_networks, _setup_list,
        "Lists the IP networks in the cluster. The available fields can be shown using the"
        ' "list-fields" command (see the man page for details). The default list is (in order):'
        " %s." % ", ".join(LIST_DEF_FIELDS),
        "Default options and arguments may also come from the GNT_NETWORK_LIST environment variable.",
    ),
    "list-fields": Command(list_network_fields, add_list_fields_options, "Lists all available fields for networks"),
    "info": Command(show_network, _setup_info, "Show information about the network(s)"),
    "modify": Command(modify_network, _setup_modify, "Alters the parameters of a network"),
    "connect": Command(
        connect_network, _setup_connect,
        "Map a given network to the specified node group with given mode and link (netparams)",
    ),
    "disconnect": Command(disconnect_network, _setup_disconnect, "Unmap a given network from a specified node group"),
    "remove": Command(remove_network, _setup_remove, "Remove an (empty) network from the cluster"),
    **tag_commands(TAG_NETWORK, "NETWORK", "network"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-network", COMMANDS, argv, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
