"""A master that cannot reach a majority steps down (automatic failover).

With the cluster parameter C{auto_failover} on (L{ganeti.ha.params}), LuxiD
counts the nodes it reaches: those whose heartbeat connection is up in its
roster, those not heard of yet since it started (they have the roster's
grace to connect), and itself.  When that is no strict majority of the
cluster's nodes for C{failover_timeout} seconds running
(L{ganeti.ha.election.StepDownClock}), this master is likely cut off in a
minority while the majority elects another: LuxiD refuses new jobs from
then on, logs why, stops this node's WConfD (no config write any more) and
stops itself.  RAPI keeps running: it serves nothing by itself.

With C{auto_failover} off nothing steps down.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import threads
from twisted.logger import Logger

from ganeti.asyncutil import Ticker
from ganeti.ha import params as ha_params
from ganeti.ha.election import StepDownClock
from ganeti.heartbeat import roster as rost
from ganeti.paths import Paths

#: seconds between two counts
CHECK_INTERVAL = 0.5
#: seconds WConfD gets to stop
WCONFD_STOP_TIMEOUT = 30.0


def reachable_count(snapshot: dict[str, dict[str, Any]], me: str) -> int:
    """How many nodes this master reaches: itself, and every node up or not
    heard of yet (pure)."""
    others = sum(1 for name, entry in snapshot.items()
                 if name != me and entry.get("liveness") in (rost.UP, rost.UNKNOWN))
    return others + 1


def _stop_wconfd(paths: Paths) -> None:
    from ganeti import daemons

    daemons.stop(paths, ["ganeti-wconfd"], timeout=WCONFD_STOP_TIMEOUT, out=lambda _line: None)


class StepDown(Ticker):
    """The step-down watch of one LuxiD (see the module docstring).

    @param liveness: the heartbeat roster service (L{ganeti.heartbeat.server.LivenessService})
    @param me: this node's name
    @param refuse: called with the reason once this master steps down (LuxiD refuses jobs)
    @param stop: stops LuxiD (after WConfD is stopped)
    @param stop_wconfd: stops this node's WConfD (blocking; run in a thread)
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, liveness: Any, me: str, refuse: Callable[[str], None],
                 stop: Callable[[], None], *, stop_wconfd: Callable[[Paths], None] = _stop_wconfd,
                 interval: float = CHECK_INTERVAL) -> None:
        self.paths = paths
        super().__init__(reactor, interval)
        self._params = ha_params.Watch(paths)  # one stat per check, the file read when replaced
        self.liveness = liveness
        self.me = me
        self._refuse = refuse
        self._stop = stop
        self._stop_wconfd = stop_wconfd
        self.clock = StepDownClock()
        #: why this master stepped down (C{None}: it has not)
        self.reason: str | None = None

    def check(self) -> None:
        if self.reason is not None:
            return
        params = self._params.current()
        total = len(self.liveness.members)
        if not params.auto_failover or total == 0:
            self.clock.since = None
            return
        now = self.reactor.seconds()
        reachable = reachable_count(self.liveness.snapshot(), self.me)
        if not self.clock.update(now, reachable, total, params.failover_timeout):
            return
        self.reason = ("this master reached only %d of %d nodes (itself included) for %.1f s, no majority:"
                       " it steps down (automatic failover is on: the majority elects another master)"
                       % (reachable, total, self.clock.without_majority_for(now)))
        self.log.critical("ganeti-luxid: {reason}", reason=self.reason)
        self._refuse(self.reason)
        d = threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._stop_wconfd, self.paths)
        d.addErrback(lambda failure: self.log.failure("ganeti-luxid: stopping WConfD failed", failure))
        d.addBoth(lambda _: self._stop())


__all__ = ["StepDown", "reachable_count"]
