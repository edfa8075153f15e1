"""noded's unjoined mode: wait for the master's authenticated C{node_join}.

Started without C{server.pem} but with a join token, noded listens with a
throw-away self-signed certificate (no client certificate asked for) and
answers only C{POST /node_join} (L{ganeti.rpc.join} has the protocol).  A
request whose proof is right gets its payload written (server.pem,
client.pem, ssconf, node.json); noded then erases the token, stops the
unjoined listener and listens with the cluster certificate and mutual TLS
on the same address and port, in the same process, before it answers.
After L{MAX_FAILURES} wrong proofs the token is burnt and noded exits.
"""

from __future__ import annotations

import json
import os
from typing import IO, TYPE_CHECKING, Any, Callable, cast

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.interfaces import IOpenSSLContextFactory
from twisted.logger import Logger
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site
from zope.interface import implementer

from ganeti import crypto, daemons, errors, ssconf
from ganeti.http_limits import json_site_options
from ganeti.listening import Listener, fail_daemon, failure_message
from ganeti.paths import Paths
from ganeti.rpc import join, wire

if TYPE_CHECKING:
    from OpenSSL import SSL

#: Wrong proofs after which the token is burnt and noded exits.
MAX_FAILURES = 5


@implementer(IOpenSSLContextFactory)
class UnjoinedContextFactory:
    """TLS with a self-signed certificate made in memory; no client certificate."""

    def __init__(self, common_name: str = "ganeti-noded-unjoined") -> None:
        from cryptography import x509

        ossl = join.openssl()
        key_pem, cert_pem = crypto.generate_key_and_cert(common_name, days=7)
        ctx = ossl.Context(ossl.TLS_METHOD)
        ctx.set_min_proto_version(ossl.TLS1_2_VERSION)
        ctx.set_options(ossl.OP_NO_COMPRESSION | ossl.OP_CIPHER_SERVER_PREFERENCE | ossl.OP_NO_TICKET)
        ctx.set_session_cache_mode(ossl.SESS_CACHE_OFF)
        ctx.use_privatekey(crypto.load_private_key(key_pem))
        ctx.use_certificate(x509.load_pem_x509_certificate(cert_pem))
        ctx.check_privatekey()
        ctx.set_verify(ossl.VERIFY_NONE, lambda *_: True)
        self._ctx = ctx

    def getContext(self) -> Any:
        return self._ctx


def _tls_connection(request: Request) -> SSL.Connection:
    # a TLS transport (ISystemHandle), the request's or its channel's
    transport: Any = request.transport if request.transport is not None else request.channel.transport
    return cast("SSL.Connection", transport.getHandle())


def _parse_pem(text: str, what: str) -> tuple[bytes, bytes]:
    try:
        return crypto.parse_pem(text.encode("ascii", "replace"), what)
    except errors.ConfigurationError as e:
        raise join.JoinError(str(e)) from None


def install(paths: Paths, payload: dict[str, Any]) -> None:
    """Check everything in a decrypted join payload, then write it.

    @raise join.JoinError: something is wrong; nothing was written
    """
    server = _parse_pem(payload["server_pem"], "server_pem")
    client = _parse_pem(payload["client_pem"], "client_pem")
    if not crypto.is_issued_by(client[1], server[1]):
        raise join.JoinError("client_pem is not signed by the cluster certificate")
    values = payload["ssconf"]
    unknown = sorted(k for k in values if k not in ssconf.KEYS)
    if unknown:
        raise join.JoinError("unknown ssconf key(s): %s" % ", ".join(unknown))
    for key, lines in values.items():
        if len(ssconf.render(lines)) > ssconf.MAX_FILE_SIZE:
            raise join.JoinError("ssconf value %s is too large" % key)
    paths.ensure_dirs()
    crypto.write_pem_file(paths.server_pem, *server)
    crypto.write_pem_file(paths.client_pem, *client)
    try:
        ssconf.write_files(paths, values)
    except errors.ConfigurationError as e:  # checked above; only for safety
        raise join.JoinError(str(e)) from None
    daemons.write_node_identity(paths, payload["node_name"], payload["address"])


