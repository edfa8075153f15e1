"""RAPI on a master candidate: forward every request to the master's RAPI.

C{ganeti-rapi} runs on every master candidate.  On the master it serves the
request itself (L{ganeti.rapi.server.RapiResource}); elsewhere it sends the
request as it came (method, path and query, body, C{Authorization} and the
other end-to-end headers) to the RAPI of the node ssconf names master, on the
same port, and streams the answer back, status and headers included.  So a
client may use any candidate's address, and keeps working across a master
failover: a request the master's RAPI refused is sent again to the master
looked up again (ssconf, then the candidates' confd), for up to the
failover timeout plus a margin, and so is a C{GET} whose connection broke
(any other method, which may have reached the master, is answered 502
"outcome unknown").  The master's certificate is the cluster's RAPI certificate
(C{rapi.pem}, on every node): it is pinned, host names are not checked.

Which node is master is read from ssconf (C{master_node},
C{node_primary_ips}) at most once a second; a node that does not know its
own name (no C{node.json}) or has no ssconf serves locally.
"""

from __future__ import annotations

import random
import time
from typing import Any, Awaitable, Callable

from twisted.internet import protocol
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.error import ConnectError
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import connectionDone
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.client import Agent, FileBodyProducer, HTTPConnectionPool, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET
from zope.interface import implementer

from ganeti.dirwatch import file_stamp
from ganeti.paths import Paths
from ganeti.rapi import wsforward
from ganeti.reactors import ITimeTCPReactor

#: Headers that concern one connection only (RFC 9110 section 7.6.1), not forwarded.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                        b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length"})
#: Seconds a master decision is reused.
MASTER_CACHE = 1.0
#: Seconds to connect to the master's RAPI.
CONNECT_TIMEOUT = 10.0
#: Seconds a forwarded request waits for a new master by default (L{ganeti.luxi.master.wait_window}).
WINDOW = 30.0
#: The first and the longest pause between two attempts, in seconds.
FIRST_DELAY = 0.1
MAX_DELAY = 1.0
#: Methods forwarded again after a connection broke once the request was sent.
SAFE_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS"})


def master_address(paths: Paths) -> str | None:
    """The master's primary IP, or C{None} when this node is the master
    (or cannot tell: no node identity, no ssconf)."""
    from ganeti import daemons, ssconf

    try:
        me = daemons.read_node_identity(paths)["name"]
        store = ssconf.SimpleStore(paths)
        master = store.get_master_node()
        ips = store.get_node_primary_ips()
    except (SystemExit, Exception):  # no identity or no ssconf: serve here
        return None
    if not me or master == me:
        return None
    return ips.get(master)


def forwarded_headers(headers: Headers) -> Headers:
    """The end-to-end headers of a request or answer (pure)."""
    kept = Headers()
    for name, values in headers.getAllRawHeaders():
        if name.lower() not in HOP_BY_HOP:
            kept.setRawHeaders(name, values)
    return kept


class RapiCertificatePolicy:
    """Trust exactly the cluster's RAPI certificate (host names not checked).

    With C{path} (the node's C{rapi.pem}) the certificate follows the file:
    once it changes (renew-crypto) the new one and the one before are
    trusted, so forwarding goes on while the nodes get the new one in turn.
    """

    def __init__(self, cert_pem: bytes, path: str | None = None) -> None:
        self._path = path
        self._stamp = file_stamp(path) if path is not None else None
        self._certs = [cert_pem]
        self._creator = self._build()

    def _build(self) -> Any:
        import ssl

        from ganeti import crypto as gcrypto
        from ganeti.rpc.tls import Pinned, base_context

        allowed = frozenset(gcrypto.fingerprint(pem, "sha1") for pem in self._certs)
        ctx = base_context(server=False)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata="\n".join(pem.decode("ascii") for pem in self._certs))
        return Pinned(lambda: ctx, lambda: allowed, "master RAPI")

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        if self._path is not None and file_stamp(self._path) != self._stamp:
            from ganeti import crypto as gcrypto
            from ganeti import errors

            self._stamp = file_stamp(self._path)
            try:
                _key, cert_pem = gcrypto.load_pem_file(self._path)
            except errors.ConfigurationError:
                return self._creator
            if cert_pem != self._certs[0]:
                self._certs = [cert_pem, self._certs[0]]
                self._creator = self._build()
        return self._creator


