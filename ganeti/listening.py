"""A daemon listens on all its addresses, or it does not run.

Twisted's L{StreamServerEndpointService} logs a failure to listen and lets
the process run on, holding its pid file, serving nothing.  Our daemons use
L{Listener} instead: it listens while twistd starts the application
(C{privilegedStartService}, before the reactor runs), and a failure ends the
process with status 1 and one log line naming the address and the reason::

    ganeti-noded cannot listen on 127.0.1.1 port 1811 (TCP): [Errno 98] Address already in use

Daemonized, twistd's parent reports that reason to the starting shell and
exits 1 too.  A failure that only shows once the reactor runs (an endpoint
that listens asynchronously, noded re-listening after a join) stops the
reactor and exits 1 the same way (L{fail_daemon}).

Unix sockets: the daemon's pid file, which it holds locked, is its identity.
Once it holds that lock, a socket left at its path and Twisted's
C{<socket>.lock} symlink belong to a dead instance by definition, whatever
pid the symlink names (a killed process not reaped yet, or a reused pid), so
L{remove_stale_socket} removes them before listening.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Any, Callable

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IReactorCore
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti.reactors import IReactor

log = Logger()

#: exit status of a daemon that cannot listen (Ganeti's EXIT_FAILURE)
EXIT_FAILURE = 1

#: what every "cannot listen" log line contains (C{ganeti-daemons} looks for it)
CANNOT_LISTEN = "cannot listen on"


class CannotListen(SystemExit, Exception):
    """A daemon cannot listen on one of its addresses, so it must not run.

    Both an C{Exception} and a C{SystemExit}, on purpose.  twistd reports an
    C{Exception} raised while it starts the application through its status
    pipe, so a daemonizing twistd prints the reason and exits 1; the
    exception then leaves twistd, and the interpreter ends the process
    with status C{code} (1) and no traceback: the reason is already logged.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = EXIT_FAILURE

    def __str__(self) -> str:
        return str(self.args[0])


def failure_message(daemon: str, where: str, error: BaseException) -> str:
    """The one line that says why C{daemon} cannot listen on C{where}."""
    if isinstance(error, CannotListenError):
        reason = error.socketError
        if isinstance(reason, BaseException):
            text = str(reason) or type(reason).__name__
        else:
            text = str(reason)
    else:
        text = str(error) or type(error).__name__
    return "%s %s %s: %s" % (daemon, CANNOT_LISTEN, where, text)


def split_description(description: str) -> list[str]:
    """The colon-separated fields of an endpoint string, C{\\:} unescaped."""
    fields, current, chars = [], [], iter(description)
    for char in chars:
        if char == "\\":
            current.append(next(chars, "\\"))
        elif char == ":":
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
    fields.append("".join(current))
    return fields


def describe_endpoint(description: str) -> tuple[str, str | None]:
    """C{(where, unix_path)} of a server endpoint string, for log lines.

    C{unix:PATH:...} gives C{("unix socket PATH", PATH)}; C{tcp:PORT:interface=ADDR}
    gives C{("ADDR port PORT (TCP)", None)}; anything else is named as written.
    """
    kind, *args = split_description(description)
    positional = [a for a in args if "=" not in a]
    named = dict(a.split("=", 1) for a in args if "=" in a)
    kind = kind.lower()
    if kind == "unix":
        path = named.get("address", positional[0] if positional else "")
        if path:
            return "unix socket %s" % path, path
    if kind in ("tcp", "tcp6", "ssl"):
        port = named.get("port", positional[0] if positional else "")
        interface = named.get("interface", "::" if kind == "tcp6" else "0.0.0.0")
        if port:
            return "%s port %s (%s)" % (interface, port, "TLS" if kind == "ssl" else "TCP"), None
    return description, None


def remove_stale_socket(path: str) -> list[str]:
    """Remove a leftover Unix socket at C{path} and its C{path.lock} symlink.

    Only for the holder of the daemon's pid file: whatever is there belongs
    to a dead instance.  Anything at C{path} that is not a socket is left
    alone (listening then fails with a clear reason).  Returns what was
    removed.
    """
    removed = []
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
            removed.append(path)
    except FileNotFoundError:
        pass
    lock = path + ".lock"
    if os.path.islink(lock):
        try:
            os.unlink(lock)
            removed.append(lock)
        except FileNotFoundError:
            pass
    return removed


