"""The version 2 resources (Ganeti's C{rlib2}), forwarded to LuxiD.

Reads are LUXI queries; writes submit one job and answer its id.  Writes
whose opcode this cluster does not define yet answer 501 (see
L{baserlib.Context.opcode}): they start working as soon as the opcode exists.
The instance resources live in L{ganeti.rapi.instances}.
"""

from __future__ import annotations

from typing import Any

import orjson

from ganeti import errors, opcodes
from ganeti.luxi import methods
from ganeti.querydefs import QR_VIA_RAPI, RS_NORMAL
from ganeti.rapi import bulk as bulk_lists
from ganeti.rapi.baserlib import ANON, READ, WRITE, Context, Encoded, route
from ganeti.rapi.http import HttpError, bad_request, not_found

RAPI_VERSION = 2

FEATURES = ["instance-create-reqv1", "instance-reinstall-reqv1", "node-migrate-reqv1", "node-evac-res1"]

COMMON_FIELDS = ["ctime", "mtime", "uuid", "serial_no", "tags"]
I_FIELDS = [
    "name", "admin_state", "os", "pnode", "snodes", "disk_template",
    "nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names", "nic.links", "nic.networks",
    "nic.networks.names", "nic.bridges", "network_port", "disk.sizes", "disk.spindles", "disk_usage",
    "disk.uuids", "disk.names", "beparams", "hvparams", "oper_state", "oper_ram", "oper_vcpus", "status",
    "custom_hvparams", "custom_beparams", "custom_nicparams", "custom_osparams",
] + COMMON_FIELDS
N_FIELDS = [
    "name", "offline", "master_candidate", "drained", "dtotal", "dfree", "sptotal", "spfree",
    "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt", "ctotal", "cnos", "cnodes", "csockets",
    "pip", "sip", "role", "pinst_list", "sinst_list", "master_capable", "vm_capable", "ndparams",
    "group.uuid", "liveness", "liveness_since", "last_seen", "seen_boot_id",
] + COMMON_FIELDS
G_FIELDS = [
    "alloc_policy", "name", "node_cnt", "node_list", "ipolicy", "custom_ipolicy", "diskparams",
    "custom_diskparams", "ndparams", "custom_ndparams",
] + COMMON_FIELDS
NET_FIELDS = [
    "name", "network", "gateway", "network6", "gateway6", "mac_prefix", "free_count", "reserved_count",
    "map", "group_list", "inst_list", "external_reservations",
] + COMMON_FIELDS
J_FIELDS_BULK = ["id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts"]
J_FIELDS = J_FIELDS_BULK + ["oplog", "opresult"]
#: the fields of C{/2/os?bulk=1}
OS_FIELDS_BULK = ["name", "valid", "variants", "parameters", "api_versions", "blacklisted", "hidden", "trusted"]

NODE_ROLES = {"M": "master", "C": "master-candidate", "R": "regular", "D": "drained", "O": "offline"}
WFJC_TIMEOUT = 10
#: the opcodes of the tag resources' writes
TAG_OPS = {"PUT": ("OP_TAGS_SET",), "DELETE": ("OP_TAGS_DEL",)}


# --- helpers ----------------------------------------------------------------
#: the LUXI methods answering rows of plain values (as Ganeti's rlib2 reads these resources)
LEGACY_QUERIES = {"instance": methods.QueryInstances, "node": methods.QueryNodes, "group": methods.QueryGroups}


async def query(ctx: Context, resource: str, fields: list[str], names: list[str] | None = None) -> list[list[Any]]:
    """Rows of plain values (C{None} where a value is unavailable or unknown).

    An unknown name fails with C{OpPrereqError} (C{unknown_entity}): 404.
    """
    method = LEGACY_QUERIES.get(resource)
    if method is not None:
        return await ctx.read(method.call([] if names is None else names, fields, False))
    qfilter: list[Any] | None = None if names is None else ["|"] + [["=", "name", n] for n in names]
    result = await ctx.read(methods.Query.call(resource, fields, qfilter))
    return [[value if status == RS_NORMAL else None for status, value in row] for row in result["data"]]


