"""Shared machinery of the gnt-* command-line tools.

The tools keep Ganeti's command names, options and output conventions::

    gnt-job list --no-headers --separator=: -o id,status
    gnt-debug delay --submit 10          # "JobID: 17" on stderr, exit 0
    gnt-group add --alloc-policy preferred group2

Each tool is a dict of subcommands, name -> L{Command}, run by L{run}::

    COMMANDS = {"delay": Command(delay, _setup_delay, "Executes a TestDelay OpCode")}
    def main(argv=None): return cli.run("gnt-debug", COMMANDS, argv)

Only the chosen subcommand's parser is built, and the LUXI client (with the
path layout) is imported on the first call that needs the master daemon, so
C{--help} and bad usage never pay for it.  A command function takes a
L{Context} and the parsed options and returns the exit status; it raises
Ganeti errors, which L{run} prints the way Ganeti does (L{format_error}).

Exit statuses: 0 success, 1 failure, 2 bad usage (nothing was sent),
13 confirmation refused, 14 unknown query field (Ganeti's values).

Pure standard library plus L{ganeti.errors}, the job statuses of
L{ganeti.jobs.lifecycle} and the job following of L{ganeti.luxi.jobwait};
the output formatting lives in L{ganeti.client} and is re-exported here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial
from typing import Any, Callable, Iterable, NamedTuple, Sequence, TextIO

from ganeti import errors
from ganeti.client import (  # noqa: F401  (the tools use them through this module)
    EXIT_UNKNOWN_FIELD,
    QR_UNKNOWN,
    format_generic_info,
    format_log_message,
    format_query_result,
    format_table,
    format_time,
    format_timestamp,
    format_unit,
    qft_name,
    unknown_fields,
)
from ganeti.jobs import lifecycle
from ganeti.luxi import jobwait

# --- constants (Ganeti's names and values) ----------------------------------
EXIT_SUCCESS = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CONFIRMATION = 13

#: --priority names -> opcode priority (OP_PRIO_LOW/NORMAL/HIGH)
PRIORITIES = {"low": 10, "normal": 0, "high": -10}

#: the job statuses (Ganeti's names; defined by L{ganeti.jobs.lifecycle})
JOB_STATUS_QUEUED = lifecycle.QUEUED
JOB_STATUS_WAITING = lifecycle.WAITING
JOB_STATUS_CANCELING = lifecycle.CANCELING
JOB_STATUS_RUNNING = lifecycle.RUNNING
JOB_STATUS_CANCELED = lifecycle.CANCELED
JOB_STATUS_SUCCESS = lifecycle.SUCCESS
JOB_STATUS_ERROR = lifecycle.ERROR
JOBS_PENDING = tuple(s for s in lifecycle.STATUS_ORDER if s in lifecycle.PENDING)
JOBS_FINALIZED = tuple(s for s in lifecycle.STATUS_ORDER if s in lifecycle.FINALIZED)
#: a followed job is over for the tools once canceling (Ganeti's C{GenericPollJob})
_FOLLOW_UNTIL = lifecycle.FINALIZED | {lifecycle.CANCELING}
_JOB_LOST = "Job with id %s lost"

#: WaitForJobChange's answer when nothing changed before the timeout
JOB_NOTCHANGED = jobwait.NOT_CHANGED
#: seconds one WaitForJobChange may block (Ganeti's DEFAULT_WFJC_TIMEOUT)
WFJC_TIMEOUT = 60
#: AutoArchiveJobs timeout, as Ganeti's client sends it ((LUXI_DEF_RWTO - 1) // 2)
AUTOARCHIVE_TIMEOUT = 89

REASON_SRC_CLIENT = "gnt:client"
REASON_SRC_USER = "gnt:user"

TAG_CLUSTER = "cluster"
TAG_NODEGROUP = "nodegroup"
TAG_NODE = "node"
TAG_INSTANCE = "instance"


# --- exceptions ---------------------------------------------------------------
class JobSubmitted(Exception):
    """A job was submitted with C{--submit}: not an error, the tool prints
    C{JobID: <id>} and exits 0."""


class JobCanceled(errors.GenericError):
    """The job followed was canceled (Ganeti's C{JobCanceled})."""


class RemoteError(errors.GenericError):
    """An encoded error whose class this project does not define
    (C{TagError}, C{HooksAbort}, ...); keeps Ganeti's class name."""

    def __init__(self, name: str, *args: Any) -> None:
        super().__init__(*args)
        self.ganeti_name = name


def decode_error(value: Any) -> errors.GenericError | None:
    """The exception encoded as C{[ClassName, [args...]]}, else C{None}."""
    if not (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], (list, tuple))
    ):
        return None
    exc = errors.decode(value)
    if type(exc).__name__ != value[0]:
        return RemoteError(value[0], *value[1])
    return exc


