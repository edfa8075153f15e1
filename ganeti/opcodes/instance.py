"""Instance opcodes and the node opcodes that move instances.

Declared from the parameter tables of spec/opcodes.md; imported by
L{ganeti.opcodes}, which is where callers look opcodes up.
"""

from __future__ import annotations

from typing import Any

from ganeti.opcodes.base import (
    ABSENT,
    ADMIN_STATE_SOURCES,
    DEFAULT_SHUTDOWN_TIMEOUT,
    EVAC_MODES,
    INSTANCE_CREATE_MODES,
    MIGRATION_MODES,
    P_FORCE,
    P_IALLOCATOR,
    P_IGNORE_IPOLICY,
    P_IGNORE_OFFLINE_NODES,
    P_INSTANCE_NAME,
    P_INSTANCE_UUID,
    P_NODE_NAME,
    P_NODE_UUID,
    P_SHUTDOWN_TIMEOUT,
    REBOOT_TYPES,
    REQUIRED,
    T_ANY,
    T_BOOL,
    T_DICT,
    T_DISK_TEMPLATE,
    T_HYPERVISOR,
    T_NONEMPTY_STR,
    T_NONNEG_INT,
    T_POS_INT,
    T_STR,
    T_TIMEOUT,
    Param,
    Type,
    define,
    t_list,
    t_maybe,
    t_one_of,
)

FILE_DRIVERS = ("loop", "blktap", "blktap2")
DISK_ACCESS_MODES = ("rw", "ro")
NIC_MODES = ("bridged", "routed", "openvswitch")
#: Ganeti's modification operations for C{nics}/C{disks} of OP_INSTANCE_SET_PARAMS
DDM_ADD, DDM_ATTACH, DDM_MODIFY, DDM_REMOVE, DDM_DETACH = "add", "attach", "modify", "remove", "detach"
DDM_OPS = (DDM_ADD, DDM_ATTACH, DDM_MODIFY, DDM_REMOVE, DDM_DETACH)


def _is_mods(value: Any) -> bool:
    """Ganeti's modification lists: C{[[op, index|name, params], ...]} or the
    legacy C{[[op_or_index, params], ...]}."""
    if not isinstance(value, list):
        return False
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
            return False
        if not isinstance(item[-1], dict):
            return False
        head = item[0]
        if isinstance(head, bool) or not isinstance(head, (str, int)):
            return False
        if len(item) == 3 and (isinstance(item[1], bool) or not isinstance(item[1], (str, int))):
            return False
    return True


T_MODS = Type("a list of modifications [[op, index or name, params], ...]", _is_mods, "list[list[Any]]")
T_DISKS = Type("a list of disk dicts", lambda v: isinstance(v, list) and all(isinstance(d, dict) for d in v),
               "list[dict[str, Any]]")
T_NICS = Type("a list of NIC dicts", lambda v: isinstance(v, list) and all(isinstance(n, dict) for n in v),
              "list[dict[str, Any]]")
T_MIGRATION_MODE = t_one_of(*MIGRATION_MODES)

