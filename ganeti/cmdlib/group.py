"""Node group LUs: OP_GROUP_ADD, OP_GROUP_REMOVE, OP_GROUP_RENAME,
OP_GROUP_ASSIGN_NODES and OP_GROUP_SET_PARAMS (parameter checks in
L{ganeti.cmdlib.group_params})."""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ganeti import errors
from ganeti.cmdlib import group_params as gparams
from ganeti.cmdlib import names
from ganeti.cmdlib.base import (
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    expand_node,
    lookup_group,
    register,
)
from ganeti.cmdlib.instance_utils import instance_nodes
from ganeti.errors import UnknownEntity
from ganeti.objects import ConfigData, NodeGroup, new_uuid, nice_sort
from ganeti.opcodes.typed import OpGroupAdd, OpGroupAssignNodes, OpGroupRemove, OpGroupRename, OpGroupSetParams

#: The opcodes of the LUs on one existing node group.
_OneGroupLUOpT = TypeVar(
    "_OneGroupLUOpT", bound=OpGroupAssignNodes | OpGroupRemove | OpGroupRename | OpGroupSetParams, covariant=True
)

DEFAULT_ALLOC_POLICY = "preferred"


def _check_name_free(cfg: Any, name: str, message: str) -> None:
    for group in cfg.nodegroups.values():
        if group.name == name:
            raise errors.OpPrereqError(message % (name, group.uuid), errors.ECODE_EXISTS)


@register
class LUGroupAdd(LogicalUnit[OpGroupAdd]):
    """Create a node group under a fresh UUID (its lock created and held)."""

    OP_ID = "OP_GROUP_ADD"
    REQ_BGL = False

    def check_arguments(self) -> None:
        """The name (L{names.check_group_name}) and every parameter dict,
        typed by the checks OP_GROUP_SET_PARAMS uses."""
        op = self.op
        self.op = op = attrs.evolve(op, group_name=names.check_group_name(op.group_name))
        self.params = {
            "ndparams": gparams.check_ndparams(op.ndparams or {}),
            "diskparams": gparams.check_diskparams(op.diskparams or {}),
            "ipolicy": gparams.check_ipolicy(op.ipolicy or {}),
            "hv_state_static": gparams.check_hv_state(op.hv_state or {}),
            "disk_state_static": gparams.check_disk_state(op.disk_state or {}),
        }

    def expand_names(self) -> None:
        self.group_uuid = new_uuid()
        self.add_locks[LEVEL_NODEGROUP] = [self.group_uuid]

    def check_prereq(self) -> None:
        _check_name_free(
            self.cfg, self.op.group_name, "Desired group name '%s' already exists as a node group (UUID: %s)"
        )

    async def exec_(self, feedback: Feedback) -> Any:
        group = NodeGroup(
            name=self.op.group_name,
            uuid=self.group_uuid,
            members=[],
            alloc_policy=self.op.alloc_policy or DEFAULT_ALLOC_POLICY,
            ndparams=gparams.merged({}, self.params["ndparams"]),
            diskparams=gparams.merged_nested({}, self.params["diskparams"]),
            ipolicy=gparams.merged_ipolicy({}, self.params["ipolicy"]),
            hv_state_static=gparams.merged_nested({}, self.params["hv_state_static"]) or None,
            disk_state_static=gparams.merged_disk_state({}, self.params["disk_state_static"]) or None,
            networks={},
        )
        await self.add("nodegroup", group)
        return None


class _OneGroupLU(LogicalUnit[_OneGroupLUOpT]):
    """An LU on one existing group, locked exclusively (BGL shared)."""

    REQ_BGL = False

    def expand_names(self) -> None:
        self.group_uuid = lookup_group(self.cfg, self.op.group_name)
        self.needed_locks[LEVEL_NODEGROUP] = [self.group_uuid]

    def _group(self) -> NodeGroup:
        group = self.cfg.nodegroups.get(self.group_uuid)
        if group is None:
            raise errors.OpExecError(
                "Could not retrieve group '%s' (UUID: %s)" % (self.op.group_name, self.group_uuid)
            )
        return group


