"""The instance resources of RAPI version 2 (Ganeti's C{R_2_instances*}).

Reads are LUXI queries; the operations submit one job and answer its id.
How each request becomes an opcode (spec/rapi.md section 5):

  - C{POST /2/instances}: the body, which must say C{"__version__": 1},
    minus that key; C{name} is C{instance_name}, C{os} is C{os_type};
    spaces in C{hvparams.usb_devices} become commas.
  - C{DELETE /2/instances/<i>}: C{OP_INSTANCE_REMOVE}, failures not ignored.
  - C{startup} and C{reboot} take query arguments only (a body is
    ignored); C{shutdown} takes the body plus C{no_remember}.
  - C{failover}, C{migrate}, C{rename}, C{modify}: the body
    (C{custom_beparams}/C{custom_hvparams} are accepted for C{modify}).
  - C{reinstall}: a body C{{"os", "start", "osparams"}} or the query
    arguments C{os} and C{nostartup}, not both; one job of shutdown,
    reinstall and, unless told not to, startup.
  - C{info}: a job of C{OP_INSTANCE_QUERY_DATA}; C{console}: a query of the
    C{console} and C{oper_state} fields, 503 unless the instance runs.

Every opcode carries the reason trail and C{dry-run} (L{Context.opcode});
operations whose opcode this cluster does not define yet answer 501.
"""

from __future__ import annotations

from typing import Any

from ganeti.rapi.baserlib import ANON, READ, WRITE, Context, route
from ganeti.rapi.http import HttpError, bad_request, not_found
from ganeti.rapi.rlib2 import I_FIELDS, list_items, one_item, query, tags_resource

#: the request body version of instance creation this server accepts
CREATE_REQUEST_VERSION = 1
#: the body key that carries it
VERSION_KEY = "__version__"
REBOOT_TYPES = ("soft", "hard", "full")


def _usb_devices_with_commas(params: dict[str, Any], key: str = "hvparams") -> None:
    """Ganeti's clients may separate C{usb_devices} with spaces; opcodes use commas."""
    hvparams = params.get(key)
    if isinstance(hvparams, dict) and isinstance(hvparams.get("usb_devices"), str):
        params[key] = dict(hvparams, usb_devices=hvparams["usb_devices"].replace(" ", ","))


@route("/2/instances", GET=ANON, POST=WRITE, submits={"POST": ("OP_INSTANCE_CREATE",)})
async def instances(ctx: Context) -> Any:
    """Instances (?bulk=1 for details); POST creates one (OpInstanceCreate).

    The creation body is Ganeti's request format version 1: it must hold
    C{"__version__": 1}, the OpInstanceCreate parameters (C{mode}, C{disks},
    C{nics}, ...) and C{name} and C{os} for C{instance_name} and
    C{os_type}.  Version 0 is refused with 400.  Query: C{dry-run}, C{reason}.
    """
    if ctx.method == "GET":
        return await list_items(ctx, "instance", I_FIELDS, "/2/instances/%s")
    body = ctx.body_dict()
    version = body.pop(VERSION_KEY, 0)
    if version == 0:
        raise bad_request("Instance creation request version 0 is no longer supported")
    if version != CREATE_REQUEST_VERSION:
        raise bad_request("Unsupported request data version %s" % (version,))
    _usb_devices_with_commas(body)
    return await ctx.submit("OP_INSTANCE_CREATE", body, rename={"name": "instance_name", "os": "os_type"},
                            resource="r_2_instances")


@route("/2/instances-multi-alloc", POST=WRITE, submits={"POST": ("OP_INSTANCE_MULTI_ALLOC",)})
async def instances_multi_alloc(ctx: Context) -> Any:
    """Allocate several instances (OpInstanceMultiAlloc)."""
    return await ctx.submit("OP_INSTANCE_MULTI_ALLOC", ctx.body_dict(), resource="r_2_instances_multi_alloc")