async def list_items(ctx: Context, resource: str, fields: list[str], uri: str, key: str = "id") -> Any:
    """The items of C{resource}: dicts of C{fields} (bulk) or C{{key: name, "uri": ...}}.

    The answer, encoded, is shared by identical concurrent requests: under
    load a bulk list of 1,000 instances is queried, reshaped and encoded
    once per round of requests instead of once per request.
    """
    bulk = ctx.args.bool("bulk")

    async def compute() -> Encoded:
        cache = getattr(ctx.luxi, "bulk_cache", None)  # a LuxiPool keeps the parts of bulk lists
        if bulk and cache is not None and bulk_lists.usable(resource, fields):
            return Encoded(await bulk_lists.bulk_list(cache, resource, fields, lambda: config_serial(ctx),
                                                      lambda asked: query(ctx, resource, asked)))
        if bulk:
            rows = await query(ctx, resource, fields)
            return Encoded(orjson.dumps([dict(zip(fields, row)) for row in rows]))
        rows = await query(ctx, resource, ["name"])
        return Encoded(orjson.dumps([{key: row[0], "uri": uri % row[0]} for row in rows]))

    return await ctx.shared(("list", resource, bulk, tuple(fields), uri, key), compute)


async def config_serial(ctx: Context) -> Any:
    """The serial of the config LuxiD answers from (C{None}: it does not say)."""
    return (await ctx.read(methods.QueryConfigValues.call(["config_serial"])))[0]


async def one_item(ctx: Context, resource: str, fields: list[str], name: str) -> dict[str, Any]:
    rows = await query(ctx, resource, fields, [name])
    if not rows:
        raise not_found("%s '%s' not found" % (resource.capitalize(), name))
    return dict(zip(fields, rows[0]))


def tags_from_args(ctx: Context) -> list[str]:
    return ctx.args.all("tag")


async def tags_resource(ctx: Context, kind: str, name: str | None, resource: str) -> Any:
    if ctx.method == "GET":
        return await ctx.run(methods.QueryTags.call(kind, name or ""))
    op_id = "OP_TAGS_SET" if ctx.method == "PUT" else "OP_TAGS_DEL"
    static: dict[str, Any] = {"kind": kind, "tags": tags_from_args(ctx)}
    if name is not None:
        static["name"] = name
    return await ctx.submit(op_id, static=static, resource=resource)


# --- cluster ------------------------------------------------------------------
@route("/", GET=ANON)
async def root(ctx: Context) -> Any:
    """Legacy root: null."""
    return None


@route("/2", GET=ANON)
async def root2(ctx: Context) -> Any:
    """Legacy version 2 root: null."""
    return None


@route("/version", GET=ANON)
async def version(ctx: Context) -> Any:
    """The RAPI version (2)."""
    return RAPI_VERSION


@route("/2/info", GET=ANON)
async def info(ctx: Context) -> Any:
    """Cluster information (LUXI QueryClusterInfo)."""
    result = await ctx.read(methods.QueryClusterInfo.call())
    if isinstance(result, dict):
        result = dict(result)
        result.setdefault("vg_name", result.get("volume_group_name"))
        result.setdefault("drbd_helper", result.get("drbd_usermode_helper"))
    return result


@route("/2/features", GET=ANON)
async def features(ctx: Context) -> Any:
    """Features of this RAPI server."""
    return list(FEATURES)


@route("/2/os", GET=ANON, submits={"GET": ("OP_OS_DIAGNOSE",)})
async def os_list(ctx: Context) -> Any:
    """Operating systems (runs an OpOsDiagnose job and waits for it).

    The valid OSes of every node, as the names instances use (C{name+variant}
    for each variant, else C{name}); C{bulk=1}: every OS with its details
    (C{name}, C{valid}, C{variants}, C{parameters} as C{[{name, description}]},
    C{api_versions}, C{blacklisted}, C{hidden}, C{trusted}).
    """
    bulk = ctx.args.bool("bulk")
    fields = OS_FIELDS_BULK if bulk else ["name", "variants"]
    op = ctx.opcode("OP_OS_DIAGNOSE", {"output_fields": fields, "names": []}, resource="r_2_os", dry_run=False)
    (rows,) = await ctx.run_job([op])
    if not isinstance(rows, list):
        raise HttpError(502, "Can't get OS list")
    if bulk:
        items = []
        for row in rows:
            item = dict(zip(fields, row))
            item["parameters"] = [{"name": p[0], "description": p[1]} for p in item.get("parameters") or []
                                  if isinstance(p, list) and len(p) == 2]
            items.append(item)
        return items
    names: list[str] = []
    for name, variants in rows:
        names.extend(opcodes.os_names(name, variants))
    return names


