"""One distribution of config.data at a time, coalesced, and who waits for it.

WConfD hands each durable config.data to its distributor (this node's
ssconf files, then the push to the other nodes).  A distribution runs to
its end before the next starts; the configs handed in meanwhile collapse
into the newest.  C{wait(serial)} fires once a distribution of that serial
or a newer one has ended, whether every node took it or not (a node that
missed it is retried by the distributor and reported by C{gnt-cluster
verify}): C{gnt-cluster verify} waits so before it compares the nodes'
ssconf files with the configuration it read, or a change made just before
would show as a difference.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger


class Distribution:
    log = Logger()

    def __init__(self, distributor: Callable[[], Callable[[bytes, int], Any]]) -> None:
        self._distributor = distributor  # looked up per run: the daemon's set-up replaces it after start
        self._running = False
        self._next: tuple[bytes, int] | None = None
        self.ended = 0  # the newest serial whose distribution ended
        self._waiters: list[tuple[int, Deferred]] = []

    def __call__(self, data: bytes, serial: int) -> None:
        if self._running:
            self._next = (data, serial)
            return
        self._running = True
        d = maybeDeferred(self._distributor(), data, serial)
        d.addErrback(lambda f: self.log.failure("distributing config serial {serial} failed", f, serial=serial))

        def next_one(_: Any) -> None:
            self._running = False
            self.ended = max(self.ended, serial)
            ready = [w for s, w in self._waiters if s <= self.ended]
            self._waiters = [(s, w) for s, w in self._waiters if s > self.ended]
            for waiter in ready:
                waiter.callback(self.ended)
            pending, self._next = self._next, None
            if pending is not None:
                self(*pending)

        d.addCallback(next_one)

    def wait(self, serial: int) -> Deferred:
        """Fires with a serial C{>= serial} once its distribution ended."""
        if self.ended >= serial:
            return succeed(self.ended)
        waiter: Deferred = Deferred()
        self._waiters.append((serial, waiter))
        return waiter
