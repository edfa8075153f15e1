"""OP_EXT_STORAGE_DIAGNOSE: the ExtStorage providers of the cluster's nodes
(Ganeti's C{extstorage} query resource).

Every online vm-capable node is asked for its providers
(C{extstorage_diagnose}: C{[name, path, ok, diagnose, [[param, help],
...]]} per provider directory, see L{ganeti.backend.storage.extstorage}).
A node that cannot be asked is left out (with a warning).  For each
provider name, as Ganeti's C{ExtStorageQuery}:

  - C{node_status}: C{{node name: [[path, ok, diagnose, params], ...]}}
    (an empty list for a node that answered without it);
  - C{nodegroup_status}: C{{group name: bool}}, false if any online
    vm-capable member lacks a valid copy;
  - C{parameters}: C{[[name, help], ...]} every node offers (empty if a
    node has no valid copy).

Node names (not UUIDs) key C{node_status}, as in our OP_OS_DIAGNOSE.
C{names} restricts the answer to those providers.  One row per provider,
sorted by name, with the values of C{output_fields} in order.  No lock but
the shared BGL.
"""

from __future__ import annotations

from typing import Any, Mapping

from ganeti import errors
from ganeti.cmdlib.base import Feedback, LogicalUnit, register
from ganeti.cmdlib.operating_system import diagnose_nodes
from ganeti.objects import ConfigData, nice_sort, nice_sort_key
from ganeti.opcodes.cluster import EXTSTORAGE_FIELDS
from ganeti.opcodes.typed import OpExtStorageDiagnose
from ganeti.rpc import procedures

#: seconds a node may take to list its providers


def _entry(item: Any) -> list[Any] | None:
    if not isinstance(item, (list, tuple)) or len(item) != 5 or not isinstance(item[0], str):
        return None
    name, path, ok, diagnose, params = item
    parameters = [list(p) for p in params if isinstance(p, (list, tuple)) and len(p) == 2] \
        if isinstance(params, (list, tuple)) else []
    return [name, path, bool(ok), diagnose or "", parameters]


def by_provider(answers: Mapping[str, Any]) -> dict[str, dict[str, list[list[Any]]]]:
    """C{{provider: {node: [[path, ok, diagnose, params], ...]}}} from the
    C{extstorage_diagnose} payloads C{{node name: payload}}."""
    nodes = nice_sort(answers)
    found: dict[str, dict[str, list[list[Any]]]] = {}
    for node in nodes:
        payload = answers[node]
        for item in payload if isinstance(payload, list) else []:
            entry = _entry(item)
            if entry is not None:
                found.setdefault(entry[0], {n: [] for n in nodes})[node].append(entry[1:])
    return found


def rows(cfg: ConfigData, answers: Mapping[str, Any], fields: list[str], names: list[str]) -> list[list[Any]]:
    """The answer of OP_EXT_STORAGE_DIAGNOSE (see the module docstring)."""
    found = by_provider(answers)
    wanted = set(names)
    out = []
    for name in sorted(found, key=nice_sort_key):
        if wanted and name not in wanted:
            continue
        per_node = found[name]
        groups = {}
        for group in cfg.nodegroups.values():
            members = [n for n in cfg.nodes.values()
                       if n.group == group.uuid and not n.offline and n.vm_capable is not False and n.name in per_node]
            groups[group.name or ""] = all(bool(per_node[n.name or ""]) and per_node[n.name or ""][0][1]
                                           for n in members)
        parameters: list[list[str]] = []
        for index, entries in enumerate(per_node.values()):
            if not entries or not entries[0][1]:
                parameters = []
                break
            params = [list(p) for p in entries[0][3]]
            parameters = params if index == 0 else [p for p in parameters if p in params]
        values = {"name": name, "node_status": per_node, "nodegroup_status": groups, "parameters": parameters}
        out.append([values[f] for f in fields])
    return out


@register
class LUExtStorageDiagnose(LogicalUnit[OpExtStorageDiagnose]):
    """List the cluster's ExtStorage providers (see the module docstring)."""

    OP_ID = "OP_EXT_STORAGE_DIAGNOSE"
    REQ_BGL = False

    def check_arguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in EXTSTORAGE_FIELDS]
        if unknown:
            raise errors.OpPrereqError("Unknown output fields selected: %s" % ", ".join(unknown),
                                       errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        answers = await diagnose_nodes(self, procedures.extstorage_diagnose.call(), "the ExtStorage providers")
        return rows(cfg, answers, list(self.op.output_fields), list(self.op.names))
