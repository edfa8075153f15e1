"""LUXI clients: a blocking one for the gnt-* tools, an asynchronous one for daemons.

    with LuxiClient(paths.luxi_socket) as luxi:
        job_id = luxi.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 1}])

    client = await AsyncLuxiClient.connect(reactor, paths.luxi_socket)
    info = await client.run(methods.QueryClusterInfo.call())

Calls are built from the declarations of L{ganeti.luxi.methods}, so mypy
checks their arguments and knows their result types, and a value of the
wrong type is refused before anything is sent (with the error LuxiD would
answer).  C{call(method, *args)} sends anything, unchecked (tests, fuzzing).

L{LuxiClient} talks to one socket and fails when it cannot;
C{MasterClient(paths)} (L{ganeti.luxi.master})
finds the master wherever it is and rides through a failover, and
L{AsyncLuxiClient.connect_master} connects to the master wherever it is.

A failure answer raises the exception it names (C{["OpPrereqError", [msg,
code]]} raises L{errors.OpPrereqError}C{(msg, code)}); trouble with the
connection itself raises L{errors.LuxiError}.

Every CLI command imports this module, so it imports only the standard
library, orjson, L{ganeti.errors}, L{ganeti.luxi.wire} and the declarations
(L{ganeti.luxi.methods}, L{ganeti.contract}): no Twisted and no attrs.  L{AsyncLuxiClient} imports Twisted when first used.
"""

from __future__ import annotations

import _socket  # not socket: its import (selectors, four enum conversions) is a tenth of a gnt-* command's start
import errno
import os
import select
import sys
import time

from ganeti import errors
from ganeti.lighttyping import TypeVar, cast
from ganeti.luxi import methods, wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any

    from twisted.internet.defer import Deferred

#: connect timeout of Ganeti's client (LUXI_DEF_CTMO), seconds
DEFAULT_CONNECT_TIMEOUT = 30.0
#: read/write timeout of Ganeti's client (LUXI_DEF_RWTO), seconds
DEFAULT_TIMEOUT = 180.0

R = TypeVar("R")

_RECV_SIZE = 65536
_SEND_FLAGS = getattr(_socket, "MSG_NOSIGNAL", 0)


def _is_tls(sock: Any) -> bool:
    """Whether C{sock} is a TLS socket (to a master on another node), which takes no send flags."""
    ssl = sys.modules.get("ssl")
    return ssl is not None and isinstance(sock, ssl.SSLSocket)


class NotSent(errors.LuxiError):
    """The request never reached the server whole (no connection, or it broke while sending)."""


class ConnectionLost(errors.LuxiError):
    """The connection broke (or was closed) after the request was sent, before the answer."""


class CallTimeout(errors.LuxiError):
    """No answer within the call's timeout; the request was sent."""


def connect_error(address: str, reason: str, code: int | None = None) -> errors.LuxiError:
    """The error for a master socket that cannot be reached.

    @param code: the C{errno}, if known: a missing socket or a refused
        connection means the daemon is not running, and the message says so.
    """
    message = "cannot connect to the master daemon at %s: %s" % (address, reason)
    if code in (errno.ENOENT, errno.ECONNREFUSED, None):
        message += "; is ganeti-luxid running?"
    return NotSent(message)


def _encode(method: str, args: tuple[Any, ...] | list[Any]) -> bytes:
    try:
        return wire.encode_request(method, args, wire.LUXI_VERSION)
    except TypeError as e:
        raise errors.LuxiError("cannot encode the arguments of %s: %s" % (method, e)) from None