@register
class LUGroupRemove(_OneGroupLU[OpGroupRemove]):
    """Remove a node group: it must have no nodes and not be the last one."""

    OP_ID = "OP_GROUP_REMOVE"

    def check_prereq(self) -> None:
        self._group()
        members = nice_sort(n.uuid for n in self.cfg.nodes.values() if n.group == self.group_uuid)
        if members:
            raise errors.OpPrereqError(
                "Group '%s' not empty, has the following nodes: %s" % (self.op.group_name, ", ".join(members)),
                errors.ECODE_STATE,
            )
        if len(self.cfg.nodegroups) == 1:
            raise errors.OpPrereqError(
                "Group '%s' is the only group, cannot be removed" % self.op.group_name, errors.ECODE_STATE
            )

    async def exec_(self, feedback: Feedback) -> Any:
        try:
            await self.remove("nodegroup", self.group_uuid)
        except UnknownEntity:
            raise errors.OpExecError(
                "Group '%s' with UUID %s disappeared" % (self.op.group_name, self.group_uuid)
            ) from None
        return None


@register
class LUGroupRename(_OneGroupLU[OpGroupRename]):
    """Rename a node group; returns the new name."""

    OP_ID = "OP_GROUP_RENAME"

    def check_arguments(self) -> None:
        self.op = attrs.evolve(self.op, new_name=names.check_group_name(self.op.new_name))

    def check_prereq(self) -> None:
        self._group()
        _check_name_free(
            self.cfg, self.op.new_name, "Desired new name '%s' clashes with existing node group (UUID: %s)"
        )

    async def exec_(self, feedback: Feedback) -> Any:
        group = self._group()
        await self.update("nodegroup", attrs.evolve(group, name=self.op.new_name))
        return self.op.new_name


# --- OP_GROUP_ASSIGN_NODES -----------------------------------------------------------------


def split_instances(cfg: ConfigData, moves: dict[str, str]) -> tuple[list[str], list[str]]:
    """Instances whose nodes would span more than one group after C{moves}.

    An instance uses its primary node and the nodes of its disks; with the
    file, sharedfile and diskless templates that is the primary alone, so
    its instances move with a node and are never split.

    @param moves: C{{node uuid: new group uuid}}
    @return: C{(newly split, still split)} instance names, sorted
    """
    def group_of(uuid: str, after: bool) -> str | None:
        if after and uuid in moves:
            return moves[uuid]
        node = cfg.nodes.get(uuid)
        return node.group if node is not None else None

    new_splits: list[str] = []
    still_split: list[str] = []
    for inst in cfg.instances.values():
        nodes = instance_nodes(cfg, inst)
        before = {group_of(n, False) for n in nodes}
        after = {group_of(n, True) for n in nodes}
        if len(after) > 1:
            (still_split if len(before) > 1 else new_splits).append(inst.name or inst.uuid or "?")
    return nice_sort(new_splits), nice_sort(still_split)


@register
class LUGroupAssignNodes(_OneGroupLU[OpGroupAssignNodes]):
    """Move nodes into a group.

    Locks: the target group and the current groups of the nodes
    exclusively (the latter read before they are locked, and checked
    again once the nodes are), the nodes exclusively.  A move that would
    split an instance across groups is refused unless C{force}.
    """

    OP_ID = "OP_GROUP_ASSIGN_NODES"

    def expand_names(self) -> None:
        super().expand_names()
        uuids: list[str] = []
        names: list[str] = []
        for name in self.op.nodes:
            node = expand_node(self.cfg, name)
            if node.uuid not in uuids:
                uuids.append(node.uuid or "")
                names.append(node.name or "")
        self.node_uuids = uuids
        self.op = attrs.evolve(self.op, node_uuids=uuids, nodes=names)
        self.needed_locks[LEVEL_NODE] = list(uuids)

    def _current_groups(self) -> set[str]:
        groups = {self.cfg.nodes[u].group for u in self.node_uuids if u in self.cfg.nodes}
        return {g for g in groups if g}

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_NODEGROUP:
            self.needed_locks[level] = sorted({self.group_uuid} | self._current_groups())

    def check_prereq(self) -> None:
        self._group()
        for uuid, name in zip(self.node_uuids, self.op.nodes):
            if uuid not in self.cfg.nodes:
                raise errors.OpPrereqError("Node '%s' not known" % name, errors.ECODE_NOENT)
        expected = {self.group_uuid} | self._current_groups()
        held = set(self.owned_locks(LEVEL_NODEGROUP))
        if not expected <= held:
            raise errors.OpExecError(
                "Nodes changed groups since their locks were requested: their groups are now %s, the locks held"
                " are for %s" % (", ".join(sorted(expected)), ", ".join(sorted(held)))
            )
        self.moves = {u: self.group_uuid for u in self.node_uuids if self.cfg.nodes[u].group != self.group_uuid}
        self.new_splits, self.still_split = split_instances(self.cfg, self.moves)
        if self.new_splits and not self.op.force:
            raise errors.OpPrereqError(
                "The following instances get split by this change and --force was not given: %s"
                % ", ".join(self.new_splits), errors.ECODE_STATE
            )

    async def exec_(self, feedback: Feedback) -> Any:
        if self.new_splits:
            await self.log_warning("This operation will split the following instances: %s",
                                   ", ".join(self.new_splits))
            if self.still_split:
                await self.log_warning("In addition, these already-split instances continue to be split"
                                       " across groups: %s", ", ".join(self.still_split))
        for uuid in self.node_uuids:
            if uuid not in self.moves:
                continue
            node = self.cfg.nodes[uuid]
            await self.update("node", attrs.evolve(node, group=self.group_uuid))
        return None


