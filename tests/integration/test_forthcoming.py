"""Forthcoming instances on a real 3-node loopback cluster (fake hypervisor):
C{gnt-instance add --forthcoming} and C{--commit} with our CLI, Ganeti
3.0.2's own gnt-instance script and Ganeti's RAPI client.  A reservation is
kept in config.data as Ganeti keeps it (C{forthcoming: true} on the
instance and its disks), makes no disk and starts nothing; the commit makes
the disks and starts the instance; bad requests get a clear error and
change nothing."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import serializer
from ganeti.paths import Paths
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_networks import USERS, rapi_calls, refused
from tests.integration.test_rapi_client import _client_available

N1, N2, N3 = "node1.test", "node2.test", "node3.test"
FILE_DIR = "/srv/ganeti/file-storage"
ADD = ("gnt-instance", "add", "-o", "noop", "--no-name-check", "--no-ip-check", "-B", "memory=64M")


def config(root: Paths) -> dict:
    ok(root, "gnt-debug", "wconfd", "flushconfig")
    return json.loads(serializer.read_file(root.config_data))


def stored(root: Paths, name: str) -> tuple[dict, list[dict]]:
    """The instance C{name} and its disks as config.data holds them."""
    data = config(root)
    inst = next(i for i in data["instances"].values() if i["name"] == name)
    return inst, [data["disks"][d] for d in inst["disks"]]


def listing(root: Paths, *names: str) -> dict[str, list[str]]:
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator=|", "-o",
             "name,forthcoming,status,pnode", *names)
    return {row[0]: row[1:] for row in (line.split("|") for line in out.splitlines() if line)}


def check_our_cli(root: Paths, disk_file) -> None:
    ok(root, *ADD, "-t", "file", "--disk", "0:size=16M", "-n", N2, "--forthcoming", "web1.test")
    inst, disks = stored(root, "web1.test")
    assert inst["forthcoming"] is True and inst["admin_state"] == "down", inst
    assert [d["forthcoming"] for d in disks] == [True], disks
    assert not os.path.exists(disk_file(N2, "web1.test"))
    assert listing(root) == {"web1.test": ["Y", "ADMIN_down", N2]}
    # the name and the MAC are taken
    assert "already in the cluster" in refused(root, *ADD, "-t", "diskless", "-n", N3, "web1.test")
    assert "forthcoming instances are not supported" in refused(root, "gnt-instance", "startup", "web1.test")
    assert "forthcoming instances are not supported" in refused(root, "gnt-instance", "modify", "-B", "vcpus=2",
                                                                "web1.test")
    # bad commits
    assert "mutually exclusive" in refused(root, *ADD, "-t", "file", "--disk", "0:size=16M", "--forthcoming",
                                           "--commit", "web1.test")
    assert "reserved disks of 16 MiB, not 32" in refused(root, *ADD, "-t", "file", "--disk", "0:size=32M",
                                                         "--commit", "web1.test")
    ok(root, *ADD, "-t", "diskless", "-n", N3, "--no-start", "real1.test")
    assert "not forthcoming but --commit was passed" in refused(root, *ADD, "-t", "diskless", "--commit",
                                                                "real1.test")
    assert "unknown" in refused(root, *ADD, "-t", "diskless", "--commit", "nosuch.test")
    # a cluster verify is content with a reservation
    ok(root, "gnt-cluster", "verify")
    # the commit: the disk is made, the instance starts
    before, _ = stored(root, "web1.test")
    out = ok(root, *ADD, "-t", "file", "--disk", "0:size=16M", "--commit", "web1.test")
    inst, disks = stored(root, "web1.test")
    assert inst["uuid"] == before["uuid"] and inst["nics"][0]["mac"] == before["nics"][0]["mac"], out
    assert inst["forthcoming"] is False and [d["forthcoming"] for d in disks] == [False], inst
    assert os.path.exists(disk_file(N2, "web1.test"))
    assert listing(root, "web1.test") == {"web1.test": ["N", "running", N2]}
    # rename and remove of a reservation touch only the configuration
    ok(root, *ADD, "-t", "file", "--disk", "0:size=16M", "-n", N3, "--forthcoming", "web2.test")
    ok(root, "gnt-instance", "rename", "-f", "--no-name-check", "--no-ip-check", "web2.test", "web3.test")
    ok(root, "gnt-instance", "remove", "-f", "web3.test")
    assert "web3.test" not in listing(root)
    ok(root, "gnt-instance", "remove", "-f", "real1.test")


def check_ganeti_gnt_instance(tools: GanetiTools, root: Paths) -> None:
    tools.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=16M", "-o", "noop", "-n", N2,
             "--no-name-check", "--no-ip-check", "-B", "memory=64", "--forthcoming", "gweb.test")
    out = tools.ok("gnt-instance", "list", "--no-headers", "--separator=|", "-o", "name,forthcoming,status",
                   "gweb.test")
    assert out == "gweb.test|Y|ADMIN_down\n", out
    failed = tools.run("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=16M", "-o", "noop", "-n", N2,
                       "--no-name-check", "--no-ip-check", "--forthcoming", "--commit", "gweb.test")
    assert failed.returncode != 0 and "mutally exclusive" in failed.stdout + failed.stderr, failed
    tools.ok("gnt-instance", "failover", "-f", "-n", N3, "gweb.test")  # a reservation moves in the config only
    tools.ok("gnt-instance", "add", "-t", "sharedfile", "--disk", "0:size=16M", "-o", "noop", "-n", N3,
             "--no-name-check", "--no-ip-check", "-B", "memory=64", "--commit", "gweb.test")
    out = tools.ok("gnt-instance", "list", "--no-headers", "--separator=|", "-o", "name,forthcoming,status,pnode",
                   "gweb.test")
    assert out == "gweb.test|N|running|%s\n" % N3, out
    tools.ok("gnt-instance", "remove", "-f", "gweb.test")


@pytest_twisted.ensureDeferred
async def test_forthcoming_instances(root):
    workdir = tempfile.mkdtemp(prefix="gntfc")
    try:
        async with LoopbackCluster(reactor, root, loopback_config(3), shared_file_storage=True, rapi_users=USERS,
                                   prefix="gntfc") as cluster:
            by_node = dict(zip((N1, N2, N3), cluster.roots))

            def disk_file(node: str, instance: str, index: int = 0) -> str:
                return node_path(by_node[node].root, "%s/%s/disk%d" % (FILE_DIR, instance, index))

            await threads.deferToThread(check_our_cli, root, disk_file)
            assert "web1.test" in (await cluster.running())[N2]
            if unavailable_reason() is None:
                tools = GanetiTools.for_root(root.root, N1, workdir)
                await threads.deferToThread(check_ganeti_gnt_instance, tools, root)
            if _client_available():
                rapi = cluster.rapi
                assert rapi is not None
                create = {"os": "noop", "pnode": N2, "name_check": False, "ip_check": False,
                          "beparams": {"memory": 64}}
                results = await threads.deferToThread(rapi_calls, rapi.host, rapi.port, rapi.paths.rapi_pem, [
                    ["CreateInstance", ["create", "rweb.test", "diskless", [], []], dict(create, forthcoming=True)],
                    ["Query", ["instance", ["forthcoming", "status"]], {"qfilter": ["=", "name", "rweb.test"]}],
                    ["CreateInstance", ["create", "rweb.test", "diskless", [], []], dict(create, commit=True)],
                    ["Query", ["instance", ["forthcoming", "status"]], {"qfilter": ["=", "name", "rweb.test"]}],
                    ["CreateInstance", ["create", "rweb.test", "diskless", [], []], dict(create, commit=True)],
                ])
                assert [r.get("ok") for r in (results[0], results[2])] == ["success", "success"], results
                assert results[1]["ok"]["data"] == [[[0, True], [0, "ADMIN_down"]]], results[1]
                assert results[3]["ok"]["data"] == [[[0, False], [0, "running"]]], results[3]
                assert results[4]["ok"] == "error", results[4]
                assert "rweb.test" in (await cluster.running())[N2]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
