"""Moving instances on a real 3-node loopback cluster (fake hypervisor):
migrate, failover, node evacuate and node migrate, with their follow-up jobs
submitted by the job processes to LuxiD.

The instances are made with OP_INSTANCE_CREATE (a sharedfile and a
diskless one running on node1, a diskless one stopped on node2).  The
three roots share their sharedfile directory, as nodes on a SAN would.
"""

from __future__ import annotations

import attrs
import pytest_twisted
from twisted.internet import reactor

from ganeti.luxi.client import LuxiClient
from ganeti.objects import NIC, ConfigData, Disk, Instance, new_uuid
from ganeti.rpc.instances import disk_path
from ganeti.testing.cluster import LoopbackCluster, loopback_config
from tests.integration.test_luxid import in_thread, wait_job

NODES = {"node1.test": "127.0.1.1", "node2.test": "127.0.1.2", "node3.test": "127.0.1.3"}
N1, N2, N3 = NODES
SHARED, NODISK, DOWN, LOCAL = "shared1.test", "nodisk1.test", "down1.test", "local1.test"
STAMP = {"serial_no": 1, "ctime": 1.0, "mtime": 1.0}


def cluster_config() -> ConfigData:
    """Three nodes (only the master a candidate) with the instances written
    in: shared1 (sharedfile) and nodisk1 marked up on node1, down1 marked
    down on node2 (the caller creates the disk and starts them; used by the
    gnt-instance test)."""
    cfg = loopback_config(3)
    uuid_of = {n.name: u for u, n in cfg.nodes.items()}
    disk_uuid = new_uuid()
    disk = Disk(uuid=disk_uuid, dev_type="sharedfile", iv_name="disk/0", size=8, mode="rw", nodes=[uuid_of[N1]],
                logical_id=["loop", disk_path(cfg.cluster.shared_file_storage_dir or "", SHARED, 0)],
                **STAMP)  # type: ignore[arg-type]
    instances = {}
    for number, (name, node, template, state) in enumerate(
        [(SHARED, N1, "sharedfile", "up"), (NODISK, N1, "diskless", "up"), (DOWN, N2, "diskless", "down")], 1
    ):
        uuid = new_uuid()
        instances[uuid] = Instance(
            name=name, uuid=uuid, primary_node=uuid_of[node], os="noop", hypervisor="fake", admin_state=state,
            admin_state_source="admin", disk_template=template, disks_active=state == "up",
            beparams={"maxmem": 128, "vcpus": 1}, nics=[NIC(mac="aa:00:00:00:00:%02x" % number, uuid=new_uuid())],
            disks=[disk_uuid] if template == "sharedfile" else [], **STAMP,  # type: ignore[arg-type]
        )
    return attrs.evolve(cfg, instances=instances, disks={disk_uuid: disk})


def create(name: str, node: str, template: str, start: bool = True) -> dict:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": template,
            "disks": [] if template == "diskless" else [{"size": 8}], "nics": [{}], "os_type": "noop",
            "beparams": {"memory": 128}, "pnode": node, "start": start}


def submit(client: LuxiClient, op: dict) -> tuple[str, list]:
    """Run a one-opcode job to its end: C{(status, [opresult, oplog lines])}."""
    job_id = client.submit_job([op])
    status = wait_job(client, job_id, timeout=120)
    ((result,), (log,)) = client.query_jobs([job_id], ["opresult", "oplog"])[0]
    return status, [result, [entry[3] for entry in log]]


def follow_ups(client: LuxiClient, result: dict) -> dict[str, tuple[str, object]]:
    """Wait for the jobs an opcode submitted: C{{instance name: (status, OP_ID, opresult)}}."""
    out = {}
    for ok, job_id in result["jobs"]:
        assert ok is True, job_id
        status = wait_job(client, job_id, timeout=120)
        ((op,), (opresult,)) = client.query_jobs([job_id], ["ops", "opresult"])[0]
        out[op["instance_name"]] = (status, op["OP_ID"], opresult)
    return out


