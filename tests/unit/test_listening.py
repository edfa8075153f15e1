"""A daemon that cannot listen ends with status 1 and says why (MemoryReactor, no sockets)."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from typing import Any

from twisted.application.service import IService
from twisted.internet import defer
from twisted.internet.endpoints import TCP4ServerEndpoint, UNIXServerEndpoint
from twisted.internet.error import CannotListenError
from twisted.internet.protocol import DatagramProtocol, Factory, Protocol
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.trial.unittest import SynchronousTestCase

from ganeti import crypto
from ganeti.config.bootstrap import initial_config
from ganeti.daemon import PidFileService
from ganeti.listening import (
    CannotListen,
    Listener,
    describe_endpoint,
    failure_message,
    remove_stale_socket,
    split_description,
    stream_listener,
)
from ganeti.paths import Paths
from ganeti.testing.daemons import seed_config

IN_USE = OSError(errno.EADDRINUSE, "Address already in use")
TOKEN = "0123456789abcdef0123"


class BusyReactor(MemoryReactorClock):
    """Every address is taken: each listen call raises as the real reactor does."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts: list[tuple[str, Any]] = []

    def _refuse(self, kind: str, interface: Any, port: Any) -> Any:
        self.attempts.append((kind, port))
        raise CannotListenError(interface, port, IN_USE)

    def listenTCP(self, port: int, factory: Any, backlog: int = 50, interface: str = "") -> Any:
        return self._refuse("tcp", interface, port)

    def listenSSL(self, port: int, factory: Any, contextFactory: Any, backlog: int = 50, interface: str = "") -> Any:
        return self._refuse("ssl", interface, port)

    def listenUNIX(self, address: str, factory: Any, backlog: int = 50, mode: int = 0o666, wantPID: int = 0) -> Any:
        return self._refuse("unix", None, address)

    def listenUDP(self, port: int, protocol: Any, interface: str = "", maxPacketSize: int = 8192) -> Any:
        return self._refuse("udp", interface, port)


def critical_lines(events: Any) -> list[str]:
    from twisted.logger import LogLevel, formatEvent

    return [formatEvent(e) for e in events if e["log_level"] == LogLevel.critical]


