"""ganeti-twistd: twistd with Ganeti's daemons as its only plugins (issue 13, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from twisted.python import usage

from ganeti import daemons, launcher
from ganeti.confd import tap as confd_tap
from ganeti.paths import Paths


def test_the_subcommands_are_ganetis_daemons() -> None:
    options = launcher.ServerOptions()
    names = [command[0] for command in options.subCommands]
    assert names == sorted(spec.name for spec in daemons.DAEMONS)


def test_options_parse_as_twistds(tmp_path: Any) -> None:
    options = launcher.ServerOptions()
    options.parseOptions(["-n", "--pidfile=", "ganeti-confd", "--root", str(tmp_path), "--bind", "127.0.1.1"])
    assert (options["nodaemon"], options["pidfile"], options.subCommand) == (True, "", "ganeti-confd")
    assert isinstance(options.subOptions, confd_tap.Options)
    assert options.loadedPlugins["ganeti-confd"].tapname == "ganeti-confd"
    with pytest.raises(usage.UsageError):
        launcher.ServerOptions().parseOptions(["-n", "web", "--port", "8080"])  # Twisted's own plugins are not offered


_LOADED = ("import sys; from %s import ServerOptions; list(ServerOptions().subCommands); "
           "print(' '.join(m for m in ('twisted.trial', 'unittest', 'twisted.words', 'twisted.plugins.twisted_web') "
           "if m in sys.modules))")


def test_listing_the_daemons_loads_none_of_twisteds_plugins() -> None:
    """twistd's listing loads Twisted's plugins, and with them twisted.trial,
    unittest and twisted.words, which a daemon keeps for life; this one does not."""
    ours = subprocess.run([sys.executable, "-c", _LOADED % "ganeti.launcher"], capture_output=True, text=True, check=True)
    theirs = subprocess.run([sys.executable, "-c", _LOADED % "twisted.scripts.twistd"], capture_output=True, text=True,
                            check=True)
    assert ours.stdout.split() == []
    assert theirs.stdout.split() == ["twisted.trial", "unittest", "twisted.words", "twisted.plugins.twisted_web"]


def _executable(path: Any) -> None:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)


def test_the_runner_is_ganeti_twistd_of_the_same_installation(tmp_path: Any, monkeypatch: Any) -> None:
    venv, elsewhere = tmp_path / "venv", tmp_path / "elsewhere"
    venv.mkdir()
    elsewhere.mkdir()
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    monkeypatch.setenv("PATH", str(elsewhere))
    _executable(elsewhere / "ganeti-twistd")
    _executable(venv / "twistd")
    # an older installation beside this Python: its twistd, not another installation's ganeti-twistd
    assert daemons.launcher_path() == str(venv / "twistd")
    _executable(venv / "ganeti-twistd")
    assert daemons.launcher_path() == str(venv / "ganeti-twistd")
    paths_root = str(tmp_path / "root")
    argv, _ = daemons.twistd_command(Paths(paths_root), daemons.BY_NAME["ganeti-noded"], ["--root", paths_root])
    assert argv[0] == str(venv / "ganeti-twistd")
    os.remove(venv / "ganeti-twistd")
    os.remove(venv / "twistd")
    assert daemons.launcher_path() == str(elsewhere / "ganeti-twistd")
