"""gnt-instance and gnt-node evacuate|migrate against a real 3-node loopback
cluster (fake hypervisor): live list fields from the node daemons, console,
migrate, failover, node evacuate and node migrate with their follow-up jobs.

The cluster is test_migration's: shared1 (sharedfile) and nodisk1 running on
node1, down1 stopped on node2.
"""

from __future__ import annotations

import pytest_twisted
from twisted.internet import reactor

from ganeti.rpc.instances import encode_instance
from ganeti.testing.cluster import LoopbackCluster, gnt, ok
from tests.integration.test_migration import DOWN, N1, N2, N3, NODES, NODISK, SHARED, cluster_config


def table(root, *args: str) -> dict[str, list[str]]:
    """C{gnt-instance list} rows by instance name."""
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator", "|", *args)
    return {line.split("|")[0]: line.split("|")[1:] for line in out.splitlines()}


@pytest_twisted.ensureDeferred
async def test_instance_commands(root):
    cfg = cluster_config()
    async with LoopbackCluster(reactor, root, cfg, shared_file_storage=True, prefix="gnti") as cluster:
        rpc = cluster.rpc
        (disk,) = cfg.disks.values()
        made = await rpc.call_one(N1, NODES[N1], "blockdev_create", [disk.to_dict(), 8, SHARED, True, "", False])
        assert made.success, made.fail_msg
        for inst in cfg.instances.values():
            if inst.admin_state == "up":
                started = await rpc.call_one(N1, NODES[N1], "instance_start", [encode_instance(cfg, inst), False, []])
                assert started.success, started.fail_msg

        # live fields come from the node daemons
        assert table(root, "-o", "name,pnode,status,oper_state,oper_vcpus") == {
            DOWN: [N2, "ADMIN_down", "N", "-"],
            NODISK: [N1, "running", "Y", "1"],
            SHARED: [N1, "running", "Y", "1"],
        }
        assert list(table(root, "-F", 'status == "running"')) == [NODISK, SHARED]
        assert list(table(root, "-o", "name", "*disk*")) == [NODISK]
        nodes = ok(root, "gnt-node", "list", "--no-headers", "--separator", "|", "-o", "name,mtotal,ctotal")
        for line in nodes.splitlines():
            name, mtotal, ctotal = line.split("|")
            assert name in NODES and int(mtotal) > 0 and int(ctotal) > 0, line
        assert ok(root, "gnt-instance", "console", SHARED) == "Console not available for fake hypervisor\n"
        refused = gnt(root, "gnt-instance", "console", DOWN)
        assert refused.returncode == 1 and "is not running" in refused.stderr

        # migrate and failover, confirmed with -f
        out = ok(root, "gnt-instance", "migrate", "-f", "-n", N2, SHARED)
        assert "* done" in out
        ok(root, "gnt-instance", "failover", "-f", "-n", N2, NODISK)
        assert table(root, "-o", "name,pnode,status") == {
            DOWN: [N2, "ADMIN_down"], NODISK: [N2, "running"], SHARED: [N2, "running"]}

        # node evacuate follows the three follow-up jobs
        done = gnt(root, "gnt-node", "evacuate", "-f", "-n", N3, N2)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.count("Waiting for job ") == 3
        assert done.stdout.endswith("All instances evacuated successfully.\n")
        assert {row[0] for row in table(root, "-o", "name,pnode").values()} == {N3}

        # node migrate: the stopped instance's job fails
        done = gnt(root, "gnt-node", "migrate", "-f", N3)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert done.stdout.endswith("There were 1 errors during the node migration.\n")
        assert "use failover" in done.stderr
        where = table(root, "-o", "name,pnode,status")
        assert where[DOWN] == [N3, "ADMIN_down"]
        assert where[SHARED][0] in (N1, N2) and where[SHARED][1] == "running"

        # node failover (Ganeti's: one failover job per primary instance, the allocator chooses)
        done = gnt(root, "gnt-node", "failover", "-f", N3)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.endswith("All 1 instance(s) failed over successfully.\n"), done.stdout
        assert table(root, "-o", "name,pnode,status")[DOWN][0] in (N1, N2)
        done = gnt(root, "gnt-node", "failover", "-f", N3)
        assert done.returncode == 0 and "No primary instances on node %s, exiting." % N3 in done.stderr

        # a node that cannot be reached gives no data, not a hang
        cluster.nodeds[1].stop()
        rows = table(root, "-o", "name,pnode,status")
        for name, (pnode, status) in rows.items():
            if pnode == N2:
                assert status == ("?" if name != DOWN else "ADMIN_down"), (name, status)
