"""The cluster-wide opcodes: the cluster, tags, node groups, OSes and nodes.

Declared with L{ganeti.opcodes.base.define}; imported by L{ganeti.opcodes}.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti.ha.bounds import FAILOVER_TIMEOUT_RANGE, LIVENESS_TIMEOUT_RANGE
from ganeti.opcodes.base import (
    ABSENT,
    P_DISK_STATE,
    P_DISKPARAMS,
    P_FORCE,
    P_GROUP_NAME,
    P_HV_STATE,
    P_IPOLICY,
    P_NDPARAMS,
    P_NODE_NAME,
    P_NODE_UUID,
    P_TAG_KIND,
    P_TAG_NAME,
    P_TAGS,
    REQUIRED,
    T_ALLOC_POLICY,
    T_BOOL,
    T_DICT,
    T_DISK_TEMPLATE,
    T_HYPERVISOR,
    T_INT,
    T_NONEMPTY_STR,
    T_NONNEG_INT,
    T_POS_INT,
    T_STR,
    Param,
    define,
    t_dict_of,
    t_list,
    t_maybe,
    t_one_of,
    t_seconds,
    t_tuple,
)


def _tags_summary(op: dict[str, Any]) -> str:
    # Ganeti shows the object name, or "None" for the cluster
    name = op.get("name")
    return name if isinstance(name, str) and name else "None"


#: a user-id pool: a list of [lower, higher] ranges (Ganeti's uidpool)
T_UID_POOL = t_maybe(t_list(t_tuple(T_INT, T_INT)))

define("OP_CLUSTER_QUERY", [], doc="Cluster information.", result="dict (as LUXI QueryClusterInfo)")

define(
    "OP_CLUSTER_SET_PARAMS",
    [
        P_FORCE,
        Param("candidate_pool_size", t_maybe(T_POS_INT), ABSENT, "master candidates to keep"),
        Param("max_running_jobs", t_maybe(T_POS_INT), ABSENT, "jobs run at once"),
        Param("max_tracked_jobs", t_maybe(T_POS_INT), ABSENT, "jobs tracked at once"),
        Param("enabled_hypervisors", t_maybe(t_list(T_HYPERVISOR)), ABSENT, "hypervisors instances may use"),
        Param("enabled_disk_templates", t_maybe(t_list(T_DISK_TEMPLATE)), ABSENT, "disk templates instances may use"),
        Param("hvparams", t_maybe(t_dict_of(T_DICT)), ABSENT, "per-hypervisor parameters to change"),
        Param("beparams", t_maybe(T_DICT), ABSENT, "default backend parameters to change"),
        Param("nicparams", t_maybe(T_DICT), ABSENT, "default NIC parameters to change"),
        P_NDPARAMS,
        P_DISKPARAMS,
        Param("file_storage_dir", t_maybe(T_NONEMPTY_STR), ABSENT, "directory of file disks"),
        Param("shared_file_storage_dir", t_maybe(T_NONEMPTY_STR), ABSENT, "directory of sharedfile disks"),
        Param("master_netdev", t_maybe(T_NONEMPTY_STR), ABSENT, "interface of the master IP"),
        Param("mac_prefix", t_maybe(T_NONEMPTY_STR), ABSENT, "prefix of generated MAC addresses"),
        Param("maintain_node_health", t_maybe(T_BOOL), ABSENT, "shut down unknown instances"),
        Param("modify_etc_hosts", t_maybe(T_BOOL), ABSENT, "keep /etc/hosts up to date"),
        Param("prealloc_wipe_disks", t_maybe(T_BOOL), ABSENT, "wipe new disks"),
        Param("default_iallocator", t_maybe(T_STR), ABSENT, "default allocator"),
        Param("enabled_data_collectors", t_maybe(t_dict_of(T_BOOL)), ABSENT, "data collectors to (de)activate"),
        Param("data_collector_interval", t_maybe(t_dict_of(T_POS_INT)), ABSENT,
              "data collector intervals (microseconds)"),
        Param("os_hvp", t_maybe(t_dict_of(T_DICT)), ABSENT, "per-OS hypervisor parameters to change"),
        Param("osparams", t_maybe(t_dict_of(T_DICT)), ABSENT, "per-OS parameters to change"),
        Param("hidden_os", t_maybe(t_list(t_tuple(t_one_of("add", "remove"), T_NONEMPTY_STR))), ABSENT,
              "OSes to hide or show ([[add|remove, os], ...])"),
        Param("blacklisted_os", t_maybe(t_list(t_tuple(t_one_of("add", "remove"), T_NONEMPTY_STR))), ABSENT,
              "OSes to blacklist or allow ([[add|remove, os], ...])"),
        # ours, not Ganeti's (kept in ha.data, see ganeti.ha.params): Ganeti's gnt-cluster never sends them
        Param("liveness_timeout", t_maybe(t_seconds(*LIVENESS_TIMEOUT_RANGE)), ABSENT,
              "seconds without a heartbeat before a node is unreachable"),
        Param("auto_failover", t_maybe(T_BOOL), ABSENT, "elect a new master when the master is unreachable"),
        Param("failover_timeout", t_maybe(t_seconds(*FAILOVER_TIMEOUT_RANGE)), ABSENT,
              "seconds the master must be unreachable before an automatic failover"),
        Param("osparams_private_cluster", t_maybe(t_dict_of(T_DICT)), ABSENT, "per-OS private parameters to change"),
        P_IPOLICY,
        P_HV_STATE,
        P_DISK_STATE,
        Param("uid_pool", T_UID_POOL, ABSENT, "the user-id pool (replaces it): [[lower, higher], ...]"),
        Param("add_uids", T_UID_POOL, ABSENT, "user-id ranges to add to the pool"),
        Param("remove_uids", T_UID_POOL, ABSENT, "user-id ranges to remove from the pool"),
        Param("vg_name", t_maybe(T_STR), ABSENT, "LVM volume group (\"\" disables LVM)"),
        Param("drbd_helper", t_maybe(T_STR), ABSENT, "DRBD usermode helper (\"\" disables the check)"),
        Param("reserved_lvs", t_maybe(t_list(T_STR)), ABSENT, "logical volumes cluster-verify ignores"),
        Param("master_netmask", t_maybe(T_NONNEG_INT), ABSENT, "netmask (prefix length) of the master IP"),
        Param("use_external_mip_script", t_maybe(T_BOOL), ABSENT, "use an external master IP setup script"),
        Param("gluster_storage_dir", t_maybe(T_STR), ABSENT, "directory of gluster disks"),
        Param("default_iallocator_params", t_maybe(T_DICT), ABSENT, "parameters of the default allocator"),
        Param("enabled_user_shutdown", t_maybe(T_BOOL), ABSENT, "let users shut instances down from inside"),
        Param("install_image", t_maybe(T_STR), ABSENT, "OS install image (absolute path or URL)"),
        Param("zeroing_image", t_maybe(T_STR), ABSENT, "disk zeroing image (absolute path or URL)"),
        Param("compression_tools", t_maybe(t_list(T_STR)), ABSENT, "tools allowed to compress exports"),
        Param("instance_communication_network", t_maybe(T_STR), ABSENT, "network of instance communication NICs"),
    ],
    doc="Change cluster parameters.",
)

define(
    "OP_CLUSTER_VERIFY_CONFIG",
    [
        Param("debug_simulate_errors", T_BOOL, False, "inject fake errors (testing)"),
        Param("error_codes", T_BOOL, False, "machine-parsable error output"),
        Param("ignore_errors", t_list(T_STR), [], "verify error codes downgraded to warnings"),
        Param("verbose", T_BOOL, False, "more output"),
    ],
    doc="Verify the consistency of the cluster configuration.",
    result="bool",
)

define(
    "OP_TAGS_GET",
    [P_TAG_KIND, Param("use_locking", T_BOOL, False, "take locks (false = read the config directly)"), P_TAG_NAME],
    doc="The tags of an object.",
    result="list of tags",
    summary=_tags_summary,
)

define(
    "OP_TAGS_SET",
    [P_TAG_KIND, attrs.evolve(P_TAGS, doc="tags to add"), P_TAG_NAME],
    doc="Add tags to an object.",
)

define(
    "OP_TAGS_DEL",
    [P_TAG_KIND, attrs.evolve(P_TAGS, doc="tags to remove"), P_TAG_NAME],
    doc="Remove tags from an object.",
)

define(
    "OP_TAGS_SEARCH",
    [Param("pattern", T_NONEMPTY_STR, REQUIRED, "search pattern (regular expression)")],
    doc="Search the tags of every object for a pattern.",
    result="list of (path, tag)",
    summary="pattern",
)

define(
    "OP_GROUP_ADD",
    [
        attrs.evolve(P_GROUP_NAME, doc="new group name"),
        Param("alloc_policy", t_maybe(T_ALLOC_POLICY), ABSENT, "preferred, last_resort or unallocable"),
        P_NDPARAMS,
        P_DISKPARAMS,
        P_IPOLICY,
        P_HV_STATE,
        P_DISK_STATE,
    ],
    doc="Add a node group.",
    summary="group_name",
)

define("OP_GROUP_REMOVE", [P_GROUP_NAME], doc="Remove an empty node group.", summary="group_name")

define(
    "OP_GROUP_RENAME",
    [P_GROUP_NAME, Param("new_name", T_NONEMPTY_STR, REQUIRED, "new group name")],
    doc="Rename a node group.",
    result="the new name",
)

define(
    "OP_CLUSTER_VERIFY",
    [
        Param("debug_simulate_errors", T_BOOL, False, "inject fake errors (testing)"),
        Param("error_codes", T_BOOL, False, "machine-parsable error output"),
        Param("skip_checks", t_list(T_STR), [], "optional checks to skip"),
        Param("ignore_errors", t_list(T_STR), [], "verify error codes downgraded to warnings"),
        Param("verbose", T_BOOL, False, "more output"),
        Param("group_name", t_maybe(T_NONEMPTY_STR), ABSENT, "node group name"),
        Param("verify_clutter", T_BOOL, False, "also check authorized_keys for stray entries"),
    ],
    doc="Verify the cluster: submit OP_CLUSTER_VERIFY_CONFIG and one OP_CLUSTER_VERIFY_GROUP job per group.",
    result='{"jobs": [[true, job_id] | [false, error], ...]} (follow-up jobs)',
)

define("OP_CLUSTER_REDIST_CONF", [], doc="Push the configuration and ssconf to the nodes now.")

define(
    "OP_CLUSTER_RENEW_CRYPTO",
    [
        Param("node_certificates", T_BOOL, False, "issue every online node a new client certificate"),
        Param("renew_ssh_keys", T_BOOL, False, "renew the nodes' SSH keys (no SSH setup is kept here: a no-op)"),
        Param("ssh_key_type", t_maybe(T_STR), ABSENT, "type of the new SSH keys"),
        Param("ssh_key_bits", t_maybe(T_POS_INT), ABSENT, "size of the new SSH keys"),
        Param("verbose", T_BOOL, False, "verbose mode"),
        Param("debug", T_BOOL, False, "debug mode"),
    ],
    doc="Renew the nodes' client certificates and put their digests in the candidate certificates.",
)

define(
    "OP_GROUP_ASSIGN_NODES",
    [
        attrs.evolve(P_GROUP_NAME, doc="target group"),
        P_FORCE,
        Param("nodes", t_list(T_NONEMPTY_STR), REQUIRED, "node names"),
        Param("node_uuids", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "internal: resolved UUIDs"),
    ],
    doc="Move nodes into a node group.",
    summary="group_name",
)

define(
    "OP_GROUP_SET_PARAMS",
    [
        P_GROUP_NAME,
        Param("alloc_policy", t_maybe(T_ALLOC_POLICY), ABSENT, "preferred, last_resort or unallocable"),
        P_NDPARAMS,
        P_DISKPARAMS,
        P_HV_STATE,
        P_DISK_STATE,
        P_IPOLICY,
    ],
    doc="Change a node group's parameters.",
    result="list of [param_name, new_value] changes applied",
    summary="group_name",
)

#: the fields OP_OS_DIAGNOSE can return (Ganeti's OS query fields)
OS_FIELDS = (
    "name", "valid", "hidden", "blacklisted", "variants", "api_versions", "parameters", "node_status",
    "os_hvp", "osparams", "trusted",
)


define(
    "OP_OS_DIAGNOSE",
    [
        Param("output_fields", t_list(T_NONEMPTY_STR), REQUIRED, "fields: %s" % ", ".join(OS_FIELDS)),
        Param("names", t_list(T_NONEMPTY_STR), [], "OS names (empty: all)"),
    ],
    doc="The operating systems of the online vm-capable nodes, merged.",
    result="list of rows, each the values of output_fields in order",
)

#: the fields OP_EXT_STORAGE_DIAGNOSE can return (Ganeti's ExtStorage query fields)
EXTSTORAGE_FIELDS = ("name", "node_status", "nodegroup_status", "parameters")

define(
    "OP_EXT_STORAGE_DIAGNOSE",
    [
        Param("output_fields", t_list(T_NONEMPTY_STR), REQUIRED, "fields: %s" % ", ".join(EXTSTORAGE_FIELDS)),
        Param("names", t_list(T_NONEMPTY_STR), [], "provider names (empty: all)"),
    ],
    doc="The ExtStorage providers of the online vm-capable nodes, merged.",
    result="list of rows, each the values of output_fields in order",
)

P_MASTER_CAPABLE = Param("master_capable", t_maybe(T_BOOL), ABSENT, "may become master/candidate")
P_VM_CAPABLE = Param("vm_capable", t_maybe(T_BOOL), ABSENT, "may host instances")
P_SECONDARY_IP = Param("secondary_ip", t_maybe(T_NONEMPTY_STR), ABSENT, "replication IP")

define(
    "OP_NODE_ADD",
    [
        P_NODE_NAME,
        P_HV_STATE,
        P_DISK_STATE,
        Param("primary_ip", t_maybe(T_NONEMPTY_STR), ABSENT, "primary IP (resolved from the name if omitted)"),
        P_SECONDARY_IP,
        Param("readd", T_BOOL, False, "re-add a node that was already in the cluster"),
        Param("group", t_maybe(T_NONEMPTY_STR), ABSENT, "initial node group (default group if omitted)"),
        P_MASTER_CAPABLE,
        P_VM_CAPABLE,
        P_NDPARAMS,
        Param("node_setup", T_BOOL, False, "run SSH/daemon setup on the new node"),
        Param("join_token", t_maybe(T_NONEMPTY_STR), ABSENT, "(ours) one-time token an unjoined noded waits for"),
    ],
    doc="Add a node to the cluster.",
    summary="node_name",
)

define("OP_NODE_REMOVE", [P_NODE_NAME, P_NODE_UUID], doc="Remove a node from the cluster.", summary="node_name")

define(
    "OP_NODE_QUERY_STORAGE",
    [
        Param("output_fields", t_list(T_NONEMPTY_STR), REQUIRED, "selected output fields"),
        Param("storage_type", t_maybe(T_NONEMPTY_STR), ABSENT, "storage type (default: the first enabled template's)"),
        Param("nodes", t_list(T_NONEMPTY_STR), [], "nodes to query (empty: all)"),
        Param("name", t_maybe(T_STR), ABSENT, "one storage unit"),
    ],
    doc="Get information on the storage units of nodes.",
    result="list of rows, one value per output field",
)

#: Ganeti's storage types (C{STORAGE_TYPES})
STORAGE_TYPES = ("diskless", "ext", "file", "gluster", "lvm-pv", "lvm-vg", "rados", "sharedfile")

define(
    "OP_NODE_MODIFY_STORAGE",
    [
        P_NODE_NAME,
        P_NODE_UUID,
        Param("storage_type", t_one_of(*STORAGE_TYPES), REQUIRED, "storage type"),
        Param("name", t_maybe(T_STR), ABSENT, "storage unit"),
        Param("changes", T_DICT, REQUIRED, "requested changes ({field: value})"),
    ],
    doc="Modify a storage unit (Ganeti: lvm-pv's allocatable only).",
    summary="node_name",
)

define(
    "OP_REPAIR_NODE_STORAGE",
    [
        P_NODE_NAME,
        P_NODE_UUID,
        Param("storage_type", t_one_of(*STORAGE_TYPES), REQUIRED, "storage type"),
        Param("name", t_maybe(T_STR), ABSENT, "storage unit"),
        Param("ignore_consistency", T_BOOL, False, "ignore the consistency of the disks"),
    ],
    doc="Repair a storage unit (Ganeti: an LVM volume group's consistency).",
    summary="node_name",
)

define(
    "OP_NODE_QUERYVOLS",
    [
        Param("output_fields", t_list(T_NONEMPTY_STR), REQUIRED, "selected output fields"),
        Param("nodes", t_list(T_NONEMPTY_STR), [], "nodes to query (empty: all)"),
    ],
    doc="List the LVM logical volumes of nodes.",
    result="list of rows, one value per output field",
)

define(
    "OP_NODE_SET_PARAMS",
    [
        P_NODE_NAME,
        P_NODE_UUID,
        P_FORCE,
        P_HV_STATE,
        P_DISK_STATE,
        Param("master_candidate", t_maybe(T_BOOL), ABSENT, "set/unset the master candidate flag"),
        Param("offline", t_maybe(T_BOOL), ABSENT, "set/unset the offline flag"),
        Param("drained", t_maybe(T_BOOL), ABSENT, "set/unset the drained flag"),
        Param("auto_promote", T_BOOL, False, "promote other nodes if the candidate pool shrinks"),
        P_MASTER_CAPABLE,
        P_VM_CAPABLE,
        P_SECONDARY_IP,
        P_NDPARAMS,
        Param("powered", t_maybe(T_BOOL), ABSENT, "record the power state (OOB)"),
    ],
    doc="Change a node's roles and parameters.",
    result="list of [param_name, new_value] changes applied",
    summary="node_name",
)
