"""ganeti-local-cluster gives the cluster a master IP of its own (no sockets)."""

from __future__ import annotations

import ipaddress
import os
import subprocess

from ganeti import localcluster


def test_master_ip_is_its_own_loopback_address(tmp_path, monkeypatch):
    """Ganeti's config check reports an address that both the cluster and a
    node own: the cluster's master IP is a loopback address no node gets."""
    calls = []

    def tool(name, paths, *args):
        calls.append((name, args))
        return subprocess.CompletedProcess(args, 1, "", "stop here")

    monkeypatch.setattr(localcluster, "_tool", tool)
    assert localcluster.up(str(tmp_path / "lc"), 250, "cluster.local", "local") == 1
    [(name, args)] = calls
    assert (name, args[0]) == ("gnt-cluster", "init")
    master_ip = args[args.index("--master-ip") + 1]
    nodes = {"127.0.1.%d" % number for number in range(1, 251)}
    assert args[args.index("--primary-ip") + 1] in nodes
    assert ipaddress.ip_address(master_ip).is_loopback and master_ip not in nodes


def test_a_failed_init_stops_the_daemons_it_started(tmp_path, monkeypatch, capsys):
    """gnt-cluster init may fail after starting some daemons (a port taken): they are stopped, not left
    holding the ports and the files, and the files stay for the logs."""
    directory = tmp_path / "lc"

    def failing_init(name, paths, *args):
        os.makedirs(paths.root)  # what init made before it failed
        return subprocess.CompletedProcess(args, 1, "", "ganeti-rapi failed to start")

    stopped = []
    monkeypatch.setattr(localcluster, "_tool", failing_init)
    monkeypatch.setattr(localcluster.daemons, "stop", lambda paths, out: stopped.append(paths.root))
    assert localcluster.up(str(directory), 1, "cluster.local", "local") == 1
    assert stopped == [str(directory / "node1")]
    assert "Stopping the daemons started so far" in capsys.readouterr().out
    assert (directory / "node1").is_dir()
