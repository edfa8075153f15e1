"""The rbd disk template's parameters: names, defaults and checks (pure).

Shared by the master (L{ganeti.cmdlib.rbd_disks}, which must not load the
node's storage code) and the nodes (L{ganeti.backend.storage.rbd}).
"""

from __future__ import annotations

import re
from typing import Any

from ganeti import errors

DT_RBD = "rbd"
#: Ganeti's rbd disk parameters and their defaults
PARAM_POOL = "pool"
PARAM_ACCESS = "access"
ACCESS_KERNEL = "kernelspace"
ACCESS_USER = "userspace"
ACCESS_MODES = (ACCESS_KERNEL, ACCESS_USER)
DEFAULTS = {PARAM_POOL: "rbd", PARAM_ACCESS: ACCESS_KERNEL}
#: the first element of an rbd disk's logical_id
DRIVER = "rbd"

#: pool and image names: no separators of the qemu URI (C{/ : @ ,}) or spaces
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,254}$")


class RbdError(errors.OpExecError):
    """An rbd operation failed or was refused."""


def check_name(value: Any, what: str) -> str:
    """C{value} if it is a valid pool or image name.
    @raise RbdError: it is not
    """
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise RbdError("Invalid rbd %s %.100r (letters, digits, '.', '_', '-')" % (what, value))
    return value


def disk_params(params: Any) -> tuple[str, str]:
    """C{(pool, access)} of an rbd disk's C{params} (Ganeti's defaults
    beneath), checked.
    @raise RbdError: a bad pool name or access mode, or an unknown parameter
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RbdError("rbd disk params must be a dict, not %.100r" % (params,))
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise RbdError("Unknown rbd disk parameter(s) %s (known: %s)" % (", ".join(map(str, unknown)),
                                                                          ", ".join(sorted(DEFAULTS))))
    filled = {**DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    access = filled[PARAM_ACCESS]
    if access not in ACCESS_MODES:
        raise RbdError("Invalid rbd access mode %.100r (one of %s)" % (access, ", ".join(ACCESS_MODES)))
    return check_name(filled[PARAM_POOL], "pool"), access


def image_name(logical_id: Any) -> str:
    """The image name of an rbd disk's C{logical_id} (C{["rbd", name]}).
    @raise RbdError: not an rbd logical id
    """
    if not (isinstance(logical_id, (list, tuple)) and len(logical_id) == 2 and logical_id[0] == DRIVER):
        raise RbdError("rbd logical_id must be [\"rbd\", <image name>], not %.100r" % (logical_id,))
    return check_name(logical_id[1], "image name")
