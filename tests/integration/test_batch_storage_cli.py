"""gnt-instance batch-create (OP_INSTANCE_MULTI_ALLOC) and the LVM/DRBD-only
commands (replace-disks, gnt-node volumes, modify-storage, repair-storage)
on a real 2-node loopback cluster, with our CLI and Ganeti 3.0.2's own
gnt-instance and gnt-node scripts: instances created one job each from
Ganeti's JSON format; Ganeti's refusals where the storage does not exist here,
nothing changed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest_twisted
from twisted.internet import reactor

from ganeti.testing.cluster import LoopbackCluster, gnt, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason

N1, N2 = "node1.test", "node2.test"


def spec(name: str, **more: object) -> dict[str, object]:
    out: dict[str, object] = {"instance_name": name, "disk_template": "diskless", "disks": [], "nics": [],
                              "os_type": "noop", "mode": "create", "name_check": False, "ip_check": False,
                              "start": False, "beparams": {"maxmem": 128, "minmem": 128}}
    out.update(more)
    return out


def instances(root) -> dict[str, str]:
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator", "|", "-o", "name,pnode")
    return dict(line.split("|") for line in out.splitlines())


@pytest_twisted.ensureDeferred
async def test_batch_create_and_the_lvm_drbd_commands(root):
    workdir = tempfile.mkdtemp(prefix="gntbs")
    try:
        async with LoopbackCluster(reactor, root, loopback_config(2), prefix="gntbs") as _cluster:
            path = os.path.join(workdir, "instances.json")
            with open(path, "w") as handle:
                json.dump([spec("b1.test", pnode=N1), spec("b2.test", pnode=N2)], handle)
            done = gnt(root, "gnt-instance", "batch-create", path)
            assert done.returncode == 0, (done.stdout, done.stderr)
            assert done.stdout.count("Waiting for job ") == 2, done.stdout
            assert done.stdout.endswith("All instances created successfully.\n"), done.stdout
            assert instances(root) == {"b1.test": N1, "b2.test": N2}
            # without nodes: each job's allocator places its instance
            with open(path, "w") as handle:
                json.dump([spec("b3.test"), spec("b4.test")], handle)
            ok(root, "gnt-instance", "batch-create", path)
            assert {"b3.test", "b4.test"} <= set(instances(root))
            # bad definitions: nothing submitted
            for bad, message in (([spec("b5.test", pnode=N1), spec("b6.test")], "providing pnode/snode while"),
                                 ([spec("b5.test"), spec("b5.test")], "duplicate instance names: b5.test"),
                                 ([spec("b5.test", bogus=1)], "unknown parameter(s) 'bogus'"),
                                 ([spec("b5.test", iallocator="hail")], "iallocator are not allowed")):
                with open(path, "w") as handle:
                    json.dump(bad, handle)
                done = gnt(root, "gnt-instance", "batch-create", path)
                assert done.returncode != 0 and message in done.stderr, (message, done.stderr)
            with open(path, "w") as handle:
                handle.write('{"instance_name": "b5.test"}')
            done = gnt(root, "gnt-instance", "batch-create", path)
            assert done.returncode == 1 and "is not a list of dicts" in done.stderr
            assert "b5.test" not in instances(root)

            # --instance (Ganeti's default selection, named) and move --node
            ok(root, "gnt-instance", "startup", "--instance", "b1.test")
            ok(root, "gnt-instance", "shutdown", "--instance", "b1.test")
            ok(root, "gnt-instance", "move", "-f", "--node", N2, "b1.test")
            assert instances(root)["b1.test"] == N2
            ok(root, "gnt-instance", "move", "-f", "--node", N1, "b1.test")

            # replace-disks: Ganeti's argument checks, then its refusal for a non-DRBD instance
            done = gnt(root, "gnt-instance", "replace-disks", "b1.test")
            assert done.returncode != 0 and "One and only one of the -p, -s, -a, -n and -I" in done.stderr
            done = gnt(root, "gnt-instance", "replace-disks", "-s", "b1.test")
            assert done.returncode != 0 and "Can only run replace disks for DRBD8-based instances" in done.stderr
            # the LVM commands: no volumes; modify and repair refused as Ganeti refuses them without LVM
            assert ok(root, "gnt-node", "volumes") == "Node PhysDev VG Name Size Instance\n"
            done = gnt(root, "gnt-node", "modify-storage", "--allocatable", "no", N1, "lvm-pv", "/dev/sda1")
            assert done.returncode != 0 and "No disk template of storage type 'lvm-vg' is enabled" in done.stderr
            done = gnt(root, "gnt-node", "repair-storage", N1, "lvm-vg", "xenvg")
            assert done.returncode != 0 and "No disk template of storage type 'lvm-vg' is enabled" in done.stderr
            done = gnt(root, "gnt-node", "modify-storage", N1, "lvm-pv", "/dev/sda1")
            assert done.returncode == 0 and "No changes to perform, exiting." in done.stderr

            why = unavailable_reason()
            if why is None:  # Ganeti's own scripts, same answers
                tools = GanetiTools.for_root(root.root, N1, workdir)
                with open(path, "w") as handle:
                    json.dump([spec("g1.test", pnode=N1), spec("g2.test", pnode=N2)], handle)
                out = tools.ok("gnt-instance", "batch-create", path)
                assert "All instances created successfully." in out, out
                assert {"g1.test": N1, "g2.test": N2}.items() <= instances(root).items()
                done = tools.run("gnt-instance", "replace-disks", "-s", "g1.test")
                assert done.returncode != 0 and "DRBD8-based" in done.stdout + done.stderr, done
                assert tools.ok("gnt-node", "volumes").split() == ["Node", "PhysDev", "VG", "Name", "Size",
                                                                   "Instance"]
                done = tools.run("gnt-node", "repair-storage", N1, "lvm-vg", "xenvg")
                assert done.returncode != 0 and "storage type 'lvm-vg'" in done.stdout + done.stderr, done
                os.unlink(os.path.join(workdir, N1))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
