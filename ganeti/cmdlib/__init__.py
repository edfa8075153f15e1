"""Logical units: the code behind each opcode (see L{ganeti.cmdlib.base}).

Importing this package registers every LU; L{lookup} finds the one for an
C{OP_ID}.  To add LUs, write a module here with C{@register}-decorated
L{LogicalUnit} subclasses and import it below.
"""

from __future__ import annotations

from ganeti import errors

# one line per set of LUs; importing a module registers them
# isort: off
from ganeti.cmdlib import cluster, group, node, tags, test  # noqa: F401  (registration)
from ganeti.cmdlib import instance, instance_ops, instance_query, instance_set_params  # noqa: F401
from ganeti.cmdlib import iallocator_debug, instance_disks, instance_migration, node_evacuation  # noqa: F401
from ganeti.cmdlib import operating_system  # noqa: F401  (registration)
from ganeti.cmdlib import verify, verify_disks  # noqa: F401  (registration)
from ganeti.cmdlib import backup, instance_groups, instance_move, lvm_drbd, node_storage  # noqa: F401  (registration)
from ganeti.cmdlib import instance_multi  # noqa: F401  (registration)
from ganeti.cmdlib import disk_activation, disk_recreate, extstorage  # noqa: F401  (registration)
from ganeti.cmdlib import network  # noqa: F401  (registration)
from ganeti.cmdlib import candidate_certs  # noqa: F401  (registration)
from ganeti.cmdlib import oob  # noqa: F401  (registration)
from ganeti.cmdlib import queries  # noqa: F401  (registration)
# isort: on
from ganeti.cmdlib.base import ALL_SET, REGISTRY, LogicalUnit, OpContext, register


def lookup(op_id: str) -> type[LogicalUnit]:
    """The LU class for C{op_id}; L{errors.OpPrereqError} if there is none."""
    cls = REGISTRY.get(op_id)
    if cls is None:
        raise errors.OpPrereqError("%s: opcode not implemented" % op_id, errors.ECODE_INVAL)
    return cls


__all__ = ["ALL_SET", "REGISTRY", "LogicalUnit", "OpContext", "lookup", "register"]
