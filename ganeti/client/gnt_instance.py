"""gnt-instance: instance commands (Ganeti's names, options and output).

    gnt-instance add -t TEMPLATE {--disk N:size=S,... | -s SIZE} [-n PNODE[:SNODE] | -I ALLOC]
                     -o OS [-B be=v,...] [-H hv[:k=v,...]] [--net N:k=v,...|--no-nics] NAME
    gnt-instance remove [-f] [--ignore-failures] NAME
    gnt-instance list [-o [+]FIELDS] [--no-headers] [--separator S] [-F] [NAME|FILTER...]
    gnt-instance info [-s] {NAME... | --all}
    gnt-instance startup|shutdown|reboot [--all|--node|--primary|--secondary|--tags] NAME...
    gnt-instance modify [-B ...] [-H ...] [-O ...] [--disk ...] [--net ...] [--offline|--online] NAME
    gnt-instance grow-disk [--absolute] NAME DISK AMOUNT
    gnt-instance activate-disks [--ignore-size] [--wait-for-sync] NAME
    gnt-instance deactivate-disks [-f] NAME
    gnt-instance recreate-disks [--disk N[:size=S,mode=M]] [-n NODE | -I ALLOC] NAME
    gnt-instance rename|reinstall|failover|migrate|move|change-group|console ...

Option values (key=value lists, sizes, disks, NICs) are parsed by
L{ganeti.client.instance_opts}; C{info}'s layout is
L{ganeti.client.instance_info}'s; commands acting on several instances
submit one job each through L{ganeti.client.jobs.JobExecutor}.
"""

from __future__ import annotations

import argparse
import os
import sys

from ganeti import errors
from ganeti.client import instance_opts as iopts
from ganeti.client import prompt, runner
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.formatting import RS_NORMAL, format_generic_info
from ganeti.client.instance_opts import (
    BY_CLUSTER,
    BY_NAME,
    BY_NODE,
    BY_NODE_TAGS,
    BY_PRIMARY,
    BY_PRIMARY_TAGS,
    BY_SECONDARY,
    BY_SECONDARY_TAGS,
    BY_TAGS,
    LIST_DEF_FIELDS,
)
from ganeti.client.jobs import JobExecutor, opcode, report_changes, submit_opcodes, submit_or_send
from ganeti.client.options import add_list_fields_options, make_simple_filter, parse_fields
from ganeti.client.qfilter import make_filter
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.tags import TAG_INSTANCE, tag_commands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: with more instances than this, the confirmation offers to show the list
CONFIRM_LIST_MAX = 20


def _join(value: Any) -> str:
    return ",".join(str(item) for item in value) if isinstance(value, (list, tuple)) else str(value)


#: how C{gnt-instance list} shows list-valued fields
LIST_FORMAT = {
    name: (_join, False)
    for name in (
        "tags", "disk.sizes", "disk.spindles", "disk.names", "disk.uuids", "nic.macs", "nic.ips", "nic.modes",
        "nic.links", "nic.bridges", "nic.networks", "nic.networks.names", "nic.names", "nic.uuids", "nic.vlans",
        "snodes", "snodes.group", "snodes.group.uuid",
    )
}


def _prereq(message: str, code: str = errors.ECODE_INVAL) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, code)


