"""NodeD's unjoined mode in a process of its own.

The join's proof is bound to its TLS connection by exported keying
material, which the standard library's C{ssl} cannot export: the unjoined
listener (L{ganeti.noded.join}) uses pyOpenSSL, and its key and payload
C{cryptography}.  Imported by NodeD itself, both would stay in its memory
for its whole life (10 MiB RSS of a node's 50), though the joined NodeD's
TLS is the standard library's (L{ganeti.tlsbio}).  So NodeD
(L{JoinChild}) listens on its address and port, stops accepting, and
hands that socket to a child, C{python -m ganeti.noded.joinchild}, which
serves the join on it (L{ganeti.noded.join.JoinService}, unchanged).

Once the files are written, the child stops accepting and says so on its
output; NodeD then accepts on the same socket with the cluster
certificate, and the child answers the master and exits once its last
connection closes.  The socket never stops listening: a connection made
meanwhile waits in its backlog, so the master's next call is served, as
when both modes ran in one process.  The child's log lines are NodeD's
(relayed with their level); five wrong proofs make the child exit with
L{EXIT_BURNT}, and NodeD ends with it.

What the child gets on its standard input, one JSON line: the root, the
token (never on a command line), the token file and the connection limits.
The child ends when NodeD does, even killed (Linux's parent-death signal).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import attrs
from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.protocol import Factory, ProcessProtocol
from twisted.logger import ILogObserver, Logger, LogLevel, eventAsText
from twisted.protocols.policies import WrappingFactory
from twisted.python.failure import Failure
from zope.interface import provider

from ganeti import http_limits
from ganeti.listening import Listener, fail_daemon
from ganeti.paths import Paths

#: the child's exit status when the token is burnt (five wrong proofs)
EXIT_BURNT = 3
#: the descriptor of the listening socket in the child
SOCKET_FD = 3
#: seconds the child waits, once joined, for its connections to close
LINGER = 10.0


class _Refuse(Factory):
    """The factory of NodeD's listener while the child accepts: never used (the listener is paused)."""

    def buildProtocol(self, addr: Any) -> None:
        return None


