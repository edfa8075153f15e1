"""OP_OOB_COMMAND: power and health of nodes through their out-of-band helper;
OP_NODE_POWERCYCLE: a node's hard reboot by its own NodeD (L{LUNodePowercycle});
OP_RESTRICTED_COMMAND: one of each node's restricted commands (L{LURestrictedCommand}).

Ganeti's C{LUOobCommand} (C{lib/cmdlib/misc.py}): for each node (by name
order) whose C{oob_program} node parameter (node, then group, then cluster)
is set, the master's NodeD runs the helper (RPC C{run_oob}, protocol in
L{ganeti.oob}); a node without one answers "unavailable" (L{oob.RS_UNAVAIL}),
a failed run or an answer of the wrong shape "no data" (L{oob.RS_NODATA},
with a warning in the job log saying why).  C{power-on} and C{power-off}
record the node's C{powered} flag; C{power-status} only logs a mismatch
with it; C{health} warns about WARNING and CRITICAL items.  Nodes are
powered on C{power_delay} seconds apart.

C{power-off} and C{power-cycle} never touch the master: naming it is
refused (with the command to run by hand), and "all nodes" leaves it out.
C{power-off} needs the node marked offline first unless C{ignore_status}.
"""

from __future__ import annotations

from typing import Any

import attrs
from twisted.logger import Logger

from ganeti import errors, oob
from ganeti.cmdlib.base import ALL_SET, LEVEL_NODE, Feedback, LogicalUnit, expand_node, register
from ganeti.objects import ConfigData, Node, nice_sort_key
from ganeti.opcodes.typed import OpNodePowercycle, OpOobCommand, OpRestrictedCommand
from ganeti.rpc import procedures

#: seconds the RPC may take beyond the helper's own timeout
RPC_MARGIN = 30.0


def oob_program(cfg: ConfigData, node: Node) -> str:
    """The node's C{oob_program} (node, group, cluster ndparams); C{""}: none.

    Ganeti's C{SupportsOob}.
    """
    value: Any = (cfg.cluster.ndparams or {}).get("oob_program")
    group = cfg.nodegroups.get(node.group or "")
    for params in (group.ndparams if group is not None else None, node.ndparams):
        if params and "oob_program" in params:
            value = params["oob_program"]
    return str(value or "")


@register
class LUOobCommand(LogicalUnit[OpOobCommand]):
    """Run an out-of-band command against nodes (see the module docstring)."""

    OP_ID = "OP_OOB_COMMAND"
    REQ_BGL = False
    log = Logger()

    def expand_names(self) -> None:
        if self.op.node_names:
            nodes = [expand_node(self.cfg, name) for name in self.op.node_names]
            uuids = [n.uuid or "" for n in nodes]
            self.op = attrs.evolve(self.op, node_uuids=uuids, node_names=[n.name or "" for n in nodes])
            self.needed_locks = {LEVEL_NODE: uuids}
        else:
            self.needed_locks = {LEVEL_NODE: ALL_SET}

    def check_prereq(self) -> None:
        master_uuid = self.cfg.cluster.master_node or ""
        master = self.cfg.nodes.get(master_uuid)
        if master is None:
            raise errors.OpPrereqError("The configuration names no master node", errors.ECODE_STATE)
        if self.op.node_uuids:
            uuids = list(self.op.node_uuids)
            if self.op.command in oob.SKIP_MASTER and master_uuid in uuids:
                program = oob_program(self.cfg, master)
                if program:
                    extra = ("run '%s %s %s' if you want to operate on the master regardless"
                             % (program, self.op.command, master.name))
                else:
                    extra = "it does not support out-of-band operations"
                raise errors.OpPrereqError("Operating on the master node %s is not allowed for %s; %s"
                                           % (master.name, self.op.command, extra), errors.ECODE_INVAL)
        else:
            uuids = [u for u in self.cfg.nodes
                     if not (self.op.command in oob.SKIP_MASTER and u == master_uuid)]
        self.master = master
        self.nodes: list[Node] = []
        for uuid in uuids:
            node = self.cfg.nodes.get(uuid)
            if node is None:
                raise errors.OpPrereqError("Node %s not found" % uuid, errors.ECODE_NOENT)
            self.nodes.append(node)
            if not self.op.ignore_status and self.op.command == oob.POWER_OFF and not node.offline:
                raise errors.OpPrereqError("Cannot power off node %s because it is not marked offline" % node.name,
                                           errors.ECODE_STATE)

    async def exec_(self, feedback: Feedback) -> Any:
        result: list[list[Any]] = []
        nodes = sorted(self.nodes, key=lambda n: nice_sort_key(n.name or ""))
        address = {self.master.name or "": self.master.primary_ip or self.master.name or ""}
        for idx, node in enumerate(nodes):
            entry: list[Any] = [[oob.RS_NORMAL, node.name]]
            result.append(entry)
            program = oob_program(self.cfg, node)
            if not program:
                entry.append([oob.RS_UNAVAIL, None])
                continue
            self.log.info("Executing out-of-band command '{cmd}' using '{prog}' on {node}",
                          cmd=self.op.command, prog=program, node=node.name)
            call = procedures.run_oob.call(program, self.op.command, node.name or "", self.op.timeout)
            answers = await self.ctx.rpc().run(address, call.within(self.op.timeout + RPC_MARGIN))
            answer = answers[self.master.name or ""]
            if answer.failed:
                await self.log_warning("Out-of-band RPC failed on node '%s': %s", node.name, answer.fail_msg)
                entry.append([oob.RS_NODATA, None])
                continue
            payload = answer.payload
            problems = oob.check_payload(self.op.command, payload)
            if problems:
                await self.log_warning("Payload returned by node '%s' is not valid: Check of out-of-band payload"
                                       " failed due to %s", node.name, ", ".join(problems))
                entry.append([oob.RS_NODATA, None])
                continue
            if self.op.command == oob.HEALTH:
                for item, status in oob.health_warnings(payload):
                    await self.log_warning("Item '%s' on node '%s' has status '%s'", item, node.name, status)
            elif self.op.command in (oob.POWER_ON, oob.POWER_OFF):
                powered = self.op.command == oob.POWER_ON
                current = self.cfg.nodes.get(node.uuid or "", node)
                await self.update("node", attrs.evolve(current, powered=powered))
            elif self.op.command == oob.POWER_STATUS:
                if payload[oob.POWERED] != node.powered:
                    self.log.warn("Recorded power state ({recorded}) of node '{node}' does not match actual power"
                                  " state ({actual})", recorded=node.powered, node=node.name,
                                  actual=payload[oob.POWERED])
            entry.append([oob.RS_NORMAL, payload])
            if self.op.command == oob.POWER_ON and idx < len(nodes) - 1:
                await self.ctx.sleep(self.op.power_delay)
        return result


