"""The master's side of the rbd template: disk records, parameter layers and refusals."""

from __future__ import annotations

import attrs
import pytest

from ganeti import errors, opcodes
from ganeti.cmdlib import rbd_disks
from ganeti.config.bootstrap import initial_config


def config(cluster_rbd=None, group_rbd=None):
    cfg = initial_config("cluster.test", "node1.test", "127.0.0.1", enabled_disk_templates=["rbd"])
    cfg = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, diskparams={"rbd": dict(cluster_rbd or {})}))
    group = next(iter(cfg.nodegroups))
    if group_rbd:
        cfg = attrs.evolve(cfg, nodegroups={group: attrs.evolve(cfg.nodegroups[group],
                                                                diskparams={"rbd": group_rbd})})
    return cfg, group


def test_new_disks_names_ids_and_layers():
    cfg, group = config({"pool": "cpool", "access": "userspace"})
    disks = rbd_disks.new_disks(cfg, group, "fake", [{"size": 1024, "mode": "rw"}, {"size": 8, "name": "d1"}])
    assert [d.logical_id[0] for d in disks] == ["rbd", "rbd"]
    assert [d.logical_id[1].split(".", 1)[1] for d in disks] == ["rbd.disk0", "rbd.disk1"]
    assert disks[0].logical_id[1] != disks[1].logical_id[1]
    assert all(d.nodes == [] and d.dev_type == "rbd" for d in disks)
    assert [d.params for d in disks] == [{"pool": "cpool", "access": "userspace"}] * 2
    assert [(d.iv_name, d.size, d.name) for d in disks] == [("disk/0", 1024, None), ("disk/1", 8, "d1")]


def test_defaults_group_and_own_access():
    cfg, group = config()
    (disk,) = rbd_disks.new_disks(cfg, group, "kvm", [{"size": 1}])
    assert disk.params == {"pool": "rbd", "access": "kernelspace"}  # Ganeti's defaults
    cfg, group = config({"pool": "cpool"}, {"pool": "gpool", "access": "userspace"})
    (disk,) = rbd_disks.new_disks(cfg, group, "kvm", [{"size": 1, "access": "kernelspace"}])
    assert disk.params == {"pool": "gpool", "access": "kernelspace"}


def test_refusals():
    cfg, group = config({"access": "userspace"})
    for spec, hv, text in [({"size": 1, "access": "sideways"}, "kvm", "invalid access mode"),
                           ({"size": 1}, "xen-pvm", "not supported with hypervisor xen-pvm")]:
        with pytest.raises(errors.OpPrereqError, match=text):
            rbd_disks.new_disks(cfg, group, hv, [spec])
    cfg, group = config({"pool": "bad/pool"})
    with pytest.raises(errors.OpPrereqError, match="Invalid rbd pool"):
        rbd_disks.new_disks(cfg, group, "kvm", [{"size": 1}])
    for bad in ({"access": "sideways"}, {"pool": "a:b"}):
        with pytest.raises(errors.OpPrereqError):
            rbd_disks.check_cluster_params(bad)
    rbd_disks.check_cluster_params({"pool": "default", "access": "userspace"})


def test_cluster_set_params_takes_diskparams():
    op = opcodes.validate({"OP_ID": "OP_CLUSTER_SET_PARAMS", "diskparams": {"rbd": {"pool": "p"}}})
    assert op["diskparams"] == {"rbd": {"pool": "p"}}
    assert "diskparams" not in opcodes.validate({"OP_ID": "OP_CLUSTER_SET_PARAMS", "diskparams": {}})


def test_rpc_fills_rbd_disk_params_as_ganeti():
    """A disk Ganeti made (only its access stored) travels with the cluster's and group's params."""
    from ganeti.objects import Disk, Instance
    from ganeti.rpc.instances import disk_dict, encode_instance

    cfg, group = config({"pool": "cpool", "access": "kernelspace"}, {"pool": "gpool"})
    node = next(iter(cfg.nodes))
    disk = Disk(uuid="d1", dev_type="rbd", logical_id=["rbd", "x.rbd.disk0"], size=8, params={"access": "userspace"})
    inst = Instance(name="i1", uuid="i1", primary_node=node, hypervisor="kvm", disks=["d1"], disk_template="rbd")
    assert disk_dict(cfg, disk, inst)["params"] == {"pool": "gpool", "access": "userspace"}
    assert disk_dict(cfg, disk)["params"] == {"pool": "cpool", "access": "userspace"}
    assert encode_instance(cfg, inst, disks=[disk])["disks_info"][0]["params"] == {"pool": "gpool",
                                                                                   "access": "userspace"}
    plain = Disk(uuid="d2", dev_type="file", logical_id=["loop", "/x"], size=8, params={})
    assert disk_dict(cfg, plain, inst) == plain.to_dict()


def test_cluster_init_disk_parameters():
    """gnt-cluster init -D: merged per template, checked before anything is written."""
    from ganeti.client.cluster_init import _diskparams
    from ganeti.client.cluster_opts import parse_hvparams

    given = [parse_hvparams("rbd:pool=p1"), parse_hvparams("rbd:access=userspace")]
    assert _diskparams(given) == {"rbd": {"pool": "p1", "access": "userspace"}}
    assert _diskparams(None) == {}
    for bad, text in (("rbd:access=sideways", "Invalid rbd access mode"), ("rbd:colour=red", "colour"),
                      ("nosuch:x=1", "Invalid disk template")):
        with pytest.raises(errors.OpPrereqError, match=text):
            _diskparams([parse_hvparams(bad)])
