"""gnt-os: the operating systems of the cluster (Ganeti's names and output).

    gnt-os list [--no-headers]     the valid OS names instances may use
    gnt-os diagnose                every OS, with its status on each node
    gnt-os info [OS...]            each OS's API versions, variants, parameters
    gnt-os modify [-H HV:k=v,...] [-O k=v,...] [--hidden yes|no]
                  [--blacklisted yes|no] OS

The first three run an OP_OS_DIAGNOSE job and wait for it; modify changes
the cluster's per-OS parameters and lists (OP_CLUSTER_SET_PARAMS).
"""

from __future__ import annotations

import argparse
import re

from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Command, Context
from ganeti.client.formatting import format_table
from ganeti.client.jobs import opcode, submit_opcodes
from ganeti.client.options import add_priority_option
from ganeti.client.runner import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: what C{diagnose} asks for
DIAGNOSE_FIELDS = ["name", "valid", "variants", "node_status", "hidden", "blacklisted"]
#: the OS API versions from which an OS lists variants, and parameters
API_VARIANTS, API_PARAMETERS = 15, 20


def _natural(name: str) -> list[Any]:
    """Sort key ordering embedded numbers by value (node2 before node10)."""
    return [int(part) if index % 2 else part for index, part in enumerate(re.split(r"(\d+)", name))]


def _diagnose(ctx: Context, fields: list[str]) -> list[list[Any]]:
    op = opcode(ctx, "OP_OS_DIAGNOSE", output_fields=fields, names=[])
    (rows,) = submit_opcodes(ctx, [op])
    return rows if isinstance(rows, list) else []


