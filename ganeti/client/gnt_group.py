"""gnt-group: node group commands (Ganeti's names and output).

    gnt-group add [--alloc-policy POLICY] NAME     gnt-group remove NAME
    gnt-group rename OLD NEW                       gnt-group list [-o FIELDS] [NAME...]
    gnt-group list-fields                          gnt-group {list,add,remove}-tags NAME [TAG...]
    gnt-group assign-nodes [--force] NAME NODE...
    gnt-group modify [--alloc-policy POLICY] [-N k=v,...] [-D template:k=v,...] [--ipolicy-...] NAME
"""

from __future__ import annotations

import argparse

from ganeti import errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import opcode, report_changes, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_force_option,
    add_list_fields_options,
    add_list_options,
    add_priority_option,
    add_submit_options,
    parse_fields,
)
from ganeti.client.qfilter import make_filter
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import run
from ganeti.client.tags import TAG_NODEGROUP, tag_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
    params = dict(group_params(opts), group_name=opts.group)
    submit_or_send(ctx, opcode(ctx, "OP_GROUP_ADD", **params))
    return EXIT_SUCCESS


def remove_group(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, opcode(ctx, "OP_GROUP_REMOVE", group_name=opts.group))
    return EXIT_SUCCESS


def rename_group(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, opcode(ctx, "OP_GROUP_RENAME", group_name=opts.group, new_name=opts.new_name))
    return EXIT_SUCCESS


def assign_nodes(ctx: Context, opts: argparse.Namespace) -> int:
    op = opcode(ctx, "OP_GROUP_ASSIGN_NODES", group_name=opts.group, nodes=list(opts.nodes), force=opts.force)
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def group_params(opts: argparse.Namespace) -> dict[str, Any]:
    """The parameters C{gnt-group add} and C{modify} set (those given)."""
    from ganeti.client import instance_opts as iopts

    params: dict[str, Any] = {}
    if opts.alloc_policy is not None:
        params["alloc_policy"] = opts.alloc_policy
    if opts.ndparams is not None:
        params["ndparams"] = dict(opts.ndparams)
    if opts.diskparams:
        params["diskparams"] = {template: dict(values) for template, values in opts.diskparams}
    if opts.hv_state:
        params["hv_state"] = {hypervisor: dict(values) for hypervisor, values in opts.hv_state}
    if opts.disk_state:
        state: dict[str, dict[str, Any]] = {}
        for ident, values in opts.disk_state:
            kind, _, unit = ident.partition("/")
            if not kind or not unit:
                raise errors.OpPrereqError("Invalid disk state '%s': give STORAGE_TYPE/NAME:PARAM=VALUE,..." % ident,
                                           errors.ECODE_INVAL)
            state.setdefault(kind, {})[unit] = dict(values)
        params["disk_state"] = state
    ipolicy: dict[str, Any] = {}
    for key, value in (("vcpu-ratio", opts.ipolicy_vcpu_ratio), ("spindle-ratio", opts.ipolicy_spindle_ratio)):
        if value is not None:
            ipolicy[key] = value
    if opts.ipolicy_disk_templates is not None:
        ipolicy["disk-templates"] = [t for t in iopts.split_escaped(opts.ipolicy_disk_templates) if t]
    if opts.ipolicy_bounds_specs is not None:
        ipolicy["minmax"] = opts.ipolicy_bounds_specs
    if ipolicy:
        params["ipolicy"] = ipolicy
    return params


def modify_opcode(ctx: Context, opts: argparse.Namespace) -> dict[str, Any] | None:
    """The OP_GROUP_SET_PARAMS of C{gnt-group modify}; C{None} if nothing changes."""
    params = group_params(opts)
    if not params:
        return None
    return opcode(ctx, "OP_GROUP_SET_PARAMS", group_name=opts.group, **params)


def modify_group(ctx: Context, opts: argparse.Namespace) -> int:
    op = modify_opcode(ctx, opts)
    if op is None:
        ctx.err("Please give at least one of the parameters.")
        return EXIT_FAILURE
    (result,) = submit_or_send(ctx, op)
    report_changes(ctx, "node group %s" % opts.group, result)
    return EXIT_SUCCESS


def list_groups(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    return generic_list(ctx, "group", fields, make_filter(opts.groups, opts.force_filter), LIST_FORMAT)


def list_group_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "group")


def _job_options(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)


def _setup_add(parser: argparse.ArgumentParser) -> None:
    _param_options(parser)
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")


def _setup_remove(parser: argparse.ArgumentParser) -> None:
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")


def _setup_rename(parser: argparse.ArgumentParser) -> None:
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")
    parser.add_argument("new_name", metavar="NEW_NAME")


