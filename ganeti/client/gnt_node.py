"""gnt-node: node commands (Ganeti's names and output).

    gnt-node list [-o FIELDS] [--no-headers] [--separator S] [NODE...]
    gnt-node list-fields [FIELD...]
    gnt-node info [NODE...]
    gnt-node list-tags | add-tags | remove-tags NODE TAG...
    gnt-node add [--primary-ip IP] [--secondary-ip IP] [-g GROUP] [--join-token T] NODE
    gnt-node remove NODE
    gnt-node modify [--offline yes|no] [--drained yes|no] [-C|--master-candidate yes|no]
                    [--master-capable yes|no] [--vm-capable yes|no] [--auto-promote] [--force] NODE

Live fields (memory, disk) show C{?} until the node daemon answers
node_info.  C{add} needs the new node's daemon running with the cluster's
certificate, or waiting unjoined for C{--join-token}.
"""

from __future__ import annotations

import argparse
from typing import Any

from ganeti import cli
from ganeti.cli import Command, Context

LIST_DEF_FIELDS = ["name", "dtotal", "dfree", "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt"]
INFO_FIELDS = [
    "name", "pip", "sip", "master", "master_candidate", "drained", "offline", "master_capable", "vm_capable",
    "group", "pinst_list", "sinst_list", "ndparams", "tags",
]


def _join(value: Any) -> str:
    return ",".join(value or [])


LIST_FORMAT = {"pinst_list": (_join, False), "sinst_list": (_join, False), "tags": (_join, False)}


def list_nodes(ctx: Context, opts: argparse.Namespace) -> int:
    fields = cli.parse_fields(opts.output, LIST_DEF_FIELDS)
    return cli.generic_list(ctx, "node", fields, cli.make_simple_filter("name", opts.nodes), LIST_FORMAT)


def list_node_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return cli.generic_list_fields(ctx, "node")


def info(ctx: Context, opts: argparse.Namespace) -> int:
    response = ctx.client().query("node", INFO_FIELDS, cli.make_simple_filter("name", opts.nodes))
    for row in response["data"]:
        value = {name: (cell[1] if cell[0] == 0 else None) for name, cell in zip(INFO_FIELDS, row)}
        ctx.out("Node name: %s" % value["name"])
        ctx.out("  primary ip: %s" % value["pip"])
        ctx.out("  secondary ip: %s" % value["sip"])
        ctx.out("  master candidate: %s" % value["master_candidate"])
        ctx.out("  drained: %s" % value["drained"])
        ctx.out("  offline: %s" % value["offline"])
        ctx.out("  master_capable: %s" % value["master_capable"])
        ctx.out("  vm_capable: %s" % value["vm_capable"])
        ctx.out("  node group: %s" % value["group"])
        for kind, key in (("primary", "pinst_list"), ("secondary", "sinst_list")):
            instances = value[key] or []
            if instances:
                ctx.out("  %s for instances:" % kind)
                for name in instances:
                    ctx.out("    - %s" % name)
            else:
                ctx.out("  %s for no instances" % kind)
        ctx.out("  node parameters:")
        for key, param in sorted((value["ndparams"] or {}).items()):
            ctx.out("    %s: %s" % (key, param))
        ctx.out("  tags: %s" % (", ".join(value["tags"] or []) or "(none)"))
    return cli.EXIT_SUCCESS


def add_node(ctx: Context, opts: argparse.Namespace) -> int:
    params: dict[str, Any] = {"node_name": opts.node, "readd": opts.readd}
    for name in ("primary_ip", "secondary_ip", "group", "master_capable", "vm_capable", "join_token"):
        value = getattr(opts, name)
        if value is not None:
            params[name] = value
    cli.submit_or_send(ctx, cli.opcode(ctx, "OP_NODE_ADD", **params))
    return cli.EXIT_SUCCESS


def remove_node(ctx: Context, opts: argparse.Namespace) -> int:
    cli.submit_or_send(ctx, cli.opcode(ctx, "OP_NODE_REMOVE", node_name=opts.node))
    return cli.EXIT_SUCCESS


_MODIFY_FLAGS = ("offline", "drained", "master_candidate", "master_capable", "vm_capable", "secondary_ip")