def list_os(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.osnames import os_names

    rows = _diagnose(ctx, ["name", "variants"])
    names = [[n] for name, variants in rows for n in os_names(name, variants)]
    titles = None if opts.no_headers else ["Name"]
    for line in format_table(names, titles, [False], None):
        ctx.out(line)
    return EXIT_SUCCESS


def _status(valid: Any, diagnose: Any) -> str:
    return "valid" if valid else "invalid - %s" % diagnose


def describe_node_entry(entry: list[Any]) -> tuple[bool, str]:
    """Whether the first OS directory a node has is valid, and its status line text."""
    path, valid, diagnose, variants, parameters, api_versions = (list(entry) + [None] * 6)[:6]
    text = "%s (path: %s)" % (_status(valid, diagnose), path)
    apis = [v for v in api_versions or [] if isinstance(v, int)]
    if apis:
        text += " [API versions: %s]" % ", ".join(str(v) for v in apis)
    else:
        text += " [no API versions declared]"
    highest = max(apis) if apis else 0
    if highest >= API_VARIANTS:
        text += " [variants: %s]" % ", ".join(variants) if variants else " [no variants]"
    if highest >= API_PARAMETERS:
        names = [p[0] for p in parameters or [] if isinstance(p, (list, tuple)) and p]
        text += " [parameters: %s]" % ", ".join(names) if names else " [no parameters]"
    return bool(valid), text


def diagnose_os(ctx: Context, opts: argparse.Namespace) -> int:
    rows = _diagnose(ctx, DIAGNOSE_FIELDS)
    any_bad = False
    for name, _valid, variants, node_status, hidden, blacklisted in rows:
        good: dict[str, str] = {}
        bad: dict[str, str] = {}
        shadowed: dict[str, list[str]] = {}
        for node, entries in (node_status or {}).items():
            if not entries:
                bad[node] = "OS not found"
                continue
            valid, text = describe_node_entry(entries[0])
            (good if valid else bad)[node] = text
            shadowed[node] = ["    [hidden] path: %s, status: %s" % (e[0], _status(e[1], e[2])) for e in entries[1:]]
        if good and not bad:
            status = "valid"
        else:
            status = "invalid" if not good else "partial valid"
            any_bad = True
        line = "OS: %s [global status: %s]" % (name, status)
        if hidden:
            line += " [hidden]"
        if blacklisted:
            line += " [blacklisted]"
        ctx.out(line)
        if variants:
            ctx.out("  Variants: [%s]" % ", ".join(variants))
        for table in (good, bad):
            for node in sorted(table, key=_natural):
                ctx.out("  Node: %s, status: %s" % (node, table[node]))
                for extra in shadowed.get(node, []):
                    ctx.out(extra)
        ctx.out("")
    return EXIT_FAILURE if any_bad else EXIT_SUCCESS


INFO_FIELDS = ["name", "valid", "variants", "parameters", "api_versions", "blacklisted", "hidden", "os_hvp",
               "osparams", "trusted"]


def info_os(ctx: Context, opts: argparse.Namespace) -> int:
    """Ganeti's C{gnt-os info}: every OS (or those named), then the per-OS
    parameters of named ones that are not installed."""
    from ganeti.client.formatting import format_generic_info

    wanted = list(opts.names)
    os_hvp: dict[str, Any] = {}
    osparams: dict[str, Any] = {}
    for name, valid, variants, parameters, apis, blacklisted, hidden, hvp, osp, trusted in _diagnose(ctx, INFO_FIELDS):
        os_hvp.update(hvp or {})
        osparams.update(osp or {})
        if opts.names:
            if name not in wanted:
                continue
            wanted.remove(name)
        ctx.out("%s:" % name)
        ctx.out("  - valid: %s" % valid)
        ctx.out("  - hidden: %s" % hidden)
        ctx.out("  - blacklisted: %s" % blacklisted)
        if valid:
            ctx.out("  - API versions:")
            for version in sorted(apis or []):
                ctx.out("    - %s" % version)
            ctx.out("  - variants:")
            for variant in variants or []:
                ctx.out("    - %s" % variant)
            ctx.out("  - parameters:")
            for pname, pdesc in parameters or []:
                ctx.out("    - %s: %s" % (pname, pdesc))
        ctx.out("  - trusted: %s" % trusted)
        ctx.out("")
    for name in wanted:  # named, not installed: its cluster-level parameters, if any
        if name not in os_hvp and name not in osparams:
            ctx.out("%s: " % name)
        else:
            ctx.out(format_generic_info([(name, [("OS-specific hypervisor parameters", os_hvp.get(name, {})),
                                                 ("OS parameters", osparams.get(name, {}))])]))
        ctx.out("")
    return EXIT_SUCCESS


def modify_os(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client.jobs import opcode, submit_or_send

    name = opts.os
    params: dict[str, Any] = {}
    if opts.hvparams:
        params["os_hvp"] = {name: {hv: dict(values) for hv, values in opts.hvparams}}
    if opts.osparams:
        params["osparams"] = {name: dict(opts.osparams)}
    if opts.osparams_private:
        params["osparams_private_cluster"] = {name: dict(opts.osparams_private)}
    for key, flag in (("hidden_os", opts.hidden), ("blacklisted_os", opts.blacklisted)):
        if flag is not None:
            params[key] = [["add" if flag else "remove", name]]
    if not params:
        ctx.err("At least one of OS parameters or hypervisor parameters must be passed")
        return EXIT_FAILURE
    submit_or_send(ctx, opcode(ctx, "OP_CLUSTER_SET_PARAMS", **params))
    return EXIT_SUCCESS


def _ident_key_values(text: str) -> tuple[str, Any]:
    from ganeti.client.instance_opts import ident_key_values

    return ident_key_values(text)


def _key_values(text: str) -> dict[str, Any]:
    from ganeti.client.instance_opts import key_values

    return key_values(text)


def _setup_info(parser: argparse.ArgumentParser) -> None:
    add_priority_option(parser)
    parser.add_argument("names", nargs="*", metavar="OS", help="OSes to show (default: all)")


def _setup_modify(parser: argparse.ArgumentParser) -> None:
    from ganeti.client.options import add_dry_run_option, add_submit_options, yes_no

    parser.add_argument("-H", "--hypervisor-parameters", dest="hvparams", type=_ident_key_values, action="append",
                        default=[], metavar="HYPERVISOR:PARAM=VALUE,...",
                        help="Hypervisor parameters for this OS (\"default\" resets one)")
    parser.add_argument("-O", "--os-parameters", dest="osparams", type=_key_values, default=None,
                        metavar="PARAM=VALUE,...", help="OS parameters (\"default\" resets one)")
    parser.add_argument("--os-parameters-private", dest="osparams_private", type=_key_values, default=None,
                        metavar="PARAM=VALUE,...",
                        help="Private OS parameters (stored, never shown or logged in clear; \"default\" resets one)")
    parser.add_argument("--hidden", type=yes_no, default=None, metavar="yes|no",
                        help="Hide the OS from 'gnt-os list' (or show it again)")
    parser.add_argument("--blacklisted", type=yes_no, default=None, metavar="yes|no",
                        help="Refuse new instances of the OS (or allow them again)")
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("os", metavar="OS")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    add_priority_option(parser)


def _setup_diagnose(parser: argparse.ArgumentParser) -> None:
    add_priority_option(parser)


COMMANDS: dict[str, Command] = {
    "list": Command(list_os, _setup_list, "Lists all valid operating systems on the cluster"),
    "diagnose": Command(diagnose_os, _setup_diagnose, "Diagnose all operating systems"),
    "info": Command(info_os, _setup_info, "Show detailed information about operating systems"),
    "modify": Command(modify_os, _setup_modify, "Modify the OS parameters"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-os", COMMANDS, argv)


if __name__ == "__main__":
    raise SystemExit(main())
