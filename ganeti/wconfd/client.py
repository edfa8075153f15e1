"""Async client of WConfD, for job processes, LuxiD and tools.

    client = await WConfdClient.connect(reactor, paths.wconfd_socket)
    await client.acquire(owner, [("cluster/BGL", "shared")], timeout=30)
    inst = await client.read_instance("web1")
    await client.update_instance(owner, attrs.evolve(inst, os="debian"), release=["instance/web1"])

Lock grants for queued requests are pushed by WConfD over this connection;
L{WConfdClient.acquire} simply waits for that push.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.defer import TimeoutError as DeferredTimeout
from twisted.internet.endpoints import UNIXClientEndpoint, connectProtocol
from twisted.protocols import amp

from ganeti import errors
from ganeti.locking import Owner
from ganeti.objects import Cluster, ConfigData, ConfigObject, Instance, Network, Node, NodeGroup
from ganeti.wconfd import commands as c

Request = Sequence[tuple[str, str]] | Sequence[list[str]]


class _ClientProtocol(amp.AMP):
    """Receives L{c.LocksGranted} pushes."""

    def __init__(self) -> None:
        super().__init__()
        self.granted: dict[Owner, list[Deferred]] = {}
        self.lost: Deferred = Deferred()

    @c.LocksGranted.responder
    def locks_granted(self, owner: Owner) -> dict[str, Any]:
        for waiter in self.granted.pop(owner, []):
            waiter.callback(None)
        return {}

    def connectionLost(self, reason: Any) -> None:
        super().connectionLost(reason)
        for waiters in self.granted.values():
            for waiter in waiters:
                waiter.errback(errors.LockError("connection to WConfD lost while waiting for locks"))
        self.granted.clear()
        if not self.lost.called:
            self.lost.callback(None)


class WConfdClient:
    """One AMP connection to WConfD with a method per WConfD function."""

    def __init__(self, protocol: _ClientProtocol, clock: Any = None) -> None:
        self.protocol = protocol
        self.clock = clock

    @classmethod
    async def connect(cls, reactor: Any, path: str, timeout: float = 10) -> "WConfdClient":
        endpoint = UNIXClientEndpoint(reactor, path, timeout=timeout)
        try:
            protocol = await connectProtocol(endpoint, _ClientProtocol())
        except Exception as e:
            raise errors.ConfigurationError("cannot connect to WConfD at %s: %s" % (path, e)) from e
        return cls(protocol, reactor)

    def close(self) -> Deferred:
        self.protocol.transport.loseConnection()
        return self.protocol.lost

    async def call(self, command: type[amp.Command], **kwargs: Any) -> dict[str, Any]:
        return await self.protocol.callRemote(command, **kwargs)  # type: ignore[no-any-return]

    # --- general / reads -----------------------------------------------------
    async def echo(self, text: str) -> str:
        return (await self.call(c.Echo, text=text))["text"]  # type: ignore[no-any-return]

    async def read_config_bytes(self) -> tuple[bytes, int]:
        answer = await self.call(c.ReadConfig)
        return answer["config"], answer["serial_no"]

    async def read_config(self) -> ConfigData:
        data, _serial = await self.read_config_bytes()
        return ConfigData.from_json(data)

    async def read_serial(self) -> int:
        return (await self.call(c.ReadSerial))["serial_no"]  # type: ignore[no-any-return]

    async def read_write_latency(self) -> Any:
        """WConfD's config write latency histogram (see L{c.ReadWriteLatency})."""
        return (await self.call(c.ReadWriteLatency))["latency"]

    async def read_cluster(self) -> Cluster:
        return Cluster.from_dict((await self.call(c.ReadCluster))["cluster"])

    async def read_entity(self, kind: str, key: str) -> dict[str, Any]:
        return (await self.call(c.ReadEntity, kind=kind, key=key))["entity"]  # type: ignore[no-any-return]

    async def read_node(self, key: str) -> Node:
        return Node.from_dict(await self.read_entity("node", key))

    async def read_instance(self, key: str) -> Instance:
        return Instance.from_dict(await self.read_entity("instance", key))

    async def read_group(self, key: str) -> NodeGroup:
        return NodeGroup.from_dict(await self.read_entity("nodegroup", key))

    async def read_network(self, key: str) -> Network:
        return Network.from_dict(await self.read_entity("network", key))

    async def verify_config(self) -> list[str]:
        return (await self.call(c.VerifyConfig))["problems"]  # type: ignore[no-any-return]

    async def flush_config(self) -> int:
        return (await self.call(c.FlushConfig))["serial_no"]  # type: ignore[no-any-return]

    # --- config writes -------------------------------------------------------
    async def lock_config(self, owner: Owner, shared: bool = False, timeout: float | None = None) -> ConfigData:
        answer = await self.call(c.LockConfig, owner=owner, shared=shared, timeout=_seconds(timeout))
        return ConfigData.from_json(answer["config"])

    async def unlock_config(self, owner: Owner) -> None:
        await self.call(c.UnlockConfig, owner=owner)

    async def write_config(self, owner: Owner, config: ConfigData, release: Iterable[str] = ()) -> int:
        answer = await self.call(c.WriteConfig, owner=owner, config=config.to_json(), release=list(release) or None)
        return answer["serial_no"]  # type: ignore[no-any-return]

    async def write_config_and_unlock(self, owner: Owner, config: ConfigData, release: Iterable[str] = ()) -> int:
        answer = await self.call(
            c.WriteConfigAndUnlock, owner=owner, config=config.to_json(), release=list(release) or None
        )
        return answer["serial_no"]  # type: ignore[no-any-return]

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
            c.UpdateEntity, owner=owner, kind=kind, entity=obj.to_json(), release=list(release) or None, **kwargs
        )
        return _stamped(obj, answer["serial_no"], answer["mtime"])

    async def update_instance(self, owner: Owner, inst: Instance, release: Iterable[str] = ()) -> Instance:
        return await self.update(owner, "instance", inst, release)  # type: ignore[no-any-return]

    async def update_node(self, owner: Owner, node: Node, release: Iterable[str] = ()) -> Node:
        return await self.update(owner, "node", node, release)  # type: ignore[no-any-return]

    async def update_group(self, owner: Owner, group: NodeGroup, release: Iterable[str] = ()) -> NodeGroup:
        return await self.update(owner, "nodegroup", group, release)  # type: ignore[no-any-return]

    async def update_cluster(self, owner: Owner, cluster: Cluster, release: Iterable[str] = ()) -> Cluster:
        return await self.update(owner, "cluster", cluster, release)  # type: ignore[no-any-return]

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
        )
        return answer["uuid"]  # type: ignore[no-any-return]

    async def remove(self, owner: Owner, kind: str, key: str, release: Iterable[str] = ()) -> int:
        answer = await self.call(c.RemoveEntity, owner=owner, kind=kind, key=key, release=list(release) or None)
        return answer["config_serial"]  # type: ignore[no-any-return]

    # --- locks ---------------------------------------------------------------
    async def try_update_locks(self, owner: Owner, request: Request) -> list[Owner]:
        answer = await self.call(c.TryUpdateLocks, owner=owner, request=_req(request))
        return [Owner.from_wire(b) for b in answer["blockers"]]

    async def update_locks_waiting(self, owner: Owner, priority: int, request: Request) -> list[Owner]:
        answer = await self.call(c.UpdateLocksWaiting, owner=owner, priority=priority, request=_req(request))
        return [Owner.from_wire(b) for b in answer["blockers"]]

    async def acquire(self, owner: Owner, request: Request, priority: int = 0, timeout: float | None = None) -> None:
        """Get C{request} granted, waiting for WConfD's push if it must queue.

        On timeout the queued request is withdrawn and L{errors.LockError}
        raised (unless the grant won the race, which then counts).
        """
        waiter: Deferred = Deferred()
        self.protocol.granted.setdefault(owner, []).append(waiter)
        try:
            blockers = await self.update_locks_waiting(owner, priority, request)
        except BaseException:
            self._forget(owner, waiter)
            raise
        if not blockers:
            self._forget(owner, waiter)
            return
        if timeout is not None:
            if self.clock is None:
                from twisted.internet import reactor as clock
            else:
                clock = self.clock
            waiter.addTimeout(timeout, clock)
        try:
            await waiter
        except (CancelledError, DeferredTimeout):  # addTimeout raises the latter
            self._forget(owner, waiter)
            if await self.cancel_pending_request(owner):
                raise errors.LockError(
                    "timed out after %ss waiting for %s" % (timeout, ", ".join(r[0] for r in request))
                ) from None

    def _forget(self, owner: Owner, waiter: Deferred) -> None:
        waiters = self.protocol.granted.get(owner, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self.protocol.granted.pop(owner, None)

    async def has_pending_request(self, owner: Owner) -> bool:
        return (await self.call(c.HasPendingRequest, owner=owner))["pending"]  # type: ignore[no-any-return]

    async def cancel_pending_request(self, owner: Owner) -> bool:
        return (await self.call(c.CancelPendingRequest, owner=owner))["cancelled"]  # type: ignore[no-any-return]

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
        answer = await self.call(c.OpportunisticLockUnion, owner=owner, request=_req(request), count=count, timeout=_seconds(timeout))
        return answer["acquired"]  # type: ignore[no-any-return]

    async def guarded_opportunistic_lock_union(
        self, owner: Owner, count: int, request: Request, timeout: float | None = None
    ) -> list[str]:
        answer = await self.call(
            c.GuardedOpportunisticLockUnion, owner=owner, request=_req(request), count=count, timeout=_seconds(timeout)
        )
        return answer["acquired"]  # type: ignore[no-any-return]

    async def add_locks(self, owner: Owner, names: Iterable[str]) -> list[Owner]:
        answer = await self.call(c.AddLocks, owner=owner, locks=list(names))
        return [Owner.from_wire(b) for b in answer["blockers"]]

    async def list_locks(self, owner: Owner) -> list[tuple[str, str]]:
        return [tuple(x) for x in (await self.call(c.ListLocks, owner=owner))["locks"]]  # type: ignore[misc]

    async def list_all_locks(self) -> list[str]:
        return (await self.call(c.ListAllLocks))["locks"]  # type: ignore[no-any-return]

    async def list_all_locks_owners(self) -> list[Any]:
        return (await self.call(c.ListAllLocksOwners))["locks"]  # type: ignore[no-any-return]

    async def list_locks_waiting_status(self) -> list[Any]:
        return (await self.call(c.ListLocksWaitingStatus))["status"]  # type: ignore[no-any-return]

    async def cleanup_locks(self) -> list[Owner]:
        return [Owner.from_wire(o) for o in (await self.call(c.CleanupLocks))["dead"]]


def _seconds(timeout: float | None) -> float | None:
    return None if timeout is None else float(timeout)


def _req(request: Request) -> list[list[str]]:
    return [[str(name), str(mode)] for name, mode in request]


def _stamped(obj: ConfigObject, serial: int, mtime: float) -> Any:
    import attrs

    return attrs.evolve(obj, serial_no=serial, mtime=mtime)  # type: ignore[misc]
