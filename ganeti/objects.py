"""The configuration model, in the layout of Ganeti's config.data.

Each record is a frozen attrs class.  C{from_dict} reads Ganeti's JSON
layout and keeps keys it does not know in C{extra}, so that a config written
by a newer Ganeti survives a load and save here; C{to_dict} writes the
layout back, leaving out fields whose value is C{None} (as Ganeti does), so
an absent key stays absent.  Collections default to empty.

Change a record with C{attrs.evolve}; never mutate the dicts it holds in
place, because WConfD shares records between snapshots.
"""

from __future__ import annotations

import re
import time
import uuid as uuidlib
from typing import Any, Callable, ClassVar, Iterable, Mapping, Protocol, TypeVar

import attrs

from ganeti import CONFIG_VERSION, serializer

T = TypeVar("T", bound="ConfigObject")


class _HasName(Protocol):
    @property
    def name(self) -> str | None: ...


_Named = TypeVar("_Named", bound=_HasName)


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def now() -> float:
    return time.time()


def _from_list(cls: type[ConfigObject]) -> Any:
    return lambda items: None if items is None else [cls.from_dict(i) for i in items]


def _to_list(items: Any) -> Any:
    return None if items is None else [i.to_dict() for i in items]


class ConfigObject:
    """Mixin: Ganeti-layout dict conversion with unknown keys kept."""

    #: field name -> (decode, encode) for fields holding records
    _nested: ClassVar[dict[str, tuple[Any, Any]]] = {}
    #: the field names, set on each class by L{_fields} (read from its own C{__dict__})
    _known_cache: ClassVar[tuple[str, ...]]

    extra: dict[str, Any]

    @classmethod
    def _fields(cls) -> tuple[str, ...]:
        known = cls.__dict__.get("_known_cache")
        if known is None:
            known = tuple(f.name for f in attrs.fields(cls) if f.name != "extra")  # type: ignore[arg-type]
            cls._known_cache = known
        return known

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        if not isinstance(data, dict):
            raise TypeError("%s must be a JSON object, not %s" % (cls.__name__, type(data).__name__))
        known = cls._fields()
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key in known:
                decode = cls._nested.get(key)
                kwargs[key] = decode[0](value) if decode else value
            else:
                extra[key] = value
        make: Callable[..., T] = cls  # the attrs subclasses take their fields by name
        return make(extra=extra, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        nested = self._nested
        for name in self._fields():
            value = getattr(self, name)
            if value is None:
                continue
            encode = nested.get(name)
            out[name] = encode[1](value) if encode else value
        if self.extra:
            for key, value in self.extra.items():
                out.setdefault(key, value)
        return out

    def to_json(self) -> bytes:
        return serializer.dumps(self.to_dict())

    def touched(self: T, when: float | None = None) -> T:
        """A copy with C{serial_no} bumped and C{mtime} set (for WConfD)."""
        serial = getattr(self, "serial_no", None) or 0
        return attrs.evolve(self, serial_no=serial + 1, mtime=now() if when is None else when)  # type: ignore[misc]


_dict: dict[Any, Any] = attrs.Factory(dict)
_list: list[Any] = attrs.Factory(list)


@attrs.frozen(kw_only=True)
class NIC(ConfigObject):
    mac: str | None = None
    ip: str | None = None
    network: str | None = None
    nicparams: dict[str, Any] = _dict
    netinfo: Any = None
    name: str | None = None
    pci: int | None = None
    hvinfo: Any = None
    uuid: str | None = None
    extra: dict[str, Any] = _dict


@attrs.frozen(kw_only=True)
class Disk(ConfigObject):
    logical_id: Any = None
    physical_id: Any = None
    dev_type: str | None = None
    children: list[Disk] = _list
    nodes: list[str] = _list
    iv_name: str | None = None
    size: int | None = None
    mode: str | None = None
    params: dict[str, Any] = _dict
    spindles: int | None = None
    name: str | None = None
    pci: int | None = None
    hvinfo: Any = None
    forthcoming: bool | None = None
    uuid: str | None = None
    serial_no: int | None = None
    ctime: float | None = None
    mtime: float | None = None
    extra: dict[str, Any] = _dict


Disk._nested = {"children": (_from_list(Disk), _to_list)}


@attrs.frozen(kw_only=True)
class Instance(ConfigObject):
    name: str | None = None
    primary_node: str | None = None
    os: str | None = None
    hypervisor: str | None = None
    hvparams: dict[str, Any] = _dict
    beparams: dict[str, Any] = _dict
    osparams: dict[str, Any] = _dict
    osparams_private: dict[str, Any] = _dict
    admin_state: str | None = None
    admin_state_source: str | None = None
    nics: list[NIC] = _list
    disks: list[str] = _list
    disk_template: str | None = None
    disks_active: bool | None = None
    network_port: int | None = None
    forthcoming: bool | None = None
    ctime: float | None = None
    mtime: float | None = None
    uuid: str | None = None
    serial_no: int | None = None
    tags: list[str] = _list
    extra: dict[str, Any] = _dict

    _nested = {"nics": (_from_list(NIC), _to_list)}


@attrs.frozen(kw_only=True)
class Node(ConfigObject):
    name: str | None = None
    primary_ip: str | None = None
    secondary_ip: str | None = None
    master_candidate: bool | None = None
    offline: bool | None = None
    drained: bool | None = None
    group: str | None = None
    master_capable: bool | None = None
    vm_capable: bool | None = None
    ndparams: dict[str, Any] = _dict
    powered: bool | None = None
    hv_state: Any = None
    hv_state_static: Any = None
    disk_state: Any = None
    disk_state_static: Any = None
    ctime: float | None = None
    mtime: float | None = None
    uuid: str | None = None
    serial_no: int | None = None
    tags: list[str] = _list
    extra: dict[str, Any] = _dict


@attrs.frozen(kw_only=True)
class NodeGroup(ConfigObject):
    name: str | None = None
    members: list[str] = _list
    ndparams: dict[str, Any] = _dict
    alloc_policy: str | None = None
    ipolicy: dict[str, Any] = _dict
    diskparams: dict[str, Any] = _dict
    networks: dict[str, Any] = _dict
    hv_state_static: Any = None
    disk_state_static: Any = None
    ctime: float | None = None
    mtime: float | None = None
    uuid: str | None = None
    serial_no: int | None = None
    tags: list[str] = _list
    extra: dict[str, Any] = _dict


@attrs.frozen(kw_only=True)
class Network(ConfigObject):
    name: str | None = None
    network: str | None = None
    gateway: str | None = None
    network6: str | None = None
    gateway6: str | None = None
    mac_prefix: str | None = None
    reservations: str | None = None
    ext_reservations: str | None = None
    ctime: float | None = None
    mtime: float | None = None
    uuid: str | None = None
    serial_no: int | None = None
    tags: list[str] = _list
    extra: dict[str, Any] = _dict


@attrs.frozen(kw_only=True)
class Cluster(ConfigObject):
    rsahostkeypub: str | None = None
    dsahostkeypub: str | None = None
    highest_used_port: int | None = None
    tcpudp_port_pool: list[int] = _list
    mac_prefix: str | None = None
    volume_group_name: str | None = None
    reserved_lvs: list[str] = _list
    drbd_usermode_helper: str | None = None
    master_node: str | None = None
    master_ip: str | None = None
    master_netdev: str | None = None
    master_netmask: int | None = None
    use_external_mip_script: bool | None = None
    cluster_name: str | None = None
    file_storage_dir: str | None = None
    shared_file_storage_dir: str | None = None
    gluster_storage_dir: str | None = None
    enabled_hypervisors: list[str] = _list
    hvparams: dict[str, Any] = _dict
    os_hvp: dict[str, Any] = _dict
    beparams: dict[str, Any] = _dict
    osparams: dict[str, Any] = _dict
    osparams_private_cluster: dict[str, Any] = _dict
    nicparams: dict[str, Any] = _dict
    ndparams: dict[str, Any] = _dict
    diskparams: dict[str, Any] = _dict
    candidate_pool_size: int | None = None
    modify_etc_hosts: bool | None = None
    modify_ssh_setup: bool | None = None
    maintain_node_health: bool | None = None
    uid_pool: list[Any] = _list
    default_iallocator: str | None = None
    default_iallocator_params: dict[str, Any] = _dict
    hidden_os: list[str] = _list
    blacklisted_os: list[str] = _list
    primary_ip_family: int | None = None
    prealloc_wipe_disks: bool | None = None
    ipolicy: dict[str, Any] = _dict
    hv_state_static: Any = None
    disk_state_static: Any = None
    enabled_disk_templates: list[str] = _list
    candidate_certs: dict[str, str] = _dict
    max_running_jobs: int | None = None
    max_tracked_jobs: int | None = None
    install_image: str | None = None
    instance_communication_network: str | None = None
    zeroing_image: str | None = None
    compression_tools: list[str] | None = None
    enabled_user_shutdown: bool | None = None
    data_collectors: dict[str, Any] = _dict
    ssh_key_type: str | None = None
    ssh_key_bits: int | None = None
    default_hypervisor: str | None = None
    ctime: float | None = None
    mtime: float | None = None
    uuid: str | None = None
    serial_no: int | None = None
    tags: list[str] = _list
    extra: dict[str, Any] = _dict


#: entity kind -> (record class, key of its map in config.data)
KINDS: dict[str, tuple[type[ConfigObject], str]] = {
    "node": (Node, "nodes"),
    "nodegroup": (NodeGroup, "nodegroups"),
    "instance": (Instance, "instances"),
    "network": (Network, "networks"),
    "disk": (Disk, "disks"),
}


@attrs.frozen(kw_only=True)
class ConfigData(ConfigObject):
    """The whole of config.data."""

    version: int = CONFIG_VERSION
    cluster: Cluster = attrs.Factory(Cluster)
    nodes: dict[str, Node] = _dict
    nodegroups: dict[str, NodeGroup] = _dict
    instances: dict[str, Instance] = _dict
    networks: dict[str, Network] = _dict
    disks: dict[str, Disk] = _dict
    filters: dict[str, Any] = _dict
    ctime: float | None = None
    mtime: float | None = None
    serial_no: int = 1
    extra: dict[str, Any] = _dict

    @classmethod
    def from_json(cls, data: bytes | str) -> ConfigData:
        return cls.from_dict(serializer.loads(data))

    def with_changes(self, records: Iterable[dict[str, Any]]) -> ConfigData:
        """This config with WConfD's change records applied, oldest first
        (L{ganeti.wconfd.store.ConfigStore.changes_since}): the config of the
        last record's serial, decoding only the last version of each entity
        that changed (the maps that changed are copied; the others, and every
        entity that did not change, are this config's own).

        @raise ValueError: a record that is not one
        """
        fields: dict[str, Any] = {}
        maps: dict[str, Any] = {}
        undecoded: dict[tuple[str, str], type[ConfigObject]] = {}  # entities set from a record, still as dicts
        cluster: Any = None
        try:
            for record in records:
                changes, serial, when = record["c"], record["s"], record["t"]
                for kind, uuid, data in changes:
                    if kind == "cluster":
                        cluster = data
                        continue
                    cls, key = (None, "filters") if kind == "filter" else KINDS[kind]
                    items = maps.get(key)
                    if items is None:
                        items = maps[key] = dict(getattr(self, key))
                    if data is None:
                        items.pop(uuid, None)
                        undecoded.pop((key, uuid), None)
                    else:
                        items[uuid] = data  # (in place when it is there: the order of the store's map)
                        if cls is not None:
                            undecoded[(key, uuid)] = cls
                fields["serial_no"], fields["mtime"] = serial, when
            for (key, uuid), cls in undecoded.items():
                maps[key][uuid] = cls.from_dict(maps[key][uuid])
            if cluster is not None:
                fields["cluster"] = Cluster.from_dict(cluster)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError("not a config change record: %s" % (e,)) from e
        return attrs.evolve(self, **maps, **fields)

    def find_node(self, name_or_uuid: str) -> Node | None:
        return find_by_key(self.nodes, name_or_uuid)

    def find_instance(self, name_or_uuid: str) -> Instance | None:
        return find_by_key(self.instances, name_or_uuid)

    def find_group(self, name_or_uuid: str) -> NodeGroup | None:
        return find_by_key(self.nodegroups, name_or_uuid)

    def master_node_name(self) -> str | None:
        node = self.nodes.get(self.cluster.master_node or "")
        return node.name if node else None


def _from_map(cls: type[ConfigObject]) -> Any:
    def decode(items: Any) -> dict[str, Any]:
        if items is None:
            return {}
        if not isinstance(items, dict):
            raise TypeError("%s map must be a JSON object" % cls.__name__)
        return {k: cls.from_dict(v) for k, v in items.items()}

    return decode


def _to_map(items: dict[str, ConfigObject]) -> dict[str, Any]:
    return {k: v.to_dict() for k, v in items.items()}


ConfigData._nested = {
    "cluster": (Cluster.from_dict, Cluster.to_dict),
    **{key: (_from_map(record), _to_map) for record, key in KINDS.values()},
}


def find_by_key(items: Mapping[str, _Named], name_or_uuid: str) -> _Named | None:
    """The record with uuid (key) or name C{name_or_uuid}, or None."""
    found = items.get(name_or_uuid)
    if found is not None:
        return found
    for item in items.values():
        if item.name == name_or_uuid:
            return item
    return None


#: the memory (MiB) an instance runs with when its backend parameters name none
DEFAULT_MEMORY = 128


def beparams_memory(beparams: Any) -> int:
    """The memory (MiB) of an instance's filled backend parameters:
    C{maxmem}, else C{memory} (the name before Ganeti 2.6), else C{minmem}."""
    for key in ("maxmem", "memory", "minmem"):
        value = beparams.get(key)
        if value is not None:
            return int(value)
    return DEFAULT_MEMORY


def beparams_vcpus(beparams: Any) -> int:
    """The virtual CPUs of an instance's filled backend parameters (default 1)."""
    return int(beparams.get("vcpus") or 1)


#: runs of ASCII digits and runs of other characters
_RUNS = re.compile(r"[0-9]+|[^0-9]+")


def nice_sort_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders embedded numbers numerically (node2 < node10).

    The key is a tuple of C{(0, number)} for each run of digits and
    C{(1, text)} for each run of other characters, in order.
    """
    if name.isascii():  # the common case, split by the regex engine
        return tuple([(0, int(run)) if run.isdigit() else (1, run) for run in _RUNS.findall(name)])
    return _nice_sort_key_slow(name)


def _nice_sort_key_slow(name: str) -> tuple[Any, ...]:
    # any str.isdigit() character counts as a digit here, as it always has
    parts: list[Any] = []
    digits = ""
    text = ""
    for ch in name:
        if ch.isdigit():
            if text:
                parts.append((1, text))
                text = ""
            digits += ch
        else:
            if digits:
                parts.append((0, int(digits)))
                digits = ""
            text += ch
    if digits:
        parts.append((0, int(digits)))
    if text:
        parts.append((1, text))
    return tuple(parts)


def nice_sort(names: Any) -> list[str]:
    return sorted(names, key=nice_sort_key)
