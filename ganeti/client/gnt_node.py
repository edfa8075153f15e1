"""gnt-node: node commands (Ganeti's names and output).

    gnt-node list [-o FIELDS] [--no-headers] [--separator S] [NODE...]
    gnt-node list-fields [FIELD...]
    gnt-node info [NODE...]
    gnt-node list-tags | add-tags | remove-tags NODE TAG...
    gnt-node add [--primary-ip IP] [--secondary-ip IP] [-g GROUP] [--join-token T] NODE
    gnt-node remove NODE
    gnt-node modify [--offline yes|no] [--drained yes|no] [-C|--master-candidate yes|no]
                    [--master-capable yes|no] [--vm-capable yes|no] [--auto-promote] [--force] NODE
    gnt-node evacuate [-f] [-p|-s] [-n NEW_NODE | -I ALLOCATOR] [--early-release] NODE
    gnt-node migrate [-f] [--non-live | --migration-mode MODE] [-n TARGET | -I ALLOCATOR] NODE
    gnt-node list-storage [-t TYPE] [-o FIELDS] [--no-headers] [--separator S] [--units U] [NODE...]
    gnt-node failover [-f] [--ignore-consistency] [-I ALLOCATOR] NODE
    gnt-node power on|off|cycle|status [NODE...]; gnt-node health [NODE...] (L{ganeti.client.oob_cmds})
    gnt-node restricted-command [--sync] [-M] [-g GROUP] COMMAND [NODE...]
    gnt-node volumes | modify-storage | repair-storage | list-drbd (L{ganeti.client.node_storage_cmds})

C{evacuate} and C{migrate} submit one job that submits one job per
instance; the command then follows those (L{ganeti.client.jobs}).

Live fields (memory, disk) show C{?} until the node daemon answers
node_info.  C{add} needs the new node's daemon running with the cluster's
certificate, or waiting unjoined for C{--join-token}.
"""

from __future__ import annotations

import argparse
import re

from ganeti import errors
from ganeti.client import node_storage_cmds, oob_cmds, prompt
from ganeti.client.command import EXIT_CONFIRMATION, EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import JobExecutor, opcode, report_changes, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_force_option,
    add_list_fields_options,
    add_list_options,
    add_priority_option,
    add_submit_options,
    make_simple_filter,
    parse_fields,
    yes_no,
)
from ganeti.client.qfilter import make_filter
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import run
from ganeti.client.tags import TAG_NODE, tag_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVAC_PRIMARY, EVAC_SECONDARY, EVAC_ALL = "primary-only", "secondary-only", "all"
LIST_DEF_FIELDS = ["name", "dtotal", "dfree", "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt"]
INFO_FIELDS = [
    "name", "pip", "sip", "master", "master_candidate", "drained", "offline", "master_capable", "vm_capable",
    "group", "pinst_list", "sinst_list", "ndparams", "tags",
]


def _join(value: Any) -> str:
    return ",".join(value or [])


LIST_FORMAT = {"pinst_list": (_join, False), "sinst_list": (_join, False), "tags": (_join, False)}


