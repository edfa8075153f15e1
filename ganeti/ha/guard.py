"""A master daemon that was paused serves nothing until a majority confirms it.

    guard = MasterGuard(paths, reactor, "ganeti-luxid", port=rpc_port)
    guard.setServiceParent(gate)                  # ticks a few times a second
    waiting = guard.ready(errors.JobQueueError)   # at every operation: None, or a Deferred
    LuxiServerFactory(GuardedHandler(handler, guard))

With automatic failover on (L{ganeti.ha.params}), LuxiD and WConfD read a
monotonic clock that keeps running while they are stopped (C{SIGSTOP}), the
machine is suspended or their event loop is blocked, at every operation and
at every tick (L{ganeti.ha.liveness.StallGuard}).  When it jumped by more
than L{ganeti.ha.liveness.stall_threshold} since the last reading, the other
nodes may have elected another master meanwhile: before it accepts or starts
a job, writes config or answers a request, the daemon asks every node
(NodeD's C{election_status}) and goes on only once a strict majority names
it master at its epoch and could not vote for another yet
(L{ganeti.ha.liveness.confirms}).  Until then requests wait for the
confirmation under way and are refused if it fails; it is asked again every
L{RETRY_INTERVAL} seconds.  A master that is never confirmed again steps
down as before (L{ganeti.ha.stepdown}) or is fenced by its epoch
(L{ganeti.ha.epoch}).
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any, Callable, Mapping

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from ganeti.asyncutil import Ticker
from ganeti.ha import epoch as ha_epoch
from ganeti.ha import params as ha_params
from ganeti.ha.election import NodeView
from ganeti.ha.liveness import StallGuard, confirms, stall_threshold
from ganeti.paths import Paths

#: seconds between two readings of the clock when nothing else happens
TICK = 0.25
#: seconds a node gets to answer the confirmation
CALL_TIMEOUT = 2.0
#: seconds between two confirmations asked while unconfirmed
RETRY_INTERVAL = 0.5


def monotonic() -> float:
    """Seconds of a clock that runs while this process is stopped and the machine suspended."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        try:
            return time.clock_gettime(boottime)
        except OSError:
            pass
    return time.monotonic()


