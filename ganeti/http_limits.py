"""Slow and flooding clients cannot exhaust an HTTPS daemon (RAPI, NodeD).

One policy, L{HttpLimits}, applied by L{guard} to a C{twisted.web} site:

  - L{ConnectionLimiter}, outermost (plain TCP, before any TLS work):
    at most C{max_connections_per_ip} connections from one client
    address, so that one address cannot take the whole budget, and at
    most C{max_connections} in all.  At the total cap a new connection
    takes the place of the one that has waited longest for its client
    (TLS handshake, request head, or idle between requests: see
    L{WaitingRoom}); only when every connection is busy with a request
    is the new one refused.  A refused connection is closed at once
    (C{buildProtocol} answers C{None}).
  - L{GuardedChannel}, the HTTP/1.1 channel: the TLS handshake must end
    within C{handshake_timeout}; the whole request head within
    C{header_timeout} of the handshake (or of the first byte of a later
    request on a kept-alive connection), however slowly it trickles in;
    the body within C{body_timeout} of the head; an idle kept-alive
    connection is closed after C{idle_timeout}.  A head larger than
    C{max_header_size} answers 431 and closes; a head declaring a body
    (C{Content-Length}) larger than the site's C{max_body} answers 413
    and closes at once, the body unread; a late head or body
    answers 408 and closes.  Lines may end with a bare LF (RFC 9112
    section 2.2 allows a server to accept it), so such requests are
    served instead of waiting for a CRLF that never comes.
  - Every close started by the server is followed by an abort: a TLS
    close waits for the peer's close_notify, which a hostile peer never
    sends.  After an error answer or a timeout the peer has
    C{close_grace} seconds; after a complete answer (a non-persistent
    request) it has C{idle_timeout} seconds, time to read a large answer.

Refused and cut connections are counted and logged by L{ClosureReport},
one summary line per interval, never one line per connection.
"""

from __future__ import annotations

import inspect
import resource
from collections import Counter
from typing import Any, Callable, cast

import attrs
from twisted.application.service import Service
from twisted.internet.interfaces import IHandshakeListener, IReactorTime, ITCPTransport
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python import usage
from twisted.python.failure import Failure
from twisted.web.http import HTTPChannel
from twisted.web.server import Site
from zope.interface import implementer

from ganeti.daemon import positive_float, positive_int

#: file descriptors kept out of the connection budget (listening sockets,
#: LUXI connections, log and pid files, child processes' pipes, and up to
#: WaitingRoom.max_pending evicted connections still closing)
FD_RESERVE = 128

#: connections the kernel queues before accept(); past a full queue a new
#: client's handshake waits a retransmit (1 s or more), good or bad
BACKLOG = 1024

# why a connection was refused or cut (the keys of a ClosureReport)
OVER_TOTAL = "over the connection limit"
OVER_PER_IP = "over the per-address limit"
HANDSHAKE_TIMEOUT = "TLS handshake timeout"
HEADER_TIMEOUT = "request head timeout"
BODY_TIMEOUT = "request body timeout"
IDLE_TIMEOUT = "idle timeout"
HEAD_TOO_LARGE = "request head too large"
BODY_TOO_LARGE = "request body declared too large"
EVICTED = "closed for a newer connection at the connection limit"
CLOSE_ABORTED = "aborted after close"


@attrs.frozen
class HttpLimits:
    """The limits of one HTTPS listener (seconds and bytes)."""

    max_connections: int = 1000
    max_connections_per_ip: int = 100
    handshake_timeout: float = 10.0
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    idle_timeout: float = 60.0
    max_header_size: int = 16384
    close_grace: float = 5.0


# --- the daemons' options ---------------------------------------------------------


def option_parameters(defaults: HttpLimits) -> list[list[Any]]:
    """The C{optParameters} rows of the limits, with C{defaults} shown."""
    return [
        ["max-connections", None, defaults.max_connections,
         "Most client connections open at once (clamped below the open-files limit).", positive_int],
        ["max-connections-per-ip", None, defaults.max_connections_per_ip,
         "Most connections open at once from one client address.", positive_int],
        ["handshake-timeout", None, defaults.handshake_timeout,
         "Seconds a client has to complete the TLS handshake.", positive_float],
        ["header-timeout", None, defaults.header_timeout,
         "Seconds a client has to send a whole request head.", positive_float],
        ["body-timeout", None, defaults.body_timeout,
         "Seconds a client has to send a request body, once the head arrived.", positive_float],
        ["idle-timeout", None, defaults.idle_timeout,
         "Seconds an idle kept-alive connection stays open.", positive_float],
        ["max-header-size", None, defaults.max_header_size,
         "Largest request head (request line and headers), in bytes; larger ones answer 431.", positive_int],
    ]


