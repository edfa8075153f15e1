"""Node, group, cluster, job and lock query fields, and the resource registry.

Field names, titles, kinds and docs are Ganeti's (C{Query.Node},
C{Query.Group}, C{Query.Job}, C{Query.Locks}, Python's cluster fields).
Pure: no Twisted, no I/O.
"""

from __future__ import annotations

import decimal
import json
import math
from typing import Any, Callable, Mapping

from ganeti import CONFIG_VERSION, GANETI_RELEASE
from ganeti.objects import Node, NodeGroup, nice_sort
from ganeti.query import cluster as cluster_info_mod
from ganeti.query import common
from ganeti.query.common import by_name, common_fields, index, known, present
from ganeti.query.fields import (
    NEED_LIVE_NODES,
    NEED_LIVENESS,
    NEED_WATCHER,
    QFF_HOSTNAME,
    QFF_JOB_ID,
    QFF_TIMESTAMP,
    QFT_BOOL,
    QFT_NUMBER,
    QFT_OTHER,
    QFT_TEXT,
    QFT_TIMESTAMP,
    QFT_UNIT,
    FieldDef,
    NoData,
    Offline,
    QueryContext,
    Resource,
    Unavail,
    field_table,
)
from ganeti.query.filters import FILTER_RESOURCE
from ganeti.query.instance import INSTANCE_FIELDS, find_instance, instances
from ganeti.query.network import NETWORK_RESOURCE

# --- nodes ---------------------------------------------------------------------

ROLE_MASTER = "M"
ROLE_CANDIDATE = "C"
ROLE_REGULAR = "R"
ROLE_DRAINED = "D"
ROLE_OFFLINE = "O"

_ROLE_DOC = (
    'Node role; "M" for master, "C" for master candidate, "R" for regular,'
    ' "D" for drained, "O" for offline'
)

#: live node fields: name -> (title, kind, doc)
NODE_LIVE_FIELDS: dict[str, tuple[str, str, str]] = {
    "bootid": (
        "BootID",
        QFT_TEXT,
        "Random UUID renewed for each system reboot, can be used for detecting reboots by tracking changes",
    ),
    "cnodes": ("CNodes", QFT_NUMBER, "Number of NUMA domains on node (if exported by hypervisor)"),
    "cnos": ("CNOs", QFT_NUMBER, "Number of logical processors used by the node OS (dom0 for Xen)"),
    "csockets": ("CSockets", QFT_NUMBER, "Number of physical CPU sockets (if exported by hypervisor)"),
    "ctotal": ("CTotal", QFT_NUMBER, "Number of logical processors"),
    "dfree": ("DFree", QFT_UNIT, "Available storage space on storage unit"),
    "dtotal": ("DTotal", QFT_UNIT, "Total storage space on storage unit for instance disk allocation"),
    "spfree": ("SpFree", QFT_NUMBER, "Available spindles in volume group (exclusive storage only)"),
    "sptotal": ("SpTotal", QFT_NUMBER, "Total spindles in volume group (exclusive storage only)"),
    "mfree": ("MFree", QFT_UNIT, "Memory available for instance allocations"),
    "mnode": ("MNode", QFT_UNIT, "Amount of memory used by node (dom0 for Xen)"),
    "mtotal": ("MTotal", QFT_UNIT, "Total amount of memory of physical machine"),
}


_LIVE_NODE = frozenset({NEED_LIVE_NODES})


def node_role(node: Node, ctx: QueryContext) -> str:
    """Ganeti's one-letter node role."""
    if node.uuid is not None and node.uuid == ctx.config.cluster.master_node:
        return ROLE_MASTER
    if node.master_candidate:
        return ROLE_CANDIDATE
    if node.drained:
        return ROLE_DRAINED
    if node.offline:
        return ROLE_OFFLINE
    return ROLE_REGULAR


