"""The serial console of a kvm instance in the browser: a WebSocket in C{ganeti-rapi}.

C{GET /ui/instances/NAME/console} with C{Upgrade: websocket}, from a
session whose user has the C{write} right (a console is an action: a read
user gets 403, as for the other actions) and a browser C{Origin} of this
host (a WebSocket is not covered by the same-origin policy, so the origin
is required here, not only checked when sent).  After the handshake the
server asks LuxiD for the instance's console (the C{console} field that
C{gnt-instance console} reads) and bridges the WebSocket to it:

  - the qemu serial socket of the instance, directly, where it is on this
    machine (the master is the instance's node; every node of a loopback
    cluster);
  - otherwise C{ssh} to the instance's node running C{socat} on that socket,
    as Ganeti's C{gnt-instance console} does.

Binary messages carry the console's bytes both ways (a text message from
the page is sent as UTF-8); text messages from the server are JSON status:
C{{"connected": NODE}} or C{{"error": MESSAGE}} before it closes.  A ping
every L{PING_INTERVAL} seconds keeps the connection under RAPI's idle
timeout and ends the console when the session ended meanwhile (logout,
changed password or rights).  When the browser does not read fast enough,
the console is not read either (the channel's producer pause is passed on).

Sans-IO WebSocket framing by C{wsproto} (Twisted's C{websocket} extra).
"""

from __future__ import annotations

import os
import shlex
import socket
from typing import Any, Callable

import orjson
from twisted.internet import protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from wsproto import ConnectionType
from wsproto.connection import ConnectionState
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.handshake import H11Handshake
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from ganeti import console_socket as serial_console
from ganeti.luxi import methods
from ganeti.rapi.http import HttpError

#: seconds between the server's pings (and session checks)
PING_INTERVAL = 15.0
#: the largest message accepted from the page, in bytes (keyboard input and pastes)
MAX_MESSAGE = 64 * 1024
#: close codes: normal, policy (the session ended), internal error
CLOSE_NORMAL, CLOSE_POLICY, CLOSE_ERROR, CLOSE_TOO_BIG = 1000, 1008, 1011, 1009

_CONSOLE_FIELDS = ["name", "console", "oper_state", "hypervisor"]


async def find_vnc(luxi: Any, name: str) -> tuple[str, int]:
    """The host and port of a kvm instance's VNC display (LuxiD's C{console} field).

    @raise ConsoleUnavailable: no such instance, not running, not kvm, no VNC (no C{vnc_bind_address}).
    """
    answer = await luxi.call(methods.Query.name, "instance", _CONSOLE_FIELDS, ["|", ["=", "name", name]])
    rows = answer.get("data") or []
    if not rows:
        raise ConsoleUnavailable("Instance %s does not exist" % name)
    (_, (c_status, found), (s_status, running), (_, hypervisor)) = rows[0]
    if hypervisor != "kvm":
        raise ConsoleUnavailable("Instance %s is not a kvm instance" % name)
    if c_status != 0 or not isinstance(found, dict):
        raise ConsoleUnavailable("Instance %s is not running" % name if not (s_status == 0 and running)
                                 else "Console information for instance %s is unavailable" % name)
    if found.get("kind") != "vnc" or not isinstance(found.get("port"), int) or not found.get("host"):
        raise ConsoleUnavailable("Instance %s has no VNC display (hvparam vnc_bind_address)" % name)
    return str(found["host"]), int(found["port"])


def accept(request: Any, subprotocols: tuple[str, ...] = ()) -> tuple[bytes, Any]:
    """The handshake answer (C{101}) and the wsproto connection of an upgrade request.

    @raise HttpError: 400, not a valid WebSocket upgrade.
    """
    if (request.getHeader(b"upgrade") or b"").lower() != b"websocket":
        raise HttpError(400, "The console is a WebSocket: open it with 'Upgrade: websocket'")
    handshake = H11Handshake(ConnectionType.SERVER)
    headers = [(k, v) for k, values in request.requestHeaders.getAllRawHeaders() for v in values]
    try:
        handshake.initiate_upgrade_connection(headers, request.uri)
        asked = (request.getHeader(b"sec-websocket-protocol") or b"").decode("ascii", "replace").split(",")
        offered = [p.strip() for p in asked if p.strip() in subprotocols]
        answer = handshake.send(AcceptConnection(subprotocol=offered[0] if offered else None))
    except (RemoteProtocolError, LocalProtocolError) as e:
        raise HttpError(400, "Invalid WebSocket handshake: %s" % e) from None
    if handshake.connection is None:
        raise HttpError(400, "Invalid WebSocket handshake")
    return answer, handshake.connection


