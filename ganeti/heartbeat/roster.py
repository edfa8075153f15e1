"""LuxiD's node roster: who is connected, who went silent, who rebooted.

Pure: no Twisted, no I/O; every method takes the time C{now} (seconds).
The service (L{ganeti.heartbeat.server}) feeds it connections, bytes and
closes, calls L{Roster.sweep} a few times a second, and writes each
L{Transition} the methods return to the durable store.

States of a node (the C{liveness} query field):
  - C{unknown}: not heard of since LuxiD started (or since it joined the
    cluster), for less than the timeout plus C{rejoin}, the longest a node
    waits between two connection attempts;
  - C{up}: a connection said hello and bytes keep arriving;
  - C{unreachable}: no byte for C{timeout} seconds, or its last
    connection closed and no new one came within C{grace} seconds;
  - C{offline}: the admin marked the node offline: silence is expected.

Transitions (events, recorded durably): C{up}, C{unreachable}, and
C{rebooted} (a hello with a boot id other than the recorded one; the node
is C{up} afterwards).  A transition is produced only when it changes what
the store last recorded for the node, so a LuxiD restart followed by the
same nodes reconnecting writes nothing, and a beat never writes.

A node may have several connections that said hello (a NodeD reconnecting
before LuxiD saw its old connection close, or any peer holding the cluster
certificate saying hello as that node): it is alive while bytes arrive on
any of them, and its last connection closing starts the C{grace}.  One
connection that says hello and closes does not make a node that keeps
beating on another unreachable.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import attrs

from ganeti.heartbeat.wire import MAX_RECONNECT_DELAY

UNKNOWN = "unknown"
UP = "up"
UNREACHABLE = "unreachable"
OFFLINE = "offline"
#: the event of a hello with a new boot id
REBOOTED = "rebooted"

#: default seconds without a byte before a node is unreachable
DEFAULT_TIMEOUT = 2.0
#: default seconds a closed connection has to be replaced
DEFAULT_GRACE = 1.0


@attrs.frozen
class Transition:
    """One change of a node's liveness, as logged and recorded.

    @ivar event: C{up}, C{unreachable} or C{rebooted}
    @ivar state: the state afterwards (C{up} or C{unreachable})
    """

    node: str
    event: str
    state: str
    time: float
    boot_id: str | None
    reason: str

    def to_record(self) -> dict[str, Any]:
        return {"node": self.node, "event": self.event, "state": self.state, "time": self.time,
                "boot_id": self.boot_id, "reason": self.reason}


@attrs.define
class NodeEntry:
    """What the roster knows of one node."""

    name: str
    state: str
    #: when the current state began
    since: float
    connected_since: float | None = None
    last_seen: float | None = None
    boot_id: str | None = None
    #: the open connections that said hello as this node (objects identifying
    #: them), the newest last
    conns: list[Any] = attrs.Factory(list)
    closed_at: float | None = None
    #: the latest state report and when it arrived
    report: dict[str, Any] | None = None
    report_time: float | None = None

    @property
    def conn(self) -> Any:
        """The newest open connection, or None."""
        return self.conns[-1] if self.conns else None


class Roster:
    """The state machine of every node's liveness (see the module docstring).

    @param recorded: what the store last recorded per node:
        C{{name: {"state": ..., "boot_id": ...}}}
    @param rejoin: extra seconds a node never heard of has before it is
        unreachable: a node retrying while LuxiD was down may be that long
        in its backoff when LuxiD starts
    """

    def __init__(self, now: float, *, timeout: float = DEFAULT_TIMEOUT, grace: float = DEFAULT_GRACE,
                 rejoin: float = MAX_RECONNECT_DELAY,
                 recorded: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        if timeout <= 0 or grace < 0 or rejoin < 0:
            raise ValueError("the liveness timeout must be positive and the grace and rejoin not negative")
        self.timeout = timeout
        self.grace = grace
        self.rejoin = rejoin
        self.started = now
        self.nodes: dict[str, NodeEntry] = {}
        self.recorded: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (recorded or {}).items()}
        for name, record in self.recorded.items():
            self.nodes[name] = NodeEntry(name, UNKNOWN, now, boot_id=record.get("boot_id"))

    # --- membership --------------------------------------------------------------------
    def set_nodes(self, online: Iterable[str], offline: Iterable[str], now: float) -> None:
        """The nodes of the cluster: C{online} ones are expected to connect,
        C{offline} ones (marked so by the admin) to be silent; others are forgotten."""
        online, offline = set(online), set(offline)
        for name in list(self.nodes):
            if name not in online and name not in offline:
                del self.nodes[name]
        for name in online | offline:
            entry = self.nodes.get(name)
            if entry is None:
                entry = self.nodes[name] = NodeEntry(name, UNKNOWN, now)
            if name in offline and entry.state != OFFLINE and entry.conn is None:
                entry.state, entry.since = OFFLINE, now
            elif name in online and entry.state == OFFLINE:
                entry.state, entry.since = UNKNOWN, now

    # --- events of connections ------------------------------------------------------------
    def hello(self, name: str, conn: Any, boot_id: str, now: float) -> list[Transition]:
        """A connection of C{name} said hello: the node's newest connection."""
        entry = self.nodes.get(name)
        if entry is None:
            entry = self.nodes[name] = NodeEntry(name, UNKNOWN, now)
        if conn not in entry.conns:
            entry.conns.append(conn)
        entry.connected_since = entry.last_seen = now
        entry.closed_at = None
        known = self.recorded.get(name, {}).get("boot_id")
        entry.boot_id = boot_id or entry.boot_id
        if boot_id and known and boot_id != known:
            return self._set(entry, REBOOTED, UP, now, "boot id %s, was %s" % (boot_id, known))
        return self._set(entry, UP, UP, now, "connected")

    def seen(self, name: str, conn: Any, now: float) -> list[Transition]:
        """Bytes arrived on C{conn}, one of the node's connections; a node
        marked unreachable is up again."""
        entry = self.nodes.get(name)
        if entry is None or conn not in entry.conns:
            return []
        entry.last_seen = now
        if entry.state != UP:
            return self._set(entry, UP, UP, now, "heard from again")
        return []

    def closed(self, name: str, conn: Any, now: float) -> None:
        """C{conn} closed; when it was the node's last connection, the node
        has L{grace} seconds to come back."""
        entry = self.nodes.get(name)
        if entry is not None and conn in entry.conns:
            entry.conns.remove(conn)
            if not entry.conns:
                entry.closed_at = now

    def reported(self, name: str, conn: Any, report: dict[str, Any], now: float) -> dict[str, Any] | None:
        """Merge a state report; returns the node's report afterwards (None: not its connection)."""
        entry = self.nodes.get(name)
        if entry is None or conn not in entry.conns:
            return None
        instances = report.get("instances", {})
        if report.get("full") or entry.report is None:
            merged: dict[str, Any] = {"instances": {k: v for k, v in instances.items() if v is not None},
                                      "node": dict(report.get("node", {}))}
        else:
            merged = {"instances": dict(entry.report.get("instances", {})),
                      "node": dict(entry.report.get("node", {}))}
            for key, value in instances.items():
                if value is None:
                    merged["instances"].pop(key, None)
                else:
                    merged["instances"][key] = value
            merged["node"].update(report.get("node", {}))
        entry.report, entry.report_time = merged, now
        return merged

    # --- time --------------------------------------------------------------------------
    def sweep(self, now: float) -> list[Transition]:
        """Mark nodes unreachable whose time is up."""
        out: list[Transition] = []
        timeout, grace = self.timeout, self.grace
        for entry in self.nodes.values():
            state = entry.state
            if state == UP:
                if entry.conn is None:
                    if entry.closed_at is not None and now - entry.closed_at >= grace:
                        out += self._set(entry, UNREACHABLE, UNREACHABLE, now, "connection closed")
                elif entry.last_seen is not None and now - entry.last_seen >= timeout:
                    out += self._set(entry, UNREACHABLE, UNREACHABLE, now,
                                     "silent for %.1f s" % (now - entry.last_seen))
            elif state == UNKNOWN and now - max(entry.since, self.started) >= timeout + self.rejoin:
                out += self._set(entry, UNREACHABLE, UNREACHABLE, now, "never connected")
        return out

    def _set(self, entry: NodeEntry, event: str, state: str, now: float, reason: str) -> list[Transition]:
        changed = entry.state != state
        if changed:
            entry.state, entry.since = state, now
        if state != UP:
            entry.report = entry.report_time = None
        record = self.recorded.get(entry.name)
        if record is not None and record.get("state") == state and event != REBOOTED:
            return []
        self.recorded[entry.name] = {"state": state, "boot_id": entry.boot_id}
        return [Transition(entry.name, event, state, now, entry.boot_id, reason)]

    # --- what queries see -----------------------------------------------------------------
    def fresh_report(self, name: str) -> dict[str, Any] | None:
        """The latest report of C{name} if it is up and connected, else None."""
        entry = self.nodes.get(name)
        if entry is None or entry.state != UP or entry.conn is None:
            return None
        return entry.report

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """C{{name: {"liveness", "since", "last_seen", "boot_id", "connected_since"}}}."""
        return {
            name: {"liveness": e.state, "since": e.since, "last_seen": e.last_seen, "boot_id": e.boot_id,
                   "connected_since": e.connected_since if e.conn is not None else None}
            for name, e in self.nodes.items()
        }


__all__ = ["DEFAULT_GRACE", "DEFAULT_TIMEOUT", "NodeEntry", "OFFLINE", "REBOOTED", "Roster", "Transition",
           "UNKNOWN", "UNREACHABLE", "UP"]
