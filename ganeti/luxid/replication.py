"""The job queue's replicas on the master candidates, kept converging.

The candidates (and their addresses) come from this node's ssconf files,
which WConfD keeps current.  For every candidate L{JobReplicator} keeps
what the candidate is known to hold (C{held}: name -> digest, or C{None}
when unknown) next to what the master holds (C{desired}, the listing of
the master's queue, updated by every write, archive rename and drain flag
change).  One worker per candidate pushes the difference
(L{ganeti.jobs.replicas.plan}) in order, one call at a time, and records
each acknowledged push: the files that changed since its last call go
together in one C{jobqueue_update_many} (L{batched}), each read when the
call is made, so versions written while a call was in flight are
superseded by the newest instead of being sent one after the other (a
job's running and final versions, a burst of submissions).  Versions of
a job none of whose opcodes has started wait up to L{LATER} seconds for
the next one (L{JobReplicator.later}); versions of running jobs are sent
without fsync (L{ganeti.jobs.replicas.needs_durable}).  A failed push puts
the candidate in backoff (L{BACKOFF_FIRST} seconds, doubling up to
L{BACKOFF_MAX}) and forgets what it holds, so the next attempt starts with a full resync: the candidate's
listing (C{jobqueue_list}, digests) compared with the master's, pushing only
what differs.  A full resync also happens when LuxiD starts, when a node
becomes a candidate (or changes address), and every L{RESYNC_INTERVAL}
seconds.

A new job is acknowledged only once a majority of the candidates hold its
file (this node's own durable write counts as one): L{replicate} pushes it
to every candidate at once, in one call with the queue's serial file,
including those in backoff (a success there means the candidate is back:
it is resynced at once).  Two calls carrying the same file are never in
flight to one candidate at once (C{inflight}, C{sending}), so a candidate
never goes back to an older version of a file.  A job's final file
is shown to clients only once a majority holds it: L{confirm} fires when
enough candidates acknowledged that very content (pushed by their workers
as any other write; a slow candidate delays nobody while the others make a
majority).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

from ganeti import ports
from ganeti.jobs import replicas
from ganeti.paths import Paths
from ganeti.reactors import ITimeTCPReactor
from ganeti.rpc import procedures

#: read timeout of one replication RPC, seconds
TIMEOUT = 30.0
#: first wait after a failed push, seconds; doubled at each failure
BACKOFF_FIRST = 0.5
#: longest wait between two attempts on a candidate that fails, seconds
BACKOFF_MAX = 30.0
#: seconds between two looks at ssconf for new or removed candidates
CHECK_INTERVAL = 2.0
#: seconds between two full resyncs of every candidate (catches any drift)
RESYNC_INTERVAL = 300.0
#: seconds a write marked L{JobReplicator.later} waits for a newer one before it is pushed anyway
LATER = 1.0
#: most files sent in one C{jobqueue_update_many}
BATCH_FILES = 256
#: most bytes (compressed content) sent in one C{jobqueue_update_many}
BATCH_BYTES = 8 * 1024 * 1024

Candidates = Callable[[], dict[str, str]]
#: what every job queue write goes through: C{(path, content)}
JobWrite = Callable[[str, bytes], Any]


class JobDistributor:
    """The hook every job queue write goes through (LuxiD's and job processes').

    It counts writes and hands each to C{forward} (the background push of
    L{JobReplicator} on a cluster with candidates).
    """

    def __init__(self, forward: JobWrite | None = None) -> None:
        self.writes = 0
        self.last: str | None = None
        self.forward = forward

    def __call__(self, path: str, content: bytes) -> None:
        self.writes += 1
        self.last = path
        if self.forward is not None:
            self.forward(path, content)


class Replica:
    """What LuxiD knows of one candidate's queue."""

    def __init__(self, name: str, address: str) -> None:
        self.name = name
        self.address = address
        #: name -> digest the candidate acknowledged; None: unknown (resync)
        self.held: dict[str, str] | None = None
        #: names that may differ since the last round
        self.dirty: set[str] = set()
        self.failures = 0
        self.last_error: str | None = None
        self.working = False
        self.retry: Any = None
        #: name -> digest being pushed by L{JobReplicator.replicate}
        self.inflight: dict[str, str] = {}
        #: names in the batch the worker has in flight
        self.sending: set[str] = set()
        #: whether the candidate knows C{jobqueue_update_many} (an older NodeD does not)
        self.batches = True

    @property
    def in_sync(self) -> bool:
        return self.held is not None and not self.dirty and not self.working

    def resync_asked(self) -> bool:
        """Whether C{held} was forgotten (a resync): a method, so that mypy
        does not keep a narrowing of C{held} across the worker's awaits."""
        return self.held is None


