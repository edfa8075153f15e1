"""ganeti-rapi and ganeti-noded listen through ganeti.http_limits with the limits given (MemoryReactor)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python import usage
from twisted.web.http import HTTPChannel
from twisted.web.resource import Resource

from ganeti import crypto, http_limits
from ganeti.daemon import PidFileService
from ganeti.http_limits import ConnectionLimiter, GuardedChannel, HttpLimits
from ganeti.noded import tap as noded_tap
from ganeti.rapi import tap as rapi_tap
from ganeti.tlsbio import TLSServerFactory


class TcpTransport(StringTransport):
    def setTcpNoDelay(self, enabled: bool) -> None:
        pass


LIMIT_ARGS = ["--max-connections", "40", "--max-connections-per-ip", "7", "--header-timeout", "3",
              "--handshake-timeout", "4", "--idle-timeout", "30", "--max-header-size", "4096"]


def listening(make_service: Any, options: Any) -> tuple[Any, tuple[Any, ...]]:
    reactor = MemoryReactorClock()
    service = make_service(options, reactor)
    service.startService()
    try:
        assert len(reactor.tcpServers) == 1
        port, factory, backlog, interface = reactor.tcpServers[0]
        return factory, (port, backlog, interface)
    finally:
        service.stopService()
        for child in service:
            if isinstance(child, PidFileService):
                os.close(child.fd)


def rapi_pem(paths: Any) -> None:
    paths.ensure_dirs()
    key, cert = crypto.generate_key_and_cert("cluster.test")
    crypto.write_pem_file(paths.rapi_pem, key, cert)


def check_guarded(factory: Any, tls_class: type = TLSServerFactory, **expected: Any) -> None:
    assert isinstance(factory, ConnectionLimiter)
    for name, value in expected.items():
        assert getattr(factory.limits, name) == value, name
    tls = factory.wrappedFactory
    assert isinstance(tls, tls_class)
    site = tls.wrappedFactory
    channel = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    assert isinstance(channel, GuardedChannel) and channel.tls
    assert channel.timeOut == factory.limits.idle_timeout


class Capture(Resource):
    isLeaf = True
    args: dict[bytes, list[bytes]] = {}
    body = b""

    def render_POST(self, request: Any) -> bytes:
        self.args = dict(request.args)
        self.body = request.content.read()
        return b"{}"


def posted_form(factory: Any) -> tuple[dict[bytes, list[bytes]], bytes]:
    """What a resource of the daemon's site sees of a form-typed POST:
    C{(request.args, body)}.  The site's own channel, without TLS."""
    site = factory.wrappedFactory.wrappedFactory
    capture = Capture()
    site.resource = capture
    site.protocol = HTTPChannel
    channel = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1))
    channel.makeConnection(TcpTransport())
    channel.dataReceived(b"POST /x?q=1 HTTP/1.1\r\nHost: n\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                         b"Content-Length: 7\r\n\r\nfoo=bar")
    return capture.args, capture.body


def test_rapi_listens_with_the_limits(root):
    rapi_pem(root)
    options = rapi_tap.Options()
    options.parseOptions(["--root", root.root, "--bind", "127.0.0.1", "--port", "5080"] + LIMIT_ARGS)
    factory, (port, backlog, interface) = listening(rapi_tap.makeService, options)
    assert (port, backlog, interface) == (5080, http_limits.BACKLOG, "127.0.0.1")
    check_guarded(factory, max_connections=40, max_connections_per_ip=7, header_timeout=3, handshake_timeout=4,
                  idle_timeout=30, max_header_size=4096, body_timeout=60)
    # bodies are JSON: a form-typed body is not parsed into arguments (nor its type with the email package)
    assert posted_form(factory) == ({b"q": [b"1"]}, b"foo=bar")


def test_rapi_caps(root):
    """The 8th connection of an address is refused; the 41st closes the longest waiting one."""
    rapi_pem(root)
    options = rapi_tap.Options()
    options.parseOptions(["--root", root.root, "--bind", "127.0.0.1"] + LIMIT_ARGS)
    factory, _ = listening(rapi_tap.makeService, options)
    transports = []
    for i in range(40):
        proto = factory.buildProtocol(IPv4Address("TCP", "127.0.0.%d" % (i // 7 + 1), 1000 + i))
        transports.append(TcpTransport())
        proto.makeConnection(transports[-1])
    assert factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 1)) is None
    assert factory.buildProtocol(IPv4Address("TCP", "127.0.0.99", 1)) is not None
    assert [t.disconnected for t in transports[:2]] == [True, False]


class _SpawningReactor(MemoryReactorClock):
    """Records the processes a service spawns and what it writes to them."""

    def __init__(self) -> None:
        super().__init__()
        self.spawned: list[tuple[list[str], dict[int, Any], list[bytes]]] = []

    def spawnProcess(self, protocol: Any, executable: str, args: Any, env: Any = None, path: Any = None,
                     uid: Any = None, gid: Any = None, usePTY: Any = False, childFDs: Any = None) -> Any:
        written: list[bytes] = []
        self.spawned.append((list(args), dict(childFDs or {}), written))

        class Process:
            def writeToChild(self, fd: int, data: bytes) -> None:
                written.append(data)

            def closeStdin(self) -> None:
                pass

            def signalProcess(self, signal: str) -> None:
                pass

        return Process()

    def listenTCP(self, port: int, factory: Any, backlog: int = 50, interface: str = "") -> Any:
        super().listenTCP(port, factory, backlog, interface)
        self.port = _PausablePort()
        return self.port


class _PausablePort:
    reading = True

    def stopReading(self) -> None:
        self.reading = False

    def fileno(self) -> int:
        return 42

    def stopListening(self) -> None:
        pass


class _Endpoint:
    def __init__(self) -> None:
        self.factories: list[Any] = []

    def listen(self, factory: Any) -> Any:
        from twisted.internet import defer

        self.factories.append(factory)
        return defer.succeed(None)


def test_noded_joined_and_unjoined_listen_with_the_limits(root):
    """Unjoined, NodeD hands its socket and its limits to the join's child process, which listens with
    them (pyOpenSSL's TLS: the join's proof needs TLS exporters); joined, NodeD listens with them."""
    import json
    import socket

    from ganeti.noded import joinchild

    options = noded_tap.Options()
    options.parseOptions(["--root", root.root, "--bind", "127.0.1.1", "--join-token", "t" * 20] + LIMIT_ARGS)
    reactor = _SpawningReactor()
    service = noded_tap.makeService(options, reactor)
    service.startService()
    try:
        [(port, refusing, backlog, interface)] = reactor.tcpServers
        assert (port, interface) == (options["port"], "127.0.1.1") and refusing.buildProtocol(None) is None
        assert not reactor.port.reading  # NodeD listens, the child accepts
        [(argv, fds, written)] = reactor.spawned
        assert argv[1:] == ["-m", "ganeti.noded.joinchild"] and fds[joinchild.SOCKET_FD] == 42
        settings = json.loads(b"".join(written))
        assert settings["token"] == "t" * 20 and "t" * 20 not in " ".join(argv)  # never on a command line
        assert settings["family"] == socket.AF_INET
    finally:
        service.stopService()
        for child in service:
            if isinstance(child, PidFileService):
                os.close(child.fd)
    endpoint = _Endpoint()
    joinchild.join_service(settings, MemoryReactorClock(), endpoint, stop=lambda: None,
                           after_join=lambda: None).startService()
    [factory] = endpoint.factories
    check_guarded(factory, TLSMemoryBIOFactory, max_connections=40, max_connections_per_ip=7, header_timeout=3,
                  body_timeout=600)
    assert posted_form(factory) == ({b"q": [b"1"]}, b"foo=bar")
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    options = noded_tap.Options()
    options.parseOptions(["--root", root.root, "--bind", "127.0.1.1"])
    factory, _ = listening(noded_tap.makeService, options)
    check_guarded(factory, max_connections_per_ip=400, header_timeout=10, body_timeout=600)
    assert posted_form(factory) == ({b"q": [b"1"]}, b"foo=bar")


@pytest.mark.parametrize("tap", [rapi_tap, noded_tap])
def test_per_address_cap_above_the_total_is_refused(root, tap):
    options = tap.Options()
    with pytest.raises(usage.UsageError, match="exceeds --max-connections"):
        options.parseOptions(["--root", root.root, "--bind", "127.0.0.1", "--max-connections", "5"])


def test_caps_are_lowered_below_the_open_files_limit(monkeypatch):
    warned: list[dict[str, Any]] = []
    monkeypatch.setattr(http_limits, "raise_open_files_limit", lambda: 1024)
    monkeypatch.setattr(rapi_tap.log, "observer", warned.append)
    limits = rapi_tap.connection_limits(HttpLimits(max_connections=5000, max_connections_per_ip=100))
    assert limits.max_connections == 1024 - http_limits.FD_RESERVE and limits.max_connections_per_ip == 100
    assert [event["n"] for event in warned] == [1024 - http_limits.FD_RESERVE]


class _AdoptingReactor(_SpawningReactor):
    def __init__(self) -> None:
        super().__init__()
        self.adopted: list[tuple[int, int, Any]] = []

    def adoptStreamPort(self, fd: int, family: int, factory: Any) -> Any:
        self.adopted.append((fd, family, factory))
        return _PausablePort()


def test_noded_takes_the_socket_over_when_the_child_joined(root):
    """The child's log lines become NodeD's; its "joined" makes NodeD accept on the same socket, once; a
    burnt token ends NodeD."""
    import socket

    from twisted.logger import capturedLogs

    from ganeti.noded import joinchild

    reactor = _AdoptingReactor()
    joined_factory, started, stopped = object(), [], []
    service = joinchild.JoinChild(root, lambda factory: reactor.listenTCP(1811, factory), socket.AF_INET, "t" * 20,
                                  lambda: joined_factory, limits=http_limits.HttpLimits(), reactor=reactor,
                                  where="127.0.1.1 port 1811 (TCP)", stop=lambda: stopped.append(True),
                                  after_join=lambda: started.append(True))
    service.startService()
    assert len(reactor.spawned) == 1 and not reactor.port.reading
    with capturedLogs() as events:
        service.message(b'{"level": "warn", "text": "node_join from x: wrong join token proof (1 of 5)"}')
        service.message(b"a line that is not JSON")
    assert [(e["log_level"].name, e.get("text", e.get("line"))) for e in events] == [
        ("warn", "node_join from x: wrong join token proof (1 of 5)"), ("info", "a line that is not JSON")]
    assert reactor.adopted == [] and started == []
    service.message(b'{"joined": true}')
    service.message(b'{"joined": true}')
    assert reactor.adopted == [(42, socket.AF_INET, joined_factory)] and started == [True] and service.joined
    service.ended(0, None)  # the child's normal end, after the join: nothing
    assert stopped == []
    service.stopService()

    reactor = _AdoptingReactor()
    service = joinchild.JoinChild(root, lambda factory: reactor.listenTCP(1811, factory), socket.AF_INET, "t" * 20,
                                  lambda: joined_factory, limits=http_limits.HttpLimits(), reactor=reactor,
                                  where="127.0.1.1 port 1811 (TCP)", stop=lambda: stopped.append(True))
    service.startService()
    service.ended(joinchild.EXIT_BURNT, None)
    reactor.advance(1)
    assert stopped == [True] and reactor.adopted == []
    service.stopService()
