"""Cluster LUs: OP_CLUSTER_QUERY, OP_CLUSTER_VERIFY_CONFIG."""

from __future__ import annotations

from typing import Any

from ganeti.cmdlib.base import ALL_SET, LEVEL_CLUSTER, LEVELS, Feedback, LogicalUnit, register
from ganeti.config import verify as config_verify
from ganeti.query import cluster_info


@register
class LUClusterQuery(LogicalUnit):
    """The cluster's information (the dict of LUXI QueryClusterInfo)."""

    OP_ID = "OP_CLUSTER_QUERY"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        return cluster_info(self.cfg)


#: Ganeti's error code for configuration problems, and the item type.
CV_ECLUSTERCFG = "ECLUSTERCFG"
_ITEM_CLUSTER = "cluster"


@register
class LUClusterVerifyConfig(LogicalUnit):
    """Verify the configuration's consistency; result True when it is sound.

    Every lock, shared.  Problems are those WConfD's own check and
    L{ganeti.config.verify} find, each reported as a feedback line in
    Ganeti's format (C{"  - ERROR: cluster: <text>"}, or
    C{"  - ERROR:ECLUSTERCFG:cluster::<text>"} with C{error_codes}).
    """

    OP_ID = "OP_CLUSTER_VERIFY_CONFIG"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.needed_locks = {level: ALL_SET for level in LEVELS if level != LEVEL_CLUSTER}
        self.share_all()

    def _error(self, message: str) -> Any:
        code = CV_ECLUSTERCFG
        ltype = "WARNING" if code in (self.op.get("ignore_errors") or []) else "ERROR"
        if ltype == "ERROR":
            self.bad = True
        if self.op["error_codes"]:
            line = "%s:%s:%s:%s:%s" % (ltype, code, _ITEM_CLUSTER, "", message)
        else:
            line = "%s: %s: %s" % (ltype, _ITEM_CLUSTER, message)
        return self.feedback("  - %s" % line)

    async def exec_(self, feedback: Feedback) -> Any:
        self.bad = False
        await self.feedback("* Verifying cluster config")
        problems: list[str] = []
        for problem in list(await self.ctx.wconfd.verify_config()) + config_verify.verify(self.cfg):
            if problem not in problems:
                problems.append(problem)
        if self.op["debug_simulate_errors"]:
            problems.append("simulated error (debug_simulate_errors)")
        for problem in problems:
            await self._error(problem)
        return not self.bad
