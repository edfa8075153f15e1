"""A distributor stage: config.data to the master candidates, ssconf to all.

Every online master candidate but the master has one upload worker that
pushes the newest config.data it is offered with the node RPC
C{upload_file}, one upload at a time (so a candidate never goes back to an
older config), and records the serial the candidate acknowledged.  The
ssconf values go with C{write_ssconf_files} to every online node after each
durable config.data (coalesced by WConfD).  A node that did not take
either (down, unreachable) is retried on a timer with the newest config, so
it catches up when it returns.

Majority acknowledgment (L{ConfigPusher.majority}): WConfD answers a config
change only once a majority of the master candidates hold a config.data at
least as new as the change, this node's durable journal counting as one.
It is group-committed: a waiting change asks for the current config (one
snapshot, whatever its number of waiting changes) as soon as the previous
one is prepared, every candidate's worker sends the newest prepared config
when it is free, and every change whose serial is covered is released at
once.  A slow or stopped candidate delays nobody while the others make a
majority.  Without a majority within L{MAJORITY_TIMEOUT} seconds the change
is not acknowledged: the caller gets L{errors.ConfigurationError} (the
change stays in the master's configuration and is pushed on as soon as
candidates answer, but nobody was told it succeeded).

Deltas: WConfD hands every durable journal record to L{ConfigPusher.note}.
A candidate known to hold serial C{n} (it acknowledged it to this WConfD)
gets the records C{n+1 ..} with the node RPC C{config_delta}
(L{ganeti.noded.configdelta}: it replays them onto the config it keeps in
memory and journals them durably before it answers, config.data is
rewritten from them shortly after) instead of the whole config.data: a few
hundred bytes per change instead of the whole file per group commit.  A
candidate whose serial is unknown (at this WConfD's start, after a
failure), that refused a delta (it holds another serial), or whose next
record is no longer kept (L{RECORD_LIMIT}) gets the whole file as before;
the whole file is prepared only when some candidate needs it.

A node this WConfD has not reached yet (at its start, a new node) first
gets the cluster-wide files the master has (L{ancillary_files}): confd's
HMAC key, RAPI's certificate and users file (RAPI runs on every
candidate and serves locally once its node is master), the cluster
domain secret.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet.defer import Deferred, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from ganeti import errors, ports, ssconf
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.rpc import procedures

#: seconds between attempts to reach nodes that missed a config
RETRY_INTERVAL = 5.0
PUSH_TIMEOUT = 60.0
#: seconds a config change waits for a majority of candidates before it is refused
MAJORITY_TIMEOUT = 30.0
#: seconds a change waits for a majority before a warning names the silent candidates
SLOW_AFTER = 5.0
#: journal records kept for deltas (a candidate further behind gets the whole file)
RECORD_LIMIT = 4096
#: most records sent in one C{config_delta}
DELTA_MAX = 512


def needed(total: int) -> int:
    """How many of C{total} holders (this node included) are a strict majority."""
    return total // 2 + 1


class ConfigPusher:
    log = Logger()

    def __init__(
        self,
        paths: Paths,
        reactor: IReactor,
        config: Callable[[], ConfigData],
        snapshot: Callable[[], tuple[bytes, int]],
        *,
        rpc: Any = None,
        port: int = ports.NODED,
        retry_interval: float = RETRY_INTERVAL,
        majority_timeout: float = MAJORITY_TIMEOUT,
        values: Callable[[ConfigData], dict[str, list[str]]] = ssconf.compute,
    ) -> None:
        self.paths = paths
        self.reactor = reactor
        self.config = config
        self.snapshot = snapshot
        self.port = port
        self.retry_interval = retry_interval
        self.majority_timeout = majority_timeout
        self.values = values
        self._rpc = rpc
        self._retry: Any = None
        #: node name -> last serial its ssconf files confirmed
        self.confirmed: dict[str, int] = {}
        #: candidate name -> serial of the config.data it acknowledged
        self.held: dict[str, int] = {}
        #: the newest config prepared for upload: (serial, upload_file arguments)
        self.ready: tuple[int, list[Any]] | None = None
        #: number of config.data uploads sent (tests, benchmarks)
        self.uploads = 0
        #: number of C{config_delta} calls sent (tests, benchmarks)
        self.deltas = 0
        #: serial -> the durable journal record of that change (without the request's answer)
        self.records: dict[int, dict[str, Any]] = {}
        self._last_record = 0
        #: candidate -> the serial it held before it refused a delta: no whole file older than that
        self._floor: dict[str, int] = {}
        self._offered = 0
        #: the newest serial an upload was started with
        self._sending = 0
        self._preparing = False
        self._next: tuple[bytes, int] | None = None
        self._wanted = 0
        self._busy: set[str] = set()
        self._waiters: list[tuple[int, Deferred]] = []
        self._short = False
        self._slow_check: Any = None
        self._members: dict[str, str] | None = None
        self._config_lagging: set[str] = set()
        self._ssconf_lagging: set[str] = set()

    @property
    def lagging(self) -> set[str]:
        """Nodes that missed their last push (config.data or ssconf)."""
        return self._config_lagging | self._ssconf_lagging

    def rpc(self) -> Any:
        if self._rpc is None:
            from ganeti.rpc import RpcClient

            self._rpc = RpcClient.from_paths(self.reactor, self.paths, port=self.port)
        return self._rpc

    # --- who takes config.data --------------------------------------------------------------
    def candidates(self) -> dict[str, str]:
        """The online master candidates but the master: {name: address}.

        Computed again for each config offered (the set changes only with
        the config), not for each waiting change.
        """
        if self._members is None:
            self._members = self._compute_members()
        return self._members

    def _compute_members(self) -> dict[str, str]:
        config = self.config()
        master = config.cluster.master_node
        return {n.name: n.primary_ip or "" for n in config.nodes.values()
                if n.name and n.uuid != master and n.master_candidate and not n.offline}

    def holders(self, serial: int, candidates: dict[str, str] | None = None) -> tuple[int, int]:
        """(holders, total) of a config at least as new as C{serial}, this node included."""
        names = self.candidates() if candidates is None else candidates
        return 1 + sum(1 for name in names if self.held.get(name, 0) >= serial), 1 + len(names)

    # --- majority acknowledgment ------------------------------------------------------------
    def majority(self, serial: int) -> Deferred:
        """Fires once a majority of candidates hold config serial C{serial} or newer.

        Fails with L{errors.ConfigurationError} after C{majority_timeout}
        seconds without one.
        """
        holders, total = self.holders(serial)
        if holders >= needed(total):
            return succeed(serial)
        waiter: Deferred = Deferred()
        self._waiters.append((serial, waiter))
        self._waiters.sort(key=lambda w: w[0])
        timer = self.reactor.callLater(self.majority_timeout, self._expire, serial, waiter)

        def stop_timer(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            return result

        waiter.addBoth(stop_timer)
        self._watch_slow()
        if serial > self._wanted:
            self._wanted = serial
            self._kick_all()  # deltas
            self._want_snapshot()
        return waiter

    # --- deltas -----------------------------------------------------------------------------
    def note(self, record: dict[str, Any]) -> None:
        """Keep the durable journal record C{record} for deltas."""
        serial = record.get("s")
        if not isinstance(serial, int):
            return
        if "full" in record:  # a whole config written (as big as the file): the candidates get the file
            self.records.clear()
            return
        self.records[serial] = {key: value for key, value in record.items() if key != "r"}
        self._last_record = max(self._last_record, serial)
        while len(self.records) > RECORD_LIMIT:
            del self.records[min(self.records)]

    def _delta(self, name: str) -> tuple[int, int, list[dict[str, Any]]] | None:
        """(base, target, records) that bring candidate C{name} forward, if any."""
        base = self.held.get(name)
        if base is None:
            return None
        records: list[dict[str, Any]] = []
        serial = base + 1
        while serial in self.records and len(records) < DELTA_MAX:
            records.append(self.records[serial])
            serial += 1
        return (base, serial - 1, records) if records else None

    def _needs_whole(self, name: str) -> bool:
        """Whether candidate C{name} can be brought forward only by the whole file."""
        base = self.held.get(name)
        if base is None:
            return True
        newest = max(self._wanted, self._last_record)
        return newest > base and base + 1 not in self.records

    def _whole_allowed(self, name: str) -> bool:
        """Whether the prepared whole file brings C{name} forward (and is not
        older than what it held before it refused a delta)."""
        if self.ready is None:
            return False
        serial = self.ready[0]
        return self.held.get(name, 0) < serial and serial >= self._floor.get(name, 0)

    def _expire(self, serial: int, waiter: Deferred) -> None:
        self._waiters = [(s, w) for s, w in self._waiters if w is not waiter]
        holders, total = self.holders(serial)
        self.log.error(
            "config serial {serial} not acknowledged: {holders} of {total} master candidates hold it after {t}s "
            "(a majority is {need}); lagging: {lagging}",
            serial=serial, holders=holders, total=total, t=self.majority_timeout, need=needed(total),
            lagging=", ".join(sorted(self.lagging)) or "none")
        waiter.errback(errors.ConfigurationError(
            "config change (serial %d) not acknowledged: only %d of %d master candidates hold it after %gs, "
            "a majority (%d) is needed; it is kept on the master and pushed again, but may be lost if the master "
            "fails over now" % (serial, holders, total, self.majority_timeout, needed(total))))

    def _release(self) -> None:
        if not self._waiters:
            return
        candidates = self.candidates()
        ready = []
        while self._waiters:
            serial, waiter = self._waiters[0]
            holders, total = self.holders(serial, candidates)
            if holders < needed(total):
                break
            ready.append(self._waiters.pop(0))
        if ready and self._short:
            self._short = False
            self.log.info("config writes acknowledged again: a majority of master candidates holds serial {serial}",
                          serial=ready[-1][0])
        for serial, waiter in ready:
            waiter.callback(serial)

    def _watch_slow(self) -> None:
        if self._slow_check is None or not self._slow_check.active():
            self._slow_check = self.reactor.callLater(min(SLOW_AFTER, self.majority_timeout / 2), self._check_slow)

    def _check_slow(self) -> None:
        """Changes wait long for a majority: say which candidates do not answer."""
        self._slow_check = None
        if not self._waiters:
            return
        serial = self._waiters[0][0]
        holders, total = self.holders(serial)
        missing = sorted(name for name in self.candidates() if self.held.get(name, 0) < serial)
        self._short = True
        self.log.warn("config writes wait: serial {serial} is held by {holders} of {total} master candidates, a majority "
                      "({need}) must hold a change before it is acknowledged; not yet: {missing}",
                      serial=serial, holders=holders, total=total, need=needed(total), missing=", ".join(missing))
        self._watch_slow()

    def _want_snapshot(self) -> None:
        """A waiter needs a newer config than the one offered: offer the current
        one.  While every candidate is busy, at most one config is prepared
        ahead (changes meanwhile join the next one)."""
        if self._preparing or self._wanted <= self._offered:
            return
        if not any(self._needs_whole(name) for name in self.candidates()):
            return  # deltas bring everyone forward
        unsent = self.ready is not None and self.ready[0] > self._sending
        if unsent and all(name in self._busy for name in self.candidates()):
            return
        data, serial = self.snapshot()
        self.offer(data, serial)

    # --- config.data uploads ---------------------------------------------------------------
    def offer(self, data: bytes, serial: int) -> None:
        """Make C{data} (config serial C{serial}) the config the candidates get next."""
        if serial <= self._offered:
            return
        if not any(self._needs_whole(name) for name in self.candidates()):
            return  # deltas bring everyone forward: no whole file to prepare
        if self._preparing:
            self._next = (data, serial)
            return
        self._offered = serial
        self._members = None
        self._preparing = True
        d = deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._details, data)

        def prepared(details: list[Any]) -> None:
            if self.ready is None or serial > self.ready[0]:
                self.ready = (serial, details)
            self._kick_all()

        def done(_: Any) -> None:
            self._preparing = False
            pending, self._next = self._next, None
            if pending is not None:
                self.offer(*pending)
            if not self._preparing:
                self._want_snapshot()

        d.addCallback(prepared)
        d.addErrback(lambda f: self.log.failure("cannot prepare config serial {serial} for upload", f, serial=serial))
        d.addCallback(done)

    def _details(self, data: bytes) -> list[Any]:
        from ganeti.rpc import wire

        return wire.file_details(wire.virtual_path(self.paths.root, self.paths.config_data), data, mode=0o640)

    def _kick_all(self) -> None:
        for name, address in self.candidates().items():
            self._kick(name, address)

    def _kick(self, name: str, address: str) -> None:
        if name in self._busy or (self._delta(name) is None and not self._whole_allowed(name)):
            return
        self._busy.add(name)
        d = Deferred.fromCoroutine(self._upload(name, address))
        d.addErrback(lambda f: self.log.failure("uploading config.data to {node} failed", f, node=name))

    async def _upload(self, name: str, address: str) -> None:
        """Send the newest prepared config to candidate C{name} until it holds it."""
        try:
            while True:
                delta = self._delta(name)
                if delta is not None:
                    if not await self._send_delta(name, address, *delta):
                        return
                    continue
                if not self._whole_allowed(name):
                    break
                assert self.ready is not None
                serial, details = self.ready
                self._sending = max(self._sending, serial)
                self.uploads += 1
                self._want_snapshot()  # prepare the next one meanwhile
                result = await self.rpc().run_one(name, address, procedures.upload_file.call(details).within(PUSH_TIMEOUT))
                if result.failed:
                    if name not in self.lagging:
                        self.log.warn("node {node} missed config serial {serial}: {why}", node=name, serial=serial,
                                      why=result.fail_msg)
                    self._config_lagging.add(name)
                    self._schedule_retry()
                    return
                self._floor.pop(name, None)
                self._holds(name, serial)
        finally:
            self._busy.discard(name)
        self._want_snapshot()

    def _holds(self, name: str, serial: int) -> None:
        self.held[name] = max(self.held.get(name, 0), serial)
        if name in self._config_lagging:
            self._config_lagging.discard(name)
            if name not in self.lagging:
                self.log.info("node {node} caught up with config serial {serial}", node=name, serial=serial)
        self._release()

    async def _send_delta(self, name: str, address: str, base: int, target: int,
                          records: list[dict[str, Any]]) -> bool:
        """Send candidate C{name} the records after C{base}; whether it took them."""
        self.deltas += 1
        result = await self.rpc().run_one(name, address,
                                          procedures.config_delta.call(base, records).within(PUSH_TIMEOUT))
        if not result.failed:
            self._holds(name, target)
            return True
        if result.fail_msg and "config_delta refused" in result.fail_msg:
            # it holds another config (or cannot take deltas): the whole file, never older than what it had
            self.log.info("node {node} refused config serials {base}+: {why}; sending the whole config.data",
                          node=name, base=base + 1, why=result.fail_msg)
            self.held.pop(name, None)
            self._floor[name] = base
            data, serial = self.snapshot()
            if self.ready is None or self.ready[0] < serial:
                self.offer(data, serial)
            return self._whole_allowed(name)
        if name not in self.lagging:
            self.log.warn("node {node} missed config serial {serial}: {why}", node=name, serial=target,
                          why=result.fail_msg)
        self._config_lagging.add(name)
        self._schedule_retry()
        return False

    # --- the distributor stage: after each durable config.data ---------------------------------
    def __call__(self, data: bytes, serial: int) -> Deferred:
        return Deferred.fromCoroutine(self.push(data, serial))

    async def push(self, data: bytes, serial: int) -> None:
        config = self.config()
        master = config.cluster.master_node
        nodes = [n for n in config.nodes.values() if n.uuid != master and not n.offline]
        self._members = None
        if not nodes:
            self._config_lagging.clear()
            self._ssconf_lagging.clear()
            return
        pool = self.reactor.getThreadPool()
        everyone = {n.name: n.primary_ip or "" for n in nodes if n.name}
        rpc = self.rpc()
        newcomers = {name: ip for name, ip in everyone.items() if name not in self.confirmed}
        if newcomers:  # the secrets every node needs (confd's key, RAPI's certificate, ...)
            for ancillary in await deferToThreadPool(self.reactor, pool, self._ancillary):
                await rpc.run(newcomers, procedures.upload_file.call(ancillary).within(PUSH_TIMEOUT))
        self.offer(data, serial)
        # the members may have changed with this config: a candidate new to them (promoted again) gets
        # the changes it missed as deltas now, or a change waiting for it would wait for nothing
        self._kick_all()
        values = await deferToThreadPool(self.reactor, pool, self.values, config)
        writes = await rpc.run(everyone, procedures.write_ssconf_files.call(values).within(PUSH_TIMEOUT))
        for name in everyone:
            if writes[name].failed:
                if name not in self.lagging:
                    self.log.warn("node {node} missed config serial {serial}: {why}", node=name, serial=serial,
                                  why=writes[name].fail_msg)
                self._ssconf_lagging.add(name)
            else:
                self.confirmed[name] = serial
                if name in self._ssconf_lagging:
                    self._ssconf_lagging.discard(name)
                    if name not in self.lagging:
                        self.log.info("node {node} caught up with config serial {serial}", node=name, serial=serial)
        self._ssconf_lagging &= set(everyone)
        self._config_lagging &= set(self.candidates())
        if self.lagging:
            self._schedule_retry()

    def _ancillary(self) -> list[list[Any]]:
        return ancillary_files(self.paths)

    def _schedule_retry(self) -> None:
        if self._retry is None or not self._retry.active():
            self._retry = self.reactor.callLater(self.retry_interval, self._retry_lagging)

    def _retry_lagging(self) -> None:
        self._retry = None
        data, serial = self.snapshot()
        d = self(data, serial)
        d.addErrback(lambda f: self.log.failure("retrying config distribution failed", f))
        self._kick_all()

    def stop(self) -> None:
        for call in (self._retry, self._slow_check):
            if call is not None and call.active():
                call.cancel()
        self._retry = self._slow_check = None


def ancillary_files(paths: Paths) -> list[list[Any]]:
    """C{upload_file} arguments for the cluster-wide files this node has
    (missing ones are left out: the RAPI users file is optional, and so is the
    web console's list of revoked sessions)."""
    from ganeti.rpc import wire

    files = []
    for path, mode in (
        (paths.hmac_key, 0o400),
        (paths.rapi_pem, 0o440),
        (paths.rapi_users, 0o640),
        (paths.ui_revoked, 0o640),  # the web console's logouts (ganeti.rapi.ui.revocation)
        (paths.cluster_domain_secret, 0o400),
    ):
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        files.append(wire.file_details(wire.virtual_path(paths.root, path), data, mode=mode))
    return files


class RecordingDistributor:
    """The default distributor: remembers what it was handed, sends nothing.

    The node daemon's RPC replaces it with one that pushes config.data to
    the master candidates.
    """

    log = Logger()

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, data: bytes, serial: int) -> None:
        self.calls.append(serial)
        self.log.debug("config serial {serial} ready for distribution ({size} bytes)", serial=serial, size=len(data))