@route("/2/redistribute-config", PUT=WRITE, submits={"PUT": ("OP_CLUSTER_REDIST_CONF",)})
async def redistribute_config(ctx: Context) -> Any:
    """Redistribute the configuration (OpClusterRedistConf)."""
    return await ctx.submit("OP_CLUSTER_REDIST_CONF", resource="r_2_redist_config")


@route("/2/modify", PUT=WRITE, submits={"PUT": ("OP_CLUSTER_SET_PARAMS",)})
async def cluster_modify(ctx: Context) -> Any:
    """Modify the cluster (OpClusterSetParams)."""
    body = ctx.body_dict()
    if "compression_tools" in body:
        raise HttpError(403, "Parameter 'compression_tools' cannot be set through RAPI")
    return await ctx.submit("OP_CLUSTER_SET_PARAMS", body, resource="r_2_cluster_modify")


@route("/2/tags", GET=ANON, PUT=WRITE, DELETE=WRITE, submits=TAG_OPS)
async def cluster_tags(ctx: Context) -> Any:
    """Cluster tags; PUT/DELETE ?tag=... add/remove them."""
    return await tags_resource(ctx, "cluster", None, "r_2_tags")


# --- jobs -----------------------------------------------------------------------
@route("/2/jobs", GET=ANON)
async def jobs(ctx: Context) -> Any:
    """Jobs; bulk=1 gives their details."""
    fields = J_FIELDS_BULK if ctx.args.bool("bulk") else ["id"]
    rows = [row for row in await ctx.run(methods.QueryJobs.call(None, fields)) if row is not None]
    if ctx.args.bool("bulk"):
        return [dict(zip(fields, row)) for row in rows]
    return [{"id": row[0], "uri": "/2/jobs/%s" % row[0]} for row in rows]


@route("/2/jobs/{job_id}", GET=ANON, DELETE=WRITE)
async def job(ctx: Context, job_id: str) -> Any:
    """A job; DELETE cancels it."""
    if ctx.method == "DELETE":
        try:
            return await ctx.run(methods.CancelJob.call(int(job_id)))
        except errors.JobLost:
            raise not_found("Job %s not found" % job_id) from None
    rows = await ctx.run(methods.QueryJobs.call([int(job_id)], J_FIELDS))
    if not rows or rows[0] is None:
        raise not_found("Job %s not found" % job_id)
    return dict(zip(J_FIELDS, rows[0]))


@route("/2/jobs/{job_id}/wait", GET=WRITE)
async def job_wait(ctx: Context, job_id: str) -> Any:
    """Wait (at most 10 s) for a job to change (LUXI WaitForJobChange)."""
    body = ctx.body_dict()
    fields = body.get("fields")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise bad_request("Missing or invalid 'fields' parameter: a list of field names is required")
    prev_info = body.get("previous_job_info")
    prev_serial = body.get("previous_log_serial")
    if prev_info is not None and not isinstance(prev_info, list):
        raise bad_request("'previous_job_info' must be a list or null")
    if prev_serial is not None and (isinstance(prev_serial, bool) or not isinstance(prev_serial, int)):
        raise bad_request("'previous_log_serial' must be an integer or null")
    try:
        result = await ctx.run_alone(methods.WaitForJobChange.call(int(job_id), fields, prev_info, prev_serial,
                                                                    WFJC_TIMEOUT))
    except errors.JobLost:
        raise not_found("Job %s not found" % job_id) from None
    if result is None:
        raise not_found("Job %s not found" % job_id)
    if result == "nochange":
        return None
    job_info, log_entries = result
    return {"job_info": job_info, "log_entries": log_entries}


# --- nodes ---------------------------------------------------------------------------
@route("/2/nodes", GET=ANON)
async def nodes(ctx: Context) -> Any:
    """Nodes; bulk=1 gives their details."""
    return await list_items(ctx, "node", N_FIELDS, "/2/nodes/%s")


@route("/2/nodes/{name}", GET=ANON)
async def node(ctx: Context, name: str) -> Any:
    """One node."""
    result = await one_item(ctx, "node", N_FIELDS, name)
    result["secondary_ip"] = result.get("sip")
    return result


