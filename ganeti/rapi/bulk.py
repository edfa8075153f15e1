"""Bulk lists (C{GET /2/instances?bulk=1}) from parts kept per config serial.

A bulk list of 10,000 instances is 36 fields of each, 8.8 MiB of JSON, of
which four fields (C{status}, C{oper_state}, C{oper_ram}, C{oper_vcpus})
come from what the nodes report; the others depend on the config alone.
Asking LuxiD for all of them, decoding, reshaping into objects and
encoding again took about 0.6 s of CPU per request.  Here the fields that
read only the config are asked once per config serial and each item's
object is kept encoded, cut where its live fields go; a request asks the
config serial, then only the names and the live fields, and joins the
kept bytes with the encoded live values.  The answer is the same bytes as
encoding C{[dict(zip(fields, row)), ...]} of a full query.

The serial is asked before the config-only fields: parts computed from a
newer config are kept under the older serial and simply asked again next
time.  When the names of the live query are not those of the kept parts
(an instance added, removed or renamed meanwhile), the request asks every
field at once, as before.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import attrs
import orjson

#: per resource, the fields of its bulk list that read more than the config (their query field has C{needs}:
#: live node data or LuxiD's liveness roster); tests/unit/test_rapi_bulk.py checks this against the query fields
LIVE_FIELDS: dict[str, frozenset[str]] = {
    "instance": frozenset({"oper_state", "oper_ram", "oper_vcpus", "status"}),
}

Query = Callable[[list[str]], Awaitable[list[list[Any]]]]


@attrs.frozen
class Kept:
    """The config-only parts of one bulk list at one config serial.

    @ivar names: the items' names, in the list's order
    @ivar pieces: per item, the encoded bytes around its live values
        (one more piece than live runs)
    """

    serial: Any
    names: list[Any]
    pieces: list[tuple[bytes, ...]]


def _runs(fields: list[str], live: frozenset[str]) -> list[tuple[bool, list[str]]]:
    """C{fields} cut into runs of consecutive live or config-only fields: C{[(is_live, fields), ...]}."""
    runs: list[tuple[bool, list[str]]] = []
    for field in fields:
        is_live = field in live
        if runs and runs[-1][0] == is_live:
            runs[-1][1].append(field)
        else:
            runs.append((is_live, [field]))
    return runs


def _inner(fields: list[str], values: Any) -> bytes:
    """The members of the JSON object C{dict(zip(fields, values))}, without braces."""
    return orjson.dumps(dict(zip(fields, values)))[1:-1]


def usable(resource: str, fields: list[str]) -> bool:
    """Whether the bulk list of C{fields} can be built from kept parts."""
    live = LIVE_FIELDS.get(resource)
    return (live is not None and "name" in fields and "name" not in live and len(set(fields)) == len(fields)
            and any(f in live for f in fields))


def keep(serial: Any, fields: list[str], live: frozenset[str], rows: list[list[Any]]) -> Kept:
    """The parts of the rows of the config-only fields of C{fields} (in their order)."""
    runs = _runs(fields, live)
    static = [f for f in fields if f not in live]
    name_at = static.index("name")
    names, pieces = [], []
    for row in rows:
        names.append(row[name_at])
        out: list[bytes] = []
        current = [b"{"]
        at = 0
        for index, (is_live, run) in enumerate(runs):
            separator = b"," if index else b""
            if is_live:  # its values go between this piece and the next
                current.append(separator)
                out.append(b"".join(current))
                current = []
            else:
                current.append(separator + _inner(run, row[at:at + len(run)]))
                at += len(run)
        current.append(b"}")
        out.append(b"".join(current))
        pieces.append(tuple(out))
    return Kept(serial, names, pieces)


def join(kept: Kept, fields: list[str], live: frozenset[str], rows: list[list[Any]]) -> bytes | None:
    """The bulk list: the kept pieces with C{rows} (C{name} then the live
    fields, in their order) between; C{None} if the names differ."""
    if len(rows) != len(kept.names) or any(row[0] != name for row, name in zip(rows, kept.names)):
        return None
    live_runs = [run for is_live, run in _runs(fields, live) if is_live]
    items: list[bytes] = []
    append = items.append
    if len(live_runs) == 1:
        (run,) = live_runs
        for (head, tail), row in zip(kept.pieces, rows):
            append(head + _inner(run, row[1:]) + tail)
    else:
        for pieces, row in zip(kept.pieces, rows):
            parts = [pieces[0]]
            at = 1
            for run, piece in zip(live_runs, pieces[1:]):
                parts.append(_inner(run, row[at:at + len(run)]))
                parts.append(piece)
                at += len(run)
            append(b"".join(parts))
    return b"[" + b",".join(items) + b"]"


async def bulk_list(cache: dict[Any, Kept], resource: str, fields: list[str], serial: Callable[[], Awaitable[Any]],
                    query: Query) -> bytes:
    """The encoded bulk list of C{fields} of C{resource} (see the module
    docstring); C{cache} keeps the parts between requests.

    @param serial: asks LuxiD the config serial (C{None}: unknown, keep nothing)
    @param query: asks LuxiD rows of plain values of the given fields of every item
    """
    live = LIVE_FIELDS[resource]
    key = (resource, tuple(fields))
    now = await serial()
    kept = cache.get(key)
    if kept is None or now is None or kept.serial != now:
        cache.pop(key, None)
        kept = keep(now, fields, live, await query([f for f in fields if f not in live]))
        if now is not None:
            cache[key] = kept
    body = join(kept, fields, live, await query(["name"] + [f for f in fields if f in live]))
    if body is None:  # the items changed between the two queries
        cache.pop(key, None)
        return orjson.dumps([dict(zip(fields, row)) for row in await query(fields)])
    return body