class ListenerTests(SynchronousTestCase):
    def test_busy_port_ends_the_daemon_with_its_reason(self) -> None:
        """Listening happens as twistd starts the application; a busy port
        raises L{CannotListen} (exit status 1, no traceback) naming the
        address, the port and the errno text, and logs that one line."""
        reactor = BusyReactor()
        endpoint = TCP4ServerEndpoint(reactor, 1811, interface="127.0.1.1")
        listener = stream_listener(endpoint, Factory.forProtocol(Protocol), "127.0.1.1 port 1811 (TCP)",
                                   daemon="ganeti-noded", reactor=reactor)
        with capturedLogs() as events:
            error = self.assertRaises(CannotListen, listener.privilegedStartService)
        message = "ganeti-noded cannot listen on 127.0.1.1 port 1811 (TCP): [Errno 98] Address already in use"
        self.assertEqual(str(error), message)
        self.assertEqual(error.code, 1)
        self.assertIsInstance(error, SystemExit)  # the interpreter exits 1 without a traceback
        self.assertIsInstance(error, Exception)  # twistd reports it through its status pipe
        self.assertEqual(critical_lines(events), [message])

    def test_listening_port_is_kept_and_closed_on_stop(self) -> None:
        calls: list[str] = []

        class Port:
            def stopListening(self) -> Any:
                calls.append("stop")
                return defer.succeed(None)

        def listen() -> Any:
            calls.append("listen")
            return defer.succeed(Port())

        listener = Listener(listen, "x", daemon="d", reactor=MemoryReactorClock())
        listener.privilegedStartService()
        listener.startService()
        self.assertEqual(calls, ["listen"], "startService does not listen a second time")
        self.successResultOf(defer.maybeDeferred(listener.stopService))
        self.assertEqual(calls, ["listen", "stop"])

    def test_an_optional_address_that_cannot_be_listened_on_is_a_warning(self) -> None:
        """NodeD's own-node socket: what it serves there it serves over TCP too, so the daemon goes on, and says
        why and what it does instead."""
        reactor = BusyReactor()
        reactor.running = True
        endpoint = UNIXServerEndpoint(reactor, "/r/ganeti-noded")
        listener = stream_listener(endpoint, Factory.forProtocol(Protocol), "unix socket /r/ganeti-noded",
                                   daemon="ganeti-noded", reactor=reactor, optional=True, fallback="over TCP instead")
        with capturedLogs() as events:
            listener.privilegedStartService()  # (no CannotListen)
            listener.startService()
        self.assertEqual(reactor.attempts, [("unix", "/r/ganeti-noded")])
        self.assertEqual(critical_lines(events), [])
        self.assertFalse(reactor.hasStopped)
        self.assertIsNone(listener.port)
        warnings = [formatEvent(e) for e in events if e["log_level"] == LogLevel.warn]
        self.assertEqual(warnings, ["ganeti-noded cannot listen on unix socket /r/ganeti-noded: [Errno 98] Address "
                                    "already in use; over TCP instead"])

    def test_start_service_alone_listens(self) -> None:
        reactor = MemoryReactorClock()
        endpoint = TCP4ServerEndpoint(reactor, 1811, interface="127.0.1.1")
        stream_listener(endpoint, Factory.forProtocol(Protocol), "x", daemon="d", reactor=reactor).startService()
        self.assertEqual([(port, interface) for port, _, _, interface in reactor.tcpServers], [(1811, "127.0.1.1")])

    def test_failure_after_the_reactor_runs_exits_1(self) -> None:
        """Without privilegedStartService (C{twist}), a failure stops the
        reactor and the process exits 1 once the services stopped."""
        reactor = BusyReactor()
        reactor.running = True
        exits: list[int] = []
        endpoint = TCP4ServerEndpoint(reactor, 5080, interface="::1")
        listener = Listener(lambda: endpoint.listen(Factory.forProtocol(Protocol)), "::1 port 5080 (HTTPS)",
                            daemon="ganeti-rapi", reactor=reactor, exit=exits.append)
        with capturedLogs() as events:
            listener.startService()
        self.assertTrue(reactor.hasStopped)
        [(exit, args, _)] = reactor.triggers["after"]["shutdown"]
        exit(*args)
        self.assertEqual(exits, [1])
        self.assertEqual(critical_lines(events),
                         ["ganeti-rapi cannot listen on ::1 port 5080 (HTTPS): [Errno 98] Address already in use"])

    def test_asynchronous_failure_exits_1(self) -> None:
        reactor = MemoryReactorClock()
        reactor.running = True
        pending: defer.Deferred[Any] = defer.Deferred()
        exits: list[int] = []
        listener = Listener(lambda: pending, "somewhere", daemon="d", reactor=reactor, exit=exits.append)
        listener.privilegedStartService()  # nothing known yet: no exception
        self.assertFalse(reactor.hasStopped)
        pending.errback(CannotListenError(None, "/x", "Cannot acquire lock"))
        self.assertTrue(reactor.hasStopped)
        [(exit, args, _)] = reactor.triggers["after"]["shutdown"]
        exit(*args)
        self.assertEqual(exits, [1])


class StaleSocketTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="lsn")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.path = os.path.join(self.dir, "ganeti-query")

    def stale(self) -> None:
        """A socket left by a killed daemon, its lock naming a live pid (ours)."""
        os.mknod(self.path, stat.S_IFSOCK | 0o600)
        os.symlink(str(os.getpid()), self.path + ".lock")

    def test_removed_even_when_the_lock_names_a_live_pid(self) -> None:
        self.stale()
        self.assertEqual(remove_stale_socket(self.path), [self.path, self.path + ".lock"])
        self.assertFalse(os.path.lexists(self.path) or os.path.lexists(self.path + ".lock"))
        self.assertEqual(remove_stale_socket(self.path), [])

    def test_not_a_socket_is_left_alone(self) -> None:
        with open(self.path, "w") as handle:
            handle.write("precious")
        self.assertEqual(remove_stale_socket(self.path), [])
        with open(self.path) as handle:
            self.assertEqual(handle.read(), "precious")

    def test_listener_clears_before_listening(self) -> None:
        self.stale()
        seen: list[bool] = []

        def listen() -> Any:
            seen.append(os.path.lexists(self.path) or os.path.lexists(self.path + ".lock"))
            return defer.succeed(object())

        Listener(listen, "unix socket", daemon="d", reactor=MemoryReactorClock(), stale_socket=self.path
                 ).privilegedStartService()
        self.assertEqual(seen, [False])


