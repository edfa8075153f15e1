"""noded's C{storage_list}: the storage units of one type on this node.

Ganeti 3.0 lists C{file}, C{sharedfile}, C{gluster} and LVM units and
answers "Unknown storage type" for C{rados}; here C{rados} (the rbd
template's pools) is listed too, which C{gnt-node list-storage -t rados}
shows.  Arguments (Ganeti's): C{su_name} the storage type, C{su_args}
C{[[directory]]} for the file types and, ours, C{[[pool]]} for C{rados}
(the master's rbd pool: the node knows no pool of its own), C{name} one
unit or C{None}, C{fields} among L{FIELDS}.  Sizes are MiB: for a file
type those of the file system holding the directory, for a pool C{size =
stored + max_avail}, C{used = stored}, C{free = max_avail} from C{ceph df}
run as the node's Ceph client (L{ganeti.backend.storage.rbd}).
"""

from __future__ import annotations

import json
import os
from typing import Any

from ganeti.backend.storage import rbd
from ganeti.noded.failure import RpcFailure
from ganeti.rpc.instances import node_path

FIELDS = ("name", "size", "used", "free", "allocatable")
FILE_TYPES = ("file", "sharedfile")
RADOS = "rados"
TYPES = (*FILE_TYPES, RADOS)
MIB = 1024 * 1024


def check(su_name: Any, su_args: Any, name: Any, fields: Any) -> tuple[str, str, str | None, list[str]]:
    """C{(type, directory or pool, name, fields)}, checked.
    @raise RpcFailure: anything else
    """
    if su_name not in TYPES:
        raise RpcFailure("Unknown storage type %.100r (listed here: %s)" % (su_name, ", ".join(TYPES)))
    if not (isinstance(su_args, list) and len(su_args) == 1 and isinstance(su_args[0], list)
            and len(su_args[0]) == 1 and isinstance(su_args[0][0], str) and su_args[0][0]):
        raise RpcFailure("storage type %s takes su_args [[%s]], not %.100r"
                         % (su_name, "pool" if su_name == RADOS else "directory", su_args))
    key = su_args[0][0]
    if su_name == RADOS:
        try:
            rbd.check_name(key, "pool")
        except rbd.RbdError as exc:
            raise RpcFailure(str(exc)) from None
    elif not key.startswith("/") or ".." in key.split("/"):
        raise RpcFailure("storage directory must be an absolute path without '..', not %.100r" % key)
    if name is not None and not isinstance(name, str):
        raise RpcFailure("name must be a string or null, not %.100r" % (name,))
    if not (isinstance(fields, list) and fields and all(f in FIELDS for f in fields)):
        raise RpcFailure("fields must be a non-empty list among %s, not %.100r" % (", ".join(FIELDS), fields))
    return su_name, key, name, fields


def _row(values: dict[str, Any], fields: list[str]) -> list[Any]:
    return [values[f] for f in fields]


def file_units(root: str, directory: str, name: str | None, fields: list[str]) -> list[list[Any]]:
    """The one unit of a file storage directory (its cluster-wide path as name)."""
    if name is not None and name != directory:
        return []
    real = node_path(root, directory)
    probe = real
    while not os.path.isdir(probe) and probe != "/":
        probe = os.path.dirname(probe)  # not made yet: its file system
    st = os.statvfs(probe)
    size, free = st.f_blocks * st.f_frsize // MIB, st.f_bavail * st.f_frsize // MIB
    return [_row({"name": directory, "size": size, "used": size - st.f_bfree * st.f_frsize // MIB, "free": free,
                  "allocatable": True}, fields)]


async def rados_units(client: rbd.RbdClient, pool: str, name: str | None, fields: list[str]) -> list[list[Any]]:
    """The one unit of the pool, from C{ceph df}."""
    if name is not None and name != pool:
        return []
    from ganeti.asyncutil import ProgramTimeout

    try:
        out, err, code = await client.net.run("ceph", [*client._global_args(), "df", "--format", "json"],
                                              rbd.TIMEOUT)
    except (ProgramTimeout, OSError) as exc:
        raise RpcFailure("ceph df: %s" % (exc or "no answer")) from None
    if code != 0:
        raise RpcFailure("ceph df failed (%d): %s" % (code, (err or out).decode("utf-8", "replace").strip()[-500:]))
    try:
        pools = {p["name"]: p["stats"] for p in json.loads(out)["pools"]}
    except (ValueError, KeyError, TypeError):
        raise RpcFailure("ceph df: unreadable answer %.200r" % out) from None
    if pool not in pools:
        raise RpcFailure("rados pool %r does not exist (pools: %s)" % (pool, ", ".join(sorted(pools)) or "none"))
    stored, avail = int(pools[pool].get("stored", 0)) // MIB, int(pools[pool].get("max_avail", 0)) // MIB
    return [_row({"name": pool, "size": stored + avail, "used": stored, "free": avail, "allocatable": True},
                 fields)]
