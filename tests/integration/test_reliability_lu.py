"""Issue 12 (reliability), end to end on a real 3-node loopback cluster:

  - C{gnt-cluster verify} fails, naming instance, disk and node, once a
    file instance's disk file was deleted by hand, and warns about a disk
    file no instance owns; removing the instance cleans up;
  - C{gnt-cluster modify -H fake:nosuchparam=1} (and a mistyped backend
    parameter) exit non-zero with the parameter named, the config serial
    unchanged;
  - C{gnt-group add "bad group/name"} is refused.
"""

from __future__ import annotations

import os

import pytest_twisted
from twisted.internet import reactor

from ganeti.rapi.users import ha1
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok, ssconf_of, until
from tests.integration.test_rapi import Client

JACK = ("jack", "abc123")
USERS = "jack abc123 write\nreader %s read\n" % ha1("reader", "pw")

N1, N2, N3 = "node1.test", "node2.test", "node3.test"
VM = "vm1.test"
FILE_DIR = "/srv/ganeti/file-storage"


def refused(root, tool: str, *args: str) -> str:  # type: ignore[no-untyped-def]
    done = gnt(root, tool, *args)
    assert done.returncode != 0, (tool, args, done.stdout, done.stderr)
    return done.stdout + done.stderr


@pytest_twisted.ensureDeferred
async def test_verify_missing_disk_and_parameter_refusals(root):
    async with LoopbackCluster(reactor, root, loopback_config(3), rapi_users=USERS, prefix="gntrl") as cluster:
        node2 = cluster.roots[1]
        ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=16M", "-B", "memory=64", "-o", "noop",
           "--no-name-check", "--no-ip-check", "-n", N2, VM)
        disk = node_path(node2.root, "%s/%s/disk0" % (FILE_DIR, VM))
        assert os.path.isfile(disk)
        # the ssconf push after a config change is asynchronous: verify checks ssconf too
        await until(reactor, lambda: all(VM in (ssconf_of(r, "instance_list") or "") for r in cluster.roots))
        ok(root, "gnt-cluster", "verify")

        # --- a disk file deleted by hand: an error naming instance, disk and node
        os.unlink(disk)
        out = refused(root, "gnt-cluster", "verify")
        assert "ERROR: instance %s: disk disk/0 (file %s/%s/disk0) missing on node %s" % (VM, FILE_DIR, VM, N2) \
            in out, out
        # --- a file nobody owns: a warning only
        stray = node_path(cluster.roots[2].root, FILE_DIR + "/old/disk0")
        os.makedirs(os.path.dirname(stray))
        open(stray, "wb").close()
        out = refused(root, "gnt-cluster", "verify")
        assert "WARNING: node %s: disk file %s/old/disk0 is unknown" % (N3, FILE_DIR) in out, out
        ok(root, "gnt-instance", "remove", "-f", VM)
        await until(reactor, lambda: all(VM not in (ssconf_of(r, "instance_list") or "") for r in cluster.roots))
        out = ok(root, "gnt-cluster", "verify")
        assert "ERROR" not in out and "WARNING: node %s: disk file" % N3 in out, out
        os.unlink(stray)

        # --- unknown or mistyped parameters change nothing
        def serial() -> int:
            return int(ok(root, "ganeti-wconfd-client", "serial").strip())

        before = serial()
        out = refused(root, "gnt-cluster", "modify", "-H", "fake:nosuchparam=1")
        assert "Unknown hypervisor parameter 'nosuchparam' for hypervisor 'fake'" in out, out
        out = refused(root, "gnt-cluster", "modify", "-B", "vcpus=many")
        assert "Backend parameter 'vcpus' must be an integer, got 'many'" in out, out
        client = Client(cluster)  # type: ignore[arg-type]
        try:
            job_id = await client.ok("PUT", "/2/modify", {"hvparams": {"fake": {"nosuchparam": 1}}}, user=JACK)
            assert await client.wait_job(job_id) == "error"
            job = await client.ok("GET", "/2/jobs/%d" % job_id)
            assert "Unknown hypervisor parameter 'nosuchparam' for hypervisor 'fake'" in str(job["opresult"]), job
        finally:
            await client.close()
        assert serial() == before
        ok(root, "gnt-cluster", "modify", "-H", "fake:migration_mode=non-live")
        assert serial() == before + 1

        # --- names
        out = refused(root, "gnt-group", "add", "bad group/name")
        assert "Invalid node group name 'bad group/name'" in out, out
        assert "bad group" not in ok(root, "gnt-group", "list")
