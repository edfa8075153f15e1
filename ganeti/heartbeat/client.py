"""NodeD's side of the heartbeat: one connection to the master's LuxiD.

    HeartbeatClient(reactor, identity, lookup, creator).setServiceParent(root)

The client looks the master up (L{MasterLookup}: this node's ssconf; after
a failed attempt at that address, the master candidates' confd, the reply
with the highest serial winning), connects with mutual TLS, says hello and
beats every L{BEAT_INTERVAL} seconds (half the cluster's liveness timeout when
that is shorter, followed as it changes).  A LuxiD that answers "the master is
X" is left for X.  A lost or failed connection is retried after a jittered
backoff (L{Backoff}: 0.1 s growing to 2 s), the master looked up again each
time.  The hello asks LuxiD to answer beats; when it agrees, a connection
from which nothing arrived for the liveness timeout is left as dead (a
paused or stuck LuxiD: L{ganeti.ha.liveness.master_silent}), and the
master counts as lost from the last time it was heard.  A connection not
accepted within that timeout and a little more is left too.  Many clients can share one process (the benchmark runs hundreds).

When this node's ssconf is rewritten (a failover names a new master:
L{HeartbeatClient.master_moved}), a client without a master tries again at
once with a fresh backoff, trusting ssconf over the candidates' confd for
L{SSCONF_FRESH} seconds: the new master's LuxiD starts a moment after, and
a node that voted for it must hear it soon (until it does, a vote holds
back its clock of the master's loss, L{ganeti.ha.election.lost_for}).
"""

from __future__ import annotations

import json
import os
import random
from typing import Any, Awaitable, Callable, cast

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import ITCPTransport
from twisted.internet.protocol import Factory
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.protocols.basic import Int32StringReceiver

from ganeti import errors
from ganeti.asyncutil import no_delay, tcp_client_endpoint
from ganeti.ha import params as ha_params
from ganeti.ha.liveness import master_silent
from ganeti.heartbeat import wire
from ganeti.paths import Paths
from ganeti.reactors import IReactor, ITimeTCPReactor
from ganeti.ssconf import SimpleStore

#: seconds between two beats
BEAT_INTERVAL = 1.0
#: seconds a TCP connection attempt may take
CONNECT_TIMEOUT = 2.0
#: seconds unacknowledged beats may wait before the kernel drops the connection
USER_TIMEOUT = 5.0
#: seconds the candidates' confd have to name the master
CONFD_TIMEOUT = 1.0
#: seconds a rewritten ssconf is trusted over the candidates' confd after a failed attempt
SSCONF_FRESH = 5.0
#: the file under a node's root that overrides the kernel's boot id (tests)
BOOT_ID_FILE = "boot_id"
KERNEL_BOOT_ID = "/proc/sys/kernel/random/boot_id"

#: C{(master name, address, port)}
Target = tuple[str, str, int]


class Backoff:
    """Jittered exponential backoff: C{initial} doubling up to C{maximum}.

    Each delay is the current step times a random factor in
    C{[1 - jitter, 1]}, so that nodes losing the master together do not
    come back together.
    """

    def __init__(self, initial: float = 0.1, maximum: float = wire.MAX_RECONNECT_DELAY, factor: float = 2.0, jitter: float = 0.5,
                 rand: Callable[[], float] = random.random) -> None:
        if not 0 < initial <= maximum or factor < 1 or not 0 <= jitter < 1:
            raise ValueError("bad backoff parameters")
        self.initial, self.maximum, self.factor, self.jitter = initial, maximum, factor, jitter
        self._rand = rand
        self._step = initial

    def next(self) -> float:
        """The delay before the next attempt; the step grows."""
        delay = self._step * (1.0 - self.jitter * self._rand())
        self._step = min(self.maximum, self._step * self.factor)
        return delay

    def reset(self) -> None:
        """A connection was accepted: start from C{initial} again."""
        self._step = self.initial


def read_boot_id(paths: Paths) -> str:
    """This node's boot id: C{ROOT/var/lib/ganeti/boot_id} if present, else the kernel's."""
    for path in (os.path.join(paths.data_dir, BOOT_ID_FILE), KERNEL_BOOT_ID):
        try:
            with open(path) as handle:
                value = handle.read().strip()
        except OSError:
            continue
        if value:
            return value[:256]
    return ""


