"""Bash completion generated from the parsers, and user-facing help free of
epytext markup."""

from __future__ import annotations

import importlib
import io
import os
import re
from typing import Any

import pytest

from ganeti import completion, daemons, localcluster
from ganeti.client.options import PRIORITIES, build_parser
from ganeti.client.runner import format_usage
from ganeti.confd import cli as confd_cli
from ganeti.wconfd import cli as wconfd_cli

SHIPPED = os.path.join(os.path.dirname(__file__), "..", "..", "packaging", "bash-completion", "ganeti")
MARKUP = re.compile(r"\b[BCEILMUX]\{")


def test_shipped_completion_file_is_up_to_date() -> None:
    """Regenerate with: python -m ganeti.completion > packaging/bash-completion/ganeti"""
    with open(SHIPPED) as handle:
        assert handle.read() == completion.render(completion.tool_specs())


def test_every_console_script_with_arguments_is_completed() -> None:
    names = {spec.name for spec in completion.tool_specs()}
    assert names == {name for name, _ in completion.GNT_TOOLS} | {
        "ganeti-daemons", "ganeti-local-cluster", "ganeti-wconfd-client", "gnt-confd-query",
    }


def test_gnt_tool_spec_has_aliases_options_and_choices() -> None:
    spec = completion.gnt_tool_spec("gnt-instance", "ganeti.client.gnt_instance")
    assert {"add", "startup", "start", "stop", "info", "show"} <= set(spec.subcommands)
    add = spec.subcommands["add"]
    assert "--disk-template" in add.options and "--root" in add.options
    assert "diskless" in add.valued["-t"] and add.valued["--disk-template"] == add.valued["-t"]
    assert spec.subcommands["start"] == spec.subcommands["startup"]
    delay = completion.gnt_tool_spec("gnt-debug", "ganeti.client.gnt_debug").subcommands["delay"]
    assert delay.valued["--priority"] == tuple(PRIORITIES)


def test_render_rejects_a_word_that_would_break_the_quoting() -> None:
    spec = completion.ParserSpec(("--x",), {}, ("it's",))
    with pytest.raises(ValueError):
        completion.render([completion.ToolSpec("gnt-x", spec, {})])


def _all_help_texts() -> list[tuple[str, str]]:
    texts = []
    for name, module_name in completion.GNT_TOOLS:
        module = importlib.import_module(module_name)
        texts.append((name, "\n".join(format_usage(name, module.COMMANDS))))
        for command_name, command in module.COMMANDS.items():
            parser = build_parser(name, command_name, command, io.StringIO(), io.StringIO())
            texts.append(("%s %s" % (name, command_name), parser.format_help()))
    for parser in (daemons.build_parser(), localcluster.build_parser(), confd_cli.build_parser(), wconfd_cli._parser()):
        texts.append((parser.prog, parser.format_help()))
        for sub_name, sub in completion._subparsers(parser).items():
            texts.append(("%s %s" % (parser.prog, sub_name), sub.format_help()))
    for daemon in ("noded", "confd", "wconfd", "rapi", "luxid"):
        options: Any = importlib.import_module("ganeti.%s.tap" % daemon).Options()
        texts.append(("ganeti-%s" % daemon, str(options)))
    return texts


def test_no_epytext_markup_in_any_help() -> None:
    """--help is read by people: no C{...} or L{...} (ganeti-local-cluster showed its docstring's)."""
    marked = [(where, MARKUP.findall(text)) for where, text in _all_help_texts() if MARKUP.search(text)]
    assert marked == []
    assert len(_all_help_texts()) > 60


def test_local_cluster_help_describes_the_command() -> None:
    text = localcluster.build_parser().format_help()
    assert "multi-node cluster on one machine" in text
