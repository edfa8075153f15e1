"""LuxiD connections of RAPI: a small pool for calls, one connection per wait.

A connection that breaks is dropped and the next call connects again, so
RAPI recovers by itself when LuxiD comes back.  Given the node's C{paths},
the pool talks to the master wherever it is (L{ganeti.luxi.locate}: this
node's socket, or the master's LuxiD over TLS) and rides through a master
failover as the CLI does (L{ganeti.luxi.master}): for up to C{window}
seconds it tries again what is safe to send again (queries, waits, and
submissions, to which it gives submission ids).  A connection that cannot
be made or breaks in the middle of a call, after that, raises
L{LuxidUnreachable} (answered with 502).

The pool carries calls by wire name and positional arguments; RAPI's
handlers build them from the LUXI declarations (L{ganeti.luxi.methods})
through L{ganeti.rapi.baserlib.Context.run}, so mypy checks them.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, Callable, Coroutine

import orjson
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.luxi.client import AsyncLuxiClient


class LuxidUnreachable(Exception):
    """LuxiD cannot be reached, or the connection broke during the call.

    @ivar sent: whether the request was sent (the connection broke after)"""

    def __init__(self, message: str, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class LuxiPool:
    """Up to C{size} pipelined connections; each call goes to the least busy one.

    LuxiD answers the requests of one connection one at a time, so long
    calls (C{WaitForJobChange}) get a connection of their own.
    """

    log = Logger()

    def __init__(self, reactor: Any, path: str, size: int = 4, connect_timeout: float = 5.0, *,
                 paths: Any = None, window: float | Callable[[], float] = 0.0) -> None:
        """
        @param paths: this node's paths: find the master wherever it is (else: C{path} only)
        @param window: seconds to wait for a new master (0: fail at once), or
            what tells them at each call (the cluster's candidates may change)
        """
        self.reactor = reactor
        self.path = path
        self.size = size
        self.connect_timeout = connect_timeout
        self.paths = paths
        self.window = window
        self._ask_confd = False
        self._clients: list[AsyncLuxiClient] = []
        self._busy: dict[int, int] = {}
        self._running: dict[Any, Deferred[Any]] = {}
        self._next: dict[Any, list[Deferred[Any]]] = {}
        #: the parts of bulk lists kept per config serial (L{ganeti.rapi.bulk})
        self.bulk_cache: dict[Any, Any] = {}

    async def _connect(self) -> AsyncLuxiClient:
        try:
            if self.paths is not None:
                return await AsyncLuxiClient.connect_master(self.reactor, self.paths, self._ask_confd,
                                                            timeout=self.connect_timeout)
            return await AsyncLuxiClient.connect(self.reactor, self.path, timeout=self.connect_timeout)
        except errors.LuxiError as e:
            raise LuxidUnreachable(str(e)) from None

    async def _retrying(self, once: Callable[..., Coroutine[Any, Any, Any]], method: str,
                        args: tuple[Any, ...]) -> Any:
        """C{once(method, *args)}, tried again across a failover (see the module docstring)."""
        if not self.window:  # (a callable is asked on the first failure only: no file read per call)
            return await once(method, *args)
        from twisted.internet.task import deferLater

        from ganeti.luxi.master import FIRST_DELAY, MAX_DELAY, MAX_LOST, retry_safe, with_submission_ids

        args = with_submission_ids(method, args, lambda: uuid.uuid4().hex)
        safe = retry_safe(method, args)
        started: float | None = None
        window: float | None = None
        delay, attempts, lost = FIRST_DELAY, 0, 0
        try:
            while True:
                self._ask_confd = attempts > 1
                try:
                    return await once(method, *args)
                except LuxidUnreachable as e:
                    if window is None:
                        window = self.window() if callable(self.window) else self.window
                    if not window:
                        raise
                    if e.sent and not safe:
                        raise LuxidUnreachable("outcome unknown: %s" % e, sent=True) from None
                    now = self.reactor.seconds()
                    lost += e.sent
                    if started is None or (e.sent and lost <= MAX_LOST):
                        started = now  # a master was there: the wait for the next one starts now
                    elif now - started >= window:
                        raise
                attempts += 1
                await deferLater(self.reactor, delay * (0.5 + random.random() / 2), lambda: None)
                delay = min(delay * 2, MAX_DELAY)
        finally:
            self._ask_confd = False

    @staticmethod
    def _alive(client: AsyncLuxiClient) -> bool:
        return client.connected

    async def _client(self) -> AsyncLuxiClient:
        self._clients = [c for c in self._clients if self._alive(c)]
        if len(self._clients) < self.size:
            if not self._clients or all(self._busy.get(id(c), 0) for c in self._clients):
                client = await self._connect()
                self._clients.append(client)
                return client
        return min(self._clients, key=lambda c: self._busy.get(id(c), 0))

    async def call(self, method: str, *args: Any) -> Any:
        return await self._retrying(self._call_once, method, args)

    async def _call_once(self, method: str, *args: Any) -> Any:
        client = await self._client()
        key = id(client)
        self._busy[key] = self._busy.get(key, 0) + 1
        try:
            return await client.call(method, *args)
        except errors.LuxiError as e:
            if not self._alive(client):
                if client in self._clients:
                    self._clients.remove(client)
                raise LuxidUnreachable(str(e), sent=True) from None
            raise
        finally:
            left = self._busy.get(key, 1) - 1
            if left:
                self._busy[key] = left
            else:
                self._busy.pop(key, None)

    async def read(self, method: str, *args: Any) -> Any:
        """A read-only call shared by identical concurrent requests (see L{shared})."""
        return await self.shared(orjson.dumps([method, args]), lambda: self.call(method, *args))

    async def shared(self, key: Any, compute: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """C{await compute()}, shared by the concurrent requests with the same C{key}.

        A request never gets an answer computed before it arrived: while a
        computation for C{key} is running, new requests wait for it to end
        and then share one fresh computation.  C{key} must determine the
        answer entirely, and callers must not modify the result.
        """
        if key not in self._running:
            return await self._start_shared(key, compute)
        waiter: Deferred[Any] = Deferred()
        self._next.setdefault(key, []).append(waiter)
        return await waiter

    async def _start_shared(self, key: Any, compute: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        d: Deferred[Any] = ensureDeferred(compute())
        self._running[key] = d
        try:
            return await d
        finally:
            del self._running[key]
            waiters = self._next.pop(key, None)
            if waiters:
                nxt = ensureDeferred(self._start_shared(key, compute))

                def fan_out(result: Any) -> None:
                    for w in waiters:
                        if w.called:  # cancelled: its client went away
                            continue
                        if isinstance(result, Failure):
                            w.errback(result)
                        else:
                            w.callback(result)

                nxt.addBoth(fan_out)

    async def call_alone(self, method: str, *args: Any) -> Any:
        """C{method} on a connection of its own (for calls that wait)."""
        return await self._retrying(self._call_alone_once, method, args)

    async def _call_alone_once(self, method: str, *args: Any) -> Any:
        client = await self._connect()
        try:
            return await client.call(method, *args)
        except errors.LuxiError as e:
            if not self._alive(client):
                raise LuxidUnreachable(str(e), sent=True) from None
            raise
        finally:
            if self._alive(client):
                client.close()

    def close(self) -> None:
        for client in self._clients:
            if self._alive(client):
                client.close()
        self._clients = []