def node_hello(paths: Paths) -> dict[str, Any] | None:
    """The hello of the node of C{paths} (None: it has no identity yet)."""
    from ganeti import __version__
    from ganeti.daemons import node_file

    try:
        with open(node_file(paths)) as handle:
            name = str(json.load(handle).get("name", ""))
    except (OSError, ValueError, AttributeError):
        return None
    if not name:
        return None
    serial = None
    try:
        with open(paths.config_data, "rb") as handle:
            import orjson

            data = orjson.loads(handle.read())
        if isinstance(data, dict):
            given: Any = data.get("serial_no")
            serial = int(given)
        else:
            serial = None
    except (OSError, ValueError, TypeError):
        serial = None
    return wire.hello(name, "", read_boot_id(paths), serial, __version__, beats=True)


class MasterLookup:
    """Where the master's LuxiD is: ssconf first, the candidates' confd
    when the ssconf master just failed (its ssconf may be stale)."""

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactor, port: int, confd_port: int | None = None) -> None:
        self.paths, self.reactor, self.port = paths, reactor, port
        self.confd_port = confd_port

    def from_ssconf(self) -> Target | None:
        store = SimpleStore(self.paths)
        try:
            master = store.get_master_node()
            address = store.get_node_primary_ips().get(master, "")
        except errors.ConfigurationError:
            return None
        return (master, address, self.port) if master and address else None

    async def from_confd(self) -> Target | None:
        from ganeti.confd import wire as cwire
        from ganeti.confd.client import ConfdClient, ConfdTimeout

        kwargs: dict[str, Any] = {"timeout": CONFD_TIMEOUT}
        if self.confd_port is not None:
            kwargs["port"] = self.confd_port
        try:
            client = ConfdClient.from_paths(self.reactor, self.paths, **kwargs)
        except (errors.GenericError, OSError, ValueError):
            return None
        try:
            query = {cwire.REQQ_FIELDS: [cwire.REQFIELD_NAME, cwire.REQFIELD_MNODE_PIP]}
            result = await client.query(cwire.REQ_CLUSTER_MASTER, query, wait="all")
        except ConfdTimeout:
            return None
        finally:
            client.close()
        if not result.ok or not isinstance(result.answer, list) or len(result.answer) != 2:
            return None
        name, address = result.answer
        return (str(name), str(address), self.port) if name and address else None

    async def __call__(self, previous_failed: bool) -> Target | None:
        local = self.from_ssconf()
        if previous_failed or local is None:
            found = await self.from_confd()
            if found is not None:
                if local is None or found[:2] != local[:2]:
                    self.log.info("heartbeat: confd names {name} ({address}) the master", name=found[0],
                                  address=found[1])
                return found
        return local


def _has_setsockopt(handle: Any) -> bool:
    try:
        return callable(getattr(handle, "setsockopt", None))
    except Exception:  # a wrapper may raise for socket methods it has no socket for
        return False


def dead_peer_timeout(transport: Any, seconds: float) -> bool:
    """Make the kernel drop the connection when what we send stays
    unacknowledged for C{seconds} (C{TCP_USER_TIMEOUT}; keepalives on):
    a master that vanished without closing (power loss, partition) is left
    within seconds, and the client looks for the master again.  Whether
    the options could be set (the TCP transport is found under TLS)."""
    import socket

    # a TLS layer may have a getHandle of its own (pyOpenSSL's: its connection, no socket): look below it
    handle = None
    while transport is not None:
        getter = getattr(transport, "getHandle", None)
        candidate = getter() if getter is not None else None
        if isinstance(candidate, socket.socket) or (candidate is not None and _has_setsockopt(candidate)):
            handle = candidate
            break
        transport = getattr(transport, "transport", None)
    if handle is None:
        return False
    try:
        handle.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        handle.setsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", 18), int(seconds * 1000))
    except (OSError, AttributeError):
        return False
    return True


