"""Start-up voting of the master daemons (WConfD, LuxiD), as Ganeti's.

Before it serves, a master daemon asks every online node of the config which
master it believes in (RPC C{master_node_name}): a strict majority naming
this node starts it; when the nodes that did not answer could still make one,
it asks again every L{RETRY_INTERVAL} seconds, L{RETRIES} times; otherwise
("Voting cannot be won") it stops.  C{--no-voting --yes-do-it} skips the
vote (two-node clusters).  There is nothing to vote on, and no vote, for a
one-node cluster, a root without cluster certificate, or a node whose own
ssconf names no master yet (a cluster being set up: WConfD writes it).

L{VotingGate} holds the daemon's serving services and starts them only once
the vote is won.
"""

from __future__ import annotations

import os
from typing import Any, Callable, cast

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.logger import Logger

from ganeti import ports, serializer
from ganeti.ha.failover import FAIL, START, named_by_majority, startup_vote
from ganeti.paths import Paths
from ganeti.rpc import procedures

RETRIES = 6
RETRY_INTERVAL = 10.0
#: Seconds a node gets to answer.
VOTE_TIMEOUT = 5.0


def voters(paths: Paths) -> tuple[str, dict[str, str]] | None:
    """C{(this node's name, {online node: address})}, or C{None}: no vote needed."""
    from ganeti import daemons, ssconf
    from ganeti.objects import ConfigData

    if not os.path.exists(paths.server_pem):
        return None
    try:
        ssconf.SimpleStore(paths).get_master_node()
    except Exception:  # no ssconf yet: a cluster being set up
        return None
    me: str
    try:
        config = ConfigData.from_json(serializer.read_file(paths.config_data))
    except FileNotFoundError:  # no config here (yet): the nodes ssconf names, as Ganeti's voting asks
        store = ssconf.SimpleStore(paths)
        ips = store.get_node_primary_ips()
        try:
            me = daemons.read_node_identity(paths)["name"]
        except SystemExit:
            me = store.get_master_node()
        nodes = {name: ips.get(name, name) for name in store.get_online_nodes()}
    else:
        master = config.nodes.get(config.cluster.master_node or "")
        try:
            me = daemons.read_node_identity(paths)["name"]
        except SystemExit:
            me = (master.name or "") if master is not None else ""
        nodes = {node.name: node.primary_ip or node.name for node in config.nodes.values()
                 if node.name and not node.offline}
    if set(nodes) <= {me}:
        return None
    return me, nodes


