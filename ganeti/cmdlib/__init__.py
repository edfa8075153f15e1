"""Logical units: the code behind each opcode (see L{ganeti.cmdlib.base}).

L{lookup} finds the LU for an C{OP_ID}; it first imports every module of
LUs (L{load_all}: importing a module registers its LUs).  Importing the
package itself loads none of them, so the command-line tools can use the
plain helpers of a module here (uid pools, parameter merging) without the
LUs, Twisted and the node RPC client.  To add LUs, write a module here with
C{@register}-decorated L{LogicalUnit} subclasses and import it in
L{load_all}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ganeti import errors

if TYPE_CHECKING:
    from ganeti.cmdlib.base import ALL_SET, REGISTRY, LogicalUnit, OpContext, register  # noqa: F401


#: every LU registered (L{load_all} ran to its end)
_loaded = False


def load_all() -> None:
    """Import (and so register) every LU; once done, a call costs one test
    (thirty C{from ... import} statements cost 0.3 ms, on every lookup)."""
    global _loaded
    if _loaded:
        return
    # one line per set of LUs; importing a module registers them
    # isort: off
    from ganeti.cmdlib import cluster, group, node, tags, test  # noqa: F401  (registration)
    from ganeti.cmdlib import instance, instance_ops, instance_query, instance_set_params  # noqa: F401
    from ganeti.cmdlib import iallocator_debug, instance_disks, instance_migration, node_evacuation  # noqa: F401
    from ganeti.cmdlib import operating_system  # noqa: F401  (registration)
    from ganeti.cmdlib import verify, verify_disks  # noqa: F401  (registration)
    from ganeti.cmdlib import backup, instance_groups, instance_move, lvm_drbd, node_storage  # noqa: F401
    from ganeti.cmdlib import instance_multi  # noqa: F401  (registration)
    from ganeti.cmdlib import disk_activation, disk_recreate, extstorage  # noqa: F401  (registration)
    from ganeti.cmdlib import network  # noqa: F401  (registration)
    from ganeti.cmdlib import candidate_certs  # noqa: F401  (registration)
    from ganeti.cmdlib import oob  # noqa: F401  (registration)
    from ganeti.cmdlib import queries  # noqa: F401  (registration)
    # isort: on
    _loaded = True


def lookup(op_id: str) -> type[LogicalUnit]:
    """The LU class for C{op_id}; L{errors.OpPrereqError} if there is none."""
    load_all()
    from ganeti.cmdlib.base import REGISTRY

    cls = REGISTRY.get(op_id)
    if cls is None:
        raise errors.OpPrereqError("%s: opcode not implemented" % op_id, errors.ECODE_INVAL)
    return cls


def __getattr__(name: str) -> Any:
    """L{ganeti.cmdlib.base}'s names, loaded on first use (C{REGISTRY} with every LU registered)."""
    if name in ("ALL_SET", "REGISTRY", "LogicalUnit", "OpContext", "register"):
        if name == "REGISTRY":
            load_all()
        from ganeti.cmdlib import base

        return getattr(base, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


__all__ = ["load_all", "lookup"]