async def find_console(luxi: Any, name: str) -> dict[str, Any]:
    """The instance's serial console description (LuxiD's C{console} field).

    @raise ConsoleUnavailable: no such instance, not running, not kvm, no serial console.
    """
    answer = await luxi.call(methods.Query.name, "instance", _CONSOLE_FIELDS, ["|", ["=", "name", name]])
    rows = answer.get("data") or []
    if not rows:
        raise ConsoleUnavailable("Instance %s does not exist" % name)
    (_, (c_status, console), (s_status, running), (_, hypervisor)) = rows[0]
    if hypervisor != "kvm":
        raise ConsoleUnavailable("Instance %s is not a kvm instance (hypervisor %s): the web console shows only "
                                 "kvm serial consoles" % (name, hypervisor))
    if c_status != 0 or not isinstance(console, dict):
        if s_status == 0 and running:
            raise ConsoleUnavailable("Console information for instance %s is unavailable" % name)
        raise ConsoleUnavailable("Instance %s is not running" % name)
    if serial_console.socket_path(console) is None:
        if console.get("kind") == "vnc":
            raise ConsoleUnavailable("Instance %s has a VNC console (%s:%s), not a serial one"
                                     % (name, console.get("host"), console.get("port")))
        raise ConsoleUnavailable(str(console.get("message") or "Instance %s has no serial console" % name))
    return console


def ssh_argv(console: dict[str, Any]) -> list[str]:
    """Ganeti's way to a console on another node: C{ssh} to it, C{socat} on the socket
    (no terminal at either end: the bytes go to the browser's terminal as they are)."""
    path = serial_console.socket_path(console)
    return ["ssh", "-oBatchMode=yes", "-oEscapeChar=none", "-T", str(console.get("host")),
            shlex.join(["socat", "STDIO", "UNIX-CONNECT:%s" % path])]


def is_here(console: dict[str, Any]) -> bool:
    """Whether the console's socket is on this machine."""
    path = serial_console.socket_path(console)
    return path is not None and serial_console.is_local_socket(path) and \
        console.get("host") in (None, socket.gethostname())


class ConsoleUnavailable(Exception):
    """The instance has no serial console to attach to; the message says why."""


class _Serial(protocol.Protocol):
    """The qemu socket's side: what it says goes to the browser."""

    def __init__(self, bridge: ConsoleBridge) -> None:
        self.bridge = bridge

    def connectionMade(self) -> None:
        self.bridge.attached(self.transport)

    def dataReceived(self, data: bytes) -> None:
        self.bridge.send_bytes(data)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.bridge.close(CLOSE_NORMAL, "The console closed")


class _SerialFactory(protocol.ClientFactory):
    def __init__(self, bridge: ConsoleBridge) -> None:
        self.bridge = bridge

    def buildProtocol(self, addr: Any) -> protocol.Protocol:
        return _Serial(self.bridge)

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.bridge.fail("Cannot connect to the serial console: %s" % reason.getErrorMessage())


class _Ssh(protocol.ProcessProtocol):
    """C{ssh ... socat}: its output goes to the browser, its error output says why it ended."""

    def __init__(self, bridge: ConsoleBridge) -> None:
        self.bridge = bridge
        self.errors = b""

    def connectionMade(self) -> None:
        self.bridge.attached(self.transport)

    def outReceived(self, data: bytes) -> None:
        self.bridge.send_bytes(data)

    def errReceived(self, data: bytes) -> None:
        self.errors = (self.errors + data)[-2000:]

    def processEnded(self, reason: Failure) -> None:
        text = self.errors.decode("utf-8", "replace").strip()
        if text:
            self.bridge.fail("The console ended: %s" % text.splitlines()[-1])
        else:
            self.bridge.close(CLOSE_NORMAL, "The console closed")


