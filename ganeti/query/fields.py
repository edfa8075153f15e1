"""Query fields: what a cell of a LUXI C{Query} answer is, and how it is computed.

Pure: no Twisted, no I/O.  Everything a query needs arrives in a
L{QueryContext}; the per-resource field tables live in
L{ganeti.query.resources} and L{ganeti.query.instance}, the engine that
answers queries with them in L{ganeti.query.engine}.  L{cluster_info}
and L{config_values} (from L{ganeti.query.cluster}) are re-exported here.

A field is a L{FieldDef}: Ganeti's C{name}, C{title}, C{kind} and C{doc}
(what C{QueryFields} returns) plus a C{getter(item, ctx)} that returns the
value or raises L{NoData}, L{Unavail} or L{Offline}; those become the
result statuses L{RS_NODATA}, L{RS_UNAVAIL} and L{RS_OFFLINE}.  Every cell
of a result is C{[status, value]}, the value C{None} unless the status is
L{RS_NORMAL} (spec/luxi.md section 5).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, TypeVar

import attrs

from ganeti import errors
from ganeti.objects import ConfigData
from ganeti.query.cluster import cluster_info, config_values  # noqa: F401  (re-exported)
from ganeti.querydefs import (  # noqa: F401  (re-exported: the query layer's names)
    QFF_HOSTNAME,
    QFF_JOB_ID,
    QFF_NORMAL,
    QFF_TIMESTAMP,
    QFT_ALL,
    QFT_BOOL,
    QFT_FLOAT,
    QFT_NUMBER,
    QFT_OTHER,
    QFT_TEXT,
    QFT_TIMESTAMP,
    QFT_UNIT,
    QFT_UNKNOWN,
    RS_ALL,
    RS_NODATA,
    RS_NORMAL,
    RS_OFFLINE,
    RS_UNAVAIL,
    RS_UNKNOWN,
)

# --- data beyond the config a field needs (L{FieldDef.needs}) ------------------
#: the node daemons' C{all_instances_info} (instance state, memory, vcpus)
NEED_LIVE_INSTANCES = "live-instances"
#: the node daemons' C{node_info} (memory, storage, CPUs, boot id)
NEED_LIVE_NODES = "live-nodes"
#: C{instance_console_info} of the running instances (with their live state)
NEED_CONSOLE = "console"
#: LuxiD's node liveness roster (L{QueryContext.liveness}); never cached
NEED_LIVENESS = "liveness"
#: the watcher's pause (L{QueryContext.watcher_pause}, a file LuxiD reads); never cached
NEED_WATCHER = "watcher"
#: needs LuxiD answers itself, without asking any node
LOCAL_NEEDS = frozenset([NEED_LIVENESS, NEED_WATCHER])

_T = TypeVar("_T")


class NoData(Exception):
    """Raised by a getter: the data is missing (e.g. no live data)."""


class Unavail(Exception):
    """Raised by a getter: the field does not apply to this item."""


class Offline(Exception):
    """Raised by a getter: the node the data lives on is offline."""


_STATUS_OF = {NoData: RS_NODATA, Unavail: RS_UNAVAIL, Offline: RS_OFFLINE}

Getter = Callable[[Any, "QueryContext"], Any]


def _unknown_getter(item: Any, ctx: QueryContext) -> Any:
    raise AssertionError("unknown fields are never evaluated")


@attrs.frozen
class FieldDef:
    """One query field: what C{QueryFields} shows plus how to compute it."""

    name: str
    title: str
    kind: str
    doc: str
    getter: Getter = attrs.field(eq=False, repr=False)
    #: one of the C{QFF_*} constants
    qff: str = QFF_NORMAL
    #: the C{NEED_*} data the getter reads from L{QueryContext.live}
    needs: frozenset[str] = frozenset()

    def to_dict(self) -> dict[str, str]:
        """The wire form C{{"name", "title", "kind", "doc"}}."""
        return {"name": self.name, "title": self.title, "kind": self.kind, "doc": self.doc}

    def renamed(self, name: str) -> FieldDef:
        """The same field under another name (Ganeti's field aliases)."""
        return attrs.evolve(self, name=name)

    def evaluate(self, item: Any, ctx: QueryContext) -> tuple[int, Any]:
        """C{(status, value)} of this field for C{item}."""
        if self.kind == QFT_UNKNOWN:
            return (RS_UNKNOWN, None)
        try:
            return (RS_NORMAL, self.getter(item, ctx))
        except (NoData, Unavail, Offline) as e:
            return (_STATUS_OF[type(e)], None)

    def column(self, items: list[Any], ctx: QueryContext) -> list[list[Any]]:
        """The cells C{[status, value]} of this field for each of C{items}.

        The engine evaluates a query column by column: one loop per field
        with the getter at hand, no per-cell dispatch.
        """
        if self.kind == QFT_UNKNOWN:
            return [[RS_UNKNOWN, None] for _ in items]
        getter = self.getter
        cells: list[list[Any]] = []
        append = cells.append
        for item in items:
            try:
                append([RS_NORMAL, getter(item, ctx)])
            except NoData:
                append([RS_NODATA, None])
            except Unavail:
                append([RS_UNAVAIL, None])
            except Offline:
                append([RS_OFFLINE, None])
        return cells

    def values(self, items: list[Any], ctx: QueryContext) -> list[Any]:
        """The plain values of this field for each of C{items} (C{None} where the status is not normal)."""
        if self.kind == QFT_UNKNOWN:
            return [None] * len(items)
        getter = self.getter
        values: list[Any] = []
        append = values.append
        for item in items:
            try:
                append(getter(item, ctx))
            except (NoData, Unavail, Offline):
                append(None)
        return values


def unknown_field(name: str) -> FieldDef:
    """The definition Ganeti returns for a requested field it does not know."""
    return FieldDef(name, name, QFT_UNKNOWN, "Unknown field '%s'" % name, _unknown_getter)


@attrs.frozen
class QueryContext:
    """Everything a query may look at.

    C{locks} has WConfD's C{listLocksWaitingStatus} shape
    C{[[[lock, [[owner, mode], ...]], ...], [[prio, owner, [[lock, mode], ...]], ...]]}
    where an owner is C{[job_id_or_string, livelock_file, pid]}.

    C{live} maps a node name to what its node daemon reported, a dict:
    node live fields by their query name (C{"mfree"}, C{"bootid"}, ...) and
    C{"instances"}: instance name -> C{{"state": "running"|"shutdown",
    "memory": MiB, "vcpus": n}} (plus C{"console"}, the console dict, when
    a C{NEED_CONSOLE} field was asked for).  A node missing from C{live}
    has no data.  LuxiD fills C{live} (L{ganeti.luxid.live}) only with
    what the fields' C{needs} ask for.

    C{liveness} is LuxiD's roster (L{ganeti.heartbeat.roster.Roster.snapshot}),
    empty when LuxiD does not listen for heartbeats.

    C{watcher_pause} is the epoch until which the watcher is paused, or
    C{None} when it is not paused (the caller drops past pauses).
    """

    config: ConfigData
    jobs: Mapping[int, Any] = attrs.field(factory=dict)
    locks: Any = attrs.field(factory=lambda: [[], []])
    live: Mapping[str, Any] = attrs.field(factory=dict)
    archived_jobs: frozenset[int] = frozenset()
    drain_flag: bool = False
    watcher_pause: float | None = None
    #: node name -> C{{"liveness", "since", "last_seen", "boot_id", ...}} of LuxiD's roster
    liveness: Mapping[str, Any] = attrs.field(factory=dict)
    #: the item list and the columns of config-only fields (no C{needs}) over
    #: every item of a resource, kept by the caller while C{config} stays the
    #: same (LuxiD: per config serial), so that a repeated listing computes
    #: only its live columns; C{None}: none kept.  Only for resources whose
    #: fields without C{needs} read nothing but the config (instances, nodes,
    #: groups, the cluster; not jobs or locks).  Keyed by the engine; never modified.
    columns: dict[Any, Any] | None = attrs.field(default=None, eq=False, repr=False)
    _cache: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def memo(self, key: str, compute: Callable[[QueryContext], _T]) -> _T:
        """C{compute(self)}, computed once per context (for indexes)."""
        try:
            return self._cache[key]  # type: ignore[no-any-return]  # (not cast(): a call per cell)
        except KeyError:
            value = self._cache[key] = compute(self)
            return value


@attrs.frozen
class Resource:
    """A queryable resource: its fields and how to list and find its items.

    C{items(ctx)} lists every item in Ganeti's order; C{lookup(ctx, name)}
    finds one by name (C{None} if unknown); C{row_for_missing} says whether
    an unknown requested name yields a row (jobs) instead of an error.
    """

    name: str
    title: str
    fields: Mapping[str, FieldDef]
    items: Callable[[QueryContext], list[Any]] = attrs.field(eq=False, repr=False)
    lookup: Callable[[QueryContext, Any], Any] = attrs.field(eq=False, repr=False)
    #: the field whose C{==} filters name items directly (None: never)
    namefield: str | None = "name"
    row_for_missing: bool = False


def field_table(fields: Iterable[FieldDef], aliases: Iterable[tuple[str, str]] = ()) -> dict[str, FieldDef]:
    """A name -> field map; C{aliases} are C{(alias, target)} pairs.

    @raise errors.ProgrammerError: a name is defined twice.
    """
    table: dict[str, FieldDef] = {}
    for fdef in fields:
        if fdef.name in table:
            raise errors.ProgrammerError("duplicate query field %r" % fdef.name)
        if fdef.kind not in QFT_ALL:
            raise errors.ProgrammerError("bad kind %r for field %r" % (fdef.kind, fdef.name))
        table[fdef.name] = fdef
    for alias, target in aliases:
        if alias in table:
            raise errors.ProgrammerError("duplicate query field %r" % alias)
        table[alias] = table[target].renamed(alias)
    return table
