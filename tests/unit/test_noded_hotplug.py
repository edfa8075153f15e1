"""NodeD's hotplug procedures (L{ganeti.noded.hotplug}): bad requests and a
hypervisor without hotplug are refused with a clear error; a request that
fits reaches the hypervisor with the disk's path as at start-up."""

from __future__ import annotations

import os
from typing import Any

from twisted.internet.task import Clock

from ganeti.noded.hotplug import HotplugProcedures
from ganeti.noded.instances import InstanceProcedures
from ganeti.rpc.instances import node_path
from tests.unit.test_noded_instances import cfg, encoded, make_instance, refused, run  # noqa: F401 (fixture)


class Recorder:
    """A hypervisor that can hotplug and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[Any] = []
        self.running = True

    def hotplug_supported(self, instance: Any) -> None:
        from ganeti.backend import hypervisor as hv
        if not self.running:
            raise hv.HypervisorError("Instance %s is not running: nothing to hotplug into" % instance.name)

    def hotplug_device(self, instance: Any, action: str, dev_type: str, device: dict[str, Any],
                       path: str | None) -> None:
        self.asked.append((instance.name, action, dev_type, device.get("mac") or device.get("uuid"), path))


def procs(root: Any, hyper: Any = None) -> HotplugProcedures:
    root.ensure_dirs()
    getter = (lambda name, paths, reactor: hyper) if hyper is not None else None
    return HotplugProcedures(InstanceProcedures(root, Clock(), get_hypervisor=getter))


def test_fake_hypervisor_has_no_hotplug(root, cfg):  # noqa: F811
    inst, records = make_instance(cfg)
    node = procs(root)
    refused(node.hotplug_supported(encoded(cfg, inst, records)), "Hotplug is not supported by hypervisor fake")
    refused(node.hotplug_device(encoded(cfg, inst, records), "hotadd", "nic", inst.nics[0].to_dict(), None, 0),
            "Hotplug is not supported by hypervisor fake")


def test_requests_reach_the_hypervisor(root, cfg):  # noqa: F811
    inst, records = make_instance(cfg)
    hyper = Recorder()
    node = procs(root, hyper)
    data = encoded(cfg, inst, records)
    assert run(node.hotplug_supported(data)) is None
    hyper.running = False
    refused(node.hotplug_supported(data), "Instance %s is not running" % inst.name)
    run(node.hotplug_device(data, "hotadd", "nic", inst.nics[0].to_dict(), None, 0))
    path = node_path(root.root, records[0].logical_id[1])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.truncate(1024)
    run(node.hotplug_device(data, "hotremove", "disk", records[0].to_dict(), None, 0))
    assert hyper.asked == [(inst.name, "hotadd", "nic", "aa:00:00:11:22:33", None),
                           (inst.name, "hotremove", "disk", records[0].uuid, path)]


def test_bad_requests(root, cfg):  # noqa: F811
    inst, records = make_instance(cfg)
    hyper = Recorder()
    node = procs(root, hyper)
    data = encoded(cfg, inst, records)
    refused(node.hotplug_device(data, "plug", "disk", records[0].to_dict(), None, 0), "Unknown hotplug action")
    refused(node.hotplug_device(data, "hotadd", "cdrom", {}, None, 0), "Unknown hotplug device type")
    refused(node.hotplug_device(data, "hotadd", "disk", "disk0", None, 0), "must be a dict")
    refused(node.hotplug_device(data, "hotadd", "disk", {"dev_type": "file", "logical_id": ["loop", "rel"]}, None,
                                0), "logical_id")
    assert hyper.asked == []
