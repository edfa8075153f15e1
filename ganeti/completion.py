"""Bash completion for the commands, generated from their own parsers.

    python -m ganeti.completion > packaging/bash-completion/ganeti

The tools' argparse parsers are the one source of truth: L{tool_specs}
walks every gnt-* command's subcommands (aliases included) and the other
commands' parsers, and L{render} writes one bash file defining
C{_ganeti_complete} for all of them.  It completes subcommands, the options
of a subcommand, the values of options and arguments that have a fixed set
of choices, directories after C{--root}, and file names after other options
taking a value.  A unit test checks that the shipped file is up to date.
"""

from __future__ import annotations

import argparse
import importlib
import io
import sys
from typing import Callable, Iterable, NamedTuple

from ganeti.client.options import PRIORITIES, build_parser, priority

#: the gnt-* tools run by L{ganeti.client.runner.run}: name -> module (COMMANDS, ALIASES)
GNT_TOOLS = (
    ("gnt-backup", "ganeti.client.gnt_backup"),
    ("gnt-cluster", "ganeti.client.gnt_cluster"),
    ("gnt-debug", "ganeti.client.gnt_debug"),
    ("gnt-filter", "ganeti.client.gnt_filter"),
    ("gnt-group", "ganeti.client.gnt_group"),
    ("gnt-instance", "ganeti.client.gnt_instance"),
    ("gnt-job", "ganeti.client.gnt_job"),
    ("gnt-network", "ganeti.client.gnt_network"),
    ("gnt-node", "ganeti.client.gnt_node"),
    ("gnt-os", "ganeti.client.gnt_os"),
    ("gnt-storage", "ganeti.client.gnt_storage"),
)


class ParserSpec(NamedTuple):
    """What completion needs of one parser."""

    options: tuple[str, ...]  # every option string
    valued: dict[str, tuple[str, ...]]  # option taking a value -> its choices (empty: any)
    words: tuple[str, ...]  # choices of the positional arguments


class ToolSpec(NamedTuple):
    """A command: its own options and its subcommands (if any)."""

    name: str
    top: ParserSpec
    subcommands: dict[str, ParserSpec]


def _typed_words() -> dict[object, tuple[str, ...]]:
    """Argument types whose values are a fixed set, though not argparse C{choices}."""

    return {priority: tuple(PRIORITIES)}


def _choices(action: argparse.Action) -> tuple[str, ...]:
    if action.choices:
        return tuple(str(choice) for choice in action.choices)
    return _typed_words().get(action.type, ())


def parser_spec(parser: argparse.ArgumentParser, extra_words: Iterable[str] = ()) -> ParserSpec:
    """The options, valued options and positional choices of C{parser}."""
    options: list[str] = []
    valued: dict[str, tuple[str, ...]] = {}
    words: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        if action.option_strings:
            options.extend(action.option_strings)
            if action.nargs != 0:
                for option in action.option_strings:
                    valued[option] = _choices(action)
        else:
            words.extend(_choices(action))
    words.extend(extra_words)
    return ParserSpec(tuple(options), valued, tuple(words))


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def gnt_tool_spec(name: str, module_name: str) -> ToolSpec:
    """A gnt-* tool: C{[--root DIR] COMMAND [options]}, parsers built as L{ganeti.client.runner.run} does."""

    module = importlib.import_module(module_name)
    commands = module.COMMANDS
    aliases: dict[str, str] = getattr(module, "ALIASES", {})
    subcommands = {}
    for command in sorted(set(commands) | set(aliases)):
        target = aliases.get(command, command)
        parser = build_parser(name, command, commands[target], io.StringIO(), io.StringIO())
        subcommands[command] = parser_spec(parser)
    top = ParserSpec(("--root", "--help", "--version"), {"--root": ()}, ())
    return ToolSpec(name, top, subcommands)


def argparse_tool_spec(name: str, parser: argparse.ArgumentParser, extra_words: Iterable[str] = ()) -> ToolSpec:
    """A command with one argparse parser, perhaps with subparsers."""
    subcommands = {sub: parser_spec(subparser) for sub, subparser in sorted(_subparsers(parser).items())}
    return ToolSpec(name, parser_spec(parser, extra_words), subcommands)


def _other_tools() -> list[ToolSpec]:
    from ganeti import daemons, localcluster
    from ganeti.confd import cli as confd_cli
    from ganeti.confd import wire
    from ganeti.wconfd import cli as wconfd_cli

    return [
        argparse_tool_spec("ganeti-daemons", daemons.build_parser(), list(daemons.BY_NAME)),
        argparse_tool_spec("ganeti-local-cluster", localcluster.build_parser()),
        argparse_tool_spec("ganeti-wconfd-client", wconfd_cli._parser()),
        argparse_tool_spec("gnt-confd-query", confd_cli.build_parser(), sorted(wire.REQUEST_TYPES)),
    ]


