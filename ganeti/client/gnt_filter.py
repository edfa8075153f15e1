"""gnt-filter: job filter rules (Ganeti's commands, options and output).

    gnt-filter add [--priority=N] [--predicates=JSON] [--action=ACTION] [--reason=TEXT]
    gnt-filter replace [options as add] UUID       (also: modify)
    gnt-filter delete UUID                         (also: remove)
    gnt-filter list [--no-headers] [--separator=S] [-v] [-o [+]FIELD,...] [UUID...]
    gnt-filter list-fields [FIELD...]
    gnt-filter info [UUID...]

A rule takes effect at once: the changes go straight to LuxiD (LUXI
C{ReplaceFilter}, C{DeleteFilter}), not through the job queue.  C{add} and
C{replace} print the rule's uuid.  Actions: C{ACCEPT}, C{PAUSE}, C{REJECT},
C{CONTINUE} or C{"RATE_LIMIT n"}; predicates: a JSON list of
C{[jobid|opcode|reason, filter]} (see gnt-filter(8)).
"""

from __future__ import annotations

import argparse
import json
import re
import time

from ganeti.client.command import EXIT_SUCCESS, Command, Context
from ganeti.client.options import add_list_fields_options, add_list_options, make_simple_filter, parse_fields
from ganeti.client.queries import generic_list, generic_list_fields
from ganeti.client.runner import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: the default fields of C{list} (Ganeti's C{_LIST_DEF_FIELDS})
LIST_DEF_FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]
#: the source of the reason trail entry of C{--reason} (Ganeti's OPCODE_REASON_SRC_USER)
REASON_SRC_USER = "gnt:user"


def predicates(value: str) -> Any:
    """C{--predicates}: JSON (checked further by LuxiD)."""
    try:
        return json.loads(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError("not valid JSON: %s" % e) from None


def action(value: str) -> Any:
    """C{--action}: C{"RATE_LIMIT n"} becomes C{["RATE_LIMIT", n]}; other words stay (LuxiD checks them)."""
    found = re.match(r"RATE_LIMIT\s+(\d+)", value)
    return ["RATE_LIMIT", int(found.group(1))] if found else value


def _reason(opts: argparse.Namespace) -> list[list[Any]]:
    return [[REASON_SRC_USER, opts.reason, time.time_ns()]] if opts.reason else []


def add_filter(ctx: Context, opts: argparse.Namespace) -> int:
    ctx.out(ctx.client().replace_filter(None, opts.priority, opts.predicates, opts.action, _reason(opts)))
    return EXIT_SUCCESS


def replace_filter(ctx: Context, opts: argparse.Namespace) -> int:
    ctx.out(ctx.client().replace_filter(opts.uuid, opts.priority, opts.predicates, opts.action, _reason(opts)))
    return EXIT_SUCCESS


def delete_filter(ctx: Context, opts: argparse.Namespace) -> int:
    ctx.client().delete_filter(opts.uuid)
    return EXIT_SUCCESS


def list_filters(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LIST_DEF_FIELDS)
    return generic_list(ctx, "filter", fields, make_simple_filter("uuid", opts.uuids))


def list_filter_fields(ctx: Context, opts: argparse.Namespace) -> int:
    return generic_list_fields(ctx, "filter")


def show_filter(ctx: Context, opts: argparse.Namespace) -> int:
    rows = ctx.client().query_filters(opts.uuids, LIST_DEF_FIELDS)
    for uuid, watermark, priority, predicates_, action_, reason_trail in rows:
        ctx.out("UUID: %s" % uuid)
        ctx.out("  Watermark: %s" % watermark)
        ctx.out("  Priority: %s" % priority)
        ctx.out("  Predicates: %s" % predicates_)
        ctx.out("  Action: %s" % action_)
        ctx.out("  Reason trail: %s" % reason_trail)
    return EXIT_SUCCESS


def _rule_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--priority", type=int, default=0, metavar="N",
                        help="Priority for filter processing (a non-negative integer, 0 first; default: 0)")
    parser.add_argument("--predicates", type=predicates, default=[], metavar="JSON",
                        help="List of predicates in the Ganeti query language, given as a JSON list"
                             " (default: [], the rule matches every job)")
    parser.add_argument("--action", type=action, default="CONTINUE", metavar="ACTION",
                        help="The effect of the filter. Can be one of 'ACCEPT', 'PAUSE', 'REJECT', 'CONTINUE' and"
                             " 'RATE_LIMIT n', where n is a positive integer (default: CONTINUE)")


def _setup_replace(parser: argparse.ArgumentParser) -> None:
    _rule_options(parser)
    parser.add_argument("uuid", metavar="FILTER_UUID")


def _setup_delete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("uuid", metavar="FILTER_UUID")


def _setup_list(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LIST_DEF_FIELDS)
    parser.add_argument("uuids", nargs="*", metavar="FILTER_UUID", help="filters to list (default: all)")


def _setup_info(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("uuids", nargs="*", metavar="FILTER_UUID", help="filters to show (default: all)")


COMMANDS: dict[str, Command] = {
    "add": Command(add_filter, _rule_options, "Adds a new filter rule"),
    "list": Command(
        list_filters, _setup_list,
        'Lists the job filter rules. The available fields can be shown using the "list-fields" command'
        " (see the man page for details). The default list is (in order): %s." % ", ".join(LIST_DEF_FIELDS),
    ),
    "list-fields": Command(list_filter_fields, add_list_fields_options, "Lists all available fields for filters"),
    "info": Command(show_filter, _setup_info, "Shows information about the filter(s)"),
    "replace": Command(replace_filter, _setup_replace, "Replaces a filter, or creates it under that uuid (also: modify)"),
    "delete": Command(delete_filter, _setup_delete, "Removes a filter (also: remove)"),
}


ALIASES = {"modify": "replace", "remove": "delete"}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-filter", COMMANDS, argv, aliases=ALIASES)


if __name__ == "__main__":
    raise SystemExit(main())
