"""The query interface's constants, defined once for every layer.

LUXI C{Query}/C{QueryFields} answers carry them on the wire, so their
values are Ganeti's (spec/luxi.md section 5): the query engine
(L{ganeti.query}) produces them, the command-line tools (L{ganeti.client})
format them and RAPI (L{ganeti.rapi.rlib2}) turns them into its answers.
Standard library only, nothing but constants: every layer may import it.
"""

from __future__ import annotations

# --- resources (Ganeti's QR_*) ------------------------------------------------------
QR_CLUSTER = "cluster"
QR_INSTANCE = "instance"
QR_NODE = "node"
QR_LOCK = "lock"
QR_GROUP = "group"
QR_OS = "os"
QR_JOB = "job"
QR_EXPORT = "export"
QR_NETWORK = "network"
QR_EXTSTORAGE = "extstorage"
QR_FILTER = "filter"

#: the resources of the generic query interface (RAPI's C{/2/query/<resource>}, Ganeti's QR_VIA_RAPI)
QR_VIA_RAPI = (QR_NODE, QR_INSTANCE, QR_GROUP, QR_NETWORK, QR_EXPORT, QR_JOB, QR_LOCK, QR_FILTER)

# --- result statuses of a cell (Ganeti's RS_*) -------------------------------------
RS_NORMAL = 0
RS_UNKNOWN = 1
RS_NODATA = 2
RS_UNAVAIL = 3
RS_OFFLINE = 4
RS_ALL = (RS_NORMAL, RS_UNKNOWN, RS_NODATA, RS_UNAVAIL, RS_OFFLINE)

# --- field kinds (Ganeti's QFT_*) ----------------------------------------------------
QFT_UNKNOWN = "unknown"
QFT_TEXT = "text"
QFT_BOOL = "bool"
QFT_NUMBER = "number"
QFT_FLOAT = "float"
QFT_UNIT = "unit"
QFT_TIMESTAMP = "timestamp"
QFT_OTHER = "other"
QFT_ALL = frozenset({QFT_UNKNOWN, QFT_TEXT, QFT_BOOL, QFT_NUMBER, QFT_FLOAT, QFT_UNIT, QFT_TIMESTAMP, QFT_OTHER})

# --- how filters treat a field (Ganeti's QFF_* flags) -------------------------------
#: plain comparisons
QFF_NORMAL = "normal"
#: C{==} also matches the short name: "node1" matches "node1.example.com"
QFF_HOSTNAME = "hostname"
#: the value is C{[seconds, microseconds]}; filters compare the seconds
QFF_TIMESTAMP = "timestamp"
#: a job id: filter values may be decimal strings
QFF_JOB_ID = "job_id"