@route("/2/nodes/{name}/role", GET=ANON, PUT=WRITE, submits={"PUT": ("OP_NODE_SET_PARAMS",)})
async def node_role(ctx: Context, name: str) -> Any:
    """The node's role; PUT a role string to change it (OpNodeSetParams)."""
    if ctx.method == "GET":
        role = (await one_item(ctx, "node", ["role"], name))["role"]
        return NODE_ROLES.get(role, role)
    role = ctx.body
    flags = {
        "master-candidate": {"master_candidate": True, "offline": False, "drained": False},
        "regular": {"master_candidate": False, "offline": False, "drained": False},
        "drained": {"drained": True, "master_candidate": False, "offline": False},
        "offline": {"offline": True, "master_candidate": False, "drained": False},
    }
    if not isinstance(role, str) or role not in flags:
        raise bad_request("Can't set role to %r: one of %s" % (role, ", ".join(sorted(flags))))
    static = dict(flags[role], node_name=name, force=ctx.args.bool("force"),
                  auto_promote=ctx.args.bool("auto-promote"))
    return await ctx.submit("OP_NODE_SET_PARAMS", static=static, resource="r_2_nodes_name_role")


@route("/2/nodes/{name}/modify", POST=WRITE, submits={"POST": ("OP_NODE_SET_PARAMS",)})
async def node_modify(ctx: Context, name: str) -> Any:
    """Modify a node (OpNodeSetParams)."""
    return await ctx.submit("OP_NODE_SET_PARAMS", ctx.body_dict(), static={"node_name": name},
                            resource="r_2_nodes_name_modify")


def _body_only(ctx: Context, names: tuple[str, ...]) -> None:
    """Refuse parameters that old clients sent as query arguments: this server reads them from the body."""
    given = [n for n in names if n in ctx.args]
    if given:
        raise bad_request("Give %s in the request body, not in the query string" % ", ".join(given))


@route("/2/nodes/{name}/evacuate", POST=WRITE, submits={"POST": ("OP_NODE_EVACUATE",)})
async def node_evacuate(ctx: Context, name: str) -> Any:
    """Move the instances off a node (OpNodeEvacuate; its result lists the jobs it submitted).

    Body: C{mode} (required: C{primary-only}, C{secondary-only} or C{all}),
    C{iallocator} or C{remote_node}, C{early_release}.  Query: C{dry-run}, C{reason}.
    """
    _body_only(ctx, ("iallocator", "remote_node", "early_release"))
    return await ctx.submit("OP_NODE_EVACUATE", ctx.body_dict(), static={"node_name": name},
                            resource="r_2_nodes_name_evacuate")


@route("/2/nodes/{name}/migrate", POST=WRITE, submits={"POST": ("OP_NODE_MIGRATE",)})
async def node_migrate(ctx: Context, name: str) -> Any:
    """Migrate a node's primary instances (OpNodeMigrate).

    Body: C{mode}, C{target_node}, C{iallocator}, C{allow_runtime_changes},
    C{ignore_ipolicy}.  Legacy form: query C{live=0|1} or C{mode=...}
    (then the body is ignored).  Query: C{dry-run}, C{reason}.
    """
    _body_only(ctx, ("iallocator", "target_node"))
    body = ctx.body_dict()
    if "mode" in ctx.args or "live" in ctx.args:
        if "live" in ctx.args and "mode" in ctx.args:
            raise bad_request("Only one of 'live' and 'mode' should be passed")
        body = {"mode": ctx.args.one("mode")} if "mode" in ctx.args else {
            "mode": "live" if ctx.args.bool("live") else "non-live"}
    return await ctx.submit("OP_NODE_MIGRATE", body, static={"node_name": name}, resource="r_2_nodes_name_migrate")


@route("/2/nodes/{name}/powercycle", POST=WRITE, submits={"POST": ("OP_NODE_POWERCYCLE",)})
async def node_powercycle(ctx: Context, name: str) -> Any:
    """Powercycle a node (OpNodePowercycle)."""
    return await ctx.submit("OP_NODE_POWERCYCLE", static={"node_name": name, "force": ctx.args.bool("force")},
                            resource="r_2_nodes_name_powercycle")


@route("/2/nodes/{name}/storage", GET=WRITE, submits={"GET": ("OP_NODE_QUERY_STORAGE",)})
async def node_storage(ctx: Context, name: str) -> Any:
    """Storage units of a node (OpNodeQueryStorage)."""
    fields = ctx.args.one("output_fields")
    if not fields:
        raise bad_request("Missing the required 'output_fields' parameter")
    return await ctx.submit("OP_NODE_QUERY_STORAGE", static={
        "nodes": [name], "storage_type": ctx.args.one("storage_type"), "output_fields": fields.split(",")},
        resource="r_2_nodes_name_storage")


