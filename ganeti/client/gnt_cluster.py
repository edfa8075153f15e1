"""gnt-cluster: cluster-wide commands (Ganeti's names and output).

    gnt-cluster queue {drain | undrain | info}
    gnt-cluster watcher {pause DURATION | continue | info}
    gnt-cluster verify [--error-codes] [-I CODE] [--node-group G]
    gnt-cluster verify-disks [--node-group G]
    gnt-cluster repair-disk-sizes [--dry-run] [INSTANCE...]
    gnt-cluster redist-conf
    gnt-cluster command [-n NODE]... [-g GROUP] [-M] [--failure-only] COMMAND...
    gnt-cluster copyfile [-n NODE]... [-g GROUP] [--use-replication-network] FILE
    gnt-cluster list-tags | add-tags TAG... | remove-tags TAG...

Adding a subcommand: write C{def my_command(ctx, opts) -> int} and an
argparse setup function, then add them to L{COMMANDS}::

    COMMANDS["verify"] = Command(verify, _setup_verify, "Verify the cluster")

C{Command.func} may also be a C{"module:function"} string so that a big
implementation is imported only when its subcommand runs.  Use
L{ganeti.client.jobs.opcode} to build opcodes and L{ganeti.client.jobs.submit_or_send}
to run them (with L{ganeti.client.options.add_submit_options} in the setup).
"""

from __future__ import annotations

import argparse
import time

from ganeti import errors, ports
from ganeti.client import prompt, tags
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.errorfmt import format_error
from ganeti.client.jobs import opcode, submit_opcodes, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_force_option,
    add_priority_option,
    add_submit_options,
    add_tag_source_option,
    parse_timespec,
)
from ganeti.client.runner import run
from ganeti.client.tags import TAG_CLUSTER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def queue_ops(ctx: Context, opts: argparse.Namespace) -> int:
    """Drain or undrain the job queue, or show its drain flag."""
    client = ctx.client()
    if opts.queue_command in ("drain", "undrain"):
        client.set_drain_flag(opts.queue_command == "drain")
    else:
        (flag,) = client.query_config_values(["drain_flag"])
        ctx.out("The drain flag is %s" % ("set" if flag else "unset"))
    return EXIT_SUCCESS


def _show_watcher_pause(ctx: Context, until: Any) -> None:
    if until is None or until < time.time():
        ctx.out("The watcher is not paused.")
    else:
        ctx.out("The watcher is paused until %s." % time.ctime(until))


def watcher_ops(ctx: Context, opts: argparse.Namespace) -> int:
    """Pause the watcher for a while, let it continue, or show whether it is paused."""
    client = ctx.client()
    if opts.watcher_command == "continue":
        if opts.duration is not None:
            raise errors.OpPrereqError("'continue' takes no duration", errors.ECODE_INVAL)
        client.set_watcher_pause(None)
        ctx.out("The watcher is no longer paused.")
    elif opts.watcher_command == "pause":
        if opts.duration is None:
            raise errors.OpPrereqError("'pause' needs a duration (30m, 2h, 1d, ...)", errors.ECODE_INVAL)
        _show_watcher_pause(ctx, client.set_watcher_pause(time.time() + parse_timespec(opts.duration)))
    else:
        if opts.duration is not None:
            raise errors.OpPrereqError("'info' takes no duration", errors.ECODE_INVAL)
        (until,) = client.query_config_values(["watcher_pause"])
        _show_watcher_pause(ctx, until)
    return EXIT_SUCCESS


def list_tags(ctx: Context, opts: argparse.Namespace) -> int:
    return tags.list_tags(ctx, TAG_CLUSTER, "")