def _node_live(key: str) -> Callable[[Node, QueryContext], Any]:
    def get(node: Node, ctx: QueryContext) -> Any:
        if node.offline:
            raise Offline()
        if node.vm_capable is False:  # no hypervisor to ask
            raise Unavail()
        data = ctx.live.get(node.name or "")
        if not isinstance(data, Mapping):
            raise NoData()
        return known(data.get(key))

    return get


_LIVENESS = frozenset([NEED_LIVENESS])


def _liveness(key: str) -> Callable[[Node, QueryContext], Any]:
    """A getter of the node's roster entry C{key} (no data without heartbeats)."""

    def get(node: Node, ctx: QueryContext) -> Any:
        entry = ctx.liveness.get(node.name or "")
        if entry is None or entry.get(key) is None:
            raise NoData()
        return entry[key]

    return get


def _node_group(node: Node, ctx: QueryContext) -> NodeGroup:
    group = common.node_group(ctx.config, node)
    if group is None:
        raise NoData()
    return group


def _powered(node: Node, ctx: QueryContext) -> Any:
    if not common.node_ndparams(ctx.config, node).get("oob_program"):
        raise Unavail()
    return node.powered


def _instance_names(get: Callable[[Any], dict[str, list[Any]]]) -> Callable[[Node, QueryContext], list[str]]:
    return lambda node, ctx: nice_sort(i.name or "" for i in get(index(ctx)).get(node.uuid or "", []))


def _node_fields() -> list[FieldDef]:
    out = [
        FieldDef("drained", "Drained", QFT_BOOL, "Whether node is drained", lambda n, c: bool(n.drained)),
        FieldDef(
            "master_candidate", "MasterC", QFT_BOOL, "Whether node is a master candidate",
            lambda n, c: bool(n.master_candidate),
        ),
        FieldDef(
            "master_capable", "MasterCapable", QFT_BOOL, "Whether node can become a master candidate",
            lambda n, c: bool(n.master_capable),
        ),
        FieldDef("name", "Node", QFT_TEXT, "Node name", lambda n, c: known(n.name), QFF_HOSTNAME),
        FieldDef("offline", "Offline", QFT_BOOL, "Whether node is marked offline", lambda n, c: bool(n.offline)),
        FieldDef("vm_capable", "VMCapable", QFT_BOOL, "Whether node can host instances", lambda n, c: bool(n.vm_capable)),
        FieldDef("pip", "PrimaryIP", QFT_TEXT, "Primary IP address", lambda n, c: known(n.primary_ip)),
        FieldDef("sip", "SecondaryIP", QFT_TEXT, "Secondary IP address", lambda n, c: known(n.secondary_ip)),
        FieldDef(
            "master", "IsMaster", QFT_BOOL, "Whether node is master",
            lambda n, c: n.uuid is not None and n.uuid == c.config.cluster.master_node,
        ),
        FieldDef("group", "Group", QFT_TEXT, "Node group", lambda n, c: _node_group(n, c).name),
        FieldDef("group.uuid", "GroupUUID", QFT_TEXT, "UUID of node group", lambda n, c: known(n.group)),
        FieldDef(
            "ndparams", "NodeParameters", QFT_OTHER, "Merged node parameters",
            lambda n, c: common.node_ndparams(c.config, n),
        ),
        FieldDef(
            "custom_ndparams", "CustomNodeParameters", QFT_OTHER, "Custom node parameters",
            lambda n, c: dict(n.ndparams),
        ),
        FieldDef(
            "pinst_cnt", "Pinst", QFT_NUMBER, "Number of instances with this node as primary",
            lambda n, c: len(index(c).node_primaries.get(n.uuid or "", [])),
        ),
        FieldDef(
            "sinst_cnt", "Sinst", QFT_NUMBER, "Number of instances with this node as secondary",
            lambda n, c: len(index(c).node_secondaries.get(n.uuid or "", [])),
        ),
        FieldDef(
            "pinst_list", "PriInstances", QFT_OTHER, "List of instances with this node as primary",
            _instance_names(lambda idx: idx.node_primaries),
        ),
        FieldDef(
            "sinst_list", "SecInstances", QFT_OTHER, "List of instances with this node as secondary",
            _instance_names(lambda idx: idx.node_secondaries),
        ),
        FieldDef("role", "Role", QFT_TEXT, _ROLE_DOC, node_role),
        FieldDef("powered", "Powered", QFT_BOOL, "Whether node is thought to be powered on", _powered),
        FieldDef("hv_state", "HypervisorState", QFT_OTHER, "Hypervisor state", lambda n, c: present(None)),
        FieldDef("disk_state", "DiskState", QFT_OTHER, "Disk state", lambda n, c: present(None)),
        FieldDef("liveness", "Liveness", QFT_TEXT,
                 'Heartbeat liveness: "up", "unreachable", "offline" or "unknown"',
                 _liveness("liveness"), needs=_LIVENESS),
        FieldDef("liveness_since", "LivenessSince", QFT_TIMESTAMP, "When the node's liveness last changed",
                 _liveness("since"), needs=_LIVENESS),
        FieldDef("last_seen", "LastSeen", QFT_TIMESTAMP, "When the master last heard from the node",
                 _liveness("last_seen"), needs=_LIVENESS),
        FieldDef("seen_boot_id", "SeenBootID", QFT_TEXT, "Boot id the node gave in its last heartbeat hello",
                 _liveness("boot_id"), needs=_LIVENESS),
    ]
    out += [
        FieldDef(name, title, kind, doc, _node_live(name), needs=_LIVE_NODE)
        for name, (title, kind, doc) in NODE_LIVE_FIELDS.items()
    ]
    out += common.nd_param_fields(lambda n, c: common.node_ndparams(c.config, n))
    out += common_fields("Node")
    return out


