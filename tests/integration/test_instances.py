"""The instance lifecycle on a real 3-node loopback cluster (fake hypervisor,
the shipped C{noop} OS): create on a node and through the allocator (file,
sharedfile, diskless), list, startup, shutdown, reboot, set-params, rename,
reinstall, remove, the refusals, and 20 creations submitted at once with
opportunistic locking, which all succeed.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest_twisted
from twisted.internet import reactor

from ganeti.luxi.client import LuxiClient
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from tests.integration.test_luxid import in_thread, wait_job

NODES = {"node1.test": "127.0.1.1", "node2.test": "127.0.1.2", "node3.test": "127.0.1.3"}
N1, N2, N3 = NODES
FILE_DIR = "/srv/ganeti/file-storage"
PARALLEL = 20


def create(name: str, **extra: Any) -> dict[str, Any]:
    op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": "file",
          "disks": [{"size": 16}], "nics": [{}], "os_type": "noop", "beparams": {"memory": 64}}
    op.update(extra)
    return op


def op(op_id: str, name: str, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_" + op_id, "instance_name": name}, **extra)


def run_jobs(client: LuxiClient, ops: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Submit one job per opcode at once; C{[(status, opresult)]} once all ended."""
    submitted = client.submit_many_jobs([[o] for o in ops])
    assert all(ok for ok, _ in submitted), submitted
    out = []
    for _ok, job_id in submitted:
        status = wait_job(client, job_id, timeout=300)
        ((result,),) = client.query_jobs([job_id], ["opresult"])[0]
        out.append((status, result))
    return out


def instances(client: LuxiClient) -> dict[str, list[Any]]:
    rows = client.query_instances([], ["name", "pnode", "admin_state", "disk_template", "nic.macs"], False)
    return {row[0]: row[1:] for row in rows}


