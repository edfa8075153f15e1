"""The C{filter} query resource: job filter rules (Ganeti's C{Query.FilterRules}).

Items are the rules of config.data's C{filters}, as stored, in nice-sorted
uuid order.  As in Ganeti, the resource has no name field: a query for an
unknown uuid answers no row, not an error.  Pure: no Twisted, no I/O.
"""

from __future__ import annotations

from typing import Any

from ganeti.objects import nice_sort_key
from ganeti.query.fields import QFT_OTHER, FieldDef, QueryContext, Resource, field_table


def _key(name: str) -> Any:
    return lambda rule, ctx: rule.get(name)


FILTER_FIELDS = field_table([
    FieldDef("watermark", "Watermark", QFT_OTHER, "Highest job ID used at the time when the filter was added",
             _key("watermark")),
    FieldDef("priority", "Priority", QFT_OTHER, "Filter priority", _key("priority")),
    FieldDef("predicates", "Predicates", QFT_OTHER, "List of filter predicates", _key("predicates")),
    FieldDef("action", "Action", QFT_OTHER, "Filter action", _key("action")),
    FieldDef("reason_trail", "ReasonTrail", QFT_OTHER, "Reason why this filter was added", _key("reason_trail")),
    FieldDef("uuid", "UUID", QFT_OTHER, "Filter ID", _key("uuid")),
])


def rules(ctx: QueryContext) -> list[dict[str, Any]]:
    """Every stored rule, by nice-sorted uuid."""
    stored = ctx.config.filters
    return [stored[uuid] for uuid in sorted(stored, key=nice_sort_key) if isinstance(stored[uuid], dict)]


def find_rule(ctx: QueryContext, uuid: Any) -> Any:
    return ctx.config.filters.get(uuid) if isinstance(uuid, str) else None


FILTER_RESOURCE = Resource("filter", "Filter", FILTER_FIELDS, rules, find_rule, namefield=None)
