"""Network and process work a job's logical units do without blocking the reactor.

A job process answers WConfD's lock grants and LuxiD's cancels on its
reactor; a logical unit that resolved a name with C{gethostbyname_ex},
probed a port with C{create_connection} or ran an allocator with
C{subprocess.run} stopped all of that for as long as the call took.
L{Network} does the same three things asynchronously:

  - L{Network.resolve}: C{gethostbyname_ex} in the reactor's thread pool;
  - L{Network.port_open}: a TCP connection attempt with a timeout;
  - L{Network.run}: an external program (C{spawnProcess}), its output
    collected, killed after a timeout.

An LU reaches it as C{self.ctx.net}; tests give the context a fake one.
Without a reactor that can do the work (C{None}, or a plain
C{task.Clock} in synchronous tests) the calls fall back to the blocking
standard library: only callers that have no reactor to block get that.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from typing import Any, Sequence

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ProcessDone
from twisted.internet.interfaces import IReactorProcess, IReactorTCP, IReactorThreads
from twisted.internet.protocol import ClientFactory, ProcessProtocol, Protocol
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti.reactors import ITimeTCPReactor

log = Logger()

#: C{(canonical name, aliases, addresses)}, as C{socket.gethostbyname_ex}
HostEntry = tuple[str, list[str], list[str]]


class ProgramTimeout(Exception):
    """An external program ran longer than its timeout (it was killed)."""


class _Output(ProcessProtocol):
    """Collects a program's stdout and stderr; C{done} fires with C{(out, err, code)}."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.done: Deferred[tuple[bytes, bytes, int]] = Deferred()
        self.timed_out = False

    def connectionMade(self) -> None:
        self.transport.closeStdin()  # type: ignore[union-attr]

    def outReceived(self, data: bytes) -> None:
        self.out.append(data)

    def errReceived(self, data: bytes) -> None:
        self.err.append(data)

    def processEnded(self, reason: Failure) -> None:
        if self.timed_out:
            self.done.errback(ProgramTimeout())
            return
        value = reason.value
        if isinstance(value, ProcessDone):
            code = 0
        else:
            code = value.exitCode if getattr(value, "exitCode", None) is not None else -(value.signal or 1)
        self.done.callback((b"".join(self.out), b"".join(self.err), code))


class _Probe(ClientFactory):
    """One TCP connection attempt: C{result} fires True (it connected) or False."""

    protocol = Protocol

    def __init__(self) -> None:
        self.result: Deferred[bool] = Deferred()

    def buildProtocol(self, addr: Any) -> Protocol:
        if not self.result.called:
            self.result.callback(True)
        protocol = Protocol()
        protocol.factory = self
        return protocol

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        if not self.result.called:
            self.result.callback(False)


