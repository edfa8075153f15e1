"""The OpenAPI 3 description of the implemented resources, and a small checker.

L{describe} builds the document from the route table, so it lists exactly
what the server routes; L{check} validates a value against one of its
schemas (the subset of JSON Schema used here), which the tests apply to
real answers.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from ganeti import opcodes
from ganeti.rapi import baserlib, instances, rlib2

OBJ: dict[str, Any] = {"type": "object"}
STR_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
JOB_ID: dict[str, Any] = {"type": "integer", "description": "the id of the submitted job"}
ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["code", "message", "explain"],
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "explain": {"type": "string"}},
}


def _ref_list(key: str) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "object", "required": [key, "uri"],
                  "properties": {key: {"type": "string"},
                                 "uri": {"type": "string"}}},
    }


def _fields(fields: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "required": list(fields), "properties": dict(extra or {})}


def _bulk(key: str, fields: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"anyOf": [_ref_list(key), {"type": "array", "items": _fields(fields, extra)}]}


JOB_REF = {"type": "array", "items": {"type": "object", "required": ["id", "uri"],
                                       "properties": {"id": {"type": "integer"}, "uri": {"type": "string"}}}}

#: response schemas of GET resources, by template
GET_SCHEMAS: dict[str, dict[str, Any]] = {
    "/": {"type": "null"},
    "/2": {"type": "null"},
    "/version": {"type": "integer", "enum": [2]},
    "/2/info": {"type": "object", "required": ["name", "master", "software_version", "protocol_version"],
                "properties": {"name": {"type": "string"}, "master": {"type": "string"}}},
    "/2/features": STR_LIST,
    "/2/os": {"anyOf": [STR_LIST, {"type": "array", "items": _fields(rlib2.OS_FIELDS_BULK, {
        "name": {"type": "string"}, "valid": {"type": "boolean"}, "variants": STR_LIST,
        "parameters": {"type": "array", "items": {"type": "object", "required": ["name", "description"]}},
        "api_versions": {"type": "array", "items": {"type": "integer"}}})}]},
    "/2/tags": STR_LIST,
    "/2/jobs": {"anyOf": [JOB_REF, {"type": "array", "items": _fields(rlib2.J_FIELDS_BULK, {
        "id": {"type": "integer"}, "status": {"type": "string"}, "ops": {"type": "array"}})}]},
    "/2/jobs/{job_id}": _fields(rlib2.J_FIELDS, {"id": {"type": "integer"}, "status": {"type": "string"},
                                                 "ops": {"type": "array"}, "oplog": {"type": "array"}}),
    "/2/jobs/{job_id}/wait": {"type": ["object", "null"], "required": ["job_info", "log_entries"],
                              "properties": {"job_info": {"type": "array"}, "log_entries": {"type": "array"}}},
    "/2/nodes": _bulk("id", rlib2.N_FIELDS, {"name": {"type": "string"}}),
    "/2/nodes/{name}": _fields(rlib2.N_FIELDS + ["secondary_ip"], {"name": {"type": "string"},
                                                                   "role": {"type": "string"}}),
    "/2/nodes/{name}/role": {"type": "string", "enum": sorted(rlib2.NODE_ROLES.values())},
    "/2/nodes/{name}/tags": STR_LIST,
    "/2/groups": _bulk("name", rlib2.G_FIELDS, {"name": {"type": "string"}}),
    "/2/groups/{name}": _fields(rlib2.G_FIELDS, {"name": {"type": "string"}, "node_list": STR_LIST}),
    "/2/groups/{name}/tags": STR_LIST,
    "/2/instances": _bulk("id", rlib2.I_FIELDS, {"name": {"type": "string"}}),
    "/2/instances/{name}": _fields(rlib2.I_FIELDS, {"name": {"type": "string"}}),
    "/2/instances/{name}/tags": STR_LIST,
    "/2/instances/{name}/console": {"type": "object",
                                    "required": ["instance", "kind"],
                                    "properties": {"instance": {"type": "string"}, "kind": {"type": "string"},
                                                   "message": {"type": "string"}, "host": {"type": "string"},
                                                   "port": {"type": "integer"}, "user": {"type": "string"},
                                                   "command": {"type": "array", "items": {"type": "string"}},
                                                   "display": {"type": "integer"}}},
    "/2/networks": _bulk("name", rlib2.NET_FIELDS),
    "/2/networks/{name}": _fields(rlib2.NET_FIELDS),
    "/2/networks/{name}/tags": STR_LIST,
    "/2/query/{name}": {"type": "object", "required": ["fields", "data"],
                        "properties": {"fields": {"type": "array", "items": OBJ}, "data": {"type": "array"}}},
    "/2/query/{name}/fields": {"type": "object", "required": ["fields"],
                               "properties": {"fields": {"type": "array", "items": {
                                   "type": "object", "required": ["name", "title", "kind", "doc"]}}}},
}
#: non-job answers of writes
WRITE_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("/2/jobs/{job_id}", "DELETE"): {"type": "array"},
    ("/2/query/{name}", "PUT"): GET_SCHEMAS["/2/query/{name}"],
}

#: request bodies with a known shape, by (template, method); others take any JSON object
REQUEST_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("/2/instances", "POST"): {
        "type": "object", "required": [instances.VERSION_KEY, "mode", "disks", "nics"],
        "description": "OpInstanceCreate parameters (name for instance_name, os for os_type) and "
                       "\"__version__\": 1",
        "properties": {instances.VERSION_KEY: {"type": "integer", "enum": [instances.CREATE_REQUEST_VERSION]},
                       "name": {"type": "string"}, "os": {"type": "string"},
                       "mode": {"type": "string", "enum": list(opcodes.INSTANCE_CREATE_MODES)},
                       "disks": {"type": "array", "items": OBJ}, "nics": {"type": "array", "items": OBJ}}},
    ("/2/instances/{name}/reinstall", "POST"): {
        "type": "object", "properties": {"os": {"type": "string"}, "start": {"type": "boolean"},
                                         "osparams": OBJ}},
    ("/2/instances/{name}/rename", "PUT"): {
        "type": "object", "required": ["new_name"],
        "properties": {"new_name": {"type": "string"}, "ip_check": {"type": "boolean"},
                       "name_check": {"type": "boolean"}}},
    ("/2/nodes/{name}/evacuate", "POST"): {
        "type": "object", "required": ["mode"],
        "properties": {"mode": {"type": "string", "enum": list(opcodes.EVAC_MODES)},
                       "iallocator": {"type": "string"}, "remote_node": {"type": "string"},
                       "early_release": {"type": "boolean"}}},
    ("/2/nodes/{name}/role", "PUT"): {"type": "string", "enum": ["master-candidate", "regular", "drained", "offline"]},
    ("/2/jobs/{job_id}/wait", "GET"): {
        "type": "object", "required": ["fields"],
        "properties": {"fields": STR_LIST, "previous_job_info": {"type": ["array", "null"]},
                       "previous_log_serial": {"type": ["integer", "null"]}}},
}
#: the operations whose request body is required
REQUIRED_BODIES = frozenset({("/2/instances", "POST"), ("/2/instances/{name}/rename", "PUT"),
                             ("/2/nodes/{name}/evacuate", "POST"), ("/2/nodes/{name}/role", "PUT"),
                             ("/2/jobs/{job_id}/wait", "GET")})

#: the query parameters of every method that submits a job
JOB_QUERY_PARAMS = {
    "dry-run": "1 to only check the request (the opcodes' dry_run)",
    "reason": "reason text added to the job's reason trail",
}
_BULK = {"bulk": "1 for full details instead of names and URIs"}
_TAG = {"tag": "a tag (repeatable)"}
_FIELDS = {"fields": "comma-separated field names"}
_STORAGE = {"storage_type": "the storage type (e.g. lvm-vg)", "name": "the storage unit"}
#: further query parameters, by (template, method)
QUERY_PARAMS: dict[tuple[str, str], dict[str, str]] = {
    ("/2/jobs", "GET"): _BULK,
    ("/2/nodes", "GET"): _BULK,
    ("/2/groups", "GET"): _BULK,
    ("/2/instances", "GET"): _BULK,
    ("/2/networks", "GET"): _BULK,
    ("/2/os", "GET"): _BULK,
    ("/2/query/{name}", "GET"): _FIELDS,
    ("/2/query/{name}", "PUT"): _FIELDS,
    ("/2/query/{name}/fields", "GET"): _FIELDS,
    ("/2/nodes/{name}/role", "PUT"): {"force": "1 to force the change",
                                      "auto-promote": "1 to promote other nodes to keep the candidate pool"},
    ("/2/nodes/{name}/migrate", "POST"): {"live": "legacy: 1 for live, 0 for non-live migration (body ignored)",
                                          "mode": "legacy: live or non-live (body ignored)"},
    ("/2/nodes/{name}/powercycle", "POST"): {"force": "1 to powercycle the master too"},
    ("/2/nodes/{name}/storage", "GET"): {"storage_type": _STORAGE["storage_type"],
                                         "output_fields": "comma-separated fields (required)"},
    ("/2/nodes/{name}/storage/modify", "PUT"): dict(_STORAGE, allocatable="0 or 1"),
    ("/2/nodes/{name}/storage/repair", "PUT"): _STORAGE,
    ("/2/groups/{name}/assign-nodes", "PUT"): {"force": "1 to force the assignment"},
    ("/2/instances/{name}/info", "GET"): {"static": "1 for the configuration only, no live state"},
    ("/2/instances/{name}/startup", "PUT"): {"force": "1 to force the start",
                                             "no_remember": "1 not to record the new admin state"},
    ("/2/instances/{name}/shutdown", "PUT"): {"no_remember": "1 not to record the new admin state"},
    ("/2/instances/{name}/activate-disks", "PUT"): {"ignore_size": "1 not to pass the recorded disk sizes"},
    ("/2/instances/{name}/deactivate-disks", "PUT"): {"force": "1 to shut the disks down even if the instance runs"},
    ("/2/instances/{name}/reboot", "POST"): {"type": "soft, hard (default) or full",
                                             "ignore_secondaries": "1 to ignore errors on secondary nodes"},
    ("/2/instances/{name}/reinstall", "POST"): {"os": "the OS to install (instead of a body)",
                                                "nostartup": "1 not to start the instance (instead of a body)"},
}
for _template in ("/2/tags", "/2/nodes/{name}/tags", "/2/groups/{name}/tags", "/2/instances/{name}/tags",
                  "/2/networks/{name}/tags"):
    QUERY_PARAMS[(_template, "PUT")] = QUERY_PARAMS[(_template, "DELETE")] = _TAG

#: answers other than 200 worth documenting, by (template, method)
EXTRA_RESPONSES: dict[tuple[str, str], dict[str, str]] = {
    ("/2/instances/{name}/console", "GET"): {"503": "the instance is not running: no console"},
    ("/2/instances", "POST"): {"400": "a body without \"__version__\": 1, or with parameters OpInstanceCreate lacks"},
    ("/2/networks", "GET"): {"501": "networks cannot be queried by this cluster yet"},
    ("/2/networks/{name}", "GET"): {"501": "networks cannot be queried by this cluster yet"},
    ("/2/query/{name}", "GET"): {"501": "a resource this cluster cannot query yet (network, export, filter)"},
    ("/2/query/{name}", "PUT"): {"501": "a resource this cluster cannot query yet (network, export, filter)"},
}


def response_schema(template: str, method: str) -> dict[str, Any]:
    if (template, method) in WRITE_SCHEMAS:
        return WRITE_SCHEMAS[(template, method)]
    if method == "GET" and template in GET_SCHEMAS:
        return GET_SCHEMAS[template]
    return JOB_ID


def _summary_and_description(doc: str) -> tuple[str, str]:
    """The first line of a handler's docstring, and the rest as plain text."""
    first, _, rest = doc.strip().partition("\n")
    text = textwrap.dedent(rest).strip()
    return first.strip(), re.sub(r"[CLI]\{([^}]*)\}", r"\1", text)


