"""noded's C{blockdev_assemble} and C{blockdev_shutdown}
(L{ganeti.noded.instances}) for file and ext disks, in temporary roots:
ext scripts are recorded, not run (no reactor)."""

from __future__ import annotations

import os

import pytest
from twisted.internet import defer
from twisted.internet.error import ProcessDone
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from ganeti.noded.instances import InstanceProcedures
from ganeti.objects import Disk
from tests.unit.test_extstorage import make_provider
from tests.unit.test_noded_instances import NAME, ProcessClock, create_disks, encoded, make_instance, refused, run


@pytest.fixture
def cfg():
    from ganeti.config.bootstrap import initial_config

    return initial_config("cluster.test", "node1.test", "127.0.1.1")


@pytest.fixture
def node(root):
    root.ensure_dirs()
    return InstanceProcedures(root, Clock())


def test_file_disks_assemble_on_the_primary_only(node, cfg):
    inst, records = make_instance(cfg, disks=2)
    paths = create_disks(node, records)
    data = encoded(cfg, inst, records)
    links = os.path.join(node.paths.run_dir, "instance-disks")
    assert run(node.blockdev_assemble(records[1].to_dict(), data, False, 1)) == [True, True]
    assert not os.path.exists(links)
    for index, path in enumerate(paths):
        link = os.path.join(links, "%s:%d" % (NAME, index))
        assert run(node.blockdev_assemble(records[index].to_dict(), data, True, index)) == [path, link, None]
        assert os.readlink(link) == path
    # again: the same answer; a stale link is replaced
    os.remove(os.path.join(links, "%s:0" % NAME))
    os.symlink("/elsewhere", os.path.join(links, "%s:0" % NAME))
    assert run(node.blockdev_assemble(records[0].to_dict(), data, True, 0))[0] == paths[0]
    assert os.readlink(os.path.join(links, "%s:0" % NAME)) == paths[0]
    # shutting down a file disk changes nothing
    assert run(node.blockdev_shutdown(records[0].to_dict())) is None
    assert os.path.isfile(paths[0])


def test_bad_input_is_refused(node, cfg):
    inst, records = make_instance(cfg)
    data = encoded(cfg, inst, records)
    disk = records[0].to_dict()
    refused(node.blockdev_assemble(disk, data, True, 0), "Cannot assemble disk 0 of instance %s" % NAME,
            "does not exist")
    create_disks(node, records)
    refused(node.blockdev_assemble(disk, data, True, -1), "idx must be an integer")
    refused(node.blockdev_assemble(disk, data, "yes", 0), "on_primary must be a boolean")
    refused(node.blockdev_assemble({"dev_type": "diskless"}, data, True, 0), "cannot be assembled")
    refused(node.blockdev_assemble(dict(disk, logical_id=["loop", "/etc/passwd"]), data, True, 0),
            "outside the storage directory")
    refused(node.blockdev_shutdown(dict(disk, logical_id=["loop", "/etc/passwd"])), "outside the storage directory")
    assert not os.path.exists(os.path.join(node.paths.run_dir, "instance-disks"))
    assert run(node.blockdev_shutdown({"dev_type": "diskless"})) is None


def finish(reactor, answers):
    """End every recorded script in order, C{answers[action]} on stdout."""
    done = 0
    while done < len(reactor.spawned):
        spawn = reactor.spawned[done]
        action = os.path.basename(spawn["args"][-1])
        if action in answers:
            spawn["protocol"].childDataReceived(1, answers[action])
        spawn["protocol"].processEnded(Failure(ProcessDone(0)))
        done += 1
    return [os.path.basename(s["args"][-1]) for s in reactor.spawned]


def ext_disk(access):
    return Disk(uuid="d-1", name="data", dev_type="ext", logical_id=["prov", "u.ext.disk0"], iv_name="disk/0",
                size=64, mode="rw", params={"provider": "prov", "dir": "/x", "access": access})