def _exit_now(status: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def fail_daemon(reactor: IReactorCore, message: str, exit: Callable[[int], Any] = _exit_now) -> None:
    """Log C{message}, stop the reactor, and end the process with status 1.

    For failures once the reactor runs: the services stop as usual, then
    the process exits with L{EXIT_FAILURE} instead of twistd's 0.
    """
    log.critical("{line}", line=message)
    reactor.addSystemEventTrigger("after", "shutdown", exit, EXIT_FAILURE)
    if reactor.running:
        reactor.stop()
    else:
        reactor.callWhenRunning(reactor.stop)


class Listener(Service):
    """Listens on one address when the daemon starts; the daemon ends if it cannot.

    @param listen: starts listening; returns the port, or a Deferred of it
        (e.g. C{lambda: endpoint.listen(factory)})
    @param where: the address as people read it (C{127.0.1.1 port 1811 (TCP)})
    @param daemon: the daemon's name, for the log line
    @param stale_socket: a Unix socket path to clear first (L{remove_stale_socket})
    @param optional: what the daemon serves there it also serves elsewhere (NodeD's
        own-node socket): a failure is logged as a warning with C{fallback}, and the
        daemon goes on
    """

    log = Logger()

    def __init__(
        self,
        listen: Callable[[], Any],
        where: str,
        *,
        daemon: str,
        reactor: IReactorCore,
        stale_socket: str | None = None,
        exit: Callable[[int], Any] = _exit_now,
        optional: bool = False,
        fallback: str = "",
    ) -> None:
        self._listen = listen
        self._optional = optional
        self._fallback = fallback
        self.where = where
        self.daemon = daemon
        self._reactor = reactor
        self._stale_socket = stale_socket
        self._exit = exit
        self._started = False
        self._stopped = False
        self._pending: defer.Deferred[Any] | None = None
        self.port: Any = None

    def privilegedStartService(self) -> None:
        """Listen now, before the reactor runs: raise L{CannotListen} on failure."""
        super().privilegedStartService()
        self._start(raise_now=True)

    def startService(self) -> None:
        """Listen now unless L{privilegedStartService} did (C{twist}, tests)."""
        super().startService()
        if not self._started:
            self._start(raise_now=False)

    def _start(self, raise_now: bool) -> None:
        self._started = True
        if self._stale_socket:
            try:
                removed = remove_stale_socket(self._stale_socket)
            except OSError as e:
                why = "cannot remove what a dead instance left there (%s)" % e
                self._settled(Failure(CannotListenError(None, self._stale_socket, why)), raise_now)
                return
            for path in removed:
                self.log.info("{daemon}: removed {path} left by a dead instance", daemon=self.daemon, path=path)
        outcome: list[Any] = []
        synchronous = True

        def settle(result: Any) -> None:
            if synchronous:
                outcome.append(result)
                return
            self._pending = None  # an asynchronous endpoint: the reactor runs by now
            if self._stopped:  # stopped (and the attempt cancelled) meanwhile
                if not isinstance(result, Failure):
                    result.stopListening()
                return
            self._settled(result, raise_now=False)

        pending = defer.maybeDeferred(self._listen)
        pending.addBoth(settle)
        synchronous = False
        if outcome:
            self._settled(outcome[0], raise_now)
        else:
            self._pending = pending

    def _settled(self, result: Any, raise_now: bool) -> None:
        if not isinstance(result, Failure):
            self.port = result
            return
        message = failure_message(self.daemon, self.where, result.value)
        if self._optional:
            self.log.warn("{line}; {fallback}", line=message, fallback=self._fallback or "going on without it")
            return
        if raise_now:
            self.log.critical("{line}", line=message)
            raise CannotListen(message)
        fail_daemon(self._reactor, message, self._exit)

    def stopService(self) -> Any:
        super().stopService()
        self._stopped = True
        if self._pending is not None:
            self._pending.cancel()
        port, self.port = self.port, None
        if port is not None:
            return port.stopListening()
        return None


def stream_listener(endpoint: Any, factory: Any, where: str, *, daemon: str, reactor: IReactorCore,
                    stale_socket: str | None = None, optional: bool = False, fallback: str = "") -> Listener:
    """A L{Listener} for a stream server endpoint."""
    return Listener(lambda: endpoint.listen(factory), where, daemon=daemon, reactor=reactor, stale_socket=stale_socket,
                    optional=optional, fallback=fallback)


def endpoint_listener(description: str, factory: Any, *, daemon: str, reactor: IReactor) -> Listener:
    """A L{Listener} for an endpoint string (C{--listen}); Unix sockets are cleared first."""
    from twisted.internet.endpoints import serverFromString

    where, path = describe_endpoint(description)
    return stream_listener(serverFromString(reactor, description), factory, where, daemon=daemon, reactor=reactor,
                           stale_socket=path)


def datagram_listener(port: int, protocol: Any, *, interface: str, max_packet: int, daemon: str,
                      reactor: IReactor) -> Listener:
    """A L{Listener} for a UDP port."""
    return Listener(
        lambda: reactor.listenUDP(port, protocol, interface=interface, maxPacketSize=max_packet),
        "%s port %d (UDP)" % (interface, port),
        daemon=daemon,
        reactor=reactor,
    )


__all__ = [
    "CANNOT_LISTEN",
    "CannotListen",
    "EXIT_FAILURE",
    "Listener",
    "datagram_listener",
    "describe_endpoint",
    "endpoint_listener",
    "fail_daemon",
    "failure_message",
    "remove_stale_socket",
    "stream_listener",
]