NODE_FIELDS = field_table(_node_fields())

# --- node groups -------------------------------------------------------------------


def _group_diskparams(group: NodeGroup, ctx: QueryContext) -> dict[str, Any]:
    merged = {k: dict(v or {}) for k, v in ctx.config.cluster.diskparams.items()}
    for template, params in (group.diskparams or {}).items():
        merged[template] = common.fill(merged.get(template), params)
    return merged


def _group_nodes(group: NodeGroup, ctx: QueryContext) -> list[Node]:
    return index(ctx).group_nodes.get(group.uuid or "", [])


def _group_instances(group: NodeGroup, ctx: QueryContext) -> list[str]:
    primaries = index(ctx).node_primaries
    return [i.name or "" for node in _group_nodes(group, ctx) for i in primaries.get(node.uuid or "", [])]


def _group_fields() -> list[FieldDef]:
    out = [
        FieldDef("alloc_policy", "AllocPolicy", QFT_TEXT, "Allocation policy for group", lambda g, c: known(g.alloc_policy)),
        FieldDef(
            "custom_diskparams", "CustomDiskParameters", QFT_OTHER, "Custom disk parameters",
            lambda g, c: dict(g.diskparams),
        ),
        FieldDef(
            "custom_ipolicy", "CustomInstancePolicy", QFT_OTHER, "Custom instance policy limitations",
            lambda g, c: dict(g.ipolicy),
        ),
        FieldDef("custom_ndparams", "CustomNDParams", QFT_OTHER, "Custom node parameters", lambda g, c: dict(g.ndparams)),
        FieldDef("diskparams", "DiskParameters", QFT_OTHER, "Disk parameters (merged)", _group_diskparams),
        FieldDef(
            "ipolicy", "InstancePolicy", QFT_OTHER, "Instance policy limitations (merged)",
            lambda g, c: common.fill(c.config.cluster.ipolicy, g.ipolicy),
        ),
        FieldDef("name", "Group", QFT_TEXT, "Group name", lambda g, c: known(g.name)),
        FieldDef("ndparams", "NDParams", QFT_OTHER, "Node parameters", lambda g, c: common.group_ndparams(c.config, g)),
        FieldDef("node_cnt", "Nodes", QFT_NUMBER, "Number of nodes", lambda g, c: len(_group_nodes(g, c))),
        FieldDef(
            "node_list", "NodeList", QFT_OTHER, "List of nodes",
            lambda g, c: nice_sort(n.name or "" for n in _group_nodes(g, c)),
        ),
        FieldDef("pinst_cnt", "Instances", QFT_NUMBER, "Number of primary instances", lambda g, c: len(_group_instances(g, c))),
        FieldDef(
            "pinst_list", "InstanceList", QFT_OTHER, "List of primary instances",
            lambda g, c: nice_sort(_group_instances(g, c)),
        ),
        FieldDef(
            "networks", "Networks", QFT_OTHER, "Networks connected to the group (network UUID to NIC parameters)",
            lambda g, c: dict(g.networks),
        ),
    ]
    out += common.nd_param_fields(lambda g, c: common.group_ndparams(c.config, g))
    out += common_fields("Group")
    return out