# Ganeti's error hierarchy, for classes only the server side knows.
_PARENTS = {
    "HooksAbort": "HooksFailure",
    "JobQueueDrainError": "JobQueueError",
    "JobQueueFull": "JobQueueError",
    "ConfigVerifyError": "ConfigurationError",
    "ConfigVersionMismatch": "ConfigurationError",
    "QueryFilterParseError": "OpPrereqError",
}


def _error_names(err: BaseException) -> set[str]:
    names = {cls.__name__ for cls in type(err).__mro__}
    name = getattr(err, "ganeti_name", None)
    while name:
        names.add(name)
        name = _PARENTS.get(name)
    return names


def format_error(err: BaseException) -> tuple[int, str]:
    """Ganeti's C{FormatError}: the exit status and the text for C{err}."""
    names = _error_names(err)
    msg = str(err)
    args = err.args
    code = EXIT_FAILURE
    if "JobSubmitted" in names:
        return EXIT_SUCCESS, "JobID: %s" % args[0]
    if "ConfigurationError" in names:
        text = "Corrupt configuration file: %s\nAborting." % msg
        code = 2
    elif "HooksAbort" in names:
        lines = ["Failure: hooks execution failed:"]
        for entry in args[0] if args and isinstance(args[0], (list, tuple)) else []:
            node, script, out = (list(entry) + [None, None, None])[:3]
            if out:
                lines.append("  node: %s, script: %s, output: %s" % (node, script, out))
            else:
                lines.append("  node: %s, script: %s (no output)" % (node, script))
        text = "\n".join(lines)
    elif "HooksFailure" in names:
        text = "Failure: hooks general failure: %s" % msg
    elif "ResolverError" in names:
        text = "Failure: can't resolve hostname '%s'" % (args[0] if args else msg)
    elif "QueryFilterParseError" in names:
        text = "Error while parsing query filter: %s" % (args[0] if args else msg)
    elif "OpPrereqError" in names:
        if len(args) == 2:
            text = "Failure: prerequisites not met for this operation:\nerror type: %s, error details:\n%s" % (
                args[1],
                args[0],
            )
        else:
            text = "Failure: prerequisites not met for this operation:\n%s" % msg
    elif "OpExecError" in names:
        text = "Failure: command execution error:\n%s" % msg
    elif "TagError" in names:
        text = "Failure: invalid tag(s) given:\n%s" % msg
    elif "JobQueueDrainError" in names:
        text = "Failure: the job queue is marked for drain and doesn't accept new requests"
    elif "JobQueueFull" in names:
        text = "Failure: the job queue is full and doesn't accept new job submissions until old jobs are archived"
    elif "TypeEnforcementError" in names:
        text = "Parameter Error: %s" % msg
    elif "ParameterError" in names:
        text = "Failure: unknown/wrong parameter name '%s'" % msg
    elif "LuxiError" in names:
        if msg.startswith("cannot connect to the master daemon"):
            text = (
                "Cannot communicate with the master daemon.\n"
                "Is the process running and listening for connections?\n(%s)" % msg
            )
        elif "timed out" in msg:
            text = (
                "Timeout while talking to the master daemon. Jobs might have been submitted and will"
                " continue to run even if the call timed out. Useful commands in this situation are"
                ' "gnt-job list", "gnt-job cancel" and "gnt-job watch". Error:\n%s' % msg
            )
        else:
            text = "Unhandled protocol error while talking to the master daemon:\n%s" % msg
    elif "JobLost" in names:
        text = "Error checking job status: %s" % msg
    elif "GenericError" in names:
        text = "Unhandled Ganeti error: %s" % msg
    else:
        text = "Unhandled exception: %s" % msg
    return code, text.rstrip("\n")