class DescriptionTests(SynchronousTestCase):
    def test_unix_with_escaped_colon(self) -> None:
        self.assertEqual(describe_endpoint(r"unix:/tmp/a\:b/sock:mode=660:lockfile=1"),
                         ("unix socket /tmp/a:b/sock", "/tmp/a:b/sock"))
        self.assertEqual(describe_endpoint("unix:address=/s:lockfile=1"), ("unix socket /s", "/s"))

    def test_tcp_and_others(self) -> None:
        self.assertEqual(describe_endpoint("tcp:1811:interface=127.0.1.1"), ("127.0.1.1 port 1811 (TCP)", None))
        self.assertEqual(describe_endpoint("tcp:port=80"), ("0.0.0.0 port 80 (TCP)", None))
        self.assertEqual(describe_endpoint("systemd:domain=UNIX:index=0"), ("systemd:domain=UNIX:index=0", None))
        self.assertEqual(split_description(r"a\:b:c"), ["a:b", "c"])

    def test_message_of_other_errors(self) -> None:
        self.assertEqual(failure_message("d", "w", CannotListenError(None, "/s", "Cannot acquire lock")),
                         "d cannot listen on w: Cannot acquire lock")
        self.assertEqual(failure_message("d", "w", PermissionError(13, "Permission denied")),
                         "d cannot listen on w: [Errno 13] Permission denied")


class DaemonCompositionTests(SynchronousTestCase):
    """Each daemon's makeService: a busy address ends the start (before: logged, kept running)."""

    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="lsd"))
        self.addCleanup(shutil.rmtree, self.paths.root, True)
        self.paths.ensure_dirs()

    def start(self, tap: Any, *args: str) -> tuple[CannotListen, BusyReactor]:
        options = tap.Options()
        options.parseOptions(["--root", self.paths.root, *args])
        reactor = BusyReactor()
        root = IService(tap.makeService(options, reactor))
        for service in root:
            if isinstance(service, PidFileService):
                self.addCleanup(os.close, service.fd)
        return self.assertRaises(CannotListen, root.privilegedStartService), reactor

    def test_wconfd(self) -> None:
        from ganeti.wconfd import tap

        seed_config(self.paths, initial_config("cluster.test", "node1.test", "127.0.1.1"))
        error, reactor = self.start(tap)
        self.assertEqual(str(error), "ganeti-wconfd cannot listen on unix socket %s: [Errno 98] Address already in use"
                         % self.paths.wconfd_socket)
        self.assertEqual(reactor.attempts, [("unix", self.paths.wconfd_socket)])

    def test_luxid(self) -> None:
        from ganeti.luxid import tap

        error, reactor = self.start(tap)
        self.assertIn("ganeti-luxid cannot listen on unix socket %s:" % self.paths.luxi_socket, str(error))
        self.assertEqual(reactor.attempts, [("unix", self.paths.luxi_socket)], "it stopped at the first failure")

    def test_confd(self) -> None:
        from ganeti.confd import tap

        with open(self.paths.hmac_key, "wb") as handle:
            handle.write(b"0123456789abcdef0123456789abcdef01234567\n")
        error, _ = self.start(tap, "--bind", "127.0.1.1", "--port", "1814", "--no-inotify")
        self.assertEqual(str(error),
                         "ganeti-confd cannot listen on 127.0.1.1 port 1814 (UDP): [Errno 98] Address already in use")

    def test_rapi(self) -> None:
        from ganeti.rapi import tap

        crypto.write_pem_file(self.paths.rapi_pem, *crypto.generate_key_and_cert("cluster.test"))
        error, _ = self.start(tap, "--bind", "127.0.1.1", "--port", "5080")
        self.assertEqual(str(error),
                         "ganeti-rapi cannot listen on 127.0.1.1 port 5080 (HTTPS): [Errno 98] Address already in use")

    def test_noded_unjoined(self) -> None:
        from ganeti.noded import tap

        error, _ = self.start(tap, "--bind", "127.0.1.1", "--port", "1811", "--join-token", TOKEN)
        self.assertEqual(str(error),
                         "ganeti-noded cannot listen on 127.0.1.1 port 1811 (TCP): [Errno 98] Address already in use")


