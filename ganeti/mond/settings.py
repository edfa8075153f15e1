"""Which collectors run, how often, and what MonD knows of the cluster.

The cluster decides (C{gnt-cluster modify --enabled-data-collectors
NAME=BOOL --data-collector-interval NAME=SECONDS}); MonD learns it through
confd's DATA_COLLECTORS request (C{{name: {"active": bool, "interval":
microseconds}}}).  A collector the cluster does not name runs every
L{DEFAULT_INTERVAL} seconds, as in Ganeti.  The last answers are kept in
C{ROOT/var/lib/ganeti/mond/cluster.json}, so a MonD restarted while confd
is down still knows what to run, and says that it uses a cached copy.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ganeti import serializer

#: Ganeti's MOND_TIME_INTERVAL (seconds)
DEFAULT_INTERVAL = 5.0
#: Ganeti's MOND_CONFIG_TIME_INTERVAL (seconds)
CONFIG_INTERVAL = 15.0
#: the shortest interval MonD accepts from the cluster (seconds)
MIN_INTERVAL = 0.1


@attrs.frozen
class Setting:
    active: bool = True
    interval: float = DEFAULT_INTERVAL


def parse_collectors(answer: Any) -> dict[str, Setting]:
    """The settings of a DATA_COLLECTORS answer (intervals in µs); bad entries are left out."""
    settings = {}
    if not isinstance(answer, dict):
        raise ValueError("the DATA_COLLECTORS answer is not an object")
    for name, params in answer.items():
        if not isinstance(name, str) or not isinstance(params, dict):
            continue
        active = params.get("active", True)
        interval = params.get("interval", DEFAULT_INTERVAL * 1e6)
        if not isinstance(active, bool) or not isinstance(interval, (int, float)) or isinstance(interval, bool):
            continue
        settings[name] = Setting(active, max(MIN_INTERVAL, interval / 1e6))
    return settings


def setting_of(settings: dict[str, Setting], name: str) -> Setting:
    return settings.get(name) or Setting()


def instance_record(inst: Any) -> dict[str, Any]:
    """What MonD keeps of an instance's config dict."""
    beparams = inst.get("beparams") or {}
    memory = beparams.get("maxmem") or beparams.get("memory") or 0
    reason = inst.get("admin_state_source")
    return {
        "name": inst.get("name") or "",
        "uuid": inst.get("uuid") or "",
        "admin_state": inst.get("admin_state") or "down",
        "hypervisor": inst.get("hypervisor") or "",
        "mtime": float(inst.get("mtime") or 0.0),
        "memory": memory if isinstance(memory, int) else 0,
        "vcpus": beparams.get("vcpus") if isinstance(beparams.get("vcpus"), int) else 0,
        "state_reason": [[reason, "", int(float(inst.get("mtime") or 0) * 1e9)]] if reason else [],
    }


def instances_from_config(raw: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """The primary instances of node C{node} in a parsed config.data."""
    uuids = [uuid for uuid, n in (raw.get("nodes") or {}).items() if isinstance(n, dict) and n.get("name") == node]
    if not uuids:
        return []
    return [instance_record(i) for i in (raw.get("instances") or {}).values()
            if isinstance(i, dict) and i.get("primary_node") == uuids[0]]


def collectors_from_config(raw: dict[str, Any]) -> dict[str, Setting]:
    """The collector settings of a parsed config.data (as confd would answer)."""
    collectors = (raw.get("cluster") or {}).get("data_collectors") or {}
    return parse_collectors({n: p for n, p in collectors.items() if isinstance(p, dict)})


class Cache:
    """MonD's copy of the last answers it had (collectors, instances)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def save(self, collectors: dict[str, Setting], instances: list[dict[str, Any]], when: float) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        value = {"time": when, "instances": instances,
                 "collectors": {n: {"active": s.active, "interval": int(s.interval * 1e6)}
                                for n, s in sorted(collectors.items())}}
        serializer.write_json(self.path, value, durable=False)

    def load(self) -> tuple[dict[str, Setting], list[dict[str, Any]], float] | None:
        try:
            value = serializer.read_json(self.path)
            collectors = parse_collectors(value["collectors"])
            instances = [i for i in value["instances"] if isinstance(i, dict)]
            return collectors, instances, float(value["time"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
