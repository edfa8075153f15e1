"""A fake node RPC for the instance LU tests: a small model of the nodes.

L{FakeNodes} answers the instance procedures of L{ganeti.rpc.instances}
as noded would: each node has a memory size, the instances running there
(with their memory), the disks created there, and an OS list.  Every call
is recorded; C{fail[(procedure, node)] = message} (node C{None}: any node)
makes a call fail with that message, C{down} nodes are unreachable.
"""

from __future__ import annotations

from typing import Any

import attrs
from twisted.internet.defer import Deferred

from ganeti.config.bootstrap import grow, initial_config
from ganeti.objects import ConfigData
from ganeti.rpc import RpcResult
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc.contract import Runner

MASTER = "node1.example.test"
N2, N3, N4 = "node2.example.test", "node3.example.test", "node4.example.test"

#: os_diagnose entries: [name, path, status, diagnose, variants, parameters, api_versions, trusted]
OS_LIST = [
    ["noop", "/srv/ganeti/os/noop", True, "", [], [], [20], True],
    ["debootstrap", "/srv/ganeti/os/debootstrap", True, "", ["default", "minimal"],
     [["dhcp", "use dhcp"], ["mirror", "the mirror"]], [20], True],
]


def cluster(nodes: int = 3, **cluster_changes: Any) -> ConfigData:
    """The master and C{nodes} more nodes, no instances."""
    cfg = grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=nodes)
    if cluster_changes:
        cfg = attrs.evolve(cfg, cluster=attrs.evolve(cfg.cluster, **cluster_changes))
    return cfg


def change_node(cfg: ConfigData, name: str, **changes: Any) -> ConfigData:
    nodes = {u: (attrs.evolve(n, **changes) if n.name == name else n) for u, n in cfg.nodes.items()}
    return attrs.evolve(cfg, nodes=nodes)