P_TARGET_NODE = Param("target_node", t_maybe(T_NONEMPTY_STR), ABSENT, "target node (shared/external storage)")
P_TARGET_NODE_UUID = Param("target_node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID")
P_CLEANUP = Param("cleanup", T_BOOL, False, "clean up after a failed migration")
P_MIGRATION_MODE = Param("mode", t_maybe(T_MIGRATION_MODE), ABSENT, "live or non-live")
P_LIVE = Param("live", t_maybe(T_BOOL), ABSENT, "deprecated; use mode")
P_ALLOW_RUNTIME_CHANGES = Param("allow_runtime_changes", T_BOOL, True, "allow memory ballooning during migration")
P_FORCE_VARIANT = Param("force_variant", T_BOOL, False, "accept an unknown OS variant")
P_NAME_CHECK = Param("name_check", T_BOOL, False, "resolve and check the name")
P_IP_CHECK = Param("ip_check", T_BOOL, False, "ensure the IP is not live yet (ping)")
P_OSPARAMS_PRIVATE = Param("osparams_private", t_maybe(T_DICT), ABSENT, "private OS parameters")
P_OSPARAMS_SECRET = Param("osparams_secret", t_maybe(T_DICT), ABSENT, "secret OS parameters (not stored)")
P_FILE_DRIVER = Param("file_driver", t_maybe(t_one_of(*FILE_DRIVERS)), ABSENT, "loop or blktap")
P_FILE_STORAGE_DIR = Param("file_storage_dir", t_maybe(T_NONEMPTY_STR), ABSENT, "directory of file disks")
P_NO_REMEMBER = Param("no_remember", T_BOOL, False, "do not record the new admin state")
P_EARLY_RELEASE = Param("early_release", T_BOOL, False, "release locks early")
P_WAIT_FOR_SYNC = Param("wait_for_sync", T_BOOL, True, "wait for the disks to sync")

define(
    "OP_INSTANCE_CREATE",
    [
        P_INSTANCE_NAME,
        P_FORCE_VARIANT,
        P_WAIT_FOR_SYNC,
        P_NAME_CHECK,
        P_IGNORE_IPOLICY,
        Param("opportunistic_locking", T_BOOL, False, "lock only the nodes free now (with an allocator)"),
        Param("beparams", T_DICT, {}, "backend parameters (memory, vcpus, ...)"),
        Param("disks", T_DISKS, REQUIRED, "disks: [{size, mode, name, ...}, ...]"),
        Param("disk_template", t_maybe(T_DISK_TEMPLATE), ABSENT, "disk template"),
        Param("group_name", t_maybe(T_NONEMPTY_STR), ABSENT, "node group to allocate in"),
        P_FILE_DRIVER,
        P_FILE_STORAGE_DIR,
        Param("hvparams", T_DICT, {}, "hypervisor parameters"),
        Param("hypervisor", t_maybe(T_HYPERVISOR), ABSENT, "hypervisor (default: the cluster's)"),
        P_IALLOCATOR,
        Param("identify_defaults", T_BOOL, False, "drop parameters equal to the cluster defaults"),
        P_IP_CHECK,
        Param("conflicts_check", T_BOOL, True, "check IP conflicts in networks"),
        Param("mode", t_one_of(*INSTANCE_CREATE_MODES), REQUIRED, "create, import or remote-import"),
        Param("nics", T_NICS, REQUIRED, "NICs: [{mac, ip, mode, link, network, name, vlan}, ...]"),
        Param("no_install", t_maybe(T_BOOL), ABSENT, "do not install the OS"),
        Param("osparams", T_DICT, {}, "OS parameters"),
        P_OSPARAMS_PRIVATE,
        P_OSPARAMS_SECRET,
        Param("os_type", t_maybe(T_NONEMPTY_STR), ABSENT, "OS (name+variant)"),
        Param("pnode", t_maybe(T_NONEMPTY_STR), ABSENT, "primary node"),
        Param("pnode_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID"),
        Param("snode", t_maybe(T_NONEMPTY_STR), ABSENT, "secondary node (DRBD)"),
        Param("snode_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID"),
        Param("source_handshake", t_maybe(t_list(T_ANY)), ABSENT, "remote import only"),
        Param("source_instance_name", t_maybe(T_NONEMPTY_STR), ABSENT, "remote import only"),
        Param("source_shutdown_timeout", T_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, "remote import only (s)"),
        Param("source_x509_ca", t_maybe(T_NONEMPTY_STR), ABSENT, "remote import only"),
        Param("src_node", t_maybe(T_NONEMPTY_STR), ABSENT, "import source node"),
        Param("src_node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID"),
        Param("src_path", t_maybe(T_NONEMPTY_STR), ABSENT, "import source path"),
        Param("compress", T_STR, "none", "compression tool for import/export"),
        Param("start", T_BOOL, True, "start the instance after creating it"),
        Param("forthcoming", T_BOOL, False, "only reserve the resources"),
        Param("commit", T_BOOL, False, "turn a forthcoming instance into a real one"),
        Param("tags", t_list(T_STR), [], "instance tags"),
        Param("instance_communication", T_BOOL, False, "add an instance communication NIC"),
        Param("helper_startup_timeout", t_maybe(T_TIMEOUT), ABSENT, "helper VM startup timeout (s)"),
        Param("helper_shutdown_timeout", t_maybe(T_TIMEOUT), ABSENT, "helper VM shutdown timeout (s)"),
    ],
    doc="Create an instance.",
    result="list of the node names the instance was placed on",
    summary="instance_name",
)

