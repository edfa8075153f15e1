"""noded and rapi listen on the node's primary IP when --bind is not given
(what the systemd units rely on), and refuse clearly when it is unknown."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.python import usage

from ganeti import daemons
from ganeti.noded import tap as noded_tap
from ganeti.paths import Paths
from ganeti.rapi import tap as rapi_tap


@pytest.mark.parametrize("tap", [noded_tap, rapi_tap], ids=["noded", "rapi"])
def test_bind_defaults_to_the_node_identity(tap: Any, tmp_path: Any) -> None:
    daemons.write_node_identity(Paths(str(tmp_path)), "node1.test", "192.0.2.7")
    options = tap.Options()
    options.parseOptions(["--root", str(tmp_path)])
    assert options["bind"] == "192.0.2.7"
    explicit = tap.Options()
    explicit.parseOptions(["--root", str(tmp_path), "--bind", "127.0.0.1"])
    assert explicit["bind"] == "127.0.0.1"


@pytest.mark.parametrize("tap", [noded_tap, rapi_tap], ids=["noded", "rapi"])
def test_bind_is_required_without_a_node_identity(tap: Any, tmp_path: Any) -> None:
    with pytest.raises(usage.UsageError, match="--bind ADDRESS is required"):
        tap.Options().parseOptions(["--root", str(tmp_path)])
    (tmp_path / "var" / "lib" / "ganeti").mkdir(parents=True)
    (tmp_path / "var" / "lib" / "ganeti" / "node.json").write_text("{not json")
    with pytest.raises(usage.UsageError, match="--bind ADDRESS is required"):
        tap.Options().parseOptions(["--root", str(tmp_path)])


def test_twistd_command_logs_through_the_appending_observer(tmp_path: Any) -> None:
    paths = Paths(str(tmp_path))
    argv, env = daemons.twistd_command(paths, daemons.BY_NAME["ganeti-luxid"], ["--root", paths.root])
    assert argv[1:] == ["--pidfile=", "--umask=022", "--logger=ganeti.logfile.observer", "ganeti-luxid", "--root", paths.root]
    assert env[daemons.LOG_FILE_ENV] == paths.log_file("luxi-daemon")
