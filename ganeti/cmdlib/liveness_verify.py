"""gnt-cluster verify: nodes LuxiD's heartbeat roster calls unreachable.

L{liveness_problems} is pure: from the rows of a LUXI node query
C{[name, offline, liveness, last_seen]} it names every node that should
beat and does not (C{ENODEHEARTBEAT}, an error).  L{verify_liveness} asks
LuxiD for those rows over LUXI and reports them through the LU's
C{node_error}; a LuxiD without heartbeats (no roster) reports nothing.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

CV_ENODEHEARTBEAT = "ENODEHEARTBEAT"
#: the node query fields the check reads
FIELDS = ["name", "offline", "liveness", "last_seen"]

NodeError = Callable[..., Awaitable[Any]]


def liveness_problems(rows: list[list[Any]], now: float) -> list[tuple[str, str]]:
    """C{[(node, message)]} for every online node the roster calls unreachable.

    @param rows: C{[[status, value], ...]} per node, in L{FIELDS} order
    """
    out = []
    for row in rows:
        name, offline, liveness, last_seen = (value for _status, value in row)
        if offline or liveness != "unreachable":
            continue
        if last_seen:
            ago = "last heard from %.0f s ago" % max(0.0, now - float(last_seen))
        else:
            ago = "not heard from since the master started"
        out.append((str(name), "node is unreachable: no heartbeat (%s)" % ago))
    return out


async def verify_liveness(lu: Any, node_error: NodeError) -> None:
    """Report the nodes the master's heartbeat roster calls unreachable."""
    from ganeti.luxi.client import AsyncLuxiClient

    ctx = lu.ctx
    if ctx.paths is None:
        return
    try:
        client = await AsyncLuxiClient.connect(ctx.clock, ctx.paths.luxi_socket)
    except Exception as e:  # LuxiD down: node_verify reports what it can
        await lu.feedback("  - NOTICE: cannot ask LuxiD for node liveness: %s" % e)
        return
    try:
        answer = await client.call("Query", "node", FIELDS, None)
    finally:
        await client.close()
    await lu.feedback("* Verifying node liveness (heartbeats)")
    for name, message in liveness_problems(answer["data"], time.time()):
        await node_error(CV_ENODEHEARTBEAT, name, message)


__all__ = ["CV_ENODEHEARTBEAT", "liveness_problems", "verify_liveness"]
