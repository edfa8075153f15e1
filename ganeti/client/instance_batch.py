"""gnt-instance batch-create and replace-disks (Ganeti's options and output).

    gnt-instance batch-create [-I ALLOCATOR] [--dry-run] [--submit] FILE
    gnt-instance replace-disks [-p | -s | -a | -n NODE | -I NAME] [--disks N,...] [--early-release] INSTANCE

C{batch-create} reads a JSON list of OP_INSTANCE_CREATE definitions
(Ganeti's format: the opcode's parameters, e.g. C{{"instance_name": ...,
"disk_template": "file", "disks": [{"size": 1024}], "os_type": "noop",
"pnode": ...}}), submits one OP_INSTANCE_MULTI_ALLOC and follows the
creation jobs it submits.  C{replace-disks} is for DRBD instances, which
this cluster has none of: its opcode refuses as Ganeti does.
"""

from __future__ import annotations

import argparse
from typing import Any

from ganeti import errors, serializer
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.client.jobs import JobExecutor, opcode, submit_or_send
from ganeti.client.options import add_dry_run_option, add_priority_option, add_submit_options


def batch_create(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{BatchCreate}."""
    try:
        with open(opts.file) as handle:
            data = serializer.loads(handle.read())
    except (OSError, ValueError) as e:
        ctx.err("Can't parse the instance definition file: %s" % e)
        return EXIT_FAILURE
    if not (isinstance(data, list) and all(isinstance(item, dict) for item in data)):
        ctx.err("The instance definition file is not a list of dicts")
        return EXIT_FAILURE
    instances = [dict(item, OP_ID="OP_INSTANCE_CREATE") for item in data]
    params: dict[str, Any] = {"instances": instances}
    if opts.iallocator:
        params["iallocator"] = opts.iallocator
    (result,) = submit_or_send(ctx, opcode(ctx, "OP_INSTANCE_MULTI_ALLOC", **params))
    executor = JobExecutor(ctx)
    for entry in (result or {}).get("jobs") or []:
        executor.add_job_id(None, entry[0], entry[1])
    bad = sum(1 for ok, _ in executor.get_results() if not ok)
    if bad:
        ctx.out("There were %s errors during the creation." % bad)
        return EXIT_FAILURE
    ctx.out("All instances created successfully.")
    return EXIT_SUCCESS


def setup_batch_create(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    add_priority_option(parser)
    parser.add_argument("-I", "--iallocator", metavar="NAME",
                        help="Allocator choosing the nodes of the instances without pnode")
    add_submit_options(parser)
    parser.add_argument("file", metavar="FILE", help="JSON list of instance definitions")


def replace_disks(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{ReplaceDisks}: the mode from -p/-s/-a/-n/-I, OP_INSTANCE_REPLACE_DISKS."""
    disks: list[int] = []
    if opts.disks is not None:
        try:
            disks = [int(i) for i in opts.disks.split(",")]
        except ValueError as e:
            raise errors.OpPrereqError("Invalid disk index passed: %s" % e, errors.ECODE_INVAL) from None
    chosen = [opts.on_primary, opts.on_secondary, opts.auto, opts.dst_node is not None,
              opts.iallocator is not None].count(True)
    if chosen != 1:
        raise errors.OpPrereqError("One and only one of the -p, -s, -a, -n and -I options must be passed",
                                   errors.ECODE_INVAL)
    if opts.on_primary:
        mode = "replace_on_primary"
    elif opts.on_secondary:
        mode = "replace_on_secondary"
    elif opts.auto:
        mode = "replace_auto"
        if disks:
            raise errors.OpPrereqError("Cannot specify disks when using automatic mode", errors.ECODE_INVAL)
    else:
        mode = "replace_new_secondary"
    params: dict[str, Any] = {"instance_name": opts.instance, "disks": disks, "mode": mode,
                              "early_release": opts.early_release, "ignore_ipolicy": opts.ignore_ipolicy}
    for key, value in (("remote_node", opts.dst_node), ("iallocator", opts.iallocator)):
        if value is not None:
            params[key] = value
    submit_or_send(ctx, opcode(ctx, "OP_INSTANCE_REPLACE_DISKS", **params))
    return EXIT_SUCCESS


def setup_replace_disks(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-a", "--auto", action="store_true",
                        help="Automatically replace faulty disks (DRBD only)")
    parser.add_argument("--disks", default=None,
                        help="Comma-separated list of disks indices to act on (e.g. 0,2) (optional, defaults to all"
                        " disks)")
    parser.add_argument("-I", "--iallocator", metavar="NAME", help="Choose the new secondary with this allocator")
    parser.add_argument("--early-release", action="store_true", help="Release the locks as early as possible")
    parser.add_argument("-n", "--new-secondary", dest="dst_node", metavar="NODE",
                        help="Specifies the new secondary node")
    parser.add_argument("-p", "--on-primary", action="store_true",
                        help="Replace the disk(s) on the primary node (DRBD only)")
    parser.add_argument("-s", "--on-secondary", action="store_true",
                        help="Replace the disk(s) on the secondary node (DRBD only)")
    add_submit_options(parser)
    add_dry_run_option(parser)
    add_priority_option(parser)
    parser.add_argument("--ignore-ipolicy", action="store_true", help="Ignore instance policy violations")
    parser.add_argument("instance", metavar="INSTANCE")