define(
    "OP_INSTANCE_REMOVE",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_SHUTDOWN_TIMEOUT,
        Param("ignore_failures", T_BOOL, False, "continue despite errors"),
    ],
    doc="Remove an instance and its disks.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_STARTUP",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_FORCE,
        P_IGNORE_OFFLINE_NODES,
        Param("hvparams", T_DICT, {}, "temporary hypervisor parameters for this start"),
        Param("beparams", T_DICT, {}, "temporary backend parameters for this start"),
        P_NO_REMEMBER,
        Param("startup_paused", T_BOOL, False, "start paused"),
        P_SHUTDOWN_TIMEOUT,
    ],
    doc="Start an instance.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_SHUTDOWN",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_FORCE,
        P_IGNORE_OFFLINE_NODES,
        Param("timeout", T_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT, "seconds to wait for a clean shutdown"),
        P_NO_REMEMBER,
        Param("admin_state_source", t_maybe(t_one_of(*ADMIN_STATE_SOURCES)), ABSENT, "admin or user"),
    ],
    doc="Stop an instance.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_REBOOT",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_SHUTDOWN_TIMEOUT,
        Param("ignore_secondaries", T_BOOL, False, "ignore secondary-disk errors"),
        Param("reboot_type", t_one_of(*REBOOT_TYPES), REQUIRED, "soft, hard or full"),
    ],
    doc="Reboot an instance.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_FAILOVER",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_SHUTDOWN_TIMEOUT,
        Param("ignore_consistency", T_BOOL, False, "ignore disk consistency"),
        P_TARGET_NODE,
        P_TARGET_NODE_UUID,
        P_IGNORE_IPOLICY,
        P_CLEANUP,
        P_IALLOCATOR,
    ],
    doc="Move an instance to another node by stopping and starting it.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_MIGRATE",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_MIGRATION_MODE,
        P_LIVE,
        P_TARGET_NODE,
        P_TARGET_NODE_UUID,
        P_ALLOW_RUNTIME_CHANGES,
        P_IGNORE_IPOLICY,
        P_CLEANUP,
        P_IALLOCATOR,
        Param("allow_failover", T_BOOL, False, "fall back to failover"),
        Param("ignore_hvversions", T_BOOL, False, "ignore a hypervisor version mismatch"),
    ],
    doc="Move a running instance to another node without stopping it.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_SET_PARAMS",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_FORCE,
        P_FORCE_VARIANT,
        P_IGNORE_IPOLICY,
        Param("nics", T_MODS, [], "NIC modifications: [[op, index or name, params], ...]"),
        Param("disks", T_MODS, [], "disk modifications: [[op, index or name, params], ...]"),
        Param("beparams", T_DICT, {}, "backend parameters (memory, vcpus, ...)"),
        Param("runtime_mem", t_maybe(T_POS_INT), ABSENT, "new runtime memory (MiB)"),
        Param("hvparams", T_DICT, {}, "hypervisor parameters"),
        Param("disk_template", t_maybe(T_DISK_TEMPLATE), ABSENT, "convert to this disk template"),
        Param("ext_params", T_DICT, {}, "ExtStorage parameters"),
        P_FILE_DRIVER,
        P_FILE_STORAGE_DIR,
        Param("pnode", t_maybe(T_NONEMPTY_STR), ABSENT, "primary node"),
        Param("pnode_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID"),
        Param("remote_node", t_maybe(T_NONEMPTY_STR), ABSENT, "new secondary node"),
        Param("remote_node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID"),
        P_IALLOCATOR,
        Param("os_name", t_maybe(T_NONEMPTY_STR), ABSENT, "change the OS without reinstalling"),
        Param("osparams", T_DICT, {}, "OS parameters"),
        P_OSPARAMS_PRIVATE,
        P_WAIT_FOR_SYNC,
        Param("offline", t_maybe(T_BOOL), ABSENT, "set/unset the offline flag"),
        Param("conflicts_check", T_BOOL, True, "check IP conflicts in networks"),
        Param("hotplug", T_BOOL, False, "hotplug NIC and disk changes into the running instance"),
        Param("hotplug_if_possible", T_BOOL, False, "hotplug if the hypervisor can"),
        Param("instance_communication", t_maybe(T_BOOL), ABSENT, "add/remove the instance communication NIC"),
    ],
    doc="Change an instance's parameters.",
    result="list of [param_name, new_value] changes applied",
    summary="instance_name",
)