class JobReplicator:
    """Keeps every candidate's queue equal to the master's (module docstring)."""

    log = Logger()

    def __init__(self, paths: Paths, reactor: ITimeTCPReactor, *, port: int = ports.NODED, rpc: Any = None,
                 candidates: Candidates | None = None) -> None:
        self.paths = paths
        self.reactor = reactor
        self.port = port
        self._rpc = rpc
        self._candidates = candidates
        self.desired: dict[str, str] = {}
        self.replicas: dict[str, Replica] = {}
        self.running = False
        self._listing = replicas.ListingCache(paths.queue_dir, statuses=False)
        self._check: Any = None
        self._last_resync = 0.0
        #: name -> (digest, waiter) of L{confirm} calls a majority does not hold yet
        self._confirms: dict[str, list[tuple[str, Deferred]]] = {}
        #: names whose next write waits (L{later}); names written so, not pushed yet
        self._later_next: set[str] = set()
        self._later: set[str] = set()
        self._later_call: Any = None

    # --- set-up -------------------------------------------------------------------------------
    def rpc(self) -> Any:
        if self._rpc is None:
            from ganeti.rpc import RpcClient

            self._rpc = RpcClient.from_paths(self.reactor, self.paths, port=self.port)
        return self._rpc

    def candidates(self) -> dict[str, str]:
        """The other master candidates: {name: address} (from ssconf)."""
        if self._candidates is not None:
            return self._candidates()
        try:
            with open(self.paths.ssconf("master_candidates")) as handle:
                names = handle.read().split()
            with open(self.paths.ssconf("master_candidates_ips")) as handle:
                ips = handle.read().split()
            with open(self.paths.ssconf("master_node")) as handle:
                master = handle.read().strip()
        except OSError:
            return {}
        return {name: ip for name, ip in zip(names, ips) if name != master}

    def start(self) -> None:
        """Read the master's queue and resync every candidate; open a spare
        connection to each for the first new job (L{preconnect})."""
        self.running = True
        self.desired = self._listing.listing()
        self._last_resync = self.reactor.seconds()
        self._check_candidates()
        self.preconnect()

    def preconnect(self) -> None:
        """One cheap call (C{version}) to every candidate beside the resync's
        listing, so that a connection with its TLS handshake done waits in the
        pool for the first new job's push: after a failover the first job
        would otherwise pay a handshake per candidate (over a second at a high
        load) while the listings are still under way."""
        for replica in self.replicas.values():
            d = Deferred.fromCoroutine(self.rpc().run_one(replica.name, replica.address,
                                                          procedures.version.call().within(TIMEOUT)))
            d.addErrback(lambda _failure: None)  # a failure shows in the resync

    def stop(self) -> None:
        self.running = False
        if self._check is not None and self._check.active():
            self._check.cancel()
        self._check = None
        if self._later_call is not None and self._later_call.active():
            self._later_call.cancel()
        self._later_call = None
        for replica in self.replicas.values():
            if replica.retry is not None and replica.retry.active():
                replica.retry.cancel()
            replica.retry = None

    def _check_candidates(self) -> None:
        """New candidates are resynced, gone ones forgotten; periodic resync."""
        self._check = None
        if not self.running:
            return
        self.refresh_candidates()
        now = self.reactor.seconds()
        if now - self._last_resync >= RESYNC_INTERVAL:
            self._last_resync = now
            for replica in self.replicas.values():
                if replica.retry is None:
                    self._resync(replica)
        self._check = self.reactor.callLater(CHECK_INTERVAL, self._check_candidates)

    def refresh_candidates(self) -> None:
        wanted = self.candidates()
        for name in list(self.replicas):
            if wanted.get(name) != self.replicas[name].address:
                replica = self.replicas.pop(name)
                if replica.retry is not None and replica.retry.active():
                    replica.retry.cancel()
        for name, address in wanted.items():
            if name not in self.replicas:
                self.log.info("job queue: resyncing candidate {node}", node=name)
                self.replicas[name] = Replica(name, address)
                self._kick(self.replicas[name])
        self._check_confirms()  # fewer candidates: a smaller majority may hold it already

    # --- what the master's queue does -----------------------------------------------------------
    def _name(self, path: str) -> str | None:
        name = os.path.relpath(path, self.paths.queue_dir)
        return name if replicas.is_replicated(name) else None

    @contextmanager
    def later(self, path: str) -> Iterator[None]:
        """Writes of C{path} reported inside this context need not reach the
        candidates at once: each waits up to L{LATER} seconds for a newer
        version, which replaces it (a job that has not started yet: LuxiD's
        writes as it spawns the job, the job's waiting status; a candidate
        gains nothing from them, a failover runs such a job again from its
        start either way)."""
        name = self._name(path)
        if name is not None:
            self._later_next.add(name)
        try:
            yield
        finally:
            if name is not None:
                self._later_next.discard(name)

    def written(self, path: str, content: bytes) -> None:
        """A queue file was written on the master (LuxiD or a job process)."""
        name = self._name(path)
        if name is None:
            return
        digest = replicas.digest(content)
        if name in self._later_next or (name in self._later and self.desired.get(name) == digest):
            # (the second case: the same write seen again, through inotify)
            self.desired[name] = digest
            self._later.add(name)
            if self._later_call is None and self.running:
                self._later_call = self.reactor.callLater(LATER, self._push_later)
            return
        self.desired[name] = digest
        self._dirty([name])

    def _push_later(self) -> None:
        self._later_call = None
        self._dirty(sorted(self._later))

    background = written  # the name the distributor knows

    def renamed(self, pairs: list[tuple[str, str]]) -> None:
        """Job files were archived on the master."""
        names: list[str] = []
        for old, new in pairs:
            old_name, new_name = self._name(old), self._name(new)
            if old_name is None or new_name is None:
                continue
            value = self.desired.pop(old_name, None)
            if value is None:
                try:
                    with open(new, "rb") as handle:
                        value = replicas.digest(handle.read())
                except OSError:
                    continue
            self.desired[new_name] = value
            names += [old_name, new_name]
        self._dirty(names)

    def drain_changed(self, flag: bool) -> None:
        if flag:
            self.desired[replicas.DRAIN] = replicas.digest(b"")
        else:
            self.desired.pop(replicas.DRAIN, None)
        self._dirty([replicas.DRAIN])

    def _dirty(self, names: list[str]) -> None:
        self._later.difference_update(names)  # pushed now, at their newest
        if not names:
            return
        for replica in self.replicas.values():
            replica.dirty.update(names)
            self._kick(replica)

    # --- the per-candidate worker ----------------------------------------------------------------
    def _resync(self, replica: Replica) -> None:
        replica.held = None
        self._kick(replica)

    def _kick(self, replica: Replica) -> None:
        if not self.running or replica.working or replica.retry is not None:
            return
        replica.working = True
        # at the next turn: a new job's own push (L{replicate}) is under way by then
        self.reactor.callLater(0, self._start_work, replica)

    def _start_work(self, replica: Replica) -> None:
        d = Deferred.fromCoroutine(self._work(replica))
        d.addErrback(lambda f: self.log.failure("job queue replication to {node} failed", f, node=replica.name))

    async def _work(self, replica: Replica) -> None:
        try:
            while self.running and self.replicas.get(replica.name) is replica:
                if replica.held is None:
                    replica.dirty = set()
                    listing = await self._call(replica, procedures.jobqueue_list.call())
                    if listing is None or not isinstance(listing, dict):
                        self._failed(replica)
                        return
                    replica.held = {name: entry[0] for name, entry in listing.items()
                                    if isinstance(entry, list) and entry and replicas.is_replicated(name)}
                    self._check_confirms()
                    names = None
                elif replica.dirty:
                    names, replica.dirty = set(replica.dirty), set()
                else:
                    break
                for step in batched(replicas.plan(self.desired, replica.held, names)):
                    if replica.resync_asked():
                        break  # a resync was asked for meanwhile: list again
                    if isinstance(step, list):
                        done = await self._update(replica, [u.name for u in step])
                    else:
                        done = await self._apply(replica, step)
                    if not done:
                        self._failed(replica)
                        return
            if replica.failures:
                self.log.info("job queue: candidate {node} is in sync again", node=replica.name)
            replica.failures = 0
            replica.last_error = None
        finally:
            replica.working = False

    def _failed(self, replica: Replica) -> None:
        replica.failures += 1
        replica.held = None  # whatever it holds now: find out before pushing again
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (replica.failures - 1))
        if replica.failures == 1:
            self.log.warn("job queue: candidate {node} failed ({why}); retrying", node=replica.name,
                          why=replica.last_error)
        if self.running and replica.retry is None:
            replica.retry = self.reactor.callLater(delay, self._retry, replica)

    def _retry(self, replica: Replica) -> None:
        replica.retry = None
        self._kick(replica)

    def node_up(self, name: str) -> None:
        """The heartbeat roster saw node C{name} come back (or reboot): a
        candidate waiting for its next retry is resynced now."""
        replica = self.replicas.get(name)
        if replica is None:
            return
        if replica.retry is not None and replica.retry.active():
            replica.retry.cancel()
            replica.retry = None
        if replica.failures or replica.held is None:
            self._resync(replica)

    def _came_back(self, replica: Replica) -> None:
        """A push to a candidate in backoff succeeded: resync it now."""
        if replica.retry is not None and replica.retry.active():
            replica.retry.cancel()
            replica.retry = None
            self._kick(replica)

    async def _call(self, replica: Replica, call: procedures.Call[Any]) -> Any:
        """The payload of C{call} on C{replica}; C{None} on failure."""
        result = await self.rpc().run_one(replica.name, replica.address, call.within(TIMEOUT))
        if result.failed:
            replica.last_error = "%s: %s" % (call.procedure, result.fail_msg)
            return None
        return result.payload if result.payload is not None else True

    def _vpath(self, name: str) -> str:
        from ganeti.rpc import wire

        return wire.virtual_path(self.paths.root, os.path.join(self.paths.queue_dir, name))

    def _read(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.paths.queue_dir, name), "rb") as handle:
                return handle.read()
        except OSError:
            return None  # renamed or removed meanwhile: its own event follows

    async def _update(self, replica: Replica, names: list[str]) -> bool:
        """Push the master's current content of C{names} to C{replica} in one
        batch: read now, so a newer version written since the plan supersedes
        the one that was planned.  Files L{replicate} is pushing, already
        held, or gone meanwhile are left out."""
        files: list[tuple[str, bytes]] = []
        size = 0
        for name in names:
            if name in replica.inflight or name in self._later or replica.held is None:
                continue  # L{replicate} pushes it and marks it dirty when done; or it waits (L{later})
            content = self._read(name)
            if content is None or replica.held.get(name) == replicas.digest(content):
                continue
            if files and size + len(content) > BATCH_BYTES:
                replica.dirty.add(name)  # the next batch takes it
                continue
            files.append((name, content))
            size += len(content)
        if not files:
            return True
        replica.sending.update(name for name, _content in files)
        try:
            return await self._send(replica, files)
        finally:
            replica.sending.difference_update(name for name, _content in files)

    async def _send(self, replica: Replica, files: list[tuple[str, bytes]], durable: bool = False) -> bool:
        """Write C{files} on C{replica} (one C{jobqueue_update_many}, or one
        C{jobqueue_update} each on an older NodeD); record what it holds.
        The candidate fsyncs them if C{durable} or if one of them needs it
        (L{replicas.needs_durable}: not the versions of running jobs)."""
        from ganeti.rpc import wire

        if replica.batches:
            durable = durable or any(replicas.needs_durable(n, c) for n, c in files)
            call = procedures.jobqueue_update_many.call([[self._vpath(n), wire.compress(c)] for n, c in files], durable)
            result = await self.rpc().run_one(replica.name, replica.address, call.within(TIMEOUT))
            if result.failed and "Unknown procedure" in (result.fail_msg or ""):
                self.log.info("job queue: candidate {node} takes one file per call (an older NodeD)",
                              node=replica.name)
                replica.batches = False
            elif result.failed:
                replica.last_error = "jobqueue_update_many: %s" % result.fail_msg
                return False
            else:
                self._held(replica, files)
                return True
        for name, content in files:
            if await self._call(replica, procedures.jobqueue_update.call(self._vpath(name), wire.compress(content))) is None:
                return False
            self._held(replica, [(name, content)])
        return True

    def _held(self, replica: Replica, files: list[tuple[str, bytes]]) -> None:
        """C{replica} acknowledged C{files}: record them, wake L{confirm}s."""
        if replica.held is None:
            return  # a resync was asked for meanwhile: what it holds is listed again
        for name, content in files:
            replica.held[name] = replicas.digest(content)
        self._check_confirms([name for name, _content in files])

    async def _apply(self, replica: Replica, op: replicas.Operation) -> bool:
        """Run one operation (not an update) on C{replica}; record what it then holds."""
        held = replica.held
        if held is None:
            return True
        if isinstance(op, replicas.Update):
            return await self._update(replica, [op.name])
        if isinstance(op, replicas.Rename):
            answer = await self._call(replica, procedures.jobqueue_rename.call([[self._vpath(op.old), self._vpath(op.new)]]))
            if answer is None:
                return False
            value = held.pop(op.old, None)
            if isinstance(answer, list) and answer and answer[0] is None and value is not None:
                held[op.new] = value
            else:
                replica.dirty.update([op.old, op.new])  # not moved there: look again
        elif isinstance(op, replicas.SetDrain):
            if await self._call(replica, procedures.jobqueue_set_drain_flag.call(op.flag)) is None:
                return False
            if op.flag:
                held[replicas.DRAIN] = replicas.digest(b"")
            else:
                held.pop(replicas.DRAIN, None)
        else:
            if await self._call(replica, procedures.jobqueue_remove.call([self._vpath(n) for n in op.names])) is None:
                return False
            for name in op.names:
                held.pop(name, None)
        return True

    # --- new jobs: a majority before the answer ---------------------------------------------------
    async def replicate(self, files: list[tuple[str, bytes]]) -> tuple[int, int]:
        """Push C{files} to every candidate now; returns (holders, candidates), self included."""
        self.refresh_candidates()
        targets = list(self.replicas.values())
        if not targets:
            return 1, 1
        named = [(name, content) for name, content in ((self._name(p), c) for p, c in files) if name is not None]
        total = len(targets) + 1
        counts = {"holders": 1, "answered": 0}
        enough: Deferred = Deferred()

        def answered(held: Any) -> None:
            counts["answered"] += 1
            counts["holders"] += 1 if held is True else 0
            if not enough.called and (counts["holders"] >= total // 2 + 1 or counts["answered"] == len(targets)):
                enough.callback(None)  # a majority holds them: the slower candidates do not delay the answer

        for replica in targets:
            Deferred.fromCoroutine(self._push_now(replica, named)).addBoth(answered)
        await enough
        return counts["holders"], total

    async def _push_now(self, replica: Replica, files: list[tuple[str, bytes]]) -> bool:
        """Push a submission's new job files to C{replica} in one call, with
        the queue's serial file unless another push of it is under way (two
        pushes of one file are never in flight at once: they could land in
        the wrong order)."""
        files = [*files, *self._serial_for(replica)]
        for name, content in files:
            replica.inflight[name] = replicas.digest(content)
        try:
            if not await self._send(replica, files, durable=True):
                self.log.warn("job file(s) {names} not replicated to {node}: {why}",
                              names=" ".join(n for n, _c in files), node=replica.name, why=replica.last_error)
                if replica.retry is None and not replica.working:
                    self._failed(replica)
                return False
            self._came_back(replica)
            return True
        finally:
            for name, _content in files:
                replica.inflight.pop(name, None)
            # written again meanwhile: the newest goes now, unless it may wait (L{later})
            replica.dirty.update(name for name, _content in files if name not in self._later)
            self._kick(replica)

    def _serial_for(self, replica: Replica) -> list[tuple[str, bytes]]:
        """The serial file, to go with a submission's push to C{replica}, if
        no other push of it is in flight and the candidate lacks it."""
        name = "serial"
        if name in replica.inflight or name in replica.sending or name not in self.desired:
            return []
        content = self._read(name)
        if content is None or (replica.held is not None and replica.held.get(name) == replicas.digest(content)):
            return []
        return [(name, content)]

    # --- final job files: shown once a majority holds them ---------------------------------------
    def confirm(self, path: str, content: bytes) -> Deferred:
        """Fires once a majority of the candidates (this node included) hold
        C{content} as queue file C{path}.  Without other candidates, or for a
        file that is not replicated, at once."""
        name = self._name(path)
        if name is None:
            return succeed(None)
        digest = replicas.digest(content)
        if self._majority_holds(name, digest):
            return succeed(None)
        waiter: Deferred = Deferred()
        self._confirms.setdefault(name, []).append((digest, waiter))
        return waiter

    def holders(self, name: str, digest: str) -> tuple[int, int]:
        """(holders, total) of queue file C{name} with C{digest}, this node included."""
        held = sum(1 for r in self.replicas.values() if r.held is not None and r.held.get(name) == digest)
        return held + 1, len(self.replicas) + 1

    def _majority_holds(self, name: str, digest: str) -> bool:
        holders, total = self.holders(name, digest)
        return holders >= total // 2 + 1

    def _check_confirms(self, names: list[str] | None = None) -> None:
        for name in list(self._confirms) if names is None else names:
            waiters = self._confirms.get(name)
            if not waiters:
                continue
            ready = [w for w in waiters if self._majority_holds(name, w[0])]
            if not ready:
                continue
            left = [w for w in waiters if w not in ready]
            if left:
                self._confirms[name] = left
            else:
                del self._confirms[name]
            for _digest, waiter in ready:
                waiter.callback(None)

    def waiting(self) -> list[str]:
        """Queue files whose content waits for a majority (logs and tests)."""
        return sorted(self._confirms)

    def status(self) -> dict[str, dict[str, Any]]:
        """Per candidate: in sync or not, failures, last error (for logs and tests)."""
        return {name: {"in_sync": r.in_sync and r.retry is None, "failures": r.failures, "error": r.last_error}
                for name, r in self.replicas.items()}


def batched(operations: list[replicas.Operation]) -> list[replicas.Operation | list[replicas.Update]]:
    """C{operations} in order, runs of updates gathered into batches of at
    most L{BATCH_FILES} (each sent as one C{jobqueue_update_many})."""
    steps: list[replicas.Operation | list[replicas.Update]] = []
    for op in operations:
        if isinstance(op, replicas.Update):
            last = steps[-1] if steps else None
            if isinstance(last, list) and len(last) < BATCH_FILES:
                last.append(op)
            else:
                steps.append([op])
        else:
            steps.append(op)
    return steps


__all__ = ["JobDistributor", "JobReplicator", "JobWrite", "Replica", "batched"]