@pytest_twisted.ensureDeferred
async def test_instance_lifecycle(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), shared_file_storage=True, prefix="gnta") as cluster:
        by_node = dict(zip(NODES, cluster.roots))

        def disk_file(node: str, instance: str, index: int = 0) -> str:
            return node_path(by_node[node].root, "%s/%s/disk%d" % (FILE_DIR, instance, index))

        client = LuxiClient(cluster.master.luxi_socket, timeout=60)

        async def one(opcode: dict[str, Any]) -> tuple[str, Any]:
            ((status, result),) = await in_thread(run_jobs, client, [opcode])
            return status, result

        async def ok(opcode: dict[str, Any]) -> Any:
            status, result = await one(opcode)
            assert status == "success", result
            return result

        async def refused(opcode: dict[str, Any], text: str, kind: str = "OpPrereqError") -> list[Any]:
            status, result = await one(opcode)
            assert status == "error" and result[0] == kind and text in result[1][0], result
            return result[1]  # type: ignore[no-any-return]

        # --- creation: explicit node, allocator, the three templates
        assert await ok(create("file1.test", pnode="node2")) == [N2]
        assert os.path.isfile(disk_file(N2, "file1.test"))
        placed = await ok(create("shared1.test", disk_template="sharedfile", iallocator="builtin"))
        assert placed[0] in NODES
        assert await ok(create("nodisk1.test", disk_template="diskless", disks=[], start=False)) in ([N1], [N2], [N3])
        rows = await in_thread(instances, client)
        assert rows["file1.test"][:3] == [N2, "up", "file"]
        assert rows["shared1.test"][1:3] == ["up", "sharedfile"]
        assert rows["nodisk1.test"][1:3] == ["down", "diskless"]
        live = await cluster.running()
        assert "file1.test" in live[N2] and "shared1.test" in live[placed[0]]
        assert not any("nodisk1.test" in names for names in live.values())

        # --- the refusals, and nothing left behind
        await refused(create("x.test", pnode="nosuchnode"), "not known")
        await refused(create("file1.test", pnode=N3), "already in the cluster")
        await refused(create("x.test", pnode=N3, disk_template="plain"), "Disk template 'plain' is not supported")
        message = await refused(create("x.test", pnode=N3, beparams={"memory": 100_000_000}), "Not enough memory")
        assert message[1] == "insufficient_resources"
        await refused(create("x.test", pnode=N3, os_type="nosuchos"), "not in supported OS list")
        await refused(create("x.test", mode="import"), "No export 'x.test' found on any node")
        assert "x.test" not in await in_thread(instances, client)
        assert not os.path.exists(disk_file(N3, "x.test"))
        # an offline node takes no new instance, and its instances do not start
        offline = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": N3, "offline": True, "force": True,
                   "reason": [["gnt:client:test", "", 0]]}
        await ok(offline)
        await refused(create("x.test", pnode=N3), "Can't use offline node")
        await ok(dict(offline, offline=False))

        # --- shutdown, startup, reboot
        await ok(op("SHUTDOWN", "file1.test", timeout=5))
        assert "file1.test" not in (await cluster.running())[N2]
        assert (await in_thread(instances, client))["file1.test"][1] == "down"
        await refused(op("REBOOT", "file1.test", reboot_type="soft"), "is not running")
        await ok(op("STARTUP", "file1.test"))
        assert "file1.test" in (await cluster.running())[N2]
        await ok(op("STARTUP", "file1.test"))  # already running: fine
        await ok(op("REBOOT", "file1.test", reboot_type="soft"))
        await ok(op("REBOOT", "file1.test", reboot_type="full"))
        assert "file1.test" in (await cluster.running())[N2]
        console = await ok(op("CONSOLE", "file1.test"))
        assert console["instance"] == "file1.test"

        # --- set params: memory, a disk and a NIC (disk removal needs it stopped)
        await refused(op("RENAME", "file1.test", new_name="file2.test"), "is marked to be up")
        await ok(op("SHUTDOWN", "file1.test"))
        result = await ok(op("SET_PARAMS", "file1.test", beparams={"memory": 96}, disks=[["add", {"size": 8}]],
                             nics=[["add", {}]]))
        assert ["be/maxmem", 96] in result and ["disk/1", "add:size=8,mode=rw"] in result
        assert os.path.isfile(disk_file(N2, "file1.test", 1))
        assert len((await in_thread(instances, client))["file1.test"][3]) == 2
        await ok(op("SET_PARAMS", "file1.test", disks=[["remove", 1, {}]]))
        assert not os.path.exists(disk_file(N2, "file1.test", 1))
        # runtime memory (ballooning) needs a running instance
        await refused(op("SET_PARAMS", "file1.test", runtime_mem=128), "Instance file1.test is not running")

        # --- rename (disks keep their paths) and reinstall
        assert await ok(op("RENAME", "file1.test", new_name="file2.test")) == "file2.test"
        rows = await in_thread(instances, client)
        assert "file2.test" in rows and "file1.test" not in rows
        assert os.path.isfile(disk_file(N2, "file1.test"))
        await ok(op("REINSTALL", "file2.test"))
        await ok(op("STARTUP", "file2.test"))
        data = await ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["file2.test"]})
        assert data["file2.test"]["run_state"] == "up" and data["file2.test"]["pnode"] == N2
        assert data["file2.test"]["be_actual"]["maxmem"] == 96
        assert await ok(op("SET_PARAMS", "file2.test", runtime_mem=80, force=True)) == [["runtime_memory", 80]]
        info = await cluster.rpc.call_one(N2, NODES[N2], "instance_info", ["file2.test", "fake", {}])
        assert info.payload["memory"] == 80, info

        # --- remove: stopped, disks gone, out of the config
        await ok(op("REMOVE", "file2.test"))
        assert "file2.test" not in await in_thread(instances, client)
        assert "file2.test" not in (await cluster.running())[N2]
        assert not os.path.exists(disk_file(N2, "file1.test"))
        await ok(op("REMOVE", "shared1.test"))
        await ok(op("REMOVE", "nodisk1.test"))
        assert await in_thread(instances, client) == {}

        # --- many creations at once, opportunistic locking over three nodes
        names = ["par%02d.test" % i for i in range(PARALLEL)]
        results = await in_thread(run_jobs, client, [
            create(name, opportunistic_locking=True, iallocator="builtin", disk_template="sharedfile")
            for name in names])
        assert [status for status, _ in results] == ["success"] * PARALLEL, results
        rows = await in_thread(instances, client)
        assert sorted(rows) == names
        spread = Counter(row[0] for row in rows.values())
        assert set(spread) == set(NODES), spread
        macs = [row[3][0] for row in rows.values()]
        assert len(set(macs)) == PARALLEL
        live = await cluster.running()
        assert sorted(sum(live.values(), [])) == names
        client.close()
