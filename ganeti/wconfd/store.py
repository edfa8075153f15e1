"""The configuration as WConfD holds it: entity maps, indexes, cached JSON.

Pure: no Twisted, no I/O.  Every change returns a journal record (a dict)
that the service makes durable before it acknowledges the change; replaying
the records on top of the config.data they followed gives the same state.

Costs are per entity, not per config: a change checks only the references
of the entity it touches (through name and usage indexes), re-encodes only
that entity, and the full config.data bytes are rebuilt lazily from cached
per-entity fragments the next time somebody reads the whole config.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any, Iterable, cast

import attrs

from ganeti import errors, serializer
from ganeti import network as netpool
from ganeti.config import verify as config_verify
from ganeti.errors import IpInUse, MacInUse, UnknownEntity
from ganeti.objects import KINDS, Cluster, ConfigData, ConfigObject, Disk, Instance, Network, Node, new_uuid, now

#: kinds whose names must be unique, and that can be looked up by name
NAMED = ("node", "nodegroup", "instance", "network")
#: top-level keys of config.data in the order they are written
_MAP_ORDER = ("nodes", "nodegroups", "instances", "networks", "disks")
_KIND_OF_MAP = {key: kind for kind, (_cls, key) in KINDS.items()}
#: change records kept for readers holding an older serial (L{ConfigStore.changes_since})
RECENT_CHANGES = 256


def normalize_mac(mac: str) -> str:
    """The form MACs are compared in (lower case)."""
    return mac.lower()


def lock_name(kind: str, obj: ConfigObject) -> str:
    """The lock that guards changes to C{obj}."""
    if kind == "cluster":
        return "cluster/BGL"
    if kind == "instance":
        return "instance/%s" % obj.name  # type: ignore[attr-defined]
    return "%s/%s" % (kind, obj.uuid)  # type: ignore[attr-defined]


def entity_lock_names(kind: str, obj: ConfigObject) -> list[str]:
    """Lock names that exist because C{obj} exists."""
    if kind == "node":
        return ["node/%s" % obj.uuid, "node-res/%s" % obj.uuid]  # type: ignore[attr-defined]
    if kind in ("instance", "nodegroup", "network"):
        return [lock_name(kind, obj)]
    return []


class ConfigStore:
    """The live configuration, with per-entity change operations."""

    def __init__(self, config: ConfigData) -> None:
        self._load(config)

    # --- construction -----------------------------------------------------
    def _load(self, config: ConfigData) -> None:
        self.version = config.version
        self.cluster: Cluster = config.cluster
        self.filters = dict(config.filters)
        self.extra = dict(config.extra)
        self.serial_no = config.serial_no if isinstance(config.serial_no, int) else 1
        self.ctime = config.ctime
        self.mtime = config.mtime
        self.maps: dict[str, dict[str, Any]] = {kind: dict(getattr(config, key)) for kind, (_c, key) in KINDS.items()}
        self._names: dict[str, dict[str, str]] = {kind: {} for kind in NAMED}
        for kind in NAMED:
            for uuid, obj in self.maps[kind].items():
                if obj.name is not None:
                    self._names[kind][obj.name] = uuid
        self._disk_owner: dict[str, str] = {}
        self._mac_owner: dict[str, str] = {}
        self._node_instances: dict[str, set[str]] = {}
        for uuid, inst in self.maps["instance"].items():
            self._index_instance(uuid, inst)
        self._group_nodes: dict[str, set[str]] = {}
        for uuid, node in self.maps["node"].items():
            self._group_nodes.setdefault(node.group, set()).add(uuid)
        self._fragments: dict[str, dict[str, bytes]] = {
            kind: {uuid: _pair(uuid, obj) for uuid, obj in items.items()} for kind, items in self.maps.items()
        }
        self._joined: dict[str, bytes | None] = {kind: None for kind in self.maps}
        self._cluster_bytes = self.cluster.to_json()
        self._cache: bytes | None = None
        #: the last changes' records (serial, time, changes), oldest first, consecutive serials
        self._recent: deque[dict[str, Any]] = deque()
        #: (serial, mtime) of the config the first of them applies to
        self._recent_base: tuple[int, float | None] = (self.serial_no, self.mtime)

    def _index_instance(self, uuid: str, inst: Instance) -> None:
        for disk in inst.disks:
            self._disk_owner[disk] = uuid
        for nic in inst.nics:
            if nic.mac:
                self._mac_owner[normalize_mac(nic.mac)] = uuid
        if inst.primary_node:
            self._node_instances.setdefault(inst.primary_node, set()).add(uuid)

    def _unindex_instance(self, uuid: str, inst: Instance) -> None:
        for disk in inst.disks:
            if self._disk_owner.get(disk) == uuid:
                del self._disk_owner[disk]
        for nic in inst.nics:
            if nic.mac and self._mac_owner.get(normalize_mac(nic.mac)) == uuid:
                del self._mac_owner[normalize_mac(nic.mac)]
        if inst.primary_node:
            self._node_instances.get(inst.primary_node, set()).discard(uuid)

    # --- reads ------------------------------------------------------------
    def config(self) -> ConfigData:
        """A snapshot as records (records are immutable, the maps are copies)."""
        return ConfigData(
            version=self.version,
            cluster=self.cluster,
            filters=dict(self.filters),
            ctime=self.ctime,
            mtime=self.mtime,
            serial_no=self.serial_no,
            extra=dict(self.extra),
            **{key: dict(self.maps[kind]) for kind, (_c, key) in KINDS.items()},
        )

    def snapshot(self) -> bytes:
        """config.data as bytes; cached until the next change."""
        if self._cache is None:
            parts = [b'"version":' + serializer.dumps(self.version), b'"cluster":' + self._cluster_bytes]
            for key in _MAP_ORDER:
                kind = _KIND_OF_MAP[key]
                joined = self._joined[kind]
                if joined is None:
                    joined = self._joined[kind] = b",".join(self._fragments[kind].values())
                parts.append(b'"%s":{%s}' % (key.encode(), joined))
            parts.append(b'"filters":' + serializer.dumps(self.filters))
            for key in ("ctime", "mtime"):
                value = getattr(self, key)
                if value is not None:
                    parts.append(b'"%s":%s' % (key.encode(), serializer.dumps(value)))
            parts.append(b'"serial_no":%d' % self.serial_no)
            for key, value in self.extra.items():
                parts.append(serializer.dumps(key) + b":" + serializer.dumps(value))
            self._cache = b"{" + b",".join(parts) + b"}"
        return self._cache

    def changes_since(self, serial: int, mtime: float | None = None) -> list[dict[str, Any]] | None:
        """The change records (C{{"s", "t", "c"}}, as journalled) that bring the
        config of serial C{serial} (and C{mtime}, when given) to this one,
        oldest first (none when it is this one); C{None} when they are not all
        kept: older than the last L{RECENT_CHANGES} changes or than a
        whole-config write (or WConfD's start), or a config this store never
        had at that serial (one of changes dropped because the disk was full,
        L{ganeti.wconfd.diskspace}, whose serials were given again: its mtime
        tells it apart).  Applied with L{ConfigData.with_changes}."""
        if serial == self.serial_no:
            return [] if mtime is None or mtime == self.mtime else None
        recent = self._recent
        base_serial, base_mtime = self._recent_base
        if serial > self.serial_no or serial < base_serial:
            return None
        start = serial - base_serial  # (the serials of the records kept go one by one from the base's)
        if mtime is not None and mtime != (base_mtime if start == 0 else recent[start - 1]["t"]):
            return None
        return list(islice(recent, start, None))

    def lookup(self, kind: str, key: str) -> Any:
        """The entity of C{kind} with uuid or name C{key}."""
        if kind == "cluster":
            return self.cluster
        items = self._map(kind)
        found = items.get(key)
        if found is None and kind in NAMED:
            uuid = self._names[kind].get(key)
            found = items.get(uuid) if uuid else None
        if found is None:
            raise UnknownEntity("%s %r is not known" % (_label(kind), key))
        return found

    def mac_owner(self, mac: str) -> str | None:
        """The uuid of the instance with a NIC of address C{mac}, if any."""
        return self._mac_owner.get(normalize_mac(mac))

    def backs_lock(self, name: str) -> bool:
        """Whether an entity of the config gives rise to lock C{name}."""
        level, _, member = name.partition("/")
        if level == "instance":
            return member in self._names["instance"]
        if level in ("node", "node-res"):
            return member in self.maps["node"]
        if level in ("nodegroup", "network"):
            return member in self.maps[level]
        return False

    def guarding_lock(self, kind: str, obj: ConfigObject) -> str:
        """The lock a writer of C{obj} must hold: a disk's is its instance's."""
        if kind == "disk":
            owner = self._disk_owner.get(obj.uuid)  # type: ignore[attr-defined]
            if owner is not None:
                return lock_name("instance", self.maps["instance"][owner])
        return lock_name(kind, obj)

    def lock_names(self) -> list[str]:
        """Every lock name the current entities give rise to."""
        names: list[str] = []
        for kind in ("instance", "nodegroup", "node", "network"):
            for obj in self.maps[kind].values():
                names.extend(entity_lock_names(kind, obj))
        return names

    def verify(self) -> list[str]:
        return config_verify.verify(self.config())

    def _map(self, kind: str) -> dict[str, Any]:
        try:
            return self.maps[kind]
        except KeyError:
            raise errors.ConfigurationError(
                "unknown kind %r (expected one of cluster, %s)" % (kind, ", ".join(sorted(self.maps)))
            ) from None

    # --- changes ----------------------------------------------------------
    def update(
        self,
        kind: str,
        data: dict[str, Any],
        disks: Iterable[dict[str, Any]] = (),
        remove_disks: Iterable[str] = (),
    ) -> tuple[Any, dict[str, Any]]:
        """Replace an existing entity with C{data}; returns (stored, record).

        C{data["serial_no"]} must equal the stored serial: a writer that read
        an older version gets an error instead of losing someone's change.

        For an instance, in the same change: C{disks} are new disk records
        (with their uuids) added with it, each listed in its C{disks};
        C{remove_disks} are uuids of disks it listed before and no longer
        lists, removed from the config (a disk it merely stops listing stays,
        detached, and may be attached to another instance).
        """
        obj = _decode(kind, data)
        if kind == "cluster":
            current: Any = self.cluster
        else:
            if not obj.uuid:
                raise errors.ConfigurationError("%s has no uuid" % _label(kind))
            # by uuid only: a name here would store a second copy under that key
            current = self._map(kind).get(obj.uuid)
            if current is None:
                raise UnknownEntity("%s %r is not known" % (_label(kind), obj.uuid))
        if obj.serial_no != current.serial_no:
            raise errors.ConfigurationError(
                "%s %s was changed since it was read (serial %s, now %s)"
                % (_label(kind), _describe(current), obj.serial_no, current.serial_no)
            )
        when = now()
        stored = attrs.evolve(obj.touched(when), ctime=current.ctime)
        new_disks = [_decode("disk", d) for d in disks]
        dropped: list[str] = []
        if kind == "instance":
            listed = set(stored.disks)
            for disk in new_disks:
                if not disk.uuid:
                    raise errors.ConfigurationError("a new disk of instance %s has no uuid" % stored.name)
                if disk.uuid in self.maps["disk"]:
                    raise errors.ConfigurationError("disk uuid %s is already in use" % disk.uuid)
                if disk.uuid not in listed:
                    raise errors.ConfigurationError(
                        "new disk %s is not in the disk list of instance %s" % (disk.uuid, stored.name)
                    )
            stamp = {"serial_no": 1, "ctime": when, "mtime": when}
            new_disks = [attrs.evolve(d, **stamp) for d in new_disks]
            for disk in new_disks:
                self._check("disk", disk, None)
            self._check_instance(stored, current, extra_disks={d.uuid for d in new_disks})
            dropped = list(dict.fromkeys(remove_disks))
            for uuid in dropped:
                if uuid not in current.disks or uuid in listed:
                    raise errors.ConfigurationError(
                        "disk %s to remove is not a disk instance %s drops" % (uuid, stored.name)
                    )
        elif new_disks or list(remove_disks):
            raise errors.ConfigurationError("only instances come with disks")
        else:
            self._check(kind, stored, current)
        pools = self._pool_changes(current, stored, when) if kind == "instance" else []
        self._bump(when)
        changes = [["disk", d.uuid, d.to_dict()] for d in new_disks]
        changes.append([kind, stored.uuid, stored.to_dict()])
        changes += [["disk", uuid, None] for uuid in dropped]
        changes += [["network", n.uuid, n.to_dict()] for n in pools]
        record = self._keep({"s": self.serial_no, "t": when, "c": changes})
        for disk in new_disks:
            self._apply("disk", disk.uuid, disk)
        self._apply(kind, stored.uuid if kind != "cluster" else None, stored)
        for uuid in dropped:
            self._apply("disk", uuid, None)
        for net in pools:
            self._apply("network", net.uuid, net)
        return stored, record

    def add(self, kind: str, data: dict[str, Any], disks: Iterable[dict[str, Any]] = ()) -> tuple[Any, dict[str, Any]]:
        """Add a new entity (an instance together with its disks)."""
        if kind in ("cluster", "disk"):
            raise errors.ConfigurationError("cannot add a %s on its own" % _label(kind))
        obj = _decode(kind, data)
        when = now()
        stamp = {"serial_no": 1, "ctime": when, "mtime": when}
        obj = attrs.evolve(obj, uuid=obj.uuid or new_uuid(), **stamp)
        if obj.uuid in self._map(kind):
            raise errors.ConfigurationError("%s uuid %s is already in use" % (_label(kind), obj.uuid))
        new_disks = [attrs.evolve(d, uuid=d.uuid or new_uuid(), **stamp) for d in (_decode("disk", x) for x in disks)]
        if new_disks:
            if kind != "instance":
                raise errors.ConfigurationError("only instances come with disks")
            if obj.disks and [d.uuid for d in new_disks] != list(obj.disks):
                raise errors.ConfigurationError("the instance's disk list does not match the disks given")
            obj = attrs.evolve(obj, disks=[d.uuid for d in new_disks])
        for disk in new_disks:
            if disk.uuid in self.maps["disk"]:
                raise errors.ConfigurationError("disk uuid %s is already in use" % disk.uuid)
            self._check("disk", disk, None)
        pools: list[Network] = []
        if kind == "instance":
            self._check_instance(obj, None, extra_disks={d.uuid for d in new_disks})
            pools = self._pool_changes(None, obj, when)
        else:
            self._check(kind, obj, None)
        changes: list[tuple[str, Any]] = [("disk", d) for d in new_disks] + [(kind, obj)]
        changes += [("network", n) for n in pools]
        record = self._record(when, changes)
        for change_kind, item in changes:
            self._apply(change_kind, item.uuid, item)
        return obj, record

    def remove(self, kind: str, key: str) -> tuple[Any, dict[str, Any]]:
        """Remove an entity (an instance with its disks)."""
        if kind in ("cluster", "disk"):
            raise errors.ConfigurationError("cannot remove a %s on its own" % _label(kind))
        obj = self.lookup(kind, key)
        uuid = obj.uuid
        if kind == "node":
            if uuid == self.cluster.master_node:
                raise errors.ConfigurationError("node %s is the master node" % obj.name)
            users = self._node_instances.get(uuid) or set()
            if users:
                raise errors.ConfigurationError(
                    "node %s still has instances: %s"
                    % (obj.name, ", ".join(sorted(self.maps["instance"][u].name for u in users)))
                )
            if any(uuid in d.nodes for d in self.maps["disk"].values()):
                raise errors.ConfigurationError("node %s still holds disks" % obj.name)
        elif kind == "nodegroup":
            if self._group_nodes.get(uuid):
                raise errors.ConfigurationError("node group %s still has nodes" % obj.name)
            if len(self.maps["nodegroup"]) == 1:
                raise errors.ConfigurationError("node group %s is the last one" % obj.name)
        elif kind == "network":
            for inst in self.maps["instance"].values():
                if any(nic.network == uuid for nic in inst.nics):
                    raise errors.ConfigurationError("network %s is used by instance %s" % (obj.name, inst.name))
        when = now()
        changes: list[tuple[str, Any]] = [(kind, None)]
        uuids = [uuid]
        if kind == "instance":
            changes += [("disk", None) for _ in obj.disks]
            uuids += list(obj.disks)
            for net in self._pool_changes(obj, None, when):
                changes.append(("network", net))
                uuids.append(net.uuid)
        record = {"s": self.serial_no + 1, "t": when,
                  "c": [[k, u, None if o is None else o.to_dict()] for (k, o), u in zip(changes, uuids)]}
        self._keep(record)
        for (change_kind, item), item_uuid in zip(changes, uuids):
            self._apply(change_kind, item_uuid, item)
        self._bump(when)
        return obj, record

    def change_filter(self, uuid: str, rule: dict[str, Any] | None) -> dict[str, Any] | None:
        """Store job filter rule C{uuid} (Ganeti's layout, checked by LuxiD) or,
        with C{None}, remove it; the record, or C{None} if nothing changed."""
        if not isinstance(uuid, str) or not uuid:
            raise errors.ConfigurationError("a filter rule needs a uuid, not %r" % (uuid,))
        if rule is not None and (not isinstance(rule, dict) or rule.get("uuid") != uuid):
            raise errors.ConfigurationError("filter rule %s must be an object with that uuid" % uuid)
        if self.filters.get(uuid) == rule:
            return None
        when = now()
        self._apply("filter", uuid, rule)
        self._bump(when)
        return self._keep({"s": self.serial_no, "t": when, "c": [["filter", uuid, rule]]})

    def replace(self, config: ConfigData) -> dict[str, Any]:
        """Replace everything (a whole-config write); verified first.

        The record carries the whole config, so that changes journalled
        after it replay onto it, not onto an older config.data.
        """
        problems = config_verify.verify(config)
        if problems:
            raise errors.ConfigVerifyError("Configuration verification failed", problems)
        when = now()
        self._load(attrs.evolve(config, serial_no=max(self.serial_no, config.serial_no or 0) + 1, mtime=when))
        return {"s": self.serial_no, "t": when, "full": serializer.loads(self.snapshot())}

    def replay(self, record: dict[str, Any]) -> None:
        """Apply a journal record written by L{update}, L{add}, L{remove} or L{replace}."""
        if "full" in record:
            self._load(ConfigData.from_dict(record["full"]))
            return
        for kind, uuid, data in record["c"]:
            obj = None if data is None or kind == "filter" else _decode(kind, data)
            obj = data if kind == "filter" else obj
            self._apply(kind, uuid, obj)
        self.serial_no = record["s"]
        self.mtime = record["t"]
        self._cache = None
        self._keep(record)

    # --- internals --------------------------------------------------------
    def _record(self, when: float, changes: list[tuple[str, Any]]) -> dict[str, Any]:
        self._bump(when)
        return self._keep({"s": self.serial_no, "t": when, "c": [[k, o.uuid, o.to_dict()] for k, o in changes]})

    def _keep(self, record: dict[str, Any]) -> dict[str, Any]:
        """Keep C{record}'s change for L{changes_since} (not a request's answer the service adds to it later)."""
        recent = self._recent
        last = recent[-1]["s"] if recent else self._recent_base[0]
        if record["s"] != last + 1:  # (never: serials go one by one) no gap kept
            recent.clear()
            self._recent_base = (record["s"] - 1, None)
        elif len(recent) >= RECENT_CHANGES:
            oldest = recent.popleft()
            self._recent_base = (oldest["s"], oldest["t"])
        recent.append({"s": record["s"], "t": record["t"], "c": record["c"]})
        return record

    def _bump(self, when: float) -> None:
        self.serial_no += 1
        self.mtime = when
        self._cache = None

    def _apply(self, kind: str, uuid: str | None, obj: Any) -> None:
        if kind == "filter":  # job filter rules: plain JSON objects
            assert uuid is not None
            if obj is None:
                self.filters.pop(uuid, None)
            else:
                self.filters[uuid] = obj
            self._cache = None
            return
        if kind == "cluster":
            self.cluster = obj
            self._cluster_bytes = obj.to_json()
            self._cache = None
            return
        assert uuid is not None
        items = self.maps[kind]
        old = items.get(uuid)
        if old is not None:
            if kind in NAMED and self._names[kind].get(old.name) == uuid:
                del self._names[kind][old.name]
            if kind == "instance":
                self._unindex_instance(uuid, old)
            elif kind == "node":
                self._group_nodes.get(old.group, set()).discard(uuid)
        if obj is None:
            items.pop(uuid, None)
            self._fragments[kind].pop(uuid, None)
        else:
            items[uuid] = obj
            self._fragments[kind][uuid] = _pair(uuid, obj)
            if kind in NAMED and obj.name is not None:
                self._names[kind][obj.name] = uuid
            if kind == "instance":
                self._index_instance(uuid, obj)
            elif kind == "node":
                self._group_nodes.setdefault(obj.group, set()).add(uuid)
        self._joined[kind] = None
        self._cache = None

    def _check(self, kind: str, obj: Any, current: Any) -> None:
        """Reference and uniqueness checks for one entity (O(1) each)."""
        if kind == "instance":
            self._check_instance(obj, current)
            return
        problems: list[str] = []
        if kind in NAMED:
            self._check_name(kind, obj, problems)
        if kind == "node":
            if obj.group not in self.maps["nodegroup"]:
                problems.append("node %s: node group %r does not exist" % (obj.name, obj.group))
            if obj.uuid == self.cluster.master_node and obj.offline:
                problems.append("node %s is the master node and cannot be offline" % obj.name)
        elif kind == "disk":
            for node in obj.nodes:
                if node not in self.maps["node"]:
                    problems.append("disk %s: node %r does not exist" % (obj.uuid, node))
        elif kind == "cluster":
            if obj.master_node not in self.maps["node"]:
                problems.append("cluster: master node %r does not exist" % obj.master_node)
        _raise_if(problems)

    def _check_instance(self, obj: Instance, current: Instance | None, extra_disks: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        problems: list[str] = []
        self._check_name("instance", obj, problems)
        if obj.primary_node not in self.maps["node"]:
            problems.append("instance %s: primary node %r does not exist" % (obj.name, obj.primary_node))
        seen: set[str] = set()
        for disk in obj.disks:
            if disk in seen:
                problems.append("instance %s: disk %s is listed twice" % (obj.name, disk))
            seen.add(disk)
            if disk not in self.maps["disk"] and disk not in extra_disks:
                problems.append("instance %s: disk %s does not exist" % (obj.name, disk))
            owner = self._disk_owner.get(disk)
            if owner is not None and owner != obj.uuid:
                problems.append(
                    "instance %s: disk %s belongs to instance %s" % (obj.name, disk, self.maps["instance"][owner].name)
                )
        for nic in obj.nics:
            if nic.network is not None and nic.network not in self.maps["network"]:
                problems.append("instance %s: network %r does not exist" % (obj.name, nic.network))
        _raise_if(problems)
        self._check_macs(obj)

    def _pool_changes(self, old: Instance | None, new: Instance | None, when: float) -> list[Network]:
        """The networks whose instance pool changes when C{old} becomes C{new}
        (either C{None}): addresses of NICs gone are released, new ones
        reserved, as Ganeti's WConfD commits them with the instance.

        @raise IpInUse: a new address is already used by another NIC.
        @raise errors.ConfigVerifyError: a new address is outside its network.
        """
        before = netpool.nic_addresses(old.nics if old is not None else [])
        after = netpool.nic_addresses(new.nics if new is not None else [])
        if before == after:
            return []
        label = new.name if new is not None else old.name if old is not None else "?"
        pools: dict[str, netpool.Pool] = {}

        def pool_of(uuid: str) -> netpool.Pool | None:
            if uuid not in pools:
                net = self.maps["network"].get(uuid)
                if net is None:
                    return None
                try:
                    pools[uuid] = netpool.Pool.of(net)
                except netpool.AddressPoolError:
                    return None
            return pools[uuid]

        for uuid, ip in sorted(before - after):
            pool = pool_of(uuid)
            if pool is not None and pool.contains(ip) and pool.is_reserved(ip):
                pool.release(ip)
        for uuid, ip in sorted(after - before):
            pool = pool_of(uuid)
            if pool is None:
                continue
            name = self.maps["network"][uuid].name
            if not pool.contains(ip):
                raise errors.ConfigVerifyError("Configuration verification failed", [
                    "instance %s: IP address %s is not in network %s (%s)" % (label, ip, name, pool.net)])
            if pool.is_reserved(ip):
                raise IpInUse("instance %s: IP address %s is already in use in network %s" % (label, ip, name))
            pool.reserve(ip)
        out = []
        for uuid, pool in pools.items():
            current = self.maps["network"][uuid]
            changed = pool.apply(current)
            if changed != current:
                out.append(changed.touched(when))
        return out

    def _check_macs(self, obj: Instance) -> None:
        """Every NIC MAC of C{obj} is its own (O(1) per NIC): else L{MacInUse}."""
        mine: set[str] = set()
        for nic in obj.nics:
            if not nic.mac:
                continue
            mac = normalize_mac(nic.mac)
            if mac in mine:
                raise MacInUse("instance %s: MAC address %s is used by two of its NICs" % (obj.name, nic.mac))
            mine.add(mac)
            owner = self._mac_owner.get(mac)
            if owner is not None and owner != obj.uuid:
                raise MacInUse(
                    "instance %s: MAC address %s is already in use by instance %s"
                    % (obj.name, nic.mac, self.maps["instance"][owner].name)
                )

    def _check_name(self, kind: str, obj: Any, problems: list[str]) -> None:
        if not obj.name or not isinstance(obj.name, str):
            problems.append("%s %s has no name" % (_label(kind), obj.uuid))
            return
        holder = self._names[kind].get(obj.name)
        if holder is not None and holder != obj.uuid:
            problems.append("%s name %r is already used by %s" % (_label(kind), obj.name, holder))


def _decode(kind: str, data: Any) -> Any:
    cls = Cluster if kind == "cluster" else KINDS[kind][0] if kind in KINDS else None
    if cls is None:
        raise errors.ConfigurationError("unknown kind %r" % kind)
    if isinstance(data, ConfigObject):
        return data
    try:
        return cls.from_dict(data)
    except (TypeError, ValueError) as e:
        raise errors.ConfigurationError("malformed %s: %s" % (_label(kind), e)) from e


def _pair(uuid: str, obj: ConfigObject) -> bytes:
    return serializer.dumps(uuid) + b":" + obj.to_json()


def _label(kind: str) -> str:
    return {"nodegroup": "node group"}.get(kind, kind)


def _describe(obj: Any) -> str:
    return cast(str, getattr(obj, "name", None) or getattr(obj, "cluster_name", None) or getattr(obj, "uuid", "?"))


def _raise_if(problems: list[str]) -> None:
    if problems:
        raise errors.ConfigVerifyError("Configuration verification failed", problems)


__all__ = ["ConfigStore", "IpInUse", "MacInUse", "UnknownEntity", "normalize_mac", "lock_name", "entity_lock_names", "Node", "Disk"]
