"""gnt-debug: debugging commands (Ganeti's names and output).

    gnt-debug delay [--submit] [--repeat N] [--priority P] [--no-master] [-n NODE] [--interruptible]
                    [--no-locks] DURATION
    gnt-debug locks [-o FIELDS] [--no-headers] [--separator S] [--interval SECONDS]
    gnt-debug submit-job | iallocator | test-osparams | wconfd ... (L{ganeti.client.debug_cmds})
    gnt-debug test-jobqueue (L{ganeti.client.debug_jobqueue})
"""

from __future__ import annotations

import argparse
import time

from ganeti.client import debug_cmds
from ganeti.client.command import EXIT_SUCCESS, Command, Context
from ganeti.client.jobs import opcode, submit_or_send
from ganeti.client.options import (
    add_dry_run_option,
    add_list_options,
    add_priority_option,
    add_submit_options,
    parse_fields,
)
from ganeti.client.queries import generic_list
from ganeti.client.runner import run

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: default fields of C{gnt-debug locks}
LOCKS_DEF_FIELDS = ["name", "mode", "owner", "pending"]


def delay(ctx: Context, opts: argparse.Namespace) -> int:
    """Submit OP_TEST_DELAY and follow it (or only submit it)."""
    op = opcode(
        ctx,
        "OP_TEST_DELAY",
        duration=opts.duration,
        on_master=opts.on_master,
        on_nodes=list(opts.on_nodes),
        repeat=opts.repeat,
        interruptible=opts.interruptible,
        no_locks=opts.no_locks,
    )
    submit_or_send(ctx, op)
    return EXIT_SUCCESS


def _dash_if_empty(fn: Any) -> Any:
    def format_value(value: Any) -> str:
        return fn(value) if value else "-"

    return format_value


def _format_pending(value: Any) -> str:
    return ", ".join("%s:%s" % (mode, ",".join(owners)) for mode, owners in value)


#: how C{gnt-debug locks} shows lock fields
LOCKS_FORMAT = {
    "mode": (_dash_if_empty(str), False),
    "owner": (_dash_if_empty(",".join), False),
    "pending": (_dash_if_empty(_format_pending), False),
}


def list_locks(ctx: Context, opts: argparse.Namespace) -> int:
    fields = parse_fields(opts.output, LOCKS_DEF_FIELDS)
    while True:
        result = generic_list(ctx, "lock", fields, None, LOCKS_FORMAT)
        if result != EXIT_SUCCESS or not opts.interval:
            return result
        ctx.out("")
        time.sleep(opts.interval)


def _non_negative_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError("not a non-negative integer: %r" % value)
    return number


def _duration(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError("invalid duration: %r (seconds, a non-negative number)" % value)
    return number


def _setup_delay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-master", dest="on_master", action="store_false", help="Do not sleep in the master code"
    )
    parser.add_argument(
        "-n", dest="on_nodes", action="append", default=[], metavar="NODE",
        help="Select nodes to sleep on (repeatable)",
    )
    parser.add_argument(
        "-r", "--repeat", type=_non_negative_int, default=0, metavar="N",
        help="Number of times to repeat the sleep",
    )
    parser.add_argument(
        "-i", "--interruptible", action="store_true", default=False,
        help="Allows the delay to be interrupted by connecting to the Unix socket named in the job log",
    )
    parser.add_argument(
        "-l", "--no-locks", dest="no_locks", action="store_true", default=False,
        help="Do not take the BGL and node locks during the delay",
    )
    add_dry_run_option(parser)
    add_priority_option(parser)
    add_submit_options(parser)
    parser.add_argument("duration", type=_duration, metavar="DURATION", help="seconds to sleep (a float)")


def _setup_locks(parser: argparse.ArgumentParser) -> None:
    add_list_options(parser, LOCKS_DEF_FIELDS)
    parser.add_argument(
        "--interval", type=_non_negative_int, default=None, metavar="SECONDS",
        help="Repeat the listing every SECONDS seconds (until interrupted)",
    )


COMMANDS: dict[str, Command] = {
    "delay": Command(
        delay, _setup_delay, "Executes a TestDelay OpCode",
        "Runs a test opcode (a sleep) on the master and on selected nodes. By default the"
        " delay is also executed on the master, unless --no-master is given.",
    ),
    "locks": Command(list_locks, _setup_locks, "Show a list of locks in the master daemon"),
    "submit-job": Command(debug_cmds.submit_job, debug_cmds.setup_submit_job,
                          "Submits jobs built from json files containing a list of serialized opcodes"),
    "iallocator": Command(debug_cmds.iallocator, debug_cmds.setup_iallocator, "Executes a TestAllocator OpCode"),
    "test-jobqueue": Command("ganeti.client.debug_jobqueue:test_jobqueue", add_priority_option,
                             "Test a few aspects of the job queue"),
    "test-osparams": Command(debug_cmds.test_osparams, debug_cmds.setup_test_osparams,
                             "Test secret os parameter transmission"),
    "metad": Command(debug_cmds.metad, debug_cmds.setup_metad, "Directly talk to Metad",
                     "Ganeti's metadata daemon has no counterpart here: the command says so (exit 1)."),
    "wconfd": Command(debug_cmds.wconfd, debug_cmds.setup_wconfd, "Directly talk to WConfD"),
}


def main(argv: list[str] | None = None) -> int:
    return run("gnt-debug", COMMANDS, argv, aliases={"allocator": "iallocator"})


if __name__ == "__main__":
    raise SystemExit(main())