class HeartbeatClientProtocol(Int32StringReceiver):
    MAX_LENGTH = wire.MAX_FRAME

    @property
    def _connected(self) -> ITCPTransport:
        """The transport, in methods that run only while connected."""
        return cast(ITCPTransport, self.transport)

    def __init__(self, client: HeartbeatClient) -> None:
        self.client = client
        self.accepted = False
        #: whether LuxiD answers beats (it said so when it accepted)
        self.answered = False
        self.connected_at = client.reactor.seconds()
        #: when the last byte from LuxiD arrived (reactor seconds; C{None}: none yet)
        self.last_heard: float | None = None
        #: whether this connection was left because LuxiD fell silent
        self.silent = False
        self._beats: LoopingCall | None = None
        #: beats sent on this connection, and LuxiD's answers to them: it answers every beat, in order,
        #: once it has handled the frames sent before it (L{flushed})
        self.beats_sent = 0
        self.beats_answered = 0
        self._flushes: list[tuple[int, Deferred[None]]] = []

    def connectionMade(self) -> None:
        self.connected_at = self.client.reactor.seconds()
        dead_peer_timeout(self.transport, USER_TIMEOUT)
        no_delay(self.transport)
        self.sendString(wire.encode(self.client.hello))
        self._beats = LoopingCall(self._beat)
        self._beats.clock = self.client.reactor
        self._beats.start(self.client.beat_interval(), now=False)

    def dataReceived(self, data: bytes) -> None:
        self.last_heard = self.client.reactor.seconds()
        super().dataReceived(data)

    def _beat(self) -> None:
        timeout = self.client.silence_timeout()
        if timeout is not None and master_silent(self.client.reactor.seconds(), self.connected_at, self.last_heard,
                                                 self.accepted, self.answered, timeout):
            self.silent = True
            self.client.log.warn("heartbeat: nothing from {master} for {t} s: leaving it as dead",
                                 master=self.client.master if self.accepted else "LuxiD", t=timeout)
            transport = cast(ITCPTransport, self.transport)
            abort = getattr(transport, "abortConnection", None)
            (abort or transport.loseConnection)()
            return
        self._send_beat()
        interval = self.client.beat_interval()
        if self._beats is not None and interval != self._beats.interval:
            self._beats.interval = interval  # the cluster's liveness timeout changed

    def _send_beat(self) -> None:
        self.sendString(wire.BEAT_FRAME_BODY)
        self.beats_sent += 1

    def flushed(self) -> Deferred[None]:
        """Fires once LuxiD has handled every frame sent on this connection so far
        (a report: merged, what its next query reads): a beat sent now is
        answered after them.  At once when LuxiD does not answer beats (an older
        one) or has not accepted the connection; on the connection's loss."""
        if not (self.accepted and self.answered) or self.transport is None:
            return succeed(None)
        self._send_beat()
        d: Deferred[None] = Deferred()
        self._flushes.append((self.beats_sent, d))
        return d

    def stringReceived(self, body: bytes) -> None:
        if body == wire.BEAT_FRAME_BODY:  # LuxiD's answer to a beat (hearing it: dataReceived)
            self.beats_answered += 1
            while self._flushes and self._flushes[0][0] <= self.beats_answered:
                self._flushes.pop(0)[1].callback(None)
            return
        try:
            message = wire.decode(body)
        except wire.BadMessage as e:
            self.client.log.warn("heartbeat: bad answer from LuxiD: {why}", why=str(e))
            self._connected.loseConnection()
            return
        if message["t"] == wire.ACCEPTED:
            self.accepted = True
            self.answered = wire.wants_beats(message)
            self.client.connected(self, message["master"], message.get("args"))
        elif message["t"] == wire.PARAMS:
            if self.client.reporter is not None:
                self.client.reporter.params(message["args"])
        elif message["t"] == wire.REDIRECT:
            self.client.redirected((message["master"], message["address"], message["port"]))
            self._connected.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        if self._beats is not None and self._beats.running:
            self._beats.stop()
        flushes, self._flushes = self._flushes, []
        for _sent, d in flushes:  # what was not handled is lost (a new connection begins with a full report)
            d.callback(None)
        self.client.lost(self)


