"""Consistency checks of a whole configuration.

L{verify} lists every problem it finds, one sentence each, naming the
object concerned; WConfD refuses to store a configuration with problems
(L{verify_or_raise}).  Each check looks every object up once in a dict or
set, so the whole run is linear in the size of the configuration.

The checks: every map key is its object's uuid; no uuid is used twice,
also across kinds; nodes, instances, node groups and networks have
unique, non-empty names; every reference (the cluster's master node, a
node's group, an instance's primary node, disks and NIC networks, a disk's
nodes, a candidate certificate's node) names an existing object; no disk
belongs to two instances; serial numbers are positive integers; the
version is ours; the master node is a master candidate.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ganeti import CONFIG_VERSION, errors
from ganeti.objects import ConfigData, Disk

#: Kinds of top-level objects: (label, attribute of ConfigData, has a name).
_KINDS: tuple[tuple[str, str, bool], ...] = (
    ("node", "nodes", True),
    ("node group", "nodegroups", True),
    ("instance", "instances", True),
    ("network", "networks", True),
    ("disk", "disks", False),
)

_Report = Callable[[str], None]


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _label(kind: str, key: Any, obj: Any) -> str:
    """How a message names an object: by name when it has one, else by key."""
    name = getattr(obj, "name", None)
    if _is_name(name):
        return "%s '%s'" % (kind, name)
    return "%s with uuid '%s'" % (kind, key)


def _check_serial(label: str, value: Any, report: _Report) -> None:
    if value is None:
        report("%s has no serial_no" % label)
    elif type(value) is not int or value < 1:
        report("%s has an invalid serial_no %r (must be a positive integer)" % (label, value))


def _known(ref: Any, targets: Mapping[str, Any]) -> bool:
    return isinstance(ref, str) and ref in targets


class _UuidRegistry:
    """Reports a uuid claimed by two objects, whatever their kinds."""

    def __init__(self, report: _Report) -> None:
        self._owners: dict[str, tuple[Any, str]] = {}
        self._report = report

    def claim(self, uuid: Any, owner: Any, label: str) -> None:
        """Record that C{owner} (any hashable identity) uses C{uuid}."""
        if not isinstance(uuid, str) or not uuid:
            return
        first = self._owners.setdefault(uuid, (owner, label))
        if first[0] != owner:
            self._report("uuid '%s' is used by both %s and %s" % (uuid, first[1], label))


def verify(cfg: ConfigData) -> list[str]:
    """Every consistency problem of C{cfg}, as one sentence each.

    @return: the problems, empty when the configuration is sound
    """
    problems: list[str] = []
    report = problems.append
    uuids = _UuidRegistry(report)

    if cfg.version != CONFIG_VERSION:
        report("configuration version is %r, expected %d" % (cfg.version, CONFIG_VERSION))
    _check_serial("the configuration", cfg.serial_no, report)

    cluster = cfg.cluster
    _check_serial("the cluster", cluster.serial_no, report)
    if not _is_name(cluster.cluster_name):
        report("the cluster has no cluster_name")
    uuids.claim(cluster.uuid, ("cluster",), "the cluster")

    labels: dict[str, dict[str, str]] = {}
    for kind, attr, named in _KINDS:
        labels[attr] = _check_objects(kind, getattr(cfg, attr), named, uuids, report)
    _check_filters(cfg.filters, uuids, report)

    _check_master(cfg, labels["nodes"], report)
    _check_nodes(cfg, labels["nodes"], report)
    _check_instances(cfg, labels["instances"], uuids, report)
    _check_disks(cfg, labels["disks"], report)
    for node_uuid in cluster.candidate_certs or {}:
        if not _known(node_uuid, cfg.nodes):
            report("the cluster's candidate_certs has an entry for unknown node '%s'" % (node_uuid,))
    return problems


def verify_or_raise(cfg: ConfigData) -> None:
    """Raise L{errors.ConfigVerifyError} listing the problems of C{cfg}, if any."""
    problems = verify(cfg)
    if problems:
        raise errors.ConfigVerifyError("Configuration verification failed", problems)


def _check_objects(
    kind: str, objects: Mapping[str, Any], named: bool, uuids: _UuidRegistry, report: _Report
) -> dict[str, str]:
    """Keys, uuids, names and serials of one kind; returns key -> label."""
    labels: dict[str, str] = {}
    by_name: dict[str, list[str]] = {}
    for key, obj in objects.items():
        label = labels[key] = _label(kind, key, obj)
        if obj.uuid is None:
            report("%s is stored under key '%s' but has no uuid" % (label, key))
        elif obj.uuid != key:
            report("%s is stored under key '%s' but its uuid is '%s'" % (label, key, obj.uuid))
        uuids.claim(key, (kind, key), label)
        _check_serial(label, obj.serial_no, report)
        if named:
            if _is_name(obj.name):
                by_name.setdefault(obj.name, []).append(key)
            else:
                report("%s has no name" % label)
    plural = kind + "s"
    for name, keys in by_name.items():
        if len(keys) > 1:
            report("%d %s are named '%s' (uuids %s)" % (len(keys), plural, name, ", ".join(sorted(keys))))
    return labels


def _check_filters(filters: Mapping[str, Any], uuids: _UuidRegistry, report: _Report) -> None:
    for key, rule in filters.items():
        label = "filter rule with uuid '%s'" % (key,)
        if not isinstance(rule, dict):
            report("%s is not a JSON object" % label)
            continue
        if rule.get("uuid") != key:
            report("%s is stored under key '%s' but its uuid is %r" % (label, key, rule.get("uuid")))
        uuids.claim(key, ("filter", key), label)


def _check_master(cfg: ConfigData, node_labels: dict[str, str], report: _Report) -> None:
    master = cfg.cluster.master_node
    if master is None or master == "":
        report("the cluster has no master_node")
    elif not _known(master, cfg.nodes):
        report("the cluster's master_node '%s' is not a known node" % (master,))
    elif not cfg.nodes[master].master_candidate:
        report("master %s is not a master candidate" % node_labels[master])


def _check_nodes(cfg: ConfigData, labels: dict[str, str], report: _Report) -> None:
    for key, node in cfg.nodes.items():
        if node.group is None:
            report("%s has no node group" % labels[key])
        elif not _known(node.group, cfg.nodegroups):
            report("%s belongs to unknown node group '%s'" % (labels[key], node.group))


def _check_instances(
    cfg: ConfigData, labels: dict[str, str], uuids: _UuidRegistry, report: _Report
) -> None:
    disk_owner: dict[str, tuple[str, str]] = {}  # disk uuid -> (instance key, label)
    for key, inst in cfg.instances.items():
        label = labels[key]
        if inst.primary_node is None:
            report("%s has no primary node" % label)
        elif not _known(inst.primary_node, cfg.nodes):
            report("%s has unknown primary node '%s'" % (label, inst.primary_node))
        _check_instance_disks(cfg, key, label, inst.disks, disk_owner, report)
        for index, nic in enumerate(inst.nics):
            nic_label = "NIC %d of %s" % (index, label)
            uuids.claim(nic.uuid, ("nic", key, index), nic_label)
            if nic.network is not None and not _known(nic.network, cfg.networks):
                report("%s uses unknown network '%s'" % (nic_label, nic.network))


def _check_instance_disks(
    cfg: ConfigData,
    key: str,
    label: str,
    disks: Any,
    disk_owner: dict[str, tuple[str, str]],
    report: _Report,
) -> None:
    if not isinstance(disks, list):
        report("%s has a malformed disks list %r" % (label, disks))
        return
    seen: set[str] = set()
    for disk in disks:
        if not _known(disk, cfg.disks):
            report("%s lists unknown disk %r" % (label, disk))
            continue
        if disk in seen:
            report("%s lists disk '%s' more than once" % (label, disk))
            continue
        seen.add(disk)
        owner_key, owner_label = disk_owner.setdefault(disk, (key, label))
        if owner_key != key:
            report("disk '%s' is used by both %s and %s" % (disk, owner_label, label))


def _check_disks(cfg: ConfigData, labels: dict[str, str], report: _Report) -> None:
    for key, disk in cfg.disks.items():
        _check_disk_nodes(cfg, labels[key], disk, report)


def _check_disk_nodes(cfg: ConfigData, label: str, disk: Disk, report: _Report) -> None:
    nodes: Iterable[Any] = disk.nodes
    if not isinstance(nodes, list):
        report("%s has a malformed nodes list %r" % (label, nodes))
        nodes = ()
    for node in nodes:
        if not _known(node, cfg.nodes):
            report("%s is on unknown node %r" % (label, node))
    for index, child in enumerate(disk.children or ()):
        _check_disk_nodes(cfg, "child %d of %s" % (index, label), child, report)
