"""The query layer behind LUXI C{Query}, C{QueryFields} and the legacy queries.

Pure: no Twisted, no I/O.  LuxiD builds a L{QueryContext} from its config
snapshot, loaded jobs, WConfD's lock status and live node data, then calls
L{query}, L{query_fields}, L{legacy_query}, L{cluster_info} or
L{config_values}.  Filters are compiled by L{qlang.compile_filter}.

Modules: L{fields} (what a field is, result statuses and kinds),
L{engine} (answering queries), L{resources} and L{instance} (the field
tables), L{common} (shared field helpers), L{qlang} (filters),
L{cluster} (cluster information).  None of them takes a definition from
this package module.
"""

from ganeti.query.cluster import cluster_info, config_values
from ganeti.query.engine import evaluate_row, get_resource, legacy_query, query, query_fields
from ganeti.query.fields import (
    QFF_HOSTNAME,
    QFF_JOB_ID,
    QFF_NORMAL,
    QFF_TIMESTAMP,
    QFT_BOOL,
    QFT_FLOAT,
    QFT_NUMBER,
    QFT_OTHER,
    QFT_TEXT,
    QFT_TIMESTAMP,
    QFT_UNIT,
    QFT_UNKNOWN,
    RS_NODATA,
    RS_NORMAL,
    RS_OFFLINE,
    RS_UNAVAIL,
    RS_UNKNOWN,
    FieldDef,
    NoData,
    Offline,
    QueryContext,
    Resource,
    Unavail,
)
from ganeti.query.qlang import compile_filter, make_simple_filter, names_from_filter

__all__ = [
    "QFF_HOSTNAME",
    "QFF_JOB_ID",
    "QFF_NORMAL",
    "QFF_TIMESTAMP",
    "QFT_BOOL",
    "QFT_FLOAT",
    "QFT_NUMBER",
    "QFT_OTHER",
    "QFT_TEXT",
    "QFT_TIMESTAMP",
    "QFT_UNIT",
    "QFT_UNKNOWN",
    "RS_NODATA",
    "RS_NORMAL",
    "RS_OFFLINE",
    "RS_UNAVAIL",
    "RS_UNKNOWN",
    "FieldDef",
    "NoData",
    "Offline",
    "QueryContext",
    "Resource",
    "Unavail",
    "cluster_info",
    "compile_filter",
    "config_values",
    "evaluate_row",
    "get_resource",
    "legacy_query",
    "make_simple_filter",
    "names_from_filter",
    "query",
    "query_fields",
]