class DatagramTests(SynchronousTestCase):
    def test_udp_listener(self) -> None:
        from ganeti.listening import datagram_listener

        reactor = BusyReactor()
        listener = datagram_listener(1814, DatagramProtocol(), interface="::1", max_packet=8192, daemon="ganeti-confd",
                                     reactor=reactor)
        error = self.assertRaises(CannotListen, listener.privilegedStartService)
        self.assertEqual(str(error), "ganeti-confd cannot listen on ::1 port 1814 (UDP): [Errno 98] Address already in use")


class StaleSocketPermissionTests(SynchronousTestCase):
    def test_socket_that_cannot_be_removed(self) -> None:
        """A leftover socket the daemon may not remove (a directory it may not
        write): the daemon ends, saying so."""
        from ganeti import listening

        def refuse(path: str) -> list[str]:
            raise PermissionError(errno.EACCES, "Permission denied", path)

        self.patch(listening, "remove_stale_socket", refuse)
        listens: list[bool] = []
        listener = Listener(lambda: listens.append(True), "unix socket /r/ganeti-wconfd", daemon="ganeti-wconfd",
                            reactor=MemoryReactorClock(), stale_socket="/r/ganeti-wconfd")
        error = self.assertRaises(CannotListen, listener.privilegedStartService)
        self.assertEqual(str(error), "ganeti-wconfd cannot listen on unix socket /r/ganeti-wconfd: cannot remove what a "
                         "dead instance left there ([Errno 13] Permission denied: '/r/ganeti-wconfd')")
        self.assertEqual(listens, [])


class JoinedListenerTests(SynchronousTestCase):
    def test_joined_mode_cannot_listen(self) -> None:
        """noded joined a cluster but cannot listen with the cluster
        certificate: it exits 1 (before: the reactor stopped, status 0)."""
        from ganeti.noded.join import JoinService

        paths = Paths(tempfile.mkdtemp(prefix="lsj"))
        self.addCleanup(shutil.rmtree, paths.root, True)
        reactor = BusyReactor()
        reactor.running = True
        listens: list[Any] = []

        class Endpoint:
            def listen(self, factory: Any) -> Any:
                listens.append(factory)
                if len(listens) == 1:
                    return defer.succeed(_Port())
                return defer.fail(CannotListenError("127.0.1.1", 1811, IN_USE))

        service = JoinService(paths, Endpoint(), TOKEN, lambda: object(), reactor=reactor,
                              where="127.0.1.1 port 1811 (TCP)")
        service.privilegedStartService()
        service.startService()
        with capturedLogs() as events:
            self.failureResultOf(defer.ensureDeferred(service.joined()), CannotListenError)
        self.assertTrue(reactor.hasStopped)
        [(_, args, _)] = reactor.triggers["after"]["shutdown"]
        self.assertEqual(args, (1,))
        self.assertEqual(critical_lines(events),
                         ["ganeti-noded cannot listen on 127.0.1.1 port 1811 (TCP): [Errno 98] Address already in use"])


class _Port:
    def stopListening(self) -> Any:
        return defer.succeed(None)


class PendingListenTests(SynchronousTestCase):
    def test_stopped_before_an_asynchronous_listen_settles(self) -> None:
        """Stopping cancels the attempt, and that cancellation does not end the daemon."""
        reactor = MemoryReactorClock()
        reactor.running = True
        cancelled: list[bool] = []
        pending: defer.Deferred[Any] = defer.Deferred(lambda d: cancelled.append(True))
        listener = Listener(lambda: pending, "somewhere", daemon="d", reactor=reactor, exit=lambda status: None)
        listener.startService()
        listener.stopService()
        self.assertEqual(cancelled, [True])
        self.assertFalse(reactor.hasStopped, "a cancelled listen does not end the daemon")
        self.assertIsNone(listener.port)