GROUP_FIELDS = field_table(_group_fields())

# --- the cluster ---------------------------------------------------------------------


def _constant(value: Any) -> Callable[[Any, QueryContext], Any]:
    """A field getter giving C{value} whatever the item."""
    return lambda _item, _ctx: value


def _cluster_fields() -> list[FieldDef]:
    static = [
        ("software_version", "SoftwareVersion", QFT_TEXT, GANETI_RELEASE, "Software version"),
        ("protocol_version", "ProtocolVersion", QFT_NUMBER, cluster_info_mod.PROTOCOL_VERSION, "RPC protocol version"),
        ("config_version", "ConfigVersion", QFT_NUMBER, CONFIG_VERSION, "Configuration format version"),
        ("os_api_version", "OsApiVersion", QFT_NUMBER, cluster_info_mod.OS_API_VERSION, "API version for OS template scripts"),
        ("export_version", "ExportVersion", QFT_NUMBER, cluster_info_mod.EXPORT_VERSION, "Import/export file format version"),
        ("vcs_version", "VCSVersion", QFT_TEXT, cluster_info_mod.VCS_VERSION, "VCS version"),
    ]
    out = [FieldDef(n, t, k, d, _constant(v)) for n, t, k, v, d in static]
    out += [
        FieldDef("tags", "Tags", QFT_OTHER, "Tags", lambda cl, c: list(cl.tags)),
        FieldDef(
            "architecture", "ArchInfo", QFT_OTHER, "Architecture information",
            lambda cl, c: cluster_info_mod.architecture(),
        ),
        FieldDef("drain_flag", "QueueDrained", QFT_BOOL, "Flag whether job queue is drained", lambda cl, c: c.drain_flag),
        FieldDef(
            "watcher_pause", "WatcherPause", QFT_TIMESTAMP, "Until when watcher is paused",
            lambda cl, c: present(c.watcher_pause), needs=frozenset([NEED_WATCHER]),
        ),
        FieldDef(
            "master_node", "Master", QFT_TEXT, "Master node name",
            lambda cl, c: known(c.config.master_node_name()), QFF_HOSTNAME,
        ),
        FieldDef("cluster_name", "Name", QFT_TEXT, "Cluster name", lambda cl, c: known(cl.cluster_name), QFF_HOSTNAME),
        FieldDef("volume_group_name", "VgName", QFT_TEXT, "LVM volume group name", lambda cl, c: present(cl.volume_group_name)),
    ]
    out += common.timestamp_fields() + common.uuid_fields("Cluster") + common.serial_fields("Cluster")
    return out


CLUSTER_FIELDS = field_table(_cluster_fields(), [("name", "cluster_name")])

# --- jobs ----------------------------------------------------------------------------