#: the methods that submit a job but take no C{dry-run} (they wait for its result)
NO_DRY_RUN = frozenset({("/2/os", "GET")})


def _query_parameters(template: str, method: str, submits: tuple[str, ...]) -> list[dict[str, Any]]:
    params = dict(QUERY_PARAMS.get((template, method), {}))
    if submits:
        params.update(JOB_QUERY_PARAMS)
        if (template, method) in NO_DRY_RUN:
            del params["dry-run"]
    return [{"name": k, "in": "query", "required": False, "schema": {"type": "string"}, "description": v}
            for k, v in params.items()]


def _responses(template: str, method: str, submits: tuple[str, ...]) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {"description": "OK", "content": {"application/json": {"schema": response_schema(template, method)}}},
    }
    error = {"content": {"application/json": {"schema": ERROR}}}
    for code, text in EXTRA_RESPONSES.get((template, method), {}).items():
        responses[code] = dict(error, description=text)
    missing = [op_id for op_id in submits if op_id not in opcodes.OPCODES]
    if missing:
        responses["501"] = dict(error, description="not implemented by this cluster yet (opcode %s does not exist);"
                                " nothing is submitted" % ", ".join(missing))
    responses["default"] = dict(error, description="Error")
    return responses


def describe() -> dict[str, Any]:
    """The OpenAPI 3.0 document."""
    paths: dict[str, Any] = {}
    for route in baserlib.ROUTES:
        item: dict[str, Any] = {}
        for method, spec in sorted(route.methods.items()):
            summary, description = _summary_and_description(spec.doc)
            op: dict[str, Any] = {
                "summary": summary,
                "operationId": "%s %s" % (method, route.template),
                "parameters": [
                    {"name": n, "in": "path", "required": True,
                     "schema": {"type": "string", "pattern": r"^\d+$" if n in ("job_id", "disk") else r"^[\w._-]+$"}}
                    for n in route.names
                ] + _query_parameters(route.template, method, spec.submits),
                "responses": _responses(route.template, method, spec.submits),
            }
            if description:
                op["description"] = description
            if spec.submits:
                op["x-ganeti-opcodes"] = list(spec.submits)
            if spec.access:
                op["security"] = [{"basic": []}]
                op["x-ganeti-rights"] = list(spec.access)
            body = REQUEST_BODIES.get((route.template, method))
            if body is not None or method in ("PUT", "POST"):
                op["requestBody"] = {"required": (route.template, method) in REQUIRED_BODIES,
                                     "content": {"application/json": {"schema": body or {}}}}
            item[method.lower()] = op
        paths[route.template] = item
    return {
        "openapi": "3.0.3",
        "info": {"title": "Ganeti Remote API", "version": "2",
                 "description": "Ganeti's RAPI version 2; writes answer the id of the job they submit."},
        "components": {"securitySchemes": {"basic": {"type": "http", "scheme": "basic"}}},
        "paths": paths,
    }


# --- checking ---------------------------------------------------------------------
_TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def check(schema: dict[str, Any], value: Any, where: str = "$") -> list[str]:
    """Problems of C{value} against C{schema} (empty if it conforms)."""
    if "anyOf" in schema:
        results = [check(s, value, where) for s in schema["anyOf"]]
        if not any(not r for r in results):
            return ["%s: matches none of anyOf" % where] + [p for r in results for p in r]
        return []
    problems: list[str] = []
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES[k](value) for k in kinds):
            return ["%s: %r is not %s" % (where, value if len(repr(value)) < 60 else type(value).__name__, kind)]
    if "enum" in schema and value not in schema["enum"]:
        problems.append("%s: %r not in %r" % (where, value, schema["enum"]))
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append("%s: missing %r" % (where, key))
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                problems.extend(check(sub, value[key], "%s.%s" % (where, key)))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems.extend(check(schema["items"], item, "%s[%d]" % (where, i)))
    return problems