class VotingGate(MultiService):
    """Starts its child services once the start-up vote is won.

    @param stop: called when the vote is lost (the daemon exits)
    @param rpc_factory: makes the node RPC client (default: this node's, on C{port})
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, daemon: str, stop: Callable[[], None], *, port: int = ports.NODED,
                 no_voting: bool = False, retries: int = RETRIES, interval: float = RETRY_INTERVAL,
                 rpc_factory: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self.paths = paths
        self.reactor = reactor
        self.daemon = daemon
        self.port = port
        self.no_voting = no_voting
        self.retries = retries
        self.interval = interval
        self._stop = stop
        self._rpc_factory = rpc_factory
        self.opened = False
        self._found: Any = False  # not looked at yet
        self.voting: Deferred[None] | None = None
        self._closing = False

    def _voters(self) -> tuple[str, dict[str, str]] | None:
        if self._found is False:
            self._found = None if self.no_voting else voters(self.paths)
        return cast("tuple[str, dict[str, str]] | None", self._found)

    def privilegedStartService(self) -> None:
        """Without a vote to hold, the children listen now (a busy address
        ends the start at once); with one, only once it is won."""
        if self._voters() is None:
            super().privilegedStartService()

    def startService(self) -> None:
        Service.startService(self)
        if self.no_voting:
            self.log.warn("{daemon}: starting without voting (--no-voting --yes-do-it)", daemon=self.daemon)
        found = self._voters()
        if found is None:
            self._open()
            return
        self.voting = Deferred.fromCoroutine(self._vote(*found))
        self.voting.addErrback(self._crashed)

    def stopService(self) -> Any:
        if self.voting is not None and not self.voting.called and not self._closing:
            self.voting.cancel()
        if self.opened:
            return super().stopService()
        return Service.stopService(self)

    def _open(self) -> None:
        if self.running and not self.opened:
            self.opened = True
            for service in self:
                service.startService()

    def _crashed(self, failure: Any) -> None:
        from twisted.internet.defer import CancelledError

        if failure.check(CancelledError):
            return
        self.log.failure("{daemon}: the start-up vote failed", failure, daemon=self.daemon)
        self._stop()

    async def _vote(self, me: str, nodes: dict[str, str]) -> None:
        rpc = self._make_rpc()
        try:
            won = await self._ask(rpc, me, nodes)
        finally:
            # not cancelled from here on (stopService): a cancelled close leaves one
            # "Unhandled error in Deferred" per node in the log, after the reason
            self._closing = True
            if hasattr(rpc, "close"):
                try:
                    await rpc.close()
                except Exception as e:  # the daemon may be stopping: its idle connections go with it
                    self.log.debug("{daemon}: closing the vote's connections: {e}", daemon=self.daemon, e=e)
        # the outcome only once the connections are closed: stopping the reactor
        # meanwhile cancelled the close, and the log ended in tracebacks
        if won:
            self._open()
        else:
            self._stop()

    async def _ask(self, rpc: Any, me: str, nodes: dict[str, str]) -> bool:
        """Ask until the vote is won (C{True}) or lost (C{False}), saying why."""
        for attempt in range(self.retries + 1):
            # won once a strict majority names this node: a node that is down or cut off does not hold
            # the start up (after a failover the old master's votes are not needed)
            answers = await rpc.run(nodes, procedures.master_node_name.call().within(VOTE_TIMEOUT),
                                    enough=named_by_majority(me, len(nodes)))
            votes = {name: r.payload if r.success and isinstance(r.payload, str) else None
                     for name, r in answers.items()}
            outcome = startup_vote(votes, me)
            if outcome == START:
                self.log.info("{daemon}: {n} of {total} nodes name {me} master: starting", daemon=self.daemon,
                              n=sum(1 for v in votes.values() if v == me), total=len(votes), me=me)
                return True
            if outcome == FAIL:
                # critical: the reason the daemon ends (what ganeti-daemon-util start prints)
                self.log.critical("{daemon}: Voting cannot be won ({votes}): not starting; use --no-voting"
                               " --yes-do-it only if you are sure", daemon=self.daemon, votes=votes)
                return False
            if attempt < self.retries:
                self.log.warn("{daemon}: not enough nodes answer to win the vote ({votes}); asking again in"
                              " {interval}s", daemon=self.daemon, votes=votes, interval=self.interval)
                await deferLater(self.reactor, self.interval, lambda: None)
        self.log.critical("{daemon}: the vote could not be won after {n} attempts: not starting",
                       daemon=self.daemon, n=self.retries + 1)
        return False

    def _make_rpc(self) -> Any:
        if self._rpc_factory is not None:
            return self._rpc_factory()
        from ganeti.rpc import RpcClient

        return RpcClient.from_paths(self.reactor, self.paths, port=self.port)


def add_options(optFlags: list[list[str | None]]) -> list[list[str | None]]:
    """The voting flags of a master daemon's Options."""
    return optFlags + [
        ["no-voting", None, "Start without asking the other nodes (two-node clusters; needs --yes-do-it)."],
        ["yes-do-it", None, "Confirm --no-voting."],
    ]


def check_options(options: Any) -> None:
    """--no-voting needs --yes-do-it (Ganeti's rule)."""
    from twisted.python import usage

    if options["no-voting"] and not options["yes-do-it"]:
        raise usage.UsageError("--no-voting is dangerous (two masters); confirm it with --yes-do-it")
