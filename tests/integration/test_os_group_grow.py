"""OS listing, node group changes and disk growth end to end on a real
2-node loopback cluster (two ganeti-noded, WConfD, LuxiD, ganeti-rapi; the
fake hypervisor; the shipped C{noop} and C{image} OSes).

  - C{gnt-os list} / C{diagnose} and C{GET /2/os} (an OP_OS_DIAGNOSE job
    waited for by RAPI) show the OSes every node ships;
  - C{gnt-group modify} and C{assign-nodes}, and the same through RAPI;
  - C{gnt-instance grow-disk} and C{POST /2/instances/<i>/disk/0/grow} grow
    the disk file on the node and record the new size.
"""

from __future__ import annotations

import os
from typing import Any

import pytest_twisted
from twisted.internet import reactor

from ganeti.paths import Paths
from ganeti.rapi.users import ha1
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from tests.integration.test_rapi import Client

N1, N2 = "node1.test", "node2.test"
JACK = ("jack", "abc123")
USERS = "jack abc123 write\nreader %s read\n" % ha1("reader", "pw")
MIB = 1024 * 1024


def table(root: Paths, tool: str, fields: str) -> dict[str, list[str]]:
    out = ok(root, tool, "list", "--no-headers", "--separator", "|", "-o", fields)
    return {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}


@pytest_twisted.ensureDeferred
async def test_os_groups_and_disk_growth(root):
    cluster = await LoopbackCluster(reactor, root, loopback_config(2), rapi_users=USERS, prefix="gntog").start()
    client = Client(cluster)  # type: ignore[arg-type]
    try:
        async def succeeds(method: str, path: str, body: Any = None) -> list[Any]:
            job_id = await client.ok(method, path, body, user=JACK)
            assert await client.wait_job(job_id) == "success", await client.ok("GET", "/2/jobs/%d" % job_id)
            return (await client.ok("GET", "/2/jobs/%d" % job_id))["opresult"]  # type: ignore[no-any-return]

        # --- the OSes of both nodes
        assert ok(root, "gnt-os", "list") == "Name\nimage\nnoop\n"
        assert ok(root, "gnt-os", "list", "--no-headers").split() == ["image", "noop"]
        diagnosed = ok(root, "gnt-os", "diagnose")
        assert "OS: noop [global status: valid]" in diagnosed
        assert "OS: image [global status: valid]" in diagnosed
        for node in (N1, N2):
            assert "  Node: %s, status: valid (path: " % node in diagnosed
        assert "[parameters: image]" in diagnosed
        assert sorted(await client.ok("GET", "/2/os")) == ["image", "noop"]
        detailed = {os_["name"]: os_ for os_ in await client.ok("GET", "/2/os?bulk=1")}
        assert detailed["image"]["valid"] and detailed["image"]["parameters"][0]["name"] == "image", detailed
        assert detailed["noop"]["api_versions"] and not detailed["noop"]["hidden"]

        # --- groups: add, modify, move node2 there and back
        ok(root, "gnt-group", "add", "rack2")
        out = ok(root, "gnt-group", "modify", "--alloc-policy", "last_resort", "-N", "ssh_port=2222", "rack2")
        assert out.splitlines() == ["Modified node group rack2", " - alloc_policy -> last_resort",
                                    " - ndparams -> {'ssh_port': 2222}"], out
        group = await client.ok("GET", "/2/groups/rack2")
        assert (group["alloc_policy"], group["custom_ndparams"]) == ("last_resort", {"ssh_port": 2222}), group
        await succeeds("PUT", "/2/groups/rack2/modify", {"alloc_policy": "unallocable",
                                                         "custom_ndparams": {"ssh_port": "default"}})
        group = await client.ok("GET", "/2/groups/rack2")
        assert (group["alloc_policy"], group["custom_ndparams"]) == ("unallocable", {}), group
        nothing = gnt(root, "gnt-group", "modify", "rack2")
        assert (nothing.returncode, nothing.stderr) == (1, "Please give at least one of the parameters.\n")

        ok(root, "gnt-group", "assign-nodes", "rack2", N2)
        assert table(root, "gnt-node", "name,group") == {N1: ["default"], N2: ["rack2"]}
        assert (await client.ok("GET", "/2/groups/rack2"))["node_list"] == [N2]
        await succeeds("PUT", "/2/groups/default/assign-nodes", {"nodes": [N2]})
        assert table(root, "gnt-node", "name,group") == {N1: ["default"], N2: ["default"]}
        refused = gnt(root, "gnt-group", "assign-nodes", "rack2", "node9.test")
        assert refused.returncode == 1 and "node9.test" in refused.stderr, refused.stderr

        # --- disk growth: the file on node2 and the size in the configuration
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N2, "-o", "noop", "-H", "fake",
           "-B", "memory=64M", "--no-name-check", "--no-ip-check", "web1.test")
        disk_file = node_path(cluster.roots[1].root, "/srv/ganeti/file-storage/web1.test/disk0")
        assert os.path.getsize(disk_file) == 8 * MIB
        assert table(root, "gnt-instance", "name,disk.sizes") == {"web1.test": ["8"]}

        out = ok(root, "gnt-instance", "grow-disk", "web1.test", "0", "16M")
        assert "Growing disk 0 of instance 'web1.test' by 16M to 24M" in out, out
        assert os.path.getsize(disk_file) == 24 * MIB
        assert table(root, "gnt-instance", "name,disk.sizes") == {"web1.test": ["24"]}

        await succeeds("POST", "/2/instances/web1.test/disk/0/grow", {"amount": 40, "absolute": True})
        assert os.path.getsize(disk_file) == 40 * MIB
        assert (await client.ok("GET", "/2/instances/web1.test"))["disk.sizes"] == [40]

        smaller = gnt(root, "gnt-instance", "grow-disk", "--absolute", "web1.test", "0", "8M")
        assert smaller.returncode == 1 and "smaller" in smaller.stderr, smaller.stderr
        assert os.path.getsize(disk_file) == 40 * MIB
        ok(root, "gnt-instance", "remove", "-f", "web1.test")
    finally:
        await client.close()
        await cluster.stop()
