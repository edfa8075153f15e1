"""The query resources only OP_QUERY and OP_QUERY_FIELDS serve (Ganeti's
C{QR_VIA_OP}): C{cluster} (the LUXI resource), and C{os} and C{extstorage},
whose rows come from asking the nodes (OP_OS_DIAGNOSE's and
OP_EXT_STORAGE_DIAGNOSE's merge): the logical unit puts them, as dicts by
field name, in the context's C{live["rows"]}.  Fields, titles and kinds as
Ganeti's query module declares them.
"""

from __future__ import annotations

from typing import Any

from ganeti.query.fields import QFT_BOOL, QFT_OTHER, QFT_TEXT, FieldDef, QueryContext, Resource, field_table

#: OP_QUERY's resources (Ganeti's C{QR_VIA_OP})
VIA_OP = ("cluster", "extstorage", "os")


def _field(name: str, title: str, kind: str, doc: str) -> FieldDef:
    return FieldDef(name, title, kind, doc, lambda row, ctx: row[name])


OS_FIELDS = field_table([
    _field("name", "Name", QFT_TEXT, "Operating system name"),
    _field("valid", "Valid", QFT_BOOL, "Whether operating system definition is valid"),
    _field("hidden", "Hidden", QFT_BOOL, "Whether operating system is hidden"),
    _field("blacklisted", "Blacklisted", QFT_BOOL, "Whether operating system is blacklisted"),
    _field("variants", "Variants", QFT_OTHER, "Operating system variants"),
    _field("api_versions", "ApiVersions", QFT_OTHER, "Operating system API versions"),
    _field("parameters", "Parameters", QFT_OTHER, "Operating system parameters"),
    _field("node_status", "NodeStatus", QFT_OTHER, "Status from node"),
    _field("os_hvp", "OsHypervisorParams", QFT_OTHER, "Operating system specific hypervisor parameters"),
    _field("osparams", "OsParameters", QFT_OTHER, "Operating system specific parameters"),
    _field("trusted", "Trusted", QFT_BOOL, "Whether this OS is trusted"),
])

EXTSTORAGE_FIELDS = field_table([
    _field("name", "Name", QFT_TEXT, "ExtStorage provider name"),
    _field("node_status", "NodeStatus", QFT_OTHER, "Status from node"),
    _field("nodegroup_status", "NodegroupStatus", QFT_OTHER, "Overall Nodegroup status"),
    _field("parameters", "Parameters", QFT_OTHER, "ExtStorage provider parameters"),
])


def _rows(ctx: QueryContext) -> list[dict[str, Any]]:
    return list(ctx.live.get("rows") or [])


def _lookup(ctx: QueryContext, name: Any) -> dict[str, Any] | None:
    return next((row for row in _rows(ctx) if row["name"] == name), None)


OS_RESOURCE = Resource("os", "OS", OS_FIELDS, _rows, _lookup)
EXTSTORAGE_RESOURCE = Resource("extstorage", "ExtStorage", EXTSTORAGE_FIELDS, _rows, _lookup)


def resource(what: str) -> Resource:
    """The resource C{what} of OP_QUERY (one of L{VIA_OP})."""
    if what == "os":
        return OS_RESOURCE
    if what == "extstorage":
        return EXTSTORAGE_RESOURCE
    from ganeti.query.engine import get_resource

    return get_resource(what)


__all__ = ["EXTSTORAGE_FIELDS", "OS_FIELDS", "VIA_OP", "resource"]