def test_ext_volume_attached_opened_then_detached(root, cfg):
    root.ensure_dirs()
    make_provider(root.root)
    reactor = ProcessClock()
    node = InstanceProcedures(root, reactor)
    inst, _records = make_instance(cfg, template="diskless")
    disk = ext_disk("userspace")
    data = encoded(cfg, inst, [disk])
    d = defer.ensureDeferred(node.blockdev_assemble(disk.to_dict(), data, True, 0))
    assert finish(reactor, {"attach": b"\nkvm:rbd:pool/u.ext.disk0\n"}) == ["attach", "open"]
    assert run(d) == [None, None, "rbd:pool/u.ext.disk0"]  # no device: no link
    assert reactor.spawned[1]["env"]["VOL_OPEN_EXCLUSIVE"] == "True"
    reactor.spawned.clear()
    d = defer.ensureDeferred(node.blockdev_shutdown(disk.to_dict()))
    assert finish(reactor, {}) == ["detach"]
    assert run(d) is None
    assert reactor.spawned[0]["env"]["VOL_NAME"] == "u.ext.disk0"
    # kernelspace without a device from attach: a clear error
    reactor.spawned.clear()
    kernel = ext_disk("kernelspace")
    d = defer.ensureDeferred(node.blockdev_assemble(kernel.to_dict(), data, True, 0))
    finish(reactor, {"attach": b"\nkvm:rbd:pool/u.ext.disk0\n"})
    refused(d, "has no block device (access=kernelspace)")


def test_ext_unknown_provider_runs_nothing(root, cfg):
    root.ensure_dirs()
    reactor = ProcessClock()
    node = InstanceProcedures(root, reactor)
    inst, _records = make_instance(cfg, template="diskless")
    disk = ext_disk("userspace").to_dict()
    data = encoded(cfg, inst, [])
    refused(node.blockdev_assemble(disk, data, True, 0), "not found")
    refused(node.blockdev_shutdown(disk), "not found")
    assert reactor.spawned == []


def test_ext_device_linked_then_unlinked(root, cfg, monkeypatch):
    from ganeti.backend.storage import extstorage as es

    monkeypatch.setattr(es, "check_block_device", lambda path: None)  # no real device here
    root.ensure_dirs()
    make_provider(root.root)
    reactor = ProcessClock()
    node = InstanceProcedures(root, reactor)
    inst, _records = make_instance(cfg, template="diskless")
    disk = ext_disk("kernelspace")
    data = encoded(cfg, inst, [disk])
    link = os.path.join(root.run_dir, "instance-disks", "%s:3" % NAME)
    d = defer.ensureDeferred(node.blockdev_assemble(disk.to_dict(), data, True, 3))
    finish(reactor, {"attach": b"/dev/fake-loop7\n"})
    assert run(d) == ["/dev/fake-loop7", link, None]
    assert os.readlink(link) == "/dev/fake-loop7"
    other = os.path.join(root.run_dir, "instance-disks", "other:0")
    os.symlink("/dev/fake-loop8", other)
    reactor.spawned.clear()
    d = defer.ensureDeferred(node.blockdev_shutdown(disk.to_dict()))
    assert finish(reactor, {}) == ["detach"]
    assert run(d) is None
    assert not os.path.lexists(link) and os.path.islink(other)  # only the released device's links go


def test_rbd_userspace_gives_the_drive_and_runs_nothing(root, cfg):
    root.ensure_dirs()
    reactor = ProcessClock()
    node = InstanceProcedures(root, reactor)
    node.rbd.sys_bus = os.path.join(root.root, "no-sys-bus-rbd")  # no kernel rbd here
    inst, _records = make_instance(cfg, template="diskless")
    disk = Disk(uuid="d-2", dev_type="rbd", logical_id=["rbd", "u.rbd.disk0"], iv_name="disk/0", size=64, mode="rw",
                params={"pool": "rbd", "access": "userspace"})
    data = encoded(cfg, inst, [disk])
    dev_path, link, uri = run(node.blockdev_assemble(disk.to_dict(), data, True, 0))
    assert (dev_path, link) == (None, None) and uri.startswith("rbd:rbd/u.rbd.disk0")
    assert run(node.blockdev_shutdown(disk.to_dict())) is None
    kernel = dict(disk.to_dict(), params={"pool": "rbd", "access": "kernelspace"})
    refused(node.blockdev_assemble(kernel, data, True, 0), "Cannot assemble disk 0 of instance %s" % NAME)
    assert reactor.spawned == []