class HeartbeatClient(Service):
    """One node's heartbeat connection (see the module docstring).

    @param identity: the hello to send, read anew for every connection
        (None: the node has no identity yet; try again later)
    @param lookup: C{await lookup(previous_failed)} -> the master's L{Target} or None
    @param creator: the TLS client connection creator (None: plain TCP, tests only)
    @param silence: the liveness timeout (or what returns it): seconds
        without a byte from LuxiD after which a connection is left as dead
        (L{ganeti.ha.liveness.master_silent}); C{None}: left to TCP
    @ivar reporter: the L{ganeti.heartbeat.reporter.StateReporter} told of
        every accepted connection (a full report then) and of new report
        arguments, or None (no reports)
    """

    log = Logger()

    def __init__(self, reactor: ITimeTCPReactor, identity: Callable[[], dict[str, Any] | None],
                 lookup: Callable[[bool], Awaitable[Target | None]], creator: Callable[[], Any] | None, *,
                 interval: float | Callable[[], float] = BEAT_INTERVAL, backoff: Backoff | None = None,
                 silence: float | Callable[[], float] | None = None) -> None:
        self.reactor = reactor
        self.identity = identity
        self.lookup = lookup
        self.creator = creator
        self.interval = interval
        self.silence = silence
        self.backoff = backoff or Backoff()
        self.reporter: Any = None
        self.hello: dict[str, Any] = {}
        self.protocol: HeartbeatClientProtocol | None = None
        #: the connection made but not accepted yet, if any
        self.pending: HeartbeatClientProtocol | None = None
        self.master: str | None = None
        self._redirect: Target | None = None
        self._failed = False
        self._retry: Any = None
        self._attempt: Deferred[Any] | None = None
        self._ssconf_fresh_until = float("-inf")
        self.connects = 0
        #: since when (reactor seconds) no master has accepted this node's
        #: connection: its start, or the loss of the last accepted one
        #: (C{None}: connected to the master now); automatic failover reads it
        self.lost_since: float | None = None

    def beat_interval(self) -> float:
        """Seconds between beats now (C{interval}, or what it returns)."""
        return self.interval() if callable(self.interval) else self.interval

    def silence_timeout(self) -> float | None:
        """Seconds of silence after which a connection is left (C{None}: never)."""
        return self.silence() if callable(self.silence) else self.silence

    def startService(self) -> None:
        super().startService()
        self.lost_since = self.reactor.seconds()
        self._start_attempt()

    def stopService(self) -> Any:
        super().stopService()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        if self._attempt is not None:
            self._attempt.cancel()
        for protocol in (self.protocol, self.pending):
            if protocol is not None:
                cast(ITCPTransport, protocol.transport).loseConnection()
        if self.reporter is not None:
            self.reporter.stop()
        return None

    def _start_attempt(self) -> None:
        self._retry = None
        if not self.running:
            return
        self._attempt = Deferred.fromCoroutine(self._connect())
        self._attempt.addErrback(self._attempt_failed)

    def _attempt_failed(self, failure: Any) -> None:
        from twisted.internet.defer import CancelledError

        self._attempt = None
        if failure.check(CancelledError) and not self.running:
            return
        self._failed = True
        self.log.debug("heartbeat: connection failed: {why}", why=failure.getErrorMessage())
        self._schedule()

    def _schedule(self) -> None:
        if self.running and self._retry is None:
            self._retry = self.reactor.callLater(self.backoff.next(), self._start_attempt)

    async def _connect(self) -> None:
        hello = self.identity()
        target, self._redirect = self._redirect, None
        if target is None and hello is not None:
            target = await self.lookup(self._failed and self.reactor.seconds() >= self._ssconf_fresh_until)
        if hello is None or target is None:
            self._attempt = None
            self._schedule()
            return
        self.hello = hello
        _name, address, port = target
        endpoint: Any = tcp_client_endpoint(self.reactor, address, port, CONNECT_TIMEOUT)
        if self.creator is not None:
            from ganeti.tlsbio import wrap_client

            endpoint = wrap_client(self.creator(), endpoint)
        self.pending = await endpoint.connect(Factory.forProtocol(lambda: HeartbeatClientProtocol(self)))
        self._attempt = None

    def instances_changed(self) -> Deferred[None]:
        """An instance procedure changed what runs here (a migration accepted or
        finalized): look at the node and report now, and watch the event
        monitor of a new qemu at once (L{ganeti.heartbeat.kvmd}), rather than
        at the next poll; fires once LuxiD has handled the report (L{flushed}),
        not once it is written: the job's next step, or the query after the
        job, may reach LuxiD first (through other connections).  A look that
        found nothing new waits all the same: an earlier look (the fake
        hypervisor's file watched) may have sent the change a moment before."""
        if self.running and self.reporter is not None:
            d: Deferred[None] = self.reporter.check()
            d.addCallback(lambda _: self.flushed())
            return d
        return succeed(None)

    def flushed(self) -> Deferred[None]:
        """Fires once LuxiD has handled what was sent to it so far
        (L{HeartbeatClientProtocol.flushed}); at once without a connection."""
        protocol = self.protocol
        return protocol.flushed() if protocol is not None else succeed(None)

    def master_moved(self) -> None:
        """This node's ssconf was rewritten (it may name a new master): without
        a master now, try again at once (no attempt under way) with a fresh
        backoff, ssconf trusted for L{SSCONF_FRESH} seconds; a connection not
        accepted yet (a stopped master's kernel completed it) is left for
        the new master."""
        if not self.running or self.protocol is not None:
            return
        self._ssconf_fresh_until = self.reactor.seconds() + SSCONF_FRESH
        self.backoff.reset()
        pending = self.pending
        if pending is not None and not pending.accepted and pending.transport is not None:
            abort = getattr(pending.transport, "abortConnection", None)
            (abort or pending.transport.loseConnection)()
            return
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
            self._start_attempt()

    # --- from the protocol ---------------------------------------------------------------
    def connected(self, protocol: HeartbeatClientProtocol, master: str, args: dict[str, Any] | None = None) -> None:
        self.protocol, self.master = protocol, master
        if self.pending is protocol:
            self.pending = None
        self.lost_since = None
        self._failed = False
        self.connects += 1
        self.backoff.reset()
        if self.reporter is not None:
            self.reporter.connected(args)

    def redirected(self, target: Target) -> None:
        self.log.info("heartbeat: not the master; the master is {name} ({address})", name=target[0],
                      address=target[1])
        self._redirect = target

    def lost(self, protocol: HeartbeatClientProtocol) -> None:
        if self.pending is protocol:
            self.pending = None
        if self.protocol is protocol:
            self.protocol = None
            # a silent master is lost since it was last heard (it may have been paused for a while)
            heard = protocol.last_heard if protocol.silent else None
            self.lost_since = heard if heard is not None else self.reactor.seconds()
            if protocol.silent:
                self._failed = True  # its kernel still answers: ask the candidates' confd too
        elif not protocol.accepted and self._redirect is None:
            self._failed = True  # closed before being accepted: look further next time
        self._schedule()

    def send(self, message: dict[str, Any]) -> bool:
        """Send C{message} (a report) if connected; whether it was sent."""
        if self.protocol is None:
            return False
        self.protocol.sendString(wire.encode(message))
        return True


