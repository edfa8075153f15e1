"""OP_NODE_QUERY_STORAGE (C{gnt-node list-storage}): the nodes' storage units.

As Ganeti's C{LUNodeQueryStorage}: the storage type is the one asked for
(it must belong to an enabled disk template) or that of the first enabled
template; the fields are among C{node type name size used free
allocatable} (sizes in MiB); each node answers C{storage_list} and its rows
are sorted by unit name, the nodes by name; a node that fails is a warning
and gives no rows.  Reported types here: C{file}, C{sharedfile} (the
cluster's directory) and, unlike Ganeti 3.0, C{rados} (the rbd template's
pool from the cluster's disk parameters, L{ganeti.noded.storage_units}).
"""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import ALL_SET, LEVEL_NODE, Feedback, LogicalUnit, expand_node, register
from ganeti.opcodes.typed import OpNodeQueryStorage
from ganeti.rpc import procedures

#: the storage type of each disk template (Ganeti's MAP_DISK_TEMPLATE_STORAGE_TYPE)
STORAGE_TYPE = iu.STORAGE_TYPE
#: the types whose units the nodes list here
REPORTED = ("file", "sharedfile", "rados")
FIELDS = ("node", "type", "name", "size", "used", "free", "allocatable")
#: fields only the master knows
_LOCAL = ("node", "type")


def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, errors.ECODE_INVAL)


@register
class LUNodeQueryStorage(LogicalUnit[OpNodeQueryStorage]):
    """List storage units (see the module docstring)."""

    OP_ID = "OP_NODE_QUERY_STORAGE"
    REQ_BGL = False

    def check_arguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in FIELDS]
        if unknown:
            raise _invalid("Unknown output fields selected: %s (known: %s)" % (", ".join(unknown), ", ".join(FIELDS)))

    def expand_names(self) -> None:
        wanted = self.op.nodes or []
        self.needed_locks[LEVEL_NODE] = sorted(expand_node(self.cfg, n).uuid for n in wanted) if wanted else ALL_SET
        self.share_all()

    def check_prereq(self) -> None:
        enabled = list(self.cfg.cluster.enabled_disk_templates or [])
        kind = self.op.storage_type
        if kind:
            if kind not in STORAGE_TYPE.values():
                raise _invalid("Unknown storage type '%s'" % kind)
            if not any(STORAGE_TYPE.get(t) == kind for t in enabled):
                raise errors.OpPrereqError("No disk template of storage type '%s' is enabled in this cluster."
                                           " Enabled disk templates are: %s" % (kind, ",".join(enabled)),
                                           errors.ECODE_INVAL)
        else:
            kind = STORAGE_TYPE.get(enabled[0], "") if enabled else ""
        if kind not in REPORTED:
            raise _invalid("Storage reporting for storage type '%s' is not supported. Please use the --storage-type"
                           " option to specify one of the supported storage types (%s) or set the default disk"
                           " template to one that supports storage reporting." % (kind, ", ".join(REPORTED)))
        self.storage_type = kind

    def _key(self) -> str:
        cluster = self.cfg.cluster
        if self.storage_type == "rados":
            return iu.rbd_pool(self.cfg)
        directory = cluster.file_storage_dir if self.storage_type == "file" else cluster.shared_file_storage_dir
        if not directory:
            raise errors.OpPrereqError("The cluster has no %s storage directory" % self.storage_type,
                                       errors.ECODE_STATE)
        return directory

    async def exec_(self, feedback: Feedback) -> Any:
        wanted = list(self.op.output_fields)
        fields = [f for f in dict.fromkeys(["name", *wanted]) if f not in _LOCAL]
        call = procedures.storage_list.call(self.storage_type, [[self._key()]], self.op.name, fields)
        uuids = sorted(self.owned_locks(LEVEL_NODE), key=lambda u: iu.node_name(self.cfg, u))
        out = []
        for uuid in uuids:
            node = iu.node_name(self.cfg, uuid)
            result = await iu.call_node_result(self, uuid, call)
            if result.offline:
                continue
            if result.failed or not isinstance(result.payload, list):
                await self.log_warning("Can't get storage data from node %s: %s", node, result.fail_msg)
                continue
            rows = sorted((r for r in result.payload if isinstance(r, list) and len(r) == len(fields)),
                          key=lambda r: str(r[0]))
            for row in rows:
                values = dict(zip(fields, row), node=node, type=self.storage_type)
                out.append([values[f] for f in wanted])
        return out
