"""Node group LUs: OP_GROUP_ADD, OP_GROUP_REMOVE, OP_GROUP_RENAME."""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors, opcodes
from ganeti.cmdlib.base import LEVEL_NODEGROUP, Feedback, LogicalUnit, lookup_group, register
from ganeti.objects import NodeGroup, new_uuid, nice_sort
from ganeti.wconfd.store import UnknownEntity

DEFAULT_ALLOC_POLICY = "preferred"


def _check_name_free(cfg: Any, name: str, message: str) -> None:
    for group in cfg.nodegroups.values():
        if group.name == name:
            raise errors.OpPrereqError(message % (name, group.uuid), errors.ECODE_EXISTS)


@register
class LUGroupAdd(LogicalUnit):
    """Create a node group under a fresh UUID (its lock created and held)."""

    OP_ID = "OP_GROUP_ADD"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.group_uuid = new_uuid()
        self.add_locks[LEVEL_NODEGROUP] = [self.group_uuid]

    def check_prereq(self) -> None:
        _check_name_free(
            self.cfg, self.op["group_name"], "Desired group name '%s' already exists as a node group (UUID: %s)"
        )
        diskparams = self.op.get("diskparams") or {}
        unknown = sorted(set(diskparams) - set(opcodes.DISK_TEMPLATES))
        if unknown:
            raise errors.OpPrereqError(
                "Invalid disk template(s) in diskparams: %s" % ", ".join(unknown), errors.ECODE_INVAL
            )

    async def exec_(self, feedback: Feedback) -> Any:
        group = NodeGroup(
            name=self.op["group_name"],
            uuid=self.group_uuid,
            members=[],
            alloc_policy=self.op.get("alloc_policy") or DEFAULT_ALLOC_POLICY,
            ndparams=dict(self.op.get("ndparams") or {}),
            diskparams=dict(self.op.get("diskparams") or {}),
            ipolicy=dict(self.op.get("ipolicy") or {}),
            hv_state_static=self.op.get("hv_state") or None,
            disk_state_static=self.op.get("disk_state") or None,
            networks={},
        )
        await self.add("nodegroup", group)
        return None


class _OneGroupLU(LogicalUnit):
    """An LU on one existing group, locked exclusively (BGL shared)."""

    REQ_BGL = False

    def expand_names(self) -> None:
        self.group_uuid = lookup_group(self.cfg, self.op["group_name"])
        self.needed_locks[LEVEL_NODEGROUP] = [self.group_uuid]

    def _group(self) -> NodeGroup:
        group = self.cfg.nodegroups.get(self.group_uuid)
        if group is None:
            raise errors.OpExecError(
                "Could not retrieve group '%s' (UUID: %s)" % (self.op["group_name"], self.group_uuid)
            )
        return group


@register
class LUGroupRemove(_OneGroupLU):
    """Remove a node group: it must have no nodes and not be the last one."""

    OP_ID = "OP_GROUP_REMOVE"

    def check_prereq(self) -> None:
        self._group()
        members = nice_sort(n.uuid for n in self.cfg.nodes.values() if n.group == self.group_uuid)
        if members:
            raise errors.OpPrereqError(
                "Group '%s' not empty, has the following nodes: %s" % (self.op["group_name"], ", ".join(members)),
                errors.ECODE_STATE,
            )
        if len(self.cfg.nodegroups) == 1:
            raise errors.OpPrereqError(
                "Group '%s' is the only group, cannot be removed" % self.op["group_name"], errors.ECODE_STATE
            )

    async def exec_(self, feedback: Feedback) -> Any:
        try:
            await self.remove("nodegroup", self.group_uuid)
        except UnknownEntity:
            raise errors.OpExecError(
                "Group '%s' with UUID %s disappeared" % (self.op["group_name"], self.group_uuid)
            ) from None
        return None


@register
class LUGroupRename(_OneGroupLU):
    """Rename a node group; returns the new name."""

    OP_ID = "OP_GROUP_RENAME"

    def check_prereq(self) -> None:
        self._group()
        _check_name_free(
            self.cfg, self.op["new_name"], "Desired new name '%s' clashes with existing node group (UUID: %s)"
        )

    async def exec_(self, feedback: Feedback) -> Any:
        group = self._group()
        await self.update("nodegroup", attrs.evolve(group, name=self.op["new_name"]))
        return self.op["new_name"]