#: opcode -> the input key Ganeti shows in the job summary, e.g. "INSTANCE_REMOVE(web1)"
_SUMMARY_KEYS: dict[str, str] = {
    "OP_CLUSTER_VERIFY_GROUP": "group_name",
    "OP_GROUP_VERIFY_DISKS": "group_name",
    "OP_CLUSTER_RENAME": "name",
    "OP_QUERY": "what",
    "OP_QUERY_FIELDS": "what",
    "OP_TAGS_SEARCH": "pattern",
    "OP_TEST_ALLOCATOR": "iallocator",
    **{
        "OP_NODE_" + op: "node_name"
        for op in ("REMOVE", "ADD", "MODIFY_STORAGE", "SET_PARAMS", "POWERCYCLE", "MIGRATE", "EVACUATE")
    },
    "OP_REPAIR_NODE_STORAGE": "node_name",
    **{
        "OP_INSTANCE_" + op: "instance_name"
        for op in (
            "CREATE REINSTALL REMOVE STARTUP SHUTDOWN REBOOT REPLACE_DISKS FAILOVER MIGRATE MOVE CONSOLE"
            " ACTIVATE_DISKS DEACTIVATE_DISKS RECREATE_DISKS SET_PARAMS GROW_DISK CHANGE_GROUP"
        ).split()
    },
    **{"OP_GROUP_" + op: "group_name" for op in ("ADD", "ASSIGN_NODES", "SET_PARAMS", "REMOVE", "EVACUATE")},
    **{"OP_BACKUP_" + op: "instance_name" for op in ("PREPARE", "EXPORT", "REMOVE")},
    **{"OP_NETWORK_" + op: "network_name" for op in ("ADD", "REMOVE", "SET_PARAMS", "CONNECT", "DISCONNECT")},
}

INVALID_OP = "INVALID_OP"


def haskell_show_double(value: float) -> str:
    """Render a float as Haskell's C{show} does (luxid is Haskell): C{2.0}, C{1.0e-3}."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value < 0:
        return "-" + haskell_show_double(-value)
    if value == 0:
        return "0.0"
    digits_t, exp = decimal.Decimal(repr(value)).normalize().as_tuple()[1:]
    digits = "".join(str(d) for d in digits_t)
    point = len(digits) + int(exp)  # value = 0.<digits> * 10**point
    if 0.1 <= value < 10**7:
        if point <= 0:
            return "0." + "0" * -point + digits
        return digits[:point].ljust(point, "0") + "." + (digits[point:] or "0")
    return "%s.%se%d" % (digits[0], digits[1:] or "0", point - 1)


def op_summary(op_input: Any) -> str:
    """Ganeti's one-line summary of an opcode, e.g. C{TEST_DELAY(2.0)}."""
    if not isinstance(op_input, Mapping):
        return INVALID_OP
    op_id = op_input.get("OP_ID")
    if not isinstance(op_id, str) or not op_id.startswith("OP_"):
        return INVALID_OP
    short = op_id[3:]
    if op_id == "OP_TEST_DELAY":
        duration = op_input.get("duration")
        if isinstance(duration, bool) or not isinstance(duration, (int, float)):
            return short
        return "%s(%s)" % (short, haskell_show_double(float(duration)))
    if op_id == "OP_TAGS_GET":
        kind = op_input.get("kind")
        name = op_input.get("name")
        return "%s(%s)" % (short, "None" if kind == "cluster" or name is None else name)
    key = _SUMMARY_KEYS.get(op_id)
    if key is None:
        return short
    value = op_input.get(key)
    if value is None:
        return "%s(None)" % short if op_id == "OP_TEST_ALLOCATOR" else short
    return "%s(%s)" % (short, value)


def _job(get: Callable[[Any], Any]) -> Callable[[Any, QueryContext], Any]:
    def getter(item: Any, ctx: QueryContext) -> Any:
        if item[1] is None:
            raise Unavail()
        return get(item[1])

    return getter


def _per_op(get: Callable[[Any], Any]) -> Callable[[Any, QueryContext], Any]:
    return _job(lambda job: [get(op) for op in job.ops])


def _job_ts(attr: str) -> Callable[[Any, QueryContext], Any]:
    return _job(lambda job: present(getattr(job, attr)))


_TS_DOC = " (tuple containing seconds and microseconds)"


