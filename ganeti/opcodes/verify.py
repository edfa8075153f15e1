"""The opcodes OP_CLUSTER_VERIFY submits and the disk checks of the cluster.

Declared from Ganeti 3.0's parameter tables (C{OpClusterVerifyGroup},
C{OpClusterVerifyDisks}, C{OpGroupVerifyDisks},
C{OpClusterRepairDiskSizes}); imported by L{ganeti.opcodes}, which is
where callers look opcodes up.
"""

from __future__ import annotations

from ganeti.opcodes.base import (
    ABSENT,
    REQUIRED,
    T_BOOL,
    T_NONEMPTY_STR,
    T_STR,
    Param,
    define,
    t_list,
    t_maybe,
)

define(
    "OP_CLUSTER_VERIFY_GROUP",
    [
        Param("group_name", T_NONEMPTY_STR, REQUIRED, "node group (name or UUID)"),
        Param("debug_simulate_errors", T_BOOL, False, "inject fake errors (testing)"),
        Param("error_codes", T_BOOL, False, "machine-parsable error output"),
        Param("skip_checks", t_list(T_STR), [], "optional checks to skip"),
        Param("ignore_errors", t_list(T_STR), [], "verify error codes downgraded to warnings"),
        Param("verbose", T_BOOL, False, "more output"),
        Param("verify_clutter", T_BOOL, False, "also check authorized_keys for stray entries"),
    ],
    doc="Verify one node group: its nodes, its instances and their disk files (live).",
    result="bool",
    summary="group_name",
)

define(
    "OP_CLUSTER_VERIFY_DISKS",
    [Param("group_name", t_maybe(T_STR), ABSENT, "only this node group")],
    doc="Verify the disks of the cluster: submit one OP_GROUP_VERIFY_DISKS job per node group.",
    result='{"jobs": [[true, job_id] | [false, error], ...]} (follow-up jobs)',
)

define(
    "OP_GROUP_VERIFY_DISKS",
    [Param("group_name", T_NONEMPTY_STR, REQUIRED, "node group (name or UUID)")],
    doc="Verify the disks of the instances of one node group.",
    result="[{node: error}, [instance needing activate-disks, ...], {instance: [[node, volume], ...]}]",
    summary="group_name",
)

define(
    "OP_CLUSTER_REPAIR_DISK_SIZES",
    [Param("instances", t_list(T_NONEMPTY_STR), [], "instances to check (none: every instance)")],
    doc="Record the actual size of disks whose recorded size is wrong.",
    result="[[instance, disk index, 'size', new size in MiB], ...]",
)