# --- commands and their context -----------------------------------------------
#: a command function: (context, options) -> exit status (None means 0)
CommandFunc = Callable[["Context", argparse.Namespace], "int | None"]


class Command(NamedTuple):
    """One subcommand of a tool.

    @ivar func: the function, or C{"module:function"} imported when run.
    @ivar setup: adds the subcommand's options and arguments to its parser.
    @ivar help: one line for the command list, and the start of C{--help}.
    @ivar description: more text for C{--help}.
    """

    func: CommandFunc | str
    setup: Callable[[argparse.ArgumentParser], None] | None
    help: str
    description: str = ""

    def resolve(self) -> CommandFunc:
        if isinstance(self.func, str):
            import importlib

            module, _, name = self.func.partition(":")
            return getattr(importlib.import_module(module), name)
        return self.func


class Context:
    """What a command runs with: its options, output streams and client."""

    def __init__(
        self,
        prog: str,
        command: str,
        opts: argparse.Namespace,
        stdout: TextIO,
        stderr: TextIO,
        client_factory: Callable[[Context], Any] | None = None,
        parser: argparse.ArgumentParser | None = None,
    ) -> None:
        self.prog = prog
        self.parser = parser
        self.command = command
        self.opts = opts
        self.stdout = stdout
        self.stderr = stderr
        self._client_factory = client_factory
        self._client: Any = None

    def usage_error(self, message: str) -> None:
        """Reject the command line: usage and C{message} on stderr, exit status 2."""
        if self.parser is None:
            self.err("%s %s: error: %s" % (self.prog, self.command, message))
            raise _ParserExit(EXIT_USAGE)
        self.parser.error(message)

    @property
    def root(self) -> str | None:
        return getattr(self.opts, "root", None)

    def client(self) -> Any:
        """The LUXI client (a L{ganeti.luxi.client.LuxiClient}), made on first use."""
        if self._client is None:
            if self._client_factory is not None:
                self._client = self._client_factory(self)
            else:
                from ganeti.luxi.client import LuxiClient
                from ganeti.paths import Paths

                self._client = LuxiClient(Paths.from_option(self.root).luxi_socket)
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and hasattr(client, "close"):
            client.close()

    def out(self, text: str = "") -> None:
        """Print a line on stdout, at once (Ganeti's C{ToStdout})."""
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def err(self, text: str) -> None:
        """Print a line on stderr (Ganeti's C{ToStderr})."""
        self.stderr.write(text + "\n")
        self.stderr.flush()