class JoinResource(Resource):
    """Every request of an unjoined noded: only C{POST /node_join} does anything."""

    isLeaf = True
    log = Logger()

    def __init__(self, service: JoinService) -> None:
        super().__init__()
        self._service = service

    def _answer(self, request: Request, code: int, value: Any) -> bytes:
        request.setResponseCode(code)
        request.setHeader(b"Content-Type", b"application/json")
        return json.dumps(value).encode("utf-8")

    def render(self, request: Request) -> Any:
        # Site sets the path and the body before it renders
        segments = [s for s in cast("list[bytes]", request.postpath) if s]
        if segments != [join.PROCEDURE.encode("ascii")]:
            return self._answer(request, 404, {"error": "this node is not in a cluster; it only accepts node_join"})
        if request.method != b"POST":
            return self._answer(request, 403, {"error": "node_join needs POST"})
        service = self._service
        if not service.waiting:
            return self._answer(request, 403, {"error": "this node is joining or joined already"})
        content = cast(IO[bytes], request.content)
        content.seek(0, 2)
        if content.tell() > wire.MAX_BODY:
            return self._answer(request, 413, {"error": "request body too large"})
        content.seek(0)
        try:
            body = json.loads(content.read())
        except ValueError:
            return self._answer(request, 400, {"error": "the request body is not JSON"})
        ossl = join.openssl()
        try:
            key = join.derive_key(service.token, join.export_keying_material(_tls_connection(request)))
        except (ossl.Error, AttributeError) as e:
            self.log.error("node_join: no TLS keying material: {error}", error=e)
            return self._answer(request, 500, {"error": "no TLS keying material"})
        peer = request.getClientAddress()
        try:
            payload = join.open_request(key, body)
        except join.BadProof:
            service.wrong_proof(peer)
            return self._answer(request, 403, {"error": "wrong join token proof"})
        except join.JoinError as e:
            self.log.warn("node_join from {peer}: {error}", peer=peer, error=e)
            return self._answer(request, 400, {"error": str(e)})
        try:
            install(service.paths, payload)
        except join.JoinError as e:
            self.log.warn("node_join from {peer}: refused payload: {error}", peer=peer, error=e)
            return self._answer(request, 400, {"error": str(e)})
        except OSError as e:
            self.log.error("node_join from {peer}: cannot write the cluster files: {error}", peer=peer, error=e)
            return self._answer(request, 500, {"error": "cannot write the cluster files: %s" % e})
        self.log.info("node_join from {peer}: joined cluster {cluster} as {name}",
                      peer=peer, cluster=payload["cluster_name"], name=payload["node_name"])
        proof = join.server_proof(key).hex()
        d = defer.ensureDeferred(service.joined())
        d.addErrback(lambda f: self.log.failure("switching to joined mode failed", f))

        def respond(_: Any) -> None:
            if request.finished or request._disconnected:
                return
            body = self._answer(request, 200, {"proof": proof})
            request.setHeader(b"Content-Length", str(len(body)).encode("ascii"))
            request.write(body)
            request.finish()

        d.addCallback(respond)
        return NOT_DONE_YET


class JoinService(Service):
    """noded's listener: unjoined until a join succeeds, then the normal RPC listener.

    @param endpoint: the server endpoint (address and port) of both modes
    @param joined_factory: builds the protocol factory of joined mode (called
        once the cluster certificate is in place)
    @param stop: called to end the daemon when the token is burnt
    @param where: the address as people read it, for the log line of a failure
        to listen (which ends the daemon with status 1, see L{ganeti.listening})
    @param guard: builds the listening factory of unjoined mode from its
        site and TLS context (L{ganeti.http_limits.guard} with the limits
        of joined mode); without it, plain TLS around the site
    """

    log = Logger()

    def __init__(
        self,
        paths: Paths,
        endpoint: Any,
        token: str,
        joined_factory: Callable[[], Any],
        *,
        token_file: str | None = None,
        stop: Callable[[], Any] | None = None,
        reactor: Any = None,
        where: str = "its port",
        guard: Callable[[Site, Any], Any] | None = None,
        after_join: Callable[[], Any] | None = None,
    ) -> None:
        self.paths = paths
        self.token = join.check_token(token)
        self._endpoint = endpoint
        self._joined_factory = joined_factory
        self._token_file = token_file
        self._stop = stop
        self._reactor = reactor
        self._where = where
        self._after_join = after_join
        self._port: Any = None
        self.failures = 0
        self.waiting = True
        site = Site(JoinResource(self), reactor=reactor, **json_site_options())
        site.displayTracebacks = False
        site.noisy = False
        if guard is None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            self._factory: Any = TLSMemoryBIOFactory(UnjoinedContextFactory(), False, site)
        else:
            self._factory = guard(site, UnjoinedContextFactory())
        self._unjoined = Listener(lambda: self._endpoint.listen(self._factory), where, daemon="ganeti-noded",
                                  reactor=reactor)

    def privilegedStartService(self) -> None:
        super().privilegedStartService()
        self._unjoined.privilegedStartService()

    def startService(self) -> None:
        super().startService()
        self.log.info("ganeti-noded: not in a cluster; waiting for node_join (join token required)")
        self._unjoined.startService()

    def stopService(self) -> Any:
        super().stopService()
        port, self._port = self._port, None
        if port is None:
            return self._unjoined.stopService()
        return port.stopListening()

    def _erase_token(self) -> None:
        self.token = ""
        self.waiting = False
        if self._token_file:
            try:
                os.unlink(self._token_file)
            except OSError as e:
                self.log.warn("cannot remove the join token file {path}: {error}", path=self._token_file, error=e)

    def _end(self) -> None:
        if self._stop is not None:
            if self._reactor is not None:
                self._reactor.callLater(0.1, self._stop)
            else:
                self._stop()

    def wrong_proof(self, peer: Any) -> None:
        self.failures += 1
        self.log.warn("node_join from {peer}: wrong join token proof ({n} of {max})",
                      peer=peer, n=self.failures, max=MAX_FAILURES)
        if self.failures >= MAX_FAILURES and self.waiting:
            self._erase_token()
            self.log.error(
                "ganeti-noded: {max} wrong join token proofs; the join token is burnt and noded exits "
                "(start it again with a new token)", max=MAX_FAILURES)
            self._end()

    async def joined(self) -> None:
        """The files are written: erase the token and listen in joined mode."""
        self._erase_token()
        port, self._unjoined.port = self._unjoined.port, None
        if port is not None:
            await port.stopListening()
        try:
            factory = self._joined_factory()
            self._port = await self._endpoint.listen(factory)
        except Exception as e:
            if self._reactor is not None:
                fail_daemon(self._reactor, failure_message("ganeti-noded", self._where, e))
            else:
                self.log.failure("ganeti-noded: cannot start the cluster RPC listener; noded exits")
                self._end()
            raise
        self.log.info("ganeti-noded: joined; serving node RPC with the cluster certificate")
        if self._after_join is not None:
            self._after_join()