def modify_node(ctx: Context, opts: argparse.Namespace) -> int:
    params = {name: getattr(opts, name) for name in _MODIFY_FLAGS if getattr(opts, name) is not None}
    if not params:
        ctx.err("Please give at least one of the parameters.")
        return cli.EXIT_FAILURE
    op = cli.opcode(ctx, "OP_NODE_SET_PARAMS", node_name=opts.node, force=opts.force,
                    auto_promote=opts.auto_promote, **params)
    (result,) = cli.submit_or_send(ctx, op)
    if result:
        ctx.out("Modified node %s" % opts.node)
        for param, data in result:
            ctx.out(" - %-5s -> %s" % (param, data))
    return cli.EXIT_SUCCESS


def _setup_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", "--secondary-ip", dest="secondary_ip", metavar="ADDRESS",
                        help="Specify the secondary ip for the node")
    parser.add_argument("--primary-ip", dest="primary_ip", metavar="ADDRESS",
                        help="The node's primary IP (default: resolved from its name)")
    parser.add_argument("-g", "--node-group", "--group", dest="group", metavar="GROUP",
                        help="Node group (name or uuid)")
    parser.add_argument("--readd", action="store_true", help="Readd old node after replacing it")
    parser.add_argument("--master-capable", type=cli.yes_no, metavar="yes|no",
                        help="Set the master_capable flag on the node")
    parser.add_argument("--vm-capable", type=cli.yes_no, metavar="yes|no", help="Set the vm_capable flag on the node")
    parser.add_argument("--join-token", metavar="TOKEN",
                        help="One-time token the new node's unjoined ganeti-noded was started with")
    cli.add_priority_option(parser)
    cli.add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_remove(parser: argparse.ArgumentParser) -> None:
    cli.add_dry_run_option(parser)
    cli.add_priority_option(parser)
    cli.add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_modify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-O", "--offline", type=cli.yes_no, metavar="yes|no", help="Set the offline flag on the node")
    parser.add_argument("-D", "--drained", type=cli.yes_no, metavar="yes|no", help="Set the drained flag on the node")
    parser.add_argument("-C", "--master-candidate", type=cli.yes_no, metavar="yes|no",
                        help="Set the master_candidate flag on the node")
    parser.add_argument("--master-capable", type=cli.yes_no, metavar="yes|no",
                        help="Set the master_capable flag on the node")
    parser.add_argument("--vm-capable", type=cli.yes_no, metavar="yes|no", help="Set the vm_capable flag on the node")
    parser.add_argument("-s", "--secondary-ip", dest="secondary_ip", metavar="ADDRESS",
                        help="Specify the secondary ip for the node")
    parser.add_argument("--auto-promote", action="store_true",
                        help="Automatically promote enough nodes to master candidate status to respect"
                             " candidate_pool_size")
    cli.add_force_option(parser)
    cli.add_dry_run_option(parser)
    cli.add_priority_option(parser)
    cli.add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    cli.add_list_options(parser, LIST_DEF_FIELDS, units=True)
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="nodes to list (default: all)")


def _setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="nodes to describe (default: all)")


COMMANDS: dict[str, Command] = {
    "list": Command(
        list_nodes, _setup_list,
        "Lists the nodes in the cluster. The available fields can be shown using the \"list-fields\""
        " command. The default list is (in order): %s." % ", ".join(LIST_DEF_FIELDS),
        "Default options and arguments may also come from the GNT_NODE_LIST environment variable.",
    ),
    "list-fields": Command(list_node_fields, cli.add_list_fields_options, "Lists all available fields for nodes"),
    "info": Command(info, _setup_info, "Show information about the node(s)"),
    "add": Command(add_node, _setup_add, "Add a node to the cluster"),
    "remove": Command(remove_node, _setup_remove, "Removes a node from the cluster"),
    "modify": Command(modify_node, _setup_modify, "Alters the parameters of a node"),
    **cli.tag_commands(cli.TAG_NODE, "NODE", "node"),
}


def main(argv: list[str] | None = None) -> int:
    return cli.run("gnt-node", COMMANDS, argv, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
