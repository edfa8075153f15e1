"""WConfD's state and policy: config changes, locks, persistence, owners.

The AMP protocol (L{ganeti.wconfd.protocol}) only translates calls into
methods of L{WConfdService}; everything with timing or ordering lives here:

  - a config change is applied in memory, its journal record is made
    durable (group commit), and only then is it acknowledged and are the
    locks named in C{release} freed: a restart never shows a released lock
    whose change was lost;
  - config.data is rewritten in the background from cached fragments,
    coalescing bursts, and each new config.data goes to the distributor;
  - every lock change is journalled before the answer goes out, and owners
    whose queued requests were granted are told at once over their
    connections (no polling);
  - owners whose lock file is no longer locked are dead: their locks are
    freed on a short timer and before a request waits for them;
  - a mutating call may carry a request id: its answer is recorded with
    the change (in the same journal record or lock journal line), and a
    retry of the call (the client lost the answer) gets that answer
    instead of applying the change again;
  - with a C{holder} check, an owner is bound to the connection whose
    peer process holds its lock file, and refused from any other.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, cast

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, succeed
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from ganeti import errors
from ganeti.lockfile import is_free
from ganeti.locking import CONFIG_LOCK, EXCLUSIVE, SHARED, LockManager, Owner
from ganeti.objects import ConfigData
from ganeti.wconfd import diskspace
from ganeti.wconfd.distribution import Distribution
from ganeti.wconfd.replication import RecordingDistributor
from ganeti.wconfd.requests import (
    Answer,
    RequestLog,
    add_answer,
    blockers_answer,
    config_serial,
    remove_answer,
    update_answer,
    write_answer,
)
from ganeti.wconfd.storage import IConfigStorage
from ganeti.wconfd.store import ConfigStore, entity_lock_names, lock_name

#: priority of WConfD's own config-lock requests (more urgent than any job)
CONFIG_LOCK_PRIORITY = -21

Distributor = Callable[[bytes, int], Any]


class WConfdService(Service):
    """Owns the config store, the lock manager and their persistence."""

    log = Logger()

    def __init__(
        self,
        storage: IConfigStorage,
        clock: Any,
        *,
        owner_dirs: Iterable[str] = (),
        distributor: Distributor | None = None,
        death_interval: float = 0.25,
        checkpoint_delay: float = 0.2,
        lock_snapshot_interval: float = 5.0,
        probe: Callable[[str], bool] = is_free,
        holder: Callable[[str, int], bool] | None = None,
        quorum: Callable[[int], Deferred] | None = None,
    ) -> None:
        """
        @param holder: C{holder(lockfile, pid)} says whether process C{pid}
            holds C{lockfile} locked; with it, an owner is only accepted
            from a connection whose peer holds the owner's lock file (or
            that it is bound to already).  C{None}: owners are not bound
            (in-memory tests).
        @param quorum: C{quorum(serial)} fires once a majority of the master
            candidates hold config serial C{serial} (or newer), or fails; a
            change is acknowledged only then (L{ganeti.wconfd.replication}).
            C{None}: once it is durable here.
        @ivar durable: called with each journal record once it is durable
            here, before the change waits for its quorum (the replication
            stage sends candidates these records as deltas)
        """
        self.storage = storage
        self.clock = clock
        self.owner_dirs = tuple(os.path.realpath(d) + os.sep for d in owner_dirs)
        self.distributor: Distributor = distributor or RecordingDistributor()
        self.death_interval = death_interval
        self.checkpoint_delay = checkpoint_delay
        self.lock_snapshot_interval = lock_snapshot_interval
        self.probe = probe
        self.holder = holder
        self.quorum = quorum
        self.durable: Callable[[dict[str, Any]], None] | None = None
        self.requests = RequestLog()
        #: requests being applied: (owner, request id) -> retries waiting for the answer
        self._inflight: dict[tuple[Owner, int], list[Deferred]] = {}
        #: answers of lock calls to journal with their owner's next lock line
        self._lock_answers: dict[Owner, list[Any]] = {}
        #: owner -> the connection it is bound to
        self._bindings: dict[Owner, Any] = {}
        self.store: ConfigStore | None = None
        self.locks = LockManager()
        self._valid_owners: set[Owner] = set()
        self._connections: dict[Owner, set[Any]] = {}
        self._grant_waiters: dict[Owner, list[Deferred]] = {}
        self._change_waiters: list[Deferred] = []
        #: the lock generation the change waiters were last woken at
        self._woken_generation = -1
        self._durable_serial = 0
        self._flush_waiters: list[tuple[int, Deferred]] = []
        self._checkpoint_call: Any = None
        self._checkpointing = False
        self._checkpoint_duration = 0.0
        self._lock_snapshot_call: Any = None
        self.distribution = Distribution(lambda: self.distributor)
        self._broken: str | None = None
        self._death_loop: LoopingCall | None = None
        #: the HA parameters' keeper (L{ganeti.ha.keeper.HaKeeper}), when the daemon has one
        self.ha: Any = None
        #: the stall guard (L{ganeti.ha.guard.MasterGuard}): no command runs while it is unconfirmed
        self.guard: Any = None

    # --- life cycle -------------------------------------------------------
    def startService(self) -> None:
        self.recover()
        super().startService()
        self._death_loop = LoopingCall(self.check_owners)
        self._death_loop.clock = self.clock
        self._death_loop.start(self.death_interval, now=True)

    def stopService(self) -> Deferred:
        super().stopService()
        if self._death_loop is not None and self._death_loop.running:
            self._death_loop.stop()
        for call in (self._checkpoint_call, self._lock_snapshot_call):
            if call is not None and call.active():
                call.cancel()
        self._checkpoint_call = self._lock_snapshot_call = None
        d = self.flush() if self.store is not None and self._broken is None else succeed(None)

        def finish(result: Any) -> Any:
            try:
                self._save_requests()
                self.storage.write_locks(self.locks.to_data())
            finally:
                self.storage.close()
            return result

        return d.addBoth(finish)

    def recover(self) -> None:
        """Load config.data and locks.data, replay both journals."""
        found = self.storage.load()
        if found.config is None:
            raise errors.ConfigurationError(
                "no config.data found: initialise the cluster first "
                "(or create one with 'ganeti-wconfd-client init-config')"
            )
        try:
            config = ConfigData.from_json(found.config)
        except (ValueError, TypeError) as e:
            raise errors.ConfigurationError("config.data is not a valid configuration: %s" % e) from e
        store = ConfigStore(config)
        base = store.serial_no
        replayed = 0
        for record in found.records:
            if record.get("s", 0) > store.serial_no:
                store.replay(record)
                replayed += 1
        self.store = store
        self.locks = LockManager.from_data(found.locks or [[], []], names=store.lock_names())
        self.requests.load(found.requests)
        for record in found.records:
            answered = record.get("r")
            if answered:
                self.requests.load([[answered[0], [answered[1:]]]])
        for line in found.lock_records:
            owner = Owner.from_wire(line[0])
            pending = None if line[2] is None else (line[2][0], [tuple(r) for r in line[2][1]])
            self.locks.set_owner_state(owner, [tuple(h) for h in line[1]], pending)
            if len(line) > 3 and line[3]:
                self.requests.load([[line[0], [line[3]]]])
        self.locks.retry_pending()
        self.locks.take_dirty()
        self.locks.take_granted()
        self._save_requests()
        self.storage.write_locks(self.locks.to_data())
        self._durable_serial = base
        self.log.info(
            "loaded config serial {base}, replayed {n} journalled changes (now serial {serial}); "
            "{owners} lock owners",
            base=base,
            n=replayed,
            serial=store.serial_no,
            owners=len(self.locks.owners()),
        )
        if replayed or found.records:
            self._run_checkpoint()
        else:  # the replicas (and this node's ssconf) may lag: bring them up to date
            self.distribution(store.snapshot(), store.serial_no)

    # --- owners and connections ------------------------------------------
    def check_owner(self, owner: Owner) -> Owner:
        """Refuse owners whose lock file lives outside the lock directories."""
        if owner in self._valid_owners:
            return owner
        if self.owner_dirs:
            real = os.path.realpath(owner.lockfile)
            if not any(real.startswith(d) for d in self.owner_dirs):
                raise errors.LockError(
                    "lock file %r is not under %s" % (owner.lockfile, " or ".join(d.rstrip(os.sep) for d in self.owner_dirs))
                )
        self._valid_owners.add(owner)
        return owner

    def bind(self, owner: Owner, connection: Any, peer_pid: int | None) -> None:
        """Let C{connection} act as C{owner}, or refuse.

        Without a L{holder} check every connection may act as any owner.
        With one, an owner is bound to one connection: the first whose peer
        process (C{peer_pid}, from C{SO_PEERCRED}) holds the owner's lock
        file.  Another connection is refused, unless its peer holds the
        lock file too (the owner reconnected: it is bound to the new
        connection from then on).  The protocol caches the outcome, so the
        lock file is looked at once per connection and owner.

        @raise errors.LockError: the connection may not act as C{owner}.
        """
        if self.holder is None:
            return
        current = self._bindings.get(owner)
        if current is connection:
            return
        if peer_pid is None or not self._holds_lockfile(owner.lockfile, peer_pid):
            if current is not None:
                raise errors.LockError(
                    "owner %s is bound to another connection to WConfD; refusing it from this one "
                    "(process %s does not hold its lock file %s)" % (owner.to_wire()[0], peer_pid, owner.lockfile)
                )
            raise errors.LockError(
                "refusing owner %s: the process on this connection (pid %s) does not hold its lock file %s"
                % (owner.to_wire()[0], peer_pid, owner.lockfile)
            )
        if current is not None:
            forget = getattr(current, "forget_owner", None)
            if forget is not None:
                forget(owner)
        self._bindings[owner] = connection

    def _holds_lockfile(self, lockfile: str, pid: int) -> bool:
        assert self.holder is not None
        try:
            return self.holder(lockfile, pid)
        except Exception:
            self.log.failure("cannot tell whether pid {pid} holds {lockfile}", pid=pid, lockfile=lockfile)
            return False

    def attach(self, owner: Owner, connection: Any) -> None:
        """Remember that C{connection} speaks for C{owner} (for pushes)."""
        self._connections.setdefault(owner, set()).add(connection)

    def detach(self, connection: Any) -> None:
        for owner in [o for o, conns in self._connections.items() if connection in conns]:
            conns = self._connections[owner]
            conns.discard(connection)
            if not conns:
                del self._connections[owner]
        for owner in [o for o, conn in self._bindings.items() if conn is connection]:
            del self._bindings[owner]

    def check_owners(self, owners: Iterable[Owner] | None = None) -> list[Owner]:
        """Free the locks of owners whose process died; returns them."""
        candidates = list(self.locks.owners() if owners is None else owners)
        dead = []
        for owner in candidates:
            try:
                if self.probe(owner.lockfile):
                    dead.append(owner)
            except Exception:  # one odd lock file must not stop death detection
                self.log.failure("cannot probe the lock file of {owner}", owner=owner.to_wire())
        for owner in dead:
            for connection in self._connections.pop(owner, ()):
                forget = getattr(connection, "forget_owner", None)
                if forget is not None:
                    forget(owner)
            self._bindings.pop(owner, None)
            self.requests.forget(owner)
            self.log.info("owner {owner} is dead: freeing its locks", owner=owner.to_wire())
            self.locks.free(owner)
            self._valid_owners.discard(owner)
            self._fail_grant_waiters(owner, errors.LockError("owner %s died" % (owner.to_wire(),)))
            if self._may_delete(owner.lockfile):
                try:
                    os.unlink(owner.lockfile)
                except OSError:
                    pass
        if dead:
            self._locks_changed()
        return dead

    def _may_delete(self, path: str) -> bool:
        real = os.path.realpath(path)
        return bool(self.owner_dirs) and any(real.startswith(d) for d in self.owner_dirs)

    # --- lock operations ---------------------------------------------------
    def lock_call(self, method: str, owner: Owner | None, *args: Any) -> Any:
        """Run one lock-manager method, then persist and notify."""
        if owner is not None:
            self.check_owner(owner)
            args = (owner,) + args
        try:
            return getattr(self.locks, method)(*args)
        finally:
            self._locks_changed()

    def lock_call_once(self, rid: int | None, answer_of: Callable[[Any], Answer], method: str, owner: Owner, *args: Any) -> Any:
        """L{lock_call}, recording C{answer_of(result)} as the answer of request C{rid}.

        The answer goes into the owner's lock journal line with the change.
        """
        self.check_owner(owner)
        try:
            result = getattr(self.locks, method)(owner, *args)
            if rid is not None:
                self._note_answer(owner, rid, answer_of(result))
            return result
        finally:
            self._locks_changed()

    def _note_answer(self, owner: Owner, rid: int, answer: Answer) -> None:
        self.requests.record(owner, rid, answer)
        self._lock_answers[owner] = [rid, answer]

    async def once(
        self, owner: Owner, rid: int | None, run: Callable[[], Any], release: Iterable[str] = ()
    ) -> Answer:
        """Run C{run()} (returns an answer, maybe awaitable) unless request C{rid} ran already.

        A request already applied gets its recorded answer, and the locks
        it released are released again (a crash may have come between the
        change and the release; releasing is idempotent).  A retry that
        arrives while the first attempt is still being applied waits for
        its answer.  C{run} must record the answer itself, durably with its
        change (L{_commit} or L{lock_call_once}).
        """
        if rid is None:
            result = run()
            return cast("dict[str, Any]", await result if hasattr(result, "__await__") else result)
        replay = await self.replayed(owner, rid, release)
        if replay is not None:
            return replay
        key = (owner, rid)
        self._inflight[key] = []
        try:
            result = run()
            answer = await result if hasattr(result, "__await__") else result
        except BaseException as e:
            for waiter in self._inflight.pop(key, []):
                waiter.errback(e)
            raise
        self.requests.record(owner, rid, answer)
        for waiter in self._inflight.pop(key, []):
            waiter.callback(answer)
        return cast("dict[str, Any]", answer)

    async def replayed(self, owner: Owner, rid: int | None, release: Iterable[str] = ()) -> Answer | None:
        """The recorded answer of C{owner}'s request C{rid}, or C{None} if it never ran."""
        if rid is None:
            return None
        answer = self.requests.answer(owner, rid)
        if answer is None:
            waiters = self._inflight.get((owner, rid))
            if waiters is None:
                return None
            waiter: Deferred = Deferred()
            waiters.append(waiter)
            answer = await waiter
        self.log.info("request {rid} of {owner} was applied already: answering it again", rid=rid, owner=owner.to_wire())
        serial = config_serial(answer)
        if serial is not None and self.quorum is not None:
            await self.quorum(serial)  # the first answer may have been a refusal for want of a majority
        names = [n for n in release if n]
        if names:
            try:
                self._release(owner, names)
            except errors.GenericError as e:
                self.log.warn("releasing {names} again for {owner}: {e}", names=names, owner=owner.to_wire(), e=e)
        return cast("dict[str, Any] | None", answer)

    def try_update(self, owner: Owner, request: list[Any]) -> list[Owner]:
        blockers = self.lock_call("try_update", owner, request)
        if blockers and self.check_owners(blockers):
            blockers = self.lock_call("try_update", owner, request)
        return cast("list[Owner]", blockers)

    def update_waiting(self, owner: Owner, priority: int, request: list[Any]) -> list[Owner]:
        blockers = self.lock_call("update_waiting", owner, priority, request)
        if blockers and self.check_owners(blockers):
            blockers = self.locks.blockers_of(owner) if self.locks.has_pending(owner) else []
        return cast("list[Owner]", blockers)

    async def acquire(self, owner: Owner, priority: int, request: list[Any], timeout: float | None) -> None:
        """Wait (pushed, not polled) until C{request} is granted, or time out."""
        waiter = self._grant_waiter(owner)
        if not self.update_waiting(owner, priority, request):
            self._drop_grant_waiter(owner, waiter)
            return
        try:
            await self._with_timeout(waiter, timeout)
        except CancelledError:
            self._drop_grant_waiter(owner, waiter)
            if self.lock_call("cancel_pending", owner):
                raise errors.LockError("timed out after %ss waiting for %s" % (timeout, _names(request))) from None

    async def opportunistic(
        self, owner: Owner, request: list[Any], count: int, timeout: float | None, guarded: bool, rid: int | None = None
    ) -> list[str]:
        """Take what is free; with a timeout, wait for changes until C{count}.

        With a request id C{rid}, the answer is journalled with the last
        change (see L{once}).
        """
        deadline = None if not timeout else self.clock.seconds() + timeout
        count = max(count, 1)
        acquired: list[str] = []
        while True:
            self.check_owner(owner)
            try:
                if guarded:  # the manager takes the count first, as Ganeti's call
                    acquired = self.locks.guarded_opportunistic_union(count, owner, request)
                else:
                    acquired.extend(self.locks.opportunistic_union(owner, request))
                remaining = None if deadline is None else deadline - self.clock.seconds()
                done = len(acquired) >= count or remaining is None or remaining <= 0
                if done and rid is not None:
                    self._note_answer(owner, rid, {"acquired": acquired})
            finally:
                self._locks_changed()
            if done or remaining is None:
                return acquired
            change: Deferred = Deferred()
            self._change_waiters.append(change)
            try:
                await self._with_timeout(change, remaining)
            except CancelledError:
                pass

    def _locks_changed(self) -> None:
        answers = self._lock_answers
        if answers:
            self._lock_answers = {}
        for owner in self.locks.take_dirty():
            holdings, pending = self.locks.owner_state(owner)
            line = [owner.to_wire(), [list(h) for h in holdings], None if pending is None else [pending[0], [list(r) for r in pending[1]]]]
            answered = answers.get(owner)
            if answered is not None:
                line.append(answered)
            self.storage.append_locks(line)
            if self._lock_snapshot_call is None:
                self._lock_snapshot_call = self.clock.callLater(self.lock_snapshot_interval, self._snapshot_locks)
        for owner in self.locks.take_granted():
            for connection in list(self._connections.get(owner, ())):
                connection.notify_granted(owner)
            for waiter in self._grant_waiters.pop(owner, []):
                waiter.callback(None)
        generation = self.locks.generation
        if generation == self._woken_generation:
            return
        self._woken_generation = generation
        waiters, self._change_waiters = self._change_waiters, []
        for waiter in waiters:
            if not waiter.called:
                waiter.callback(None)

    def _snapshot_locks(self) -> None:
        self._lock_snapshot_call = None
        try:
            self._save_requests()
            self.storage.write_locks(self.locks.to_data())
        except OSError:
            self.log.failure("cannot write locks.data")

    def _save_requests(self) -> None:
        """Write the recorded answers (before a journal holding some is dropped).

        Owners that hold nothing and whose process is gone will not retry:
        their answers are dropped first.
        """
        holding = self.locks.owners()
        for owner in self.requests.owners():
            if owner in holding or owner in self._connections:
                continue
            try:
                if self.probe(owner.lockfile):
                    self.requests.forget(owner)
            except Exception:
                self.log.failure("cannot probe the lock file of {owner}", owner=owner.to_wire())
        self.storage.write_requests(self.requests.to_data())

    def _grant_waiter(self, owner: Owner) -> Deferred:
        d: Deferred = Deferred()
        self._grant_waiters.setdefault(owner, []).append(d)
        return d

    def _drop_grant_waiter(self, owner: Owner, waiter: Deferred) -> None:
        waiters = self._grant_waiters.get(owner, [])
        if waiter in waiters:
            waiters.remove(waiter)
        if not waiters:
            self._grant_waiters.pop(owner, None)

    def _fail_grant_waiters(self, owner: Owner, exc: Exception) -> None:
        for waiter in self._grant_waiters.pop(owner, []):
            waiter.errback(exc)

    async def _with_timeout(self, d: Deferred, timeout: float | None) -> Any:
        if timeout is None:
            return await d
        # addTimeout would turn the CancelledError into TimeoutError, which
        # the callers do not expect: keep the CancelledError
        d.addTimeout(timeout, self.clock, onTimeoutCancel=lambda result, _timeout: result)
        return await d

    def _holds(self, owner: Owner, name: str, exclusive: bool) -> bool:
        for held, mode in self.locks.owned(owner):
            if held == name:
                return mode == EXCLUSIVE or not exclusive
        return False

    def _require(self, owner: Owner, name: str, exclusive: bool = True) -> None:
        group = name.split("/", 1)[0] + "/[lockset]"
        if self._holds(owner, name, exclusive) or self._holds(owner, group, exclusive):
            return
        raise errors.LockError(
            "owner %s must hold %s%s to change it" % (owner.to_wire()[0], name, " exclusively" if exclusive else "")
        )

    # --- config reads ------------------------------------------------------
    @property
    def config_store(self) -> ConfigStore:
        if self.store is None:
            raise errors.ConfigurationError("WConfD has not loaded its configuration yet")
        return self.store

    def read_config(self) -> tuple[bytes, int]:
        store = self.config_store
        return store.snapshot(), store.serial_no

    # --- config changes ----------------------------------------------------
    async def lock_config(self, owner: Owner, shared: bool, timeout: float | None) -> tuple[bytes, int]:
        await self.acquire(owner, CONFIG_LOCK_PRIORITY, [(CONFIG_LOCK, SHARED if shared else EXCLUSIVE)], timeout)
        return self.read_config()

    def unlock_config(self, owner: Owner) -> None:
        self.lock_call("try_update", owner, [(CONFIG_LOCK, "release")])

    async def write_config(self, owner: Owner, data: Any, release: list[str], unlock: bool, rid: int | None = None) -> int:
        self._writable()
        self.check_owner(owner)
        if not self._holds(owner, CONFIG_LOCK, exclusive=True):
            raise errors.LockError("writing the whole config needs the config lock held exclusively (LockConfig)")
        try:
            config = ConfigData.from_dict(data)
        except (TypeError, ValueError) as e:
            raise errors.ConfigurationError("malformed configuration: %s" % e) from e
        store = self.config_store
        before = set(store.lock_names())
        record = store.replace(config)
        after = set(store.lock_names())
        self.locks.add_names(after - before)
        self.locks.remove_names(before - after)
        await self._commit(record, owner, rid, write_answer(store.serial_no))
        self._release(owner, list(release) + ([CONFIG_LOCK] if unlock else []))
        return store.serial_no

    async def update_entity(
        self,
        owner: Owner,
        kind: str,
        data: Any,
        release: list[str],
        disks: list[Any] | None = None,
        remove_disks: list[str] | None = None,
        rid: int | None = None,
    ) -> tuple[Any, int]:
        self._writable()
        self.check_owner(owner)
        store = self.config_store
        if not isinstance(data, dict):
            raise errors.ConfigurationError("the %s must be a JSON object" % kind)
        if kind == "cluster":
            self._require(owner, "cluster/BGL", exclusive=False)
        else:
            current = store.lookup(kind, data.get("uuid") or "")
            self._require(owner, store.guarding_lock(kind, current))
            old_names = entity_lock_names(kind, current)
        stored, record = store.update(kind, data, disks or (), remove_disks or ())
        if kind != "cluster":
            new_names = entity_lock_names(kind, stored)
            if new_names != old_names:
                self.locks.add_names(new_names)
                self.locks.remove_names([n for n in old_names if n not in new_names])
        await self._commit(record, owner, rid, update_answer(stored, store.serial_no))
        self._release(owner, release)
        return stored, store.serial_no

    async def update_cluster(self, data: Any) -> Any:
        """Replace the cluster object for a client outside the lock manager
        (Ganeti's own tools, L{ganeti.wconfd.ganeti_front}), as Ganeti's
        WConfD does: its C{serial_no} must be the stored one."""
        self._writable()
        stored, record = self.config_store.update("cluster", data)
        await self._commit(record)
        return stored

    async def change_filter(self, uuid: str, rule: dict[str, Any] | None) -> int:
        """Store (or, with C{None}, remove) job filter rule C{uuid} for LuxiD, as
        Ganeti's LuxiD writes the config; answers once durable (no lock: filter
        changes bypass the job queue).  Idempotent, so a re-sent call is harmless."""
        self._writable()
        record = self.config_store.change_filter(uuid, rule)
        if record is not None:
            await self._commit(record)
        return self.config_store.serial_no

    async def add_entity(
        self, owner: Owner, kind: str, data: Any, disks: list[Any], release: list[str], rid: int | None = None
    ) -> tuple[Any, int]:
        self._writable()
        self.check_owner(owner)
        store = self.config_store
        stored, record = store.add(kind, data, disks or ())
        self.locks.add_names(entity_lock_names(kind, stored))
        await self._commit(record, owner, rid, add_answer(stored, store.serial_no))
        self._release(owner, release)
        return stored, store.serial_no

    async def remove_entity(self, owner: Owner, kind: str, key: str, release: list[str], rid: int | None = None) -> int:
        self._writable()
        self.check_owner(owner)
        store = self.config_store
        current = store.lookup(kind, key)
        self._require(owner, lock_name(kind, current))
        removed, record = store.remove(kind, key)
        self.locks.remove_names(entity_lock_names(kind, removed))
        await self._commit(record, owner, rid, remove_answer(store.serial_no))
        self._release(owner, release)
        return store.serial_no

    def add_locks(self, owner: Owner, names: list[str], rid: int | None = None) -> list[Owner]:
        """Create lock names for entities being created, and hold them.

        A name left behind by a creator that failed (known, held by nobody,
        and no entity of the config behind it) is dropped first, so that
        the creation can be tried again.
        """
        self.check_owner(owner)
        store = self.store
        if store is not None:
            stale = [n for n in names if self.locks.exists(n) and not self.locks.is_held(n) and not store.backs_lock(n)]
            if stale:
                self.locks.remove_names(stale)
        return cast("list[Owner]", self.lock_call_once(rid, blockers_answer, "add_locks", owner, names))

    def _release(self, owner: Owner, names: Iterable[str]) -> None:
        names = list(names)
        if names:
            self.lock_call("try_update", owner, [(name, "release") for name in names])

    def _writable(self) -> None:
        if self._broken is not None:
            raise errors.ConfigurationError("WConfD cannot write its state (%s); restart it" % self._broken)
        diskspace.check_room(self)

    async def _commit(
        self, record: dict[str, Any], owner: Owner | None = None, rid: int | None = None, answer: Answer | None = None
    ) -> None:
        """Make C{record} durable; with a request id, its answer goes into the record.

        The answer is recorded (for retries) once the record is durable.
        """
        serial = record.get("s", self.config_store.serial_no)
        if rid is not None and owner is not None:
            record["r"] = [owner.to_wire(), rid, answer]
        try:
            await self.storage.append(record)
        except Exception as e:
            self._broken = str(e)
            if diskspace.disk_full(e):  # back to the durable config, then changes again
                diskspace.revert(self)
                raise errors.ConfigurationError("change not saved: %s; nothing changed" % e) from e
            self.log.critical("journal write failed, refusing further changes: {e}", e=e)
            raise errors.ConfigurationError("change not saved: %s" % e) from e
        if rid is not None and owner is not None:
            self.requests.record(owner, rid, answer)
        if self.durable is not None:
            self.durable(record)
        self._schedule_checkpoint()
        if self.quorum is not None:
            await self.quorum(serial)

    # --- checkpoints, flush, distribution ----------------------------------
    def _schedule_checkpoint(self) -> None:
        if self._checkpoint_call is not None or self._checkpointing:
            return
        delay = max(self.checkpoint_delay, 3 * self._checkpoint_duration)
        self._checkpoint_call = self.clock.callLater(delay, self._run_checkpoint)

    def _run_checkpoint(self) -> Deferred:
        if self._checkpoint_call is not None and self._checkpoint_call.active():
            self._checkpoint_call.cancel()
        self._checkpoint_call = None
        self._checkpointing = True
        store = self.config_store
        serial, data = store.serial_no, store.snapshot()
        started = self.clock.seconds()
        self.storage.begin_checkpoint()
        d = self.storage.write_config(data)
        d.addCallback(lambda _: self._save_requests())
        d.addCallback(lambda _: self.storage.end_checkpoint())

        def written(_: Any) -> None:
            self._checkpoint_duration = self.clock.seconds() - started
            self._durable_serial = max(self._durable_serial, serial)
            self.distribution(data, serial)

        ok = [True]

        def failed(failure: Any) -> None:
            ok[0] = False
            self.log.failure("cannot write config.data (will retry)", failure)

        def done(_: Any) -> None:
            self._checkpointing = False
            ready = [(s, w) for s, w in self._flush_waiters if s <= self._durable_serial]
            self._flush_waiters = [(s, w) for s, w in self._flush_waiters if s > self._durable_serial]
            for _s, waiter in ready:
                waiter.callback(self._durable_serial)
            if self._flush_waiters and ok[0]:
                self._run_checkpoint()
            elif self._flush_waiters or self.config_store.serial_no > self._durable_serial:
                self._schedule_checkpoint()  # after a failure: retry later, not in a loop

        d.addCallbacks(written, failed)
        d.addCallback(done)
        return d

    def flush(self, distributed: bool = False) -> Deferred:
        """Fires with the serial once config.data holds every change so far;
        with C{distributed}, once its distribution to the nodes also ended
        (L{Distribution})."""
        target = self.config_store.serial_no
        if distributed:
            return self.flush().addCallback(lambda _: self.distribution.wait(target))
        if self._durable_serial >= target:
            return succeed(self._durable_serial)
        waiter: Deferred = Deferred()
        self._flush_waiters.append((target, waiter))
        if not self._checkpointing:
            self._run_checkpoint()
        return waiter


def _names(request: list[Any]) -> str:
    return ", ".join(str(r[0]) for r in request)
