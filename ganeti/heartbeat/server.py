"""LuxiD's heartbeat listener and the liveness service around the roster.

    LivenessService(paths, reactor, store)      # owns the Roster, sweeps it
    heartbeat_listener(service, address, port)  # mutual TLS, then HeartbeatProtocol

A peer must present the cluster certificate (or a candidate's client
certificate) in the TLS handshake, as for node RPC, or no frame of it is
ever read.  A connection must say hello within L{HELLO_TIMEOUT} seconds;
at most C{max_connections} are open at once (a new one beyond that is
closed at once).  On a node that is not the master, a hello is answered
with "the master is X" and the connection closed.

A node whose hello asks for beats (C{"beats": true}) gets each of its
beats answered with the same pre-encoded beat frame, written at once and
never decoded: the node hears this LuxiD's event loop, and counts the
master lost when it stops (paused, stuck), whatever TCP says.  Nothing is
recorded or logged per beat.

The same port serves LUXI to the other nodes (L{PortDemux}): a connection
whose first byte is C{"{"} (a LUXI request; a heartbeat frame starts with
its length's high byte, 0) is handed to LuxiD's LUXI protocol, so a client
on a node that is not (or no longer) the master reaches the master
(L{ganeti.luxi.locate}); the mutual TLS with the cluster certificate comes
first either way.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, cast

from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime, ITCPTransport
from twisted.internet.protocol import Factory, Protocol, ServerFactory
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.protocols.basic import Int32StringReceiver

from ganeti import errors
from ganeti.asyncutil import no_delay
from ganeti.ha import params as ha_params
from ganeti.heartbeat import roster as rost
from ganeti.heartbeat import wire
from ganeti.heartbeat.store import LivenessStore, unreachable_path, write_unreachable
from ganeti.paths import Paths
from ganeti.reactors import IReactor
from ganeti.ssconf import SimpleStore

#: seconds a new connection has to finish TLS and say hello
HELLO_TIMEOUT = 10.0
#: seconds between two sweeps of the roster (detection latency is timeout + this at most)
SWEEP_INTERVAL = 0.25
#: seconds between two reads of the cluster's node list (ssconf) and liveness timeout (ha.data)
MEMBERSHIP_INTERVAL = 2.0
#: default cap on open heartbeat connections
DEFAULT_MAX_CONNECTIONS = 4096

TransitionHook = Callable[[rost.Transition], Any]


class LivenessService(Service):
    """The roster of this LuxiD, its sweeps and its durable transitions.

    @ivar hooks: called with every L{rost.Transition} (the watcher, replication)
    @ivar port: the heartbeat port, told to nodes sent to the master
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: IReactorTime, store: LivenessStore, *, timeout: float | None = None,
                 grace: float = rost.DEFAULT_GRACE, port: int = wire.DEFAULT_PORT) -> None:
        """
        @param timeout: the liveness timeout, fixed; C{None}: the cluster's
            (C{ha.data}, L{ganeti.ha.params}), followed as it changes
        """
        self.paths = paths
        self.reactor = reactor
        self.store = store
        self.port = port
        self.fixed_timeout = timeout
        self._ha = ha_params.Watch(paths)
        initial = timeout if timeout is not None else self._ha.current().liveness_timeout
        self.roster = rost.Roster(reactor.seconds(), timeout=initial, grace=grace, recorded=store.load())
        self.hooks: list[TransitionHook] = []
        #: called with C{(node, report message)} for every state report (the watcher)
        self.report_hooks: list[Callable[[str, dict[str, Any]], Any]] = []
        #: the arguments of the calls whose answers node reports carry (L{report_args})
        self.report_args: dict[str, Any] | None = None
        self._sweeper: LoopingCall | None = None
        #: transition records not written yet, and the call at the end of this reactor turn that writes them
        self._unwritten: list[dict[str, Any]] = []
        self._flush_call: Any = None
        self._membership_at = -1e18
        self.connections = 0
        #: the cluster's nodes (ssconf); empty until known
        self.members: frozenset[str] = frozenset()
        #: what the unreachable file (L{ganeti.heartbeat.store.UNREACHABLE_FILE}) holds; C{None}: not written yet
        self._unreachable: dict[str, float | None] | None = None

    def startService(self) -> None:
        super().startService()
        self._refresh_membership(self.reactor.seconds())
        self._sweeper = LoopingCall(self.sweep)
        self._sweeper.clock = self.reactor
        self._sweeper.start(SWEEP_INTERVAL, now=False)
        self.publish_unreachable()  # a file a LuxiD before this one left says nothing about now

    def stopService(self) -> Any:
        super().stopService()
        if self._sweeper is not None and self._sweeper.running:
            self._sweeper.stop()
        self.flush()
        self.store.close()
        try:  # nobody keeps it true any more
            os.unlink(unreachable_path(self.paths.run_dir))
        except OSError:
            pass
        self._unreachable = None
        return None

    # --- membership and mastership (ssconf) -----------------------------------------------------
    def _refresh_timeout(self) -> None:
        if self.fixed_timeout is not None:
            return
        timeout = self._ha.current().liveness_timeout
        if timeout != self.roster.timeout:
            self.log.info("liveness timeout now {timeout} s (was {old} s)", timeout=timeout, old=self.roster.timeout)
            self.roster.timeout = timeout

    def _refresh_membership(self, now: float) -> None:
        self._membership_at = now
        self._refresh_timeout()
        store = SimpleStore(self.paths)
        try:
            nodes = store.get_node_list()
            online = set(store.get_online_nodes())
        except errors.ConfigurationError:
            return  # no ssconf yet: keep whom we know
        self.members = frozenset(nodes) | online
        self.roster.set_nodes(online, [n for n in nodes if n not in online], now)

    def master(self) -> tuple[str, str] | None:
        """C{(name, address)} of the master when it is not this node, else None."""
        store = SimpleStore(self.paths)
        try:
            master = store.get_master_node()
        except errors.ConfigurationError:
            return None
        me = own_name(self.paths)
        if not master or not me or master == me:
            return None
        try:
            address = store.get_node_primary_ips().get(master, "")
        except errors.ConfigurationError:
            address = ""
        return (master, address) if address else None

    # --- events ------------------------------------------------------------------------------------
    def _apply(self, transitions: list[rost.Transition]) -> None:
        """Log, record and announce C{transitions}.  Their records are
        written at the end of this turn of the reactor, with those of every
        other transition of the turn: one fsync for 1,000 nodes marked
        unreachable by a sweep, or heard from again after a stall, instead
        of one each (a crash may lose the transitions of its last turn: on
        start every node is unknown until it connects anyway)."""
        for t in transitions:
            self.log.info("node {node} is {state} ({event}: {reason})", node=t.node, state=t.state, event=t.event,
                          reason=t.reason)
            self._unwritten.append(t.to_record())
            if self._flush_call is None:
                self._flush_call = self.reactor.callLater(0, self.flush)
            for hook in list(self.hooks):
                try:
                    hook(t)
                except Exception:
                    self.log.failure("liveness hook failed for {node}", node=t.node)

    def flush(self) -> None:
        """Write the transition records not written yet (one write, one fsync)."""
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None
        records, self._unwritten = self._unwritten, []
        try:
            self.store.append_many(records)
        except OSError:
            self.log.failure("cannot record the liveness of {count} nodes", count=len(records))
        self.publish_unreachable()

    def publish_unreachable(self) -> None:
        """Rewrite the unreachable file if the set of unreachable nodes changed."""
        now = {name: e.last_seen for name, e in self.roster.nodes.items() if e.state == rost.UNREACHABLE}
        if now == self._unreachable:
            return
        self._unreachable = now  # (a failed write is logged once, and tried again at the next change)
        try:
            write_unreachable(self.paths.run_dir, now)
        except OSError as e:
            self.log.warn("cannot write the unreachable nodes to {dir}: {error}", dir=self.paths.run_dir, error=e)

    def sweep(self) -> None:
        now = self.reactor.seconds()
        if now - self._membership_at >= MEMBERSHIP_INTERVAL:
            self._refresh_membership(now)
        self._apply(self.roster.sweep(now))
        if self._flush_call is None:  # (else the flush at the end of this turn does it)
            self.publish_unreachable()

    def hello(self, conn: Any, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to a hello (None: refused, not a node of the cluster);
        registers the connection when this is the master."""
        other = self.master()
        if other is not None:
            return wire.redirect(other[0], other[1], self.port)
        if message["node"] not in self.members:
            self._refresh_membership(self.reactor.seconds())  # a node just added?
            if self.members and message["node"] not in self.members:
                return None
        self._apply(self.roster.hello(message["node"], conn, message["boot_id"], self.reactor.seconds()))
        return wire.accepted(own_name(self.paths) or "master", self.report_args, beats=wire.wants_beats(message))

    def set_report_args(self, args: dict[str, Any]) -> None:
        """New report arguments (the cluster changed): tell every connected node."""
        if args == self.report_args:
            return
        self.report_args = args
        body = wire.encode(wire.params(args))
        for entry in self.roster.nodes.values():
            for conn in entry.conns:
                conn.sendString(body)

    def seen(self, name: str, conn: Any) -> None:
        transitions = self.roster.seen(name, conn, self.reactor.seconds())
        if transitions:
            self._apply(transitions)

    def closed(self, name: str, conn: Any) -> None:
        self.roster.closed(name, conn, self.reactor.seconds())

    def reported(self, name: str, conn: Any, message: dict[str, Any]) -> None:
        if self.roster.reported(name, conn, message, self.reactor.seconds()) is None:
            return
        for hook in list(self.report_hooks):
            try:
                hook(name, message)
            except Exception:
                self.log.failure("report hook failed for {node}", node=name)

    # --- what queries see ----------------------------------------------------------------------------
    def snapshot(self) -> dict[str, dict[str, Any]]:
        return self.roster.snapshot()

    def fresh_instance_reports(self) -> dict[str, dict[str, Any]]:
        """C{{node: {instance: info}}} of every connected, up node with a report."""
        out = {}
        for name in self.roster.nodes:
            report = self.roster.fresh_report(name)
            if report is not None:
                out[name] = report.get("instances", {})
        return out

    def fresh_report(self, name: str) -> dict[str, Any] | None:
        """The latest report of a connected, up node (None: ask it by RPC)."""
        return self.roster.fresh_report(name)


def report_args(cluster: Any) -> dict[str, Any]:
    """The report arguments of a cluster: those LuxiD's live queries give the RPCs."""
    from types import SimpleNamespace

    from ganeti.rpc.live import hypervisor_args, node_info_args

    config: Any = SimpleNamespace(cluster=cluster)
    return {"instances": hypervisor_args(config), "node_info": node_info_args(config)}


def own_name(paths: Paths) -> str:
    """This node's name from its identity file, or C{""}."""
    from ganeti.daemons import node_file

    try:
        with open(node_file(paths)) as handle:
            return str(json.load(handle).get("name", ""))
    except (OSError, ValueError, AttributeError):
        return ""


class HeartbeatProtocol(Int32StringReceiver):
    """One node's connection: a hello, then beats and reports."""

    MAX_LENGTH = wire.MAX_FRAME
    log = Logger()

    @property
    def _connected(self) -> ITCPTransport:
        """The transport, in methods that run only while connected."""
        return cast(ITCPTransport, self.transport)

    def __init__(self, service: LivenessService) -> None:
        self.service = service
        self.node: str | None = None
        self._timer: Any = None
        #: whether this node's beats are answered (it asked in its hello)
        self.answer_beats = False

    def connectionMade(self) -> None:
        no_delay(self.transport)  # a beat's answer goes at once (a node waits for it: HeartbeatClientProtocol.flushed)
        self._timer = self.service.reactor.callLater(HELLO_TIMEOUT, self._no_hello)

    def _no_hello(self) -> None:
        self._timer = None
        self.log.warn("heartbeat: no hello from {peer} within {t} s", peer=self._connected.getPeer(), t=HELLO_TIMEOUT)
        self._connected.abortConnection()

    def dataReceived(self, data: bytes) -> None:
        if self.node is not None:
            self.service.seen(self.node, self)
        super().dataReceived(data)

    def stringReceived(self, body: bytes) -> None:
        if body == wire.BEAT_FRAME_BODY and self.node is not None:
            # answered in order, after the frames before it were handled: a node knows its report is merged
            if self.answer_beats:
                self.sendString(wire.BEAT_FRAME_BODY)
            return
        try:
            message = wire.decode(body)
        except wire.BadMessage as e:
            self.log.warn("heartbeat: bad message from {peer}: {why}", peer=self._connected.getPeer(), why=str(e))
            self._connected.loseConnection()
            return
        kind = message["t"]
        if self.node is None:
            if kind != wire.HELLO:
                self.log.warn("heartbeat: {peer} sent {kind} before hello", peer=self._connected.getPeer(), kind=kind)
                self._connected.loseConnection()
                return
            if self._timer is not None and self._timer.active():
                self._timer.cancel()
            self._timer = None
            answer = self.service.hello(self, message)
            if answer is None:
                self.log.warn("heartbeat: {peer} says it is {node}, not a node of this cluster",
                              peer=self._connected.getPeer(), node=message["node"])
                self._connected.loseConnection()
                return
            self.sendString(wire.encode(answer))
            if answer["t"] == wire.REDIRECT:
                self._connected.loseConnection()
            else:
                self.node = message["node"]
                self.answer_beats = wire.wants_beats(answer)
        elif kind == wire.REPORT:
            self.service.reported(self.node, self, message)
        elif kind != wire.BEAT:
            self.log.warn("heartbeat: unexpected {kind} from {node}", kind=kind, node=self.node)

    def lengthLimitExceeded(self, length: int) -> None:
        self.log.warn("heartbeat: frame of {n} bytes from {peer} refused", n=length, peer=self._connected.getPeer())
        self._connected.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self.service.connections -= 1
        if self.node is not None:
            self.service.closed(self.node, self)


class PortDemux(Protocol):
    """The first byte of a connection decides: C{"{"} is LUXI, anything else a heartbeat.

    The heartbeat protocol is connected from the start (its hello timer
    runs); a LUXI connection stops that timer and is counted among the open
    connections all the same.
    """

    def __init__(self, heartbeat: HeartbeatProtocol, luxi: Factory, addr: Any) -> None:
        self.heartbeat = heartbeat
        self._luxi_factory = luxi
        self._addr = addr
        self._inner: Any = None

    def connectionMade(self) -> None:
        self.heartbeat.makeConnection(cast(ITCPTransport, self.transport))

    def dataReceived(self, data: bytes) -> None:
        inner = self._inner
        if inner is None:
            if data[:1] == b"{":
                timer = self.heartbeat._timer
                if timer is not None and timer.active():
                    timer.cancel()
                self.heartbeat._timer = None
                inner = self._luxi_factory.buildProtocol(self._addr)
                assert inner is not None
                inner.makeConnection(cast(ITCPTransport, self.transport))
            else:
                inner = self.heartbeat
            self._inner = inner
        inner.dataReceived(data)

    def connectionLost(self, reason: Any = None) -> None:
        if self._inner is not None and self._inner is not self.heartbeat:
            self._inner.connectionLost(reason)
        self.heartbeat.connectionLost(reason)


class HeartbeatFactory(ServerFactory):
    """Heartbeat connections, at most C{max_connections} at once; with
    C{luxi}, LUXI connections too (L{PortDemux})."""

    log = Logger()

    def __init__(self, service: LivenessService, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 luxi: Factory | None = None) -> None:
        self.service = service
        self.max_connections = max_connections
        self.luxi = luxi

    def buildProtocol(self, addr: Any) -> Protocol | None:
        if self.service.connections >= self.max_connections:
            self.log.warn("heartbeat: {n} connections open, {peer} refused", n=self.service.connections, peer=addr)
            return None
        self.service.connections += 1
        protocol = HeartbeatProtocol(self.service)
        return protocol if self.luxi is None else PortDemux(protocol, self.luxi, addr)


def tls_factory(paths: Paths, factory: HeartbeatFactory) -> Any:
    """C{factory} behind mutual TLS with the cluster certificate (as noded)."""
    from ganeti.rpc.tls import ReloadingServerContextFactory
    from ganeti.tlsbio import TLSServerFactory

    return TLSServerFactory(ReloadingServerContextFactory(paths), factory)


def heartbeat_listener(service: LivenessService, address: str, port: int, *, max_connections: int, reactor: IReactor,
                       daemon: str = "ganeti-luxid", luxi: Factory | None = None) -> Any:
    """A L{ganeti.listening.Listener} for the heartbeat port (TLS inside);
    with C{luxi}, it serves LUXI connections too (L{PortDemux})."""
    from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint

    from ganeti.listening import stream_listener

    if ":" in address:
        endpoint: Any = TCP6ServerEndpoint(reactor, port, backlog=1024, interface=address)
    else:
        endpoint = TCP4ServerEndpoint(reactor, port, backlog=1024, interface=address)
    factory = tls_factory(service.paths, HeartbeatFactory(service, max_connections, luxi))
    return stream_listener(endpoint, factory, "%s port %d (TCP)" % (address, port), daemon=daemon, reactor=reactor)


def store_for(paths: Paths) -> LivenessStore:
    return LivenessStore(os.path.join(paths.data_dir, "liveness.log"))


__all__ = ["HELLO_TIMEOUT", "HeartbeatFactory", "HeartbeatProtocol", "LivenessService", "PortDemux", "heartbeat_listener",
           "store_for", "tls_factory"]
