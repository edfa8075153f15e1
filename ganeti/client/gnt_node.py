"""gnt-node: node commands (Ganeti's names and output).

    gnt-node list [-o FIELDS] [--no-headers] [--separator S] [NODE...]
    gnt-node list-fields [FIELD...]
    gnt-node info [NODE...]
    gnt-node list-tags | add-tags | remove-tags NODE TAG...

Live fields (memory, disk) show C{?} until the node daemon answers
node_info.  Adding, removing and modifying nodes come with the node daemon.
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
    **cli.tag_commands(cli.TAG_NODE, "NODE", "node"),
}


def main(argv: list[str] | None = None) -> int:
    return cli.run("gnt-node", COMMANDS, argv, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