# --- OP_GROUP_SET_PARAMS ---------------------------------------------------------------------


@register
class LUGroupSetParams(_OneGroupLU[OpGroupSetParams]):
    """Change a group's allocation policy, node, disk and instance policy
    parameters and static hypervisor/disk state.

    Values are checked and typed (L{ganeti.cmdlib.group_params}); the value
    C{"default"} removes the group's own setting, so that the cluster's
    applies.  Locks: the group exclusively.  Result: the list of
    C{[parameter, new value]}.
    """

    OP_ID = "OP_GROUP_SET_PARAMS"
    def check_arguments(self) -> None:
        op = self.op
        if all(value is None for value in (op.alloc_policy, op.ndparams, op.diskparams, op.hv_state,
                                           op.disk_state, op.ipolicy)):
            raise errors.OpPrereqError("Please pass at least one modification", errors.ECODE_INVAL)
        self.nd = gparams.check_ndparams(op.ndparams or {})
        self.disk = gparams.check_diskparams(op.diskparams or {})
        self.ipol = gparams.check_ipolicy(op.ipolicy or {})
        self.hv_state = gparams.check_hv_state(op.hv_state or {})
        self.disk_state = gparams.check_disk_state(op.disk_state or {})

    def check_prereq(self) -> None:
        group = self._group()
        self.changes, self.result = self._plan(group)

    def _plan(self, group: NodeGroup) -> tuple[dict[str, Any], list[list[Any]]]:
        """The new values of the group's attributes, and the result (pure)."""
        op = self.op
        changes: dict[str, Any] = {}
        result: list[list[Any]] = []
        if op.alloc_policy is not None:
            changes["alloc_policy"] = op.alloc_policy
            result.append(["alloc_policy", op.alloc_policy])
        if op.ndparams:  # as Ganeti: an empty dict changes nothing
            changes["ndparams"] = gparams.merged(group.ndparams or {}, self.nd)
            result.append(["ndparams", str(changes["ndparams"])])
        if op.diskparams:
            changes["diskparams"] = gparams.merged_nested(group.diskparams or {}, self.disk)
            result.append(["diskparams", str(changes["diskparams"])])
        if op.ipolicy:
            changes["ipolicy"] = gparams.merged_ipolicy(group.ipolicy or {}, self.ipol)
            result.append(["ipolicy", str(changes["ipolicy"])])
        if op.hv_state:
            changes["hv_state_static"] = gparams.merged_nested(group.hv_state_static or {}, self.hv_state)
            result.append(["hv_state", str(changes["hv_state_static"])])
        if op.disk_state:
            changes["disk_state_static"] = gparams.merged_disk_state(group.disk_state_static or {},
                                                                     self.disk_state)
            result.append(["disk_state", str(changes["disk_state_static"])])
        return changes, result

    async def exec_(self, feedback: Feedback) -> Any:
        group = self._group()
        new = attrs.evolve(group, **self.changes)
        if new != group:
            await self.update("nodegroup", new)
        return self.result