def limits_from_options(options: Any) -> HttpLimits:
    """The limits given on the command line.

    @raise usage.UsageError: the per-address cap exceeds the total cap.
    """
    limits = HttpLimits(
        max_connections=options["max-connections"],
        max_connections_per_ip=options["max-connections-per-ip"],
        handshake_timeout=options["handshake-timeout"],
        header_timeout=options["header-timeout"],
        body_timeout=options["body-timeout"],
        idle_timeout=options["idle-timeout"],
        max_header_size=options["max-header-size"],
    )
    if limits.max_connections_per_ip > limits.max_connections:
        raise usage.UsageError(
            "--max-connections-per-ip (%d) exceeds --max-connections (%d)"
            % (limits.max_connections_per_ip, limits.max_connections))
    return limits


def fit_to_fd_limit(limits: HttpLimits, open_files: int) -> HttpLimits:
    """C{limits} with the connection caps below C{open_files} minus L{FD_RESERVE} (pure).

    Past the open-files limit C{accept()} fails and every client, good or
    bad, is turned away; below it the per-address cap keeps room for others.
    """
    budget = max(1, open_files - FD_RESERVE)
    if limits.max_connections <= budget:
        return limits
    return attrs.evolve(limits, max_connections=budget,
                        max_connections_per_ip=min(limits.max_connections_per_ip, budget))


