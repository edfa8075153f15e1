"""gnt-backup: instance exports (Ganeti's commands, options and output).

    gnt-backup export -n NODE [--noshutdown] [--remove-instance] [--compress TOOL] INSTANCE
    gnt-backup import -n NODE [--src-node NODE] [--src-dir DIR|NAME] [gnt-instance add options] INSTANCE
    gnt-backup list [--node NODE ...] [-o FIELDS] [--no-headers] [--separator SEP]
    gnt-backup list-fields [FIELD ...]
    gnt-backup remove INSTANCE
"""

from __future__ import annotations

import argparse

from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import opcode, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_list_fields_options,
    add_list_options,
    add_priority_option,
    add_submit_options,
    make_simple_filter,
    parse_fields,
)
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import run

#: the fields C{gnt-backup list} shows by default
LIST_DEF_FIELDS = ["node", "export"]


def export_instance(ctx: Context, opts: argparse.Namespace) -> int:
    op = opcode(
        ctx, "OP_BACKUP_EXPORT", instance_name=opts.instance, target_node=opts.node, shutdown=opts.shutdown,
        shutdown_timeout=opts.shutdown_timeout, remove_instance=opts.remove_instance,
        ignore_remove_failures=opts.ignore_remove_failures, compress=opts.compress,
        zero_free_space=opts.zero_free_space, long_sleep=opts.long_sleep, mode="local",
        **{key: getattr(opts, key) for key in ("zeroing_timeout_fixed", "zeroing_timeout_per_mib")
           if getattr(opts, key) is not None},
    )
    (result,) = submit_or_send(ctx, op)
    finalized, disks = (list(result) + [False, []])[:2] if isinstance(result, list) else (False, [])
    if not finalized:
        ctx.err("Export failed, finalizing the export on the target node failed")
        return EXIT_FAILURE
    failed = [str(index) for index, good in enumerate(disks or []) if not good]
    if failed:
        ctx.err("Export failed, disk(s) %s could not be exported" % ", ".join(failed))
        return EXIT_FAILURE
    return EXIT_SUCCESS


def import_instance(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.gnt_instance import create_opcode

    disks, os_size = opts.disks, opts.os_size
    opts.disks, opts.os_size = [], None
    if disks or os_size is not None:
        opts.disks, opts.os_size = disks, os_size
    else:
        # the export's disks: the opcode gets none and reads them from config.ini
        opts.disks = [("0", {"size": "1"})]
    op = create_opcode(ctx, opts)
    op["mode"] = "import"
    if not disks and os_size is None:
        op["disks"] = []
    if not opts.nics and not opts.no_nics:
        op["nics"] = []
    # Ganeti's rule: without --src-dir the export is the one named after the instance
    op["src_path"] = opts.src_dir or opts.instance
    if opts.src_node:
        op["src_node"] = opts.src_node
    op["compress"] = opts.compress
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def list_exports(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    qfilter = make_simple_filter("node", opts.nodes or None)
    return generic_list(ctx, "export", fields, qfilter)


def list_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "export")


def remove_export(ctx: Context, opts: argparse.Namespace) -> int:
    op = opcode(ctx, "OP_BACKUP_REMOVE", instance_name=opts.instance)
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def _compress(parser: argparse.ArgumentParser, *flags: str) -> None:
    parser.add_argument("--compress", *flags, dest="compress", default="none", metavar="TOOL",
                        help="Compression of the disk data on the wire (none, gzip, gzip-fast, gzip-slow)")


def _setup_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--node", required=True, metavar="NODE", help="Target node of the export")
    parser.add_argument("--noshutdown", dest="shutdown", action="store_false",
                        help="Do not shut the instance down (refused for a running instance with file disks)")
    parser.add_argument("--shutdown-timeout", type=int, default=120, metavar="SECONDS",
                        help="Seconds to wait for the instance to shut down")
    parser.add_argument("--remove-instance", action="store_true", help="Remove the instance after the export")
    parser.add_argument("--ignore-remove-failures", action="store_true",
                        help="Remove the instance even if removing its disks fails")
    parser.add_argument("--zero-free-space", action="store_true", help="Zero the free space (not supported)")
    parser.add_argument("--zeroing-timeout-fixed", type=int, default=None, metavar="SECONDS",
                        help="The fixed time to wait before assuming that the zeroing failed")
    parser.add_argument("--zeroing-timeout-per-mib", type=float, default=None, metavar="SECONDS",
                        help="The time to wait per MiB of data to zero, in addition to the fixed timeout")
    parser.add_argument("-f", "--force", action="store_true", help="Accepted as Ganeti's (it asks nothing)")
    parser.add_argument("--long-sleep", action="store_true",
                        help="Allow the instance to stay stopped for the whole copy (needed for a running instance:"
                             " file disks have no snapshots)")
    _compress(parser, "--transport-compression")
    add_dry_run_option(parser)
    add_submit_options(parser)
    add_priority_option(parser)
    parser.add_argument("instance", metavar="INSTANCE")


def _setup_import(parser: argparse.ArgumentParser) -> None:
    from ganeti.client import instance_setup

    instance_setup.setup_add(parser)
    parser.add_argument("--src-node", metavar="NODE", help="Node holding the export (default: search all nodes)")
    parser.add_argument("--src-dir", metavar="DIR",
                        help="The export: its name or its directory (default: the export named INSTANCE)")
    _compress(parser)


def _setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS, units=True)
    parser.add_argument("--node", dest="nodes", action="append", default=[], metavar="NODE",
                        help="Only list the exports of this node (repeatable)")


def _setup_list_fields(parser: argparse.ArgumentParser) -> None:
    add_list_fields_options(parser)


def _setup_remove(parser: argparse.ArgumentParser) -> None:
    add_dry_run_option(parser)
    add_submit_options(parser)
    add_priority_option(parser)
    parser.add_argument("instance", metavar="INSTANCE")


COMMANDS: dict[str, Command] = {
    "export": Command(export_instance, _setup_export, "Exports an instance to an image"),
    "import": Command(import_instance, _setup_import, "Imports an instance from an image"),
    "list": Command(list_exports, _setup_list, "Lists instance exports available in the ganeti cluster"),
    "list-fields": Command(list_fields, _setup_list_fields, "Lists all available fields for exports"),
    "remove": Command(remove_export, _setup_remove, "Remove exports of named instance from the filesystem"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-backup", COMMANDS, argv)


if __name__ == "__main__":
    raise SystemExit(main())
