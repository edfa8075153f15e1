"""RAPI on a master candidate: forward every request to the master's RAPI.

C{ganeti-rapi} runs on every master candidate.  On the master it serves the
request itself (L{ganeti.rapi.server.RapiResource}); elsewhere it sends the
request as it came (method, path and query, body, C{Authorization} and the
other end-to-end headers) to the RAPI of the node ssconf names master, on the
same port, and streams the answer back, status and headers included.  So a
client may use any candidate's address, and keeps working across a master
failover.  The master's certificate is the cluster's RAPI certificate
(C{rapi.pem}, on every node): it is pinned, host names are not checked.

Which node is master is read from ssconf (C{master_node},
C{node_primary_ips}) at most once a second; a node that does not know its
own name (no C{node.json}) or has no ssconf serves locally.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from twisted.internet import protocol
from twisted.internet.defer import CancelledError
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.client import Agent, FileBodyProducer, HTTPConnectionPool, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers
from twisted.web.iweb import IPolicyForHTTPS
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET
from zope.interface import implementer

from ganeti.paths import Paths
from ganeti.reactors import ITimeTCPReactor

#: Headers that concern one connection only (RFC 9110 section 7.6.1), not forwarded.
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
                        b"trailer", b"transfer-encoding", b"upgrade", b"host", b"content-length"})
#: Seconds a master decision is reused.
MASTER_CACHE = 1.0
#: Seconds to connect to the master's RAPI.
CONNECT_TIMEOUT = 10.0


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


@implementer(IPolicyForHTTPS)
class RapiCertificatePolicy:
    """Trust exactly the cluster's RAPI certificate (host names not checked)."""

    def __init__(self, cert_pem: bytes) -> None:
        from cryptography import x509
        from OpenSSL import SSL, crypto

        from ganeti import crypto as gcrypto
        from ganeti.rpc.tls import _PinnedCreator, make_verify_callback

        allowed = frozenset([gcrypto.fingerprint(cert_pem, "sha1")])
        ctx = SSL.Context(SSL.TLS_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        store = ctx.get_cert_store()
        assert store is not None  # a new context always has one
        store.add_cert(crypto.X509.from_cryptography(x509.load_pem_x509_certificate(cert_pem)))
        ctx.set_verify(SSL.VERIFY_PEER, make_verify_callback(lambda: allowed, "master RAPI"))
        self._creator = _PinnedCreator(ctx)

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
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
                 clock: IReactorTime) -> None:
        super().__init__()
        self.local = local
        self._master = master
        self.port = port
        self.agent = agent
        self.clock = clock
        self._cached: tuple[float, str | None] | None = None

    @classmethod
    def for_node(cls, local: Resource, paths: Paths, port: int, reactor: ITimeTCPReactor, cert_pem: bytes) -> ForwardingResource:
        pool = HTTPConnectionPool(reactor, persistent=True)
        agent = Agent(reactor, contextFactory=RapiCertificatePolicy(cert_pem), connectTimeout=CONNECT_TIMEOUT,
                      pool=pool)
        return cls(local, lambda: master_address(paths), port, agent, reactor)

    def master(self) -> str | None:
        now = self.clock.seconds()
        if self._cached is None or now - self._cached[0] >= MASTER_CACHE:
            self._cached = (now, self._master())
        return self._cached[1]

    def render(self, request: Any) -> Any:
        address = self.master()
        if address is None or (request.method == b"GET" and request.path == b"/metrics"):
            return self.local.render(request)  # a candidate's /metrics are its own (ganeti.rapi.metrics)
        return self._forward(request, address)

    def _forward(self, request: Any, address: str) -> Any:
        host = "[%s]" % address if ":" in address else address
        url = b"https://%s:%d%s" % (host.encode("ascii"), self.port, request.uri)
        request.content.seek(0)
        body = request.content.read()
        producer = FileBodyProducer(_bytes_io(body)) if body or request.method in (b"POST", b"PUT") else None
        d = self.agent.request(request.method, url, forwarded_headers(request.requestHeaders), producer)
        request.notifyFinish().addErrback(lambda _: d.cancel())
        self._observe(request)

        def answer(response: Any) -> None:
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
            request.write(b'{"code": 502, "message": "The master\'s RAPI at %s cannot be reached", '
                          b'"explain": "this node forwards to the master"}' % address.encode("ascii"))
            request.finish()

        d.addCallbacks(answer, failed)
        return NOT_DONE_YET


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


def _bytes_io(data: bytes) -> Any:
    from io import BytesIO

    return BytesIO(data)