def _job_fields() -> list[FieldDef]:
    return [
        FieldDef("id", "ID", QFT_NUMBER, "Job ID", lambda item, c: item[0], QFF_JOB_ID),
        FieldDef("status", "Status", QFT_TEXT, "Job status", _job(lambda j: j.status)),
        FieldDef("priority", "Priority", QFT_NUMBER, "Current job priority (19 to -20)", _job(lambda j: j.priority)),
        FieldDef(
            "archived", "Archived", QFT_BOOL, "Whether job is archived",
            lambda item, c: _job(lambda j: item[0] in c.archived_jobs)(item, c),
        ),
        FieldDef("ops", "OpCodes", QFT_OTHER, "List of all opcodes", _per_op(lambda op: op.input)),
        FieldDef("opresult", "OpCode_result", QFT_OTHER, "List of opcodes results", _per_op(lambda op: op.result)),
        FieldDef("opstatus", "OpCode_status", QFT_OTHER, "List of opcodes status", _per_op(lambda op: op.status)),
        FieldDef("oplog", "OpCode_log", QFT_OTHER, "List of opcode output logs", _per_op(lambda op: op.log)),
        FieldDef(
            "opstart", "OpCode_start", QFT_OTHER, "List of opcode start timestamps (before acquiring locks)",
            _per_op(lambda op: op.start_timestamp),
        ),
        FieldDef(
            "opexec", "OpCode_exec", QFT_OTHER,
            "List of opcode execution start timestamps (after acquiring locks)",
            _per_op(lambda op: op.exec_timestamp),
        ),
        FieldDef(
            "opend", "OpCode_end", QFT_OTHER, "List of opcode execution end timestamps",
            _per_op(lambda op: op.end_timestamp),
        ),
        FieldDef(
            "oplockwait", "OpCode_lockwait", QFT_OTHER,
            "List of the seconds each opcode waited for its locks, per lock level (an extension)",
            _per_op(lambda op: op.extra.get("lock_wait") or {}),
        ),
        FieldDef("oppriority", "OpCode_prio", QFT_OTHER, "List of opcode priorities", _per_op(lambda op: op.priority)),
        FieldDef("summary", "Summary", QFT_OTHER, "List of per-opcode summaries", _per_op(lambda op: op_summary(op.input))),
        FieldDef(
            "received_ts", "Received", QFT_OTHER, "Timestamp of when job was received" + _TS_DOC,
            _job_ts("received_timestamp"), QFF_TIMESTAMP,
        ),
        FieldDef("start_ts", "Start", QFT_OTHER, "Timestamp of job start" + _TS_DOC, _job_ts("start_timestamp"), QFF_TIMESTAMP),
        FieldDef("end_ts", "End", QFT_OTHER, "Timestamp of job end" + _TS_DOC, _job_ts("end_timestamp"), QFF_TIMESTAMP),
    ]


JOB_FIELDS = field_table(_job_fields())


def parse_job_id(value: Any) -> int:
    """A job id from an integer or a decimal string.

    @raise errors.OpPrereqError: (C{ECODE_INVAL}) anything else.
    """
    from ganeti import errors

    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise errors.OpPrereqError("Invalid job id %r" % (value,), errors.ECODE_INVAL)


def _jobs(ctx: QueryContext) -> list[tuple[int, Any]]:
    return [(job_id, ctx.jobs[job_id]) for job_id in sorted(ctx.jobs)]


def _find_job(ctx: QueryContext, name: Any) -> tuple[int, Any]:
    job_id = parse_job_id(name)
    return (job_id, ctx.jobs.get(job_id))


# --- locks -----------------------------------------------------------------------------

EXCLUSIVE = "exclusive"
SHARED = "shared"


def _owner_text(owner: Any) -> str:
    """How Ganeti names a lock owner: its identifier, JSON-encoded (C{"17"}, C{'"luxid"'})."""
    ident = owner[0] if isinstance(owner, (list, tuple)) and owner else owner
    return json.dumps(ident)


