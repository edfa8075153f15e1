"""LUs for testing the job machinery: OP_TEST_DELAY."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred, gatherResults

from ganeti import errors
from ganeti.cmdlib.base import LEVEL_NODE, Feedback, LogicalUnit, expand_node, register


@register
class LUTestDelay(LogicalUnit):
    """Sleep C{duration} seconds, C{repeat} times (once for 0), logging each round.

    Locks: none with C{no_locks} (the default); otherwise, as Ganeti does,
    the BGL shared and the nodes it sleeps on exclusively: the master node
    with C{on_master}, and the C{on_nodes}, where the node daemons sleep
    (RPC C{test_delay}) at the same time as the master.
    """

    OP_ID = "OP_TEST_DELAY"
    REQ_BGL = False

    def uses_bgl(self) -> bool:
        return not self.op["no_locks"]

    def expand_names(self) -> None:
        self.node_uuids = [expand_node(self.cfg, name).uuid for name in self.op["on_nodes"]]
        self.op["on_node_uuids"] = list(self.node_uuids)
        if not self.op["no_locks"]:
            locks = list(self.node_uuids)
            master = self.cfg.cluster.master_node
            if self.op["on_master"] and master and master not in locks:
                locks.append(master)
            if locks:
                self.needed_locks[LEVEL_NODE] = locks

    def check_arguments(self) -> None:
        if self.op["interruptible"]:
            raise errors.OpPrereqError("Interruptible test delays are not supported yet", errors.ECODE_INVAL)

    async def _delay(self) -> None:
        waits = []
        if self.node_uuids:
            nodes = {self.cfg.nodes[u].name: self.cfg.nodes[u].primary_ip for u in self.node_uuids}
            rpc = self.ctx.rpc()
            timeout = self.op["duration"] + 30
            waits.append(ensureDeferred(rpc.call(nodes, "test_delay", [self.op["duration"]], timeout=timeout)))
        if self.op["on_master"]:
            waits.append(self.ctx.sleep(self.op["duration"]))
        results = await gatherResults(waits, consumeErrors=True) if waits else []
        if self.node_uuids:
            for name, result in results[0].items():
                if result.failed:
                    raise errors.OpExecError("Failure during rpc call to node %s: %s" % (name, result.fail_msg))

    async def exec_(self, feedback: Feedback) -> Any:
        repeat = self.op["repeat"]
        if repeat == 0:
            await self._delay()
            return None
        last = repeat - 1
        for index in range(repeat):
            await self.log_info("Test delay iteration %d/%d", index, last)
            await self._delay()
        return None
