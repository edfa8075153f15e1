"""The gnt-* console scripts answer --help from a generated table (ganeti.client.launch)."""

from __future__ import annotations

import configparser
import importlib
import io
import os
import subprocess
import sys

import pytest

from ganeti.client import helptable, launch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python(code: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """C{code} run by a new interpreter in the checkout (what a tool's own process would load)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=check, cwd=ROOT)


def test_the_help_table_is_fresh():
    # stale after a command was added or its help changed: python -m ganeti.client.launch --write
    with open(helptable.__file__, encoding="utf-8") as handle:
        assert handle.read() == launch.generate(), "run: python -m ganeti.client.launch --write"


def test_every_gnt_console_script_goes_through_the_launcher():
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, "setup.cfg"))
    scripts = dict(
        line.split(" = ", 1) for line in parser["options.entry_points"]["console_scripts"].strip().splitlines()
    )
    tools = {name: target for name, target in scripts.items() if name.startswith("gnt-") and name in launch.TOOLS}
    assert set(tools) == set(launch.TOOLS)
    for name, target in tools.items():
        module, _, func = target.partition(":")
        assert module == "ganeti.client.launch" and func == name.replace("-", "_")
        assert callable(getattr(launch, func))


@pytest.mark.parametrize("prog", sorted(launch.TOOLS))
def test_the_launchers_command_list_is_the_tools_own(prog, monkeypatch):
    tool = importlib.import_module(launch.TOOLS[prog])
    ours, theirs = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", ours)
    assert launch.launch(prog, ["--help"]) == 0
    from ganeti.client.runner import run

    assert run(prog, tool.COMMANDS, ["--help"], stdout=theirs, log_command=False) == 0
    assert ours.getvalue() == theirs.getvalue()
    assert "Commands:" in ours.getvalue()


def test_no_command_is_a_usage_error_on_stderr(monkeypatch):
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    assert launch.launch("gnt-job", ["--root", "/nonexistent"]) == 2
    assert out.getvalue() == "" and err.getvalue().startswith("Usage: gnt-job {command}")


def test_help_loads_neither_the_tool_nor_the_luxi_client():
    code = (
        "import sys; before = set(sys.modules); from ganeti.client import launch;"
        " launch.launch('gnt-instance', ['--help']);"
        "loaded = [m for m in ('ganeti.client.gnt_instance', 'ganeti.luxi.client', 'argparse', 'typing', 're',"
        " 'textwrap') if m in sys.modules and m not in before]; sys.stderr.write(repr(loaded))"
    )
    done = python(code)
    assert done.stderr == "[]"
    assert "activate-disks" in done.stdout


def test_a_command_runs_the_tool(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert launch.launch("gnt-debug", ["--version"]) == 0
    assert out.getvalue().startswith("gnt-debug (ganeti-twisted ")


def test_no_tool_imports_what_only_daemons_need():
    # orjson alone brings dataclasses, inspect, uuid, platform and datetime (about 20 ms of a command's
    # start); Twisted and attrs belong to the daemons
    code = ("import sys, importlib; from ganeti.client import launch\n"
            "for module in launch.TOOLS.values(): importlib.import_module(module)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('orjson', 'dataclasses', 'twisted', 'attr',"
            " 'attrs', 'zope')))")
    out = python(code)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_tools_start_imports_no_socket_random_gettext_or_typing():
    # typing: 14 M instructions, its names are for mypy (ganeti.lighttyping)
    # socket's import (selectors, four enum conversions), random's (hashlib's sha512, bisect) and argparse's
    # gettext (locale, a compiled regex) were a seventh of a command's instructions; a master on another node,
    # a retry and a later `import gettext` still get the real modules
    code = ("import sys; before = set(sys.modules); import importlib; from ganeti.client import launch\n"
            "launch._argparse_untranslated()\n"
            "for module in launch.TOOLS.values(): importlib.import_module(module)\n"
            "from ganeti.luxi import client, master, locate\n"
            "print(sorted(m for m in ('socket', 'selectors', 'random', 'locale', 'gettext', 'typing')"
            " if m in sys.modules and m not in before))\n"
            "import gettext; print(gettext.dgettext('x', 'kept'))")
    out = python(code)
    assert out.stdout.split("\n")[:2] == ["[]", "kept"], out.stdout


def test_argparse_still_speaks_english_without_gettext():
    code = ("import sys; from ganeti.client import launch; launch._argparse_untranslated()\n"
            "import argparse; p = argparse.ArgumentParser(prog='gnt-x'); p.add_argument('name', nargs=2)\n"
            "p.parse_args(['--bogus'])")
    done = python(code, check=False)
    assert done.returncode == 2
    assert "gnt-x: error: the following arguments are required: name" in done.stderr, done.stderr


def test_a_tools_start_compiles_no_annotation():
    # typing compiles a string annotation (a ForwardRef: a NamedTuple's postponed fields, a TypeVar's string
    # bound), and a process's first compile costs a command about 1.5 ms; so does collections.namedtuple
    code = ("import sys, importlib, typing, collections; from ganeti.client import launch\n"
            "made = []\n"
            "real = typing.ForwardRef.__init__\n"
            "typing.ForwardRef.__init__ = lambda self, arg, *a, **k: made.append(arg) or real(self, arg, *a, **k)\n"
            "real_nt = collections.namedtuple\n"
            "collections.namedtuple = lambda name, *a, **k: made.append(name) or real_nt(name, *a, **k)\n"
            "launch._argparse_untranslated()\n"
            "for module in launch.TOOLS.values(): importlib.import_module(module)\n"
            "from ganeti.luxi import client, master, locate, jobwait\n"
            "print(made)")
    out = python(code)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_console_start_runs_no_collection_and_freezes_what_it_made():
    # the collector passed over the ~14,000 objects of a tool's import again and again (a tenth of a command's
    # instructions); after the start they are frozen and the collector is on again for the command itself
    code = ("import gc, sys; from ganeti.client import launch\n"
            "runs = []; gc.callbacks.append(lambda phase, info: phase == 'start' and runs.append(info['generation']))\n"
            "code = launch.launch('gnt-debug', ['--version'], console=True)\n"
            "sys.stderr.write(repr((code, runs, gc.isenabled(), gc.get_freeze_count() > 10000)))")
    done = python(code)
    assert done.stderr == "(0, [], True, True)", done.stderr
    assert done.stdout.startswith("gnt-debug (ganeti-twisted ")
    # in a process that is not the tool's own (a test, a caller), nothing is frozen
    code = ("import gc, sys; from ganeti.client import launch\n"
            "launch.launch('gnt-debug', ['--version']); sys.stderr.write(repr(gc.get_freeze_count()))")
    done = python(code)
    assert done.stderr == "0", done.stderr
