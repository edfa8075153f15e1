"""Options and arguments of the gnt-* commands (Ganeti's names).

The option groups every tool shares (L{add_common_options},
L{add_submit_options}, L{add_list_options}, ...), the argparse types of
their values (L{job_id}, L{priority}, L{yes_no}), the parsing of
C{-o} field lists, time specifications and simple query filters, and
L{build_parser}, the parser of one subcommand.  Standard library plus
L{ganeti.errors}.
"""

from __future__ import annotations

import argparse
import os
import sys

from ganeti import errors
from ganeti.client.command import Command, ParserExit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence, TextIO

#: --priority names -> opcode priority (OP_PRIO_LOW/NORMAL/HIGH)
PRIORITIES = {"low": 10, "normal": 0, "high": -10}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that writes to the tool's streams and never exits."""

    def __init__(self, *args: Any, out: TextIO, err: TextIO, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._out, self._err = out, err

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            (self._err if file is sys.stderr else self._out).write(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            self._err.write(message)
        raise ParserExit(status)


def job_id(value: str) -> int:
    """argparse type of a job id: a non-negative integer."""
    if value.isdigit():
        return int(value)
    raise argparse.ArgumentTypeError("invalid job id: %r" % value)


def priority(value: str) -> int:
    """argparse type of C{--priority}: low, normal or high."""
    try:
        return PRIORITIES[value]
    except KeyError:
        raise argparse.ArgumentTypeError(
            "invalid priority %r (choose from %s)" % (value, ", ".join(PRIORITIES))
        ) from None


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """Options of every command (Ganeti's COMMON_OPTS, and C{--root})."""
    group = parser.add_argument_group("common options")
    group.add_argument("-d", "--debug", action="count", default=0, help="Increase debugging level")
    group.add_argument("--reason", default=None, help="The reason for executing the command")
    group.add_argument(
        "--root", metavar="DIR", default=argparse.SUPPRESS,
        help="Root directory of the node to talk to (default: $GANETI_ROOT, else /)",
    )


def add_submit_options(parser: argparse.ArgumentParser) -> None:
    """C{--submit} and C{--print-jobid} (Ganeti's SUBMIT_OPTS)."""
    parser.add_argument(
        "--submit", dest="submit_only", action="store_true",
        help="Submit the job and return the job ID, but don't wait for the job to finish",
    )
    parser.add_argument(
        "--print-jobid", action="store_true",
        help="Additionally print the job as first line on stdout (for scripting).",
    )


def add_priority_option(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "--priority", type=priority, default=None, required=required, metavar="low|normal|high",
        help="Priority for opcode processing",
    )


def add_dry_run_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true",
        help="Do not execute the operation, just run the check steps and verify if it could be executed",
    )


def add_force_option(parser: argparse.ArgumentParser, help: str = "Force the operation") -> None:
    parser.add_argument("-f", "--force", action="store_true", help=help)


def add_list_options(parser: argparse.ArgumentParser, default_fields: Sequence[str], units: bool = False) -> None:
    """C{--no-headers}, C{--separator}, C{-o} and C{-v} of the list commands."""
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    parser.add_argument(
        "--separator", default=None, help="Separator between output fields (defaults to one space)"
    )
    parser.add_argument(
        "-o", "--output", metavar="FIELDS", default=None,
        help="Comma separated list of output fields; a leading '+' adds them to the default list (%s)"
        % ",".join(default_fields),
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="Verbose output: show '(unknown)', '(nodata)', ... for fields without a value",
    )
    if units:
        parser.add_argument(
            "--units", choices=("h", "m", "g", "t"), default=None,
            help="Specify units for output (one of h/m/g/t)",
        )


def add_list_fields_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-headers", action="store_true", help="Don't display column headers")
    parser.add_argument(
        "--separator", default=None, help="Separator between output fields (defaults to one space)"
    )
    parser.add_argument("fields", nargs="*", metavar="FIELD", help="fields to describe (default: all)")


def add_tag_source_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--from", dest="tags_source", metavar="FILE", default=None,
        help="File with tag names, one per line ('-' for standard input)",
    )


def parse_fields(selected: str | None, default: Sequence[str]) -> list[str]:
    """The fields of C{-o}: the default, a list, or C{+extra} added to the default."""
    if selected is None:
        return list(default)
    if selected.startswith("+"):
        return list(default) + selected[1:].split(",")
    return selected.split(",")


def parse_timespec(value: str) -> int:
    """Seconds from C{30}, C{30s}, C{5m}, C{2h}, C{1d} or C{1w}."""
    multipliers = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    if not value:
        raise errors.OpPrereqError("Empty time specification passed", errors.ECODE_INVAL)
    number, multiplier = value, 1
    if value[-1] in multipliers:
        number, multiplier = value[:-1], multipliers[value[-1]]
        if not number:
            raise errors.OpPrereqError("Invalid time specification (only suffix passed)", errors.ECODE_INVAL)
    if not number.isdigit():
        raise errors.OpPrereqError("Invalid time specification '%s'" % value, errors.ECODE_INVAL)
    return int(number) * multiplier


def make_simple_filter(field: str, values: Iterable[Any] | None) -> list[Any] | None:
    """C{["|", ["==", field, v], ...]}, or C{None} (everything) for no values."""
    if values is None:
        return None
    values = list(values)
    if not values:
        return None
    return ["|"] + [["==", field, value] for value in values]


def and_filters(*filters: list[Any] | None) -> list[Any] | None:
    present = [f for f in filters if f is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]
    return ["&"] + present


def yes_no(text: str) -> bool:
    """An argparse type for Ganeti's C{yes|no} option values."""
    if text.lower() in ("yes", "true"):
        return True
    if text.lower() in ("no", "false"):
        return False
    raise argparse.ArgumentTypeError("expected yes or no, got %r" % text)


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps each paragraph of a description on its own, and finds the
    terminal width without importing shutil (startup time matters)."""

    def __init__(self, prog: str) -> None:
        try:
            columns = int(os.environ.get("COLUMNS", "")) or 80
        except ValueError:
            try:
                columns = os.get_terminal_size(sys.stdout.fileno()).columns
            except (AttributeError, OSError, ValueError):
                columns = 80
        super().__init__(prog, width=max(columns - 2, 20))

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return "\n\n".join(
            textwrap.fill(
                " ".join(paragraph.split()), width, initial_indent=indent, subsequent_indent=indent,
                break_on_hyphens=False, break_long_words=False,
            )
            for paragraph in text.split("\n\n")
        )


def build_parser(prog: str, name: str, command: Command, out: TextIO, err: TextIO) -> argparse.ArgumentParser:
    """The parser of one subcommand (tests use it to check option parsing)."""
    description = command.help
    if command.description:
        description += "\n\n" + command.description
    parser = _Parser(
        prog="%s %s" % (prog, name),
        description=description,
        epilog="See %s(8) for details." % prog,
        formatter_class=_HelpFormatter,
        out=out,
        err=err,
    )
    if command.setup is not None:
        command.setup(parser)
    add_common_options(parser)
    return parser