@route("/2/instances/{name}", GET=ANON, DELETE=WRITE, submits={"DELETE": ("OP_INSTANCE_REMOVE",)})
async def instance(ctx: Context, name: str) -> Any:
    """One instance; DELETE removes it (OpInstanceRemove).

    DELETE takes C{dry-run} and C{reason}; a body is ignored.
    """
    if ctx.method == "DELETE":
        return await ctx.submit("OP_INSTANCE_REMOVE", static={"instance_name": name, "ignore_failures": False},
                                resource="r_2_instances_name")
    return await one_item(ctx, "instance", I_FIELDS, name)


@route("/2/instances/{name}/info", GET=ANON, submits={"GET": ("OP_INSTANCE_QUERY_DATA",)})
async def instance_info(ctx: Context, name: str) -> Any:
    """Detailed information, as a job (OpInstanceQueryData); C{static=1}: from the config only."""
    return await ctx.submit("OP_INSTANCE_QUERY_DATA", static={
        "instances": [name], "static": ctx.args.bool("static"), "use_locking": False},
        resource="r_2_instances_name_info")


@route("/2/instances/{name}/startup", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_STARTUP",)})
async def instance_startup(ctx: Context, name: str) -> Any:
    """Start an instance (OpInstanceStartup).

    Query: C{force}, C{no_remember}, C{dry-run}, C{reason}; a body is ignored.
    """
    return await ctx.submit("OP_INSTANCE_STARTUP", static={
        "instance_name": name, "force": ctx.args.bool("force"), "no_remember": ctx.args.bool("no_remember")},
        resource="r_2_instances_name_startup")


@route("/2/instances/{name}/shutdown", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_SHUTDOWN",)})
async def instance_shutdown(ctx: Context, name: str) -> Any:
    """Shut an instance down (OpInstanceShutdown).

    Body: OpInstanceShutdown parameters (C{timeout}, ...).  Query:
    C{no_remember}, C{dry-run}, C{reason}.
    """
    return await ctx.submit("OP_INSTANCE_SHUTDOWN", ctx.body_dict(), static={
        "instance_name": name, "no_remember": ctx.args.bool("no_remember")},
        resource="r_2_instances_name_shutdown")


@route("/2/instances/{name}/reboot", POST=WRITE, submits={"POST": ("OP_INSTANCE_REBOOT",)})
async def instance_reboot(ctx: Context, name: str) -> Any:
    """Reboot an instance (OpInstanceReboot).

    Query: C{type} (C{soft}, C{hard} (default) or C{full}),
    C{ignore_secondaries}, C{dry-run}, C{reason}; a body is ignored.
    """
    kind = ctx.args.one("type", "hard")
    if kind not in REBOOT_TYPES:
        raise bad_request("Invalid reboot type %r: one of %s" % (kind, ", ".join(REBOOT_TYPES)))
    return await ctx.submit("OP_INSTANCE_REBOOT", static={
        "instance_name": name, "reboot_type": kind, "ignore_secondaries": ctx.args.bool("ignore_secondaries")},
        resource="r_2_instances_name_reboot")


@route("/2/instances/{name}/reinstall", POST=WRITE,
       submits={"POST": ("OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP")})
async def instance_reinstall(ctx: Context, name: str) -> Any:
    """Reinstall an instance: one job of OpInstanceShutdown, OpInstanceReinstall and OpInstanceStartup.

    Body: C{os} (default: keep), C{start} (default true: the startup opcode
    is left out when false), C{osparams}.  Or, instead of a body, the query
    arguments C{os} and C{nostartup}.  Query: C{dry-run}, C{reason}.
    """
    body = ctx.body_dict()
    if body and ("os" in ctx.args or "nostartup" in ctx.args):
        raise bad_request("Parameters can be given in the body or the query string, not both")
    if body:
        os_name, start, osparams = body.pop("os", None), body.pop("start", True), body.pop("osparams", None)
        if body:
            raise bad_request("Unknown parameter(s): %s" % ", ".join(sorted(body)))
        if not isinstance(start, bool):
            raise bad_request("Parameter 'start' must be a boolean, not %r" % (start,))
    else:
        os_name, start, osparams = ctx.args.one("os"), not ctx.args.bool("nostartup"), None
    resource = "r_2_instances_name_reinstall"
    reinstall: dict[str, Any] = {"instance_name": name}
    if os_name is not None:
        reinstall["os_type"] = os_name
    if osparams is not None:
        reinstall["osparams"] = osparams
    ops = [
        ctx.opcode("OP_INSTANCE_SHUTDOWN", static={"instance_name": name}, resource=resource),
        ctx.opcode("OP_INSTANCE_REINSTALL", static=reinstall, resource=resource),
    ]
    if start:
        ops.append(ctx.opcode("OP_INSTANCE_STARTUP", static={"instance_name": name, "force": False},
                              resource=resource))
    return await ctx.submit_ops(ops)


@route("/2/instances/{name}/failover", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_FAILOVER",)})
async def instance_failover(ctx: Context, name: str) -> Any:
    """Fail an instance over to another node (OpInstanceFailover).

    Body: OpInstanceFailover parameters (C{target_node}, C{iallocator},
    C{ignore_consistency}, C{shutdown_timeout}, ...).  Query: C{dry-run}, C{reason}.
    """
    return await ctx.submit("OP_INSTANCE_FAILOVER", ctx.body_dict(), static={"instance_name": name},
                            resource="r_2_instances_name_failover")


@route("/2/instances/{name}/migrate", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_MIGRATE",)})
async def instance_migrate(ctx: Context, name: str) -> Any:
    """Migrate an instance to another node (OpInstanceMigrate).

    Body: OpInstanceMigrate parameters (C{mode}, C{cleanup},
    C{target_node}, C{iallocator}, C{allow_failover}, ...).  Query: C{dry-run}, C{reason}.
    """
    return await ctx.submit("OP_INSTANCE_MIGRATE", ctx.body_dict(), static={"instance_name": name},
                            resource="r_2_instances_name_migrate")


@route("/2/instances/{name}/rename", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_RENAME",)})
async def instance_rename(ctx: Context, name: str) -> Any:
    """Rename an instance (OpInstanceRename).

    Body: C{new_name} (required), C{ip_check}, C{name_check}.  Query: C{dry-run}, C{reason}.
    """
    return await ctx.submit("OP_INSTANCE_RENAME", ctx.body_dict(), static={"instance_name": name},
                            resource="r_2_instances_name_rename")


@route("/2/instances/{name}/modify", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_SET_PARAMS",)})
async def instance_modify(ctx: Context, name: str) -> Any:
    """Change an instance's parameters (OpInstanceSetParams).

    Body: OpInstanceSetParams parameters; C{custom_beparams} and
    C{custom_hvparams} stand for C{beparams} and C{hvparams}.  Query: C{dry-run}, C{reason}.
    """
    body = ctx.body_dict()
    for key in ("hvparams", "custom_hvparams"):
        _usb_devices_with_commas(body, key)
    return await ctx.submit("OP_INSTANCE_SET_PARAMS", body, static={"instance_name": name},
                            rename={"custom_beparams": "beparams", "custom_hvparams": "hvparams"},
                            resource="r_2_instances_name_modify")


@route("/2/instances/{name}/console", GET=READ)
async def instance_console(ctx: Context, name: str) -> Any:
    """How to reach a running instance's console (503 when it is not running).

    The answer is the C{console} query field: C{instance}, C{kind},
    C{message}, C{host}, C{port}, C{user}, C{command}, C{display}.
    """
    rows = await query(ctx, "instance", ["console", "oper_state"], [name])
    if not rows:
        raise not_found("Instance '%s' not found" % name)
    console, running = rows[0]
    if not running or not isinstance(console, dict):
        raise HttpError(503, "Instance console unavailable")
    return console


def _disk_op(template: str, method: str, op_id: str, resource: str, doc: str) -> None:
    """An operation on an instance's disks: the body plus the instance name."""

    async def handler(ctx: Context, name: str) -> Any:
        return await ctx.submit(op_id, ctx.body_dict(), static={"instance_name": name}, resource=resource)

    handler.__doc__ = doc
    route(template, submits={method: (op_id,)}, **{method: WRITE})(handler)


def _flag_args(ctx: Context, name: str, *flags: str) -> dict[str, Any]:
    """The instance name and the query's flags that are given (C{?force=1}, as Ganeti's RAPI client sends)."""
    return dict({"instance_name": name}, **{flag: ctx.args.bool(flag) for flag in flags if flag in ctx.args})


@route("/2/instances/{name}/activate-disks", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_ACTIVATE_DISKS",)})
async def instance_activate_disks(ctx: Context, name: str) -> Any:
    """Activate an instance's disks (OpInstanceActivateDisks); the job's
    result: C{[[node, iv_name, device path or null], ...]}.

    Query: C{ignore_size}, C{dry-run}, C{reason}.  Body: other
    OpInstanceActivateDisks parameters (C{wait_for_sync}).
    """
    return await ctx.submit("OP_INSTANCE_ACTIVATE_DISKS", ctx.body_dict(),
                            static=_flag_args(ctx, name, "ignore_size"), resource="r_2_instances_name_activate_disks")


@route("/2/instances/{name}/deactivate-disks", PUT=WRITE, submits={"PUT": ("OP_INSTANCE_DEACTIVATE_DISKS",)})
async def instance_deactivate_disks(ctx: Context, name: str) -> Any:
    """Deactivate an instance's disks (OpInstanceDeactivateDisks); refused
    while the instance runs unless forced.

    Query: C{force}, C{dry-run}, C{reason}.
    """
    return await ctx.submit("OP_INSTANCE_DEACTIVATE_DISKS", ctx.body_dict(), static=_flag_args(ctx, name, "force"),
                            resource="r_2_instances_name_deactivate_disks")


_disk_op("/2/instances/{name}/recreate-disks", "POST", "OP_INSTANCE_RECREATE_DISKS",
         "r_2_instances_name_recreate_disks", "Recreate an instance's disks (OpInstanceRecreateDisks).")
_disk_op("/2/instances/{name}/replace-disks", "POST", "OP_INSTANCE_REPLACE_DISKS",
         "r_2_instances_name_replace_disks", "Replace an instance's disks (OpInstanceReplaceDisks).")
@route("/2/instances/{name}/prepare-export", PUT=WRITE, submits={"PUT": ("OP_BACKUP_PREPARE",)})
async def instance_prepare_export(ctx: Context, name: str) -> Any:
    """Prepare an export (OpBackupPrepare); the mode comes from the query
    (C{?mode=remote}, as Ganeti's RAPI client sends it) or the body."""
    body = ctx.body_dict()
    if "mode" in ctx.args:
        body["mode"] = ctx.args.one("mode")
    return await ctx.submit("OP_BACKUP_PREPARE", body, static={"instance_name": name},
                            resource="r_2_instances_name_prepare_export")


@route("/2/instances/{name}/export", PUT=WRITE, submits={"PUT": ("OP_BACKUP_EXPORT",)})
async def instance_export(ctx: Context, name: str) -> Any:
    """Export an instance (OpBackupExport); as in Ganeti's RAPI, C{destination}
    stands for C{target_node}."""
    return await ctx.submit("OP_BACKUP_EXPORT", ctx.body_dict(), static={"instance_name": name},
                            rename={"destination": "target_node"}, resource="r_2_instances_name_export")


_disk_op("/2/instances/{name}/change-group", "PUT", "OP_INSTANCE_CHANGE_GROUP",
         "r_2_instances_name_change_group", "Move an instance to another node group (OpInstanceChangeGroup).")


@route("/2/instances/{name}/disk/{disk}/grow", POST=WRITE, submits={"POST": ("OP_INSTANCE_GROW_DISK",)})
async def instance_grow_disk(ctx: Context, name: str, disk: str) -> Any:
    """Grow a disk (OpInstanceGrowDisk)."""
    return await ctx.submit("OP_INSTANCE_GROW_DISK", ctx.body_dict(),
                            static={"instance_name": name, "disk": int(disk)}, resource="r_2_instances_name_disk_grow")


@route("/2/instances/{name}/tags", GET=ANON, PUT=WRITE, DELETE=WRITE,
       submits={"PUT": ("OP_TAGS_SET",), "DELETE": ("OP_TAGS_DEL",)})
async def instance_tags(ctx: Context, name: str) -> Any:
    """Instance tags; PUT/DELETE ?tag=... add/remove them."""
    return await tags_resource(ctx, "instance", name, "r_2_instances_name_tags")
