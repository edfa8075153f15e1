"""Running a gnt-* tool: parse its command line, run the command, print errors.

The tools keep Ganeti's command names, options and output conventions::

    gnt-job list --no-headers --separator=: -o id,status
    gnt-debug delay --submit 10          # "JobID: 17" on stderr, exit 0
    gnt-group add --alloc-policy preferred group2

Each tool's C{main} calls L{run} with its dict of subcommands::

    def main(argv=None): return run("gnt-debug", COMMANDS, argv)

Only the chosen subcommand's parser is built (L{ganeti.client.options}).
A command raises Ganeti errors, which L{run} prints the way Ganeti does
(L{ganeti.client.errorfmt.format_error}).
"""

from __future__ import annotations

import os
import sys

from ganeti import errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, EXIT_USAGE, Command, Context, ParserExit
from ganeti.client.errorfmt import JobSubmitted, format_error
from ganeti.client.launch import usage_lines
from ganeti.client.options import build_parser

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Sequence, TextIO


def format_usage(prog: str, commands: dict[str, Command]) -> list[str]:
    """Ganeti's list of commands, shown for C{--help} or a missing command
    (the console scripts print the same from L{ganeti.client.launch})."""
    return usage_lines(prog, {name: command.help for name, command in commands.items()})


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
        (tests pass a fake); default: a L{ganeti.luxi.master.MasterClient}
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
    except ParserExit as e:
        return e.status
    if not hasattr(opts, "root"):
        opts.root = root
    logged = log_command and _log_command("%s %s" % (prog, name), typed_argv, opts.root)
    ctx = Context(prog, typed, opts, out, err, client_factory, parser)
    try:
        result = command.resolve()(ctx, opts)
    except ParserExit as e:
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
        return record_command(Paths.from_option(root).log_dir, program, redacted_argv(argv))
    except Exception:  # never fail the command over its log line
        return False


#: options whose values are private or secret OS parameters (L{ganeti.jobs.private})
PRIVATE_OPTIONS = ("--os-parameters-private", "--os-parameters-secret")


def redacted_argv(argv: Sequence[str]) -> list[str]:
    """C{argv} with the values of L{PRIVATE_OPTIONS} shown as C{<redacted>}
    (keys kept), for the command log."""
    out: list[str] = []
    for arg in argv:
        option, eq, value = arg.partition("=")
        if out and out[-1] in PRIVATE_OPTIONS:
            out.append(_redacted_values(arg))
        elif eq and option in PRIVATE_OPTIONS:
            out.append("%s=%s" % (option, _redacted_values(value)))
        else:
            out.append(arg)
    return out


def _redacted_values(text: str) -> str:
    return ",".join("%s=<redacted>" % item.partition("=")[0] for item in text.split(",") if item)


def _silence(stream: TextIO) -> None:
    """Point a broken stdout at /dev/null so that exiting does not complain."""
    try:
        fileno = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fileno)
    os.close(devnull)
