"""Helpers shared by the query resources: config indexes, lookups, common fields.

Pure: no Twisted, no I/O.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from ganeti.objects import ConfigData, Disk, Instance, Node, NodeGroup, _Named, find_by_key, nice_sort_key
from ganeti.query.fields import (
    QFT_NUMBER,
    QFT_OTHER,
    QFT_TEXT,
    QFT_TIMESTAMP,
    FieldDef,
    NoData,
    QueryContext,
    Unavail,
)

#: Ganeti's C{PP_DEFAULT}: key of the cluster-wide beparams/nicparams
PP_DEFAULT = "default"


@attrs.frozen
class ConfigIndex:
    """Relations of a config computed once per query.

    C{inst_disks[uuid]} is C{None} when an instance refers to a disk the
    config lacks; C{inst_nodes[uuid]} lists the primary node first, then
    the other nodes its DRBD disks live on.
    """

    inst_disks: Mapping[str, list[Disk] | None]
    inst_nodes: Mapping[str, list[str]]
    node_primaries: Mapping[str, list[Instance]]
    node_secondaries: Mapping[str, list[Instance]]
    group_nodes: Mapping[str, list[Node]]


def _disk_nodes(disk: Disk, out: list[str]) -> None:
    if disk.dev_type == "drbd" and isinstance(disk.logical_id, (list, tuple)) and len(disk.logical_id) >= 2:
        for node in disk.logical_id[:2]:
            if isinstance(node, str) and node not in out:
                out.append(node)
    for child in disk.children:
        _disk_nodes(child, out)


def build_index(config: ConfigData) -> ConfigIndex:
    """Compute the L{ConfigIndex} of C{config}."""
    inst_disks: dict[str, list[Disk] | None] = {}
    inst_nodes: dict[str, list[str]] = {}
    primaries: dict[str, list[Instance]] = {}
    secondaries: dict[str, list[Instance]] = {}
    for key, inst in config.instances.items():
        disks: list[Disk] | None = []
        for disk_uuid in inst.disks:
            disk = config.disks.get(disk_uuid)
            if disk is None:
                disks = None
                break
            disks.append(disk)  # type: ignore[union-attr]
        inst_disks[key] = disks
        nodes = [inst.primary_node] if inst.primary_node else []
        for disk in disks or []:
            _disk_nodes(disk, nodes)
        inst_nodes[key] = nodes
        if inst.primary_node:
            primaries.setdefault(inst.primary_node, []).append(inst)
        for node in nodes[1:]:
            secondaries.setdefault(node, []).append(inst)
    group_nodes: dict[str, list[Node]] = {}
    for member in config.nodes.values():
        if member.group:
            group_nodes.setdefault(member.group, []).append(member)
    return ConfigIndex(inst_disks, inst_nodes, primaries, secondaries, group_nodes)


def index(ctx: QueryContext) -> ConfigIndex:
    """The L{ConfigIndex} of C{ctx.config}, computed once per context."""
    return ctx.memo("config-index", _build_index)


def _build_index(ctx: QueryContext) -> ConfigIndex:
    return build_index(ctx.config)


def by_name(items: Iterable[Any]) -> list[Any]:
    """C{items} nice-sorted by their C{name} (Ganeti's listing order)."""
    return sorted(items, key=lambda item: nice_sort_key(item.name or ""))


def find(items: Mapping[str, _Named], name: Any) -> _Named | None:
    """The item called C{name}, with UUID C{name}, or whose short name is C{name}.

    A short name matches C{"<name>.<domain>"} and must be unique.
    """
    if not isinstance(name, str) or not name:
        return None
    found = find_by_key(items, name)
    if found is not None:
        return found
    prefix = name.lower() + "."
    partial = [item for item in items.values() if (item.name or "").lower().startswith(prefix)]
    return partial[0] if len(partial) == 1 else None


def find_in(ctx: QueryContext, kind: str, items: Mapping[str, _Named], name: Any) -> _Named | None:
    """L{find} of C{items} (the config's C{kind}: C{"instances"}, ...), its
    exact-name lookup through an index built once per context: a query
    naming 1,000 of 10,000 instances makes 1,000 dict lookups, not 1,000
    scans of the config."""
    if not isinstance(name, str) or not name:
        return None
    found = items.get(name)
    if found is not None:
        return found
    by_name = ctx.memo("by-name:" + kind, lambda _ctx: _name_index(items))
    found = by_name.get(name)
    if found is not None:
        return found
    return find(items, name)


def _name_index(items: Mapping[str, _Named]) -> dict[str, _Named]:
    """Name -> item; the first of the same name, as L{find_by_key} finds it."""
    index: dict[str, _Named] = {}
    for item in items.values():
        if item.name is not None:
            index.setdefault(item.name, item)
    return index


def fill(parent: Mapping[str, Any] | None, child: Mapping[str, Any] | None) -> dict[str, Any]:
    """C{parent} with the keys of C{child} overriding."""
    out = dict(parent or {})
    out.update(child or {})
    return out


def node_group(config: ConfigData, node: Node) -> NodeGroup | None:
    return config.nodegroups.get(node.group or "")


def node_ndparams(config: ConfigData, node: Node) -> dict[str, Any]:
    """Cluster ndparams, then the node's group's, then the node's own.

    @raise NoData: the node's group is not in the config.
    """
    group = node_group(config, node)
    if group is None:
        raise NoData()
    return fill(fill(config.cluster.ndparams, group.ndparams), node.ndparams)


def group_ndparams(config: ConfigData, group: NodeGroup) -> dict[str, Any]:
    return fill(config.cluster.ndparams, group.ndparams)


def present(value: Any) -> Any:
    """C{value}, or L{Unavail} when it is C{None}."""
    if value is None:
        raise Unavail()
    return value


def known(value: Any) -> Any:
    """C{value}, or L{NoData} when it is C{None}."""
    if value is None:
        raise NoData()
    return value


def ordinal(number: int) -> str:
    """C{1st}, C{2nd}, C{3rd}, C{4th}, ..., C{11th}, ..., C{21st}."""
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return "%d%s" % (number, suffix)


# --- fields every config object has ----------------------------------------------


def timestamp_fields() -> list[FieldDef]:
    return [
        FieldDef("ctime", "CTime", QFT_TIMESTAMP, "Creation timestamp", lambda item, ctx: present(item.ctime)),
        FieldDef("mtime", "MTime", QFT_TIMESTAMP, "Modification timestamp", lambda item, ctx: present(item.mtime)),
    ]


def uuid_fields(kind: str) -> list[FieldDef]:
    return [FieldDef("uuid", "UUID", QFT_TEXT, "%s UUID" % kind, lambda item, ctx: present(item.uuid))]


def serial_fields(kind: str) -> list[FieldDef]:
    return [
        FieldDef(
            "serial_no",
            "SerialNo",
            QFT_NUMBER,
            "%s object serial number, incremented on each modification" % kind,
            lambda item, ctx: present(item.serial_no),
        )
    ]


def tags_fields() -> list[FieldDef]:
    return [FieldDef("tags", "Tags", QFT_OTHER, "Tags", lambda item, ctx: list(item.tags or []))]


def common_fields(kind: str) -> list[FieldDef]:
    """ctime, mtime, uuid, serial_no and tags."""
    return timestamp_fields() + uuid_fields(kind) + serial_fields(kind) + tags_fields()


# --- node parameters (ndp/<name>) ------------------------------------------------

#: node parameter -> (query kind, title or None for "ndp/<name>")
ND_PARAMS: dict[str, tuple[str, str | None]] = {
    "exclusive_storage": ("bool", "ExclusiveStorage"),
    "oob_program": (QFT_OTHER, "OutOfBandProgram"),
    "ovs": ("bool", "OpenvSwitch"),
    "ovs_link": (QFT_OTHER, "OpenvSwitchLink"),
    "ovs_name": (QFT_OTHER, "OpenvSwitchName"),
    "spindle_count": (QFT_NUMBER, "SpindleCount"),
    "ssh_port": (QFT_NUMBER, None),
    "cpu_speed": ("float", None),
}


def param_field(prefix: str, group_name: str, param: str, kind: str, title: str | None, getter: Any) -> FieldDef:
    """A C{<prefix>/<param>} field, as Ganeti builds them for nd/be/hv parameters."""
    full = "%s/%s" % (prefix, param)
    doc = 'The "%s" %s parameter' % (param, group_name)
    return FieldDef(full, title or full, kind, doc, getter)


def nd_param_fields(merged: Any) -> list[FieldDef]:
    """C{ndp/<name>} fields; C{merged(item, ctx)} gives the filled ndparams."""

    def make(param: str) -> Any:
        def get(item: Any, ctx: QueryContext) -> Any:
            params = merged(item, ctx)
            if param not in params:
                raise NoData()
            return params[param]

        return get

    return [param_field("ndp", "node", name, kind, title, make(name)) for name, (kind, title) in ND_PARAMS.items()]