# --- add -----------------------------------------------------------------------------------
def create_opcode(ctx: Context, opts: argparse.Namespace) -> dict[str, Any]:
    """The OP_INSTANCE_CREATE of C{gnt-instance add}'s options."""
    hypervisor, hvparams = None, {}
    if opts.hypervisor is not None:
        hypervisor, raw = opts.hypervisor
        if not isinstance(raw, dict):
            raise _prereq("Invalid hypervisor option '%s': give -H HYPERVISOR[:PARAM=VALUE,...]" % hypervisor)
        hvparams = iopts.hv_params(raw)
    pnode, snode = iopts.split_node(opts.node)
    params: dict[str, Any] = {
        "instance_name": opts.instance,
        "mode": "create",
        "disks": iopts.instance_disks(opts.disks, opts.os_size, opts.disk_template),
        "nics": iopts.instance_nics(opts.nics, opts.no_nics),
        "beparams": iopts.be_params(opts.beparams),
        "hvparams": hvparams,
        "osparams": dict(opts.osparams),
        "start": opts.start,
        "no_install": opts.no_install,
        "name_check": opts.name_check,
        "ip_check": opts.ip_check,
        "conflicts_check": opts.conflicts_check,
        "wait_for_sync": opts.wait_for_sync,
        "opportunistic_locking": opts.opportunistic_locking,
        "force_variant": opts.force_variant,
        "identify_defaults": opts.identify_defaults,
        "ignore_ipolicy": opts.ignore_ipolicy,
        "tags": [tag for tag in (opts.tags or "").split(",") if tag],
    }
    optional = {
        "disk_template": opts.disk_template,
        "pnode": pnode,
        "snode": snode,
        "iallocator": opts.iallocator,
        "os_type": opts.os,
        "hypervisor": hypervisor,
        "file_storage_dir": opts.file_storage_dir,
        "file_driver": opts.file_driver,
        "group_name": opts.nodegroup,
        "instance_communication": opts.instance_communication,
        "helper_startup_timeout": opts.helper_startup_timeout,
        "helper_shutdown_timeout": opts.helper_shutdown_timeout,
    }
    if opts.forthcoming or opts.commit:
        params.update(forthcoming=opts.forthcoming, commit=opts.commit)
    for name in ("osparams_private", "osparams_secret"):  # only when given: job files show them redacted
        if getattr(opts, name):
            params[name] = dict(getattr(opts, name))
    params.update({key: value for key, value in optional.items() if value is not None})
    return opcode(ctx, "OP_INSTANCE_CREATE", **params)


def add_instance(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, create_opcode(ctx, opts))
    return EXIT_SUCCESS


# --- remove ----------------------------------------------------------------------------------
def _check_exists(ctx: Context, names: list[str]) -> list[str]:
    """The full names of C{names}; LuxiD refuses unknown ones (exit 1)."""
    response = ctx.client().query("instance", ["name"], make_simple_filter("name", names))
    return [row[0][1] for row in response["data"]]


