"""The live-data node calls' arguments and answers, as pure functions.

LuxiD's queries (L{ganeti.luxid.live}) and the heartbeat's pushed reports
(L{ganeti.heartbeat.reporter}, L{ganeti.heartbeat.server}) ask the nodes the
same two calls, C{node_info} and C{all_instances_info}, and read their
answers the same way.  Kept apart from the query engine so that NodeD, which
only reports, does not load LuxiD's query modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ganeti.objects import ConfigData

#: hypervisor instance states (Ganeti's HvInstanceState) -> the query's names
_STATES = {0: "running", 1: "shutdown"}
#: node_info hypervisor keys -> node query fields
_HV_FIELDS = {
    "memory_total": "mtotal",
    "memory_free": "mfree",
    "memory_dom0": "mnode",
    "cpu_total": "ctotal",
    "cpu_nodes": "cnodes",
    "cpu_sockets": "csockets",
    "cpu_dom0": "cnos",
}
#: disk templates whose storage noded's node_info reports, and the cluster
#: attribute naming their directory
_STORAGE_DIRS = {"file": "file_storage_dir", "sharedfile": "shared_file_storage_dir"}


def asked_nodes(config: ConfigData) -> dict[str, str]:
    """C{{name: address}} of the nodes to ask: online and vm-capable."""
    return {
        node.name: node.primary_ip or node.name
        for node in sorted(config.nodes.values(), key=lambda n: n.name or "")
        if node.name and not node.offline and node.vm_capable is not False
    }


def storage_units(config: ConfigData) -> list[list[Any]]:
    """node_info's storage unit for C{dfree}/C{dtotal}: the first enabled
    template whose storage noded reports (file, sharedfile), if any."""
    cluster = config.cluster
    for template in cluster.enabled_disk_templates or []:
        attr = _STORAGE_DIRS.get(template)
        directory = getattr(cluster, attr) if attr else None
        if directory:
            return [[template, directory, []]]
    return []


def hypervisor_args(config: ConfigData) -> list[Any]:
    """C{all_instances_info}'s arguments: the enabled hypervisors and their hvparams."""
    cluster = config.cluster
    names = list(cluster.enabled_hypervisors or [])
    hvparams = cluster.hvparams or {}
    return [names, {name: dict(hvparams.get(name) or {}) for name in names}]


def node_info_args(config: ConfigData) -> list[Any]:
    """C{node_info}'s arguments: the storage unit and the default hypervisor."""
    cluster = config.cluster
    hvs = list(cluster.enabled_hypervisors or [])
    if not hvs and cluster.default_hypervisor:
        hvs = [cluster.default_hypervisor]
    specs = [[hvs[0], dict((cluster.hvparams or {}).get(hvs[0]) or {})]] if hvs else []
    return [storage_units(config), specs]


def instance_report(info: Any) -> dict[str, Any] | None:
    """One instance of C{all_instances_info}'s answer, as the query reads it."""
    if not isinstance(info, Mapping):
        return None
    report = dict(info)
    state = report.get("state")
    if isinstance(state, int) and not isinstance(state, bool):
        report["state"] = _STATES.get(state, str(state))
    return report


def instances_report(payload: Any) -> dict[str, Any] | None:
    """C{all_instances_info}'s answer of one node as C{{name: info}}; C{None} if malformed."""
    if not isinstance(payload, Mapping):
        return None
    out = {}
    for name, info in payload.items():
        report = instance_report(info)
        if isinstance(name, str) and report is not None:
            out[name] = report
    return out


def node_report(payload: Any) -> dict[str, Any] | None:
    """C{node_info}'s C{[boot_id, [storage...], [hypervisor...]]} as node query
    fields; C{None} if malformed.  Values the node did not report are left out."""
    if not isinstance(payload, (list, tuple)) or len(payload) != 3:
        return None
    boot_id, storage, hvs = payload
    out: dict[str, Any] = {}
    if isinstance(boot_id, str) and boot_id:
        out["bootid"] = boot_id
    if isinstance(storage, list) and storage and isinstance(storage[0], Mapping):
        for key, field in (("storage_size", "dtotal"), ("storage_free", "dfree")):
            if _number(storage[0].get(key)):
                out[field] = storage[0][key]
    if isinstance(hvs, list) and hvs and isinstance(hvs[0], Mapping):
        for key, field in _HV_FIELDS.items():
            if _number(hvs[0].get(key)):
                out[field] = hvs[0][key]
    return out


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
