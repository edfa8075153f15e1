"""Backup and move opcodes: OP_BACKUP_QUERY, OP_BACKUP_PREPARE,
OP_BACKUP_EXPORT, OP_BACKUP_REMOVE, OP_INSTANCE_MOVE,
OP_INSTANCE_CHANGE_GROUP, OP_GROUP_EVACUATE (Ganeti 3.0's parameters);
imported by L{ganeti.opcodes}."""

from __future__ import annotations

from ganeti.opcodes.base import (
    ABSENT,
    P_INSTANCE_NAME,
    P_INSTANCE_UUID,
    REQUIRED,
    T_ANY,
    T_BOOL,
    T_FLOAT,
    T_INT,
    T_NONEMPTY_STR,
    T_NONNEG_INT,
    T_STR,
    Param,
    define,
    t_list,
    t_maybe,
    t_one_of,
)

EXPORT_MODE_LOCAL = "local"
EXPORT_MODE_REMOTE = "remote"
EXPORT_MODES = (EXPORT_MODE_LOCAL, EXPORT_MODE_REMOTE)

define(
    "OP_BACKUP_QUERY",
    [
        Param("nodes", t_list(T_NONEMPTY_STR), [], "nodes to ask (default: all)"),
        Param("use_locking", T_BOOL, False, "whether to use synchronization"),
    ],
    doc="Lists the exports on the nodes.",
    result="{node name: [export name, ...] or false when the node failed}",
)

define(
    "OP_BACKUP_PREPARE",
    [P_INSTANCE_NAME, P_INSTANCE_UUID, Param("mode", t_one_of(*EXPORT_MODES), REQUIRED, "export mode")],
    doc="Prepares an instance export.",
    result="null (local mode)",
    summary="instance_name",
)

define(
    "OP_BACKUP_EXPORT",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        Param("compress", T_STR, "none", "compression mode to use for moves during backups/imports"),
        Param("shutdown_timeout", T_NONNEG_INT, 120, "how long to wait for the instance to shut down"),
        Param("target_node", T_ANY, REQUIRED, "target node (local mode)"),
        Param("target_node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "target node UUID (local mode)"),
        Param("shutdown", T_BOOL, True, "whether to shut the instance down before the export"),
        Param("remove_instance", T_BOOL, False, "whether to remove the instance after the export"),
        Param("ignore_remove_failures", T_BOOL, False, "whether to ignore failures while removing the instance"),
        Param("mode", t_one_of(*EXPORT_MODES), EXPORT_MODE_LOCAL, "export mode"),
        Param("x509_key_name", t_maybe(t_list(T_ANY)), ABSENT, "name of the X509 key (remote mode)"),
        Param("destination_x509_ca", t_maybe(T_STR), ABSENT, "destination X509 CA (remote mode)"),
        Param("zero_free_space", T_BOOL, False, "whether to zero the free space of the disks"),
        Param("zeroing_timeout_fixed", t_maybe(T_INT), ABSENT, "fixed part of the zeroing timeout"),
        Param("zeroing_timeout_per_mib", t_maybe(T_FLOAT), ABSENT, "per-MiB part of the zeroing timeout"),
        Param("long_sleep", T_BOOL, False, "whether to allow long instance shutdowns during exports"),
    ],
    doc="Export an instance.",
    result="[finalized: bool, [disk exported: bool, ...]]",
    summary="instance_name",
)

define(
    "OP_BACKUP_REMOVE",
    [P_INSTANCE_NAME, P_INSTANCE_UUID],
    doc="Remove an instance's export.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_MOVE",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        Param("shutdown_timeout", T_NONNEG_INT, 120, "how long to wait for the instance to shut down"),
        Param("ignore_ipolicy", T_BOOL, False, "whether to ignore ipolicy violations"),
        Param("target_node", T_NONEMPTY_STR, REQUIRED, "target node for the instance move"),
        Param("target_node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "target node UUID for the instance move"),
        Param("compress", T_STR, "none", "compression mode to use during the move"),
        Param("ignore_consistency", T_BOOL, False, "whether to ignore disk consistency"),
    ],
    doc="Move an instance (copy its disks) to another node.",
    summary="instance_name",
)

P_EARLY_RELEASE = Param("early_release", T_BOOL, False, "whether to release locks as soon as possible")
P_IALLOCATOR = Param("iallocator", t_maybe(T_STR), ABSENT, "allocator deciding the target nodes")
P_TARGET_GROUPS = Param("target_groups", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT,
                        "destination group names or UUIDs (default: all but the current group)")

define(
    "OP_INSTANCE_CHANGE_GROUP",
    [P_INSTANCE_NAME, P_INSTANCE_UUID, P_EARLY_RELEASE, P_IALLOCATOR, P_TARGET_GROUPS],
    doc="Move an instance to another node group (submits the jobs that do it).",
    result='{"jobs": [[true, job_id] | [false, error], ...]}',
    summary="instance_name",
)

define(
    "OP_GROUP_EVACUATE",
    [
        Param("group_name", T_NONEMPTY_STR, REQUIRED, "group name"),
        P_EARLY_RELEASE,
        P_IALLOCATOR,
        P_TARGET_GROUPS,
        Param("sequential", T_BOOL, False, "sequential job execution"),
        Param("force_failover", T_BOOL, False, "disallow migration moves and always use failovers"),
    ],
    doc="Move every instance of a node group to other groups (submits the jobs that do it).",
    result='{"jobs": [[true, job_id] | [false, error], ...]}',
    summary="group_name",
)
