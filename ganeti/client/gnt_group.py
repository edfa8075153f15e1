"""gnt-group: node group commands (Ganeti's names and output).

    gnt-group add [--alloc-policy POLICY] NAME     gnt-group remove NAME
    gnt-group rename OLD NEW                       gnt-group list [-o FIELDS] [NAME...]
    gnt-group list-fields                          gnt-group {list,add,remove}-tags NAME [TAG...]
"""

from __future__ import annotations

import argparse
from typing import Any

from ganeti import cli
from ganeti.cli import Command, Context

#: default fields of C{gnt-group list}
LIST_DEF_FIELDS = ["name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"]

ALLOC_POLICIES = ("preferred", "last_resort", "unallocable")


def _format_dict(data: Any) -> str:
    if not data:
        return "(empty)"
    if not isinstance(data, dict):
        return str(data)
    return ", ".join("%s=%s" % (key, value) for key, value in data.items())


def _join(value: Any) -> str:
    return ",".join(str(item) for item in value) if isinstance(value, (list, tuple)) else str(value)


#: how C{gnt-group list} shows group fields
LIST_FORMAT = {
    "node_list": (_join, False),
    "pinst_list": (_join, False),
    "ndparams": (_format_dict, False),
    "tags": (_join, False),
}


def add_group(ctx: Context, opts: argparse.Namespace) -> int:
    params: dict[str, Any] = {"group_name": opts.group}
    if opts.alloc_policy is not None:
        params["alloc_policy"] = opts.alloc_policy
    cli.submit_or_send(ctx, cli.opcode(ctx, "OP_GROUP_ADD", **params))
    return cli.EXIT_SUCCESS


def remove_group(ctx: Context, opts: argparse.Namespace) -> int:
    cli.submit_or_send(ctx, cli.opcode(ctx, "OP_GROUP_REMOVE", group_name=opts.group))
    return cli.EXIT_SUCCESS


def rename_group(ctx: Context, opts: argparse.Namespace) -> int:
    cli.submit_or_send(ctx, cli.opcode(ctx, "OP_GROUP_RENAME", group_name=opts.group, new_name=opts.new_name))
    return cli.EXIT_SUCCESS


def list_groups(ctx: Context, opts: argparse.Namespace) -> int:
    fields = cli.parse_fields(opts.output, LIST_DEF_FIELDS)
    return cli.generic_list(ctx, "group", fields, cli.make_simple_filter("name", opts.groups), LIST_FORMAT)


def list_group_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return cli.generic_list_fields(ctx, "group")


def _job_options(parser: argparse.ArgumentParser) -> None:
    cli.add_dry_run_option(parser)
    cli.add_priority_option(parser)
    cli.add_submit_options(parser)


def _setup_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--alloc-policy", choices=ALLOC_POLICIES, default=None, metavar="POLICY",
        help="Allocation policy for the node group: %s" % ", ".join(ALLOC_POLICIES),
    )
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")


def _setup_remove(parser: argparse.ArgumentParser) -> None:
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")


def _setup_rename(parser: argparse.ArgumentParser) -> None:
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")
    parser.add_argument("new_name", metavar="NEW_NAME")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    cli.add_list_options(parser, LIST_DEF_FIELDS)
    parser.add_argument("groups", nargs="*", metavar="GROUP_NAME", help="groups to list (default: all)")


COMMANDS: dict[str, Command] = {
    "add": Command(add_group, _setup_add, "Add a new node group to the cluster"),
    "remove": Command(remove_group, _setup_remove, "Remove an (empty) node group from the cluster"),
    "rename": Command(rename_group, _setup_rename, "Rename a node group"),
    "list": Command(
        list_groups, _setup_list,
        "Lists the node groups in the cluster. The available fields can be shown using the"
        ' "list-fields" command (see the man page for details). The default list is (in order):'
        " %s." % ", ".join(LIST_DEF_FIELDS),
        "Default options and arguments may also come from the GNT_GROUP_LIST environment variable.",
    ),
    "list-fields": Command(list_group_fields, cli.add_list_fields_options, "Lists all available fields for node groups"),
    **cli.tag_commands(cli.TAG_NODEGROUP, "GROUP_NAME", "node group"),
}


def main(argv: list[str] | None = None) -> int:
    return cli.run("gnt-group", COMMANDS, argv, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
