"""Async client of WConfD, for job processes, LuxiD and tools.

    client = await WConfdClient.connect(reactor, paths.wconfd_socket, reconnect_for=300)
    await client.acquire(owner, [("cluster/BGL", "shared")], timeout=30)
    inst = await client.read_instance("web1")
    await client.update_instance(owner, attrs.evolve(inst, os="debian"), release=["instance/web1"])

Lock grants for queued requests are pushed by WConfD over this connection;
L{WConfdClient.acquire} simply waits for that push.

A client made with C{reconnect_for} rides out a restart of WConfD: when the
connection breaks it reconnects with jittered backoff (L{FIRST_DELAY}
doubling up to L{MAX_DELAY}) for up to C{reconnect_for} seconds, registers
its owners again, sends the lock requests it was waiting for again (same
priority; the caller's timeout keeps running), and sends again every call
that had no answer.  Mutating calls carry a request id (a counter of the
client), so WConfD answers a retry of a call it applied already with the
recorded answer instead of applying it twice; the other calls are reads or
naturally idempotent.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from typing import Any, Callable, Iterable, Sequence, cast

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred, succeed
from twisted.internet.defer import TimeoutError as DeferredTimeout
from twisted.internet.endpoints import UNIXClientEndpoint, connectProtocol
from twisted.internet.error import ConnectionClosed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import connectionDone
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.protocols import amp
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.locking import Owner
from ganeti.objects import Cluster, ConfigData, ConfigObject, Instance, Network, Node, NodeGroup
from ganeti.reactors import ITimeUNIXReactor
from ganeti.wconfd import commands as c

Request = Sequence[tuple[str, str]] | Sequence[list[str]]

#: first pause before reconnecting (seconds); it doubles at each failure...
FIRST_DELAY = 0.05
#: ... up to this
MAX_DELAY = 1.0
#: how long a job process keeps trying to reach WConfD (seconds)
JOB_RECONNECT_FOR = 300.0

#: request ids, shared by every client of this process: two clients acting
#: for one owner never reuse an id, and a later process (a reused ad-hoc
#: owner) starts above what an earlier one used, unless it made more than
#: a billion calls a second
_RIDS = itertools.count(time.time_ns())


def backoff(attempt: int, draw: float, first: float = FIRST_DELAY, most: float = MAX_DELAY) -> float:
    """The pause before reconnection attempt C{attempt} (0-based).

    @param draw: a random number in [0, 1): the pause is between half and
        all of C{first * 2**attempt} (capped at C{most}), so that clients
        cut off together do not all come back at the same instant.
    """
    full: float = min(most, first * (2 ** min(attempt, 30)))
    return full * (0.5 + 0.5 * draw)


class _ClientProtocol(amp.AMP):
    """Receives L{c.LocksGranted} pushes."""

    def __init__(self) -> None:
        super().__init__()
        self.granted: dict[Owner, list[Deferred]] = {}
        self.lost: Deferred = Deferred()
        #: set by a reconnecting client: it keeps the waiters for the next connection
        self.on_lost: Callable[[_ClientProtocol], None] | None = None

    @c.LocksGranted.responder
    def locks_granted(self, owner: Owner) -> dict[str, Any]:
        for waiter in self.granted.pop(owner, []):
            waiter.callback(None)
        return {}

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self.on_lost is not None:
            self.on_lost(self)  # before the calls fail: they find the client reconnecting
        super().connectionLost(reason)
        if self.on_lost is None:
            for waiters in self.granted.values():
                for waiter in waiters:
                    waiter.errback(errors.LockError("connection to WConfD lost while waiting for locks"))
            self.granted.clear()
        if not self.lost.called:
            self.lost.callback(None)


def _unless(cached: tuple[int, ConfigData]) -> dict[str, Any]:
    """The arguments of a config read by a reader holding C{cached} (serial, copy): what changed since it."""
    arguments: dict[str, Any] = {"unless_serial": cached[0], "deltas": True}
    if cached[1].mtime is not None:
        arguments["unless_mtime"] = float(cached[1].mtime)  # (a config.data may hold a whole number)
    return arguments


def config_of_answer(answer: dict[str, Any], base: ConfigData | None) -> ConfigData:
    """The config a L{c.ReadConfig} (or L{c.RegisterOwner}) answer gives to a
    read sent holding C{base}: its whole config, or C{base} (empty bytes: it
    is current) brought forward by its C{changes} -- C{base}, not a copy
    cached meanwhile by the answer to another read.

    @raise ValueError: nothing to bring forward, or changes that do not
        bring C{base} to the answer's serial (never from WConfD)
    """
    if answer.get("config"):
        return ConfigData.from_json(answer["config"])
    if base is None:
        raise ValueError("an answer without a config to a read that held none")
    changes = answer.get("changes")
    config = base.with_changes(changes) if changes else base
    if config.serial_no != answer["serial_no"]:
        raise ValueError("the changes bring serial %s, not %s" % (config.serial_no, answer["serial_no"]))
    return config


class WConfdClient:
    """An AMP connection to WConfD with a method per WConfD function.

    @param protocol: the connection (C{None} until a reconnecting client
        first connects).
    @param connector: makes a new connection (fires with a
        L{_ClientProtocol}); with it and C{reconnect_for > 0} the client
        reconnects when the connection breaks.
    @param reconnect_for: seconds to keep trying after a connection broke
        (C{math.inf}: for ever; 0: do not reconnect).
    @param draw: random numbers in [0, 1) for the backoff jitter.
    """

    log = Logger()

    def __init__(
        self,
        protocol: _ClientProtocol | None,
        clock: IReactorTime | None = None,
        *,
        connector: Callable[[], Deferred] | None = None,
        reconnect_for: float = 0.0,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.clock = clock
        self.reconnect_for = reconnect_for if connector is not None else 0.0
        self._connector = connector
        self._draw = draw
        self._granted: dict[Owner, list[Deferred]] = {}
        #: owners whose requests wait for a push: (request, priority), re-sent after a reconnect
        self._armed: dict[Owner, tuple[list[list[str]], int]] = {}
        self._owners: set[Owner] = set()
        self._closed = False
        self._ready = False
        self._reconnecting = False
        self._reconnect_waiters: list[Deferred] = []
        #: called (no arguments) after every successful reconnection
        self.reconnected: list[Callable[[], Any]] = []
        #: called (no arguments) before every attempt to reconnect; it may raise
        #: (or end the process) to stop the client from reaching a WConfD again
        self.before_reconnect: Callable[[], Any] | None = None
        #: connections made by the reconnecting machinery (the first one included)
        self.connections = 0
        #: whether L{read_config} keeps the config it read and reuses it while
        #: WConfD's serial is the same (the job process: the same frozen
        #: config for its LUs' several reads); callers must not change it
        self.cache_config = False
        self._config: tuple[int, ConfigData] | None = None
        #: the cached config was confirmed current by the last owner registration (L{register_owner})
        self._confirmed = False
        self.protocol: _ClientProtocol | None = None
        if protocol is not None:
            self._adopt(protocol)

    @classmethod
    async def connect(
        cls, reactor: ITimeUNIXReactor, path: str, timeout: float = 10, reconnect_for: float = 0.0,
        cache_config: bool = False,
    ) -> WConfdClient:
        """Connect to WConfD at C{path}.

        @param reconnect_for: with a positive value, the first connection
            is tried for that long too, and the client reconnects when the
            connection breaks (see the module's docstring).
        @param cache_config: the client's L{cache_config}.
        @raise errors.ConfigurationError: WConfD cannot be reached.
        """
        endpoint = UNIXClientEndpoint(reactor, path, timeout=timeout)

        def connector() -> Deferred:
            return cast("Deferred[Any]", connectProtocol(endpoint, _ClientProtocol()))

        if reconnect_for > 0:
            client = cls(None, reactor, connector=connector, reconnect_for=reconnect_for)
            client.cache_config = cache_config
            try:
                await client._connected()
            except errors.GenericError as e:
                raise errors.ConfigurationError("cannot connect to WConfD at %s: %s" % (path, e)) from e
            return client
        try:
            protocol = await connector()
        except Exception as e:
            raise errors.ConfigurationError("cannot connect to WConfD at %s: %s" % (path, e)) from e
        client = cls(protocol, reactor)
        client.cache_config = cache_config
        return client

    @property
    def gone(self) -> bool:
        """Whether this client will not reach WConfD again: closed, or its
        connection lost and not being made again."""
        return self._closed or (self.protocol is None and not self._reconnecting)

    def _adopt(self, protocol: _ClientProtocol) -> None:
        protocol.granted = self._granted
        if self.reconnect_for > 0:
            protocol.on_lost = self._lost
        self.protocol = protocol
        self._ready = True

    def close(self) -> Deferred:
        self._closed = True
        protocol = self.protocol
        if protocol is None or protocol.lost.called:
            self._fail_waits(errors.LockError("connection to WConfD closed while waiting for locks"))
            return succeed(None)
        transport = protocol.transport
        assert transport is not None  # connected: the connection is not lost yet
        transport.loseConnection()
        return protocol.lost

    async def call(self, command: type[amp.Command], **kwargs: Any) -> dict[str, Any]:
        """Call C{command}; a call cut off by a broken connection is sent again once reconnected."""
        return await self._call(command, lambda: kwargs)

    async def _call(self, command: type[amp.Command], make_kwargs: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        while True:
            protocol = await self._connected()
            kwargs = make_kwargs()
            owner = kwargs.get("owner")
            if owner is not None and owner not in self._owners:
                self._owners.add(owner)
            try:
                return cast("dict[str, Any]", await protocol.callRemote(command, **kwargs))
            except ConnectionClosed:
                if self.reconnect_for <= 0 or self._closed:
                    raise
                self._lost(protocol)

    def _next_rid(self) -> int:
        return next(_RIDS)

    def _now(self) -> float:
        return self._clock().seconds()

    def _clock(self) -> IReactorTime:
        if self.clock is None:
            from twisted.internet import reactor

            return reactor
        return self.clock

    # --- reconnecting ---------------------------------------------------------
    async def _connected(self) -> _ClientProtocol:
        protocol = self.protocol
        if self._ready and protocol is not None and not protocol.lost.called:
            return protocol
        if self.reconnect_for <= 0 or self._closed:
            if protocol is None:
                raise errors.ConfigurationError("not connected to WConfD")
            return protocol  # the call fails with the reason the connection ended
        waiter: Deferred = Deferred()
        self._reconnect_waiters.append(waiter)
        self._start_reconnect()
        return cast("_ClientProtocol", await waiter)

    def _lost(self, protocol: _ClientProtocol) -> None:
        if protocol is not self.protocol:
            return
        self.protocol = None
        self._ready = False
        if self._closed:
            self._fail_waits(errors.LockError("connection to WConfD closed while waiting for locks"))
            return
        self.log.warn("lost the connection to WConfD; reconnecting")
        self._start_reconnect()

    def _start_reconnect(self) -> None:
        if self._reconnecting:
            return
        self._reconnecting = True
        d = ensureDeferred(self._reconnect())
        d.addErrback(lambda f: self.log.failure("reconnecting to WConfD failed", f))

    async def _reconnect(self) -> None:
        started = self._now()
        attempt = 0
        last: Any = None
        try:
            while not self._closed:
                if self.before_reconnect is not None:
                    self.before_reconnect()
                try:
                    protocol = await self._connector()  # type: ignore[misc]
                except Exception as e:
                    last = e
                else:
                    try:
                        await self._restore(protocol)
                    except ConnectionClosed as e:
                        last = e
                    else:
                        self.connections += 1
                        if self.connections > 1:
                            self.log.info(
                                "reconnected to WConfD ({owners} owners, {waits} lock waits re-armed)",
                                owners=len(self._owners),
                                waits=len(self._armed),
                            )
                        self._reconnecting = False
                        waiters, self._reconnect_waiters = self._reconnect_waiters, []
                        for waiter in waiters:
                            waiter.callback(protocol)
                        for hook in list(self.reconnected):
                            try:
                                hook()
                            except Exception:
                                self.log.failure("a reconnection hook failed")
                        return
                elapsed = self._now() - started
                if elapsed >= self.reconnect_for:
                    break
                pause = min(backoff(attempt, self._draw()), self.reconnect_for - elapsed)
                attempt += 1
                await deferLater(self._clock(), pause, lambda: None)
        except BaseException as e:  # noqa: B036 - every waiter must hear of it
            last = e
        self._reconnecting = False
        if self._closed:
            error: errors.GenericError = errors.ConfigurationError("the connection to WConfD was closed")
        else:
            error = errors.ConfigurationError(
                "WConfD unreachable for %s seconds (%s)" % (_fmt(self.reconnect_for), last or "closed")
            )
            self.log.error("giving up on WConfD: {error}", error=error)
        waiters, self._reconnect_waiters = self._reconnect_waiters, []
        for waiter in waiters:
            waiter.errback(error)
        self._fail_waits(errors.LockError("connection to WConfD lost while waiting for locks: %s" % error))

    async def _restore(self, protocol: _ClientProtocol) -> None:
        """Register the owners on the new connection and re-arm the lock waits."""
        self._adopt(protocol)
        self._ready = False  # calls wait until the owners are back
        self._confirmed = False  # (the config may have changed while the connection was down)
        for owner in sorted(self._owners, key=lambda o: o.sort_key):
            try:
                await protocol.callRemote(c.RegisterOwner, owner=owner)
            except ConnectionClosed:
                raise
            except Exception as e:
                self.log.warn("WConfD refused owner {owner} again: {e}", owner=owner.to_wire(), e=e)
        for owner, (request, priority) in list(self._armed.items()):
            try:
                answer = await protocol.callRemote(c.UpdateLocksWaiting, owner=owner, priority=priority, request=request)
            except ConnectionClosed:
                raise
            except Exception as e:
                self._armed.pop(owner, None)
                for waiter in self._granted.pop(owner, []):
                    waiter.errback(e)
                continue
            if not answer["blockers"]:  # granted while we were away
                self._armed.pop(owner, None)
                for waiter in self._granted.pop(owner, []):
                    waiter.callback(None)
        if protocol.lost.called:
            raise ConnectionClosed("lost again while restoring")
        self._ready = True

    def _fail_waits(self, error: Exception) -> None:
        granted = dict(self._granted)
        self._granted.clear()
        self._armed.clear()
        for waiters in granted.values():
            for waiter in waiters:
                if not waiter.called:
                    waiter.errback(error)

    # --- general / reads -----------------------------------------------------
    async def echo(self, text: str) -> str:
        return cast("str", (await self.call(c.Echo, text=text))["text"])

    async def read_config_bytes(self) -> tuple[bytes, int]:
        answer = await self.call(c.ReadConfig)
        return answer["config"], answer["serial_no"]

    async def read_config(self) -> ConfigData:
        """The config; with L{cache_config} the copy read last when WConfD's
        serial is still the same (WConfD then sends nothing, and nothing is parsed)."""
        if not self.cache_config:
            data, _serial = await self.read_config_bytes()
            return ConfigData.from_json(data)
        if self._confirmed and self._config is not None:  # as of the registration just made
            self._confirmed = False
            return self._config[1]
        cached = self._config
        if cached is not None:
            taken = self._take_config(await self.call(c.ReadConfig, **_unless(cached)), cached)
            if taken is not None:
                return taken
        taken = self._take_config(await self.call(c.ReadConfig), None)
        assert taken is not None  # (a whole config always is)
        return taken

    def adopt_config(self, serial: int, config: ConfigData) -> None:
        """Take C{config} (of serial C{serial}, as WConfD sent it) as the cached
        copy (L{cache_config}): the next read gets only what changed since."""
        self._config = (serial, config)

    def _take_config(self, answer: dict[str, Any], base: tuple[int, ConfigData] | None) -> ConfigData | None:
        """The config of an answer to a read sent holding C{base} (serial,
        copy), kept (L{config_of_answer}); C{None} (the cached copy dropped)
        when it gives none (never from WConfD): read the whole config."""
        try:
            config = config_of_answer(answer, base[1] if base is not None else None)
        except ValueError as e:
            self.log.warn("WConfD's config answer does not apply to the copy held: {e}", e=e)
            self._config = None
            return None
        self._config = (answer["serial_no"], config)
        return config

    async def read_serial(self) -> int:
        return cast("int", (await self.call(c.ReadSerial))["serial_no"])

    async def read_write_latency(self) -> Any:
        """WConfD's config write latency histogram (see L{c.ReadWriteLatency})."""
        return (await self.call(c.ReadWriteLatency))["latency"]

    async def read_cluster(self) -> Cluster:
        return Cluster.from_dict((await self.call(c.ReadCluster))["cluster"])

    async def read_entity(self, kind: str, key: str) -> dict[str, Any]:
        return cast("dict[str, Any]", (await self.call(c.ReadEntity, kind=kind, key=key))["entity"])

    async def read_node(self, key: str) -> Node:
        return Node.from_dict(await self.read_entity("node", key))

    async def read_instance(self, key: str) -> Instance:
        return Instance.from_dict(await self.read_entity("instance", key))

    async def read_group(self, key: str) -> NodeGroup:
        return NodeGroup.from_dict(await self.read_entity("nodegroup", key))

    async def read_network(self, key: str) -> Network:
        return Network.from_dict(await self.read_entity("network", key))

    async def verify_config(self) -> list[str]:
        return cast("list[str]", (await self.call(c.VerifyConfig))["problems"])

    async def flush_config(self, distributed: bool = False) -> int:
        """The serial config.data holds once it holds every change so far
        (with C{distributed}: once its distribution to the nodes ended too)."""
        args = {"distributed": True} if distributed else {}
        return cast("int", (await self.call(c.FlushConfig, **args))["serial_no"])

    async def read_ha_params(self) -> dict[str, Any]:
        """The cluster's HA parameters (L{ganeti.ha.params} record)."""
        return cast("dict[str, Any]", (await self.call(c.ReadHaParams))["params"])

    async def set_ha_params(self, changes: dict[str, Any]) -> dict[str, Any]:
        """Change HA parameters; the new record (L{errors.OpPrereqError} for a bad value)."""
        return cast("dict[str, Any]", (await self.call(c.SetHaParams, changes=changes))["params"])

    # --- config writes -------------------------------------------------------
    async def change_filter(self, uuid: str, rule: dict[str, Any] | None) -> int:
        """Store job filter rule C{uuid} (C{None}: remove it); the new config serial."""
        return cast("int", (await self.call(c.ChangeFilter, uuid=uuid, rule=rule))["serial_no"])

    async def lock_config(self, owner: Owner, shared: bool = False, timeout: float | None = None) -> ConfigData:
        deadline = self._deadline(timeout)
        answer = await self._call(
            c.LockConfig, lambda: dict(owner=owner, shared=shared, timeout=self._remaining(deadline))
        )
        return ConfigData.from_json(answer["config"])

    async def unlock_config(self, owner: Owner) -> None:
        await self.call(c.UnlockConfig, owner=owner)

    async def write_config(self, owner: Owner, config: ConfigData, release: Iterable[str] = ()) -> int:
        answer = await self.call(
            c.WriteConfig, owner=owner, config=config.to_json(), release=list(release) or None, rid=self._next_rid()
        )
        return cast("int", answer["serial_no"])

    async def write_config_and_unlock(self, owner: Owner, config: ConfigData, release: Iterable[str] = ()) -> int:
        answer = await self.call(
            c.WriteConfigAndUnlock,
            owner=owner,
            config=config.to_json(),
            release=list(release) or None,
            rid=self._next_rid(),
        )
        return cast("int", answer["serial_no"])

    async def update(
        self,
        owner: Owner,
        kind: str,
        obj: ConfigObject,
        release: Iterable[str] = (),
        disks: Iterable[ConfigObject] = (),
        remove_disks: Iterable[str] = (),
    ) -> Any:
        """Store C{obj}; returns it with its new serial and mtime.

        @param disks: for an instance, new disk records it lists (added with
            it, in the same change).
        @param remove_disks: for an instance, uuids of disks it no longer
            lists that leave the config with the change.
        @raise c.MacInUse: a NIC's MAC address belongs to another instance.
        """
        kwargs: dict[str, Any] = {}
        disk_list = [d.to_dict() for d in disks]
        if disk_list:
            kwargs["disks"] = disk_list
        removed = list(remove_disks)
        if removed:
            kwargs["remove_disks"] = removed
        answer = await self.call(
            c.UpdateEntity,
            owner=owner,
            kind=kind,
            entity=obj.to_json(),
            release=list(release) or None,
            rid=self._next_rid(),
            **kwargs,
        )
        return _stamped(obj, answer["serial_no"], answer["mtime"])

    async def update_instance(self, owner: Owner, inst: Instance, release: Iterable[str] = ()) -> Instance:
        return cast("Instance", await self.update(owner, "instance", inst, release))

    async def update_node(self, owner: Owner, node: Node, release: Iterable[str] = ()) -> Node:
        return cast("Node", await self.update(owner, "node", node, release))

    async def update_group(self, owner: Owner, group: NodeGroup, release: Iterable[str] = ()) -> NodeGroup:
        return cast("NodeGroup", await self.update(owner, "nodegroup", group, release))

    async def update_cluster(self, owner: Owner, cluster: Cluster, release: Iterable[str] = ()) -> Cluster:
        return cast("Cluster", await self.update(owner, "cluster", cluster, release))

    async def add(
        self, owner: Owner, kind: str, obj: ConfigObject, disks: Iterable[ConfigObject] = (), release: Iterable[str] = ()
    ) -> str:
        """Add an entity; returns its uuid."""
        disk_list = [d.to_dict() for d in disks]
        answer = await self.call(
            c.AddEntity,
            owner=owner,
            kind=kind,
            entity=obj.to_json(),
            disks=disk_list or None,
            release=list(release) or None,
            rid=self._next_rid(),
        )
        return cast("str", answer["uuid"])

    async def remove(self, owner: Owner, kind: str, key: str, release: Iterable[str] = ()) -> int:
        answer = await self.call(
            c.RemoveEntity, owner=owner, kind=kind, key=key, release=list(release) or None, rid=self._next_rid()
        )
        return cast("int", answer["config_serial"])

    # --- locks ---------------------------------------------------------------
    async def try_update_locks(self, owner: Owner, request: Request) -> list[Owner]:
        answer = await self.call(c.TryUpdateLocks, owner=owner, request=_req(request))
        return [Owner.from_wire(b) for b in answer["blockers"]]

    async def update_locks_waiting(self, owner: Owner, priority: int, request: Request) -> list[Owner]:
        armed = self._armed.get(owner)
        if armed is not None and armed[0] == _req(request):
            self._armed[owner] = (armed[0], priority)  # a reconnect re-sends it at this priority
        answer = await self.call(c.UpdateLocksWaiting, owner=owner, priority=priority, request=_req(request))
        return [Owner.from_wire(b) for b in answer["blockers"]]

    async def acquire(self, owner: Owner, request: Request, priority: int = 0, timeout: float | None = None) -> None:
        """Get C{request} granted, waiting for WConfD's push if it must queue.

        On timeout the queued request is withdrawn and L{errors.LockError}
        raised (unless the grant won the race, which then counts).  When the
        connection breaks meanwhile, the request is sent again once the
        client has reconnected; the timeout keeps running.
        """
        waiter: Deferred = Deferred()
        self._granted.setdefault(owner, []).append(waiter)
        try:
            blockers = await self.update_locks_waiting(owner, priority, request)
        except BaseException:
            self._forget(owner, waiter)
            raise
        if not blockers:
            self._forget(owner, waiter)
            return
        if not waiter.called:
            self._armed[owner] = (_req(request), priority)
        if timeout is not None:
            waiter.addTimeout(timeout, self._clock())
        try:
            await waiter
        except (CancelledError, DeferredTimeout):  # addTimeout raises the latter
            self._forget(owner, waiter)
            if await self.cancel_pending_request(owner):
                raise errors.LockError(
                    "timed out after %ss waiting for %s" % (timeout, ", ".join(r[0] for r in request))
                ) from None
        finally:
            if not self._granted.get(owner):
                self._armed.pop(owner, None)

    def _forget(self, owner: Owner, waiter: Deferred) -> None:
        waiters = self._granted.get(owner, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self._granted.pop(owner, None)
            self._armed.pop(owner, None)

    async def has_pending_request(self, owner: Owner) -> bool:
        return cast("bool", (await self.call(c.HasPendingRequest, owner=owner))["pending"])

    async def cancel_pending_request(self, owner: Owner) -> bool:
        answer = await self.call(c.CancelPendingRequest, owner=owner, rid=self._next_rid())
        return cast("bool", answer["cancelled"])

    async def register_owner(self, owner: Owner, with_config: bool = False) -> None:
        """Bind C{owner} to this connection (it is registered again after a reconnect).  With
        C{with_config} and L{cache_config} the answer also brings the config, or says the copy held is
        current: the next L{read_config} takes it as of then (a job process registers while its start
        is confirmed, and reads the config for its first opcode soon after).  Without a copy held it
        registers only."""
        cached = self._config
        if not (with_config and self.cache_config and cached is not None):  # (nothing held: read it apart)
            await self.call(c.RegisterOwner, owner=owner)
            return
        taken = self._take_config(await self.call(c.RegisterOwner, owner=owner, **_unless(cached)), cached)
        self._confirmed = taken is not None

    async def free_locks(self, owner: Owner) -> None:
        await self.call(c.FreeLocks, owner=owner)

    async def free_locks_level(self, owner: Owner, level: str) -> None:
        await self.call(c.FreeLocksLevel, owner=owner, level=level)

    async def downgrade_locks_level(self, owner: Owner, level: str) -> None:
        await self.call(c.DowngradeLocksLevel, owner=owner, level=level)

    async def intersect_locks(self, owner: Owner, names: Iterable[str]) -> None:
        await self.call(c.IntersectLocks, owner=owner, locks=list(names))

    async def opportunistic_lock_union(
        self, owner: Owner, request: Request, count: int = 1, timeout: float | None = None
    ) -> list[str]:
        return await self._opportunistic(c.OpportunisticLockUnion, owner, request, count, timeout)

    async def guarded_opportunistic_lock_union(
        self, owner: Owner, count: int, request: Request, timeout: float | None = None
    ) -> list[str]:
        return await self._opportunistic(c.GuardedOpportunisticLockUnion, owner, request, count, timeout)

    async def _opportunistic(
        self, command: type[amp.Command], owner: Owner, request: Request, count: int, timeout: float | None
    ) -> list[str]:
        rid, deadline, wire = self._next_rid(), self._deadline(timeout), _req(request)
        answer = await self._call(
            command,
            lambda: dict(owner=owner, request=wire, count=count, timeout=self._remaining(deadline), rid=rid),
        )
        return cast("list[str]", answer["acquired"])

    def _deadline(self, timeout: float | None) -> float | None:
        return None if timeout is None else self._now() + float(timeout)

    def _remaining(self, deadline: float | None) -> float | None:
        """What is left of a timeout for a (re)sent call; 0 means "do not wait"."""
        if deadline is None:
            return None
        return max(0.0, deadline - self._now())

    async def add_locks(self, owner: Owner, names: Iterable[str]) -> list[Owner]:
        answer = await self.call(c.AddLocks, owner=owner, locks=list(names), rid=self._next_rid())
        return [Owner.from_wire(b) for b in answer["blockers"]]

    async def list_locks(self, owner: Owner) -> list[tuple[str, str]]:
        return [tuple(x) for x in (await self.call(c.ListLocks, owner=owner))["locks"]]

    async def list_all_locks(self) -> list[str]:
        return cast("list[str]", (await self.call(c.ListAllLocks))["locks"])

    async def list_all_locks_owners(self) -> list[Any]:
        return cast("list[Any]", (await self.call(c.ListAllLocksOwners))["locks"])

    async def list_locks_waiting_status(self) -> list[Any]:
        return cast("list[Any]", (await self.call(c.ListLocksWaitingStatus))["status"])

    async def cleanup_locks(self) -> list[Owner]:
        return [Owner.from_wire(o) for o in (await self.call(c.CleanupLocks))["dead"]]


def _fmt(seconds: float) -> str:
    return "unlimited" if math.isinf(seconds) else "%g" % seconds


def _req(request: Request) -> list[list[str]]:
    return [[str(name), str(mode)] for name, mode in request]


def _stamped(obj: ConfigObject, serial: int, mtime: float) -> Any:
    import attrs

    return attrs.evolve(obj, serial_no=serial, mtime=mtime)  # type: ignore[misc]
