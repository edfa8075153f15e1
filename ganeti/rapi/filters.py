"""RAPI resources of job filter rules (Ganeti's C{R_2_filters}, C{R_2_filters_uuid}).

    GET    /2/filters            [{"uuid": ..., "uri": ...}]; bulk=1: every rule's fields
    POST   /2/filters            add a rule; answers its uuid
    GET    /2/filters/<uuid>     one rule (404 if unknown)
    PUT    /2/filters/<uuid>     replace the rule, or create it under that uuid; answers the uuid
    DELETE /2/filters/<uuid>     remove it; answers null

The body of POST and PUT takes C{priority} (int, default 0), C{predicates}
(list, default []), C{action} (default C{"CONTINUE"}) and C{reason} (list,
default []), nothing else.  As in Ganeti, the changes go straight to LuxiD
(LUXI C{ReplaceFilter}, C{DeleteFilter}): no job is submitted.
"""

from __future__ import annotations

from typing import Any

from ganeti.luxi import methods
from ganeti.rapi.baserlib import ANON, WRITE, Context, route
from ganeti.rapi.http import bad_request, not_found

#: the fields of a rule, in Ganeti's RAPI order (C{FILTER_RULE_FIELDS})
FILTER_RULE_FIELDS = ["watermark", "priority", "predicates", "action", "reason_trail", "uuid"]
#: what a POST or PUT body may hold
_BODY = {"priority": (int, 0), "predicates": (list, []), "action": (None, "CONTINUE"), "reason": (list, [])}


def _rule_parameters(ctx: Context) -> tuple[int, list[Any], Any, list[Any]]:
    """C{(priority, predicates, action, reason)} of the body (Ganeti's C{checkFilterParameters})."""
    body = ctx.body_dict()
    for key in body:
        if key not in _BODY:
            raise bad_request("Invalid body parameters: filter rule doesn't support the parameter '%s'" % key)
    values = []
    for key, (kind, default) in _BODY.items():
        value = body.get(key, default)
        if kind is not None and (isinstance(value, bool) or not isinstance(value, kind)):
            raise bad_request("Parameter '%s' must be of type '%s', not %s" % (key, kind.__name__, type(value).__name__))
        values.append(value)
    priority, predicates, action, reason = values
    return priority, predicates, action, reason


@route("/2/filters", GET=ANON, POST=WRITE)
async def filters(ctx: Context) -> Any:
    """Job filter rules; bulk=1 gives their fields.  POST adds one (its uuid)."""
    if ctx.method == "POST":
        return await ctx.run(methods.ReplaceFilter.call(None, *_rule_parameters(ctx)))
    if ctx.args.bool("bulk"):
        rows = await ctx.run(methods.QueryFilters.call(None, FILTER_RULE_FIELDS))
        return [dict(zip(FILTER_RULE_FIELDS, row)) for row in rows]
    rows = await ctx.run(methods.QueryFilters.call(None, ["uuid"]))
    return [{"uuid": row[0], "uri": "/2/filters/%s" % row[0]} for row in rows]


@route("/2/filters/{name}", GET=ANON, PUT=WRITE, DELETE=WRITE)
async def filter_rule(ctx: Context, name: str) -> Any:
    """One job filter rule: GET it, PUT (replace or create) it, DELETE it."""
    if ctx.method == "DELETE":
        return await ctx.run(methods.DeleteFilter.call(name))
    if ctx.method == "PUT":
        return await ctx.run(methods.ReplaceFilter.call(name, *_rule_parameters(ctx)))
    rows = await ctx.run(methods.QueryFilters.call([name], FILTER_RULE_FIELDS))
    if not rows:
        raise not_found("Filter rule '%s' not found" % name)
    return dict(zip(FILTER_RULE_FIELDS, rows[0]))
