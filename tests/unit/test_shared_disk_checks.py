"""Pure pieces of issue 25's shared-storage work: the rbd/ext/blockdev disks
C{gnt-cluster verify} asks the primaries about and how it reads their
answers; the storage units C{node_info} is asked for (the rbd pool too) and
the template whose figures a move's allocator input carries."""

from __future__ import annotations

import attrs

from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib import verify_instances as vi
from ganeti.cmdlib.instance_migration import disk_template_of
from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import ConfigData, Disk, Instance

MIB = 1024 * 1024


def config() -> ConfigData:
    cfg = grow(initial_config("cluster.example.test", "node1.example.test", "192.0.2.1"), nodes=1)
    node1, node2 = sorted(cfg.nodes, key=lambda u: cfg.nodes[u].name or "")
    disks = {
        "d-rbd": Disk(uuid="d-rbd", dev_type="rbd", size=1024, logical_id=["rbd", "u1.rbd.disk0"],
                      params={"pool": "pool1", "access": "userspace"}, iv_name="disk/0"),
        "d-ext": Disk(uuid="d-ext", dev_type="ext", size=512, logical_id=["loopback", "u2.ext.disk0"],
                      params={"provider": "loopback"}, iv_name="disk/0"),
        "d-blk": Disk(uuid="d-blk", dev_type="blockdev", size=64, logical_id=["manual", "/dev/loop7"]),
        "d-file": Disk(uuid="d-file", dev_type="file", size=8, logical_id=["loop", "/srv/f/disk0"]),
    }
    insts = {}
    for name, template, disk, node in (("a", "rbd", "d-rbd", node1), ("b", "ext", "d-ext", node1),
                                       ("c", "blockdev", "d-blk", node2), ("d", "file", "d-file", node1)):
        insts[name] = Instance(name=name + ".test", uuid=name, primary_node=node, disk_template=template,
                               disks=[disk], hypervisor="fake", os="noop")
    cluster = attrs.evolve(cfg.cluster, diskparams={"rbd": {"pool": "pool9"}})
    return attrs.evolve(cfg, instances=insts, disks=disks, cluster=cluster)


def test_remote_disks_are_asked_of_their_online_primaries_only() -> None:
    cfg = config()
    node1, node2 = sorted(cfg.nodes.values(), key=lambda n: n.name or "")
    wanted = vi.remote_disk_checks(cfg, cfg.instances.values(), [node1, node2])
    assert {u: [(e.instance, e.label, e.disk.uuid) for e in entries] for u, entries in wanted.items()} == {
        node1.uuid: [("a.test", "disk/0", "d-rbd"), ("b.test", "disk/0", "d-ext")],
        node2.uuid: [("c.test", "disk/0", "d-blk")]}
    assert list(vi.remote_disk_checks(cfg, cfg.instances.values(), [node1])) == [node1.uuid]
    assert vi.remote_disk_checks(cfg, cfg.instances.values(), [attrs.evolve(node2, vm_capable=False)]) == {}


def test_missing_and_wrongly_sized_disks_are_instance_errors() -> None:
    cfg = config()
    node1 = min(cfg.nodes.values(), key=lambda n: n.name or "")
    entries = vi.remote_disk_checks(cfg, cfg.instances.values(), [node1])[node1.uuid]
    assert vi.remote_disk_problems(cfg, node1, entries, [[1024 * MIB, None], [512 * MIB, None]], None) == []
    problems = vi.remote_disk_problems(cfg, node1, entries, [None, [256 * MIB, None]], None)
    assert [(p.kind, p.code, p.item) for p in problems] == [
        ("instance", vi.CV_EINSTANCEMISSINGDISK, "a.test"), ("instance", vi.CV_EINSTANCEFAULTYDISK, "b.test")]
    assert "disk/0 (rbd image pool1/u1.rbd.disk0) missing or unreachable on node" in problems[0].message
    assert "ext volume u2.ext.disk0 (provider loopback)" in problems[1].message
    assert "256 MiB, the configuration says 512 MiB" in problems[1].message
    (failed,) = vi.remote_disk_problems(cfg, node1, entries, None, "connection refused")
    assert (failed.kind, failed.item) == ("node", node1.name) and "connection refused" in failed.message


def test_node_info_units_include_the_rbd_pool() -> None:
    cfg = attrs.evolve(config().cluster, file_storage_dir="/srv/f", shared_file_storage_dir="/srv/s")
    cfg = attrs.evolve(config(), cluster=cfg)
    assert iu.storage_units(cfg, ["file", "rbd", "ext", "rbd", "sharedfile", "blockdev"]) == [
        ["file", "/srv/f", []], ["rados", "pool9", []], ["sharedfile", "/srv/s", []]]
    resources = iu.parse_node_info(["boot", [{"type": "rados", "name": "pool9", "storage_free": 700,
                                              "storage_size": 900}, {"type": "file", "storage_free": 5,
                                                                     "storage_size": 9}], [{}]])
    assert resources.storage_of("rbd") == (700, 900) and resources.storage_of("file") == (5, 9)
    assert resources.storage_of("ext") == (None, None)


def test_a_moves_figures_are_of_its_instances_template() -> None:
    cfg = config()
    assert disk_template_of(cfg, [cfg.instances["a"]]) == "rbd"
    cfg = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, enabled_disk_templates=["ext", "rbd"]))
    assert disk_template_of(cfg, [cfg.instances["a"], cfg.instances["b"]]) == "ext"


def test_a_template_the_policy_refuses_gets_a_hint() -> None:
    from ganeti.cmdlib import allocator

    cfg = config()
    policy = dict(cfg.cluster.ipolicy or {}, **{"disk-templates": ["file", "diskless"]})
    cfg = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, ipolicy=policy))
    hint = allocator.policy_hint(cfg, "rbd")
    assert hint is not None and "disk template rbd" in hint and "(file, diskless)" in hint
    assert "gnt-group modify --ipolicy-disk-templates" in hint
    assert allocator.policy_hint(cfg, "file") is None and allocator.policy_hint(cfg, None) is None
