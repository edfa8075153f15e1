"""NodeD's part of the automatic failover (the decisions are L{ganeti.ha.election}'s).

Two procedures every node answers:

 - C{election_status(candidate)}: this node's name, whether and for how
   long it has lost the master (its heartbeat connection,
   L{ganeti.heartbeat.client}; as it counts for a vote for C{candidate}),
   the master it knows, whether it is a master candidate, its master epoch,
   config serial and job queue serial;
 - C{election_vote(epoch, candidate, config_serial, queue_serial)}: this
   node's vote; given once per epoch, recorded durably (the epoch record of
   L{ganeti.ha.epoch.EpochGuard}, fsynced) before the answer, and only with
   C{auto_failover} on, the master lost for the failover timeout here too,
   and the candidate at least as up to date as this node.

L{ElectionService} runs on every node: on a master candidate that has lost
the master for the timeout (or is about to: L{ganeti.ha.election.lead}), with
C{auto_failover} on, it asks every node for its status, and, when
L{ganeti.ha.election.decide} says so, for its vote (the moment a majority has
lost the master for the timeout: L{ganeti.ha.election.majority_lost_in});
a candidate elected by a strict majority of all nodes runs the failover of
C{gnt-cluster master-failover} in this process
(L{ganeti.ha.takeover.elected_failover}, reporting to this node's log)
under the epoch it won.
Nothing of this acts with C{auto_failover} off (the default).
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable, TypeVar, cast

import attrs
from twisted.internet import task, threads
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ganeti import errors, serializer, ssconf
from ganeti.asyncutil import Ticker
from ganeti.ha import params as ha_params
from ganeti.ha import takeover
from ganeti.ha.election import PROCEED, NodeView, aged, decide, elected, lead, lost_for, majority_lost_in, refusal
from ganeti.ha.epoch import EpochGuard, StaleEpoch, read_config_epoch
from ganeti.ha.failover import answered
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.rpc import procedures as declared

#: seconds a node gets to answer C{election_status} and C{election_vote}, and the
#: take-over's quick calls (a frozen or cut off node counts as no answer); a round
#: waits this long only without a majority: once a majority (this node included)
#: has answered, the others get L{STATUS_GRACE} or the RPC client's short grace.
#: This node's own NodeD, slow under load, must not count as silent.
CALL_TIMEOUT = 5.0
#: seconds the nodes still silent get once a majority (this node included) answered
#: C{election_status}: the other candidates answer within it, a lost master does not hold the round
#: (a candidate cut off by it is no risk: each voter refuses a candidate less up to date than itself)
STATUS_GRACE = 0.2
#: seconds the nodes still silent get in each quick round of the take-over once it has what it needs
#: (the RPC client's default is 0.3 s): the lost master, frozen or cut off, is one of them every time
TAKEOVER_GRACE = 0.1
#: seconds between two checks of the master's heartbeat connection
CHECK_INTERVAL = 0.25
#: seconds a candidate waits beyond the moment a majority has lost the master for the timeout
#: (by the clocks of the status answers: a voter's own clock is a little ahead of them)
VOTE_MARGIN = 0.01

log = Logger()
_T = TypeVar("_T")


def _own_name(paths: Paths) -> str:
    from ganeti import daemons

    try:
        return daemons.read_node_identity(paths)["name"]
    except SystemExit:
        return ""


def _config_serial(paths: Paths) -> int:
    try:
        value = serializer.loads(serializer.read_file(paths.config_data)).get("serial_no")
    except (OSError, ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _queue_serial(paths: Paths) -> int:
    try:
        return max(0, int(serializer.read_file(os.path.join(paths.queue_dir, "serial")).strip() or 0))
    except (OSError, ValueError):
        return 0


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 255 and not any(c.isspace() for c in value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class ElectionProcedures:
    """The election procedures of one node root.

    @param epoch: the node's epoch record (the same one as the other procedures')
    @param lost_since: when this node's heartbeat lost the master (reactor
        seconds; C{None}: connected); C{None} itself: no heartbeat runs here,
        so this node never counts the master as lost
    """

    def __init__(self, paths: Paths, reactor: Any, epoch: EpochGuard,
                 lost_since: Callable[[], float | None] | None = None) -> None:
        self.paths = paths
        self._reactor = reactor
        self._epoch = epoch
        self._lost_since = lost_since
        #: when this node last gave a vote (reactor seconds), and to whom
        self.voted_at: float | None = None
        self.voted_for: str | None = None
        self._name = ""
        #: writes config deltas this node journalled into config.data (set by NodeProcedures)
        self.flush_config: Callable[[], None] = lambda: None

    def _config_serial(self) -> int:
        """This node's config serial, deltas it acknowledged included."""
        self.flush_config()
        return _config_serial(self.paths)

    def lost_for(self, candidate: str | None = None) -> float | None:
        """Seconds this node counts the master as lost (L{ganeti.ha.election.lost_for});
        for the C{candidate} this node last voted for, its vote does not count."""
        if self._lost_since is None:
            return None
        voted_at = None if candidate is not None and candidate == self.voted_for else self.voted_at
        return lost_for(self._reactor.seconds(), self._lost_since(), voted_at)

    def name(self) -> str:
        """This node's name (its identity file; read until there is one)."""
        if not self._name:
            self._name = _own_name(self.paths)
        return self._name

    def view(self, candidate: str | None = None) -> NodeView:
        """This node's L{NodeView} (reads ssconf and files: call it in a thread);
        C{candidate}: as seen when it asks for a vote (L{lost_for})."""
        store = ssconf.SimpleStore(self.paths)
        name = self.name()
        try:
            master: str | None = store.get_master_node() or None
            is_candidate = name in store.get_master_candidates()
        except errors.ConfigurationError:
            master, is_candidate = None, False
        return NodeView(name, self.lost_for(candidate), master, is_candidate, self._epoch.highest,
                        self._config_serial(), _queue_serial(self.paths), read_config_epoch(self.paths))

    def _in_thread(self, function: Callable[..., _T], *args: Any) -> Deferred[_T]:
        return threads.deferToThreadPool(self._reactor, self._reactor.getThreadPool(), function, *args)

    @handler(declared.election_status)
    def election_status(self, candidate: Any) -> Deferred[dict[str, Any]]:
        """This node's L{NodeView} as a dict, as seen by C{candidate} (the asker)."""
        if not _is_name(candidate):
            raise RpcFailure("candidate must be a node name")
        return self._in_thread(lambda: self.view(candidate).to_payload())

    @handler(declared.election_vote)
    def election_vote(self, epoch: Any, candidate: Any, config_serial: Any, queue_serial: Any,
                      config_epoch: Any = 0) -> Deferred[int]:
        """Vote for C{candidate} as master for C{epoch}, or refuse (the reason)."""
        if not _is_count(epoch) or epoch == 0:
            raise RpcFailure("epoch must be a positive integer")
        if not _is_name(candidate):
            raise RpcFailure("candidate must be a node name")
        if not (_is_count(config_serial) and _is_count(queue_serial) and _is_count(config_epoch)):
            raise RpcFailure("config_serial, queue_serial and config_epoch must be non-negative integers")

        def vote() -> int:
            params = ha_params.read(self.paths)
            if not params.auto_failover:
                raise RpcFailure("automatic failover is off on this node")
            mine = self.view(candidate)
            if candidate == mine.master:
                raise RpcFailure("%s is the master this node lost" % candidate)
            why = refusal(mine, candidate, config_serial, queue_serial, params.failover_timeout,
                          config_epoch=config_epoch)
            if why is not None:
                raise RpcFailure("vote refused: %s" % why)
            try:
                self._epoch.claim(epoch, candidate)  # durable before the answer; once per epoch
            except StaleEpoch as e:
                holder = self._epoch.holder
                raise RpcFailure("vote refused: %s%s" % (e, "" if holder is None else " (voted for %s)" % holder)
                                 ) from e
            return cast("int", epoch)

        def voted(result: int) -> int:
            self.voted_at, self.voted_for = self._reactor.seconds(), candidate
            log.info("election: voted for {candidate} as master for epoch {epoch}", candidate=candidate,
                     epoch=epoch)
            return result

        d: Deferred[int] = self._in_thread(vote)
        d.addCallback(voted)
        return d