class Network:
    """Name resolution, port probes and external programs on C{reactor}."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor

    def resolve(self, name: str) -> Deferred[HostEntry]:
        """C{socket.gethostbyname_ex(name)} in a thread; fails with its C{OSError}."""
        if not IReactorThreads.providedBy(self.reactor):
            try:
                return succeed(socket.gethostbyname_ex(name))
            except OSError:
                return _failed()
        from twisted.internet.threads import deferToThreadPool

        return deferToThreadPool(self.reactor, self.reactor.getThreadPool(), socket.gethostbyname_ex, name)

    def port_open(self, address: str, port: int, timeout: float) -> Deferred[bool]:
        """Whether something accepts TCP connections on C{address:port}
        (within C{timeout} seconds); the connection is closed at once."""
        if not IReactorTCP.providedBy(self.reactor):
            try:
                socket.create_connection((address, port), timeout=timeout).close()
            except OSError:
                return succeed(False)
            return succeed(True)
        probe = _Probe()

        def close(connected: bool) -> bool:
            if connected:
                connector.disconnect()
            return connected

        connector = self.reactor.connectTCP(address, port, probe, timeout=timeout)
        return probe.result.addCallback(close)

    def run(self, executable: str, args: Sequence[str], timeout: float,
            env: dict[str, str] | None = None, path: str | None = None) -> Deferred[tuple[bytes, bytes, int]]:
        """Run C{executable args...} (stdin closed, in directory C{path} if
        given): C{(stdout, stderr, exit code)}, the code negative for a signal;
        after C{timeout} seconds the program is killed and this fails with
        L{ProgramTimeout}."""
        environment = dict(os.environ) if env is None else env
        if not IReactorProcess.providedBy(self.reactor):
            try:
                done = subprocess.run([executable, *args], capture_output=True, timeout=timeout, check=False,
                                      env=environment, stdin=subprocess.DEVNULL, cwd=path)
            except subprocess.TimeoutExpired:
                return _failed(ProgramTimeout())
            return succeed((done.stdout, done.stderr, done.returncode))
        output = _Output()
        reactor: Any = self.reactor  # not narrowed to IReactorProcess: it has a clock too
        transport = reactor.spawnProcess(output, executable, [executable, *args], env=environment, path=path)

        def kill() -> None:
            output.timed_out = True
            log.warn("{program} still running after {timeout}s: killed", program=executable, timeout=timeout)
            try:
                transport.signalProcess(signal.SIGKILL)
            except Exception:  # already gone: processEnded comes anyway
                pass

        timer = reactor.callLater(timeout, kill)

        def stop_timer(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            return result

        return output.done.addBoth(stop_timer)


def _failed(error: BaseException | None = None) -> Deferred[Any]:
    """A Deferred failed with C{error} (default: the exception being handled)."""
    d: Deferred[Any] = Deferred()
    d.errback(Failure(error) if error is not None else Failure())
    return d


class Ticker(Service):
    """A service calling its L{check} every C{interval} seconds on C{reactor}'s
    clock while it runs (the first call one interval after it starts)."""

    def __init__(self, reactor: Any, interval: float) -> None:  # subclasses use more of it
        self.reactor = reactor
        self.interval = interval
        self._loop = LoopingCall(self.check)
        self._loop.clock = reactor

    def check(self) -> None:
        raise NotImplementedError

    def startService(self) -> None:
        super().startService()
        self._loop.start(self.interval, now=False)

    def stopService(self) -> Any:
        if self._loop.running:
            self._loop.stop()
        return super().stopService()


def no_delay(transport: Any) -> bool:
    """Send every frame at once: C{TCP_NODELAY} on the TCP transport (a TLS
    layer passes the call down).  With Nagle's algorithm, a frame written
    while the previous one is not acknowledged yet waits for the peer's
    delayed ACK (40 ms on Linux): a heartbeat report written just after
    another reached LuxiD that much later.  Whether it could be set."""
    setter = getattr(transport, "setTcpNoDelay", None)
    if setter is None:
        return False
    try:
        setter(True)
    except OSError:
        return False
    return True


def tcp_client_endpoint(reactor: ITimeTCPReactor, host: str, port: int, timeout: float) -> Any:
    """A client endpoint to C{host}:C{port}: an IPv4 or IPv6 address
    literal is connected to directly, so a refused connection (a dead
    node) is known at once; a name goes through C{HostnameEndpoint}, which
    reports a failure only after its 0.3 s "happy eyeballs" delay, even
    when it has a single address to try."""
    import ipaddress

    from twisted.internet.endpoints import HostnameEndpoint, TCP4ClientEndpoint, TCP6ClientEndpoint

    try:
        version = ipaddress.ip_address(host).version
    except ValueError:
        return HostnameEndpoint(reactor, host.encode("idna"), port, timeout=timeout)
    if version == 4:
        return TCP4ClientEndpoint(reactor, host, port, timeout=timeout)
    return TCP6ClientEndpoint(reactor, host, port, timeout=timeout)