def remove_instance(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.force:
        _check_exists(ctx, [opts.instance])
        question = (
            "This will remove the volumes of the instance %s (including mirrors), thus removing all the data"
            " of the instance. Continue?" % opts.instance
        )
        if not prompt.ask_user(question):
            return EXIT_FAILURE
    op = opcode(
        ctx, "OP_INSTANCE_REMOVE", instance_name=opts.instance, ignore_failures=opts.ignore_failures,
        shutdown_timeout=opts.shutdown_timeout,
    )
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


# --- list, list-fields, info --------------------------------------------------------------------
def list_instances(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    qfilter = make_filter(opts.names, opts.force_filter)
    return generic_list(ctx, "instance", fields, qfilter, LIST_FORMAT)


def list_instance_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "instance")


def show_instance(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.instance_info import instance_info

    if not opts.names and not opts.show_all:
        ctx.err("No instance selected. Give instance names, or --all for every instance (slow on big clusters).")
        return EXIT_FAILURE
    if opts.names and opts.show_all:
        ctx.err("Cannot use --all if you specify instance names.")
        return EXIT_FAILURE
    op = opcode(
        ctx, "OP_INSTANCE_QUERY_DATA", instances=list(opts.names), static=opts.static, use_locking=not opts.static
    )
    (result,) = submit_opcodes(ctx, [op])
    if not result:
        ctx.out("No instances.")
        return EXIT_FAILURE
    datas = list(result.values()) if isinstance(result, dict) else list(result)
    if opts.names:
        order = {name: index for index, name in enumerate(opts.names)}
        datas.sort(key=lambda d: (order.get(d.get("name"), len(order)), str(d.get("name"))))
    else:
        datas.sort(key=lambda d: str(d.get("name")))
    ctx.out(format_generic_info([instance_info(data, bool(getattr(opts, "roman_integers", False))) for data in datas]))
    return EXIT_SUCCESS


# --- several instances at once -----------------------------------------------------------------
def expand_names(ctx: Context, mode: str, args: list[str]) -> list[str]:
    """The instances C{mode} and the arguments select, each once."""
    if mode == BY_CLUSTER and args:
        ctx.usage_error("--all takes no arguments")
    if mode != BY_CLUSTER and not args:
        if mode == BY_NAME:
            ctx.usage_error("no instance name given")
        ctx.usage_error("no %s given" % ("node name" if mode in (BY_NODE, BY_PRIMARY, BY_SECONDARY) else "tag"))
    client = ctx.client()
    if mode == BY_CLUSTER:
        return [row[0][1] for row in client.query("instance", ["name"], None)["data"]]
    if mode == BY_NAME:
        return _unique(_check_exists(ctx, args))
    if mode == BY_TAGS:
        rows = client.query("instance", ["name", "tags"], None)["data"]
        return [row[0][1] for row in rows if set(args) & set(row[1][1] or [])]
    if mode in (BY_NODE, BY_PRIMARY, BY_SECONDARY):
        rows = client.query("node", ["name", "pinst_list", "sinst_list"], make_simple_filter("name", args))["data"]
    else:
        rows = [row for row in client.query("node", ["name", "pinst_list", "sinst_list", "tags"], None)["data"]
                if set(args) & set(row[3][1] or [])]
    primary = mode in (BY_NODE, BY_PRIMARY, BY_NODE_TAGS, BY_PRIMARY_TAGS)
    secondary = mode in (BY_NODE, BY_SECONDARY, BY_NODE_TAGS, BY_SECONDARY_TAGS)
    names: list[str] = []
    for row in rows:
        names += (row[1][1] or []) if primary else []
        names += (row[2][1] or []) if secondary else []
    return _unique(names)


def _unique(names: list[str]) -> list[str]:
    """C{names} without repeats, in order."""
    return list(dict.fromkeys(names))


def confirm(names: list[str], what: str, operation: str, extra: str = "") -> bool:
    """Ask whether C{operation} may go ahead on C{names}, listing them
    (on request when there are many)."""
    intro = "The %s will act on %d %s.\n%sContinue?" % (operation, len(names), what, extra)
    listing = "\nAffected %s:\n%s" % (what, "\n".join("  %s" % name for name in names))
    choices = [("y", True, "Yes, run the %s" % operation), ("n", False, "No, cancel the %s" % operation)]
    if len(names) <= CONFIRM_LIST_MAX:
        return bool(prompt.ask_user(intro + listing, choices))
    answer = prompt.ask_user(intro, [choices[0], ("v", "v", "View the %s first" % what), choices[1]])
    if answer == "v":
        answer = prompt.ask_user(intro + listing, choices)
    return bool(answer)


def many_ops(operation: str, make_op: Callable[[Context, argparse.Namespace, str], dict[str, Any]]) -> Any:
    """A command that runs C{make_op}'s opcode on each selected instance, one job each."""

    def run(ctx: Context, opts: argparse.Namespace) -> int:
        mode = opts.multi_mode or BY_NAME
        names = expand_names(ctx, mode, opts.names)
        if not names:
            if mode == BY_CLUSTER:
                ctx.out("Cluster is empty, no instances to %s" % operation)
                return EXIT_SUCCESS
            raise _prereq("Selection filter does not match any instances")
        several = mode != BY_NAME or len(names) > 1
        if several and not opts.force_multi and not confirm(names, "instances", operation):
            return EXIT_FAILURE
        executor = JobExecutor(ctx, verbose=several)
        for name in names:
            executor.queue_job(name, make_op(ctx, opts, name))
        results = executor.wait_or_show(not opts.submit_only)
        return EXIT_SUCCESS if all(ok for ok, _ in results) else EXIT_FAILURE

    return run


def _startup_op(ctx: Context, opts: argparse.Namespace, name: str) -> dict[str, Any]:
    params: dict[str, Any] = {
        "instance_name": name, "force": opts.force, "ignore_offline_nodes": opts.ignore_offline,
        "no_remember": opts.no_remember, "startup_paused": opts.startup_paused,
    }
    if opts.hvparams:
        params["hvparams"] = iopts.hv_params(opts.hvparams)
    if opts.beparams:
        params["beparams"] = iopts.be_params(opts.beparams)
    return opcode(ctx, "OP_INSTANCE_STARTUP", **params)


def _shutdown_op(ctx: Context, opts: argparse.Namespace, name: str) -> dict[str, Any]:
    return opcode(
        ctx, "OP_INSTANCE_SHUTDOWN", instance_name=name, force=opts.force, ignore_offline_nodes=opts.ignore_offline,
        timeout=opts.timeout, no_remember=opts.no_remember,
    )


def _reboot_op(ctx: Context, opts: argparse.Namespace, name: str) -> dict[str, Any]:
    return opcode(
        ctx, "OP_INSTANCE_REBOOT", instance_name=name, reboot_type=opts.reboot_type,
        ignore_secondaries=opts.ignore_secondaries, shutdown_timeout=opts.shutdown_timeout,
    )


# --- modify, rename, reinstall --------------------------------------------------------------------
def modify_opcode(ctx: Context, opts: argparse.Namespace) -> dict[str, Any] | None:
    """The OP_INSTANCE_SET_PARAMS of C{gnt-instance modify}; C{None} if nothing changes."""
    offline = True if opts.offline_inst else (False if opts.online_inst else None)
    changes = (opts.nics, opts.disks, opts.disk_template, opts.hvparams, opts.beparams, opts.os, opts.osparams,
               opts.osparams_private, opts.runtime_mem, opts.new_primary_node, opts.node, opts.ext_params,
               opts.iallocator, opts.instance_communication is not None)
    if not any(changes) and offline is None:
        return None
    params: dict[str, Any] = {
        "instance_name": opts.instance,
        "nics": iopts.modifications(opts.nics, "nic"),
        "disks": iopts.modifications(opts.disks, "disk"),
        "beparams": iopts.be_params(opts.beparams, allow_reset=True),
        "hvparams": iopts.hv_params(opts.hvparams, allow_reset=True),
        "osparams": dict(opts.osparams),
        "force": opts.force,
        "force_variant": opts.force_variant,
        "wait_for_sync": opts.wait_for_sync,
        "conflicts_check": opts.conflicts_check,
        "ignore_ipolicy": opts.ignore_ipolicy,
        "hotplug_if_possible": opts.hotplug_if_possible,
    }
    optional = {
        "hotplug": opts.hotplug,
        "disk_template": opts.disk_template, "os_name": opts.os, "runtime_mem": opts.runtime_mem,
        "pnode": opts.new_primary_node, "remote_node": opts.node, "offline": offline,
        "file_storage_dir": opts.file_storage_dir, "file_driver": opts.file_driver,
        "instance_communication": opts.instance_communication, "iallocator": opts.iallocator,
        "ext_params": opts.ext_params or None, "osparams_private": dict(opts.osparams_private) or None,
    }
    params.update({key: value for key, value in optional.items() if value is not None})
    return opcode(ctx, "OP_INSTANCE_SET_PARAMS", **params)


def modify_instance(ctx: Context, opts: argparse.Namespace) -> int:
    op = modify_opcode(ctx, opts)
    if op is None:
        ctx.err("Please give at least one of the parameters.")
        return EXIT_FAILURE
    (result,) = submit_or_send(ctx, op)
    hotplugged = any(isinstance(c, list) and len(c) == 2 and c[1] == "hotplug:done" for c in result or [])
    later = any(getattr(opts, key) for key in ("beparams", "hvparams", "osparams", "osparams_private", "os",
                                               "disk_template"))
    if report_changes(ctx, "instance %s" % opts.instance, result) and (later or not hotplugged):
        ctx.out("Most changes take effect when Ganeti next starts the instance (a reboot from inside the"
                " instance is not enough).")
        if opts.hvparams:
            ctx.out("Restart the instance before migrating it live: it still runs with its old hypervisor"
                    " parameters.")
    return EXIT_SUCCESS


def rename_instance(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.name_check and not opts.force:
        if not prompt.ask_user("The name '%s' will not be looked up in DNS; make sure it is a fully qualified"
                            " name. Continue?" % opts.new_name):
            return EXIT_FAILURE
    op = opcode(ctx, "OP_INSTANCE_RENAME", instance_name=opts.instance, new_name=opts.new_name,
                    name_check=opts.name_check, ip_check=opts.ip_check)
    (result,) = submit_or_send(ctx, op)
    if result:
        ctx.out("Instance '%s' renamed to '%s'" % (opts.instance, result))
    return EXIT_SUCCESS


def select_os(ctx: Context) -> str | None:
    """Ganeti's C{--select-os}: list the OSes as C{gnt-os list} does
    (variants too), read a number; C{None} when the answer is no valid choice."""
    from ganeti.client.gnt_os import _diagnose
    from ganeti.osnames import os_names

    choices = [entry for name, variants in _diagnose(ctx, ["name", "variants"]) for entry in os_names(name, variants)]
    if not choices:
        ctx.err("Can't get the OS list")
        return None
    ctx.out("Available OS templates:")
    for number, name in enumerate(sorted(choices)):
        ctx.out("%3s: %s" % (number, name))
    try:
        answer = input("Enter OS template number (or x to abort): ")
    except EOFError:
        answer = "x"
    if answer.strip().isdigit() and int(answer) < len(choices):
        return sorted(choices)[int(answer)]
    ctx.err("User aborted reinstall, exiting" if answer.strip().lower() == "x" else "Invalid choice")
    return None


def reinstall_instance(ctx: Context, opts: argparse.Namespace) -> int:
    mode = opts.multi_mode or BY_NAME
    names = expand_names(ctx, mode, opts.names)
    if not names:
        raise _prereq("Selection filter does not match any instances")
    if opts.select_os:
        opts.os = select_os(ctx)
        if opts.os is None:
            return EXIT_FAILURE
    what_os = "change its OS to '%s'" % opts.os if opts.os else "keep its OS"
    several = mode != BY_NAME or len(names) > 1
    if several:
        extra = "All data of these instances will be lost; each will %s.\n" % what_os
        if not opts.force_multi and not confirm(names, "instances", "reinstall", extra):
            return EXIT_FAILURE
    elif not (opts.force or opts.force_multi):
        if not prompt.ask_user("This will reinstall the instance '%s' and %s; all its data will be lost."
                            " Continue?" % (names[0], what_os)):
            return EXIT_FAILURE
    executor = JobExecutor(ctx, verbose=several)
    for name in names:
        params: dict[str, Any] = {"instance_name": name, "force_variant": opts.force_variant}
        if opts.os:
            params["os_type"] = opts.os
        for name_ in ("osparams", "osparams_private", "osparams_secret"):
            if getattr(opts, name_):
                params[name_] = dict(getattr(opts, name_))
        executor.queue_job(name, opcode(ctx, "OP_INSTANCE_REINSTALL", **params))
    results = executor.wait_or_show(not opts.submit_only)
    return EXIT_SUCCESS if all(ok for ok, _ in results) else EXIT_FAILURE


def grow_disk_opcode(ctx: Context, opts: argparse.Namespace) -> dict[str, Any]:
    """The OP_INSTANCE_GROW_DISK of C{gnt-instance grow-disk INSTANCE DISK AMOUNT}."""
    try:
        disk = int(opts.disk)
    except ValueError:
        raise _prereq("Invalid disk index: '%s'" % opts.disk) from None
    if disk < 0:
        raise _prereq("Invalid disk index: %d" % disk)
    try:
        amount = iopts.parse_size(opts.amount)
    except ValueError:
        raise _prereq("Can't parse the given amount '%s'" % opts.amount) from None
    return opcode(ctx, "OP_INSTANCE_GROW_DISK", instance_name=opts.instance, disk=disk, amount=amount,
                      wait_for_sync=opts.wait_for_sync, absolute=opts.absolute, ignore_ipolicy=opts.ignore_ipolicy)


def grow_disk(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, grow_disk_opcode(ctx, opts))
    return EXIT_SUCCESS


def activate_disks(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{ActivateDisks}: one C{node:iv_name:path} line per disk."""
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_INSTANCE_ACTIVATE_DISKS", instance_name=opts.instance,
                                           ignore_size=opts.ignore_size, wait_for_sync=opts.wait_for_sync))
    for host, iv_name, dev_path in result or []:
        ctx.out("%s:%s:%s" % (host, iv_name, dev_path))
    return EXIT_SUCCESS


def deactivate_disks(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, opcode(ctx, "OP_INSTANCE_DEACTIVATE_DISKS", instance_name=opts.instance, force=opts.force))
    return EXIT_SUCCESS


def recreate_disks_opcode(ctx: Context, opts: argparse.Namespace) -> dict[str, Any]:
    """The OP_INSTANCE_RECREATE_DISKS of C{gnt-instance recreate-disks}."""
    disks: list[list[Any]] = []
    for ident, raw in opts.disks:
        if not ident.isdigit():
            raise _prereq("Invalid disk index: '%s'" % ident)
        params = dict(raw) if isinstance(raw, dict) else {}
        if "size" in params:
            try:
                params["size"] = iopts.parse_size(params["size"])
            except ValueError as e:
                raise _prereq("Invalid disk size for disk %s: %s" % (ident, e)) from None
        if "spindles" in params:
            try:
                params["spindles"] = int(params["spindles"])
            except ValueError as e:
                raise _prereq("Invalid spindles for disk %s: %s" % (ident, e)) from None
        disks.append([int(ident), params])
    nodes: list[str] = []
    if opts.node:
        if opts.iallocator:
            raise _prereq("At most one of either --nodes or --iallocator can be passed")
        nodes = [n for n in opts.node.split(":", 1) if n]
    optional = {"iallocator": opts.iallocator} if opts.iallocator else {}
    return opcode(ctx, "OP_INSTANCE_RECREATE_DISKS", instance_name=opts.instance, disks=disks, nodes=nodes,
                  **optional)


def recreate_disks(ctx: Context, opts: argparse.Namespace) -> int:
    submit_or_send(ctx, recreate_disks_opcode(ctx, opts))
    return EXIT_SUCCESS


# --- failover, migrate, console --------------------------------------------------------------------
def _target(opts: argparse.Namespace) -> dict[str, Any]:
    if opts.iallocator and opts.dst_node:
        raise _prereq("Give either an iallocator (-I) or a target node (-n), not both")
    return {key: value for key, value in (("iallocator", opts.iallocator), ("target_node", opts.dst_node)) if value}


def failover_instance(ctx: Context, opts: argparse.Namespace) -> int:
    target = _target(opts)
    if not opts.force:
        _check_exists(ctx, [opts.instance])
        if not prompt.ask_user("Instance %s will be shut down and started on another node. Continue?" % opts.instance):
            return EXIT_FAILURE
    op = opcode(ctx, "OP_INSTANCE_FAILOVER", instance_name=opts.instance,
                    ignore_consistency=opts.ignore_consistency, shutdown_timeout=opts.shutdown_timeout,
                    ignore_ipolicy=opts.ignore_ipolicy, cleanup=opts.cleanup, **target)
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def move_instance(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.force:
        _check_exists(ctx, [opts.instance])
        if not prompt.ask_user("Instance %s will be moved. This requires a shutdown of the instance. Continue?"
                            % opts.instance):
            return EXIT_FAILURE
    op = opcode(ctx, "OP_INSTANCE_MOVE", instance_name=opts.instance, target_node=opts.node,
                    compress=opts.compress, shutdown_timeout=opts.shutdown_timeout,
                    ignore_consistency=opts.ignore_consistency, ignore_ipolicy=opts.ignore_ipolicy)
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def change_group(ctx: Context, opts: argparse.Namespace) -> int:
    """Move an instance to another node group through a follow-up job (OP_INSTANCE_CHANGE_GROUP)."""
    from ganeti.client.jobs import follow_up_jobs

    params: dict[str, Any] = {"instance_name": opts.instance, "early_release": opts.early_release}
    if opts.iallocator:
        params["iallocator"] = opts.iallocator
    if opts.to:
        params["target_groups"] = opts.to
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_INSTANCE_CHANGE_GROUP", **params))
    bad = sum(1 for good, _ in follow_up_jobs(ctx, result) if not good)
    if bad:
        ctx.out("There were %d errors while changing the group of instance %s." % (bad, opts.instance))
        return EXIT_FAILURE
    ctx.out("Instance %s changed group successfully." % opts.instance)
    return EXIT_SUCCESS


def migration_mode(opts: argparse.Namespace) -> str | None:
    """C{--non-live} or C{--migration-mode}, not both."""
    if opts.non_live and opts.migration_mode is not None:
        raise _prereq("Only one of the --non-live and --migration-mode options can be passed")
    return "non-live" if opts.non_live else opts.migration_mode


def migrate_instance(ctx: Context, opts: argparse.Namespace) -> int:
    target = _target(opts)
    mode = migration_mode(opts)
    if not opts.force:
        _check_exists(ctx, [opts.instance])
        if opts.cleanup:
            question = ("Instance %s will be recovered from a failed migration; if anything goes wrong this"
                        " may affect the running instance. Continue?" % opts.instance)
        else:
            question = ("Instance %s will be migrated; if anything goes wrong (e.g. a hypervisor bug) this may"
                        " affect the running instance. Continue?" % opts.instance)
        if not prompt.ask_user(question):
            return EXIT_FAILURE
    params: dict[str, Any] = dict(target)
    if mode is not None:
        params["mode"] = mode
    op = opcode(ctx, "OP_INSTANCE_MIGRATE", instance_name=opts.instance, cleanup=opts.cleanup,
                    allow_failover=opts.allow_failover, allow_runtime_changes=opts.allow_runtime_changes,
                    ignore_ipolicy=opts.ignore_ipolicy, ignore_hvversions=opts.ignore_hvversions, **params)
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def console_command(console: dict[str, Any]) -> list[str]:
    """The ssh command line of an C{ssh} console."""
    import shlex

    command = console.get("command")
    remote = command if isinstance(command, str) else shlex.join(str(part) for part in command or [])
    argv = ["ssh", "-oEscapeChar=~", "-oBatchMode=yes", "-t"]
    if console.get("port"):
        argv += ["-p", str(console["port"])]
    if console.get("user"):
        argv += ["-l", str(console["user"])]
    return argv + [str(console.get("host")), remote]


def _message_console(ctx: Context, opts: argparse.Namespace, who: str, console: dict[str, Any]) -> None:
    """A message, or a kvm serial console we attach to when its socket is
    here and we are asked to (C{--attach}) or run on a terminal
    (L{ganeti.client.serial_console})."""
    import shlex

    from ganeti.client import serial_console

    path = serial_console.socket_path(console)
    interactive = os.isatty(0) and os.isatty(1)
    if path is None or not (opts.attach or opts.show_command or interactive):
        ctx.out(str(console.get("message")))
        return
    if opts.show_command:
        ctx.out(shlex.join(str(part) for part in console["command"]))
        return
    if not serial_console.is_local_socket(path):
        if not opts.attach:
            ctx.out(str(console.get("message")))
            return
        raise errors.OpExecError("The serial console of instance %s is the socket %s on node %s, not on this "
                                 "machine; run gnt-instance console there" % (who, path, console.get("host")))
    if interactive:
        sys.stderr.write("Connected to the serial console of instance %s; Ctrl-] leaves\r\n" % who)
    try:
        serial_console.attach(path)
    except serial_console.ConsoleError as e:
        raise errors.OpExecError("Console of instance %s: %s" % (who, e)) from None


def connect_console(ctx: Context, opts: argparse.Namespace) -> int:
    import shlex

    name = opts.instance
    response = ctx.client().query("instance", ["name", "console", "oper_state"], make_simple_filter("name", [name]))
    if not response["data"]:
        raise _prereq("Instance '%s' does not exist" % name, errors.ECODE_NOENT)
    (_, (console_status, console), (state_status, running)) = response["data"][0]
    if console_status != RS_NORMAL or not isinstance(console, dict):
        if state_status == RS_NORMAL and running:
            raise errors.OpExecError("Console information for instance %s is unavailable" % name)
        raise errors.OpExecError("Instance %s is not running, can't get console" % name)
    kind = console.get("kind")
    who = console.get("instance", name)
    if kind == "msg":
        _message_console(ctx, opts, who, console)
    elif kind == "vnc":
        ctx.out("Instance %s has VNC listening on %s:%s (display %s)." % (
            who, console.get("host"), console.get("port"), console.get("display")))
    elif kind == "spice":
        ctx.out("Instance %s has SPICE listening on %s:%s" % (who, console.get("host"), console.get("port")))
    elif kind == "ssh":
        argv = console_command(console)
        if opts.show_command:
            ctx.out(shlex.join(argv))
        else:
            import subprocess

            if subprocess.call(argv) != 0:
                raise errors.OpExecError(
                    "Connection to the console of instance %s failed (%s)" % (who, shlex.join(argv))
                )
    else:
        raise errors.GenericError("Unknown console type '%s'" % kind)
    return EXIT_SUCCESS


# --- the command table (options: ganeti.client.instance_setup) ----------------------------------------
def _setup(name: str) -> Callable[[argparse.ArgumentParser], None]:
    def setup(parser: argparse.ArgumentParser) -> None:
        from ganeti.client import instance_setup

        getattr(instance_setup, "setup_" + name)(parser)

    return setup


def _batch_setup(name: str) -> Callable[[argparse.ArgumentParser], None]:
    def setup(parser: argparse.ArgumentParser) -> None:
        from ganeti.client import instance_batch

        getattr(instance_batch, "setup_" + name)(parser)

    return setup


COMMANDS: dict[str, Command] = {
    "add": Command(add_instance, _setup("add"), "Create an instance and add it to the cluster"),
    "remove": Command(remove_instance, _setup("remove"), "Stop an instance and remove it with its disks"),
    "list": Command(
        list_instances, _setup("list"),
        "List the instances and their state. \"list-fields\" shows the fields there are; the default ones"
        " are (in order): %s." % ", ".join(LIST_DEF_FIELDS),
        "Default options and arguments may also come from the GNT_INSTANCE_LIST environment variable.",
    ),
    "list-fields": Command(list_instance_fields, add_list_fields_options, "Describe the fields of instances"),
    "info": Command(show_instance, _setup("info"), "Show the configuration and state of instances"),
    "startup": Command(many_ops("startup", _startup_op), _setup("startup"), "Start instances"),
    "shutdown": Command(many_ops("shutdown", _shutdown_op), _setup("shutdown"), "Stop instances"),
    "reboot": Command(many_ops("reboot", _reboot_op), _setup("reboot"), "Reboot instances"),
    "modify": Command(modify_instance, _setup("modify"), "Change an instance's parameters, disks or NICs"),
    "rename": Command(rename_instance, _setup("rename"), "Give an instance a new name"),
    "reinstall": Command(reinstall_instance, _setup("reinstall"), "Install the OS of stopped instances again"),
    "grow-disk": Command(grow_disk, _setup("grow_disk"), "Grow a disk of an instance"),
    "activate-disks": Command(activate_disks, _setup("activate_disks"), "Activate an instance's disks"),
    "deactivate-disks": Command(deactivate_disks, _setup("deactivate_disks"), "Deactivate an instance's disks"),
    "recreate-disks": Command(recreate_disks, _setup("recreate_disks"), "Recreate an instance's disks"),
    "failover": Command(failover_instance, _setup("failover"),
                        "Move an instance to another node: stop it, then start it there if it was running"),
    "migrate": Command(migrate_instance, _setup("migrate"),
                       "Move a running instance to another node without stopping it"),
    "move": Command(move_instance, _setup("move"),
                    "Move an instance to another node by copying its disks (stopped during the copy)"),
    "change-group": Command(change_group, _setup("change_group"), "Move an instance to another node group"),
    "console": Command(connect_console, _setup("console"), "Connect to the console of a running instance"),
    "batch-create": Command("ganeti.client.instance_batch:batch_create", _batch_setup("batch_create"),
                            "Create a bunch of instances based on specs in the file"),
    "replace-disks": Command("ganeti.client.instance_batch:replace_disks", _batch_setup("replace_disks"),
                             "Replaces disks for the instance (DRBD instances only)"),
    **tag_commands(TAG_INSTANCE, "INSTANCE", "instance"),
}

ALIASES = {"start": "startup", "stop": "shutdown", "show": "info"}


def main(argv: list[str] | None = None) -> int:
    return runner.run("gnt-instance", COMMANDS, argv, aliases=ALIASES, env_override={"list"})


if __name__ == "__main__":
    raise SystemExit(main())
