"""LUs of OP_QUERY and OP_QUERY_FIELDS (the resources LUXI's Query does not
serve: C{cluster}, C{os}, C{extstorage}), OP_CLUSTER_CONFIG_QUERY,
OP_CLUSTER_POST_INIT (the C{cluster-init} hooks), the master IP opcodes,
OP_CLUSTER_RENAME and OP_CLUSTER_DESTROY, as Ganeti has them.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib.base import Feedback, LogicalUnit, register
from ganeti.cmdlib.instance_utils import node_address
from ganeti.opcodes.typed import (
    OpClusterActivateMasterIp,
    OpClusterConfigQuery,
    OpClusterDeactivateMasterIp,
    OpClusterDestroy,
    OpClusterPostInit,
    OpClusterRename,
    OpQuery,
    OpQueryFields,
)
from ganeti.rpc import procedures


async def diagnosed_rows(lu: LogicalUnit[Any], what: str) -> list[dict[str, Any]]:
    """Every OS or ExtStorage provider the nodes have, as rows by field name."""
    from ganeti.cmdlib import extstorage, operating_system
    from ganeti.query import diagnosed

    if what == "os":
        answers = await operating_system.diagnose_nodes(lu, procedures.os_diagnose.call(), "OSes")
        fields = list(diagnosed.OS_FIELDS)
        # every OS: asking for hidden, blacklisted and valid keeps those OP_OS_DIAGNOSE would drop
        rows = operating_system.rows(lu.cfg, operating_system.merge(answers), fields)
    else:
        answers = await operating_system.diagnose_nodes(lu, procedures.extstorage_diagnose.call(),
                                                        "the ExtStorage providers")
        fields = list(diagnosed.EXTSTORAGE_FIELDS)
        rows = extstorage.rows(lu.cfg, answers, fields, [])
    return [dict(zip(fields, row)) for row in rows]


@register
class LUQuery(LogicalUnit[OpQuery]):
    """C{Query} of C{cluster}, C{os} or C{extstorage} (the answer of LUXI's C{Query})."""

    OP_ID = "OP_QUERY"
    REQ_BGL = False

    def check_arguments(self) -> None:
        if self.op.use_locking:
            raise errors.OpPrereqError("Sync queries are not allowed", errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti.query import diagnosed, engine
        from ganeti.query.fields import QueryContext

        res = diagnosed.resource(self.op.what)
        engine.fields_of(res, list(self.op.fields))  # unknown fields: refused before the nodes are asked
        live: dict[str, Any] = {}
        if self.op.what != "cluster":
            live["rows"] = await diagnosed_rows(self, self.op.what)
        return engine.query_resource(res, list(self.op.fields), self.op.qfilter,
                                     QueryContext(config=self.cfg, live=live))


@register
class LUQueryFields(LogicalUnit[OpQueryFields]):
    """C{QueryFields} of C{cluster}, C{os} or C{extstorage}."""

    OP_ID = "OP_QUERY_FIELDS"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti.query import diagnosed, engine

        return engine.fields_of(diagnosed.resource(self.op.what), list(self.op.fields or []))


@register
class LUClusterConfigQuery(LogicalUnit[OpClusterConfigQuery]):
    """The values of C{output_fields} of the cluster resource (one row)."""

    OP_ID = "OP_CLUSTER_CONFIG_QUERY"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti.query import engine
        from ganeti.query.fields import QueryContext

        (row,) = engine.legacy_query("cluster", None, list(self.op.output_fields), QueryContext(config=self.cfg))
        return row


@register
class LUClusterPostInit(LogicalUnit[OpClusterPostInit]):
    """Nothing but its C{cluster-init} hooks (on the master, post phase;
    declared in L{ganeti.cmdlib.hooks_env})."""

    OP_ID = "OP_CLUSTER_POST_INIT"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        return True


async def master_ip(lu: LogicalUnit[Any], procedure: Any, verb: str) -> None:
    """Turn the master IP on or off on the master, through its NodeD."""
    cluster = lu.cfg.cluster
    master = lu.cfg.nodes.get(cluster.master_node or "")
    if master is None:
        raise errors.OpExecError("The cluster has no master node in its configuration")
    params = {"uuid": cluster.master_node, "ip": cluster.master_ip, "netmask": cluster.master_netmask,
              "netdev": cluster.master_netdev, "ip_family": getattr(cluster, "primary_ip_family", 2)}
    result = await lu.ctx.rpc().run_one(master.name, node_address(master), procedure.call(params, False))
    if result.failed:
        raise errors.OpExecError("Could not %s the master IP: %s" % (verb, result.fail_msg))


@register
class LUClusterActivateMasterIp(LogicalUnit[OpClusterActivateMasterIp]):
    """Activate the master IP on the master."""

    OP_ID = "OP_CLUSTER_ACTIVATE_MASTER_IP"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        await master_ip(self, procedures.node_activate_master_ip, "activate")
        return None


@register
class LUClusterDeactivateMasterIp(LogicalUnit[OpClusterDeactivateMasterIp]):
    """Deactivate the master IP on the master."""

    OP_ID = "OP_CLUSTER_DEACTIVATE_MASTER_IP"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        await master_ip(self, procedures.node_deactivate_master_ip, "deactivate")
        return None


__all__ = ["LUClusterActivateMasterIp", "LUClusterConfigQuery", "LUClusterDeactivateMasterIp", "LUClusterPostInit",
           "LUQuery", "LUQueryFields", "diagnosed_rows", "master_ip"]


@register
class LUClusterDestroy(LogicalUnit[OpClusterDestroy]):
    """Ganeti's C{LUClusterDestroy}: refused while other nodes or any
    instance remain; then the master IP goes off (a failure is a warning)
    and the result is the master's UUID.  The caller (Ganeti's C{gnt-cluster
    destroy}) then stops the daemons and removes the files; ours does both
    on the master node by itself (L{ganeti.client.cluster_init.destroy})."""

    OP_ID = "OP_CLUSTER_DESTROY"

    def check_prereq(self) -> None:
        master = self.cfg.cluster.master_node
        others = [uuid for uuid in self.cfg.nodes if uuid != master]
        if others:
            raise errors.OpPrereqError("There are still %d node(s) in this cluster." % len(others),
                                       errors.ECODE_INVAL)
        if self.cfg.instances:
            raise errors.OpPrereqError("There are still %d instance(s) in this cluster." % len(self.cfg.instances),
                                       errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        try:
            await master_ip(self, procedures.node_deactivate_master_ip, "deactivate")
        except errors.OpExecError as e:
            await self.log_warning("Error disabling the master IP address: %s", e)
        return self.cfg.cluster.master_node


#: seconds the rename's probe of the new master IP waits for an answer
RENAME_PROBE_TIMEOUT = 1.0


@register
class LUClusterRename(LogicalUnit[OpClusterRename]):
    """Ganeti's C{LUClusterRename}: the new name must resolve; its
    canonical name and address become the cluster's name and master IP
    (refused when neither changes, or when the new address answers on the
    cluster's node daemon port: another machine has it).  The master IP goes off,
    the cluster object changes (ssconf follows), and the master IP comes
    back with the new address (a failure then is a warning).  The result is
    the new name."""

    OP_ID = "OP_CLUSTER_RENAME"

    async def resolve(self) -> None:
        try:
            canonical, _aliases, addresses = await self.ctx.net.resolve(self.op.name)
        except OSError as e:
            raise errors.OpPrereqError("Cannot resolve the new cluster name '%s': %s" % (self.op.name, e),
                                       errors.ECODE_RESOLVER) from None
        if not addresses:
            raise errors.OpPrereqError("The new cluster name '%s' has no address" % self.op.name,
                                       errors.ECODE_RESOLVER)
        self.new_name, self.new_ip = str(canonical), str(addresses[0])
        if self.new_ip != self.cfg.cluster.master_ip and await self.ctx.net.port_open(self.new_ip, self.ctx.rpc_port,
                                                                              RENAME_PROBE_TIMEOUT):
            raise errors.OpPrereqError("The given cluster IP address (%s) is reachable on the network" % self.new_ip,
                                       errors.ECODE_NOTUNIQUE)

    def check_prereq(self) -> None:
        cluster = self.cfg.cluster
        if self.new_name == cluster.cluster_name and self.new_ip == cluster.master_ip:
            raise errors.OpPrereqError("Neither the name nor the IP address of the cluster has changed",
                                       errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        await master_ip(self, procedures.node_deactivate_master_ip, "deactivate")
        try:
            await self.modify("cluster", None,
                              lambda c: attrs.evolve(c, cluster_name=self.new_name, master_ip=self.new_ip))
        finally:
            try:
                await master_ip(self, procedures.node_activate_master_ip, "activate")
            except errors.OpExecError as e:
                await self.log_warning("Could not re-enable the master role on the master, please restart"
                                       " manually: %s", e)
        return self.new_name