class _Child(ProcessProtocol):
    def __init__(self, owner: JoinChild) -> None:
        self._owner = owner
        self._buffer = b""

    def outReceived(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._owner.message(line)

    def processEnded(self, reason: Failure) -> None:
        self._owner.ended(getattr(reason.value, "exitCode", None), getattr(reason.value, "signal", None))


class JoinChild(Service):
    """NodeD's side: the listener, paused, and the child serving the join on it.

    @param listen: starts listening with a factory (the endpoint's C{listen}); the port is paused at once
    @param joined_factory: builds the factory of joined mode (once the cluster certificate is in place)
    @param stop: ends the daemon (the token is burnt)
    @param after_join: called once NodeD serves in joined mode
    """

    log = Logger()

    def __init__(self, paths: Paths, listen: Callable[[Any], Any], family: int, token: str,
                 joined_factory: Callable[[], Any], *, limits: http_limits.HttpLimits, reactor: Any, where: str,
                 token_file: str | None = None, stop: Callable[[], Any] | None = None,
                 after_join: Callable[[], Any] | None = None) -> None:
        self.paths = paths
        self._family = family
        self._token = token
        self._token_file = token_file
        self._joined_factory = joined_factory
        self._limits = limits
        self._reactor = reactor
        self._where = where
        self._stop = stop
        self._after_join = after_join
        self._listener = Listener(lambda: listen(_Refuse()), where, daemon="ganeti-noded", reactor=reactor)
        self._process: Any = None
        self.port: Any = None  # joined mode's
        self.joined = False

    def privilegedStartService(self) -> None:
        super().privilegedStartService()
        self._listener.privilegedStartService()
        self._pause()

    def startService(self) -> None:
        super().startService()
        self._listener.startService()
        self._pause()
        if self._listener.port is None or self._process is not None:
            return
        settings = {"root": self.paths.root, "token": self._token, "token_file": self._token_file,
                    "limits": attrs.asdict(self._limits), "family": self._family, "parent": os.getpid()}
        self._process = self._reactor.spawnProcess(
            _Child(self), sys.executable, [sys.executable, "-m", "ganeti.noded.joinchild"], env=dict(os.environ),
            childFDs={0: "w", 1: "r", 2: 2, SOCKET_FD: self._listener.port.fileno()})
        self._process.writeToChild(0, json.dumps(settings).encode("utf-8") + b"\n")
        self._process.closeStdin()

    def _pause(self) -> None:
        """Listening (the backlog fills), not accepting: the child accepts, then joined mode's port."""
        if self._listener.port is not None:
            self._listener.port.stopReading()

    def stopService(self) -> Any:
        super().stopService()
        if self._process is not None:
            try:
                self._process.signalProcess("TERM")
            except Exception:  # noqa: BLE001 (ended meanwhile)
                pass
        stopping = []
        port, self.port = self.port, None
        if port is not None:
            stopping.append(port.stopListening())
        # last: closing a port Twisted made shuts its socket down, which ends every copy's listening
        stopping.append(self._listener.stopService())
        return defer.gatherResults([d for d in stopping if isinstance(d, defer.Deferred)])

    # --- what the child says ----------------------------------------------------------------------

    def message(self, line: bytes) -> None:
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if not isinstance(value, dict):  # not ours: said as it is
            self.log.info("join: {line}", line=line.decode("utf-8", "replace"))
            return
        if value.get("joined"):
            self._take_over()
            return
        try:
            level = LogLevel.levelWithName(str(value.get("level")))
        except Exception:  # noqa: BLE001 (a level we do not know)
            level = LogLevel.info
        self.log.emit(level, "{text}", text=str(value.get("text", "")))

    def _take_over(self) -> None:
        """The child wrote the files and stopped accepting: accept on the same socket in joined mode."""
        paused = self._listener.port
        if self.joined or paused is None:
            return
        try:
            self.port = self._reactor.adoptStreamPort(paused.fileno(), self._family, self._joined_factory())
        except Exception as e:  # noqa: BLE001 (the certificate just written, or the socket)
            fail_daemon(self._reactor, "ganeti-noded cannot serve node RPC with the cluster certificate: %s" % e)
            return
        self.joined = True  # the paused port stays open until NodeD stops (see stopService)
        if self._after_join is not None:
            self._after_join()

    def ended(self, code: int | None, signal: int | None) -> None:
        self._process = None
        if not self.running or self.joined:
            return
        if code == EXIT_BURNT:
            if self._stop is not None:
                self._reactor.callLater(0.1, self._stop)
            return
        fail_daemon(self._reactor, "ganeti-noded: the join process ended (%s) before a join"
                    % ("signal %s" % signal if signal else "status %s" % code))


# --- the child ---------------------------------------------------------------------------------------


def _say(value: dict[str, Any]) -> None:
    try:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # NodeD is gone (see _end_with_parent)
        pass


@provider(ILogObserver)
def _relay(event: dict[str, Any]) -> None:
    level = event.get("log_level") or LogLevel.info
    text = eventAsText(event, includeTimestamp=False, includeSystem=False)
    _say({"level": level.name, "text": text})


class _AdoptedEndpoint:
    """The child's "endpoint": its first listen serves the inherited socket; the second (joined mode) is
    NodeD's, told on the output."""

    def __init__(self, reactor: Any, family: int, counting: Callable[[Any], WrappingFactory]) -> None:
        self._reactor = reactor
        self._family = family
        self._counting = counting

    def listen(self, factory: Any) -> Any:
        if factory is None:  # joined mode: NodeD takes the socket over
            _say({"joined": True})
            return defer.succeed(_Nothing())
        port = self._reactor.adoptStreamPort(SOCKET_FD, self._family, self._counting(factory))
        os.close(SOCKET_FD)
        return defer.succeed(port)


class _Nothing:
    def stopListening(self) -> Any:
        return defer.succeed(None)


def join_service(settings: dict[str, Any], reactor: Any, endpoint: Any, *, stop: Callable[[], Any],
                 after_join: Callable[[], Any]) -> Any:
    """The child's L{ganeti.noded.join.JoinService}, from NodeD's C{settings}: its TLS listener on
    C{endpoint}, guarded by NodeD's connection limits."""
    from ganeti.noded.join import JoinService
    from ganeti.rpc import wire

    limits = http_limits.HttpLimits(**settings["limits"])
    report = http_limits.ClosureReport(reactor, "ganeti-noded")

    def guard(site: Any, tls: Any) -> Any:
        return http_limits.guard(site, limits, report, tls, max_body=wire.MAX_BODY)

    return JoinService(Paths(settings["root"]), endpoint, settings["token"], lambda: None,
                       token_file=settings.get("token_file"), stop=stop, reactor=reactor,
                       where="the socket NodeD listens on", guard=guard, after_join=after_join)


def serve(settings: dict[str, Any], reactor: Any) -> int:
    """Serve the join on the inherited socket until it is done; the exit status."""
    status = [0]
    open_connections: list[WrappingFactory] = []

    def counting(factory: Any) -> WrappingFactory:
        wrapper = WrappingFactory(factory)
        open_connections.append(wrapper)
        return wrapper

    def burnt() -> None:
        status[0] = EXIT_BURNT
        reactor.stop()

    def linger() -> None:
        """Joined: exit once the master's connection (the answer) is closed, or after L{LINGER} s."""
        deadline = reactor.seconds() + LINGER

        def check() -> None:
            if all(not wrapper.protocols for wrapper in open_connections) or reactor.seconds() >= deadline:
                reactor.stop()
            else:
                reactor.callLater(0.05, check)

        reactor.callLater(0.05, check)

    service = join_service(settings, reactor, _AdoptedEndpoint(reactor, settings["family"], counting),
                           stop=burnt, after_join=linger)
    service.startService()
    reactor.run()
    return status[0]


def _end_with_parent(parent: int | None) -> None:
    """Be sent SIGTERM when NodeD ends (Linux's parent-death signal), at once, even while this process still
    imports or makes its key: else it would keep NodeD's socket listening, and a NodeD started again could not
    listen; exit now if NodeD is gone already."""
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if parent is not None and os.getppid() != parent:
        sys.exit(0)


def main() -> int:
    from twisted.internet import epollreactor

    epollreactor.install()
    from twisted.internet import reactor
    from twisted.logger import globalLogBeginner

    from ganeti import leanimports

    leanimports.allow_pyopenssl()
    settings = json.loads(os.fdopen(0, "rb", buffering=0, closefd=False).readline())
    _end_with_parent(settings.get("parent"))
    globalLogBeginner.beginLoggingTo([_relay], redirectStandardIO=False)
    return serve(settings, reactor)


if __name__ == "__main__":
    sys.exit(main())