@route("/2/nodes/{name}/storage/modify", PUT=WRITE, submits={"PUT": ("OP_NODE_MODIFY_STORAGE",)})
async def node_storage_modify(ctx: Context, name: str) -> Any:
    """Modify a storage unit (OpNodeModifyStorage)."""
    changes = {} if "allocatable" not in ctx.args else {"allocatable": ctx.args.bool("allocatable")}
    return await ctx.submit("OP_NODE_MODIFY_STORAGE", static={
        "node_name": name, "storage_type": ctx.args.one("storage_type"), "name": ctx.args.one("name"),
        "changes": changes}, resource="r_2_nodes_name_storage_modify")


@route("/2/nodes/{name}/storage/repair", PUT=WRITE, submits={"PUT": ("OP_REPAIR_NODE_STORAGE",)})
async def node_storage_repair(ctx: Context, name: str) -> Any:
    """Repair a storage unit (OpRepairNodeStorage)."""
    return await ctx.submit("OP_REPAIR_NODE_STORAGE", static={
        "node_name": name, "storage_type": ctx.args.one("storage_type"), "name": ctx.args.one("name")},
        resource="r_2_nodes_name_storage_repair")


@route("/2/nodes/{name}/tags", GET=ANON, PUT=WRITE, DELETE=WRITE, submits=TAG_OPS)
async def node_tags(ctx: Context, name: str) -> Any:
    """Node tags; PUT/DELETE ?tag=... add/remove them."""
    return await tags_resource(ctx, "node", name, "r_2_nodes_name_tags")


# --- groups ----------------------------------------------------------------------------
@route("/2/groups", GET=ANON, POST=WRITE, submits={"POST": ("OP_GROUP_ADD",)})
async def groups(ctx: Context) -> Any:
    """Node groups; POST adds one (OpGroupAdd)."""
    if ctx.method == "POST":
        return await ctx.submit("OP_GROUP_ADD", ctx.body_dict(), rename={"name": "group_name"},
                                resource="r_2_groups")
    return await list_items(ctx, "group", G_FIELDS, "/2/groups/%s", key="name")


@route("/2/groups/{name}", GET=ANON, DELETE=WRITE, submits={"DELETE": ("OP_GROUP_REMOVE",)})
async def group(ctx: Context, name: str) -> Any:
    """One node group; DELETE removes it (OpGroupRemove)."""
    if ctx.method == "DELETE":
        return await ctx.submit("OP_GROUP_REMOVE", static={"group_name": name}, resource="r_2_groups_name")
    return await one_item(ctx, "group", G_FIELDS, name)


@route("/2/groups/{name}/modify", PUT=WRITE, submits={"PUT": ("OP_GROUP_SET_PARAMS",)})
async def group_modify(ctx: Context, name: str) -> Any:
    """Modify a node group (OpGroupSetParams)."""
    return await ctx.submit("OP_GROUP_SET_PARAMS", ctx.body_dict(), static={"group_name": name},
                            rename={"custom_ndparams": "ndparams", "custom_ipolicy": "ipolicy",
                                    "custom_diskparams": "diskparams"},
                            resource="r_2_groups_name_modify")


@route("/2/groups/{name}/rename", PUT=WRITE, submits={"PUT": ("OP_GROUP_RENAME",)})
async def group_rename(ctx: Context, name: str) -> Any:
    """Rename a node group (OpGroupRename)."""
    return await ctx.submit("OP_GROUP_RENAME", ctx.body_dict(), static={"group_name": name},
                            resource="r_2_groups_name_rename")


@route("/2/groups/{name}/assign-nodes", PUT=WRITE, submits={"PUT": ("OP_GROUP_ASSIGN_NODES",)})
async def group_assign_nodes(ctx: Context, name: str) -> Any:
    """Assign nodes to a group (OpGroupAssignNodes)."""
    return await ctx.submit("OP_GROUP_ASSIGN_NODES", ctx.body_dict(),
                            static={"group_name": name, "force": ctx.args.bool("force")},
                            resource="r_2_groups_name_assign_nodes")


@route("/2/groups/{name}/evacuate", PUT=WRITE, submits={"PUT": ("OP_GROUP_EVACUATE",)})
async def group_evacuate(ctx: Context, name: str) -> Any:
    """Move every instance of a group to other groups (OpGroupEvacuate); the result lists follow-up jobs."""
    return await ctx.submit("OP_GROUP_EVACUATE", ctx.body_dict(), static={"group_name": name},
                            resource="r_2_groups_name_evacuate")