class ConsoleBridge:
    """One browser's WebSocket, taken over from the HTTP channel, bridged to a console.

    @param channel: the request's L{ganeti.http_limits.GuardedChannel} (or any C{HTTPChannel})
    @param conn: the wsproto connection (after L{accept})
    @param clock: for the pings
    @param alive: whether the session is still valid (checked at each ping)
    @param on_close: called once when the WebSocket is gone
    """

    log = Logger()

    def __init__(self, channel: Any, conn: Any, clock: Any, alive: Callable[[], bool],
                 on_close: Callable[[], None], status: bool = True) -> None:
        self.channel = channel
        #: whether the page gets JSON status as text messages (not noVNC: its stream is RFB's alone)
        self.status = status
        self.conn = conn
        self.clock = clock
        self.alive = alive
        self.on_close = on_close
        self.console: Any = None          # the serial socket's transport or ssh's process transport
        self.closed = False
        self._paused = False
        self._ping: Any = None
        self._message = 0

    def take_over(self, answer: bytes) -> None:
        """Send the handshake's answer; from now on the channel's bytes are WebSocket frames."""
        channel = self.channel
        channel.setTimeout(None)           # pings keep it alive instead; the session check ends it
        original_lost = channel.connectionLost

        def lost(reason: Failure = protocol.connectionDone) -> None:
            self._lost()
            original_lost(reason)

        channel.dataReceived = self.dataReceived
        channel.connectionLost = lost
        channel.pauseProducing = self._pause
        channel.resumeProducing = self._resume
        channel.transport.write(answer)
        self._ping = self.clock.callLater(PING_INTERVAL, self._keepalive)

    # --- the console side ------------------------------------------------------------
    def connect_local(self, reactor: Any, path: str) -> None:
        reactor.connectUNIX(path, _SerialFactory(self), timeout=10)

    def connect_tcp(self, reactor: Any, host: str, port: int) -> None:
        reactor.connectTCP(host, port, _SerialFactory(self), timeout=10)

    def connect_ssh(self, reactor: Any, argv: list[str]) -> None:
        reactor.spawnProcess(_Ssh(self), argv[0], argv, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})

    def attached(self, transport: Any) -> None:
        if self.closed:
            transport.loseConnection()
            return
        self.console = transport
        self.send_status(connected=True)
        if self._paused:
            self._pause()

    def _pause(self) -> None:
        self._paused = True
        if self.console is not None and hasattr(self.console, "pauseProducing"):
            self.console.pauseProducing()

    def _resume(self) -> None:
        self._paused = False
        if self.console is not None and hasattr(self.console, "resumeProducing"):
            self.console.resumeProducing()

    # --- the browser side ------------------------------------------------------------
    def _write(self, event: Any) -> None:
        if self.closed or self.conn.state != ConnectionState.OPEN:
            return
        self.channel.transport.write(self.conn.send(event))

    def send_bytes(self, data: bytes) -> None:
        self._write(BytesMessage(data=data))

    def send_status(self, **status: Any) -> None:
        if self.status:
            self._write(TextMessage(data=orjson.dumps(status).decode()))

    def fail(self, message: str) -> None:
        self.send_status(error=message)
        self.close(CLOSE_ERROR, "" if self.status else message)

    def close(self, code: int, reason: str) -> None:
        if self.closed:
            return
        self._write(CloseConnection(code=code, reason=reason[:120]))
        self._lost()
        self.channel.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self.conn.receive_data(data)
        except RemoteProtocolError:
            self.close(1002, "Protocol error")
            return
        for event in self.conn.events():
            if isinstance(event, (BytesMessage, TextMessage)):
                payload = event.data.encode("utf-8") if isinstance(event, TextMessage) else bytes(event.data)
                self._message = 0 if event.message_finished else self._message + len(payload)
                if self._message > MAX_MESSAGE:
                    self.close(CLOSE_TOO_BIG, "Message too large")
                    return
                if self.console is not None and payload:
                    self.console.write(payload)
            elif isinstance(event, Ping):
                self.channel.transport.write(self.conn.send(event.response()))
            elif isinstance(event, CloseConnection):
                if self.conn.state not in (ConnectionState.CLOSED, ConnectionState.LOCAL_CLOSING):
                    self.channel.transport.write(self.conn.send(event.response()))
                self._lost()
                self.channel.loseConnection()
                return

    def _keepalive(self) -> None:
        self._ping = None
        if self.closed:
            return
        if not self.alive():
            self.send_status(error="The session ended: log in again")
            self.close(CLOSE_POLICY, "Session ended")
            return
        self._write(Ping(payload=b"ganeti"))
        self._ping = self.clock.callLater(PING_INTERVAL, self._keepalive)

    def _lost(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._ping is not None and self._ping.active():
            self._ping.cancel()
        self._ping = None
        if self.console is not None:
            self.console.loseConnection()
        self.on_close()