# --- argument parsing ------------------------------------------------------------
class _ParserExit(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


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
        raise _ParserExit(status)


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


# --- running a tool -----------------------------------------------------------------
def format_usage(prog: str, commands: dict[str, Command]) -> list[str]:
    """Ganeti's list of commands, shown for C{--help} or a missing command."""
    import textwrap

    width = min(60, max(map(len, commands)))
    lines = [
        "Usage: %s {command} [options...] [argument...]" % prog,
        "%s <command> --help to see details, or man %s" % (prog, prog),
        "Global option (before or after the command): --root DIR",
        "",
        "Commands:",
    ]
    for name in sorted(commands):
        wrapped = textwrap.wrap(commands[name].help, 79 - 3 - width) or [""]
        lines.append(" %-*s - %s" % (width, name, wrapped[0]))
        lines.extend(" %-*s   %s" % (width, "", more) for more in wrapped[1:])
    lines.append("")
    return lines


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


def _split_global(argv: list[str]) -> tuple[str | None, list[str]]:
    """Take a leading C{--root DIR} / C{--root=DIR} off C{argv}."""
    root = None
    while argv:
        if argv[0] == "--root" and len(argv) > 1:
            root, argv = argv[1], argv[2:]
        elif argv[0].startswith("--root="):
            root, argv = argv[0][len("--root="):], argv[1:]
        else:
            break
    return root, argv


def run(
    prog: str,
    commands: dict[str, Command],
    argv: Sequence[str] | None = None,
    *,
    aliases: dict[str, str] | None = None,
    env_override: Iterable[str] = (),
    client_factory: Callable[[Context], Any] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    log_command: bool | None = None,
) -> int:
    """Parse C{argv} (default C{sys.argv[1:]}), run the command; returns the exit status.

    @param aliases: other names of commands (C{{"show": "info"}}).
    @param env_override: commands whose default arguments may come from the
        environment variable C{<PROG>_<COMMAND>} (C{GNT_GROUP_LIST}), as in Ganeti.
    @param client_factory: makes the LUXI client from the L{Context}
        (tests pass a fake); default: a L{ganeti.luxi.client.LuxiClient}
        on the socket under C{--root}.
    @param log_command: append the command line to the node's
        C{commands.log} (L{ganeti.logfile.record_command}); default: when
        C{argv} is C{None}, that is when it is the process's own command line.
    """
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    args = list(sys.argv[1:] if argv is None else argv)
    typed_argv = list(args)
    if log_command is None:
        log_command = argv is None
    aliases = aliases or {}
    root, args = _split_global(args)
    if not args or args[0] in ("-h", "--help"):
        stream = out if args else err
        stream.write("\n".join(format_usage(prog, commands)) + "\n")
        return EXIT_SUCCESS if args else EXIT_USAGE
    if args[0] == "--version":
        from ganeti import GANETI_RELEASE, __version__

        out.write("%s (ganeti-twisted %s) %s\n" % (prog, __version__, GANETI_RELEASE))
        return EXIT_SUCCESS
    typed = args.pop(0)
    name = aliases.get(typed, typed)
    command = commands.get(name)
    if command is None:
        err.write("\n".join(format_usage(prog, commands)) + "\n")
        err.write("%s: error: unknown command %r\n" % (prog, typed))
        return EXIT_USAGE
    if name in env_override:
        extra = os.environ.get(("%s_%s" % (prog, name)).replace("-", "_").upper())
        if extra:
            import shlex

            args = shlex.split(extra) + args
    parser = build_parser(prog, name, command, out, err)
    try:
        opts = parser.parse_args(args)
    except _ParserExit as e:
        return e.status
    if not hasattr(opts, "root"):
        opts.root = root
    logged = log_command and _log_command("%s %s" % (prog, name), typed_argv, opts.root)
    ctx = Context(prog, typed, opts, out, err, client_factory, parser)
    try:
        result = command.resolve()(ctx, opts)
    except _ParserExit as e:
        result = e.status
    except (errors.GenericError, JobSubmitted) as e:
        result, text = format_error(e)
        ctx.err(text)
    except KeyboardInterrupt:
        result = EXIT_FAILURE
        ctx.err(
            "Aborted. Note that if the operation created any jobs, they might have been"
            " submitted and will continue to run in the background."
        )
    except BrokenPipeError:
        # The reader went away (gnt-job list | head): stop quietly.
        _silence(out)
        result = EXIT_FAILURE
    finally:
        ctx.close()
        if log_command and not logged:
            _log_command("%s %s" % (prog, name), typed_argv, opts.root)  # gnt-cluster init made the log directory
    return EXIT_SUCCESS if result is None else int(result)


def _log_command(program: str, argv: Sequence[str], root: str | None) -> bool:
    """Best effort: C{commands.log} of the node under C{root}, if it has a log directory."""
    from ganeti.logfile import record_command
    from ganeti.paths import Paths

    try:
        return record_command(Paths.from_option(root).log_dir, program, argv)
    except Exception:  # never fail the command over its log line
        return False


def _silence(stream: TextIO) -> None:
    """Point a broken stdout at /dev/null so that exiting does not complain."""
    try:
        fileno = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)