class _Relay(protocol.Protocol):
    """Streams the master's answer body into the client's request."""

    def __init__(self, request: Any) -> None:
        self.request = request

    def dataReceived(self, data: bytes) -> None:
        if not self.request.finished and not self.request._disconnected:
            self.request.write(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self.request.finished or self.request._disconnected:
            return
        if not reason.check(ResponseDone, PotentialDataLoss):
            self.request.loseConnection()  # cut short: the client must not take it as complete
            return
        self.request.finish()


@implementer(IAgentEndpointFactory)
class _MasterEndpoints:
    """Where the agent connects for a URL: the master's address directly, over TLS (L{NodeEndpoints}: a
    refused connection, a dead master, is known at once)."""

    def __init__(self, reactor: ITimeTCPReactor, policy: Any) -> None:
        from ganeti.rpc.client import NodeEndpoints

        self._endpoints = NodeEndpoints(reactor, policy, CONNECT_TIMEOUT)

    def endpointForURI(self, uri: Any) -> Any:
        return self._endpoints.endpoint((None, uri.host.decode("ascii"), uri.port))


class ForwardingResource(Resource):
    """The RAPI root of a candidate: local on the master, forwarded elsewhere.

    @param local: the RAPI itself (serves on the master)
    @param master: where the master is (L{master_address}), C{None} for here
    @param port: the master's RAPI port (the cluster's, as this node's)
    @param agent: makes the HTTPS requests to the master (an C{IAgent})
    """

    isLeaf = True
    log = Logger()

    def __init__(self, local: Resource, master: Callable[[], str | None], port: int, agent: Any,
                 clock: IReactorTime, *, window: float = WINDOW,
                 confd: Callable[[], Awaitable[str | None]] | None = None,
                 tunnel: Callable[[str, int, protocol.Factory], Deferred[Any]] | None = None) -> None:
        super().__init__()
        self.local = local
        self._master = master
        self.port = port
        self.agent = agent
        self.clock = clock
        #: seconds a request waits for a new master
        self.window = window
        self._confd = confd
        #: connects a protocol to the master's RAPI over TLS (the console WebSockets: L{ganeti.rapi.wsforward})
        self._tunnel = tunnel
        self._cached: tuple[float, str | None] | None = None

    @classmethod
    def for_node(cls, local: Resource, paths: Paths, port: int, reactor: ITimeTCPReactor, cert_pem: bytes) -> ForwardingResource:
        pool = HTTPConnectionPool(reactor, persistent=True)
        policy = RapiCertificatePolicy(cert_pem, paths.rapi_pem)
        agent = Agent.usingEndpointFactory(reactor, _MasterEndpoints(reactor, policy), pool=pool)
        from ganeti.luxi.master import wait_window

        async def confd() -> str | None:
            """The master's address as the candidates' confd name it (in a thread: it waits for answers)."""
            from twisted.internet.threads import deferToThreadPool

            from ganeti.luxi import locate

            threaded: Any = reactor  # a real reactor, which has a thread pool
            found = await deferToThreadPool(threaded, threaded.getThreadPool(), locate.from_confd, paths)
            return None if found is None or found[0] == locate.own_name(paths) else found[1]

        def tunnel(address: str, port: int, factory: protocol.Factory) -> Deferred[Any]:
            """A TLS connection to the master's RAPI, its certificate checked as the agent's."""
            from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint

            from ganeti.tlsbio import wrap_client

            tcp = (TCP6ClientEndpoint if ":" in address else TCP4ClientEndpoint)(
                reactor, address, port, timeout=int(CONNECT_TIMEOUT))
            return wrap_client(policy.creatorForNetloc(address.encode("ascii"), port), tcp).connect(factory)

        return cls(local, lambda: master_address(paths), port, agent, reactor, window=wait_window(paths),
                   confd=confd, tunnel=tunnel)

    def master(self) -> str | None:
        now = self.clock.seconds()
        if self._cached is None or now - self._cached[0] >= MASTER_CACHE:
            self._cached = (now, self._master())
        return self._cached[1]

    def render(self, request: Any) -> Any:
        address = self.master()
        if address is None or (request.method == b"GET" and request.path == b"/metrics"):
            return self.local.render(request)  # a candidate's /metrics are its own (ganeti.rapi.metrics)
        if self._tunnel is not None and wsforward.is_console_upgrade(request):
            return self._relay_console(request, address)
        return self._forward(request, address)

    def _relay_console(self, request: Any, address: str) -> Any:
        """A console WebSocket: relayed to the master's RAPI over a connection of its own
        (L{ganeti.rapi.wsforward}), counted against this RAPI's web console stream limits."""
        assert self._tunnel is not None
        ui: Any = getattr(self.local, "ui", None)
        streams = getattr(ui, "streams", None)
        key = ""
        if streams is not None:
            found = ui.keeper.check(request.getCookie(b"ganeti_ui")) if hasattr(ui, "keeper") else None
            key = found[1].name if found is not None else "address %s" % getattr(request.getClientAddress(), "host", "")
            if not streams.admit(key):
                request.setResponseCode(429)
                request.setHeader(b"content-type", b"application/json")
                request.setHeader(b"retry-after", b"10")
                return b'{"code": 429, "message": "Too many event streams and consoles open"}'
        host = "[%s]" % address if ":" in address else address
        tunnel = wsforward.ConsoleTunnel(request, b"%s:%d" % (host.encode("ascii"), self.port),
                                         (lambda: streams.leave(key)) if streams is not None else (lambda: None),
                                         forwarded_headers)
        d = self._tunnel(address, self.port, wsforward.MasterFactory(tunnel))

        def failed(failure: Failure) -> None:
            self.log.warn("relaying the console {uri} to the master at {address} failed: {why}",
                          uri=request.uri.decode("ascii", "replace"), address=address, why=str(failure.value))
            tunnel.failed("The master's RAPI at %s cannot be reached" % address)

        d.addErrback(failed)
        request.notifyFinish().addErrback(lambda _: tunnel.abandon())
        return NOT_DONE_YET

    def _forward(self, request: Any, address: str) -> Any:
        request.content.seek(0)
        body = request.content.read()
        d: Deferred[Any] = ensureDeferred(self._send(request, address, body))
        request.notifyFinish().addErrback(lambda _: d.cancel())
        self._observe(request)

        def answer(outcome: tuple[str | None, Any]) -> None:
            where, response = outcome
            if response is None:  # this node is the master now
                result = self.local.render(request)
                if result is not NOT_DONE_YET:
                    request.write(result)
                    request.finish()
                return
            request.setResponseCode(response.code, response.phrase)
            for name, values in forwarded_headers(response.headers).getAllRawHeaders():
                request.responseHeaders.setRawHeaders(name, values)
            response.deliverBody(_Relay(request))

        def failed(failure: Any) -> None:
            if failure.check(CancelledError) or request.finished or request._disconnected:
                return
            self.log.warn("forwarding {method} {uri} to the master at {address} failed: {why}",
                          method=request.method.decode("ascii", "replace"),
                          uri=request.uri.decode("ascii", "replace"), address=address, why=str(failure.value))
            request.setResponseCode(502)
            request.setHeader(b"Content-Type", b"application/json")
            if failure.check(ConnectError):
                request.write(b'{"code": 502, "message": "The master\'s RAPI at %s cannot be reached", '
                              b'"explain": "this node forwards to the master"}' % address.encode("ascii"))
            else:
                request.write(b'{"code": 502, "message": "Outcome unknown: the connection to the master\'s RAPI at %s'
                              b' broke after the request was sent", "explain": "check with GET /2/jobs"}'
                              % address.encode("ascii"))
            request.finish()

        d.addCallbacks(answer, failed)
        return NOT_DONE_YET

    async def _send(self, request: Any, address: str, body: bytes) -> tuple[str | None, Any]:
        """The master's answer to C{request}: C{(address, response)}, or C{(None, None)}
        when this node turned out to be the master.  A refused connection is tried
        again, a lost one only for a safe method (L{SAFE_METHODS}), at the master
        looked up again (ssconf, then the candidates' confd), for up to C{window} seconds."""
        started = self.clock.seconds()
        delay, attempts = FIRST_DELAY, 0
        while True:
            host = "[%s]" % address if ":" in address else address
            url = b"https://%s:%d%s" % (host.encode("ascii"), self.port, request.uri)
            producer = FileBodyProducer(_bytes_io(body)) if body or request.method in (b"POST", b"PUT") else None
            try:
                return address, await self.agent.request(request.method, url, _with_host(request), producer)
            except CancelledError:
                raise
            except Exception as e:
                if not isinstance(e, ConnectError) and request.method not in SAFE_METHODS:
                    raise  # it may have reached the master: never sent twice
                if self.clock.seconds() - started >= self.window:
                    raise
            attempts += 1
            if attempts == 1:
                self.log.info("the master at {address} does not answer; waiting for a new master", address=address)
            await deferLater(self.clock, delay * (0.5 + random.random() / 2), lambda: None)
            delay = min(delay * 2, MAX_DELAY)
            self._cached = None
            found = await self._confd() if attempts > 1 and self._confd is not None else None
            new = found if found is not None else self.master()
            if new is None:
                return None, None
            address = new

    def _observe(self, request: Any) -> None:
        """Time the forwarded C{request} into the local RAPI's C{forwarded} histograms, if it keeps them."""
        forwarded = getattr(self.local, "forwarded", None)
        if forwarded is None:
            return
        started = time.perf_counter()

        def finished(_: Any) -> None:
            from ganeti.rapi import baserlib

            found = baserlib.match(request.path.decode("ascii", "replace"))
            resource = found[0].template if found is not None else "unmatched"
            forwarded.observe(resource, request.method.decode("ascii", "replace"), request.code,
                              time.perf_counter() - started)

        request.notifyFinish().addCallback(finished).addErrback(lambda _: None)


def _with_host(request: Any) -> Headers:
    """The forwarded headers, with the host the client asked for as C{X-Forwarded-Host}
    (the web console checks a browser's C{Origin} against it: L{ganeti.rapi.ui.resource})."""
    headers = forwarded_headers(request.requestHeaders)
    host = request.getHeader(b"host")
    headers.setRawHeaders(b"x-forwarded-host", [host] if host else [])
    return headers


def _bytes_io(data: bytes) -> Any:
    from io import BytesIO

    return BytesIO(data)
