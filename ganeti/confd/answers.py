"""The in-memory confd index and the answer to each request type, pure.

L{Index.build} turns the bytes of C{config.data} into lookup tables once per
config change; L{Index.answer} maps one decoded request to the reply dict
C{{"protocol", "status", "answer", "serial"}}.  Answers are cached per
(type, query) on the index, so a reload drops the whole cache at once.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson

from ganeti import serializer
from ganeti.confd import wire
from ganeti.objects import ConfigData, Disk, Instance, Node, nice_sort_key

#: at most this many cached encoded answers per index
CACHE_SIZE = 4096

DRBD_TYPES = ("drbd", "drbd8")

StatusAnswer = tuple[int, Any, int]


def _ok(answer: Any, serial: int | None) -> StatusAnswer:
    return (wire.REPL_STATUS_OK, answer, serial or 0)


UNKNOWN_ENTRY: StatusAnswer = (wire.REPL_STATUS_ERROR, wire.ERROR_UNKNOWN_ENTRY, 0)
ARGUMENT_ERROR: StatusAnswer = (wire.REPL_STATUS_ERROR, wire.ERROR_ARGUMENT, 0)
INTERNAL_ERROR: StatusAnswer = (wire.REPL_STATUS_ERROR, wire.ERROR_INTERNAL, 0)
NOT_IMPLEMENTED: StatusAnswer = (wire.REPL_STATUS_NOTIMPLEMENTED, None, 0)
NO_CONFIG: StatusAnswer = (wire.REPL_STATUS_ERROR, "No configuration loaded", 0)


class _Names:
    """Name lookup with Ganeti's unambiguous short forms (C{node1} for C{node1.example.com})."""

    def __init__(self, items: dict[str, Any]) -> None:
        self._by_uuid = items
        self._by_name: dict[str, Any] = {}
        short: dict[str, list[Any]] = {}
        for item in items.values():
            if item.name is None:
                continue
            self._by_name[item.name] = item
            parts = item.name.split(".")
            for end in range(1, len(parts)):
                short.setdefault(".".join(parts[:end]), []).append(item)
        self._short = {key: found[0] for key, found in short.items() if len(found) == 1}

    def find(self, name: Any) -> Any:
        if not isinstance(name, str):
            return None
        found = self._by_name.get(name) or self._by_uuid.get(name)
        if found is None and name not in self._by_name:
            found = self._short.get(name)
        return found