def raise_open_files_limit() -> int:
    """Raise this process's soft C{RLIMIT_NOFILE} to its hard limit; the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


# --- aggregate logging ------------------------------------------------------------


class ClosureReport(Service):
    """Counts refused and cut connections; logs one summary per C{interval}.

    The first event of a quiet period starts the interval; its end logs what
    happened in it at info level, with the address that caused the most.
    As a service, it logs what is left when the daemon stops.
    """

    log = Logger()

    def __init__(self, clock: IReactorTime, daemon: str, interval: float = 60.0) -> None:
        self.clock = clock
        self.daemon = daemon
        self.interval = interval
        self.reasons: Counter[str] = Counter()
        self.hosts: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()
        self._call: Any = None

    def stopService(self) -> None:
        super().stopService()
        self.flush()

    def note(self, reason: str, host: str) -> None:
        self.reasons[reason] += 1
        self.hosts[host] += 1
        self.totals[reason] += 1
        if self._call is None:
            self._call = self.clock.callLater(self.interval, self.flush)

    def flush(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if not self.reasons:
            return
        details = ", ".join("%d %s" % (n, reason) for reason, n in self.reasons.most_common())
        host, count = self.hosts.most_common(1)[0]
        self.log.info(
            "{daemon}: {total} connections refused or closed in the last {interval:.0f} s ({details}); "
            "most from {host} ({count})",
            daemon=self.daemon, total=sum(self.reasons.values()), interval=self.interval,
            details=details, host=host or "?", count=count,
        )
        self.reasons.clear()
        self.hosts.clear()


# --- connection caps --------------------------------------------------------------


class WaitingRoom:
    """The connections that wait for their client, longest waiting first.

    A connection waits from its start until its first request head is
    complete, and again from the end of each answer until the next head is
    complete; while the client sends a body or the daemon answers, it is
    busy and never evicted.  At most C{max_pending} evicted connections may
    be closing at once (their descriptors are freed on the next reactor
    turn), which bounds how far the total cap is overshot.
    """

    max_pending = 32

    def __init__(self) -> None:
        self._waiting: dict[Any, None] = {}
        self._evicted: set[Any] = set()

    @property
    def pending(self) -> int:
        """Evicted connections not yet closed."""
        return len(self._evicted)

    def enter(self, channel: Any) -> None:
        self._waiting.setdefault(channel, None)

    def leave(self, channel: Any) -> None:
        self._waiting.pop(channel, None)

    def lost(self, channel: Any) -> None:
        self._waiting.pop(channel, None)
        self._evicted.discard(channel)

    def evict_oldest(self) -> bool:
        """Close the longest waiting connection; C{False} if none may be closed."""
        if self.pending >= self.max_pending or not self._waiting:
            return False
        channel = next(iter(self._waiting))
        del self._waiting[channel]
        self._evicted.add(channel)
        channel.evict()
        return True


def _peer_host(addr: Any) -> str:
    return str(getattr(addr, "host", "") or "")


class _Counted(ProtocolWrapper):
    """A connection the limiter counts against its client address."""

    peer_host = ""


#: open connections past which a flood's memory is given back once most of them are closed
RELEASE_PEAK = 64


class ConnectionLimiter(WrappingFactory):
    """Closes at once a connection over the total or the per-address cap.

    After a flood (at least L{RELEASE_PEAK} connections open at once), once
    three quarters of them are closed, C{release} runs (a second later, on
    C{clock}): the daemon collects and hands the freed heap back to the
    system (L{ganeti.daemon.FrozenHeapService.refreeze}); without it the
    C heap keeps the TLS connections' buffers and the process its peak size.
    """

    protocol = _Counted

    def __init__(self, wrapped: Any, limits: HttpLimits, report: ClosureReport, room: WaitingRoom,
                 release: Callable[[], object] | None = None, clock: IReactorTime | None = None) -> None:
        super().__init__(wrapped)
        self.limits = limits
        self.report = report
        self.room = room
        self.per_host: Counter[str] = Counter()
        self.release = release
        self.clock = clock
        self.peak = 0
        self._release_call: Any = None

    def buildProtocol(self, addr: Any) -> Any:
        host = _peer_host(addr)
        if self.per_host[host] >= self.limits.max_connections_per_ip:
            self.report.note(OVER_PER_IP, host)
            return None
        if len(self.protocols) - self.room.pending >= self.limits.max_connections and not self.room.evict_oldest():
            self.report.note(OVER_TOTAL, host)
            return None
        wrapper = cast("_Counted | None", super().buildProtocol(addr))  # protocol = _Counted
        if wrapper is not None:
            wrapper.peer_host = host
        return wrapper

    def registerProtocol(self, p: Any) -> None:
        super().registerProtocol(p)
        self.per_host[p.peer_host] += 1
        self.peak = max(self.peak, len(self.protocols))

    def unregisterProtocol(self, p: Any) -> None:
        super().unregisterProtocol(p)
        self.per_host[p.peer_host] -= 1
        if self.per_host[p.peer_host] <= 0:
            del self.per_host[p.peer_host]
        if self.peak >= RELEASE_PEAK and len(self.protocols) <= self.peak // 4:
            self.peak = len(self.protocols)
            if self.release is not None and self.clock is not None and not (
                    self._release_call is not None and self._release_call.active()):
                self._release_call = self.clock.callLater(1.0, self.release)


# --- the HTTP channel -------------------------------------------------------------

_HANDSHAKE, _HEAD, _BODY, _BUSY, _IDLE, _CLOSING = "handshake", "head", "body", "busy", "idle", "closing"


def error_answer(code: int, reason: str, message: str) -> bytes:
    """A complete HTTP/1.1 error answer that closes the connection (pure): a JSON body as Ganeti's HTTP
    server gives its errors (C{code}, C{message}, C{explain}), which RAPI's clients parse."""
    import json

    body = json.dumps({"code": code, "message": reason, "explain": message}).encode("utf-8") + b"\n"
    return b"".join([
        b"HTTP/1.1 %d %s\r\n" % (code, reason.encode("ascii")),
        b"Content-Type: application/json\r\n",
        b"Content-Length: %d\r\n" % len(body),
        b"Connection: close\r\n\r\n",
        body,
    ])


