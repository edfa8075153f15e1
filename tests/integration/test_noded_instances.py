"""Instance procedures of real noded processes over mutual TLS (fake hypervisor, file storage)."""

from __future__ import annotations

import os
import shutil

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import crypto
from ganeti.config.bootstrap import initial_config
from ganeti.daemons import free_port
from ganeti.objects import NIC, Disk, Instance, new_uuid
from ganeti.rpc import RpcClient
from ganeti.rpc.instances import disk_path, encode_instance
from ganeti.testing.daemons import Daemon, make_root, remove_root, share_file_storage

NAME = "web1.example.test"
NODES = {"node1": "127.0.1.1", "node2": "127.0.1.2"}


@pytest.fixture
def cluster():
    """Two node roots sharing server.pem and their sharedfile directory."""
    roots = [make_root("gntx%d" % i) for i in (1, 2)]
    crypto.bootstrap_secrets(roots[0], "cluster.test", node_name="node1.test")
    for paths in roots[1:]:
        os.makedirs(paths.data_dir, exist_ok=True)
        shutil.copy(roots[0].server_pem, paths.server_pem)
    share_file_storage(roots)
    port = free_port()
    daemons = [
        Daemon(paths, "ganeti-noded", "--bind", address, "--port", str(port), tcp=(address, port))
        for paths, address in zip(roots, NODES.values())
    ]
    for daemon in daemons:
        daemon.start()
    yield roots, daemons, port
    for daemon in daemons:
        daemon.stop()
    for paths in roots:
        remove_root(paths)


def describe(template):
    cfg = initial_config("cluster.test", "node1.test", "127.0.1.1")
    storage_dir = cfg.cluster.shared_file_storage_dir if template == "sharedfile" else cfg.cluster.file_storage_dir
    disk = Disk(uuid=new_uuid(), dev_type=template, logical_id=["loop", disk_path(storage_dir, NAME, 0)],
                iv_name="disk/0", size=8, mode="rw")
    inst = Instance(name=NAME, uuid=new_uuid(), primary_node=next(iter(cfg.nodes)), os="noop", hypervisor="fake",
                    beparams={"maxmem": 192, "vcpus": 1}, nics=[NIC(mac="aa:00:00:00:00:01")],
                    disks=[disk.uuid], disk_template=template, admin_state="up")
    return disk, encode_instance(cfg, inst, disks=[disk])


async def call(client, node, procedure, *args):
    result = await client.call_one(node, NODES[node], procedure, list(args), timeout=30)
    assert result.success, "%s on %s: %s" % (procedure, node, result.fail_msg)
    return result.payload


@pytest_twisted.ensureDeferred
async def test_instance_lifecycle_over_tls(cluster):
    roots, daemons, port = cluster
    await daemons[0].ready(reactor)
    client = RpcClient.from_paths(reactor, roots[0], port=port)
    try:
        disk, data = describe("file")
        path = await call(client, "node1", "blockdev_create", disk.to_dict(), 8, NAME, True, "", False)
        assert path == os.path.join(roots[0].file_storage_dir, NAME, "disk0") and os.path.getsize(path) == 8 << 20
        await call(client, "node1", "instance_os_add", data, False, 0)
        assert await call(client, "node1", "instance_list", ["fake"], {"fake": {}}) == []

        assert await call(client, "node1", "instance_start", data, False, []) is None
        assert await call(client, "node1", "instance_list", ["fake"], {"fake": {}}) == [NAME]
        infos = await call(client, "node1", "all_instances_info", ["fake"], {"fake": {}})
        assert list(infos) == [NAME] and infos[NAME]["memory"] == 192 and infos[NAME]["vcpus"] == 1
        info = await call(client, "node1", "instance_info", NAME, "fake", {})
        assert info["state"] == 0
        _boot, _storage, (hv,) = await call(client, "node1", "node_info", [], [["fake", {}]])
        assert hv["memory_total"] > 0

        assert await call(client, "node1", "instance_shutdown", data, 30, []) is None
        assert await call(client, "node1", "instance_list", ["fake"], {"fake": {}}) == []
        assert await call(client, "node1", "all_instances_info", ["fake"], {"fake": {}}) == {}
        await call(client, "node1", "blockdev_remove", disk.to_dict())
        assert not os.path.exists(path)

        refused = await client.call_one("node1", NODES["node1"], "instance_start", [{"name": "x"}, False, []])
        assert refused.failed and "has no hypervisor" in refused.fail_msg
        outside = dict(disk.to_dict(), logical_id=["loop", "/etc/passwd"])
        refused = await client.call_one("node1", NODES["node1"], "blockdev_remove", [outside])
        assert refused.failed and "outside the storage directory" in refused.fail_msg
        diagnosed = await call(client, "node1", "os_diagnose")
        assert {"noop", "image"} <= {entry[0] for entry in diagnosed if entry[2]}
    finally:
        await client.close()


@pytest_twisted.ensureDeferred
async def test_migration_between_nodes_over_tls(cluster):
    roots, daemons, port = cluster
    for daemon in daemons:
        await daemon.ready(reactor)
    client = RpcClient.from_paths(reactor, roots[0], port=port)
    try:
        disk, data = describe("sharedfile")
        await call(client, "node1", "blockdev_create", disk.to_dict(), 8, NAME, True, "", False)
        await call(client, "node1", "instance_start", data, False, [])
        info = await call(client, "node1", "migration_info", data)
        await call(client, "node2", "accept_instance", data, info, NODES["node2"])
        await call(client, "node1", "instance_migrate", "cluster.test", data, NODES["node2"], True)
        status = await call(client, "node1", "instance_get_migration_status", data)
        assert status["status"] == "completed"
        await call(client, "node2", "instance_finalize_migration_dst", data, info, True)
        await call(client, "node1", "instance_finalize_migration_src", data, True, True)
        lists = await client.call(NODES, "instance_list", [["fake"], {}], timeout=30)
        assert lists["node1"].payload == [] and lists["node2"].payload == [NAME]
        await call(client, "node2", "instance_shutdown", data, 30, [])
        await call(client, "node2", "blockdev_remove", disk.to_dict())  # the disk is on the shared storage
        assert os.listdir(roots[0].shared_file_storage_dir) == []
    finally:
        await client.close()
