"""The query engine: LUXI C{Query}, C{QueryFields} and the legacy queries.

Pure: no Twisted, no I/O.  It looks a resource up in
L{ganeti.query.resources} (imported on first use: LuxiD's context builder
needs only the fields), selects its fields (L{ganeti.query.fields}),
filters its items with L{ganeti.query.qlang} and evaluates the cells.
"""

from __future__ import annotations

from typing import Any, Callable, cast

from ganeti import errors
from ganeti.objects import nice_sort_key
from ganeti.query import qlang
from ganeti.query.fields import FieldDef, QueryContext, Resource, unknown_field


def get_resource(resource: str) -> Resource:
    """The L{Resource} called C{resource}.

    @raise errors.OpPrereqError: (C{ECODE_INVAL}) no such resource.
    """
    from ganeti.query.resources import RESOURCES

    found = RESOURCES.get(resource) if isinstance(resource, str) else None
    if found is None:
        raise errors.OpPrereqError("Resource type '%s' unknown" % (resource,), errors.ECODE_INVAL)
    return found


def _check_names(kind: str, values: Any) -> list[Any]:
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
        raise errors.OpPrereqError("%s must be a list of strings" % kind, errors.ECODE_INVAL)
    return list(values)


def _select(res: Resource, names: list[str]) -> list[FieldDef]:
    return [res.fields.get(name) or unknown_field(name) for name in names]


def _wanted_items(res: Resource, ctx: QueryContext, names: list[Any] | None) -> list[Any]:
    """The items to look at: C{names} in order (without repeats) or all."""
    if not names:
        if ctx.columns is None:
            return res.items(ctx)
        found = ctx.columns.get((res.name, "items"))
        if found is None:
            found = ctx.columns[(res.name, "items")] = res.items(ctx)
        return cast("list[Any]", found)
    return [item for item, _name in _named_items(res, ctx, names)]


def _named_items(res: Resource, ctx: QueryContext, names: list[Any]) -> list[tuple[Any, Any]]:
    """C{(item, name)} for C{names} in order, without repeats: each item
    with the first name that found it.
    @raise errors.OpPrereqError: (C{ECODE_NOENT}) a name finds nothing
    """
    items, seen = [], set()
    for name in names:
        item = res.lookup(ctx, name)
        if item is None:
            raise errors.OpPrereqError("%s '%s' not known" % (res.title, name), errors.ECODE_NOENT)
        key = id(item) if not isinstance(item, tuple) else item[0]
        if key in seen:
            continue
        seen.add(key)
        items.append((item, name))
    return items


def _name_clause(res: Resource, name: Any) -> Callable[[Callable[[str], tuple[int, Any]]], bool]:
    """The filter C{["==", namefield, name]} of C{res}, compiled."""
    return qlang.compile_filter([qlang.OP_EQUAL, res.namefield, name], res.fields)


def query(resource: str, fields: list[str], qfilter: Any, ctx: QueryContext) -> dict[str, Any]:
    """Answer LUXI C{Query(resource, fields, qfilter)}.

    Rows come in Ganeti's order: names requested by a filter that is a plain
    OR of C{==} on the name field in the order given, otherwise every item
    (nice-sorted names, jobs by id, locks by name).

    @return: C{{"fields": [fielddef, ...], "data": [[[status, value], ...], ...]}}
    @raise errors.OpPrereqError: unknown resource, or a requested name is
        not known (C{ECODE_NOENT}).
    @raise errors.QueryFilterParseError: the filter is malformed.
    """
    return query_resource(get_resource(resource), fields, qfilter, ctx)


def query_resource(res: Resource, fields: list[str], qfilter: Any, ctx: QueryContext) -> dict[str, Any]:
    """L{query} of a resource given as such (OP_QUERY's C{os} and C{extstorage})."""
    selected = _select(res, _check_names("Fields", fields))
    predicate = qlang.compile_filter(qfilter, res.fields)
    names = qlang.names_from_filter(qfilter, res.namefield) if res.namefield else None
    if names and res.namefield:
        # a plain OR of == on the name: each item is tested first with the
        # clause of the name that found it (an OR of 1,000 names on 1,000
        # items: 1,000 tests, not half a million); the whole filter only if
        # that clause alone does not hold (a UUID, a name given twice)
        items = [item for item, name in _named_items(res, ctx, names)
                 if _name_clause(res, name)(_cell_getter(res, item, ctx))
                 or predicate(_cell_getter(res, item, ctx))]
    else:
        items = _wanted_items(res, ctx, names)
        if qfilter is not None:
            items = [item for item in items if predicate(_cell_getter(res, item, ctx))]
    whole = qfilter is None and not names
    columns = [_column(res, f, items, ctx, whole, cells=True) for f in selected]
    data = [list(row) for row in zip(*columns)] if columns else [[] for _ in items]
    return {"fields": [f.to_dict() for f in selected], "data": data}