def tls_creator(paths: Paths) -> Callable[[], Any]:
    """The TLS creator of node RPC's client: present C{server.pem}, pin the cluster certificate."""
    cache: list[Any] = []

    def creator() -> Any:
        if not cache:
            from ganeti.rpc.tls import ReloadingPolicy

            cache.append(ReloadingPolicy(paths).creatorForNetloc(b"", 0))
        return cache[0]

    return creator


def heartbeat_client(paths: Paths, reactor: IReactor, port: int, reports: bool = True, *,
                     confd_port: int | None = None) -> HeartbeatClient:
    """NodeD's heartbeat client for the node of C{paths} (waits for an
    identity and a certificate), pushing the node's state unless C{reports} is false.

    @param confd_port: of the candidates' confd (C{None}: confd's default)
    """
    ha = ha_params.Watch(paths)  # beats at least twice per liveness timeout
    client = HeartbeatClient(reactor, lambda: node_hello(paths), MasterLookup(paths, reactor, port, confd_port),
                             tls_creator(paths), interval=lambda: ha_params.beat_interval(ha.current(), BEAT_INTERVAL),
                             silence=lambda: ha.current().liveness_timeout)
    if reports:
        from ganeti.heartbeat.reporter import node_reporter

        client.reporter = node_reporter(paths, reactor, client.send)
    return client


__all__ = ["Backoff", "HeartbeatClient", "HeartbeatClientProtocol", "MasterLookup", "heartbeat_client", "node_hello",
           "read_boot_id", "tls_creator"]
