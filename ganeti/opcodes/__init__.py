"""Opcodes: what a job asks for, declared as data (spec/opcodes.md).

L{ganeti.opcodes.base} holds the machinery: parameter types, L{Param},
L{define}, the registry L{OPCODES}, L{validate} and L{summary}.  Each
family of opcodes declares its own in a module of this package, which
imports only L{ganeti.opcodes.base}:

  - L{ganeti.opcodes.test}: C{OP_TEST_*};
  - L{ganeti.opcodes.cluster}: the cluster, tags, node groups, OSes, nodes;
  - L{ganeti.opcodes.instance}: instances (and the node opcodes that move them);
  - L{ganeti.opcodes.verify}: group verify, verify-disks, repair-disk-sizes;
  - L{ganeti.opcodes.backup}: exports, imports and instance moves;
  - L{ganeti.opcodes.network}: networks (add, remove, modify, connect, disconnect);
  - L{ganeti.opcodes.oob}: out-of-band commands (power, health);
  - L{ganeti.opcodes.query}: OP_QUERY, OP_QUERY_FIELDS and cluster housekeeping.

Importing this package registers every family, in that order, and
re-exports the names of L{ganeti.opcodes.base}, L{ganeti.opcodes.test} and
L{ganeti.opcodes.cluster}, so C{from ganeti import opcodes} and
C{opcodes.validate(op)} are all a user needs.
"""

from __future__ import annotations

# isort: off
# the registration order is the order of the families above
from ganeti.opcodes.base import (
    ABSENT,
    ADMIN_STATE_SOURCES,
    ALLOC_POLICIES,
    COMMON_NAMES,
    COMMON_PARAMS,
    DEFAULT_SHUTDOWN_TIMEOUT,
    DISK_TEMPLATES,
    EVAC_MODES,
    HYPERVISORS,
    INSTANCE_CREATE_MODES,
    MAX_TEST_DELAY,
    MAX_TEST_REPEAT,
    MAX_TIMEOUT,
    MIGRATION_MODES,
    OPCODES,
    P_DISKPARAMS,
    P_DISK_STATE,
    P_FORCE,
    P_GROUP_NAME,
    P_HV_STATE,
    P_IALLOCATOR,
    P_IGNORE_IPOLICY,
    P_IGNORE_OFFLINE_NODES,
    P_INSTANCE_NAME,
    P_INSTANCE_UUID,
    P_IPOLICY,
    P_NDPARAMS,
    P_NODE_NAME,
    P_NODE_UUID,
    P_SHUTDOWN_TIMEOUT,
    P_TAGS,
    P_TAG_KIND,
    P_TAG_NAME,
    REBOOT_TYPES,
    REQUIRED,
    SUBMIT_PRIORITIES,
    TAG_CLUSTER,
    TAG_INSTANCE,
    TAG_KINDS,
    TAG_NETWORK,
    TAG_NODE,
    TAG_NODEGROUP,
    T_ALLOC_POLICY,
    T_ANY,
    T_BOOL,
    T_DELAY,
    T_DEPENDS,
    T_DICT,
    T_DISK_TEMPLATE,
    T_FLOAT,
    T_HYPERVISOR,
    T_INT,
    T_NONEMPTY_STR,
    T_NONNEG_FLOAT,
    T_NONNEG_INT,
    T_POS_INT,
    T_PRIORITY,
    T_REASON,
    T_STR,
    T_TAG_KIND,
    T_TIMEOUT,
    T_UNSUPPORTED,
    OpDef,
    Param,
    Type,
    define,
    is_int,
    lookup,
    summary,
    t_dict_of,
    t_list,
    t_maybe,
    t_one_of,
    t_tuple,
    unsupported,
    validate,
)
from ganeti.opcodes.test import (
    IALLOCATOR_DIRECTIONS,
    IALLOCATOR_MODES,
    MAX_JQUEUE_MESSAGES,
)
from ganeti.opcodes.cluster import (
    OS_FIELDS,
    P_MASTER_CAPABLE,
    P_SECONDARY_IP,
    P_VM_CAPABLE,
)
from ganeti.osnames import os_names
from ganeti.opcodes import instance, verify, backup  # noqa: F401  (registration)
from ganeti.opcodes import network  # noqa: F401  (registration)
from ganeti.opcodes import oob  # noqa: F401  (registration)
from ganeti.opcodes import query  # noqa: F401  (registration)

# isort: on

__all__ = [
    "ABSENT",
    "ADMIN_STATE_SOURCES",
    "ALLOC_POLICIES",
    "COMMON_NAMES",
    "COMMON_PARAMS",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "DISK_TEMPLATES",
    "EVAC_MODES",
    "HYPERVISORS",
    "INSTANCE_CREATE_MODES",
    "MAX_TEST_DELAY",
    "MAX_TEST_REPEAT",
    "MAX_TIMEOUT",
    "MIGRATION_MODES",
    "OPCODES",
    "P_DISKPARAMS",
    "P_DISK_STATE",
    "P_FORCE",
    "P_GROUP_NAME",
    "P_HV_STATE",
    "P_IALLOCATOR",
    "P_IGNORE_IPOLICY",
    "P_IGNORE_OFFLINE_NODES",
    "P_INSTANCE_NAME",
    "P_INSTANCE_UUID",
    "P_IPOLICY",
    "P_NDPARAMS",
    "P_NODE_NAME",
    "P_NODE_UUID",
    "P_SHUTDOWN_TIMEOUT",
    "P_TAGS",
    "P_TAG_KIND",
    "P_TAG_NAME",
    "REBOOT_TYPES",
    "REQUIRED",
    "SUBMIT_PRIORITIES",
    "TAG_CLUSTER",
    "TAG_INSTANCE",
    "TAG_KINDS",
    "TAG_NETWORK",
    "TAG_NODE",
    "TAG_NODEGROUP",
    "T_ALLOC_POLICY",
    "T_ANY",
    "T_BOOL",
    "T_DELAY",
    "T_DEPENDS",
    "T_DICT",
    "T_DISK_TEMPLATE",
    "T_FLOAT",
    "T_HYPERVISOR",
    "T_INT",
    "T_NONEMPTY_STR",
    "T_NONNEG_FLOAT",
    "T_NONNEG_INT",
    "T_POS_INT",
    "T_PRIORITY",
    "T_REASON",
    "T_STR",
    "T_TAG_KIND",
    "T_TIMEOUT",
    "T_UNSUPPORTED",
    "OpDef",
    "Param",
    "Type",
    "define",
    "is_int",
    "lookup",
    "summary",
    "t_dict_of",
    "t_list",
    "t_maybe",
    "t_one_of",
    "t_tuple",
    "unsupported",
    "validate",
    "IALLOCATOR_DIRECTIONS",
    "IALLOCATOR_MODES",
    "MAX_JQUEUE_MESSAGES",
    "OS_FIELDS",
    "P_MASTER_CAPABLE",
    "P_SECONDARY_IP",
    "P_VM_CAPABLE",
    "os_names",
]