# --- opcodes and jobs ---------------------------------------------------------------
def reason_trail(ctx: Context) -> list[list[Any]]:
    """Ganeti's first reason entries: the user's C{--reason}, then C{gnt:client:<tool>}."""
    now = time.time_ns()
    trail: list[list[Any]] = []
    if getattr(ctx.opts, "reason", None):
        trail.append([REASON_SRC_USER, ctx.opts.reason, now])
    trail.append(["%s:%s" % (REASON_SRC_CLIENT, os.path.basename(ctx.prog)), ctx.command, now])
    return trail


def opcode(ctx: Context, op_id: str, **params: Any) -> dict[str, Any]:
    """An opcode dict with the generic options (debug level, dry run,
    priority, reason trail) taken from the command line."""
    op: dict[str, Any] = {"OP_ID": op_id}
    op.update(params)
    opts = ctx.opts
    op["debug_level"] = getattr(opts, "debug", 0) or 0
    if hasattr(opts, "dry_run"):
        op["dry_run"] = bool(opts.dry_run)
    prio = getattr(opts, "priority", None)
    op["priority"] = prio if prio is not None else op.get("priority", PRIORITIES["normal"])
    op["reason"] = reason_trail(ctx)
    return op


class JobReporter:
    """Prints what a followed job reports (Ganeti's C{StdioJobPollReportCb})."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._told_queued = False
        self._told_waiting = False

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None:
        seconds = _merge_time(timestamp)
        when = time.ctime(seconds) if seconds is not None else "?"
        self.ctx.out("%s %s" % (when, format_log_message(log_type, message)))

    def not_changed(self, job_id: int, status: str | None) -> None:
        if status == JOB_STATUS_QUEUED and not self._told_queued:
            self.ctx.err("Job %s is waiting in queue" % job_id)
            self._told_queued = True
        elif status == JOB_STATUS_WAITING and not self._told_waiting:
            self.ctx.err("Job %s is trying to acquire all necessary locks" % job_id)
            self._told_waiting = True


class QuietReporter(JobReporter):
    """Follows a job without printing anything (C{gnt-job wait})."""

    def log(self, job_id: int, serial: int, timestamp: Any, log_type: str, message: Any) -> None:
        pass

    def not_changed(self, job_id: int, status: str | None) -> None:
        pass


def _merge_time(timestamp: Any) -> float | None:
    if isinstance(timestamp, (list, tuple)) and len(timestamp) == 2:
        try:
            return float(timestamp[0]) + float(timestamp[1]) / 1e6
        except (TypeError, ValueError):
            return None
    return None


def poll_job(client: Any, job_id: int, reporter: JobReporter, update_freq: float = WFJC_TIMEOUT) -> list[Any]:
    """Follow a job until it ends, reporting each log entry once, in order
    (L{ganeti.luxi.jobwait.follow}; a canceling job counts as ended).

    @return: the opcode results of a successful job.
    @raise errors.JobLost: the job is unknown (or was archived).
    @raise JobCanceled: the job was canceled.
    @raise errors.GenericError: the job failed: the error its failed
        opcode recorded, decoded (e.g. L{errors.OpPrereqError}), or
        L{errors.OpExecError}.
    """
    steps = jobwait.follow(job_id, update_freq, reporter, until=_FOLLOW_UNTIL, lost=_JOB_LOST)
    return _job_result(job_id, jobwait.run_sync(steps, partial(_perform, client)))


def job_result(client: Any, job_id: int) -> list[Any]:
    """The opcode results of a finished job, or the error it failed with."""
    return _job_result(job_id, client.query_jobs([job_id], list(jobwait.RESULT_FIELDS)))


def _perform(client: Any, call: jobwait.Call) -> Any:
    """One call of L{jobwait.follow} on the blocking LUXI client."""
    if call.method == jobwait.WAIT_FOR_JOB_CHANGE:
        return client.wait_for_job_change(*call.args)
    if call.method == jobwait.QUERY_JOBS:
        return client.query_jobs(*call.args)
    raise errors.ProgrammerError("unexpected LUXI call %s" % call.method)


def _job_result(job_id: int, rows: Any) -> list[Any]:
    ended = jobwait.outcome(job_id, rows, lost=_JOB_LOST)
    if ended.status == JOB_STATUS_SUCCESS:
        return ended.results
    if ended.status in (JOB_STATUS_CANCELING, JOB_STATUS_CANCELED):
        raise JobCanceled("Job was canceled")
    if ended.failed is not None:
        decoded = decode_error(ended.error)
        if decoded is not None:
            raise decoded
        if ended.partial:
            raise errors.OpExecError("partial failure (opcode %d): %s" % (ended.failed, ended.error))
        raise errors.OpExecError(str(ended.error))
    raise errors.OpExecError(str(ended.results))


def submit_opcodes(ctx: Context, ops: list[dict[str, Any]], reporter: JobReporter | None = None) -> list[Any]:
    """Submit one job and follow it; C{--print-jobid} prints its id first."""
    client = ctx.client()
    new_id = client.submit_job(ops)
    if getattr(ctx.opts, "print_jobid", False):
        ctx.out("%s" % new_id)
    return poll_job(client, new_id, reporter or JobReporter(ctx))


def report_changes(ctx: Context, what: str, changes: Any) -> bool:
    """Print a SET_PARAMS result (C{[[param, new value], ...]}) as Ganeti's
    modify commands do; False when nothing changed."""
    if not changes:
        return False
    ctx.out("Modified %s" % what)
    for param, data in changes:
        ctx.out(" - %-5s -> %s" % (param, data))
    return True


def submit_or_send(ctx: Context, *ops: dict[str, Any]) -> list[Any]:
    """Ganeti's C{SubmitOrSend}: with C{--submit} send the job and raise
    L{JobSubmitted} (C{JobID: N}, exit 0); else follow it to its end."""
    if getattr(ctx.opts, "submit_only", False):
        new_id = ctx.client().submit_job(list(ops))
        if getattr(ctx.opts, "print_jobid", False):
            ctx.out("%s" % new_id)
        raise JobSubmitted(new_id)
    return submit_opcodes(ctx, list(ops))


# --- queries ------------------------------------------------------------------------
def generic_list(
    ctx: Context,
    resource: str,
    fields: list[str],
    qfilter: Any = None,
    overrides: dict[str, tuple[Callable[[Any], str], bool]] | None = None,
) -> int:
    """Query C{resource} and print it as a table; Ganeti's C{GenericList}.

    Uses the options of L{add_list_options}.  Unknown fields: a warning,
    their cells shown as C{??}, exit status 14.
    """
    opts = ctx.opts
    response = ctx.client().query(resource, fields, qfilter)
    unknown = unknown_fields(response["fields"])
    if unknown:
        ctx.err("Warning: Queried for unknown fields %s" % ", ".join(unknown))
    status, lines = format_query_result(
        response,
        unit=getattr(opts, "units", None),
        overrides=overrides,
        separator=getattr(opts, "separator", None),
        header=not getattr(opts, "no_headers", False),
        verbose=getattr(opts, "verbose", False),
    )
    for line in lines:
        ctx.out(line)
    return EXIT_UNKNOWN_FIELD if status == QR_UNKNOWN else EXIT_SUCCESS


def generic_list_fields(ctx: Context, resource: str) -> int:
    """Describe the query fields of C{resource}; Ganeti's C{GenericListFields}."""
    opts = ctx.opts
    response = ctx.client().query_fields(resource, opts.fields or None)
    unknown = unknown_fields(response["fields"])
    if unknown:
        ctx.err("Warning: Queried for unknown fields %s" % ", ".join(unknown))
    rows = [[f["name"], qft_name(f["kind"]), f["title"], f["doc"]] for f in response["fields"]]
    titles = None if opts.no_headers else ["Name", "Type", "Title", "Description"]
    for line in format_table(rows, titles, [False] * 4, opts.separator):
        ctx.out(line)
    return EXIT_UNKNOWN_FIELD if unknown else EXIT_SUCCESS


