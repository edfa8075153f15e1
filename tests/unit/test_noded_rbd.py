"""noded's rbd disks: the rbd commands run, refusals before anything runs (fake rbd, no reactor)."""

from __future__ import annotations

import json
import os

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from ganeti.backend.hypervisor import kvm_cmdline
from ganeti.backend.storage import rbd
from ganeti.config.bootstrap import initial_config
from ganeti.noded.failure import RpcFailure
from ganeti.noded.instances import InstanceProcedures
from ganeti.objects import Disk, Instance, new_uuid
from ganeti.rpc.instances import encode_instance
from tests.unit.test_noded_instances import run

MIB = 1024 * 1024
IMAGE = "0f1e2d3c-aaaa-bbbb-cccc-000000000001.rbd.disk0"


class FakeNet:
    """Records each program run; answers from C{answers} (by subcommand)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.answers: dict[str, tuple[bytes, bytes, int]] = {}

    def run(self, executable, args, timeout, env=None):
        self.calls.append([executable, *args])
        sub = next(a for a in args if not a.startswith("-") and a not in (self.conf, "ganeti"))  # rbd or ceph
        return defer.succeed(self.answers.get(sub, (b"", b"", 0)))

    conf = ""

    def subcommands(self):
        return [next(a for a in c[1:] if not a.startswith("-") and a not in (self.conf, "ganeti")) for c in self.calls]


@pytest.fixture
def node(root):
    root.ensure_dirs()
    for name, text in ((rbd.CONF_FILE, "[global]\n"), (rbd.CLIENT_FILE, "ganeti\n")):
        path = os.path.join(root.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)
    procs = InstanceProcedures(root, Clock())
    net = FakeNet()
    net.conf = os.path.join(root.root, rbd.CONF_FILE)
    procs.rbd.client.net = net
    procs.rbd.sys_bus = procs.rbd.client.sys_bus = os.path.join(root.root, "no-sys-bus-rbd")
    return procs, net


def disk(access="userspace", pool="rbd", image=IMAGE, **extra):
    params = {"pool": pool, "access": access, **extra}
    return Disk(uuid=new_uuid(), dev_type="rbd", logical_id=["rbd", image], iv_name="disk/0", size=1024,
                mode="rw", params=params).to_dict()


def refused(call, *fragments):
    with pytest.raises(RpcFailure) as info:
        run(call())
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_create_runs_rbd_create_with_the_node_ceph(node):
    procs, net = node
    assert run(procs.blockdev_create(disk(), 1024, "inst1", True, "", False)) == IMAGE
    assert net.calls == [["rbd", "-c", net.conf, "--id", "ganeti", "create", "-p", "rbd", IMAGE, "--size", "1024M"]]


def test_bad_input_is_refused_before_rbd_runs(node):
    procs, net = node
    refused(lambda: procs.blockdev_create(disk(access="kernelspace"), 1024, "i", True, "", False),
            "kernelspace", "kernel rbd module", "access=userspace")
    refused(lambda: procs.blockdev_create(disk(access="sideways"), 1024, "i", True, "", False), "access mode")
    refused(lambda: procs.blockdev_create(disk(flavour="x"), 1024, "i", True, "", False),
            "Unknown rbd disk parameter", "flavour")
    refused(lambda: procs.blockdev_create(disk(pool="a/b"), 1024, "i", True, "", False), "Invalid rbd pool")
    refused(lambda: procs.blockdev_create(disk(image="x:conf=/etc/passwd"), 1024, "i", True, "", False),
            "Invalid rbd image name")
    bad_id = dict(disk(), logical_id=["loop", "/x"])
    refused(lambda: procs.blockdev_create(bad_id, 1024, "i", True, "", False), "logical_id")
    assert net.calls == []


def test_rbd_failure_is_reported(node):
    procs, net = node
    net.answers["create"] = (b"", b"rbd: error opening pool 'nopool': (2) No such file or directory\n", 2)
    refused(lambda: procs.blockdev_create(disk(pool="nopool"), 1024, "i", True, "", False),
            "Cannot create rbd disk nopool/", "error opening pool 'nopool'")


def test_remove_and_remove_again(node):
    procs, net = node
    assert run(procs.blockdev_remove(disk())) is None
    net.answers["rm"] = (b"", b"rbd: delete error: (2) No such file or directory\n", 2)
    net.answers["info"] = (b"", b"rbd: error opening image: (2) No such file or directory\n", 2)
    assert run(procs.blockdev_remove(disk())) is None  # already gone
    assert net.subcommands() == ["rm", "rm", "info"]


def test_grow_resizes_to_old_plus_amount(node):
    procs, net = node
    net.answers["info"] = (json.dumps({"size": 1024 * MIB}).encode(), b"", 0)
    run(procs.blockdev_grow(disk(), 512, True, True, False))  # dry run: looks only
    run(procs.blockdev_grow(disk(), 512, False, False, False))  # logical step: looks only
    assert net.subcommands() == ["info", "info"]
    run(procs.blockdev_grow(disk(), 512, False, True, False))
    assert net.calls[-1][-4:] == [IMAGE, "--size", "1536M", "--no-progress"]


def test_dimensions(node):
    procs, net = node
    net.answers["info"] = (json.dumps({"size": 2048 * MIB}).encode(), b"", 0)
    assert run(procs.blockdev_getdimensions([disk()])) == [[2048 * MIB, None]]
    net.answers["info"] = (b"", b"rbd: error opening image x: (2) No such file or directory\n", 2)
    assert run(procs.blockdev_getdimensions([disk()])) == [None]


def test_userspace_devices_are_librbd_uris(node, root):
    procs, net = node
    cfg = initial_config("cluster.test", "node1.test", "127.0.0.1")
    record = Disk.from_dict(disk())
    inst = Instance(name="inst1", uuid=new_uuid(), hypervisor="fake", disks=[record.uuid], disk_template="rbd")
    _inst, disks = procs_decode(encode_instance(cfg, inst, disks=[record]))
    ((_disk, path, uri),) = procs.block_devices(_inst, disks)
    assert path == uri == "rbd:rbd/%s:id=ganeti:conf=%s" % (IMAGE, net.conf)
    assert net.calls == []
    drives = kvm_cmdline._drives({}, [(uri, kvm_cmdline.DISK_RDWR)])
    assert drives[1].startswith("file=rbd:rbd/%s:id=ganeti:conf=" % IMAGE), drives


def test_kernelspace_start_refused_without_the_module(node):
    procs, net = node
    cfg = initial_config("cluster.test", "node1.test", "127.0.0.1")
    record = Disk.from_dict(disk(access="kernelspace"))
    inst = Instance(name="inst1", uuid=new_uuid(), hypervisor="fake", disks=[record.uuid], disk_template="rbd",
                    beparams={"maxmem": 128})
    refused(lambda: procs.instance_start(encode_instance(cfg, inst, disks=[record])), "kernel rbd module")
    assert net.calls == []


def procs_decode(data):
    from ganeti.noded.instances import decode

    return decode(data)


def test_storage_list_rados_and_refusals(node):
    procs, net = node
    df = {"pools": [{"name": "rbd", "stats": {"stored": 3 * MIB, "max_avail": 100 * MIB}}]}
    net.answers["df"] = (json.dumps(df).encode(), b"", 0)
    rows = run(procs.storage_list("rados", [["rbd"]], None, ["name", "size", "used", "free", "allocatable"]))
    assert rows == [["rbd", 103, 3, 100, True]]
    assert net.calls[-1] == ["ceph", "-c", net.conf, "--id", "ganeti", "df", "--format", "json"]
    assert run(procs.storage_list("rados", [["rbd"]], "other", ["name"])) == []
    with pytest.raises(RpcFailure, match="does not exist"):
        run(procs.storage_list("rados", [["nopool"]], None, ["name"]))
    calls = len(net.calls)
    for args, text in [(("lvm-vg", [["xenvg"]], None, ["name"]), "Unknown storage type"),
                       (("rados", [["a/b"]], None, ["name"]), "Invalid rbd pool"),
                       (("rados", [], None, ["name"]), "su_args"),
                       (("file", [["../x"]], None, ["name"]), "absolute path"),
                       (("rados", [["rbd"]], None, ["name", "colour"]), "fields")]:
        with pytest.raises(RpcFailure, match=text):
            run(procs.storage_list(*args))
    assert len(net.calls) == calls


def test_storage_list_file(node, root):
    procs, _net = node
    ((name, size, free),) = run(procs.storage_list("file", [["/srv/ganeti/file-storage"]], None,
                                                   ["name", "size", "free"]))
    assert name == "/srv/ganeti/file-storage" and size >= free > 0


def test_kernelspace_maps_where_the_module_is(node, root):
    procs, net = node
    os.makedirs(procs.rbd.sys_bus)  # the kernel offers rbd here
    net.answers["showmapped"] = (b"[]", b"", 0)
    net.answers["map"] = (b"/dev/rbd0\n", b"", 0)
    cfg = initial_config("cluster.test", "node1.test", "127.0.0.1")
    record = Disk.from_dict(disk(access="kernelspace"))
    inst = Instance(name="inst1", uuid=new_uuid(), hypervisor="fake", disks=[record.uuid], disk_template="rbd",
                    beparams={"maxmem": 128})
    procs.hypervisor = lambda name: FakeHv()
    run(procs.instance_start(encode_instance(cfg, inst, disks=[record])))
    assert net.subcommands() == ["showmapped", "map"]
    assert FakeHv.started == [[("/dev/rbd0", None)]]


class FakeHv:
    started: list = []

    def get_instance_info(self, name):
        return None

    def start_instance(self, instance, devices, paused):
        FakeHv.started.append([(path, uri) for _disk, path, uri in devices])
