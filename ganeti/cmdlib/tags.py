"""Tag LUs: OP_TAGS_GET, OP_TAGS_SET, OP_TAGS_DEL, OP_TAGS_SEARCH.

Tags are checked as Ganeti does: a string of at most L{MAX_TAG_LEN}
characters from C{[A-Za-z0-9_.+*/:@-]} (so never empty nor blank), at most
L{MAX_TAGS_PER_OBJ} per object.  Locks (spec/opcodes.md section 4): the BGL
shared, and the object's lock (shared for OP_TAGS_GET with C{use_locking},
exclusive to change it); none for the cluster object itself, whose writes
WConfD orders (a concurrent change makes us re-read and retry).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, TypeVar

import attrs

from ganeti import errors, opcodes
from ganeti.cmdlib.base import (
    LEVEL_INSTANCE,
    LEVEL_NETWORK,
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    expand_instance_name,
    expand_node,
    lookup_group,
    lookup_network,
    register,
)
from ganeti.opcodes.typed import OpTagsDel, OpTagsGet, OpTagsSearch, OpTagsSet

_TagsLUOpT = TypeVar("_TagsLUOpT", bound=OpTagsDel | OpTagsGet | OpTagsSet, covariant=True)

MAX_TAG_LEN = 128
MAX_TAGS_PER_OBJ = 4096
_VALID_TAG = re.compile(r"^[\w.+*/:@-]+\Z")


class TagError(errors.GenericError):
    """A tag is malformed or cannot be added (Ganeti's C{TagError})."""


def validate_tag(tag: Any) -> None:
    """Raise L{TagError} unless C{tag} is a valid tag."""
    if not isinstance(tag, str):
        raise TagError("Invalid tag type (not a string)")
    if len(tag) > MAX_TAG_LEN:
        raise TagError("Tag too long (>%d characters)" % MAX_TAG_LEN)
    if not tag:
        raise TagError("Tags cannot be empty")
    if not _VALID_TAG.match(tag):
        raise TagError("Tag contains invalid characters")


#: tag kind -> (config kind, lock level)
_KINDS = {
    opcodes.TAG_INSTANCE: ("instance", LEVEL_INSTANCE),
    opcodes.TAG_NODE: ("node", LEVEL_NODE),
    opcodes.TAG_NODEGROUP: ("nodegroup", LEVEL_NODEGROUP),
    opcodes.TAG_NETWORK: ("network", LEVEL_NETWORK),
}


class _TagsLU(LogicalUnit[_TagsLUOpT]):
    REQ_BGL = False

    def _use_locking(self) -> bool:
        """Whether to lock the object (OP_TAGS_GET: only with use_locking)."""
        return True

    def expand_names(self) -> None:
        kind = self.op.kind
        self.config_kind = "cluster"
        self.key: str | None = None
        if kind == opcodes.TAG_CLUSTER:
            return
        name = self.op.name
        if not name:
            raise errors.OpPrereqError("A %s name is required for %s tags" % (kind, kind), errors.ECODE_INVAL)
        self.config_kind, level = _KINDS[kind]
        if kind == opcodes.TAG_INSTANCE:
            self.key = expand_instance_name(self.cfg, name)
            lock = self.key
        elif kind == opcodes.TAG_NODE:
            self.key = lock = expand_node(self.cfg, name).uuid  # type: ignore[assignment]
        elif kind == opcodes.TAG_NODEGROUP:
            self.key = lock = lookup_group(self.cfg, name)
        else:
            self.key = lock = lookup_network(self.cfg, name)
        if self._use_locking():
            self.needed_locks[level] = [lock]

    def check_prereq(self) -> None:
        if self.config_kind == "cluster":
            self.target = self.cfg.cluster
            return
        tables: dict[str, Mapping[Any, Any]] = {
            "instance": {i.name: i for i in self.cfg.instances.values()},
            "node": self.cfg.nodes,
            "nodegroup": self.cfg.nodegroups,
            "network": self.cfg.networks,
        }
        target = tables[self.config_kind].get(self.key)
        if target is None:
            raise errors.OpPrereqError(
                "%s '%s' disappeared" % (self.op.kind.capitalize(), self.op.name), errors.ECODE_NOENT
            )
        self.target = target

    async def _change_tags(self, change: Any) -> None:
        key = None if self.config_kind == "cluster" else self.target.uuid
        await self.modify(self.config_kind, key, lambda obj: attrs.evolve(obj, tags=change(list(obj.tags))))


@register
class LUTagsGet(_TagsLU[OpTagsGet]):
    """The tags of an object."""

    OP_ID = "OP_TAGS_GET"

    def _use_locking(self) -> bool:
        return bool(self.op.use_locking)

    def expand_names(self) -> None:
        super().expand_names()
        self.share_all()

    async def exec_(self, feedback: Feedback) -> Any:
        return list(self.target.tags)


@register
class LUTagsSet(_TagsLU[OpTagsSet]):
    """Add tags to an object (those it has already are kept once)."""

    OP_ID = "OP_TAGS_SET"

    def check_prereq(self) -> None:
        super().check_prereq()
        for tag in self.op.tags:
            validate_tag(tag)

    async def exec_(self, feedback: Feedback) -> Any:
        def add(tags: list[str]) -> list[str]:
            for tag in self.op.tags:
                if tag in tags:
                    continue
                if len(tags) >= MAX_TAGS_PER_OBJ:
                    raise errors.OpExecError("Error while setting tag: Too many tags")
                tags.append(tag)
            return tags

        await self._change_tags(add)
        return None


@register
class LUTagsDel(_TagsLU[OpTagsDel]):
    """Remove tags from an object; all of them must be there."""

    OP_ID = "OP_TAGS_DEL"

    def check_prereq(self) -> None:
        super().check_prereq()
        for tag in self.op.tags:
            validate_tag(tag)
        missing = sorted(set(self.op.tags) - set(self.target.tags))
        if missing:
            raise errors.OpPrereqError(
                "Tag(s) %s not found" % ", ".join("'%s'" % t for t in missing), errors.ECODE_NOENT
            )

    async def exec_(self, feedback: Feedback) -> Any:
        remove = set(self.op.tags)
        await self._change_tags(lambda tags: [t for t in tags if t not in remove])
        return None


@register
class LUTagsSearch(LogicalUnit[OpTagsSearch]):
    """The tags of every object that match a regular expression, as
    C{(path, tag)}: C{/cluster}, C{/instances/NAME}, C{/nodes/NAME},
    C{/nodegroup/NAME} and C{/network/NAME} (Ganeti's paths); no locks."""

    OP_ID = "OP_TAGS_SEARCH"
    REQ_BGL = False

    def check_prereq(self) -> None:
        try:
            self.pattern = re.compile(self.op.pattern)
        except re.error as e:
            raise errors.OpPrereqError("Invalid search pattern '%s': %s" % (self.op.pattern, e),
                                       errors.ECODE_INVAL) from None

    async def exec_(self, feedback: Feedback) -> Any:
        targets: list[tuple[str, Any]] = [("/cluster", self.cfg.cluster)]
        for kind, table in (("instances", self.cfg.instances), ("nodes", self.cfg.nodes),
                            ("nodegroup", self.cfg.nodegroups), ("network", self.cfg.networks)):
            targets.extend(("/%s/%s" % (kind, obj.name), obj) for obj in table.values())
        return [[path, tag] for path, obj in targets for tag in obj.tags if self.pattern.search(tag)]
