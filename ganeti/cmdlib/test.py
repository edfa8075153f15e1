"""LUs for testing the job machinery: OP_TEST_DELAY."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from ganeti.cmdlib.base import LEVEL_NODE, Feedback, LogicalUnit, register


@register
class LUTestDelay(LogicalUnit):
    """Sleep C{duration} seconds, C{repeat} times (once for 0), logging each round.

    Locks: none with C{no_locks} (the default); otherwise, as Ganeti does,
    the BGL shared and the nodes it sleeps on exclusively: the master node
    with C{on_master}.  Sleeping on other nodes (C{on_nodes}) needs the
    node daemon and is refused for now.
    """

    OP_ID = "OP_TEST_DELAY"
    REQ_BGL = False

    def uses_bgl(self) -> bool:
        return not self.op["no_locks"]

    def expand_names(self) -> None:
        if not self.op["no_locks"] and self.op["on_master"]:
            master = self.cfg.cluster.master_node
            if master:
                self.needed_locks[LEVEL_NODE] = [master]

    def check_arguments(self) -> None:
        if self.op["on_nodes"]:
            raise errors.OpPrereqError(
                "Test delay on other nodes (on_nodes) is not supported yet", errors.ECODE_INVAL
            )
        if self.op["interruptible"]:
            raise errors.OpPrereqError("Interruptible test delays are not supported yet", errors.ECODE_INVAL)

    async def _delay(self) -> None:
        if self.op["on_master"]:
            await self.ctx.sleep(self.op["duration"])

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