class FakeNodes(Runner):
    """Node RPC against a model of the nodes (see the module docstring)."""

    def __init__(self, memory: dict[str, int] | None = None, default_memory: int = 4096) -> None:
        self.calls: list[tuple[str, str, list[Any]]] = []
        #: the hooks_runner calls: (node, [hpath, phase, env])
        self.hook_calls: list[tuple[str, list[Any]]] = []
        self.memory = dict(memory or {})
        self.default_memory = default_memory
        self.running: dict[str, dict[str, int]] = {}
        #: instances whose guest powered itself off (hypervisor state 1)
        self.powered_off: set[str] = set()
        self.disks: dict[str, set[str]] = {}
        self.fail: dict[tuple[str, str | None], str] = {}
        self.down: set[str] = set()
        self.os_list = [list(e) for e in OS_LIST]
        self.free_disk = 100000
        #: the clock C{test_delay} sleeps on (none: it returns at once)
        self.clock: Any = None
        #: the exports on each node: {node: {export name: config.ini text}}
        self.exports: dict[str, dict[str, str]] = {}

    # --- inspection -------------------------------------------------------------
    def procedures(self, node: str | None = None) -> list[str]:
        return [p for p, n, _ in self.calls if node is None or n == node]

    def calls_of(self, procedure: str) -> list[tuple[str, list[Any]]]:
        return [(n, a) for p, n, a in self.calls if p == procedure]

    def running_on(self, node: str) -> set[str]:
        return set(self.running.get(node, {}))

    def start(self, node: str, name: str, memory: int = 128) -> None:
        self.running.setdefault(node, {})[name] = memory

    # --- the RPC client's interface ---------------------------------------------
    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> dict[str, RpcResult]:
        out = {}
        node_args = kwargs.get("node_args") or {}
        common = args
        if procedure == "hooks_runner":  # kept apart: the LU tests count the other calls
            self.hook_calls.extend((name, list(args)) for name in dict(nodes))
            return {name: RpcResult(name, True, []) for name in dict(nodes)}
        for name in dict(nodes):
            args = node_args.get(name, common)
            self.calls.append((procedure, name, list(args)))
            if name in self.down:
                out[name] = RpcResult.failure(name, "node unreachable: connection refused")
                continue
            message = self.fail.get((procedure, name), self.fail.get((procedure, None)))
            if message is not None:
                out[name] = RpcResult.failure(name, message)
                continue
            try:
                payload = getattr(self, "_" + procedure)(name, *args)
                if isinstance(payload, Deferred):
                    payload = await payload
            except _Refused as e:
                out[name] = RpcResult.failure(name, str(e))
                continue
            out[name] = RpcResult(name, True, payload)
        return out

    async def close(self) -> None:
        pass

    # --- procedures -------------------------------------------------------------
    def _free(self, node: str) -> int:
        total = self.memory.get(node, self.default_memory)
        return total - sum(self.running.get(node, {}).values())

    def _node_info(self, node: str, storage_units: list[Any], hv_specs: list[Any]) -> Any:
        storage = [{"type": u[0], "name": u[1], "storage_free": self.free_disk, "storage_size": 2 * self.free_disk}
                   for u in storage_units]
        hv = [{"memory_total": self.memory.get(node, self.default_memory), "memory_free": self._free(node),
               "cpu_total": 4} for _spec in hv_specs]
        return ["boot-id", storage, hv]

    def _os_diagnose(self, node: str) -> Any:
        return self.os_list

    def _os_validate(self, node: str, required: bool, name: str, checks: list[str], params: dict[str, Any],
                     force_variant: bool = False) -> Any:
        """Like NodeD's: the OS is known (refused when absent and C{required})."""
        if not any(entry[0] == name.split("+", 1)[0] for entry in self.os_list):
            if required:
                raise _Refused("OS %s not found" % name)
            return False
        return True

    def _bridges_exist(self, node: str, bridges: list[str]) -> Any:
        return None

    def _blockdev_create(self, node: str, disk: dict[str, Any], size: int, owner: str, on_primary: bool,
                         info: str, exclusive: bool) -> Any:
        path = disk["logical_id"][1] if disk.get("logical_id") else None
        if path in self.disks.setdefault(node, set()):
            raise _Refused("File %s exists already" % path)
        self.disks[node].add(path)
        return path

    def _blockdev_remove(self, node: str, disk: dict[str, Any]) -> Any:
        path = disk["logical_id"][1] if disk.get("logical_id") else None
        self.disks.setdefault(node, set()).discard(path)
        return None

    def _blockdev_convert(self, node: str, src: dict[str, Any], dest: dict[str, Any]) -> Any:
        """Both disks must exist on the node (file-like ones: in C{disks})."""
        for disk in (src, dest):
            path = disk["logical_id"][1]
            if disk["dev_type"] in ("file", "sharedfile") and path not in self.disks.get(node, set()):
                raise _Refused("Cannot copy: device %s not found" % path)
        return None

    def _blockdev_getdimensions(self, node: str, disks: list[dict[str, Any]]) -> Any:
        return [[d["size"] * 1024 * 1024, None] if d["logical_id"][1] in self.disks.get(node, set()) else None
                for d in disks]

    def _blockdev_setinfo(self, node: str, disk: dict[str, Any], info: str) -> Any:
        return None

    def _instance_os_add(self, node: str, inst: dict[str, Any], reinstall: bool, debug: int) -> Any:
        rpc_inst.decode_instance(inst)
        return None

    def _export_list(self, node: str) -> Any:
        return sorted(self.exports.get(node, {}))

    def _export_info(self, node: str, name: str) -> Any:
        if name not in self.exports.get(node, {}):
            raise _Refused("Export %s not found" % name)
        return self.exports[node][name]

    def _instance_run_rename(self, node: str, inst: dict[str, Any], old_name: str, debug: int) -> Any:
        return None

    def _instance_start(self, node: str, inst: dict[str, Any], paused: bool, reason: Any) -> Any:
        decoded, _disks = rpc_inst.decode_instance(inst)
        memory = int(inst["beparams"].get("maxmem") or 128)
        if memory > self._free(node) and decoded.name not in self.running.get(node, {}):
            raise _Refused("Not enough memory to start instance %s" % decoded.name)
        if decoded.name in self.powered_off and decoded.name in self.running.get(node, {}):
            raise _Refused("Instance %s is already running" % decoded.name)
        self.start(node, decoded.name or "", memory)
        return None

    def _instance_shutdown(self, node: str, inst: dict[str, Any], timeout: int, reason: Any) -> Any:
        self.running.get(node, {}).pop(inst["name"], None)
        self.powered_off.discard(inst["name"])
        return None

    def _instance_reboot(self, node: str, inst: dict[str, Any], kind: str, timeout: int, reason: Any) -> Any:
        if inst["name"] not in self.running.get(node, {}):
            raise _Refused("Instance %s is not running" % inst["name"])
        return None

    def _instance_balloon_memory(self, node: str, inst: dict[str, Any], memory: int) -> Any:
        if inst["name"] not in self.running.get(node, {}):
            raise _Refused("Cannot balloon the memory of instance %s: it is not running" % inst["name"])
        self.running[node][inst["name"]] = memory
        return None

    def _instance_info(self, node: str, name: str, hypervisor: str, hvparams: Any) -> Any:
        memory = self.running.get(node, {}).get(name)
        state = 1 if name in self.powered_off else 0
        return {} if memory is None else {"memory": memory, "vcpus": 1, "state": state, "time": 1.0}

    def _all_instances_info(self, node: str, hypervisors: Any, hvparams: Any) -> Any:
        return {name: {"memory": m, "vcpus": 1, "state": 1 if name in self.powered_off else 0, "time": 1.0}
                for name, m in self.running.get(node, {}).items()}

    def _test_delay(self, node: str, duration: float) -> Any:
        if self.clock is None:
            return None
        from twisted.internet.task import deferLater

        return deferLater(self.clock, duration, lambda: None)

    def _node_crypto_tokens(self, node: str, requests: list[Any]) -> Any:
        """The node's client certificate digest (made up from its name)."""
        import hashlib

        return [["ssl", hashlib.sha1(node.encode()).hexdigest().upper()] for _request in requests]

    def _node_verify(self, node: str, checks: dict[str, Any], cluster_name: str) -> Any:
        """A healthy node's answer, but for its instances and disk files."""
        from ganeti import GANETI_RELEASE
        from ganeti.rpc import wire

        out: dict[str, Any] = {"nodelist": {}, "ssconf": {}, "version": [wire.PROTOCOL_VERSION, GANETI_RELEASE]}
        if "instancelist" in checks:
            out["instancelist"] = sorted(self.running.get(node, {}))
        check = checks.get(wire.NV_DISK_FILES)
        if check is not None:
            here = {p for p in self.disks.get(node, set()) if p}
            expected = set(check["present"]) | set(check["known"])
            out[wire.NV_DISK_FILES] = {"missing": sorted(set(check["present"]) - here),
                                       "orphans": sorted(here - expected)}
        return out

    def _node_promote_to_mc(self, node: str) -> Any:
        return ["ganeti-rapi: started (pid 1)"]

    def _node_demote_from_mc(self, node: str) -> Any:
        return ["ganeti-rapi: stopped"]

    def _instance_console_info(self, node: str, inst: dict[str, Any]) -> Any:
        return {"instance": inst["name"], "kind": "msg", "message": "fake console"}


class _Refused(Exception):
    pass
