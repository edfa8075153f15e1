"""WConfD's AMP protocol: one instance per connection, bytes <-> service calls.

No policy here: each responder decodes, calls L{WConfdService} and encodes.
Anything that goes wrong becomes an AMP error with a clear message and the
connection stays open; unexpected failures are logged in full.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, Awaitable, cast

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.protocol import Factory, connectionDone
from twisted.logger import Logger
from twisted.protocols import amp
from twisted.python.failure import Failure

from ganeti import errors
from ganeti.locking import CONFIG_LOCK, Owner
from ganeti.wconfd import commands as c
from ganeti.wconfd.ganeti_front import FIRST_BYTE, GanetiFront
from ganeti.wconfd.requests import add_answer, blockers_answer, remove_answer, update_answer, write_answer
from ganeti.wconfd.service import WConfdService

_PEERCRED = struct.Struct("3i")


def _run(coro: Awaitable[Any]) -> Deferred:
    return ensureDeferred(coro)  # type: ignore[arg-type]


def peer_pid(transport: Any) -> int | None:
    """The pid of the process at the other end of a Unix socket (C{SO_PEERCRED}).

    C{None} for other transports (in-memory tests, TCP).
    """
    get_handle = getattr(transport, "getHandle", None)
    if get_handle is None:
        return None
    try:
        sock = get_handle()
        if sock.family != socket.AF_UNIX:
            return None
        pid, _uid, _gid = _PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    except (OSError, AttributeError, struct.error):
        return None
    return pid if pid > 0 else None


class WConfdProtocol(amp.AMP):
    log = Logger()

    def __init__(self, service: WConfdService) -> None:
        super().__init__()
        self.service = service
        self.peer_pid: int | None = None
        #: owners this connection may act as (checked once, see L{WConfdService.bind})
        self._bound: set[Owner] = set()

    def connectionMade(self) -> None:
        super().connectionMade()
        self.peer_pid = peer_pid(self.transport)
        self._front: GanetiFront | None = None
        self._sniffed = False

    def dataReceived(self, data: bytes) -> None:
        """AMP, unless the first byte says Ganeti's own WConfD client
        (L{ganeti.wconfd.ganeti_front})."""
        if not self._sniffed and data:
            self._sniffed = True
            if data[:1] == FIRST_BYTE and self.transport is not None:
                self._front = GanetiFront(self.service, self.transport.write)
        if self._front is not None:
            self._front.feed(data)
            return
        super().dataReceived(data)

    # --- plumbing ---------------------------------------------------------
    def dispatchCommand(self, box: Any) -> Deferred:
        # AMP drops the connection on a failure that is not a RemoteAmpError
        # (bad arguments, bugs): turn those into error answers instead.
        name = box.get(b"_command", b"?")
        guard = self.service.guard  # a master that did not run for a while is confirmed first
        waiting = guard.ready(errors.ConfigurationError) if guard is not None else None
        if waiting is not None:
            return cast("Deferred[Any]", waiting.addCallback(
                lambda _: super(WConfdProtocol, self).dispatchCommand(box)).addErrback(self._unexpected, name))
        return cast("Deferred[Any]", super().dispatchCommand(box).addErrback(self._unexpected, name))

    def _unexpected(self, failure: Failure, name: bytes) -> Failure:
        if failure.check(amp.RemoteAmpError):
            return failure
        command = name.decode("ascii", "replace")
        for cls, code in c.ERRORS.items():
            if isinstance(failure.value, cls):
                return Failure(amp.RemoteAmpError(code, str(failure.value)))
        self.log.failure("{command} failed unexpectedly", failure, command=command)
        return Failure(
            amp.RemoteAmpError(b"INTERNAL_ERROR", "%s failed: %s: %s" % (command, failure.type.__name__, failure.value))
        )

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.service.detach(self)
        super().connectionLost(reason)

    def notify_granted(self, owner: Owner) -> None:
        """Push L{c.LocksGranted} to the peer (no answer expected)."""
        try:
            self.callRemote(c.LocksGranted, owner=owner)
        except Exception:  # the connection is closing: the owner can ask later
            self.log.debug("could not tell {owner} of its grant", owner=owner.to_wire())

    def _owner(self, owner: Owner) -> Owner:
        if owner not in self._bound:
            self.service.check_owner(owner)
            self.service.bind(owner, self, self.peer_pid)
            self.service.attach(owner, self)
            self._bound.add(owner)
        return owner

    def forget_owner(self, owner: Owner) -> None:
        """C{owner} is bound elsewhere now (or dead): check it again next time."""
        self._bound.discard(owner)

    @c.RegisterOwner.responder
    def register_owner(self, owner: Owner, unless_serial: int | None = None, deltas: bool | None = None,
                       unless_mtime: float | None = None) -> dict[str, Any]:
        self._bound.discard(owner)
        self._owner(owner)
        return {} if unless_serial is None else self.read_config(unless_serial, deltas, unless_mtime)

    # --- general and reads ---------------------------------------------------
    @c.Echo.responder
    def echo(self, text: str) -> dict[str, Any]:
        return {"text": text}

    @c.ReadConfig.responder
    def read_config(self, unless_serial: int | None = None, deltas: bool | None = None,
                    unless_mtime: float | None = None) -> dict[str, Any]:
        store = self.service.config_store
        serial = store.serial_no
        if unless_serial is not None:
            changes = store.changes_since(unless_serial, unless_mtime)
            if changes == []:
                return {"config": b"", "serial_no": serial}  # the caller's copy is current: no snapshot
            if deltas and changes is not None:
                return {"config": b"", "serial_no": serial, "changes": changes}
        data, serial = self.service.read_config()
        return {"config": data, "serial_no": serial}

    @c.ReadSerial.responder
    def read_serial(self) -> dict[str, Any]:
        return {"serial_no": self.service.config_store.serial_no}

    @c.ReadWriteLatency.responder
    def read_write_latency(self) -> dict[str, Any]:
        histogram = getattr(self.service.storage, "write_latency", None)
        if histogram is None:
            return {"latency": None}
        return {"latency": {"buckets": list(histogram.buckets), "counts": list(histogram.counts),
                            "sum": histogram.total, "count": histogram.count}}

    @c.ReadCluster.responder
    def read_cluster(self) -> dict[str, Any]:
        return {"cluster": self.service.config_store.cluster.to_json()}

    @c.ReadEntity.responder
    def read_entity(self, kind: str, key: str) -> dict[str, Any]:
        return {"entity": self.service.config_store.lookup(kind, key).to_json()}

    @c.VerifyConfig.responder
    def verify_config(self) -> dict[str, Any]:
        return {"problems": self.service.config_store.verify()}

    @c.FlushConfig.responder
    def flush_config(self, distributed: bool | None = None) -> Deferred:
        return self.service.flush(bool(distributed)).addCallback(lambda serial: {"serial_no": serial})

    # --- HA parameters -------------------------------------------------------
    def _ha(self) -> Any:
        if self.service.ha is None:
            raise errors.OpPrereqError("this WConfD keeps no HA parameters", errors.ECODE_STATE)
        return self.service.ha

    @c.ReadHaParams.responder
    def read_ha_params(self) -> dict[str, Any]:
        return {"params": self._ha().current.to_dict()}

    @c.SetHaParams.responder
    def set_ha_params(self, changes: Any) -> Deferred:
        if not isinstance(changes, dict):
            raise c.BadArguments("changes must be an object of parameter: value, not %.200r" % (changes,))

        async def run() -> dict[str, Any]:
            return {"params": (await self._ha().change(changes)).to_dict()}

        return _run(run())

    # --- config writes -------------------------------------------------------
    @c.LockConfig.responder
    def lock_config(self, owner: Owner, shared: bool, timeout: float | None) -> Deferred:
        async def go() -> dict[str, Any]:
            data, serial = await self.service.lock_config(self._owner(owner), shared, timeout)
            return {"config": data, "serial_no": serial}

        return _run(go())

    @c.UnlockConfig.responder
    def unlock_config(self, owner: Owner) -> dict[str, Any]:
        self.service.unlock_config(self._owner(owner))
        return {}

    @c.WriteConfig.responder
    def write_config(self, owner: Owner, config: Any, release: list[str] | None, rid: int | None = None) -> Deferred:
        return self._write_config(owner, config, release, unlock=False, rid=rid)

    @c.WriteConfigAndUnlock.responder
    def write_config_and_unlock(
        self, owner: Owner, config: Any, release: list[str] | None, rid: int | None = None
    ) -> Deferred:
        return self._write_config(owner, config, release, unlock=True, rid=rid)

    def _write_config(self, owner: Owner, config: Any, release: list[str] | None, unlock: bool, rid: int | None) -> Deferred:
        names = _names(release)

        async def run() -> dict[str, Any]:
            return write_answer(await self.service.write_config(owner, config, names, unlock, rid=rid))

        again = names + ([CONFIG_LOCK] if unlock else [])
        return _run(self.service.once(self._owner(owner), rid, run, again))

    @c.ChangeFilter.responder
    def change_filter(self, uuid: str, rule: Any) -> Deferred:
        if rule is not None and not isinstance(rule, dict):
            raise c.BadArguments("rule must be an object or null, not %.200r" % (rule,))

        async def run() -> dict[str, Any]:
            return {"serial_no": await self.service.change_filter(uuid, rule)}

        return _run(run())

    @c.UpdateEntity.responder
    def update_entity(
        self,
        owner: Owner,
        kind: str,
        entity: Any,
        release: list[str] | None,
        disks: Any = None,
        remove_disks: Any = None,
        rid: int | None = None,
    ) -> Deferred:
        if disks is not None and not isinstance(disks, list):
            raise c.BadArguments("disks must be a list")
        names, removed = _names(release), _uuids(remove_disks)

        async def run() -> dict[str, Any]:
            stored, serial = await self.service.update_entity(owner, kind, entity, names, disks or [], removed, rid=rid)
            return update_answer(stored, serial)

        return _run(self.service.once(self._owner(owner), rid, run, names))

    @c.AddEntity.responder
    def add_entity(
        self, owner: Owner, kind: str, entity: Any, disks: Any, release: list[str] | None, rid: int | None = None
    ) -> Deferred:
        if disks is not None and not isinstance(disks, list):
            raise c.BadArguments("disks must be a list")
        names = _names(release)

        async def run() -> dict[str, Any]:
            stored, serial = await self.service.add_entity(owner, kind, entity, disks or [], names, rid=rid)
            return add_answer(stored, serial)

        return _run(self.service.once(self._owner(owner), rid, run, names))

    @c.RemoveEntity.responder
    def remove_entity(self, owner: Owner, kind: str, key: str, release: list[str] | None, rid: int | None = None) -> Deferred:
        names = _names(release)

        async def run() -> dict[str, Any]:
            return remove_answer(await self.service.remove_entity(owner, kind, key, names, rid=rid))

        return _run(self.service.once(self._owner(owner), rid, run, names))

    # --- locks ---------------------------------------------------------------
    @c.ListLocks.responder
    def list_locks(self, owner: Owner) -> dict[str, Any]:
        return {"locks": [list(x) for x in self.service.locks.owned(owner)]}

    @c.ListAllLocks.responder
    def list_all_locks(self) -> dict[str, Any]:
        return {"locks": self.service.locks.all_locks()}

    @c.ListAllLocksOwners.responder
    def list_all_locks_owners(self) -> dict[str, Any]:
        return {"locks": _owners_wire(self.service.locks.all_owners())}

    @c.ListLocksWaitingStatus.responder
    def list_locks_waiting_status(self) -> dict[str, Any]:
        locks = self.service.locks
        pending = [[prio, owner.to_wire(), [list(r) for r in req]] for prio, owner, req in locks.pending()]
        return {"status": [_owners_wire(locks.all_owners()), pending]}

    @c.TryUpdateLocks.responder
    def try_update_locks(self, owner: Owner, request: Any) -> dict[str, Any]:
        blockers = self.service.try_update(self._owner(owner), request)
        return {"blockers": [b.to_wire() for b in blockers]}

    @c.UpdateLocksWaiting.responder
    def update_locks_waiting(self, owner: Owner, priority: int, request: Any) -> dict[str, Any]:
        blockers = self.service.update_waiting(self._owner(owner), priority, request)
        return {"blockers": [b.to_wire() for b in blockers]}

    @c.HasPendingRequest.responder
    def has_pending_request(self, owner: Owner) -> dict[str, Any]:
        return {"pending": self.service.locks.has_pending(owner)}

    @c.CancelPendingRequest.responder
    def cancel_pending_request(self, owner: Owner, rid: int | None = None) -> Deferred:
        def run() -> dict[str, Any]:
            cancelled = self.service.lock_call_once(rid, _cancelled, "cancel_pending", owner)
            return _cancelled(cancelled)

        return _run(self.service.once(self._owner(owner), rid, run))

    @c.FreeLocks.responder
    def free_locks(self, owner: Owner) -> dict[str, Any]:
        self.service.lock_call("free", self._owner(owner))
        return {}

    @c.FreeLocksLevel.responder
    def free_locks_level(self, owner: Owner, level: str) -> dict[str, Any]:
        self.service.lock_call("free_level", self._owner(owner), level)
        return {}

    @c.DowngradeLocksLevel.responder
    def downgrade_locks_level(self, owner: Owner, level: str) -> dict[str, Any]:
        self.service.lock_call("downgrade_level", self._owner(owner), level)
        return {}

    @c.IntersectLocks.responder
    def intersect_locks(self, owner: Owner, locks: Any) -> dict[str, Any]:
        self.service.lock_call("intersect", self._owner(owner), _names(locks))
        return {}

    @c.OpportunisticLockUnion.responder
    def opportunistic_lock_union(
        self, owner: Owner, request: Any, count: int | None, timeout: float | None, rid: int | None = None
    ) -> Deferred:
        return self._opportunistic(owner, request, count, timeout, guarded=False, rid=rid)

    @c.GuardedOpportunisticLockUnion.responder
    def guarded_opportunistic_lock_union(
        self, owner: Owner, request: Any, count: int | None, timeout: float | None, rid: int | None = None
    ) -> Deferred:
        return self._opportunistic(owner, request, count, timeout, guarded=True, rid=rid)

    def _opportunistic(
        self, owner: Owner, request: Any, count: int | None, timeout: float | None, guarded: bool, rid: int | None
    ) -> Deferred:
        async def run() -> dict[str, Any]:
            acquired = await self.service.opportunistic(owner, request, count or 1, timeout, guarded, rid=rid)
            return {"acquired": acquired}

        return _run(self.service.once(self._owner(owner), rid, run))

    @c.AddLocks.responder
    def add_locks(self, owner: Owner, locks: Any, rid: int | None = None) -> Deferred:
        names = _names(locks)

        def run() -> dict[str, Any]:
            return blockers_answer(self.service.add_locks(owner, names, rid=rid))

        return _run(self.service.once(self._owner(owner), rid, run))

    @c.CleanupLocks.responder
    def cleanup_locks(self) -> dict[str, Any]:
        return {"dead": [o.to_wire() for o in self.service.check_owners()]}


def _cancelled(result: Any) -> dict[str, Any]:
    return {"cancelled": bool(result)}


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise c.BadArguments("expected a list of lock names, got %r" % (value,))
    return value


def _uuids(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise c.BadArguments("expected a list of uuids, got %.200r" % (value,))
    return value


def _owners_wire(all_owners: Any) -> list[Any]:
    return [[lock, [[o.to_wire(), mode] for o, mode in holders]] for lock, holders in all_owners]


def wconfd_factory(service: WConfdService) -> Factory:
    return Factory.forProtocol(lambda: WConfdProtocol(service))


__all__ = ["WConfdProtocol", "wconfd_factory", "errors"]
