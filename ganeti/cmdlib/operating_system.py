"""OP_OS_DIAGNOSE: the operating systems of the cluster's nodes.

Every online vm-capable node is asked for its OS definitions
(C{os_diagnose}, see L{ganeti.rpc.instances}: C{[name, path, status,
diagnose, variants, parameters, api_versions, trusted]} per OS directory).
A node that cannot be asked is left out (with a warning), so that one
unreachable node does not make every OS invalid.  For each OS name the
answers are merged (L{merge}):

  - C{valid}: the OS is found, and valid, on every node that answered (for
    a node, the first directory of its search path holding the name
    counts; later ones are shadowed);
  - C{variants}, C{parameters}, C{api_versions}: what every node offers
    (in the order of the first node);
  - C{trusted}: trusted on every node;
  - C{node_status}: C{{node name: [[path, status, diagnose, variants,
    parameters, api_versions, trusted], ...]}}, every directory found;
  - C{hidden}, C{blacklisted}: from the cluster's C{hidden_os} and
    C{blacklisted_os}; C{os_hvp}, C{osparams}: the cluster's for the OS.

As in Ganeti, unless C{output_fields} asks for C{hidden}, C{blacklisted}
or C{valid}, the OSes that are hidden, blacklisted or invalid
(respectively) are left out.  C{names} restricts the answer to those OS
names.  The result is one row per OS (sorted by name) with the values of
C{output_fields} in order.  No lock is taken but the shared BGL.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from ganeti import errors, opcodes
from ganeti.cmdlib.base import Feedback, LogicalUnit, register
from ganeti.cmdlib.instance_utils import node_address
from ganeti.objects import ConfigData, nice_sort, nice_sort_key
from ganeti.opcodes.typed import OpOsDiagnose
from ganeti.rpc import procedures, wire

#: seconds a node may take to list its OSes
DIAGNOSE_TIMEOUT = wire.TMO_URGENT

#: the fields that, when asked for, keep the OSes they would otherwise filter out
_STATUS_FIELDS = ("hidden", "blacklisted", "valid")


@attrs.frozen
class OsSummary:
    """One OS as the cluster sees it (see the module docstring)."""

    name: str
    valid: bool
    variants: list[str]
    parameters: list[list[str]]
    api_versions: list[int]
    trusted: bool
    node_status: dict[str, list[list[Any]]]


def _entry(item: Any) -> list[Any] | None:
    """One C{os_diagnose} item, normalized; C{None} if it is malformed."""
    if not isinstance(item, (list, tuple)) or len(item) < 7 or not isinstance(item[0], str):
        return None
    name, path, status, diagnose, variants, parameters, api_versions = item[:7]
    trusted = item[7] if len(item) > 7 else True

    def listed(value: Any) -> list[Any]:
        return list(value) if isinstance(value, (list, tuple)) else []

    params = [list(p) for p in listed(parameters) if isinstance(p, (list, tuple))]
    return [name, path, bool(status), diagnose or "", listed(variants), params, listed(api_versions), bool(trusted)]


def _common(first: list[Any], others: Iterable[list[Any]]) -> list[Any]:
    """The items of C{first} (in order) present in every list of C{others}."""
    keep = list(first)
    for other in others:
        keep = [x for x in keep if x in other]
    return keep


def merge(answers: Mapping[str, Any]) -> dict[str, OsSummary]:
    """Merge the C{os_diagnose} payloads of the nodes that answered.

    @param answers: C{{node name: payload}}
    @return: C{{os name: OsSummary}}
    """
    nodes = nice_sort(answers)
    found: dict[str, dict[str, list[list[Any]]]] = {}
    for node in nodes:
        payload = answers[node]
        for item in payload if isinstance(payload, list) else []:
            entry = _entry(item)
            if entry is None:
                continue
            per_node = found.setdefault(entry[0], {n: [] for n in nodes})
            per_node[node].append(entry[1:])
    out: dict[str, OsSummary] = {}
    for name, per_node in found.items():
        firsts = [dirs[0] if dirs else None for dirs in per_node.values()]
        valid = all(first is not None and first[1] for first in firsts)
        if valid and firsts:
            heads = [f for f in firsts if f is not None]
            variants = _common(heads[0][3], (h[3] for h in heads[1:]))
            parameters = _common(heads[0][4], (h[4] for h in heads[1:]))
            api_versions = _common(heads[0][5], (h[5] for h in heads[1:]))
            trusted = all(h[6] for h in heads)
        else:
            variants, parameters, api_versions, trusted = [], [], [], False
        out[name] = OsSummary(name, valid, variants, parameters, api_versions, trusted, per_node)
    return out


def rows(cfg: ConfigData, summaries: Mapping[str, OsSummary], fields: list[str],
         names: Iterable[str] = ()) -> list[list[Any]]:
    """The answer of OP_OS_DIAGNOSE: one row per OS, filtered as described above."""
    cluster = cfg.cluster
    hidden_os, blacklisted_os = set(cluster.hidden_os or []), set(cluster.blacklisted_os or [])
    wanted = set(names)
    out = []
    for name in sorted(summaries, key=nice_sort_key):
        summary = summaries[name]
        hidden, blacklisted = name in hidden_os, name in blacklisted_os
        if wanted and name not in wanted:
            continue
        if ("hidden" not in fields and hidden) or ("blacklisted" not in fields and blacklisted) \
                or ("valid" not in fields and not summary.valid):
            continue
        values = {
            "name": name,
            "valid": summary.valid,
            "hidden": hidden,
            "blacklisted": blacklisted,
            "variants": list(summary.variants),
            "api_versions": list(summary.api_versions),
            "parameters": [list(p) for p in summary.parameters],
            "node_status": {node: [list(d) for d in dirs] for node, dirs in summary.node_status.items()},
            "os_hvp": dict((cluster.os_hvp or {}).get(name) or {}),
            "osparams": dict((cluster.osparams or {}).get(name) or {}),
            "trusted": summary.trusted,
        }
        out.append([values[f] for f in fields])
    return out


async def diagnose_nodes(lu: LogicalUnit[Any], call: Any, what: str) -> dict[str, Any]:
    """C{{node name: payload}} of a diagnose C{call} (C{os_diagnose},
    C{extstorage_diagnose}) on every online, vm-capable node of C{lu}'s
    config; a node that fails is a warning naming C{what} it was asked for."""
    nodes = sorted((n for n in lu.cfg.nodes.values() if not n.offline and n.vm_capable is not False),
                   key=lambda n: nice_sort_key(n.name or ""))
    answers: dict[str, Any] = {}
    if nodes:
        results = await lu.ctx.rpc().run({n.name: node_address(n) for n in nodes}, call.within(DIAGNOSE_TIMEOUT))
        for node in nodes:
            result = results[node.name]
            if result.failed:
                await lu.log_warning("Cannot list %s of node %s: %s", what, node.name, result.fail_msg)
            else:
                answers[node.name or ""] = result.payload
    return answers


@register
class LUOsDiagnose(LogicalUnit[OpOsDiagnose]):
    """List the cluster's operating systems (see the module docstring)."""

    OP_ID = "OP_OS_DIAGNOSE"
    REQ_BGL = False

    def check_arguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in opcodes.OS_FIELDS]
        if unknown:
            raise errors.OpPrereqError("Unknown output fields selected: %s" % ", ".join(unknown),
                                       errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        cfg = self.cfg
        answers = await diagnose_nodes(self, procedures.os_diagnose.call(), "the operating systems")
        return rows(cfg, merge(answers), list(self.op.output_fields), self.op.names)