def _column(res: Resource, fdef: FieldDef, items: list[Any], ctx: QueryContext, whole: bool, *,
            cells: bool) -> list[Any]:
    """The cells (or plain values) of C{fdef} for C{items}; taken from (and
    kept in) C{ctx.columns} when C{items} are all of the resource's items
    and the field reads nothing but the config."""
    kept = ctx.columns
    if kept is None or not whole or fdef.needs:
        return fdef.column(items, ctx) if cells else fdef.values(items, ctx)
    key = (res.name, fdef.name, cells)
    found = kept.get(key)
    if found is None or len(found) != len(items):
        found = kept[key] = fdef.column(items, ctx) if cells else fdef.values(items, ctx)
    return cast("list[Any]", found)


def _cell_getter(res: Resource, item: Any, ctx: QueryContext) -> Callable[[str], tuple[int, Any]]:
    """C{get(field_name) -> (status, value)} of C{item} for a filter, each field computed once."""
    cells: dict[str, tuple[int, Any]] = {}

    def get(name: str) -> tuple[int, Any]:
        cell = cells.get(name)
        if cell is None:
            cell = cells[name] = res.fields[name].evaluate(item, ctx)
        return cell

    return get


def query_fields(resource: str, names: list[str] | None) -> dict[str, Any]:
    """Answer LUXI C{QueryFields}: C{None} or C{[]} means all, sorted by name."""
    return fields_of(get_resource(resource), names)


def fields_of(res: Resource, names: list[str] | None) -> dict[str, Any]:
    """L{query_fields} of a resource given as such."""
    if not names:
        selected = [res.fields[n] for n in sorted(res.fields, key=nice_sort_key)]
    else:
        selected = _select(res, _check_names("Fields", names))
    return {"fields": [f.to_dict() for f in selected]}


def legacy_query(resource: str, names: list[Any] | None, fields: list[str], ctx: QueryContext) -> list[Any]:
    """Answer the old-style C{QueryNodes}/C{QueryInstances}/C{QueryGroups}/C{QueryJobs}.

    Rows hold plain values (a cell whose status is not normal becomes
    C{None}); C{names=[]} means all items.  Names may also be UUIDs or
    unique short host names.  For jobs the names are job ids and an unknown
    job gives a C{None} row.

    @raise errors.OpPrereqError: an unknown field (C{ECODE_INVAL}) or an
        unknown name (C{ECODE_NOENT}).
    """
    res = get_resource(resource)
    fields = _check_names("Fields", fields)
    unknown = [name for name in fields if name not in res.fields]
    if unknown:
        raise errors.OpPrereqError("Unknown output fields selected: %s" % ", ".join(unknown), errors.ECODE_INVAL)
    if names is None:
        names = []
    if not isinstance(names, (list, tuple)):
        raise errors.OpPrereqError("Names must be a list", errors.ECODE_INVAL)
    selected = [res.fields[name] for name in fields]
    items = _wanted_items(res, ctx, list(names))
    if not res.row_for_missing:
        return _plain_rows(res, selected, items, ctx, not names)
    rows = iter(_plain_rows(res, selected, [item for item in items if item[1] is not None], ctx, False))
    return [None if item[1] is None else next(rows) for item in items]


def _plain_rows(res: Resource, selected: list[FieldDef], items: list[Any], ctx: QueryContext,
                whole: bool) -> list[list[Any]]:
    """Rows of plain values, evaluated column by column."""
    columns = [_column(res, f, items, ctx, whole, cells=False) for f in selected]
    return [list(row) for row in zip(*columns)] if columns else [[] for _ in items]


def evaluate_row(resource: str, fields: list[str], item: Any, ctx: QueryContext) -> list[tuple[int, Any]]:
    """C{[(status, value), ...]} of C{fields} for one C{item}.

    C{item} is what the resource lists: a config object, C{(job_id, job)}
    for jobs (e.g. for WaitForJobChange), C{(name, owners, pending)} for
    locks.  Unknown fields give C{(RS_UNKNOWN, None)}.
    """
    res = get_resource(resource)
    return [f.evaluate(item, ctx) for f in _select(res, fields)]