# --- tags ---------------------------------------------------------------------------
def read_tags(ctx: Context, tags: list[str]) -> list[str]:
    """C{tags} plus those of the C{--from} file (C{-}: stdin), one per line."""
    source = getattr(ctx.opts, "tags_source", None)
    if source is None:
        return list(tags)
    if source == "-":
        lines = sys.stdin.read().splitlines()
    else:
        with open(source) as handle:
            lines = handle.read().splitlines()
    return list(tags) + [line.strip() for line in lines]


def list_tags(ctx: Context, kind: str, name: str) -> int:
    for tag in sorted(ctx.client().query_tags(kind, name)):
        ctx.out(tag)
    return EXIT_SUCCESS


def add_tags(ctx: Context, kind: str, name: str, tags: list[str]) -> int:
    tags = read_tags(ctx, tags)
    if not tags:
        raise errors.OpPrereqError("No tags to be added", errors.ECODE_INVAL)
    submit_or_send(ctx, opcode(ctx, "OP_TAGS_SET", kind=kind, name=name, tags=tags))
    return EXIT_SUCCESS


def remove_tags(ctx: Context, kind: str, name: str, tags: list[str]) -> int:
    tags = read_tags(ctx, tags)
    if not tags:
        raise errors.OpPrereqError("No tags to be removed", errors.ECODE_INVAL)
    submit_or_send(ctx, opcode(ctx, "OP_TAGS_DEL", kind=kind, name=name, tags=tags))
    return EXIT_SUCCESS


