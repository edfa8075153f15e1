"""What LUs learn from LuxiD's heartbeat roster.

gnt-cluster verify: L{liveness_problems} is pure: from the rows of a LUXI
node query C{[name, offline, liveness, last_seen]} it names every node
that should beat and does not (C{ENODEHEARTBEAT}, an error).
L{verify_liveness} asks LuxiD for those rows over LUXI and reports them
through the LU's C{node_error}; a LuxiD without heartbeats (no roster)
reports nothing.

Job logs: L{NotingRpc} wraps a job's node RPC client; when a call goes to
a node the roster calls unreachable, the job's log says so at once (the
call itself goes on and waits for its timeout, as before).
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable

from ganeti.jobs import trace
from ganeti.rpc.contract import Call

CV_ENODEHEARTBEAT = "ENODEHEARTBEAT"
#: seconds a finished call waits for its note (a LUXI query of LuxiD)
NOTE_WAIT = 2.0
#: seconds a job keeps what the roster said of a node (a job's steps call the same nodes one after another;
#: each look is a LUXI connection and a query of LuxiD)
ROSTER_TTL = 1.0
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


# lu: a LogicalUnit; not annotated as one, since cmdlib.base imports this module
# (lazily, for NotingRpc) and the import-circle test counts type-only imports too
async def verify_liveness(lu: Any, node_error: NodeError, names: list[str] | None = None) -> None:
    """Report the nodes (of C{names}, default all) the master's heartbeat roster calls unreachable."""
    from ganeti.luxi import methods
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
        answer = await client.run(methods.Query.call("node", FIELDS, None))
    finally:
        await client.close()
    await lu.feedback("* Verifying node liveness (heartbeats)")
    for name, message in liveness_problems(answer["data"], time.time()):
        if names is None or name in names:
            await node_error(CV_ENODEHEARTBEAT, name, message)


async def query_roster(reactor: Any, socket: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """C{{name: {"liveness", "last_seen"}}} of C{names} from LuxiD over LUXI."""
    from ganeti.luxi import methods
    from ganeti.luxi.client import AsyncLuxiClient

    client = await AsyncLuxiClient.connect(reactor, socket)
    try:
        qfilter: list[Any] = ["|"] + [["==", "name", name] for name in names]
        answer = await client.run(methods.Query.call("node", ["name", "liveness", "last_seen"], qfilter))
    finally:
        await client.close()
    return {row[0][1]: {"liveness": row[1][1], "last_seen": row[2][1]} for row in answer["data"]}


async def roster_of(reactor: Any, paths: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    """L{query_roster}'s answer for the nodes LuxiD counts unreachable, from the file LuxiD keeps of them
    (L{ganeti.heartbeat.store.UNREACHABLE_FILE}: no LUXI round trip on a job's path); without that file,
    L{query_roster}.  The other nodes' entries are empty (nothing to note)."""
    from ganeti.heartbeat.store import read_unreachable

    known = read_unreachable(paths.run_dir)
    if known is None:
        return await query_roster(reactor, paths.luxi_socket, names)
    return {name: {"liveness": "unreachable", "last_seen": known[name]} if name in known else {} for name in names}


def unreachable_note(node: str, entry: dict[str, Any], procedure: str, timeout: Any, now: float) -> str | None:
    """The job log line for a call to C{node}, or None when it is not unreachable."""
    if entry.get("liveness") != "unreachable":
        return None
    last = entry.get("last_seen")
    since = "no heartbeat for %.0f s" % max(0.0, now - float(last)) if last else "no heartbeat since the master started"
    wait = " up to %g s" % timeout if isinstance(timeout, (int, float)) else ""
    return "Node %s is unreachable (%s); %s waits%s for its answer" % (node, since, procedure, wait)


class NotingRpc:
    """A node RPC client that notes calls to unreachable nodes in the job log.

    @param roster: C{await roster(names)} -> C{{name: {"liveness", "last_seen"}}}
    @param feedback: the job log (C{OpContext.feedback})
    """

    def __init__(self, rpc: Any, roster: Callable[[list[str]], Awaitable[dict[str, dict[str, Any]]]],
                 feedback: Callable[[str], Any], clock: Any = None) -> None:
        self._rpc = rpc
        self._clock = clock
        self._roster = roster
        self._feedback = feedback
        self._noted: set[str] = set()
        #: name -> (when asked, the roster's entry)
        self._asked: dict[str, tuple[float, dict[str, Any]]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rpc, name)

    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> Any:
        return await self._noting(nodes, procedure, kwargs.get("timeout"),
                                  lambda: self._rpc.call(nodes, procedure, args, **kwargs))

    async def call_one(self, name: str, address: Any, procedure: str, args: Any = (), **kwargs: Any) -> Any:
        return (await self.call([(name, address)], procedure, args, **kwargs))[name]

    async def run(self, nodes: Any, call: Call[Any], **kwargs: Any) -> Any:
        """L{ganeti.rpc.RpcClient.run}, noting unreachable nodes."""
        return await self._noting(nodes, call.procedure, call.timeout, lambda: self._rpc.run(nodes, call, **kwargs))

    async def run_one(self, name: str, address: Any, call: Call[Any]) -> Any:
        return (await self.run({name: address}, call))[name]

    async def _noting(self, nodes: Any, procedure: str, timeout: Any, send: Callable[[], Awaitable[Any]]) -> Any:
        from twisted.internet.defer import ensureDeferred

        names = list(nodes) if isinstance(nodes, dict) else [name for name, _address in nodes]
        note = ensureDeferred(self._note(names, procedure, timeout))
        note.addErrback(lambda _f: None)  # no roster (LuxiD busy or gone): no note
        try:
            return await send()
        finally:
            if not note.called:  # a quick failure: the note still goes before what follows
                if self._clock is not None:
                    note.addTimeout(NOTE_WAIT, self._clock).addErrback(lambda _f: None)
                await note

    async def _note(self, names: list[str], procedure: str, timeout: Any) -> None:
        wanted = [n for n in names if n not in self._noted]
        if not wanted:
            return
        asked_at = self._clock.seconds() if self._clock is not None else time.monotonic()
        fresh = {n: self._asked[n][1] for n in wanted if n in self._asked and asked_at - self._asked[n][0] < ROSTER_TTL}
        if len(fresh) == len(wanted):
            roster = fresh
        else:
            trace.step("rpc.roster_asked")
            roster = await self._roster(wanted)
            trace.step("rpc.roster_got")
        for name in wanted:
            if name not in fresh:
                self._asked[name] = (asked_at, roster.get(name, {}))
        now = time.time()
        for name in wanted:
            line = unreachable_note(name, roster.get(name, {}), procedure, timeout, now)
            if line is not None:
                self._noted.add(name)
                await self._feedback(line)


__all__ = ["CV_ENODEHEARTBEAT", "NotingRpc", "liveness_problems", "query_roster", "roster_of", "unreachable_note",
           "verify_liveness"]