class LuxiClient:
    """A blocking LUXI client over one Unix socket connection.

    The connection is opened by the first call and kept for the next ones;
    if the server closed it while it was idle, the next call reconnects
    once, transparently.  After a timeout or any other trouble in the
    middle of a call the connection is closed, so that a late answer can
    never be taken for the answer to a later request.

    Not thread-safe: use one client per thread.
    """

    def __init__(
        self,
        address: str,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_message_size: int = wire.DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        """
        @param address: the path of the server's Unix socket.
        @param timeout: how long one call may take, from sending the
            request to the end of the answer, in seconds.
        @param connect_timeout: how long connecting may take, in seconds.
        @param max_message_size: the largest answer accepted, in bytes.
        """
        self.address = address
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._max_message_size = max_message_size
        self._sock: socket.socket | None = None
        self._framer: wire.Framer | None = None

    # --- connection ---------------------------------------------------------
    def _open_socket(self) -> socket.socket:
        """Connect to C{self.address} (tests override this)."""
        sock = cast("socket.socket", _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM))
        deadline = time.monotonic() + self.connect_timeout
        try:
            while True:
                sock.settimeout(max(deadline - time.monotonic(), 0.001))
                try:
                    sock.connect(self.address)
                    return sock
                except BlockingIOError:  # EAGAIN: the listen backlog is full
                    if time.monotonic() >= deadline:
                        raise TimeoutError("timed out") from None
                    time.sleep(0.01)
        except BaseException:
            sock.close()
            raise

    def _connect(self) -> socket.socket:
        try:
            sock = self._open_socket()
        except TimeoutError:
            raise connect_error(self.address, "timed out after %gs" % self.connect_timeout, errno.ETIMEDOUT) from None
        except OSError as e:
            raise connect_error(self.address, e.strerror or str(e), e.errno) from None
        self._sock = sock
        self._framer = wire.Framer(self._max_message_size)
        return sock

    def _idle_connection_usable(self, sock: socket.socket) -> bool:
        """Whether an idle connection is still open.

        An idle connection has nothing to read: if it is readable, the
        server closed it (or sent something nobody asked for).
        """
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        sock, self._sock, self._framer = self._sock, None, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> LuxiClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # --- calls --------------------------------------------------------------
    def call(self, method: str, *args: Any) -> Any:
        """Call C{method} with C{args} and return its result.

        @raise errors.GenericError: the server answered with this error.
        @raise errors.LuxiError: the server cannot be reached, timed out,
            closed the connection or answered something that is not LUXI.
        """
        request = _encode(method, args)
        sock = self._sock
        reused = sock is not None
        if sock is not None and not self._idle_connection_usable(sock):
            self.close()
            sock, reused = None, False
        if sock is None:
            sock = self._connect()
        deadline = time.monotonic() + self.timeout
        sent = False
        try:
            try:
                self._send(sock, request, deadline)
            except (BrokenPipeError, ConnectionResetError):
                if not reused:
                    raise
                # The server closed the idle connection as we were about to
                # use it; it cannot have read the whole request: retry once.
                self.close()
                sock = self._connect()
                self._send(sock, request, deadline)
            sent = True
            payload = self._receive(sock, deadline, method)
        except BaseException as e:
            self.close()
            if isinstance(e, TimeoutError):
                raise (CallTimeout if sent else NotSent)(
                    "%s timed out after %gs waiting for the master daemon at %s" % (method, self.timeout, self.address)
                ) from None
            if isinstance(e, OSError):
                raise (ConnectionLost if sent else NotSent)(
                    "%s failed: connection to the master daemon at %s broke: %s"
                    % (method, self.address, e.strerror or e)
                ) from None
            raise
        try:
            return wire.decode_result(payload, wire.LUXI_VERSION)
        except wire.LuxiProtocolError:
            self.close()
            raise

    def _send(self, sock: socket.socket, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            sock.settimeout(self._remaining(deadline))
            sent = sock.send(view, 0 if _is_tls(sock) else _SEND_FLAGS)
            view = view[sent:]

    def _receive(self, sock: socket.socket, deadline: float, method: str) -> bytes:
        framer = self._framer
        assert framer is not None
        data = b""
        while True:
            for payload in framer.feed(data):
                return payload
            sock.settimeout(self._remaining(deadline))
            data = sock.recv(_RECV_SIZE)
            if not data:
                raise ConnectionLost(
                    "%s failed: the master daemon at %s closed the connection before answering"
                    % (method, self.address)
                )

    @staticmethod
    def _remaining(deadline: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("timed out")
        return remaining

    def run(self, request: methods.Request[R]) -> R:
        """Make a declared call: C{client.run(methods.Query.call("node", ["name"]))}.

        @raise errors.GenericError: the server answered with this error.
        @raise errors.LuxiError: as L{call}.
        """
        result: R = self.call(request.method, *request.args)
        return result

    # --- Ganeti's methods, as declared in ganeti.luxi.methods (run() of each) --
    submit_job = methods.Blocking(methods.SubmitJob)
    submit_job_to_drained_queue = methods.Blocking(methods.SubmitJobToDrainedQueue)
    submit_many_jobs = methods.Blocking(methods.SubmitManyJobs)
    wait_for_job_change = methods.Blocking(methods.WaitForJobChange)
    cancel_job = methods.Blocking(methods.CancelJob)
    archive_job = methods.Blocking(methods.ArchiveJob)
    auto_archive_jobs = methods.Blocking(methods.AutoArchiveJobs)
    change_job_priority = methods.Blocking(methods.ChangeJobPriority)
    query_jobs = methods.Blocking(methods.QueryJobs)
    set_drain_flag = methods.Blocking(methods.SetDrainFlag)
    pickup_job = methods.Blocking(methods.PickupJob)
    query = methods.Blocking(methods.Query)
    query_fields = methods.Blocking(methods.QueryFields)
    query_instances = methods.Blocking(methods.QueryInstances)
    query_nodes = methods.Blocking(methods.QueryNodes)
    query_groups = methods.Blocking(methods.QueryGroups)
    query_networks = methods.Blocking(methods.QueryNetworks)
    query_exports = methods.Blocking(methods.QueryExports)
    query_cluster_info = methods.Blocking(methods.QueryClusterInfo)
    query_config_values = methods.Blocking(methods.QueryConfigValues)
    query_tags = methods.Blocking(methods.QueryTags)
    set_watcher_pause = methods.Blocking(methods.SetWatcherPause)
    query_filters = methods.Blocking(methods.QueryFilters)
    replace_filter = methods.Blocking(methods.ReplaceFilter)
    delete_filter = methods.Blocking(methods.DeleteFilter)


# --- asynchronous client (Twisted, imported on first use) --------------------
class AsyncLuxiClient:
    """A LUXI client for code running in the reactor (RAPI, tools, tests).

    Calls are pipelined over one connection: each is written at once and
    the answers, which the server sends in order, are matched in order.
    Losing the connection fails every pending call with L{errors.LuxiError}.
    """

    def __init__(self, protocol: Any) -> None:
        """
        @param protocol: a connected L{LuxiClientProtocol}; see L{connect}.
        """
        self.protocol = protocol

    @classmethod
    async def connect(
        cls, reactor: Any, path: str, timeout: float = DEFAULT_CONNECT_TIMEOUT
    ) -> AsyncLuxiClient:
        """Connect to the LUXI server listening on Unix socket C{path}.

        @raise errors.LuxiError: the server cannot be reached.
        """
        from twisted.internet import error as neterror
        from twisted.internet.endpoints import UNIXClientEndpoint, connectProtocol

        protocol = _protocol_class()(path)
        endpoint = UNIXClientEndpoint(reactor, path, timeout=timeout)
        try:
            await connectProtocol(endpoint, protocol)
        except neterror.TimeoutError:
            raise connect_error(path, "timed out after %gs" % timeout, errno.ETIMEDOUT) from None
        except neterror.ConnectError as e:
            code = e.osError if isinstance(e.osError, int) else None
            if code is None and isinstance(e, neterror.ConnectionRefusedError):
                code = errno.ECONNREFUSED
            reason = os.strerror(code) if code is not None else str(e.args[0] if e.args else e)
            raise connect_error(path, reason, code) from None
        return cls(protocol)

    @classmethod
    async def connect_master(
        cls, reactor: Any, paths: Any, ask_confd: bool = False, timeout: float = DEFAULT_CONNECT_TIMEOUT
    ) -> AsyncLuxiClient:
        """Connect to the master's LuxiD wherever it is (L{ganeti.luxi.locate}): this
        node's socket, or the master's heartbeat port over TLS; with C{ask_confd}, the
        candidates' confd are asked first (in a thread: it waits for their answers).

        @raise NotSent: no master known, or it cannot be reached.
        """
        from twisted.internet.endpoints import connectProtocol
        from twisted.internet.threads import deferToThreadPool

        from ganeti.asyncutil import tcp_client_endpoint
        from ganeti.luxi import locate

        if ask_confd and hasattr(reactor, "getThreadPool"):
            where = await deferToThreadPool(reactor, reactor.getThreadPool(), locate.locate, paths, True)
        else:
            where = locate.locate(paths, False)
        if where is None or where.address is None:
            return await cls.connect(reactor, paths.luxi_socket, timeout)
        from ganeti.rpc.tls import ReloadingPolicy
        from ganeti.tlsbio import wrap_client

        address = "%s (%s port %d)" % (where.name, where.address, where.port)
        creator = ReloadingPolicy(paths).creatorForNetloc(where.address.encode(), where.port)
        endpoint = wrap_client(creator, tcp_client_endpoint(reactor, where.address, where.port, timeout))
        protocol = _protocol_class()(address)
        try:
            await connectProtocol(endpoint, protocol)
        except Exception as e:
            raise connect_error(address, str(e)) from None
        return cls(protocol)

    def run(self, request: methods.Request[R]) -> Deferred[R]:
        """Make a declared call: C{await client.run(methods.Query.call("node", ["name"]))}.

        @return: a L{Deferred} as L{call}'s.
        """
        d: Deferred[R] = self.protocol.call(request.method, request.args)
        return d

    def call(self, method: str, *args: Any) -> Deferred[Any]:
        """Call C{method} with C{args} (not checked against the declarations; see L{run}).

        @return: a L{Deferred} (awaitable) with the result; it fails with
            the server's error, or L{errors.LuxiError} if the connection
            breaks.  Cancelling it discards the answer when it comes.
        """
        return cast("Deferred[Any]", self.protocol.call(method, args))

    def close(self) -> Deferred[None]:
        """Close the connection; the Deferred fires once it is closed."""
        return cast("Deferred[None]", self.protocol.close())

    @property
    def connected(self) -> bool:
        """Whether calls can still be sent (the connection is neither lost nor closed)."""
        return self.protocol.lost is None


_PROTOCOL_CLASS: Any = None


def _protocol_class() -> Any:
    """Define L{LuxiClientProtocol} on first use (it needs Twisted)."""
    global _PROTOCOL_CLASS
    if _PROTOCOL_CLASS is None:
        _PROTOCOL_CLASS = _define_protocol_class()
    return _PROTOCOL_CLASS


def __getattr__(name: str) -> Any:
    # LuxiClientProtocol is importable from here, but built lazily.
    if name == "LuxiClientProtocol":
        return _protocol_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _define_protocol_class() -> Any:
    from collections import deque

    from twisted.internet.defer import Deferred, fail, succeed
    from twisted.internet.interfaces import ITransport
    from twisted.internet.protocol import Protocol
    from twisted.logger import Logger
    from twisted.python.failure import Failure

    class LuxiClientProtocol(Protocol):
        """The client side of one LUXI connection, with pipelined calls."""

        log = Logger()

        def __init__(self, address: str = "", max_message_size: int = wire.DEFAULT_MAX_MESSAGE_SIZE) -> None:
            """
            @param address: the server's socket path, for error messages.
            @param max_message_size: the largest answer accepted, in bytes.
            """
            self.address = address
            self._framer = wire.Framer(max_message_size)
            self._pending: deque[tuple[str, Deferred[Any]]] = deque()
            self._lost: str | None = None  # why the connection is gone
            self._closed: list[Deferred[None]] = []

        def _connected(self) -> ITransport:
            """The transport (set by Twisted before any callback runs)."""
            transport = self.transport
            assert transport is not None, "LUXI client protocol used before its connection was made"
            return transport

        @property
        def lost(self) -> str | None:
            """Why the connection is gone (lost, closed or dropped after a protocol error), or C{None}."""
            return self._lost

        def call(self, method: str, args: tuple[Any, ...] | list[Any]) -> Deferred[Any]:
            if self._lost is not None:
                return fail(errors.LuxiError("%s not sent: %s" % (method, self._lost)))
            try:
                data = _encode(method, args)
            except errors.LuxiError:
                return fail()
            d: Deferred[Any] = Deferred()
            self._pending.append((method, d))
            self._connected().write(data)
            return d

        def close(self) -> Deferred[None]:
            if self._lost is not None:
                return succeed(None)
            d: Deferred[None] = Deferred()
            self._closed.append(d)
            self._connected().loseConnection()
            return d

        def dataReceived(self, data: bytes) -> None:
            try:
                for payload in self._framer.feed(data):
                    self._answer(payload)
            except wire.LuxiProtocolError as e:
                self._abort(e)

        def _answer(self, payload: bytes) -> None:
            if not self._pending:
                raise wire.LuxiProtocolError("answer without a request: %.200r" % payload)
            method, d = self._pending.popleft()
            try:
                success, result = wire.decode_response(payload, wire.LUXI_VERSION)
            except wire.LuxiProtocolError as e:
                if not d.called:
                    d.errback(wire.LuxiProtocolError("%s: %s" % (method, e)))
                raise
            if d.called:  # cancelled by the caller
                return
            if success:
                d.callback(result)
            else:
                d.errback(wire.error_from_result(result))

        def _abort(self, error: wire.LuxiProtocolError) -> None:
            """The stream can no longer be trusted: drop the connection."""
            self.log.warn("LUXI server at {address} misbehaves: {error}", address=self.address, error=error)
            if self._lost is None:
                self._lost = "protocol error: %s" % error
            self._connected().loseConnection()

        def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
            if self._lost is None:
                why = reason.getErrorMessage() if reason is not None else "closed"
                self._lost = "connection to %s lost: %s" % (self.address or "the LUXI server", why)
            pending, self._pending = self._pending, deque()
            for method, d in pending:
                if not d.called:
                    d.errback(errors.LuxiError("%s failed: %s" % (method, self._lost)))
            closed, self._closed = self._closed, []
            for waiter in closed:
                waiter.callback(None)

    return LuxiClientProtocol
