"""ganeti-daemon-util (L{ganeti.tools.daemon_util}): Ganeti's daemon-util calls, temp roots, no daemons started."""

from __future__ import annotations

import fcntl

from ganeti import daemons
from ganeti.paths import Paths
from ganeti.tools import daemon_util


def test_root_from_ganeti_virtual_cluster_first():
    assert daemon_util.root_paths({"GANETI_ROOTDIR": "/v/node2", "GANETI_ROOT": "/r"}).root == "/v/node2"
    assert daemon_util.root_paths({"GANETI_ROOT": "/r"}).root == "/r"
    assert daemon_util.root_paths({}).root == "/"


def test_master_options_carry_the_rpc_port_and_voting_flags(monkeypatch):
    monkeypatch.setenv("GANETI_RPC_PORT", "4242")
    assert daemon_util.master_options(["--force-node", "--no-voting", "--yes-do-it"]) == [
        "--rpc-port", "4242", "--no-voting", "--yes-do-it"]


def test_bad_calls_are_usage_errors_and_start_nothing(root: Paths):
    lines: list[str] = []
    for argv in ([], ["restart", "ganeti-wconfd"], ["start"], ["start", "ganeti-nosuch"],
                 ["start", "ganeti-wconfd", "--bogus"], ["stop", "ganeti-wconfd", "--force-node"],
                 ["start", "ganeti-wconfd", "--no-voting"], ["stop-all", "extra"]):
        assert daemon_util.run(argv, root, out=lines.append) == daemons.EXIT_USAGE, argv
    assert "unknown daemon: ganeti-nosuch" in "\n".join(lines)
    assert "unknown option(s) --bogus" in "\n".join(lines)
    assert "confirm it with --yes-do-it" in "\n".join(lines)
    assert daemons.running_pid(root, daemons.BY_NAME["ganeti-wconfd"]) is None


def test_check_follows_the_pid_file_lock(root: Paths):
    root.ensure_dirs()
    assert daemon_util.run(["check", "ganeti-wconfd"], root) == daemon_util.EXIT_NOT_RUNNING
    with open(root.pid_file("ganeti-wconfd"), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("4242")
        held.flush()
        assert daemon_util.run(["check", "wconfd"], root) == daemons.EXIT_OK


def test_stop_of_a_daemon_not_running_is_fine(root: Paths):
    root.ensure_dirs()
    assert daemon_util.run(["stop", "ganeti-wconfd"], root, out=lambda _line: None) == daemons.EXIT_OK


def test_rpc_port_from_ganetis_environment_only_here():
    assert daemon_util.rpc_port({"GANETI_RPC_PORT": "4711"}) == 4711
    assert daemon_util.rpc_port({"GANETI_RPC_PORT": "not a port"}) == 1811
    assert daemon_util.rpc_port({"GANETI_RPC_PORT": "70000"}) == 1811
    assert daemon_util.rpc_port({}) == 1811