def add_tags(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.tags and opts.tags_source is None:
        ctx.usage_error("no tags given")
    return tags.add_tags(ctx, TAG_CLUSTER, "", opts.tags)


def remove_tags(ctx: Context, opts: argparse.Namespace) -> int:
    if not opts.tags and opts.tags_source is None:
        ctx.usage_error("no tags given")
    return tags.remove_tags(ctx, TAG_CLUSTER, "", opts.tags)


def verify(ctx: Context, opts: argparse.Namespace) -> int:
    """Submit OP_CLUSTER_VERIFY and follow the jobs it submits (the config
    job, one job per group), printing their output as Ganeti does; exit 1
    if a job failed or found an error."""
    from ganeti.client.jobs import follow_up_jobs

    params = {
        "verbose": opts.verbose,
        "error_codes": opts.error_codes,
        "debug_simulate_errors": opts.simulate_errors,
        "ignore_errors": list(opts.ignore_errors),
        "skip_checks": ["nplusone_mem"] if opts.skip_nplusone_mem else [],
        "verify_clutter": bool(opts.verify_clutter),
    }
    if opts.nodegroup:
        params["group_name"] = opts.nodegroup
    (result,) = submit_opcodes(ctx, [opcode(ctx, "OP_CLUSTER_VERIFY", **params)])
    results = follow_up_jobs(ctx, result)
    bad_jobs = sum(1 for ok, _ in results if not ok)
    bad_results = sum(1 for ok, value in results if ok and not (value and value[0]))
    if bad_jobs:
        ctx.out("%s job(s) failed while verifying the cluster." % bad_jobs)
    return EXIT_SUCCESS if not (bad_jobs or bad_results) else EXIT_FAILURE


def verify_disks(ctx: Context, opts: argparse.Namespace) -> int:
    """Submit OP_CLUSTER_VERIFY_DISKS, follow its per-group jobs and report
    (Ganeti's messages): nodes that could not answer, instances whose disks
    need activating (activated), instances with missing volumes."""
    from ganeti.client.jobs import follow_up_jobs

    params = {"group_name": opts.nodegroup} if opts.nodegroup else {}
    (result,) = submit_opcodes(ctx, [opcode(ctx, "OP_CLUSTER_VERIFY_DISKS", **params)])
    code = EXIT_SUCCESS
    for ok, value in follow_up_jobs(ctx, result):
        if not ok:
            ctx.out("Job failed: %s" % (value,))
            continue
        ((bad_nodes, instances, missing),) = value
        for node, text in bad_nodes.items():
            ctx.out("Error gathering data on node %s: %s" % (node, str(text)[-400:]))
            code = EXIT_FAILURE
            ctx.out("You need to fix these nodes first before fixing instances")
        for name in instances:
            if name in missing:
                continue
            ctx.out("Activating disks for instance '%s'" % name)
            try:
                submit_opcodes(ctx, [opcode(ctx, "OP_INSTANCE_ACTIVATE_DISKS", instance_name=name)])
            except errors.GenericError as e:
                status, text = format_error(e)
                code |= status
                ctx.err("Error activating disks for instance %s: %s" % (name, text))
        if missing:
            for name, volumes in missing.items():
                if all(node in bad_nodes for node, _ in volumes):
                    ctx.out("Instance %s cannot be verified as it lives on broken nodes" % name)
                    continue
                ctx.out("Instance %s has missing logical volumes:" % name)
                for node, volume in sorted(volumes):
                    # a logical volume is named inside its VG, a disk file by its path
                    where = volume if volume.startswith("/") else "/dev/%s" % volume
                    ctx.out("\t%s%s %s" % ("broken node " if node in bad_nodes else "", node, where))
            ctx.out("You need to replace or recreate disks for all the above instances if this message persists"
                    " after fixing broken nodes.")
            code = EXIT_FAILURE
        elif not instances:
            ctx.out("No disks need to be activated.")
    return code


def repair_disk_sizes(ctx: Context, opts: argparse.Namespace) -> int:
    """Record the actual sizes of disks whose recorded size is wrong (the
    job's log says which); all instances, or those named."""
    submit_opcodes(ctx, [opcode(ctx, "OP_CLUSTER_REPAIR_DISK_SIZES", instances=list(opts.instances))])
    return EXIT_SUCCESS


def redist_conf(ctx: Context, opts: argparse.Namespace) -> int:
    """Push the configuration and ssconf files to the nodes now; with
    C{--yes-do-it} even while the queue is drained (as Ganeti)."""
    op = opcode(ctx, "OP_CLUSTER_REDIST_CONF")
    if opts.yes_do_it:
        from ganeti.client.jobs import JobReporter, poll_job

        client = ctx.client()
        poll_job(client, client.submit_job_to_drained_queue([op]), JobReporter(ctx))
    else:
        submit_or_send(ctx, op)
    return EXIT_SUCCESS


def _setup_verify(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--verbose", "-v", action="store_true", help="Verbose mode")
    parser.add_argument("--error-codes", action="store_true", help="Enable parseable error messages")
    parser.add_argument("--debug-simulate-errors", dest="simulate_errors", action="store_true",
                        help="Debugging option that makes the operation treat most runtime checks as failed")
    parser.add_argument("-I", "--ignore-errors", dest="ignore_errors", action="append", default=[],
                        metavar="ERROR_CODE", help="Error code to be ignored")
    parser.add_argument("--node-group", dest="nodegroup", metavar="GROUP", help="Verify only this node group")
    parser.add_argument("--verify-ssh-clutter", dest="verify_clutter", action="store_true",
                        help="Verify that Ganeti did not clutter up the 'authorized_keys' file"
                             " (nothing to find here: nodes use the cluster's TLS, not SSH)")
    parser.add_argument("--no-nplus1-mem", dest="skip_nplusone_mem", action="store_true",
                        help="Skip N+1 memory redundancy tests")
    add_dry_run_option(parser)
    add_priority_option(parser)


def _setup_verify_disks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node-group", dest="nodegroup", metavar="GROUP", help="Verify only this node group")
    parser.add_argument("--verify-ssh-clutter", dest="verify_clutter", action="store_true",
                        help="Verify that Ganeti did not clutter up the 'authorized_keys' file"
                             " (nothing to find here: nodes use the cluster's TLS, not SSH)")
    add_priority_option(parser)


def _setup_repair(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    add_priority_option(parser)
    parser.add_argument("instances", nargs="*", metavar="INSTANCE", help="Instances to check (default: all)")


def rename(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{RenameCluster}: OP_CLUSTER_RENAME after confirmation."""
    (old,) = ctx.client().query_config_values(["cluster_name"])
    if not opts.force and not prompt.ask_user(
            "This will rename the cluster from '%s' to '%s'. If you are connected over the network to the cluster"
            " name, the operation is very dangerous as the IP address will be removed from the node and the change"
            " may not go through. Continue?" % (old, opts.name)):
        return EXIT_FAILURE
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_CLUSTER_RENAME", name=opts.name))
    if result:
        ctx.out("Cluster renamed from '%s' to '%s'" % (old, result))
    return EXIT_SUCCESS


def _setup_rename(parser: argparse.ArgumentParser) -> None:
    add_force_option(parser, help="Do not ask for confirmation")
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("name", metavar="NEW_NAME")


def _setup_redist(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    parser.add_argument("--yes-do-it", "--ya-rly", dest="yes_do_it", action="store_true",
                        help="Distribute the configuration even if the queue is drained")
    add_priority_option(parser)
    add_submit_options(parser)


def _setup_queue(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "queue_command", choices=("drain", "undrain", "info"), metavar="drain|undrain|info",
        help="drain: refuse new jobs; undrain: accept them again; info: show the drain flag",
    )


def _setup_watcher(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "watcher_command", choices=("pause", "continue", "info"), metavar="pause|continue|info",
        help="pause DURATION: no automatic restarts nor archiving until then; continue: end the pause; "
             "info: show the pause",
    )
    parser.add_argument("duration", nargs="?", metavar="DURATION", help="e.g. 30m, 2h, 1d (pause only)")


def _setup_tags_change(parser: argparse.ArgumentParser) -> None:
    add_tag_source_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("tags", nargs="*", metavar="TAG")


def _lazy_setup(name: str):  # type: ignore[no-untyped-def]
    """An argparse setup from cluster_init, imported only when used."""

    def setup(parser: argparse.ArgumentParser) -> None:
        from ganeti.client import cluster_init

        getattr(cluster_init, name)(parser)

    return setup


def _lazy_commands(name: str):  # type: ignore[no-untyped-def]
    """An argparse setup from cluster_commands, imported only when used."""

    def setup(parser: argparse.ArgumentParser) -> None:
        from ganeti.client import cluster_commands

        getattr(cluster_commands, name)(parser)

    return setup


def _lazy_renew(parser: argparse.ArgumentParser) -> None:
    from ganeti.client import renew_crypto

    renew_crypto.setup(parser)


def _add_rpc_port(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rpc-port", type=ports.port_number, default=ports.NODED, metavar="PORT",
                        help="Port of the cluster's node daemons (default %d)" % ports.NODED)


def _setup_epo(parser: argparse.ArgumentParser) -> None:
    """The setup of C{epo}, imported only when used."""
    from ganeti.client.oob_cmds import setup_epo

    setup_epo(parser)


def _setup_master_failover(parser: argparse.ArgumentParser) -> None:
    _add_rpc_port(parser)
    parser.add_argument("--no-voting", action="store_true",
                        help="Skip the node voting (two-node clusters; dangerous: may end with two masters)")
    parser.add_argument("--yes-do-it", action="store_true", help="Do not ask for confirmation of --no-voting")
    parser.add_argument("--ignore-offline-nodes", action="store_true", help="Accepted for Ganeti compatibility")


def _setup_deactivate_master_ip(parser: argparse.ArgumentParser) -> None:
    _add_rpc_port(parser)
    parser.add_argument("--yes", dest="confirm", action="store_true", help="Do not ask for confirmation")


def _setup_search_tags(parser: argparse.ArgumentParser) -> None:
    add_priority_option(parser)
    parser.add_argument("pattern", metavar="PATTERN", help="Regular expression the tags are searched for")


def _lazy_upgrade(parser: argparse.ArgumentParser) -> None:
    from ganeti.client.cluster_upgrade import setup_upgrade

    setup_upgrade(parser)


COMMANDS: dict[str, Command] = {
    "init": Command(
        "ganeti.client.cluster_init:init",
        _lazy_setup("setup_init"),
        "Initialise a new cluster with this node as its master",
    ),
    "destroy": Command(
        "ganeti.client.cluster_init:destroy",
        _lazy_setup("setup_destroy"),
        "Stop the daemons and remove the cluster's files from this node",
    ),
    "rename": Command(rename, _setup_rename, "Renames the cluster"),
    "modify": Command(
        "ganeti.client.cluster_init:modify", _lazy_setup("setup_modify"), "Change the cluster's parameters"
    ),
    "getmaster": Command("ganeti.client.cluster_init:getmaster", None, "Print the master node's name"),
    "version": Command("ganeti.client.cluster_init:version", None, "Print the software and protocol versions"),
    "info": Command("ganeti.client.cluster_init:info", _lazy_setup("setup_info"), "Show the cluster's parameters"),
    "verify": Command(verify, _setup_verify, "Does a check on the cluster configuration and the nodes"),
    "verify-disks": Command(verify_disks, _setup_verify_disks, "Does a check on the cluster disk status"),
    "repair-disk-sizes": Command(repair_disk_sizes, _setup_repair, "Updates mismatches in recorded disk sizes"),
    "redist-conf": Command(redist_conf, _setup_redist, "Forces a push of the configuration file and ssconf files"),
    "epo": Command("ganeti.client.oob_cmds:epo", _setup_epo, "Performs an emergency power-off on given args"),
    "queue": Command(
        queue_ops, _setup_queue, "Change queue properties",
        "A drained queue accepts no new jobs; jobs already submitted still run.",
    ),
    "master-failover": Command("ganeti.client.cluster_master:master_failover", _setup_master_failover,
                               "Make this master candidate the master (run on the new master)"),
    "master-ping": Command("ganeti.client.cluster_master:master_ping", None, "Check that the master answers"),
    "activate-master-ip": Command("ganeti.client.cluster_master:activate_master_ip", _add_rpc_port, "Activate the master IP"),
    "deactivate-master-ip": Command("ganeti.client.cluster_master:deactivate_master_ip", _setup_deactivate_master_ip,
                                    "Deactivate the master IP"),
    "watcher": Command(
        watcher_ops, _setup_watcher, "Make the watcher pause or continue, or show its state",
        "The watcher (in LuxiD) restarts instances that stopped by themselves and archives old jobs.",
    ),
    "command": Command("ganeti.client.cluster_commands:run_command", _lazy_commands("setup_command"),
                       "Runs a command on all (or only some) nodes",
                       "Through each node's NodeD over the cluster's TLS (not SSH); logged in commands.log"
                       " on the node."),
    "copyfile": Command("ganeti.client.cluster_commands:copy_file", _lazy_commands("setup_copyfile"),
                        "Copies a file to all (or only some) nodes",
                        "Through each node's NodeD over the cluster's TLS (not SSH); logged in commands.log"
                        " on the node."),
    "renew-crypto": Command("ganeti.client.renew_crypto:renew_crypto", _lazy_renew,
                            "Renews cluster certificates, keys and secrets",
                            "Distributed over node RPC while the cluster keeps running; the old ones are refused"
                            " afterwards."),
    "list-tags": Command(list_tags, None, "List the tags of the cluster"),
    "add-tags": Command(add_tags, _setup_tags_change, "Add tags to the cluster"),
    "remove-tags": Command(remove_tags, _setup_tags_change, "Remove tags from the cluster"),
    "search-tags": Command("ganeti.client.policy_info:search_tags", _setup_search_tags,
                           "Searches the tags on all objects on the cluster for a given pattern (regex)"),
    "show-ispecs-cmd": Command("ganeti.client.policy_info:show_cluster_ispecs", None,
                               "Show the command line to re-create the cluster"),
    "upgrade": Command("ganeti.client.cluster_upgrade:upgrade", _lazy_upgrade,
                       "Upgrade (or downgrade) to a new Ganeti version",
                       "Here every node runs one installed version: install it on every node and restart its"
                       " daemons, then this checks that every NodeD reports it and finishes as Ganeti's does"
                       " (drain, redistribute the configuration, undrain, verify)."),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-cluster", COMMANDS, argv)


if __name__ == "__main__":
    raise SystemExit(main())