class Logged:
    """The take-over's L{ganeti.ha.takeover.Progress}, logged line by line:
    steps at level info, warnings and failures at level warn."""

    def step(self, text: str) -> None:
        self._log("info", text)

    def warn(self, text: str) -> None:
        self._log("warn", text)

    def fail(self, text: str) -> None:
        self._log("warn", text)

    @staticmethod
    def _log(level: str, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                getattr(log, level)("election: {line}", line=line)


class ElectionService(Ticker):
    """The candidate's side (see the module docstring).

    @param port: the noded port of the cluster
    @ivar procedures: this NodeD's L{ElectionProcedures} (set once the node
        has joined a cluster; nothing happens before)
    """

    def __init__(self, paths: Paths, reactor: Any, port: int, *, interval: float = CHECK_INTERVAL,
                 rand: Callable[[], float] = random.random) -> None:
        self.paths = paths
        super().__init__(reactor, interval)
        self._params = ha_params.Watch(paths)  # one stat per check, the file read when replaced
        self.port = port
        self.procedures: ElectionProcedures | None = None
        self._rand = rand
        self._busy = False
        self._not_before = 0.0
        self._last_reason = ""
        #: the outcome of each round (tests): C{(decision action, elected, failover exit code or None)}
        self.rounds: list[tuple[str, bool, int | None]] = []

    def check(self) -> None:
        """One tick: start a round when this node lost the master for the timeout, or will within L{lead}."""
        procedures = self.procedures
        if self._busy or procedures is None or self.reactor.seconds() < self._not_before:
            return
        lost = procedures.lost_for(procedures.name())  # its vote for itself does not hold it back
        if lost is None:
            return
        params = self._params.current()
        if not params.auto_failover or lost < params.failover_timeout - lead(params.failover_timeout):
            return
        self._busy = True
        d = Deferred.fromCoroutine(self.round(procedures, params.failover_timeout))
        d.addErrback(lambda failure: log.failure("election: the round failed", failure))
        d.addBoth(self._done)

    def _done(self, _: Any) -> None:
        self._busy = False

    def _wait(self, timeout: float) -> None:
        """Check again in half the timeout or so (jittered: candidates do not meet again)."""
        self._not_before = self.reactor.seconds() + timeout * (0.5 + 0.5 * self._rand())

    def _note(self, reason: str) -> None:
        if reason != self._last_reason:
            log.info("election: {reason}", reason=reason)
            self._last_reason = reason

    async def round(self, procedures: ElectionProcedures, timeout: float) -> None:
        """Ask every node; vote if this node is the one to proceed; fail over if elected."""
        from ganeti.rpc import RpcClient

        try:
            store = ssconf.SimpleStore(self.paths)
            ips = store.get_node_primary_ips()
            addresses = {name: ips[name] for name in store.get_node_list() if name in ips}
            master, candidates = store.get_master_node(), store.get_master_candidates()
        except errors.ConfigurationError as e:
            self._note("no cluster configuration here: %s" % e)
            self._wait(timeout)
            return
        me = _own_name(self.paths)
        if me == master or me not in candidates:
            self._note("this node is the master or not a master candidate: it does not stand")
            self._wait(timeout)
            return
        rpc = RpcClient.from_paths(self.reactor, self.paths, port=self.port, epoch=None)
        try:
            # a silent node (the old master, frozen or cut off) holds the round up a moment only
            answers = await rpc.run(addresses, declared.election_status.call(me).within(CALL_TIMEOUT),
                                    enough=answered(len(addresses), [me]), grace=STATUS_GRACE)
            views: dict[str, NodeView] = {}
            for name, result in answers.items():
                if result.success:
                    try:
                        views[name] = NodeView.from_payload(result.payload)
                    except ValueError as e:
                        log.warn("election: {node} answered wrongly: {why}", node=name, why=str(e))
            due = await self._until_majority_lost(me, views, len(addresses), timeout)
            if due is None:
                return
            views = due
            decision = decide(me, views, len(addresses), timeout)
            if decision.action != PROCEED:
                self._note("waiting: %s" % decision.reason)
                self.rounds.append((decision.action, False, None))
                if not decision.soon:
                    self._wait(timeout)
                return
            mine = views[me]
            log.info("election: {reason}; asking for votes for master epoch {epoch}", reason=decision.reason,
                     epoch=decision.epoch)
            # elected once a strict majority granted it: the votes still out change nothing then (a late one
            # is recorded by its voter all the same), so the take-over starts at once
            votes = await rpc.run(addresses, declared.election_vote.call(
                decision.epoch, me, mine.config_serial, mine.queue_serial, mine.config_epoch).within(CALL_TIMEOUT),
                enough=answered(len(addresses)), grace=0.0)
        finally:
            await rpc.close()
        granted = sorted(name for name, result in votes.items() if result.success)
        if not elected(len(granted), len(addresses)):
            refused = "; ".join("%s: %s" % (name, result.fail_msg) for name, result in sorted(votes.items())
                                if not result.success)
            self._note("not elected for epoch %d: %d of %d votes (%s)" % (decision.epoch, len(granted),
                                                                        len(addresses), refused))
            self.rounds.append((decision.action, False, None))
            self._wait(timeout)
            return
        log.info("election: elected master for epoch {epoch} by {voters}; taking over", epoch=decision.epoch,
                 voters=", ".join(granted))
        code = await self._take_over(decision.epoch, timeout)
        self.rounds.append((decision.action, True, code))
        self._last_reason = ""
        if code != 0:
            log.error("election: the failover for epoch {epoch} failed (exit code {code})", epoch=decision.epoch,
                      code=code)
            self._wait(timeout)

    async def _until_majority_lost(self, me: str, views: dict[str, NodeView], total: int,
                                   timeout: float) -> dict[str, NodeView] | None:
        """The views to decide on: when this node and a majority of nodes
        will have lost the master for the timeout within L{lead} seconds and
        a tick, the views at that moment (after waiting for it); else the
        views now, or C{None} (look again at the next tick) while this node
        has not lost the master for the timeout itself."""
        received = self.reactor.seconds()
        wait = majority_lost_in(me, views, total, timeout)
        if wait is not None and 0 < wait <= lead(timeout) + self.interval:
            await task.deferLater(self.reactor, wait + VOTE_MARGIN, lambda: None)
            return aged(views, self.reactor.seconds() - received)
        mine = views.get(me)
        if mine is not None and not mine.lost(timeout):
            return None
        return views

    async def _take_over(self, epoch: int, timeout: float) -> int:
        """The failover under the epoch won; its exit code (0: this node is the master)."""
        try:
            view = attrs.evolve(takeover.view_of(self.paths, self.port, quick_timeout=CALL_TIMEOUT),
                                grace=TAKEOVER_GRACE)
        except (errors.ConfigurationError, SystemExit) as e:
            log.error("election: cannot read this node's view of the cluster: {why}", why=str(e))
            return 1
        done = await takeover.elected_failover(self.reactor, Logged(), view, epoch)
        return 0 if done else 1


__all__ = ["CALL_TIMEOUT", "ElectionProcedures", "ElectionService", "Logged"]