def list_nodes(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    return generic_list(ctx, "node", fields, make_filter(opts.nodes, opts.force_filter), LIST_FORMAT)


STORAGE_DEF_FIELDS = ["node", "type", "name", "size", "used", "free", "allocatable"]
_STORAGE_TITLES = {"node": "Node", "type": "Type", "name": "Name", "size": "Size", "used": "Used", "free": "Free",
                   "allocatable": "Allocatable"}
_STORAGE_SIZES = ("size", "used", "free")


def list_storage(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{gnt-node list-storage}: one OP_NODE_QUERY_STORAGE, a table."""
    from ganeti.client.formatting import format_table
    from ganeti.units import format_unit

    fields = parse_fields(opts.output, STORAGE_DEF_FIELDS)
    params: dict[str, Any] = {"nodes": list(opts.nodes), "output_fields": fields}
    if opts.storage_type:
        params["storage_type"] = opts.storage_type
    (rows,) = submit_or_send(ctx, opcode(ctx, "OP_NODE_QUERY_STORAGE", **params))
    unit = opts.units or ("m" if opts.separator is not None else "h")
    shown = []
    for row in rows or []:
        cells = []
        for field, value in zip(fields, row):
            if field in _STORAGE_SIZES and isinstance(value, int):
                cells.append(format_unit(value, unit))
            elif field == "allocatable":
                cells.append("Y" if value else "N")
            else:
                cells.append(str(value))
        shown.append(cells)
    titles = None if opts.no_headers else [_STORAGE_TITLES.get(f, f) for f in fields]
    for line in format_table(shown, titles, [f in _STORAGE_SIZES for f in fields], opts.separator):
        ctx.out(line)
    return EXIT_SUCCESS


def list_node_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "node")


def info(ctx: Context, opts: argparse.Namespace) -> int:
    response = ctx.client().query("node", INFO_FIELDS, make_simple_filter("name", opts.nodes))
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
    return EXIT_SUCCESS


def add_node(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.cluster_opts import states

    params: dict[str, Any] = {"node_name": opts.node, "readd": opts.readd}
    for name in ("primary_ip", "secondary_ip", "group", "master_capable", "vm_capable", "join_token", "ndparams"):
        value = getattr(opts, name)
        if value is not None:
            params[name] = value
    params.update(states(opts))
    if opts.force_join:  # as Ganeti 3.0's
        ctx.err("The \"--force-join\" option is no longer supported and will be ignored.")
    submit_or_send(ctx, opcode(ctx, "OP_NODE_ADD", **params))
    return EXIT_SUCCESS


def remove_node(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, opcode(ctx, "OP_NODE_REMOVE", node_name=opts.node))
    return EXIT_SUCCESS


_MODIFY_FLAGS = ("offline", "drained", "master_candidate", "master_capable", "vm_capable", "secondary_ip", "ndparams")


def modify_node(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.cluster_opts import states

    params = {name: getattr(opts, name) for name in _MODIFY_FLAGS if getattr(opts, name) is not None}
    params.update(states(opts))
    if opts.node_powered is not None:
        params["powered"] = opts.node_powered
    if not params:
        ctx.err("Please give at least one of the parameters.")
        return EXIT_FAILURE
    op = opcode(ctx, "OP_NODE_SET_PARAMS", node_name=opts.node, force=opts.force,
                    auto_promote=opts.auto_promote, **params)
    (result,) = submit_or_send(ctx, op)
    report_changes(ctx, "node %s" % opts.node, result)
    return EXIT_SUCCESS


def _nice_key(name: str) -> list[Any]:
    """Sort key putting C{web2} before C{web10}."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _node_instances(ctx: Context, node: str, fields: list[str]) -> list[str]:
    """The instances listed in C{fields} (pinst_list, sinst_list) of C{node}."""
    response = ctx.client().query("node", ["name"] + fields, make_simple_filter("name", [node]))
    names: set[str] = set()
    for row in response["data"]:
        for status, value in row[1:]:
            if status == 0:
                names.update(value or [])
    return sorted(names, key=_nice_key)


def _report_follow_up(ctx: Context, result: Any, done: str, failed: str) -> int:
    from ganeti.client.jobs import follow_up_jobs

    bad = sum(1 for ok, _ in follow_up_jobs(ctx, result) if not ok)
    if bad:
        ctx.out(failed % bad)
        return EXIT_FAILURE
    ctx.out(done)
    return EXIT_SUCCESS


def evacuate_node(ctx: Context, opts: argparse.Namespace) -> int:
    """Move the node's instances away (primary, secondary or all), one job each."""
    if opts.dst_node and opts.iallocator:
        raise errors.OpPrereqError(
            "Give either an iallocator (-I) or a new node (-n), not both", errors.ECODE_INVAL
        )
    if opts.primary_only:
        mode, fields = EVAC_PRIMARY, ["pinst_list"]
    elif opts.secondary_only:
        mode, fields = EVAC_SECONDARY, ["sinst_list"]
    else:
        mode, fields = EVAC_ALL, ["pinst_list", "sinst_list"]
    instances = _node_instances(ctx, opts.node, fields)
    if not instances:
        ctx.err("No instances to evacuate on node(s) %s, exiting." % opts.node)
        return EXIT_SUCCESS
    if not opts.force and not prompt.ask_user(
        "Move instance(s) %s away from node %s?" % (", ".join(instances), opts.node)
    ):
        return EXIT_CONFIRMATION
    params: dict[str, Any] = {"node_name": opts.node, "mode": mode, "early_release": opts.early_release}
    for key, value in (("remote_node", opts.dst_node), ("iallocator", opts.iallocator)):
        if value:
            params[key] = value
    if opts.ignore_soft_errors:
        params["ignore_soft_errors"] = True
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_NODE_EVACUATE", **params))
    return _report_follow_up(
        ctx, result, "All instances evacuated successfully.", "There were %d errors during the evacuation."
    )


def migrate_node(ctx: Context, opts: argparse.Namespace) -> int:
    """Live-migrate the node's primary instances away, one job each."""
    if opts.non_live and opts.migration_mode is not None:
        raise errors.OpPrereqError(
            "Only one of the --non-live and --migration-mode options can be passed", errors.ECODE_INVAL
        )
    if opts.dst_node and opts.iallocator:
        raise errors.OpPrereqError(
            "Give either an iallocator (-I) or a target node (-n), not both", errors.ECODE_INVAL
        )
    instances = _node_instances(ctx, opts.node, ["pinst_list"])
    if not instances:
        ctx.out("No primary instances on node %s, exiting." % opts.node)
        return EXIT_SUCCESS
    if not opts.force and not prompt.ask_user("Migrate instance(s) %s?" % ", ".join(instances)):
        return EXIT_CONFIRMATION
    params: dict[str, Any] = {
        "node_name": opts.node,
        "allow_runtime_changes": opts.allow_runtime_changes,
        "ignore_ipolicy": opts.ignore_ipolicy,
    }
    mode = "non-live" if opts.non_live else opts.migration_mode
    for key, value in (("mode", mode), ("target_node", opts.dst_node), ("iallocator", opts.iallocator)):
        if value:
            params[key] = value
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_NODE_MIGRATE", **params))
    return _report_follow_up(
        ctx, result, "All instances migrated successfully.", "There were %d errors during the node migration."
    )


def failover_node(ctx: Context, opts: argparse.Namespace) -> int:
    """Fail over the node's primary instances, one job each (Ganeti's C{FailoverNode})."""
    instances = _node_instances(ctx, opts.node, ["pinst_list"])
    if not instances:
        ctx.err("No primary instances on node %s, exiting." % opts.node)
        return EXIT_SUCCESS
    if not opts.force and not prompt.ask_user("Fail over instance(s) %s?"
                                              % ",".join("'%s'" % name for name in instances)):
        return EXIT_CONFIRMATION
    executor = JobExecutor(ctx)
    for name in instances:
        params: dict[str, Any] = {"instance_name": name, "ignore_consistency": opts.ignore_consistency}
        if opts.iallocator:
            params["iallocator"] = opts.iallocator
        executor.queue_job(name, opcode(ctx, "OP_INSTANCE_FAILOVER", **params))
    results = executor.get_results()
    bad = sum(1 for ok, _ in results if not ok)
    if bad:
        ctx.out("There were errors during the failover:\n%d error(s) out of %d instance(s)." % (bad, len(results)))
        return EXIT_FAILURE
    ctx.out("All %d instance(s) failed over successfully." % len(results))
    return EXIT_SUCCESS


def _online_nodes(ctx: Context, names: list[str], group: str | None) -> list[str]:
    """The online nodes among C{names} or of node group C{group} (Ganeti's
    C{GetOnlineNodes}: offline ones are left out with a note)."""
    qfilter = make_simple_filter("name", names) if names else None
    rows = ctx.client().query("node", ["name", "offline", "group", "group.uuid"], qfilter)["data"]
    if group:
        rows = [row for row in rows if group in (row[2][1], row[3][1])]
        if not rows:
            raise errors.OpPrereqError("Node group '%s' has no nodes" % group, errors.ECODE_NOENT)
    offline = [row[0][1] for row in rows if row[1][1]]
    if offline:
        ctx.err("Note: skipping offline node(s): %s" % ", ".join(offline))
    return [row[0][1] for row in rows if not row[1][1]]


def restricted_command(ctx: Context, opts: argparse.Namespace) -> int:
    """Run a restricted command on nodes (Ganeti's C{RestrictedCommand})."""
    if not opts.nodes and not opts.nodegroup:
        raise errors.OpPrereqError("Node group or node names must be given", errors.ECODE_INVAL)
    nodes = _online_nodes(ctx, opts.nodes, opts.nodegroup)
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_RESTRICTED_COMMAND", command=opts.command, nodes=nodes,
                                           use_locking=opts.do_locking))
    code = EXIT_SUCCESS
    for node, (ok, text) in zip(nodes, result):
        ctx.out("------------------------------------------------")
        if not ok:
            code = EXIT_FAILURE
            ctx.out(text)
        elif opts.show_machine_names:
            for line in text.splitlines():
                ctx.out("%s: %s" % (node, line))
        else:
            ctx.out("Node: %s" % node)
            ctx.out(text)
    return code