@implementer(IHandshakeListener)
class GuardedChannel(HTTPChannel):
    """An L{HTTPChannel} with handshake, head, body and close deadlines.

    @ivar phase: C{handshake}, C{head} (a request head is due), C{body},
        C{busy} (the site answers), C{idle} (kept alive between requests)
        or C{closing}.
    """

    delimiter = b"\n"
    # our own close_grace abort replaces Twisted's (which HTTPChannel skips when None; its annotation says int)
    abortTimeout = None  # type: ignore[assignment]

    def __init__(self, limits: HttpLimits, report: ClosureReport, tls: bool,
                 room: WaitingRoom | None = None, max_body: int | None = None) -> None:
        super().__init__()
        self.limits = limits
        self.max_body = max_body
        self.report = report
        self.tls = tls
        self.room = room if room is not None else WaitingRoom()
        self.MAX_LENGTH = limits.max_header_size
        self.totalHeadersSize = limits.max_header_size
        self.phase = _HANDSHAKE if tls else _HEAD
        self._head_size = 0
        self._deadline: Any = None
        self._local: Any = None

    def getHost(self) -> Any:
        """This end's address, asked once per connection (Twisted asks it for
        every request: a C{getsockname} call each time)."""
        if self._local is None:
            self._local = super().getHost()
        return self._local

    # --- deadlines -------------------------------------------------------------------
    def _arm(self, seconds: float, expired: Any) -> None:
        self._disarm()
        self._deadline = self.callLater(seconds, expired)

    def _disarm(self) -> None:
        if self._deadline is not None and self._deadline.active():
            self._deadline.cancel()
        self._deadline = None

    def _host(self) -> str:
        if self.transport is None:
            return ""
        return _peer_host(self.transport.getPeer())

    def _expected_head(self) -> None:
        self.phase = _HEAD
        self._head_size = 0
        self._arm(self.limits.header_timeout, self._head_late)

    def _handshake_late(self) -> None:
        self._deadline = None
        self.report.note(HANDSHAKE_TIMEOUT, self._host())
        self.phase = _CLOSING
        self.room.leave(self)
        self._abort()

    def _head_late(self) -> None:
        self._deadline = None
        self.report.note(HEADER_TIMEOUT, self._host())
        self.reject(408, "Request Timeout", "The request head did not arrive within %g s" % self.limits.header_timeout)

    def _body_late(self) -> None:
        self._deadline = None
        self.report.note(BODY_TIMEOUT, self._host())
        self.reject(408, "Request Timeout", "The request body did not arrive within %g s" % self.limits.body_timeout)

    def _close_late(self) -> None:
        self._deadline = None
        self.report.note(CLOSE_ABORTED, self._host())
        self._abort()

    def evict(self) -> None:
        """Make room for a newer connection: this one waited longest for its client."""
        self.report.note(EVICTED, self._host())
        self._disarm()
        self.phase = _CLOSING
        self._abort()

    def _abort(self) -> None:
        # connected (the deadlines are armed once it is), over TCP or TLS: both can abort
        transport = cast(ITCPTransport, self.transport)
        transport.abortConnection()

    def reject(self, code: int, reason: str, message: str) -> None:
        """Answer C{code} and close, whatever was received."""
        if self.phase == _CLOSING:
            return
        transport = self.transport
        assert transport is not None  # connected: the answer is to what it received
        transport.write(error_answer(code, reason, message))
        self.loseConnection()

    # --- connection ------------------------------------------------------------------
    def connectionMade(self) -> None:
        super().connectionMade()
        self.room.enter(self)
        if self.tls:
            self.phase = _HANDSHAKE
            self._arm(self.limits.handshake_timeout, self._handshake_late)
        else:
            self._expected_head()

    def handshakeCompleted(self) -> None:
        if self.phase == _HANDSHAKE:
            self._expected_head()

    def dataReceived(self, data: bytes) -> None:
        if self.phase == _CLOSING:
            return
        if self.phase == _IDLE:
            self._expected_head()
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        if self.phase == _CLOSING:
            return
        if self.phase == _IDLE:
            self._expected_head()
        self._head_size += len(line) + 1
        if self._head_size > self.limits.max_header_size:
            self.report.note(HEAD_TOO_LARGE, self._host())
            self.reject(431, "Request Header Fields Too Large",
                        "The request head is larger than %d bytes" % self.limits.max_header_size)
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        self.report.note(HEAD_TOO_LARGE, self._host())
        self.reject(431, "Request Header Fields Too Large",
                    "The request head is larger than %d bytes" % self.limits.max_header_size)

    def allHeadersReceived(self) -> None:
        if self.max_body is not None and self.length is not None and self.length > self.max_body:
            # refused before a request exists: the body is never read (nor "100 Continue" sent)
            self.report.note(BODY_TOO_LARGE, self._host())
            self.reject(413, "Content Too Large", "The request body (%d bytes declared) is larger than %d bytes"
                        % (self.length, self.max_body))
            return
        super().allHeadersReceived()
        if self.phase == _CLOSING:
            return
        self._disarm()
        self.room.leave(self)
        if self.length != 0:
            self.phase = _BODY
            self._arm(self.limits.body_timeout, self._body_late)

    def allContentReceived(self) -> None:
        self._disarm()
        self.phase = _BUSY
        super().allContentReceived()

    def requestDone(self, request: Any) -> None:
        if self.phase != _CLOSING:
            self.phase = _IDLE
            self._head_size = 0
            if not self.persistent:
                # the answer may still be on its way out: give the peer time to read it
                self._close(max(self.limits.close_grace, self.limits.idle_timeout))
            else:
                self.room.enter(self)
        super().requestDone(request)

    def timeoutConnection(self) -> None:
        # Twisted's idle timeout; logged in aggregate instead of per connection
        if self.phase == _CLOSING:
            return
        self.report.note(IDLE_TIMEOUT, self._host())
        self.loseConnection()

    def _close(self, grace: float) -> None:
        if self.phase != _CLOSING:
            self.phase = _CLOSING
            self.room.leave(self)
            self._arm(grace, self._close_late)

    def loseConnection(self) -> None:
        self._close(self.limits.close_grace)
        super().loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.phase = _CLOSING
        self._disarm()
        self.room.lost(self)
        super().connectionLost(reason)


