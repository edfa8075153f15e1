"""A QMP (QEMU Machine Protocol) client over qemu's monitor socket.

QMP speaks one JSON object per line.  qemu starts with a greeting
(C{{"QMP": {"version": ..., "capabilities": [...]}}}), the client leaves
negotiation mode with C{qmp_capabilities}, then each command
C{{"execute": name, "arguments": {...}, "id": n}} gets exactly one reply,
in order: C{{"return": value, "id": n}} or
C{{"error": {"class": ..., "desc": ...}, "id": n}}.  Events
(C{{"event": name, "data": {...}, "timestamp": {...}}}) may arrive between
replies at any time.

L{QMPProtocol} is the thin shell: C{execute} returns a Deferred that fires
with the C{return} value or fails with L{QMPError}; commands issued before
negotiation ends are queued and sent afterwards; several commands may be in
flight at once.  Events go to the C{on_event} callback.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXClientEndpoint, connectProtocol
from twisted.internet.interfaces import IReactorUNIX, ITransport
from twisted.logger import Logger
from twisted.protocols.basic import LineOnlyReceiver
from twisted.python.failure import Failure

from ganeti.backend.hypervisor import HypervisorError

# Event names qemu sends that the hypervisor code reacts to.
EVENT_SHUTDOWN = "SHUTDOWN"
EVENT_POWERDOWN = "POWERDOWN"
EVENT_STOP = "STOP"
EVENT_RESUME = "RESUME"
EVENT_RESET = "RESET"
EVENT_MIGRATION = "MIGRATION"

EventCallback = Callable[[str, dict[str, Any], "float | None"], object]


class QMPError(HypervisorError):
    """qemu answered a command with an error.

    @ivar error_class: QMP's error class, e.g. C{"GenericError"}.
    @ivar desc: qemu's human-readable description.
    @ivar command: the command that failed.
    """

    def __init__(self, error_class: str, desc: str, command: str = "") -> None:
        super().__init__(f"{command or 'QMP'}: {error_class}: {desc}")
        self.error_class, self.desc, self.command = error_class, desc, command


class QMPProtocolError(HypervisorError):
    """The other side does not speak QMP as expected (bad greeting, bad JSON)."""


class QMPDisconnected(HypervisorError):
    """The monitor connection closed before the command was answered."""


def encode_command(command: str, arguments: dict[str, Any] | None, command_id: int) -> bytes:
    """One QMP command as a line of JSON."""
    message: dict[str, Any] = {"execute": command, "id": command_id}
    if arguments:
        message["arguments"] = arguments
    return json.dumps(message).encode()


def event_timestamp(message: dict[str, Any]) -> float | None:
    """The time of a QMP event in seconds since the epoch, if it carries one."""
    stamp = message.get("timestamp")
    if not isinstance(stamp, dict):
        return None
    try:
        return float(stamp["seconds"]) + float(stamp.get("microseconds", 0)) / 1e6
    except (KeyError, TypeError, ValueError):
        return None


class QMPProtocol(LineOnlyReceiver):
    """The client side of one QMP monitor connection.

    @ivar ready: fires with the greeting's C{QMP} dict (C{version},
        C{capabilities}) once capabilities are negotiated; fails with
        L{QMPProtocolError}, L{QMPError} or L{QMPDisconnected}.
    @ivar closed: fires with C{None} when the connection is gone.
    @ivar lost_reason: the L{Failure} the connection was lost with.
    """

    @property
    def _connected(self) -> ITransport:
        """The transport, in methods that run only while connected."""
        return cast(ITransport, self.transport)

    log = Logger()
    delimiter = b"\n"
    MAX_LENGTH = 16 * 1024 * 1024

    def __init__(self, on_event: EventCallback | None = None) -> None:
        self.on_event = on_event
        self.ready: Deferred[dict[str, Any]] = Deferred()
        self.closed: Deferred[None] = Deferred()
        self.lost_reason: Failure | None = None
        self.greeting: dict[str, Any] | None = None
        self._state = "greeting"          # -> "negotiating" -> "ready" | "closed"
        self._next_id = 0
        self._queued: list[tuple[int, str, dict[str, Any] | None]] = []
        self._pending: OrderedDict[int, tuple[str, Deferred[Any]]] = OrderedDict()

    # -- the API

    def execute(self, command: str, arguments: dict[str, Any] | None = None) -> Deferred[Any]:
        """Run C{command}; the Deferred fires with its C{return} value."""
        if self._state == "closed":
            return _failed(QMPDisconnected(f"{command}: the QMP connection is closed"))
        d: Deferred[Any] = Deferred()
        self._next_id += 1
        command_id = self._next_id
        self._pending[command_id] = (command, d)
        if self._state == "ready":
            self._send(command_id, command, arguments)
        else:
            self._queued.append((command_id, command, arguments))
        return d

    def query_status(self) -> Deferred[dict[str, Any]]:
        """C{{"running": bool, "status": "running"|"paused"|"shutdown"|...}}."""
        return self.execute("query-status")

    def system_powerdown(self) -> Deferred[Any]:
        """Press the ACPI power button; the guest decides whether to stop."""
        return self.execute("system_powerdown")

    def system_reset(self) -> Deferred[Any]:
        """Hard-reset the guest."""
        return self.execute("system_reset")

    def stop(self) -> Deferred[Any]:
        """Pause the VM's CPUs."""
        return self.execute("stop")

    def cont(self) -> Deferred[Any]:
        """Resume the VM's CPUs."""
        return self.execute("cont")

    def quit(self) -> Deferred[None]:
        """End qemu.  qemu may close the socket before answering: that is success too."""
        def closed(failure: Failure) -> None:
            failure.trap(QMPDisconnected)
        return self.execute("quit").addCallbacks(lambda _: None, closed)

    def migrate(self, uri: str) -> Deferred[Any]:
        """Start migrating to C{uri} (e.g. C{tcp:host:port}); poll L{query_migrate}."""
        return self.execute("migrate", {"uri": uri})

    def migrate_incoming(self, uri: str) -> Deferred[Any]:
        """Listen on C{uri} for an incoming migration (qemu started with C{-incoming defer})."""
        return self.execute("migrate-incoming", {"uri": uri})

    def migrate_cancel(self) -> Deferred[Any]:
        return self.execute("migrate_cancel")

    def query_migrate(self) -> Deferred[dict[str, Any]]:
        """C{{"status": "active"|"completed"|"failed"|..., "ram": {...}, ...}}."""
        return self.execute("query-migrate")

    def migrate_set_parameters(self, max_bandwidth: int | None = None,
                               downtime_limit: int | None = None, **others: Any) -> Deferred[Any]:
        """Set migration parameters: C{max_bandwidth} in bytes/s,
        C{downtime_limit} in ms; C{others} are passed with C{_} turned into C{-}."""
        arguments = {key.replace("_", "-"): value for key, value in others.items()}
        if max_bandwidth is not None:
            arguments["max-bandwidth"] = max_bandwidth
        if downtime_limit is not None:
            arguments["downtime-limit"] = downtime_limit
        return self.execute("migrate-set-parameters", arguments)

    def migrate_set_capabilities(self, capabilities: dict[str, bool]) -> Deferred[Any]:
        return self.execute("migrate-set-capabilities", {
            "capabilities": [{"capability": name, "state": state} for name, state in capabilities.items()]})

    # -- the wire

    def _send(self, command_id: int, command: str, arguments: dict[str, Any] | None) -> None:
        self.sendLine(encode_command(command, arguments, command_id))

    def lineReceived(self, line: bytes) -> None:
        line = line.rstrip(b"\r")
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError:
            self._protocol_error(f"not JSON: {line[:200]!r}")
            return
        if not isinstance(message, dict):
            self._protocol_error(f"not a JSON object: {line[:200]!r}")
        elif "event" in message:
            self._event(message)
        elif self._state == "greeting":
            self._greeting(message)
        elif "return" in message or "error" in message:
            self._reply(message)
        else:
            self.log.warn("ignoring unexpected QMP message {message!r}", message=message)

    def _greeting(self, message: dict[str, Any]) -> None:
        greeting = message.get("QMP")
        if not isinstance(greeting, dict):
            self._protocol_error(f"expected the QMP greeting, got {message!r}")
            return
        self.greeting = greeting
        self._state = "negotiating"
        # The negotiation command takes id 0, ahead of the queued commands.
        self._pending[0] = ("qmp_capabilities", Deferred())
        self._pending.move_to_end(0, last=False)
        self._send(0, "qmp_capabilities", None)

    def _reply(self, message: dict[str, Any]) -> None:
        command_id = message.get("id")
        if command_id in self._pending:
            command, d = self._pending.pop(cast(int, command_id))
        elif self._pending:                # replies come in order; an id-less one answers the oldest
            _, (command, d) = self._pending.popitem(last=False)
        else:
            self.log.warn("ignoring QMP reply to nothing: {message!r}", message=message)
            return
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            failure = QMPError(str(error.get("class", "GenericError")), str(error.get("desc", "")), command)
            if command_id == 0 and self._state == "negotiating":
                self._fail_ready(failure)
                return
            d.errback(failure)
            return
        if command_id == 0 and self._state == "negotiating":
            self._negotiated()
            return
        d.callback(message["return"])

    def _negotiated(self) -> None:
        self._state = "ready"
        queued, self._queued = self._queued, []
        for command_id, command, arguments in queued:
            self._send(command_id, command, arguments)
        assert self.greeting is not None
        self.ready.callback(self.greeting)

    def _fail_ready(self, error: Exception) -> None:
        if not self.ready.called:
            self.ready.errback(error)
        self._connected.loseConnection()

    def _event(self, message: dict[str, Any]) -> None:
        if self.on_event is None:
            return
        data = message.get("data")
        try:
            self.on_event(str(message["event"]), data if isinstance(data, dict) else {}, event_timestamp(message))
        except Exception:
            self.log.failure("QMP event callback failed on {event}", event=message.get("event"))

    def _protocol_error(self, why: str) -> None:
        self.log.warn("QMP protocol error: {why}", why=why)
        self._fail_ready(QMPProtocolError(why))

    def lineLengthExceeded(self, line: bytes) -> None:
        self._protocol_error(f"line longer than {self.MAX_LENGTH} bytes")

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self._state = "closed"
        self.lost_reason = reason
        pending, self._pending = self._pending, OrderedDict()
        self._queued = []
        why = reason.getErrorMessage() if reason is not None else "connection lost"
        if not self.ready.called:
            self.ready.errback(QMPDisconnected(f"QMP connection lost before negotiation: {why}"))
        for command_id, (command, d) in pending.items():
            if command_id == 0:
                continue
            d.errback(QMPDisconnected(f"{command}: QMP connection lost: {why}"))
        self.closed.callback(None)


def _failed(error: Exception) -> Deferred[Any]:
    d: Deferred[Any] = Deferred()
    d.errback(error)
    return d


async def connect_qmp(reactor: IReactorUNIX, socket_path: str, on_event: EventCallback | None = None,
                      timeout: float = 10) -> QMPProtocol:
    """Connect to the QMP socket at C{socket_path} and negotiate capabilities."""
    protocol = QMPProtocol(on_event)
    await connectProtocol(UNIXClientEndpoint(reactor, socket_path, timeout=timeout), protocol)
    await protocol.ready
    return protocol