def _locks(ctx: QueryContext) -> list[tuple[str, list[tuple[Any, str]], list[tuple[str, Any]]]]:
    """C{(name, [(owner, mode)], [(mode, owner)])} for every lock held or wanted, by name."""
    held: dict[str, list[tuple[Any, str]]] = {}
    waiting: dict[str, list[tuple[str, Any]]] = {}
    status = ctx.locks if isinstance(ctx.locks, (list, tuple)) and len(ctx.locks) == 2 else [[], []]
    for entry in status[0] or []:
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str):
            held[entry[0]] = [
                (o[0], o[1]) for o in entry[1] or [] if isinstance(o, (list, tuple)) and len(o) == 2
            ]
    for entry in status[1] or []:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 3):
            continue
        for request in entry[2] or []:
            if isinstance(request, (list, tuple)) and len(request) == 2 and request[1] in (EXCLUSIVE, SHARED):
                waiting.setdefault(request[0], []).append((request[1], entry[1]))
    names = nice_sort(set(held) | set(waiting))
    return [(name, held.get(name, []), waiting.get(name, [])) for name in names]


def _lock_mode(item: Any, ctx: QueryContext) -> Any:
    owners = item[1]
    if not owners:
        return None
    return EXCLUSIVE if any(mode == EXCLUSIVE for _, mode in owners) else SHARED


def _lock_fields() -> list[FieldDef]:
    return [
        FieldDef("name", "Name", QFT_OTHER, "Lock name", lambda item, c: item[0]),
        FieldDef(
            "mode", "Mode", QFT_OTHER, "Mode in which the lock is currently acquired (exclusive or shared)", _lock_mode
        ),
        FieldDef(
            "owner", "Owner", QFT_OTHER, "Current lock owner(s)",
            lambda item, c: [_owner_text(owner) for owner, _ in item[1]],
        ),
        FieldDef(
            "pending", "Pending", QFT_OTHER, "Jobs waiting for the lock",
            lambda item, c: [[mode, [_owner_text(owner)]] for mode, owner in item[2]],
        ),
    ]


LOCK_FIELDS = field_table(_lock_fields())

# --- registry ----------------------------------------------------------------------------


def _never(ctx: QueryContext, name: Any) -> Any:
    return None


# --- exports: C{ctx.live["exports"]}, C{[[node name, export name], ...]} gathered by LuxiD ----

EXPORT_FIELDS = field_table([
    FieldDef("node", "Node", QFT_TEXT, "Node name", lambda item, c: item[0], QFF_HOSTNAME),
    FieldDef("export", "Export", QFT_TEXT, "Export name", lambda item, c: item[1]),
])


def _exports(ctx: QueryContext) -> list[tuple[str, str]]:
    rows = (ctx.live or {}).get("exports") or [] if isinstance(ctx.live, dict) else []
    return sorted((str(node), str(name)) for node, name in rows)


RESOURCES: dict[str, Resource] = {
    "node": Resource(
        "node",
        "Node",
        NODE_FIELDS,
        lambda ctx: by_name(ctx.config.nodes.values()),
        lambda ctx, name: common.find_in(ctx, "nodes", ctx.config.nodes, name),
    ),
    "instance": Resource(
        "instance", "Instance", INSTANCE_FIELDS, instances, find_instance
    ),
    "group": Resource(
        "group",
        "Group",
        GROUP_FIELDS,
        lambda ctx: by_name(ctx.config.nodegroups.values()),
        lambda ctx, name: common.find_in(ctx, "nodegroups", ctx.config.nodegroups, name),
    ),
    "cluster": Resource("cluster", "Cluster", CLUSTER_FIELDS, lambda ctx: [ctx.config.cluster], _never, namefield=None),
    "job": Resource(
        "job", "Job", JOB_FIELDS, _jobs, _find_job, namefield="id", row_for_missing=True
    ),
    "lock": Resource("lock", "Lock", LOCK_FIELDS, _locks, _never, namefield=None),
    "export": Resource("export", "Export", EXPORT_FIELDS, _exports, _never, namefield=None),
    "filter": FILTER_RESOURCE,
    "network": NETWORK_RESOURCE,
}
