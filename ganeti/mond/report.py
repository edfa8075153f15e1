"""Ganeti's MonD report envelope and constants: pure, no I/O.

A report is C{{"name", "version", "format_version", "timestamp",
"category", "kind", "data"}}; the timestamp is in nanoseconds since the
epoch, C{version} is C{"B"} for built-in collectors, C{kind} 0 for
performance and 1 for status collectors, whose C{data} carries
C{"status": {"code": c, "message": text}}.
"""

from __future__ import annotations

from typing import Any

#: API version of C{/}
LATEST_API_VERSION = 1
#: C{version} of built-in collectors (Ganeti's BUILTIN_DATA_COLLECTOR_VERSION)
VERSION_BUILTIN = "B"
FORMAT_VERSION = 1

KIND_PERF = 0
KIND_STATUS = 1

#: categories; C{None} is written C{"default"} in URLs
CATEGORY_INSTANCE = "instance"
CATEGORY_STORAGE = "storage"
CATEGORY_DAEMON = "daemon"
CATEGORY_HYPERVISOR = "hypervisor"
DEFAULT_CATEGORY = "default"
CATEGORIES = {
    CATEGORY_INSTANCE: CATEGORY_INSTANCE,
    CATEGORY_STORAGE: CATEGORY_STORAGE,
    CATEGORY_DAEMON: CATEGORY_DAEMON,
    CATEGORY_HYPERVISOR: CATEGORY_HYPERVISOR,
    DEFAULT_CATEGORY: None,
}

#: status codes (Ganeti's DCStatusCode)
STATUS_OK = 0
STATUS_TEMP_BAD = 1
STATUS_UNKNOWN = 2
STATUS_BAD = 4

#: Ganeti's 404 texts
NOT_FOUND = b"Resource not found"
NO_REPORT = b"Unable to produce a report for the requested resource"


def timestamp_ns(seconds: float) -> int:
    """C{seconds} since the epoch as Ganeti's nanosecond timestamp."""
    return int(seconds * 1_000_000_000)


def status(code: int, message: str = "") -> dict[str, Any]:
    return {"code": code, "message": message}


def worst(codes: list[int]) -> int:
    """The worst of several status codes (4 > 2 > 1 > 0); 0 for none."""
    order = {STATUS_OK: 0, STATUS_TEMP_BAD: 1, STATUS_UNKNOWN: 2, STATUS_BAD: 3}
    return max(codes, key=lambda c: order.get(c, 3), default=STATUS_OK)


def envelope(name: str, category: str | None, kind: int, data: Any, when: float,
             version: str = VERSION_BUILTIN, format_version: int = FORMAT_VERSION) -> dict[str, Any]:
    """One report in Ganeti's format."""
    return {
        "name": name,
        "version": version,
        "format_version": format_version,
        "timestamp": timestamp_ns(when),
        "category": category,
        "kind": kind,
        "data": data,
    }


def failed_data(code: int, message: str) -> dict[str, Any]:
    """The C{data} of a report whose collector could not produce one."""
    return {"status": status(code, message)}


def category_from_url(name: str) -> tuple[bool, str | None]:
    """C{(known, category)} for a URL segment (C{default} is C{None})."""
    if name in CATEGORIES:
        return True, CATEGORIES[name]
    return False, None


def url_category(category: str | None) -> str:
    return DEFAULT_CATEGORY if category is None else category