@route("/2/groups/{name}/tags", GET=ANON, PUT=WRITE, DELETE=WRITE, submits=TAG_OPS)
async def group_tags(ctx: Context, name: str) -> Any:
    """Node group tags; PUT/DELETE ?tag=... add/remove them."""
    return await tags_resource(ctx, "nodegroup", name, "r_2_groups_name_tags")


# --- networks -----------------------------------------------------------------------------
@route("/2/networks", GET=ANON, POST=WRITE, submits={"POST": ("OP_NETWORK_ADD",)})
async def networks(ctx: Context) -> Any:
    """Networks; POST adds one (OpNetworkAdd)."""
    if ctx.method == "POST":
        return await ctx.submit("OP_NETWORK_ADD", ctx.body_dict(), rename={"name": "network_name"},
                                resource="r_2_networks")
    return await list_items(ctx, "network", NET_FIELDS, "/2/networks/%s", key="name")


@route("/2/networks/{name}", GET=ANON, DELETE=WRITE, submits={"DELETE": ("OP_NETWORK_REMOVE",)})
async def network(ctx: Context, name: str) -> Any:
    """One network; DELETE removes it (OpNetworkRemove)."""
    if ctx.method == "DELETE":
        return await ctx.submit("OP_NETWORK_REMOVE", static={"network_name": name}, resource="r_2_networks_name")
    return await one_item(ctx, "network", NET_FIELDS, name)


for _action, _op in (("connect", "OP_NETWORK_CONNECT"), ("disconnect", "OP_NETWORK_DISCONNECT"),
                     ("modify", "OP_NETWORK_SET_PARAMS"), ("rename", "OP_NETWORK_RENAME")):
    def _make(action: str, op_id: str) -> None:
        async def handler(ctx: Context, name: str) -> Any:
            return await ctx.submit(op_id, ctx.body_dict(), static={"network_name": name},
                                    resource="r_2_networks_name_%s" % action)

        handler.__doc__ = "%s a network (%s)." % (action.capitalize(), op_id)
        route("/2/networks/{name}/%s" % action, PUT=WRITE, submits={"PUT": (op_id,)})(handler)

    _make(_action, _op)


@route("/2/networks/{name}/tags", GET=ANON, PUT=WRITE, DELETE=WRITE, submits=TAG_OPS)
async def network_tags(ctx: Context, name: str) -> Any:
    """Network tags; PUT/DELETE ?tag=... add/remove them."""
    return await tags_resource(ctx, "network", name, "r_2_networks_name_tags")


# --- generic queries -------------------------------------------------------------------------
def _query_resource(resource: str) -> str:
    if resource not in QR_VIA_RAPI:
        raise bad_request("Requested resource '%s' is not available through the query interface" % resource)
    return resource


def _field_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [f for f in value.split(",") if f]
    if isinstance(value, list) and all(isinstance(f, str) for f in value):
        return value
    raise bad_request("'fields' must be a list of field names")


@route("/2/query/{name}", GET=READ, PUT=READ)
async def query_resource(ctx: Context, name: str) -> Any:
    """LUXI Query: ?fields=a,b (GET) or body {fields, qfilter or filter} (PUT)."""
    resource = _query_resource(name)
    qfilter = None
    if ctx.method == "PUT":
        body = ctx.body_dict()
        # as Ganeti's (whose client sends both): 'qfilter' unless null, else the
        # older 'filter'; other keys are ignored
        qfilter = body.get("qfilter")
        if qfilter is None:
            qfilter = body.get("filter")
        raw = body["fields"] if "fields" in body else ctx.args.one("fields")
    else:
        raw = ctx.args.one("fields")
    if raw is None:
        raise bad_request("Missing the required 'fields' parameter")
    fields = _field_list(raw)
    try:
        return await ctx.run(methods.Query.call(resource, fields, qfilter))
    except errors.QueryFilterParseError as e:
        raise bad_request(str(e.args[0] if e.args else e)) from None


@route("/2/query/{name}/fields", GET=ANON)
async def query_fields(ctx: Context, name: str) -> Any:
    """LUXI QueryFields (?fields= optional)."""
    resource = _query_resource(name)
    raw = ctx.args.one("fields")
    return await ctx.run(methods.QueryFields.call(resource, None if raw is None else _field_list(raw)))
