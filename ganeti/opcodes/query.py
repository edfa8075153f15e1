"""The query and cluster-housekeeping opcodes with no family of their own
(Ganeti 3.0's parameters): C{OP_QUERY}, C{OP_QUERY_FIELDS},
C{OP_CLUSTER_CONFIG_QUERY}, C{OP_CLUSTER_POST_INIT},
C{OP_CLUSTER_ACTIVATE_MASTER_IP} and C{OP_CLUSTER_DEACTIVATE_MASTER_IP}.

Declared with L{ganeti.opcodes.base.define}; imported by L{ganeti.opcodes}.
"""

from __future__ import annotations

from ganeti.opcodes.base import (
    ABSENT,
    REQUIRED,
    T_ANY,
    T_BOOL,
    T_NONEMPTY_STR,
    Param,
    define,
    t_list,
    t_maybe,
    t_one_of,
)

#: the resources OP_QUERY serves (Ganeti's C{QR_VIA_OP}; the others go through LUXI)
QR_VIA_OP = ("cluster", "extstorage", "os")

define(
    "OP_QUERY",
    [
        Param("what", t_one_of(*QR_VIA_OP), REQUIRED, "resource to query: %s" % ", ".join(QR_VIA_OP)),
        Param("use_locking", T_BOOL, False, "whether to use synchronization"),
        Param("fields", t_list(T_NONEMPTY_STR), REQUIRED, "requested fields"),
        Param("qfilter", t_maybe(t_list(T_ANY)), ABSENT, "query filter"),
    ],
    doc="Query for resources (those not served by LUXI's Query).",
    result='{"fields": [fielddef, ...], "data": [[[status, value], ...], ...]} (as LUXI Query)',
    summary="what",
)

define(
    "OP_QUERY_FIELDS",
    [
        Param("what", t_one_of(*QR_VIA_OP), REQUIRED, "resource to query: %s" % ", ".join(QR_VIA_OP)),
        Param("fields", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "requested fields; if not given, all"),
    ],
    doc="Query for the fields of a resource.",
    result='{"fields": [fielddef, ...]} (as LUXI QueryFields)',
    summary="what",
)

define(
    "OP_CLUSTER_CONFIG_QUERY",
    [Param("output_fields", t_list(T_NONEMPTY_STR), REQUIRED, "fields of the cluster resource")],
    doc="Query cluster configuration values (the cluster resource's fields).",
    result="list of values, one per field",
)

define("OP_CLUSTER_POST_INIT", [], doc="Run the cluster-init hooks after a cluster was initialised.", result="true")

define("OP_CLUSTER_ACTIVATE_MASTER_IP", [], doc="Activate the master IP on the master node.")

define("OP_CLUSTER_DEACTIVATE_MASTER_IP", [], doc="Deactivate the master IP on the master node.")

define("OP_CLUSTER_RENAME", [Param("name", T_NONEMPTY_STR, REQUIRED, "the new name (it must resolve)")],
       doc="Rename the cluster: its name and master IP become the new name's.", result="the new name",
       summary="name")

define("OP_CLUSTER_DESTROY", [], doc="Check that the cluster can be destroyed and turn its master IP off.",
       result="the master node's UUID (the caller then removes the cluster's files)")
