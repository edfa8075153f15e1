"""The OpenAPI 3 description of the implemented resources, and a small checker.

L{describe} builds the document from the route table, so it lists exactly
what the server routes; L{check} validates a value against one of its
schemas (the subset of JSON Schema used here), which the tests apply to
real answers.
"""

from __future__ import annotations

from typing import Any

from ganeti.rapi import baserlib, rlib2

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

_QUERY_PARAMS = {
    "bulk": "1 for full details instead of names and URIs",
    "dry-run": "1 to only check the request",
    "force": "1 to force the operation",
    "reason": "reason text added to the job's reason trail",
    "tag": "a tag (repeatable)",
    "fields": "comma-separated field names",
}


def response_schema(template: str, method: str) -> dict[str, Any]:
    if (template, method) in WRITE_SCHEMAS:
        return WRITE_SCHEMAS[(template, method)]
    if method == "GET" and template in GET_SCHEMAS:
        return GET_SCHEMAS[template]
    return JOB_ID


def describe() -> dict[str, Any]:
    """The OpenAPI 3.0 document."""
    paths: dict[str, Any] = {}
    for route in baserlib.ROUTES:
        item: dict[str, Any] = {}
        for method, spec in sorted(route.methods.items()):
            op: dict[str, Any] = {
                "summary": spec.doc,
                "operationId": "%s %s" % (method, route.template),
                "parameters": [
                    {"name": n, "in": "path", "required": True,
                     "schema": {"type": "string", "pattern": r"^\d+$" if n in ("job_id", "disk") else r"^[\w._-]+$"}}
                    for n in route.names
                ] + [{"name": k, "in": "query", "required": False, "schema": {"type": "string"}, "description": v}
                     for k, v in _QUERY_PARAMS.items()],
                "responses": {
                    "200": {"description": "OK", "content": {"application/json": {
                        "schema": response_schema(route.template, method)}}},
                    "default": {"description": "Error", "content": {"application/json": {"schema": ERROR}}},
                },
            }
            if spec.access:
                op["security"] = [{"basic": []}]
                op["x-ganeti-rights"] = list(spec.access)
            if method in ("PUT", "POST") or route.template.endswith("/wait"):
                op["requestBody"] = {"required": False, "content": {"application/json": {"schema": {}}}}
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