def tool_specs() -> list[ToolSpec]:
    """Every installed command that takes arguments, in name order."""
    specs = [gnt_tool_spec(name, module) for name, module in GNT_TOOLS] + _other_tools()
    return sorted(specs, key=lambda spec: spec.name)


# --- bash ------------------------------------------------------------------------------
def _quote(words: Iterable[str]) -> str:
    text = " ".join(words)
    if "'" in text:
        raise ValueError("a completion word holds a quote: %r" % text)
    return "'%s'" % text


def _case_body(spec: ParserSpec, indent: str) -> list[str]:
    """Bash setting C{opts}, C{words} and handling a valued option in C{prev}."""
    lines = [indent + "opts=%s; words=%s" % (_quote(spec.options), _quote(spec.words))]
    by_choices: dict[tuple[str, ...], list[str]] = {}
    for option, choices in spec.valued.items():
        if option != "--root":
            by_choices.setdefault(choices, []).append(option)
    if spec.valued:
        lines.append(indent + 'case "$prev" in')
        if "--root" in spec.valued:
            lines.append(indent + "    --root) _ganeti_reply dirs; return 0 ;;")
        for choices, options in sorted(by_choices.items(), key=lambda item: sorted(item[1])):
            pattern = "|".join(sorted(options))
            if choices:
                action = "_ganeti_reply words %s" % _quote(choices)
            else:
                action = "_ganeti_reply files"
            lines.append(indent + "    %s) %s; return 0 ;;" % (pattern, action))
        lines.append(indent + "esac")
    return lines


def render(specs: Iterable[ToolSpec]) -> str:
    """The bash completion file for C{specs}."""
    specs = list(specs)
    out = [
        "# Bash completion for ganeti-twisted's commands.",
        "# Generated by 'python -m ganeti.completion' from the commands' parsers: do not edit.",
        "# Install: copy to /etc/bash_completion.d/ganeti (or source it from ~/.bashrc).",
        "",
        "_ganeti_reply() {",
        "    local IFS=$'\\n'",
        '    case "$1" in',
        '        dirs) COMPREPLY=($(compgen -d -- "$cur")) ;;',
        '        files) COMPREPLY=($(compgen -f -- "$cur")) ;;',
        '        words) IFS=$\' \\t\\n\'; COMPREPLY=($(compgen -W "$2" -- "$cur")) ;;',
        "    esac",
        "}",
        "",
        "_ganeti_complete() {",
        "    local cur prev tool topvalued sub opts words i",
        '    cur=${COMP_WORDS[COMP_CWORD]}',
        '    prev=""',
        '    [ "$COMP_CWORD" -gt 0 ] && prev=${COMP_WORDS[COMP_CWORD-1]}',
        '    tool=${COMP_WORDS[0]##*/}',
        "    COMPREPLY=()",
        "    # the options taking a value before the subcommand",
        '    case "$tool" in',
    ]
    for spec in specs:
        out.append("    %s) topvalued=%s ;;" % (spec.name, _quote(sorted(spec.top.valued))))
    out += [
        "    *) return 0 ;;",
        "    esac",
        "    # the subcommand: the first word that is no option nor an option's value",
        '    sub=""',
        "    i=1",
        '    while [ "$i" -lt "$COMP_CWORD" ]; do',
        '        case "${COMP_WORDS[i]}" in',
        "            -*=*) ;;",
        '            -*) [[ " $topvalued " == *" ${COMP_WORDS[i]} "* ]] && i=$((i + 1)) ;;',
        '            *) sub=${COMP_WORDS[i]}; break ;;',
        "        esac",
        "        i=$((i + 1))",
        "    done",
        '    case "$tool" in',
    ]
    for spec in specs:
        out.append("    %s)" % spec.name)
        if spec.subcommands:
            out.append('        if [ -z "$sub" ]; then')
            out.extend(_case_body(spec.top._replace(words=tuple(spec.subcommands) + spec.top.words), " " * 12))
            out.append('        else')
            out.append('            case "$sub" in')
            for name, sub in spec.subcommands.items():
                out.append("            %s)" % name)
                out.extend(_case_body(sub, " " * 16))
                out.append("                ;;")
            out.append("            *) return 0 ;;")
            out.append("            esac")
            out.append("        fi")
        else:
            out.extend(_case_body(spec.top, " " * 8))
        out.append("        ;;")
    out.extend(
        [
            "    *) return 0 ;;",
            "    esac",
            '    if [[ "$cur" == -* ]]; then',
            '        _ganeti_reply words "$opts"',
            "    else",
            '        _ganeti_reply words "$words"',
            "    fi",
            "    return 0",
            "}",
            "",
            "complete -F _ganeti_complete %s" % " ".join(spec.name for spec in specs),
            "",
        ]
    )
    return "\n".join(out)


def main(argv: list[str] | None = None, out: Callable[[str], object] = sys.stdout.write) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ganeti.completion",
        description="Print the bash completion file of every gnt-* and ganeti-* command.",
    )
    parser.parse_args(argv)
    out(render(tool_specs()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