def _pointer(document: Any, path: str) -> Any:
    """RFC 6901 JSON pointer lookup; raises KeyError when absent."""
    if path == "":
        return document
    if not path.startswith("/"):
        raise KeyError(path)
    value = document
    for token in path[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value[token]
        elif isinstance(value, list):
            if not token.isdigit() or (token != "0" and token.startswith("0")):
                raise KeyError(token)
            value = value[int(token)]
        else:
            raise KeyError(token)
    return value


class Index:
    """Everything confd answers from, derived from one C{config.data}."""

    def __init__(self, raw: dict[str, Any], config: ConfigData) -> None:
        self.raw = raw
        self.config = config
        cluster = config.cluster
        self.version = config.version
        self.cluster_serial = cluster.serial_no or 0
        self.nodes = _Names(config.nodes)
        self.instances = _Names(config.instances)
        master = config.nodes.get(cluster.master_node or "")
        self.master = master
        self.master_name = master.name if master else None
        ordered = sorted(config.nodes.values(), key=lambda n: nice_sort_key(n.name or ""))
        self.node_pips = [n.primary_ip for n in ordered]
        self.mc_pips = [n.primary_ip for n in ordered if n.master_candidate]
        default_nic = (cluster.nicparams or {}).get("default", {}) or {}
        self.default_link = default_nic.get("link", "")
        # link -> ip -> instance
        self.link_ips: dict[str, dict[str, Instance]] = {}
        for inst in sorted(config.instances.values(), key=lambda i: nice_sort_key(i.name or "")):
            for nic in inst.nics:
                if not nic.ip:
                    continue
                link = (nic.nicparams or {}).get("link") or self.default_link
                self.link_ips.setdefault(link, {})[nic.ip] = inst
        # node uuid -> (primary instances, secondary instances)
        self.node_instances: dict[str, tuple[list[Instance], list[Instance]]] = {
            uuid: ([], []) for uuid in config.nodes
        }
        for inst in config.instances.values():
            if inst.primary_node in self.node_instances:
                self.node_instances[inst.primary_node][0].append(inst)
            for node in self._secondaries(inst):
                if node in self.node_instances:
                    self.node_instances[node][1].append(inst)
        self._cache: dict[tuple[int, bytes], str] = {}
        self._handlers: dict[int, Callable[[Any], StatusAnswer]] = {
            wire.REQ_PING: self._ping,
            wire.REQ_NODE_ROLE_BYNAME: self._node_role,
            wire.REQ_NODE_PIP_BY_INSTANCE_IP: self._node_pip_by_instance_ip,
            wire.REQ_CLUSTER_MASTER: self._cluster_master,
            wire.REQ_NODE_PIP_LIST: lambda q: _ok(self.node_pips, self.cluster_serial),
            wire.REQ_MC_PIP_LIST: lambda q: _ok(self.mc_pips, self.cluster_serial),
            wire.REQ_INSTANCES_IPS_LIST: self._instances_ips,
            wire.REQ_NODE_DRBD: self._node_drbd,
            wire.REQ_NODE_INSTANCES: self._node_instances,
            wire.REQ_INSTANCE_DISKS: self._instance_disks,
            wire.REQ_CONFIG_QUERY: self._config_query,
            wire.REQ_DATA_COLLECTORS: self._data_collectors,
        }

    @classmethod
    def build(cls, data: bytes) -> Index:
        """Parse C{config.data}; raises C{ValueError}/C{TypeError} on a bad file."""
        raw = serializer.loads(data)
        if not isinstance(raw, dict) or not isinstance(raw.get("cluster"), dict):
            raise ValueError("config.data is not a configuration object")
        return cls(raw, ConfigData.from_dict(raw))

    @property
    def serial(self) -> int:
        """The serial number of the whole configuration."""
        return self.config.serial_no or 0

    # --- the entry points -------------------------------------------------
    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        """The reply dict for a decoded request."""
        status, answer, serial = self.status_answer(req.get("type"), req.get("query"))
        return wire.reply(status, answer, serial)

    def status_answer(self, qtype: Any, query: Any) -> StatusAnswer:
        handler = self._handlers.get(qtype) if type(qtype) is int else None
        if handler is None:
            return NOT_IMPLEMENTED
        try:
            return handler(query)
        except Exception as e:  # a bug must not take the daemon down
            return (wire.REPL_STATUS_ERROR, "Internal error: %s" % (e,), 0)

    def encoded_answer(self, qtype: Any, query: Any) -> str:
        """The compact reply message for a request, cached per (type, query)."""
        try:
            key = (qtype, orjson.dumps(query, option=orjson.OPT_SORT_KEYS))
        except TypeError:
            return encode_status(self.status_answer(qtype, query))
        cached = self._cache.get(key)
        if cached is None:
            cached = encode_status(self.status_answer(qtype, query))
            if len(self._cache) >= CACHE_SIZE:
                self._cache.clear()
            self._cache[key] = cached
        return cached

    # --- helpers ----------------------------------------------------------
    def _node_name(self, uuid: Any) -> Any:
        node = self.config.nodes.get(uuid) if isinstance(uuid, str) else None
        return node.name if node else uuid

    def _instance_disks_of(self, inst: Instance) -> list[Disk]:
        return [self.config.disks[d] for d in inst.disks if isinstance(d, str) and d in self.config.disks]

    def _secondaries(self, inst: Instance) -> list[str]:
        found: list[str] = []
        for disk in self._instance_disks_of(inst):
            for node in disk.nodes or []:
                if node != inst.primary_node and node not in found:
                    found.append(node)
            if disk.dev_type in DRBD_TYPES and isinstance(disk.logical_id, list) and len(disk.logical_id) >= 2:
                for node in disk.logical_id[:2]:
                    if node != inst.primary_node and node not in found:
                        found.append(node)
        return found

    # --- the request types --------------------------------------------------
    def _ping(self, query: Any) -> StatusAnswer:
        return _ok(self.version, 0)

    def _node_role(self, query: Any) -> StatusAnswer:
        if not isinstance(query, str):
            return ARGUMENT_ERROR
        node: Node | None = self.nodes.find(query)
        if node is None:
            return UNKNOWN_ENTRY
        if self.master is not None and node.uuid == self.master.uuid:
            role = wire.NODE_ROLE_MASTER
        elif node.drained:
            role = wire.NODE_ROLE_DRAINED
        elif node.offline:
            role = wire.NODE_ROLE_OFFLINE
        elif node.master_candidate:
            role = wire.NODE_ROLE_CANDIDATE
        else:
            role = wire.NODE_ROLE_REGULAR
        return _ok(role, self.cluster_serial)

    def _pip_of_ip(self, link: str, ip: Any) -> StatusAnswer:
        inst = self.link_ips.get(link, {}).get(ip) if isinstance(ip, str) else None
        if inst is None:
            return UNKNOWN_ENTRY
        node = self.config.nodes.get(inst.primary_node or "")
        if node is None:
            return INTERNAL_ERROR
        return _ok(node.primary_ip, self.cluster_serial)

    def _node_pip_by_instance_ip(self, query: Any) -> StatusAnswer:
        if isinstance(query, str):
            return self._pip_of_ip(self.default_link, query)
        if not isinstance(query, dict):
            return ARGUMENT_ERROR
        link = query.get(wire.REQQ_LINK) or self.default_link
        if not isinstance(link, str):
            return ARGUMENT_ERROR
        ip = query.get(wire.REQQ_IP)
        if ip is not None:
            return self._pip_of_ip(link, ip)
        iplist = query.get(wire.REQQ_IPLIST, [])
        if not isinstance(iplist, list):
            return ARGUMENT_ERROR
        return _ok([list(self._pip_of_ip(link, one)) for one in iplist], self.cluster_serial)

    def _cluster_master(self, query: Any) -> StatusAnswer:
        if query is None:
            return _ok(self.master_name, self.cluster_serial)
        if not isinstance(query, dict):
            return ARGUMENT_ERROR
        fields = query.get(wire.REQQ_FIELDS, [])
        if not isinstance(fields, list):
            return ARGUMENT_ERROR
        values = []
        for field in fields:
            if field == wire.REQFIELD_NAME:
                values.append(self.master_name)
            elif field == wire.REQFIELD_IP:
                values.append(self.config.cluster.master_ip)
            elif field == wire.REQFIELD_MNODE_PIP:
                if self.master is None:
                    return UNKNOWN_ENTRY
                values.append(self.master.primary_ip)
            else:
                return ARGUMENT_ERROR
        return _ok(values, self.cluster_serial)

    def _instances_ips(self, query: Any) -> StatusAnswer:
        if query is None:
            link = self.default_link
        elif isinstance(query, str):
            link = query
        else:
            return ARGUMENT_ERROR
        return _ok(list(self.link_ips.get(link, {})), self.cluster_serial)

    def _node_drbd(self, query: Any) -> StatusAnswer:
        if not isinstance(query, str):
            return ARGUMENT_ERROR
        node: Node | None = self.nodes.find(query)
        if node is None:
            return UNKNOWN_ENTRY
        minors: list[list[Any]] = []
        for inst in sorted(self.config.instances.values(), key=lambda i: nice_sort_key(i.name or "")):
            for idx, disk in enumerate(self._instance_disks_of(inst)):
                self._drbd_minors(disk, node.uuid, inst, idx, minors)
        return _ok(minors, node.serial_no)

    def _drbd_minors(self, disk: Disk, node: Any, inst: Instance, idx: int, out: list[list[Any]]) -> None:
        lid = disk.logical_id
        if disk.dev_type in DRBD_TYPES and isinstance(lid, list) and len(lid) >= 5:
            pnode, snode, _port, pminor, sminor = lid[:5]
            if node == pnode:
                out.append([self._node_name(pnode), pminor, inst.name, "disk/%d" % idx, "primary", self._node_name(snode)])
            elif node == snode:
                out.append([self._node_name(snode), sminor, inst.name, "disk/%d" % idx, "secondary", self._node_name(pnode)])
        for child in disk.children or []:
            self._drbd_minors(child, node, inst, idx, out)

    def _node_instances(self, query: Any) -> StatusAnswer:
        if not isinstance(query, str):
            return ARGUMENT_ERROR
        node: Node | None = self.nodes.find(query)
        if node is None:
            return UNKNOWN_ENTRY
        primary, secondary = self.node_instances.get(node.uuid or "", ([], []))
        return _ok([[i.to_dict() for i in primary], [i.to_dict() for i in secondary]], node.serial_no)

    def _instance_disks(self, query: Any) -> StatusAnswer:
        if not isinstance(query, str):
            return ARGUMENT_ERROR
        inst: Instance | None = self.instances.find(query)
        if inst is None:
            return UNKNOWN_ENTRY
        return _ok([d.to_dict() for d in self._instance_disks_of(inst)], inst.serial_no)

    def _config_query(self, query: Any) -> StatusAnswer:
        if not isinstance(query, str):
            return ARGUMENT_ERROR
        try:
            value = _pointer(self.raw, query)
        except (KeyError, IndexError):
            return UNKNOWN_ENTRY
        return _ok(value, self.cluster_serial)

    def _data_collectors(self, query: Any) -> StatusAnswer:
        collectors = {}
        for name, params in sorted((self.config.cluster.data_collectors or {}).items()):
            params = params if isinstance(params, dict) else {}
            collectors[name] = {"active": bool(params.get("active", True)), "interval": params.get("interval", 5000000)}
        return _ok(collectors, self.cluster_serial)


def encode_status(status_answer: StatusAnswer) -> str:
    status, answer, serial = status_answer
    return wire.encode_reply_msg(wire.reply(status, answer, serial))


def no_config_answer() -> str:
    return encode_status(NO_CONFIG)