def primaries(client: LuxiClient) -> dict[str, str]:
    rows = client.query_instances([], ["name", "pnode"], False)
    return {name: pnode for name, pnode in rows}


@pytest_twisted.ensureDeferred
async def test_migrate_failover_evacuate(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), shared_file_storage=True, prefix="gntm") as cluster:
        client = LuxiClient(cluster.master.luxi_socket, timeout=60)
        for name, node, template, start in [(SHARED, N1, "sharedfile", True), (NODISK, N1, "diskless", True),
                                            (DOWN, N2, "diskless", False)]:
            status, (result, log) = await in_thread(submit, client, create(name, node, template, start))
            assert status == "success", (result, log)
        assert await cluster.running() == {N1: [NODISK, SHARED], N2: [], N3: []}

        # a live migration of the sharedfile instance
        status, (result, log) = await in_thread(submit, client, {
            "OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "shared1", "target_node": N2})
        assert (status, result) == ("success", None), log
        assert "* migrating instance to %s" % N2 in log and log[-1] == "* done"
        assert (await in_thread(primaries, client))[SHARED] == N2
        assert await cluster.running() == {N1: [NODISK], N2: [SHARED], N3: []}

        # a failover of the running diskless one: stopped on node1, started on node2
        status, (result, log) = await in_thread(submit, client, {
            "OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": NODISK, "target_node": N2})
        assert status == "success", (result, log)
        assert await cluster.running() == {N1: [], N2: [NODISK, SHARED], N3: []}

        # refused: the target is the primary node already
        status, (result, _log) = await in_thread(submit, client, {
            "OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": SHARED, "target_node": N2})
        assert status == "error" and "primary node already" in result[1][0]

        # evacuate node2 to node3: one job per instance, migrations for the running ones
        status, (result, log) = await in_thread(submit, client, {
            "OP_ID": "OP_NODE_EVACUATE", "node_name": "node2", "mode": "all", "remote_node": N3})
        assert status == "success", (result, log)
        jobs = await in_thread(follow_ups, client, result)
        assert jobs == {
            SHARED: ("success", "OP_INSTANCE_MIGRATE", None),
            NODISK: ("success", "OP_INSTANCE_MIGRATE", None),
            DOWN: ("success", "OP_INSTANCE_FAILOVER", None),
        }
        assert await in_thread(primaries, client) == {SHARED: N3, NODISK: N3, DOWN: N3}
        assert await cluster.running() == {N1: [], N2: [], N3: [NODISK, SHARED]}

        # node migrate of node3, targets from the allocator: the stopped one is
        # refused by its own job (as in Ganeti), the running ones leave
        status, (result, log) = await in_thread(submit, client, {"OP_ID": "OP_NODE_MIGRATE", "node_name": N3})
        assert status == "success", (result, log)
        jobs = await in_thread(follow_ups, client, result)
        assert {name: state for name, (state, _op, _res) in jobs.items()} == {
            SHARED: "success", NODISK: "success", DOWN: "error"}
        assert jobs[DOWN][2][0] == "OpPrereqError" and "use failover" in jobs[DOWN][2][1][0]
        where = await in_thread(primaries, client)
        assert where[DOWN] == N3 and where[SHARED] in (N1, N2) and where[NODISK] in (N1, N2)
        now = await cluster.running()
        assert now[N3] == [] and sorted(now[N1] + now[N2]) == [NODISK, SHARED]
        assert SHARED in now[where[SHARED]] and NODISK in now[where[NODISK]]

        # an instance with node-local (file) disks pins its node: no evacuation, no jobs
        status, (result, log) = await in_thread(submit, client, create(LOCAL, N3, "file"))
        assert status == "success", (result, log)
        status, (result, _log) = await in_thread(submit, client, {
            "OP_ID": "OP_NODE_EVACUATE", "node_name": N3, "mode": "primary-only"})
        assert status == "error" and "%s (disk template file)" % LOCAL in result[1][0], result
        assert (await in_thread(primaries, client))[LOCAL] == N3
        client.close()
