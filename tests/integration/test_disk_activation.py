"""gnt-instance activate-disks and deactivate-disks on a real 1-node
loopback cluster (fake hypervisor, the shipped noop OS), with a file
instance and an ext instance of the shipped C{loopback} provider:

  - activate-disks prints Ganeti's C{node:disk/N:path} lines: the disk file,
    or the volume's loop device (attached again if it was detached), and
    the node links C{var/run/ganeti/instance-disks/<instance>:<N>} to it;
  - deactivate-disks of a running instance is refused and changes nothing;
    forced, or once the instance is stopped, it works, detaches the ext
    volume's loop device and removes the link to it;
  - an unknown instance is a clear error;
  - Ganeti 3.0.2's own gnt-instance (when its package is there) prints the
    same lines and gets the same refusal.

Every loop device and file the test makes is detached and removed, also on
failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.luxi.client import LuxiClient
from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_extstorage import N1, add, loops_of, release

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("losetup") is None,
                                reason="loop devices need root and losetup (Debian package mount)")


@pytest_twisted.ensureDeferred
async def test_activate_and_deactivate_disks(root):
    work = tempfile.mkdtemp(prefix="gnt-act-")
    volumes = os.path.join(work, "volumes")
    os.makedirs(volumes)
    cfg = loopback_config(1, enabled_disk_templates=("file", "ext"))
    try:
        async with LoopbackCluster(reactor, root, cfg, prefix="gntact") as cluster:
            client = LuxiClient(cluster.master.luxi_socket, timeout=60)
            node_root = cluster.roots[0]
            links = os.path.join(node_root.run_dir, "instance-disks")

            def active(name: str) -> bool:
                return bool(client.query_instances([name], ["disks_active"], False)[0][0])

            # --- a file instance, running
            done = add(root, "file1", "file", "size=16M")
            assert done.returncode == 0, done.stderr
            out = ok(root, "gnt-instance", "activate-disks", "file1")
            (line,) = out.splitlines()
            node, iv_name, path = line.split(":", 2)
            assert (node, iv_name) == (N1, "disk/0"), out
            assert path.startswith(node_root.root) and os.path.isfile(path) and os.path.getsize(path) == 16 << 20
            assert os.readlink(os.path.join(links, "file1:0")) == path
            assert active("file1")
            refused = gnt(root, "gnt-instance", "deactivate-disks", "file1")
            assert refused.returncode != 0, refused.stdout
            assert "Instance file1 is marked to be up, cannot shutdown disks" in refused.stderr, refused.stderr
            assert active("file1")
            ok(root, "gnt-instance", "deactivate-disks", "-f", "file1")
            assert not active("file1") and os.path.isfile(path)

            # Ganeti's own gnt-instance: the same lines, the same refusal
            if unavailable_reason() is None:
                tools = GanetiTools.for_root(root.root, N1, work)
                assert tools.ok("gnt-instance", "activate-disks", "file1") == out
                refused = tools.run("gnt-instance", "deactivate-disks", "file1")
                assert refused.returncode != 0 and "cannot shutdown disks" in refused.stderr, refused.stderr
                tools.ok("gnt-instance", "deactivate-disks", "-f", "file1")
                assert not active("file1")

            # --- an ext instance of the shipped loopback provider, running
            done = add(root, "ext1", "ext", "size=32M,provider=loopback,dir=%s" % volumes)
            assert done.returncode == 0, done.stderr
            (volume,) = [n for n in os.listdir(volumes) if not n.endswith(".meta")]
            backing = os.path.join(volumes, volume)
            (dev,) = loops_of(backing)
            assert ok(root, "gnt-instance", "activate-disks", "ext1") == "%s:disk/0:%s\n" % (N1, dev)
            assert os.readlink(os.path.join(links, "ext1:0")) == dev
            refused = gnt(root, "gnt-instance", "deactivate-disks", "ext1")
            assert refused.returncode != 0 and "cannot shutdown disks" in refused.stderr, refused.stderr
            assert loops_of(backing) == [dev]  # nothing changed

            # stopped: deactivation detaches the loop device, activation attaches one again
            ok(root, "gnt-instance", "shutdown", "ext1")
            ok(root, "gnt-instance", "deactivate-disks", "ext1")
            assert loops_of(backing) == [] and not active("ext1")
            assert not os.path.lexists(os.path.join(links, "ext1:0"))  # the loop device may go to another volume
            out = ok(root, "gnt-instance", "activate-disks", "ext1")
            (again,) = loops_of(backing)
            assert out == "%s:disk/0:%s\n" % (N1, again)
            assert os.readlink(os.path.join(links, "ext1:0")) == again
            assert active("ext1")
            # forced, while running
            ok(root, "gnt-instance", "startup", "ext1")
            ok(root, "gnt-instance", "deactivate-disks", "-f", "ext1")
            assert loops_of(backing) == []

            # --- an unknown instance: a clear error, nothing done
            for command in ("activate-disks", "deactivate-disks"):
                unknown = gnt(root, "gnt-instance", command, "nosuch")
                assert unknown.returncode != 0 and "Instance 'nosuch' not known" in unknown.stderr, unknown.stderr

            ok(root, "gnt-instance", "remove", "-f", "ext1")
            ok(root, "gnt-instance", "remove", "-f", "file1")
            assert os.listdir(volumes) == []
    finally:
        release(volumes)
        shutil.rmtree(work, ignore_errors=True)