def yes_no(text: str) -> bool:
    """An argparse type for Ganeti's C{yes|no} option values."""
    if text.lower() in ("yes", "true"):
        return True
    if text.lower() in ("no", "false"):
        return False
    raise argparse.ArgumentTypeError("expected yes or no, got %r" % text)


def tag_commands(kind: str, metavar: str, what: str) -> dict[str, Command]:
    """C{list-tags}, C{add-tags} and C{remove-tags} for one object of C{kind}.

    @param metavar: the name of the object argument (e.g. C{"NODE"})
    @param what: how help texts call the object (e.g. C{"node"})
    """

    def name(opts: argparse.Namespace) -> str:
        return str(opts.object_name)

    def show(ctx: Context, opts: argparse.Namespace) -> int:
        return list_tags(ctx, kind, name(opts))

    def change(add: bool) -> CommandFunc:
        def run_change(ctx: Context, opts: argparse.Namespace) -> int:
            if not opts.tags and opts.tags_source is None:
                ctx.usage_error("no tags given")
            return (add_tags if add else remove_tags)(ctx, kind, name(opts), opts.tags)

        return run_change

    def setup_show(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("object_name", metavar=metavar)

    def setup_change(parser: argparse.ArgumentParser) -> None:
        add_tag_source_option(parser)
        add_priority_option(parser)
        add_submit_options(parser)
        parser.add_argument("object_name", metavar=metavar)
        parser.add_argument("tags", nargs="*", metavar="TAG")

    return {
        "list-tags": Command(show, setup_show, "List the tags of the given %s" % what),
        "add-tags": Command(change(True), setup_change, "Add tags to the given %s" % what),
        "remove-tags": Command(change(False), setup_change, "Remove tags from the given %s" % what),
    }


# --- asking the user ----------------------------------------------------------------
def ask_user(text: str, choices: list[tuple[str, Any, str]] | None = None, tty: str = "/dev/tty") -> Any:
    """Ask a question on the terminal; without one, the last choice's value.

    @param choices: C{(key, value, description)}; default yes/no.
    """
    if choices is None:
        choices = [("y", True, "Perform the operation"), ("n", False, "Do not perform the operation")]
    answer = choices[-1][1]
    try:
        handle = open(tty, "r+")
    except OSError:
        return answer
    keys = [c[0] for c in choices]
    prompt = "/".join(keys[:-1] + ["[%s]" % keys[-1], "?"])
    values = {c[0]: c[1] for c in choices}
    with handle:
        while True:
            handle.write("%s\n%s: " % (text, prompt))
            handle.flush()
            line = handle.readline()
            if not line:
                return answer
            reply = line.strip().lower()
            if reply in values:
                return values[reply]
            if reply == "":
                return answer
            if reply == "?":
                for key, _, description in choices:
                    handle.write(" %s - %s\n" % (key, description))
                handle.write("\n")