@register
class LUNodePowercycle(LogicalUnit[OpNodePowercycle]):
    """Hard powercycle a node (Ganeti's C{LUNodePowercycle}): no out-of-band
    helper, no locks (a last resort must not wait for other jobs); the node's
    NodeD reboots the machine 5 seconds after answering, also when the node
    is offline.  The master only with C{force}."""

    OP_ID = "OP_NODE_POWERCYCLE"
    REQ_BGL = False

    def expand_names(self) -> None:
        node = expand_node(self.cfg, self.op.node_uuid or self.op.node_name)
        self.op = attrs.evolve(self.op, node_uuid=node.uuid, node_name=node.name or self.op.node_name)
        if node.uuid == self.cfg.cluster.master_node and not self.op.force:
            raise errors.OpPrereqError("The node is the master and the force parameter was not set",
                                       errors.ECODE_INVAL)
        self.needed_locks = {}

    async def exec_(self, feedback: Feedback) -> Any:
        node = self.cfg.nodes[self.op.node_uuid or ""]
        cluster = self.cfg.cluster
        hypervisor = (cluster.enabled_hypervisors or ["fake"])[0]
        hvparams = (cluster.hvparams or {}).get(hypervisor) or {}
        name = node.name or ""
        answers = await self.ctx.rpc().run({name: node.primary_ip or name},
                                           procedures.node_powercycle.call(hypervisor, hvparams))
        answer = answers[name]
        if answer.failed:
            raise errors.OpExecError("Failed to schedule the reboot: %s" % answer.fail_msg)
        return answer.payload


@register
class LURestrictedCommand(LogicalUnit[OpRestrictedCommand]):
    """Ganeti's C{LURestrictedCommand}: RPC C{restricted_command} on every
    node at once; the result is C{[success, output or "Command 'C' on node
    'N' failed: why"]} per node, in the order given.  Locks: the nodes',
    shared unless C{use_locking} (Ganeti's reading of that flag)."""

    OP_ID = "OP_RESTRICTED_COMMAND"
    REQ_BGL = False

    def expand_names(self) -> None:
        if not self.op.nodes:
            raise errors.OpPrereqError("At least one node must be given", errors.ECODE_INVAL)
        nodes = [expand_node(self.cfg, name) for name in self.op.nodes]
        self.op = attrs.evolve(self.op, nodes=[n.name or "" for n in nodes], node_uuids=[n.uuid or "" for n in nodes])
        self.needed_locks = {LEVEL_NODE: list(self.op.node_uuids or [])}
        self.share_locks = {LEVEL_NODE: not self.op.use_locking}

    async def exec_(self, feedback: Feedback) -> Any:
        nodes = [self.cfg.nodes[uuid] for uuid in self.op.node_uuids or []]
        answers = await self.ctx.rpc().run({n.name or "": n.primary_ip or n.name or "" for n in nodes},
                                           procedures.restricted_command.call(self.op.command))
        result: list[list[Any]] = []
        for node in nodes:
            answer = answers[node.name or ""]
            if answer.failed:
                result.append([False, "Command '%s' on node '%s' failed: %s"
                               % (self.op.command, node.name, answer.fail_msg)])
            else:
                result.append([True, answer.payload])
        return result
