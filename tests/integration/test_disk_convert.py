"""gnt-instance modify with ExtStorage parameters on a real 2-node loopback
cluster (fake hypervisor), with our CLI and Ganeti 3.0.2's own gnt-instance:

  - disk template conversion (Ganeti's generic one): a file instance whose
    disk holds data becomes an ext instance on the shipped C{loopback}
    provider (C{-t ext -e provider=loopback,dir=...}), then a sharedfile
    one; the data goes along, the old disks are gone;
  - C{--disk 0:modify,KEY=VALUE} of an ext disk changes its provider
    parameters (a provider this test writes);
  - C{--new-primary} of a stopped sharedfile instance;
  - a rename hands the ext volume its new metadata (the C{setinfo} script);
  - refusals that change nothing: no provider, an unknown parameter, a
    running instance, the same template.

Every loop device and file the test makes is detached and removed."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor, threads

from ganeti import serializer
from ganeti.paths import Paths
from ganeti.rpc.instances import node_path
from ganeti.testing.cluster import LoopbackCluster, loopback_config, ok
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_extstorage import loop_devices, records, release, write_provider  # noqa: F401
from tests.integration.test_networks import refused

N1, N2 = "node1.test", "node2.test"
TEMPLATES = ("diskless", "file", "sharedfile", "ext")
TOKEN = b"ganeti-conversion-token"


def stored(root: Paths, name: str) -> tuple[dict, list[dict]]:
    ok(root, "gnt-debug", "wconfd", "flushconfig")
    data = json.loads(serializer.read_file(root.config_data))
    inst = next(i for i in data["instances"].values() if i["name"] == name)
    return inst, [data["disks"][d] for d in inst["disks"]]


def check_conversions(root: Paths, node_root: str, volumes: str, tools: GanetiTools | None) -> None:
    ok(root, "gnt-instance", "add", "-t", "file", "--disk", "0:size=8M", "-n", N1, "-o", "noop", "-B",
       "memory=64M", "--no-name-check", "--no-ip-check", "--no-start", "--no-install", "conv1")
    _inst, (disk,) = stored(root, "conv1")
    old_file = node_path(node_root, disk["logical_id"][1])
    with open(old_file, "r+b") as handle:
        handle.seek(4096)
        handle.write(TOKEN)

    # refusals, nothing changed
    assert "Provider option is missing" in refused(root, "gnt-instance", "modify", "-t", "ext", "conv1")
    assert "does not take the parameter(s) pool" in refused(
        root, "gnt-instance", "modify", "-t", "ext", "-e", "provider=loopback,dir=%s,pool=x" % volumes, "conv1")
    assert "Instance already has disk template file" in refused(root, "gnt-instance", "modify", "-t", "file",
                                                                "conv1")
    assert "requires converting to the 'ext' disk template" in refused(
        root, "gnt-instance", "modify", "-e", "provider=loopback", "conv1")
    ok(root, "gnt-instance", "startup", "conv1")
    assert "cannot change disk template" in refused(root, "gnt-instance", "modify", "-t", "sharedfile", "conv1")
    ok(root, "gnt-instance", "shutdown", "conv1")

    # file -> ext (our CLI)
    out = ok(root, "gnt-instance", "modify", "-t", "ext", "-e", "provider=loopback,dir=%s" % volumes, "conv1")
    assert "disk_template -> ext" in out, out
    inst, (disk,) = stored(root, "conv1")
    assert inst["disk_template"] == "ext" and disk["params"] == {"provider": "loopback", "dir": volumes}, disk
    assert not os.path.exists(old_file)
    volume = os.path.join(volumes, disk["logical_id"][1])
    with open(volume, "rb") as handle:
        handle.seek(4096)
        assert handle.read(len(TOKEN)) == TOKEN
    assert os.stat(volume).st_size == 8 * 1024 * 1024

    # ext -> sharedfile (Ganeti's gnt-instance when there is one), then the instance runs on it
    convert = ("gnt-instance", "modify", "-t", "sharedfile", "conv1")
    if tools is not None:
        tools.ok(*convert)
    else:
        ok(root, *convert)
    inst, (disk,) = stored(root, "conv1")
    assert inst["disk_template"] == "sharedfile" and not os.path.exists(volume), inst
    assert [n for n in os.listdir(volumes) if not n.endswith(".meta")] == []
    with open(node_path(node_root, disk["logical_id"][1]), "rb") as handle:
        handle.seek(4096)
        assert handle.read(len(TOKEN)) == TOKEN
    # --new-primary of a stopped sharedfile instance: the configuration only
    new_primary = ("gnt-instance", "modify", "--new-primary", N2, "conv1")
    if tools is not None:
        tools.ok(*new_primary)
    else:
        ok(root, *new_primary)
    out = ok(root, "gnt-instance", "list", "--no-headers", "--separator=|", "-o", "pnode,status", "conv1")
    assert out == "%s|ADMIN_down\n" % N2, out
    ok(root, "gnt-instance", "startup", "conv1")
    assert "Instance is still running on %s" % N2 in refused(root, "gnt-instance", "modify", "--new-primary", N1,
                                                             "conv1")
    ok(root, "gnt-instance", "remove", "-f", "conv1")


def check_ext_params(root: Paths, work: str, tools: GanetiTools | None) -> None:
    first, second = os.path.join(work, "record1"), os.path.join(work, "record2")
    ok(root, "gnt-instance", "add", "-t", "ext", "--disk", "0:size=8M,provider=recorder,record=%s" % first, "-n",
       N1, "-o", "noop", "-B", "memory=64M", "--no-name-check", "--no-ip-check", "--no-start", "--no-install",
       "rec1")
    out = ok(root, "gnt-instance", "modify", "--disk", "0:modify,record=%s" % second, "rec1")
    assert "disk.params:record/0 -> %s" % second in out, out
    _inst, (disk,) = stored(root, "rec1")
    assert disk["params"] == {"provider": "recorder", "record": second}, disk
    assert "does not take the parameter(s) pool" in refused(root, "gnt-instance", "modify", "--disk",
                                                            "0:modify,pool=x", "rec1")
    assert "Disk 'provider' parameter change is not possible" in refused(
        root, "gnt-instance", "modify", "--disk", "0:modify,provider=loopback", "rec1")
    if tools is not None:  # Ganeti's own script sends the same opcode
        tools.ok("gnt-instance", "modify", "--disk", "0:modify,record=%s" % first, "rec1")
        _inst, (disk,) = stored(root, "rec1")
        assert disk["params"] == {"provider": "recorder", "record": first}, disk
        record = first
    else:
        record = second
    # a rename gives the volume its new metadata (the provider's setinfo), as Ganeti's
    ok(root, "gnt-instance", "rename", "-f", "--no-name-check", "--no-ip-check", "rec1", "rec2")
    setinfo = [r for r in records(record) if r["action"] == "setinfo"][-1]
    assert setinfo["VOL_METADATA"] == "originstname+rec2" and setinfo["EXTP_RECORD"] == record, setinfo
    ok(root, "gnt-instance", "remove", "-f", "rec2")


@pytest_twisted.ensureDeferred
async def test_conversion_and_ext_params(root):
    work = tempfile.mkdtemp(prefix="gnt-conv-")
    volumes = os.path.join(work, "volumes")
    os.makedirs(volumes)
    try:
        async with LoopbackCluster(reactor, root, loopback_config(2, enabled_disk_templates=TEMPLATES),
                                   shared_file_storage=True, prefix="gntcv") as cluster:
            for node_root in cluster.roots:
                write_provider(node_root.root, "recorder")
            tools = GanetiTools.for_root(root.root, N1, work) if unavailable_reason() is None else None
            await threads.deferToThread(check_conversions, root, cluster.roots[0].root, volumes, tools)
            await threads.deferToThread(check_ext_params, root, work, tools)
    finally:
        release(volumes)
        shutil.rmtree(work, ignore_errors=True)


pytestmark = pytest.mark.usefixtures("loop_devices")