define(
    "OP_INSTANCE_RENAME",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        Param("new_name", T_NONEMPTY_STR, REQUIRED, "new instance name"),
        P_NAME_CHECK,
        P_IP_CHECK,
    ],
    doc="Rename an instance.",
    result="the new name",
    summary="instance_name",
)

define(
    "OP_INSTANCE_REINSTALL",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_FORCE_VARIANT,
        Param("os_type", t_maybe(T_NONEMPTY_STR), ABSENT, "new OS (default: keep)"),
        Param("osparams", t_maybe(T_DICT), ABSENT, "temporary OS parameters for this reinstall"),
        P_OSPARAMS_PRIVATE,
        P_OSPARAMS_SECRET,
    ],
    doc="Reinstall an instance's OS.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_GROW_DISK",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_WAIT_FOR_SYNC,
        Param("disk", T_NONNEG_INT, REQUIRED, "disk index"),
        Param("amount", T_NONNEG_INT, REQUIRED, "MiB to add (or the new size if absolute)"),
        Param("absolute", T_BOOL, False, "amount is the new size, not an increment"),
        P_IGNORE_IPOLICY,
    ],
    doc="Grow one disk of an instance.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_ACTIVATE_DISKS",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        Param("ignore_size", T_BOOL, False, "do not pass the recorded sizes to the nodes"),
        Param("wait_for_sync", T_BOOL, False, "wait for the disks to sync"),
    ],
    doc="Make an instance's disks usable on its primary node.",
    result="[[node, iv_name, device path or null], ...]",
    summary="instance_name",
)

define(
    "OP_INSTANCE_DEACTIVATE_DISKS",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_FORCE,
    ],
    doc="Shut down an instance's disks (refused while it runs, unless forced).",
    summary="instance_name",
)

def _is_recreate_disks(value: Any) -> bool:
    """Ganeti's C{TRecreateDisksInfo}: C{[[index, {size, mode, spindles}], ...]}
    or the deprecated list of disk indices."""
    if not isinstance(value, list):
        return False
    for item in value:
        if isinstance(item, bool):
            return False
        if isinstance(item, int):
            if item < 0:
                return False
            continue
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], int)
                and not isinstance(item[0], bool) and item[0] >= 0 and isinstance(item[1], dict)):
            return False
    return True


T_RECREATE_DISKS = Type("a list of [disk index, {size, mode, spindles}] (or of disk indices)", _is_recreate_disks,
                        "list[Any]")

