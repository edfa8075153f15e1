"""The opcodes of LVM and DRBD storage, which these machines lack, answered as
Ganeti answers them on a cluster without such storage; nothing changes.

  - OP_NODE_MODIFY_STORAGE (C{gnt-node modify-storage}): only lvm-pv's
    C{allocatable} is modifiable in Ganeti; other types "can not be
    modified"; lvm-pv needs the plain template enabled, which it cannot be
    here ("No disk template of storage type 'lvm-vg' is enabled ...").
  - OP_REPAIR_NODE_STORAGE (C{gnt-node repair-storage}): only lvm-vg can be
    repaired, and only with the plain or drbd template enabled.
  - OP_NODE_QUERYVOLS (C{gnt-node volumes}): the nodes' LVM logical volumes:
    none here, so no rows (the fields are checked as Ganeti checks them).
  - OP_INSTANCE_REPLACE_DISKS (C{gnt-instance replace-disks}): Ganeti's
    argument checks, then "Can only run replace disks for DRBD8-based
    instances" (no template here is DRBD).
"""

from __future__ import annotations

from typing import Any, TypeVar

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LEVEL_NODE, Feedback, LogicalUnit, expand_node, register
from ganeti.opcodes.typed import OpInstanceReplaceDisks, OpNodeModifyStorage, OpNodeQueryvols, OpRepairNodeStorage

#: Ganeti's C{MODIFIABLE_STORAGE_FIELDS} and C{VALID_STORAGE_OPERATIONS}
MODIFIABLE = {"lvm-pv": frozenset(["allocatable"])}
OPERATIONS = {"lvm-vg": frozenset(["fix-consistency"])}
#: the fields of C{gnt-node volumes} (Ganeti's C{VF_*})
VOLUME_FIELDS = ("node", "phys", "vg", "name", "size", "instance")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


def check_storage_type_enabled(enabled: list[str], storage_type: str) -> None:
    """Ganeti's C{CheckStorageTypeEnabled} (lvm-pv counts as lvm-vg)."""
    kind = "lvm-vg" if storage_type == "lvm-pv" else storage_type
    if not any(iu.STORAGE_TYPE.get(template) == kind for template in enabled):
        raise _invalid("No disk template of storage type '%s' is enabled in this cluster. Enabled disk templates"
                       " are: %s" % (kind, ",".join(enabled)))


_StorageOpT = TypeVar("_StorageOpT", bound=OpNodeModifyStorage | OpRepairNodeStorage, covariant=True)


class _StorageUnitLU(LogicalUnit[_StorageOpT]):
    """A change to one storage unit of one node: its node locked, refused
    where no enabled template has that storage type (every type here)."""

    REQ_BGL = False

    def expand_names(self) -> None:
        node = expand_node(self.cfg, self.op.node_uuid or self.op.node_name)
        self.needed_locks[LEVEL_NODE] = [node.uuid or ""]

    def check_prereq(self) -> None:
        check_storage_type_enabled(list(self.cfg.cluster.enabled_disk_templates or []), self.op.storage_type)

    async def exec_(self, feedback: Feedback) -> Any:  # pragma: no cover - check_prereq refuses every type here
        raise errors.OpExecError("Storage type '%s' is not available on this cluster" % self.op.storage_type)


@register
class LUNodeModifyStorage(_StorageUnitLU[OpNodeModifyStorage]):
    """See the module docstring."""

    OP_ID = "OP_NODE_MODIFY_STORAGE"

    def check_arguments(self) -> None:
        modifiable = MODIFIABLE.get(self.op.storage_type)
        if modifiable is None:
            raise _invalid("Storage units of type '%s' can not be modified" % self.op.storage_type)
        extra = sorted(set(self.op.changes) - modifiable)
        if extra:
            raise _invalid("The following fields can not be modified for storage units of type '%s': %r"
                           % (self.op.storage_type, extra))


@register
class LURepairNodeStorage(_StorageUnitLU[OpRepairNodeStorage]):
    """See the module docstring."""

    OP_ID = "OP_REPAIR_NODE_STORAGE"

    def check_arguments(self) -> None:
        if "fix-consistency" not in OPERATIONS.get(self.op.storage_type, ()):
            raise _invalid("Storage units of type '%s' can not be repaired" % self.op.storage_type)


@register
class LUNodeQueryvols(LogicalUnit[OpNodeQueryvols]):
    """See the module docstring."""

    OP_ID = "OP_NODE_QUERYVOLS"
    REQ_BGL = False

    def check_arguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in VOLUME_FIELDS]
        if unknown:
            raise _invalid("Unknown output fields selected: %s" % ",".join(unknown))

    def expand_names(self) -> None:
        for name in self.op.nodes or []:
            expand_node(self.cfg, name)
        self.needed_locks = {}

    async def exec_(self, feedback: Feedback) -> Any:
        return []


@register
class LUInstanceReplaceDisks(LogicalUnit[OpInstanceReplaceDisks]):
    """See the module docstring."""

    OP_ID = "OP_INSTANCE_REPLACE_DISKS"
    REQ_BGL = False

    def check_arguments(self) -> None:
        if self.op.mode == "replace_new_secondary":
            if self.op.remote_node is None and self.op.iallocator is None:
                raise _invalid("When changing the secondary either an iallocator script must be used or the new node"
                               " given")
            if self.op.remote_node is not None and self.op.iallocator is not None:
                raise _invalid("Give either the iallocator or the new node, not both")
        elif self.op.remote_node is not None or self.op.iallocator is not None:
            raise _invalid("The iallocator and new node options can only be used when changing the secondary node")

    def expand_names(self) -> None:
        inst = iu.expand_instance(self.cfg, self.op.instance_name)
        iu.refuse_forthcoming(inst)
        self.instance = inst
        self.needed_locks = {}

    def check_prereq(self) -> None:
        raise _invalid("Can only run replace disks for DRBD8-based instances")

    async def exec_(self, feedback: Feedback) -> Any:  # pragma: no cover - check_prereq refuses every instance
        raise errors.OpExecError("Can only run replace disks for DRBD8-based instances")