def _setup_failover(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    parser.add_argument("--ignore-consistency", action="store_true",
                        help="Ignore the consistency of the disks on the secondary. The source node must be marked"
                        " offline first for this to succeed.")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the target nodes with this allocator")
    add_priority_option(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_restricted_command(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sync", dest="do_locking", action="store_true",
                        help="Grab locks while doing the queries in order to ensure more consistent results")
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("-M", "--show-machine-names", action="store_true",
                        help="Show machine name for every line in output")
    parser.add_argument("-g", "--node-group", dest="nodegroup", metavar="GROUP", help="Node group (name or uuid)")
    parser.add_argument("command", metavar="COMMAND")
    parser.add_argument("nodes", metavar="NODE", nargs="*")


def _setup_evacuate(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("-p", "--primary-only", action="store_true", help="Evacuate the primary instances only")
    which.add_argument("-s", "--secondary-only", action="store_true", help="Evacuate the secondary instances only")
    parser.add_argument("-n", "--new-secondary", dest="dst_node", metavar="NODE",
                        help="Move the instances to this node")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the new nodes with this allocator")
    parser.add_argument("--early-release", action="store_true", help="Release the locks as early as possible")
    parser.add_argument("--ignore-soft-errors", action="store_true", help="Ignore the allocator's soft errors")
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_migrate(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    parser.add_argument("--non-live", action="store_true", help="Stop each instance while its memory is copied")
    parser.add_argument("--migration-mode", choices=("live", "non-live"), help="live or non-live (default: hvparams)")
    parser.add_argument("--no-runtime-changes", dest="allow_runtime_changes", action="store_false",
                        help="Do not change the instances' memory to make them fit on the target")
    parser.add_argument("-n", "--target-node", dest="dst_node", metavar="NODE",
                        help="Target node (shared storage templates)")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the target nodes with this allocator")
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", "--secondary-ip", dest="secondary_ip", metavar="ADDRESS",
                        help="Specify the secondary ip for the node")
    parser.add_argument("--node-parameters", dest="ndparams", type=_key_values, default=None,
                        metavar="PARAM=VALUE,...", help="Node parameters (e.g. oob_program; \"default\" resets one)")
    parser.add_argument("--primary-ip", dest="primary_ip", metavar="ADDRESS",
                        help="The node's primary IP (default: resolved from its name)")
    parser.add_argument("-g", "--node-group", "--group", dest="group", metavar="GROUP",
                        help="Node group (name or uuid)")
    parser.add_argument("--readd", action="store_true", help="Readd old node after replacing it")
    parser.add_argument("--master-capable", type=yes_no, metavar="yes|no",
                        help="Set the master_capable flag on the node")
    parser.add_argument("--vm-capable", type=yes_no, metavar="yes|no", help="Set the vm_capable flag on the node")
    parser.add_argument("-v", "--verbose", action="store_true", help="Accepted as Ganeti's (nothing more to tell)")
    parser.add_argument("--no-ssh-key-check", dest="ssh_key_check", action="store_false",
                        help="Accepted as Ganeti's: nodes join over the cluster's TLS, no SSH key is checked")
    parser.add_argument("--no-node-setup", dest="node_setup", action="store_false",
                        help="Accepted as Ganeti's: no SSH setup is ever done on the new node")
    parser.add_argument("--join-token", metavar="TOKEN",
                        help="One-time token the new node's unjoined ganeti-noded was started with")
    _state_options(parser)
    parser.add_argument("--force-join", action="store_true",
                        help="Accepted as Ganeti 3.0's: no longer supported, ignored with a warning")
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_remove(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _key_values(text: str) -> dict[str, Any]:
    from ganeti.client import instance_opts

    return instance_opts.key_values(text)


def _state_options(parser: argparse.ArgumentParser) -> None:
    from ganeti.client.cluster_opts import state

    parser.add_argument("--hypervisor-state", dest="hv_state", type=state, action="append", default=[],
                        metavar="HYPERVISOR:PARAM=VALUE,...", help="Static hypervisor state of the node")
    parser.add_argument("--disk-state", dest="disk_state", type=state, action="append", default=[],
                        metavar="STORAGE_TYPE/NAME:PARAM=VALUE,...", help="Static disk state of the node")


def _setup_modify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-O", "--offline", type=yes_no, metavar="yes|no", help="Set the offline flag on the node")
    parser.add_argument("-D", "--drained", type=yes_no, metavar="yes|no", help="Set the drained flag on the node")
    parser.add_argument("-C", "--master-candidate", type=yes_no, metavar="yes|no",
                        help="Set the master_candidate flag on the node")
    parser.add_argument("--master-capable", type=yes_no, metavar="yes|no",
                        help="Set the master_capable flag on the node")
    parser.add_argument("--vm-capable", type=yes_no, metavar="yes|no", help="Set the vm_capable flag on the node")
    parser.add_argument("-s", "--secondary-ip", dest="secondary_ip", metavar="ADDRESS",
                        help="Specify the secondary ip for the node")
    parser.add_argument("--node-parameters", dest="ndparams", type=_key_values, default=None,
                        metavar="PARAM=VALUE,...", help="Node parameters (e.g. oob_program; \"default\" resets one)")
    _state_options(parser)
    parser.add_argument("--node-powered", type=yes_no, default=None, metavar="yes|no",
                        help="Record whether the node is powered (what OOB power management sets)")
    parser.add_argument("--auto-promote", action="store_true",
                        help="Automatically promote enough nodes to master candidate status to respect"
                             " candidate_pool_size")
    add_force_option(parser)
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("node", metavar="NODE")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS, units=True)
    parser.add_argument("-F", "--filter", dest="force_filter", action="store_true",
                        help="Whether command argument should be treated as filter")
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="nodes (globs allowed) or one filter (default: all)")


def _setup_list_storage(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, STORAGE_DEF_FIELDS, units=True)
    parser.add_argument("-t", "--storage-type", dest="storage_type", metavar="TYPE",
                        help="Storage type: file, sharedfile or rados (default: the first enabled template's)")
    add_priority_option(parser)
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
    "list-fields": Command(list_node_fields, add_list_fields_options, "Lists all available fields for nodes"),
    "list-storage": Command(list_storage, _setup_list_storage, "Lists the storage units of the nodes"),
    "info": Command(info, _setup_info, "Show information about the node(s)"),
    "add": Command(add_node, _setup_add, "Add a node to the cluster"),
    "remove": Command(remove_node, _setup_remove, "Removes a node from the cluster"),
    "modify": Command(modify_node, _setup_modify, "Alters the parameters of a node"),
    "evacuate": Command(evacuate_node, _setup_evacuate, "Move the primary and/or secondary instances off a node"),
    "migrate": Command(migrate_node, _setup_migrate, "Migrate all primary instances of a node to other nodes"),
    "failover": Command(failover_node, _setup_failover,
                        "Stops the primary instances on a node and start them on their secondary node"),
    "restricted-command": Command(restricted_command, _setup_restricted_command,
                                  "Executes a restricted command on node(s)"),
    "volumes": Command(node_storage_cmds.volumes, node_storage_cmds.setup_volumes,
                       "List logical volumes on node(s) (none here: no LVM)"),
    "modify-storage": Command(node_storage_cmds.modify_storage, node_storage_cmds.setup_modify_storage,
                              "Modify storage volume on a node (LVM physical volumes only)"),
    "repair-storage": Command(node_storage_cmds.repair_storage, node_storage_cmds.setup_repair_storage,
                              "Repairs a storage volume on a node (LVM volume groups only)"),
    "list-drbd": Command(node_storage_cmds.list_drbd, node_storage_cmds.setup_list_drbd,
                         "Query the list of used DRBD minors on the given node"),
    "power": Command("ganeti.client.oob_cmds:power", oob_cmds.setup_power,
                     "Change power state of node by calling out-of-band helper."),
    "health": Command("ganeti.client.oob_cmds:health", oob_cmds.setup_health,
                      "List health of node(s) using out-of-band"),
    "powercycle": Command("ganeti.client.oob_cmds:powercycle", oob_cmds.setup_powercycle,
                          "Tries to forcefully powercycle a node"),
    **tag_commands(TAG_NODE, "NODE", "node"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-node", COMMANDS, argv, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