define(
    "OP_INSTANCE_RECREATE_DISKS",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        Param("disks", T_RECREATE_DISKS, [], "disks to recreate: [[index, {size, mode, spindles}], ...] (empty: all)"),
        Param("nodes", t_list(T_NONEMPTY_STR), [], "new nodes of the instance, if it is to be relocated"),
        Param("node_uuids", t_maybe(t_list(T_NONEMPTY_STR)), ABSENT, "internal: resolved UUIDs"),
        P_IALLOCATOR,
    ],
    doc="Recreate an instance's disks (empty), optionally on other nodes.",
    summary="instance_name",
)

define(
    "OP_INSTANCE_QUERY_DATA",
    [
        Param("instances", t_list(T_NONEMPTY_STR), [], "instance names (empty: all)"),
        Param("use_locking", T_BOOL, False, "take locks"),
        Param("static", T_BOOL, False, "configuration data only, no live state"),
    ],
    doc="Detailed data of instances (gnt-instance info).",
    result="dict: instance name -> data",
)

define(
    "OP_INSTANCE_CONSOLE",
    [P_INSTANCE_NAME, P_INSTANCE_UUID],
    doc="How to reach an instance's console.",
    result="console description dict",
    summary="instance_name",
)

define(
    "OP_NODE_EVACUATE",
    [
        P_EARLY_RELEASE,
        P_NODE_NAME,
        P_NODE_UUID,
        Param("remote_node", t_maybe(T_NONEMPTY_STR), ABSENT, "explicit target node"),
        Param("remote_node_uuid", t_maybe(T_NONEMPTY_STR), ABSENT, "internal: resolved UUID"),
        P_IALLOCATOR,
        Param("mode", t_one_of(*EVAC_MODES), REQUIRED, "primary-only, secondary-only or all"),
        Param("ignore_soft_errors", t_maybe(T_BOOL), ABSENT, "ignore soft allocator errors"),
    ],
    doc="Move every instance away from a node (submits one job per instance).",
    result='{"jobs": [[true, job_id] | [false, error], ...]}',
    summary="node_name",
)

define(
    "OP_NODE_MIGRATE",
    [
        P_NODE_NAME,
        P_NODE_UUID,
        P_MIGRATION_MODE,
        P_LIVE,
        P_TARGET_NODE,
        P_TARGET_NODE_UUID,
        P_ALLOW_RUNTIME_CHANGES,
        P_IGNORE_IPOLICY,
        P_IALLOCATOR,
    ],
    doc="Migrate every primary instance of a node (submits one job per instance).",
    result='{"jobs": [[true, job_id] | [false, error], ...]}',
    summary="node_name",
)

#: Ganeti's replace-disks modes (C{REPLACE_DISK_*})
REPLACE_MODES = ("replace_on_primary", "replace_on_secondary", "replace_new_secondary", "replace_auto")

define(
    "OP_INSTANCE_REPLACE_DISKS",
    [
        P_INSTANCE_NAME,
        P_INSTANCE_UUID,
        P_EARLY_RELEASE,
        P_IGNORE_IPOLICY,
        Param("mode", t_one_of(*REPLACE_MODES), REQUIRED, "replacement mode"),
        Param("disks", t_list(T_ANY), [], "disk indices (empty: all)"),
        Param("remote_node", t_maybe(T_STR), ABSENT, "new secondary node"),
        Param("remote_node_uuid", t_maybe(T_STR), ABSENT, "internal: resolved UUID"),
        P_IALLOCATOR,
    ],
    doc="Replace the disks of a DRBD instance (refused here: no DRBD).",
    summary="instance_name",
)

define(
    "OP_INSTANCE_MULTI_ALLOC",
    [
        Param("opportunistic_locking", T_BOOL, False, "accepted; each creation job takes its own locks"),
        Param("iallocator", t_maybe(T_STR), ABSENT, "allocator choosing the nodes of instances without pnode"),
        Param("instances", t_list(T_DICT), [], "the OP_INSTANCE_CREATE opcodes of the instances"),
    ],
    doc="Create several instances: one creation job each.",
    result="{\"jobs\": [[ok, job id or error], ...], \"allocatable\": [names], \"failed\": [names]}",
)