class MasterGuard(Ticker):
    """See the module docstring.

    @param ask: C{await ask()} -> C{(ok, why)}: whether a majority confirms
        this master now (default: NodeD's C{election_status} on every node)
    @ivar on_confirmed: called after every confirmation (LuxiD schedules jobs again)
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, daemon: str, *, port: int,
                 clock: Callable[[], float] = monotonic, ask: Callable[[], Any] | None = None,
                 interval: float = TICK) -> None:
        super().__init__(reactor, interval)
        self.paths = paths
        self.daemon = daemon
        self.port = port
        self._clock = clock
        self._ask = ask if ask is not None else self._ask_nodes
        self._params = ha_params.Watch(paths)
        self.stall = StallGuard(clock())
        self.on_confirmed: list[Callable[[], Any]] = []
        self._asking: Deferred[bool] | None = None
        self._not_before = 0.0
        #: confirmations asked (tests, logs)
        self.asked = 0

    def startService(self) -> None:
        self.stall = StallGuard(self._clock())  # the start-up vote was no stall
        super().startService()

    # --- the clock ---------------------------------------------------------------------------
    def check(self) -> None:
        """A tick: read the clock; while unconfirmed, ask again now and then."""
        self.blocked()

    def _observe(self) -> str | None:
        params = self._params.current()
        now = self._clock()
        if self.stall.observe(now, stall_threshold(params.failover_timeout)) and params.auto_failover:
            self.log.warn("{daemon}: {why}", daemon=self.daemon, why=self.stall.suspect)
        if self.stall.suspect is not None and not params.auto_failover:
            self.stall.confirmed()  # nobody elects another master: nothing to confirm
        return self.stall.suspect

    def blocked(self) -> str | None:
        """Why this master must not act now (C{None}: it may); asks for a
        confirmation if none is under way."""
        why = self._observe()
        if why is not None and self._asking is None and self._clock() >= self._not_before:
            self._confirm()
        return why

    def ready(self, error: type[Exception]) -> Deferred[None] | None:
        """C{None}: act now; else a Deferred firing once this master is
        confirmed, or failing with C{error} when the confirmation fails."""
        if self.blocked() is None:
            return None
        asking = self._asking if self._asking is not None else self._confirm()
        waiting: Deferred[None] = Deferred()

        def outcome(ok: bool) -> bool:
            if ok:
                waiting.callback(None)
            else:
                waiting.errback(error("%s: not confirmed as master by a majority of nodes (%s)"
                                      % (self.daemon, self.stall.suspect)))
            return ok

        asking.addCallback(outcome)
        return waiting

    def _confirm(self) -> Deferred[bool]:
        self.asked += 1
        asking: Deferred[bool] = ensureDeferred(self._run())
        if not asking.called:
            self._asking = asking
        return asking

    async def _run(self) -> bool:
        try:
            ok, why = await self._ask()
        except Exception as e:  # no answer is no confirmation
            ok, why = False, "asking the nodes failed: %s" % (e,)
        self._asking = None
        if ok and self.stall.suspect is not None:
            self.stall.confirmed()
            self.log.info("{daemon}: confirmed as master again: {why}", daemon=self.daemon, why=why)
            for hook in list(self.on_confirmed):
                try:
                    hook()
                except Exception:
                    self.log.failure("{daemon}: a confirmation hook failed", daemon=self.daemon)
        elif not ok:
            self._not_before = self._clock() + RETRY_INTERVAL
            self.log.warn("{daemon}: not confirmed as master: {why}", daemon=self.daemon, why=why)
        return ok

    async def _ask_nodes(self) -> tuple[bool, str]:
        from ganeti.ha.voting import voters
        from ganeti.rpc import RpcClient
        from ganeti.rpc import procedures as declared

        found = voters(self.paths)
        if found is None:
            return True, "a single node"
        me, nodes = found
        params = self._params.current()
        mine = ha_epoch.process_epoch()
        if mine is None:
            mine = ha_epoch.read_epoch(self.paths)
        def views_of(answers: Mapping[str, Any], warn: bool = False) -> list[NodeView]:
            views = []
            for name, result in answers.items():
                if result.success:
                    try:
                        views.append(NodeView.from_payload(result.payload))
                    except ValueError:
                        if warn:
                            self.log.warn("{daemon}: {node} answered wrongly", daemon=self.daemon, node=name)
            return views

        def confirmed(answers: Mapping[str, Any]) -> bool:
            return confirms(me, mine, views_of(answers), len(nodes), params.auto_failover, params.failover_timeout)[0]

        rpc = RpcClient.from_paths(self.reactor, self.paths, port=self.port, epoch=None)
        try:
            # confirmed by the nodes that answered first: a silent node does not hold the master up
            answers = await rpc.run(nodes, declared.election_status.call(me).within(CALL_TIMEOUT), enough=confirmed)
        finally:
            await rpc.close()
        return confirms(me, mine, views_of(answers, True), len(nodes), params.auto_failover, params.failover_timeout)


class GuardedHandler:
    """A LUXI method handler that answers nothing while its master is unconfirmed."""

    def __init__(self, inner: Any, guard: MasterGuard, error: type[Exception]) -> None:
        self.inner = inner
        self.guard = guard
        self.error = error

    def handle(self, method: str, args: list[Any]) -> Any:
        waiting = self.guard.ready(self.error)
        if waiting is None:
            return self.inner.handle(method, args)
        return ensureDeferred(self._later(waiting, method, args))

    async def _later(self, waiting: Deferred[None], method: str, args: list[Any]) -> Any:
        await waiting
        result = self.inner.handle(method, args)
        if isinstance(result, (Deferred, Coroutine)):
            return await result
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


__all__ = ["CALL_TIMEOUT", "GuardedHandler", "MasterGuard", "RETRY_INTERVAL", "TICK", "monotonic"]