# --- composition --------------------------------------------------------------------


def json_site_options() -> dict[str, Any]:
    """C{Site} keyword arguments for a site whose bodies are JSON, never HTML forms.

    By default C{twisted.web} parses every POST body sent as
    C{application/x-www-form-urlencoded} or C{multipart/form-data} into
    C{request.args}, and parses each POST's C{Content-Type} with the
    standard library's C{email} package (which loads C{email.policy} and
    its header registry, ~0.6 MiB, on the first POST).  NodeD's RPC and
    RAPI take JSON bodies: a form-typed body must not become query
    arguments, and nothing needs parsing.  A Twisted whose C{Site} takes
    C{parsePOSTFormSubmission} gets C{False}; an older one no argument.
    """
    if "parsePOSTFormSubmission" in inspect.signature(Site.__init__).parameters:
        return {"parsePOSTFormSubmission": False}
    return {}


def guard(site: Site, limits: HttpLimits, report: ClosureReport, tls: Any = None,
          max_body: int | None = None, release: Callable[[], object] | None = None) -> WrappingFactory:
    """The listening factory of C{site} under C{limits}.

    A request declaring a body over C{max_body} bytes is answered 413 as
    soon as its head is in (L{GuardedChannel}); C{None}: no such limit.
    C{release} gives memory back after a flood (L{ConnectionLimiter}).

    C{site}'s connections become L{GuardedChannel}s with C{limits}'
    idle timeout; C{tls}, a L{ganeti.tlsbio.TLSEnd} (or a pyOpenSSL context
    factory), puts TLS between the limiter and the site (give C{None} for
    plain HTTP).
    """
    use_tls = tls is not None
    room = WaitingRoom()
    # a plain HTTP/1.1 channel instead of Twisted's HTTP/2-negotiating wrapper of one
    site.protocol = lambda: GuardedChannel(limits, report, use_tls, room, max_body)  # type: ignore[method-assign, assignment, return-value]
    site.timeOut = limits.idle_timeout
    inner: Any = site
    if hasattr(tls, "check_peer"):  # a TLS end (L{ganeti.tlsbio})
        from ganeti.tlsbio import TLSServerFactory

        inner = TLSServerFactory(tls, site)
    elif use_tls:  # a pyOpenSSL context factory (an unjoined NodeD's: L{ganeti.noded.join})
        from twisted.protocols.tls import TLSMemoryBIOFactory

        inner = TLSMemoryBIOFactory(tls, False, site)
    return ConnectionLimiter(inner, limits, report, room, release, site.reactor)
