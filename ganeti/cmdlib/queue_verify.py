"""The job queue check of C{gnt-cluster verify} (run by OP_CLUSTER_VERIFY_CONFIG): do the candidates' replicas
of the queue match the master's?

Every online master candidate lists its queue (C{jobqueue_list}); each job
whose replica differs from the master's copy is an error naming the job id:
missing, stale (another status), archived elsewhere, or extra (the master
does not have it).  Jobs that are not final on the master are not judged
(their replicas may lag a moment behind).  A job that finished during the
check may not have reached every candidate yet: differences are looked at
again after L{RECHECK_DELAY} seconds and only those that stay are reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ganeti.jobs import replicas
from ganeti.objects import ConfigData
from ganeti.rpc import procedures

if TYPE_CHECKING:
    from ganeti.cmdlib.base import LogicalUnit
    from ganeti.opcodes.typed import OpCode

#: Error code of a replica that differs (Ganeti has none for this).
CV_EQUEUEREPLICA = "EQUEUEREPLICA"
#: Seconds before differences are looked at a second time.
RECHECK_DELAY = 2.0
#: Per-node timeout of the listing RPC, seconds.
LIST_TIMEOUT = 60.0
#: At most this many job ids are named per node (the count is always given).
MAX_NAMED = 20

NodeError = Callable[..., Awaitable[Any]]


def candidates(cfg: ConfigData) -> dict[str, str]:
    """C{{name: address}} of the online master candidates but the master."""
    master = cfg.cluster.master_node
    return {n.name or "": n.primary_ip or n.name or "" for n in sorted(cfg.nodes.values(), key=lambda n: n.name or "")
            if n.master_candidate and not n.offline and n.uuid != master}


def _entries(payload: Any) -> dict[str, replicas.Entry] | None:
    if not isinstance(payload, dict):
        return None
    result = {}
    for name, value in payload.items():
        if isinstance(name, str) and isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
            result[name] = replicas.Entry(value[0], value[1] if isinstance(value[1], str) else None)
    return result


async def _compare(ctx: Any, nodes: dict[str, str]) -> tuple[dict[str, dict[int, str]], dict[str, str]]:
    """(differences per node, RPC failures per node)."""
    master = replicas.ListingCache(ctx.paths.queue_dir).entries()
    results = await ctx.rpc().run(nodes, procedures.jobqueue_list.call().within(LIST_TIMEOUT))
    found: dict[str, dict[int, str]] = {}
    failed: dict[str, str] = {}
    for name in nodes:
        result = results[name]
        entries = _entries(result.payload) if not result.failed else None
        if entries is None:
            failed[name] = result.fail_msg or "invalid answer"
            continue
        different = replicas.differences(master, entries)
        if different:
            found[name] = different
    return found, failed


def describe(different: dict[int, str]) -> str:
    """One line for one node: how many jobs differ, and which."""
    ids = sorted(different)
    named = ", ".join("%d %s" % (job_id, different[job_id]) for job_id in ids[:MAX_NAMED])
    more = " and %d more" % (len(ids) - MAX_NAMED) if len(ids) > MAX_NAMED else ""
    return "job queue replica differs from the master's for %d job(s): %s%s" % (len(ids), named, more)


async def verify_queue_replicas(lu: LogicalUnit[OpCode], node_error: NodeError) -> None:
    """Report (through C{node_error(code, node, message, warning=False)})
    every candidate whose queue replica differs from the master's, with the
    job ids, as an error; a candidate that cannot list its queue as a
    warning (C{node_verify} reports unreachable nodes already)."""
    ctx = lu.ctx
    if ctx.paths is None:
        return
    nodes = candidates(lu.cfg)
    if not nodes:
        return
    await lu.feedback("* Verifying the job queue replicas (%d candidates)" % len(nodes))
    found, failed = await _compare(ctx, nodes)
    if found:
        await ctx.sleep(RECHECK_DELAY)
        again, failed_again = await _compare(ctx, {name: nodes[name] for name in found})
        failed.update(failed_again)
        found = {name: {job_id: why for job_id, why in again.get(name, {}).items() if job_id in different}
                 for name, different in found.items()}
    for name in sorted(failed):
        await node_error(CV_EQUEUEREPLICA, name, "cannot list the job queue replica: %s" % failed[name],
                         warning=True)
    for name in sorted(found):
        if found[name]:
            await node_error(CV_EQUEUEREPLICA, name, describe(found[name]))


__all__ = ["CV_EQUEUEREPLICA", "describe", "verify_queue_replicas"]
