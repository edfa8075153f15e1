"""The C{disk-files} check of C{node_verify}: missing and orphan disk files.

The master sends, for this node, C{{"present": [paths], "known": [paths],
"scan": [templates]}}: the cluster-wide paths of the file disks that must
exist here, other paths that may (disks of other nodes in a shared
directory, detached disks), and the templates (C{file}, C{sharedfile})
whose storage directory this node lists.  The answer is
C{{"missing": [paths], "orphans": [paths], "sizes": {path: MiB}}}: each
C{present} path that is not a regular file, each regular file under a
listed directory that is neither C{present} nor C{known} (both
cluster-wide and sorted), and the size of each C{present} file.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Mapping

from ganeti.noded.failure import RpcFailure
from ganeti.rpc import wire
from ganeti.rpc.instances import node_path

#: the name of the check in C{node_verify}'s dict
CHECK = wire.NV_DISK_FILES
MIB = 1024 * 1024
#: the templates whose storage directory a node can list
SCANNABLE = ("file", "sharedfile")


def _paths(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) and p.startswith("/") for p in value):
        raise RpcFailure("disk-files: %s must be a list of absolute paths" % what)
    return value


def cluster_path(root: str, real: str) -> str:
    """The cluster-wide form of C{real}, a path under the node's C{root}."""
    if not root or root == "/":
        return real
    return "/" + os.path.relpath(real, root)


def _file_size(path: str) -> int | None:
    """The size of the regular file C{path} in MiB (None: no such file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size // MIB if stat.S_ISREG(st.st_mode) else None


def _files_under(directory: str) -> list[str]:
    """Every regular file below C{directory} (symlinks below it not followed)."""
    found = []
    for top, _dirs, files in os.walk(directory):
        for name in files:
            path = os.path.join(top, name)
            try:
                if stat.S_ISREG(os.lstat(path).st_mode):
                    found.append(path)
            except OSError:
                continue
    return found


def verify_disk_files(root: str, storage_dirs: Mapping[str, str], check: Any) -> dict[str, list[str] | dict[str, int]]:
    """The answer to the C{disk-files} check (see the module docstring).

    @param root: the node's root
    @param storage_dirs: C{{template: the node's own directory of it}}
    @raise RpcFailure: a malformed check
    """
    if not isinstance(check, dict):
        raise RpcFailure("disk-files takes {\"present\": [...], \"known\": [...], \"scan\": [...]}")
    present = _paths(check.get("present", []), "present")
    known = set(present) | set(_paths(check.get("known", []), "known"))
    scan = check.get("scan", [])
    if not isinstance(scan, list) or any(t not in SCANNABLE for t in scan):
        raise RpcFailure("disk-files: scan must list templates among %s" % ", ".join(SCANNABLE))
    sizes = {p: _file_size(node_path(root, p)) for p in present}
    missing = sorted(p for p, size in sizes.items() if size is None)
    orphans: set[str] = set()
    for template in dict.fromkeys(scan):
        directory = storage_dirs.get(template)
        if directory and os.path.isdir(directory):
            orphans.update(p for p in map(lambda real: cluster_path(root, real), _files_under(directory))
                           if p not in known)
    return {"missing": missing, "orphans": sorted(orphans),
            "sizes": {p: size for p, size in sizes.items() if size is not None}}
