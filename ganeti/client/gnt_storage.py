"""gnt-storage: the ExtStorage providers of the cluster (Ganeti's names and output).

    gnt-storage diagnose           every provider, its status on each node and node group
    gnt-storage info [NAME...]     the providers valid in some node group, with their parameters

Both run an OP_EXT_STORAGE_DIAGNOSE job and wait for it.
"""

from __future__ import annotations

import argparse
import re

from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import opcode, submit_opcodes
from ganeti.client.options import add_priority_option
from ganeti.client.runner import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _natural(name: str) -> list[Any]:
    """Sort key ordering embedded numbers by value (node2 before node10)."""
    return [int(part) if index % 2 else part for index, part in enumerate(re.split(r"(\d+)", name))]


def _diagnose(ctx: Context, fields: list[str]) -> list[list[Any]]:
    op = opcode(ctx, "OP_EXT_STORAGE_DIAGNOSE", output_fields=fields, names=[])
    (rows,) = submit_opcodes(ctx, [op])
    return rows if isinstance(rows, list) else []


def _status(valid: Any, diagnose: Any) -> str:
    return "valid" if valid else "invalid - %s" % diagnose


def node_line(entries: list[Any]) -> tuple[bool, str]:
    """Whether a node's first copy of a provider is valid, and its status text."""
    if not entries:
        return False, "ExtStorage provider not found"
    path, valid, diagnose, params = (list(entries[0]) + [None] * 4)[:4]
    text = "%s (path: %s)" % (_status(valid, diagnose), path)
    names = [p[0] for p in params or [] if isinstance(p, (list, tuple)) and p]
    text += " [parameters: %s]" % ", ".join(names) if names else " [no parameters]"
    return bool(valid), text


def diagnose(ctx: Context, opts: argparse.Namespace) -> int:
    rows = _diagnose(ctx, ["name", "node_status", "nodegroup_status"])
    if not rows:
        ctx.err("Can't get the list of ExtStorage providers")
        return EXIT_FAILURE
    for name, node_status, group_status in rows:
        good: dict[str, str] = {}
        bad: dict[str, str] = {}
        for node, entries in (node_status or {}).items():
            valid, text = node_line(entries)
            (good if valid else bad)[node] = text
        ctx.out("Provider: %s" % name)
        ctx.out("---")
        for table in (good, bad):
            for node in sorted(table, key=_natural):
                ctx.out("  Node: %s, status: %s" % (node, table[node]))
        ctx.out("  --")
        groups = group_status or {}
        for wanted in (True, False):
            for group in sorted((g for g in groups if bool(groups[g]) is wanted), key=_natural):
                ctx.out("  For nodegroup: %s --> %s" % (group, "valid" if wanted else "invalid"))
        ctx.out("")
    return EXIT_SUCCESS


def info(ctx: Context, opts: argparse.Namespace) -> int:
    rows = _diagnose(ctx, ["name", "nodegroup_status", "parameters"])
    if not rows:
        ctx.err("Can't get the ExtStorage providers list")
        return EXIT_FAILURE
    wanted = list(opts.names)
    for name, group_status, parameters in rows:
        if wanted:
            if name not in wanted:
                continue
            wanted.remove(name)
        valid = sorted((g for g, ok in (group_status or {}).items() if ok), key=_natural)
        ctx.out("%s:" % name)
        if valid:
            ctx.out("  - Valid for nodegroups:")
            for group in valid:
                ctx.out("      %s" % group)
            ctx.out("  - Supported parameters:")
            for pname, pdesc in parameters or []:
                ctx.out("      %s: %s" % (pname, pdesc))
        else:
            ctx.out("  - Invalid for all nodegroups")
        ctx.out("")
    for name in wanted:
        ctx.out("%s: Not Found" % name)
        ctx.out("")
    return EXIT_SUCCESS


def _setup_diagnose(parser: argparse.ArgumentParser) -> None:
    add_priority_option(parser)


def _setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME", help="ExtStorage providers (default: all)")
    add_priority_option(parser)


COMMANDS: dict[str, Command] = {
    "diagnose": Command(diagnose, _setup_diagnose, "Diagnose all ExtStorage providers"),
    "info": Command(info, _setup_info, "Show info about ExtStorage providers"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-storage", COMMANDS, argv)


if __name__ == "__main__":
    raise SystemExit(main())