def _setup_assign_nodes(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Move the nodes even if instances end up split across groups")
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")
    parser.add_argument("nodes", nargs="+", metavar="NODE")


def _state(text: str) -> tuple[str, Any]:
    """argparse type of C{IDENT:k=v,...} (C{--hypervisor-state}, C{-D}, ...)."""
    from ganeti.client import instance_opts as iopts

    ident, values = iopts.ident_key_values(text)
    if not isinstance(values, dict):
        raise argparse.ArgumentTypeError("expected %s:PARAM=VALUE,..." % ident)
    return ident, values


def _key_values(text: str) -> dict[str, Any]:
    from ganeti.client import instance_opts as iopts

    return iopts.key_values(text)


def _param_options(parser: argparse.ArgumentParser) -> None:
    """The parameter options of C{add} and C{modify}."""
    parser.add_argument(
        "--alloc-policy", choices=ALLOC_POLICIES, default=None, metavar="POLICY",
        help="Allocation policy for the node group: %s" % ", ".join(ALLOC_POLICIES),
    )
    parser.add_argument("-N", "--node-parameters", dest="ndparams", type=_key_values, default=None,
                        metavar="PARAM=VALUE,...", help="Node parameters (\"default\" resets one)")
    parser.add_argument("-D", "--disk-parameters", dest="diskparams", type=_state, action="append", default=[],
                        metavar="TEMPLATE:PARAM=VALUE,...", help="Disk parameters of a disk template")
    parser.add_argument("--hypervisor-state", dest="hv_state", type=_state, action="append", default=[],
                        metavar="HYPERVISOR:PARAM=VALUE,...", help="Static hypervisor state")
    parser.add_argument("--disk-state", dest="disk_state", type=_state, action="append", default=[],
                        metavar="STORAGE_TYPE/NAME:PARAM=VALUE,...", help="Static disk state")
    parser.add_argument("--ipolicy-vcpu-ratio", default=None, metavar="RATIO",
                        help="The maximum allowed vcpu-to-cpu ratio")
    parser.add_argument("--ipolicy-spindle-ratio", default=None, metavar="RATIO",
                        help="The maximum allowed instances to spindle ratio")
    parser.add_argument("--ipolicy-disk-templates", default=None, metavar="TEMPLATE,...",
                        help="Comma-separated list of the enabled disk templates")
    parser.add_argument("--ipolicy-bounds-specs", type=_bounds_specs, default=None,
                        metavar="min:PARAM=VALUE,.../max:PARAM=VALUE,...[//...]",
                        help="Instance specs bounds (the minimum and maximum of each pair)")


def _bounds_specs(text: str) -> list[dict[str, Any]]:
    from ganeti.client.policy_info import bounds_specs

    return bounds_specs(text)


def _setup_modify(parser: argparse.ArgumentParser) -> None:
    _param_options(parser)
    _job_options(parser)
    parser.add_argument("group", metavar="GROUP_NAME")


def _setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("groups", nargs="*", metavar="GROUP", help="Groups to show (default: all)")


def _setup_show_ispecs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--include-defaults", action="store_true",
                        help="Include the values inherited from the cluster")
    parser.add_argument("groups", nargs="*", metavar="GROUP", help="Groups to show (default: all)")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS)
    parser.add_argument("-F", "--filter", dest="force_filter", action="store_true",
                        help="Whether command argument should be treated as filter")
    parser.add_argument("groups", nargs="*", metavar="GROUP_NAME",
                        help="groups (globs allowed) or one filter (default: all)")


def evacuate_group(ctx: Context, opts: argparse.Namespace) -> int:
    """Move every instance of the group to other groups, one job each (OP_GROUP_EVACUATE)."""
    from ganeti.client.jobs import follow_up_jobs

    params: dict[str, Any] = {"group_name": opts.group, "early_release": opts.early_release,
                              "sequential": opts.sequential, "force_failover": opts.force_failover}
    if opts.iallocator:
        params["iallocator"] = opts.iallocator
    if opts.to:
        params["target_groups"] = opts.to
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_GROUP_EVACUATE", **params))
    bad = sum(1 for good, _ in follow_up_jobs(ctx, result) if not good)
    if bad:
        ctx.out("There were %d errors while evacuating group %s." % (bad, opts.group))
        return EXIT_FAILURE
    ctx.out("All instances of group %s evacuated successfully." % opts.group)
    return EXIT_SUCCESS


def _setup_evacuate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the new nodes with this allocator")
    parser.add_argument("--to", action="append", default=[], metavar="GROUP",
                        help="Target group (repeatable; default: every other group)")
    parser.add_argument("--early-release", action="store_true", help="Release the locks as early as possible")
    parser.add_argument("--sequential", action="store_true", help="Move the instances one after the other")
    parser.add_argument("--force-failover", action="store_true", help="Fail over instead of migrating")
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("group", metavar="GROUP")


COMMANDS: dict[str, Command] = {
    "add": Command(add_group, _setup_add, "Add a new node group to the cluster"),
    "evacuate": Command(evacuate_group, _setup_evacuate, "Evacuate all instances of a node group"),
    "remove": Command(remove_group, _setup_remove, "Remove an (empty) node group from the cluster"),
    "rename": Command(rename_group, _setup_rename, "Rename a node group"),
    "assign-nodes": Command(assign_nodes, _setup_assign_nodes, "Assign nodes to a node group"),
    "modify": Command(modify_group, _setup_modify, "Change the parameters of a node group"),
    "list": Command(
        list_groups, _setup_list,
        "Lists the node groups in the cluster. The available fields can be shown using the"
        ' "list-fields" command (see the man page for details). The default list is (in order):'
        " %s." % ", ".join(LIST_DEF_FIELDS),
        "Default options and arguments may also come from the GNT_GROUP_LIST environment variable.",
    ),
    "list-fields": Command(list_group_fields, add_list_fields_options, "Lists all available fields for node groups"),
    "info": Command("ganeti.client.policy_info:group_info", _setup_info, "Show information about node groups"),
    "show-ispecs-cmd": Command("ganeti.client.policy_info:show_group_ispecs", _setup_show_ispecs,
                               "Show the command line to re-create a group"),
    **tag_commands(TAG_NODEGROUP, "GROUP_NAME", "node group"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-group", COMMANDS, argv, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
