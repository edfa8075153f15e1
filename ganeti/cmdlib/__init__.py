"""Logical units: the code behind each opcode (see L{ganeti.cmdlib.base}).

Importing this package registers every LU; L{lookup} finds the one for an
C{OP_ID}.  To add LUs, write a module here with C{@register}-decorated
L{LogicalUnit} subclasses and import it below.
"""

from __future__ import annotations

from ganeti import errors
from ganeti.cmdlib import (  # noqa: F401  (importing a module registers its LUs)
    cluster,
    group,
    instance,
    instance_disks,
    instance_migration,
    instance_ops,
    instance_query,
    instance_set_params,
    node,
    operating_system,
    tags,
    test,
    verify,
    verify_disks,
)
from ganeti.cmdlib.base import ALL_SET, REGISTRY, LogicalUnit, OpContext, register


def lookup(op_id: str) -> type[LogicalUnit]:
    """The LU class for C{op_id}; L{errors.OpPrereqError} if there is none."""
    cls = REGISTRY.get(op_id)
    if cls is None:
        raise errors.OpPrereqError("%s: opcode not implemented" % op_id, errors.ECODE_INVAL)
    return cls


__all__ = ["ALL_SET", "REGISTRY", "LogicalUnit", "OpContext", "lookup", "register"]
