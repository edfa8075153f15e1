"""gnt-cluster master-failover asks this node's NodeD to run the take-over
steps (node RPC C{master_failover}): what they report comes back in order,
a refusal with Ganeti's message, and the command prints it as before."""

from __future__ import annotations

import argparse
import io

from ganeti import daemons, serializer
from ganeti.client import cluster_master
from ganeti.client.command import Context
from ganeti.ha import takeover
from tests.unit.test_failover import call, inline_threads  # noqa: F401  (a fixture)


def ssconf_root(root, me: str) -> None:
    root.ensure_dirs()
    daemons.write_node_identity(root, me, "127.0.1.1")
    for key, value in {"master_node": "node1.test", "master_candidates": "node1.test\nnode2.test",
                       "node_list": "node1.test\nnode2.test", "online_nodes": "node1.test\nnode2.test",
                       "node_primary_ips": "node1.test 127.0.1.1\nnode2.test 127.0.1.2"}.items():
        serializer.write_file(root.ssconf(key), value + "\n")


def test_noded_refuses_on_the_master_with_ganetis_message(root, inline_threads):  # noqa: F811  (root: conftest)
    ssconf_root(root, "node1.test")
    ok, said = call(root, "master_failover", False)
    assert ok and said == [["fail", "Failure: prerequisites not met for this operation:\nThis commands must be run"
                                    " on the node where you want the new master to be. node1.test is already the"
                                    " master"], ["done", "no"]]
    ok, message = call(root, "master_failover", "yes")
    assert not ok and "(no_voting) must be a boolean" in message


def test_noded_runs_the_steps_and_reports_them(root, inline_threads, monkeypatch):  # noqa: F811
    ssconf_root(root, "node2.test")
    ran = []

    async def failover(reactor, progress, view, no_voting):
        ran.append((view.me, view.master, no_voting))
        progress.step("Master epoch 4 recorded on 2 of 2 nodes")
        progress.warn("The old master node1.test did not answer")
        return True

    monkeypatch.setattr(takeover, "failover", failover)
    ok, said = call(root, "master_failover", True)
    assert ran == [("node2.test", "node1.test", True)]
    assert ok and said == [["step", "Master epoch 4 recorded on 2 of 2 nodes"],
                           ["warn", "The old master node1.test did not answer"], ["done", "yes"]]


def test_the_command_prints_what_noded_reported(monkeypatch, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    options = argparse.Namespace(no_voting=False, yes_do_it=False, rpc_port=1811, root=str(tmp_path))
    ctx = Context("gnt-cluster", "master-failover", options, out, err)
    monkeypatch.setattr(cluster_master, "ask_noded", lambda paths, port, no_voting: [
        ["step", "Master epoch 4 recorded on 3 of 3 nodes"], ["warn", "node3 did not take the new configuration"],
        ["done", "yes"]])
    assert cluster_master.master_failover(ctx, options) == 0
    assert out.getvalue().startswith("Master epoch 4 recorded on 3 of 3 nodes\nMaster failover to ")
    assert err.getvalue() == "node3 did not take the new configuration\n"
    monkeypatch.setattr(cluster_master, "ask_noded", lambda paths, port, no_voting: [
        ["fail", "Failure: could not raise the master epoch"], ["done", "no"]])
    assert cluster_master.master_failover(ctx, options) == 1


def test_the_command_asks_its_noded_without_importing_twisted(tmp_path):
    """The way to this node's NodeD costs no Twisted import (about half a
    second of CPU, several seconds at a high load, which is when failovers
    happen): the identity file names where NodeD listens."""
    import subprocess
    import sys

    from ganeti.paths import Paths

    root = Paths(str(tmp_path))
    root.ensure_dirs()
    daemons.write_node_identity(root, "node2.test", "127.0.0.1")
    code = ("import sys\n"
            "from ganeti.client import cluster_master\n"
            "from ganeti.paths import Paths\n"
            "try:\n"
            "    cluster_master.ask_noded(Paths(%r), 1, False)\n"  # port 1: nothing listens
            "except cluster_master.NodedUnreachable as e:\n"
            "    print('unreachable', e)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'twisted', 'attr', 'zope'}))\n" % root.root)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    said, imported = done.stdout.splitlines()
    assert said.startswith("unreachable 127.0.0.1:1: ")  # it got as far as connecting (no certificate here)
    assert imported == "[]"
