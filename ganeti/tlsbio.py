"""TLS for Twisted connections through the standard library's C{ssl}.

Twisted's own TLS (C{twisted.protocols.tls}) is built on pyOpenSSL, which
loads C{cryptography}'s Rust extension with an OpenSSL of its own: 8 MiB of
RSS more than the standard library's C{ssl} in every process that speaks
TLS (docs/benchmarks.md, memory).  This module does the same job with
C{ssl.SSLObject} over two C{ssl.MemoryBIO}: L{TLSProtocol} sits between a
TCP transport and the application's protocol, encrypting what the
application writes and decrypting what arrives.

An end of a connection is described by a L{TLSEnd}: C{getContext()}, the
C{ssl.SSLContext} for the next connection (asked anew for each, so a
context that follows its files takes effect for new connections), and
C{check_peer(der)}, asked once the handshake is done with the peer's
certificate (DER; C{None} when it sent none): a reason to refuse it, or
C{None}.  The standard library has no verification callback: the chain is
checked by OpenSSL during the handshake (the context's trust store), the
pin afterwards, before any application byte is delivered or sent.  A
refused peer's connection is closed, and the application protocol's
C{connectionLost} gets a L{TLSError} saying why.

  - L{TLSServerFactory} wraps a listening factory (noded, RAPI, the
    heartbeat port).
  - L{wrap_client} wraps a client endpoint (node RPC, the heartbeat, a
    candidate's RAPI or LUXI reaching the master).

The wrapper passes what it does not handle to the TCP transport
(C{getHandle} returns the socket, C{getPeer}, producers, pausing), as
C{twisted.protocols.policies.ProtocolWrapper} does.
"""

from __future__ import annotations

import ssl
from typing import Any, cast
from typing import Protocol as TypingProtocol

from twisted.internet.interfaces import (
    IHandshakeListener,
    IProtocol,
    IProtocolFactory,
    ISSLTransport,
    IStreamClientEndpoint,
)
from twisted.internet.protocol import Protocol, connectionDone
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure
from zope.interface import directlyProvides, implementer, providedBy

from ganeti.crypto import ssl_message

#: the most decrypted bytes handed to the application at once
READ_SIZE = 1 << 16


class TLSError(Exception):
    """The TLS layer failed: a handshake error, a refused certificate, a
    corrupt record.  What the application protocol's C{connectionLost}
    gets instead of the TCP transport's reason."""


class TLSEnd(TypingProtocol):
    """One end's TLS policy (see the module's docstring)."""

    def getContext(self) -> ssl.SSLContext: ...

    def check_peer(self, der: bytes | None) -> str | None: ...

    # optional: C{handshake_failed(reason)}, told why a handshake failed (to log it)


class TLSProtocol(ProtocolWrapper):
    """One TLS connection: the TCP transport below, C{wrappedProtocol} above.

    Writes made before the handshake is done (and the peer accepted) are
    kept and sent after it; C{loseConnection} sends what was written and
    a TLS close alert, then closes the TCP connection.
    """

    factory: _TLSFactory
    transport: Any

    def __init__(self, factory: _TLSFactory, wrappedProtocol: IProtocol) -> None:
        super().__init__(cast(Any, factory), wrappedProtocol)
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls: ssl.SSLObject | None = None
        self._ready = False  # handshake done and the peer accepted
        self._pending: list[bytes] = []  # written before that
        self._closing = False  # loseConnection asked for
        self._closed = False  # the TLS layer is over: nothing more in or out
        self._producer = False
        self._reason: Failure | None = None

    # --- the connection's life ------------------------------------------------------------------

    def makeConnection(self, transport: Any) -> None:
        directlyProvides(self, providedBy(transport), ISSLTransport)
        Protocol.makeConnection(self, transport)
        self.factory.registerProtocol(self)
        try:
            self._tls = self.factory.end.getContext().wrap_bio(
                self._incoming, self._outgoing, server_side=self.factory.server_side)
        except (ssl.SSLError, ValueError, OSError) as e:
            self._fail(TLSError("no TLS context: %s" % (e,)))
        self.wrappedProtocol.makeConnection(cast(Any, self))
        if not self.factory.server_side and not self._closed:
            self._handshake()

    def dataReceived(self, data: bytes) -> None:
        if self._closed:
            return
        self._incoming.write(data)
        if not self._ready and not self._handshake():
            return
        if not self._closed:  # the application may have closed when the handshake was done
            self._read()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._closed = True
        if self._reason is not None:  # else the TCP transport's (as Twisted's TLS, a close during the handshake too)
            reason = self._reason
        self._reason = None
        self.connected = False
        self._tls = None
        ProtocolWrapper.connectionLost(self, reason)

    # --- incoming -----------------------------------------------------------------------------

    def _handshake(self) -> bool:
        """Go on with the handshake; whether it is done and the peer accepted."""
        assert self._tls is not None
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return False
        except ssl.SSLError as e:
            message = "TLS handshake failed: %s" % (_describe(e),)
            failed = getattr(self.factory.end, "handshake_failed", None)
            if failed is not None:
                failed(message)
            self._fail(TLSError(message))
            return False
        self._flush()
        why = self.factory.end.check_peer(self._tls.getpeercert(binary_form=True))
        if why is not None:
            self._fail(TLSError(why))
            return False
        self._ready = True
        if IHandshakeListener.providedBy(self.wrappedProtocol):
            self.wrappedProtocol.handshakeCompleted()
        pending, self._pending = self._pending, []
        for data in pending:
            self._send(data)
        if self._closing and not self._producer:
            self._shutdown()
        return True

    def _read(self) -> None:
        """Hand the application what arrived, decrypted: every record at once (as the TCP transport hands
        us what one read got), then the end if the peer closed or the stream is broken."""
        assert self._tls is not None
        chunks = []
        end: Any = None
        while True:
            try:
                data = self._tls.read(READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the peer's close alert (as a socket reports it)
                end = True
                break
            except ssl.SSLError as e:
                end = TLSError("TLS error: %s" % (_describe(e),))
                break
            if not data:  # the peer's close alert (as a memory BIO reports it)
                end = True
                break
            chunks.append(data)
        if chunks:
            self.wrappedProtocol.dataReceived(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if self._closed:
            return
        if end is True:
            self._shutdown()  # ours, then close
        elif end is not None:
            self._fail(end)
        else:
            self._flush()  # what reading produced (a key update's answer)

    # --- outgoing -----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._closing or self._closed or not data:
            return
        if not self._ready:
            self._pending.append(bytes(data))
            return
        self._send(data)

    def writeSequence(self, iovec: Any) -> None:
        self.write(b"".join(iovec))

    def _send(self, data: bytes) -> None:
        assert self._tls is not None
        try:
            self._tls.write(data)
        except ssl.SSLError as e:
            self._fail(TLSError("TLS error: %s" % (_describe(e),)))
            return
        self._flush()

    def _flush(self) -> None:
        if self._outgoing.pending:
            self.transport.write(self._outgoing.read())

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self._producer = True
        self.transport.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:
        self._producer = False
        self.transport.unregisterProducer()
        if self._closing and self._ready and not self._closed:
            self._shutdown()

    def loseConnection(self) -> None:
        """Send what was written and a close alert, then close; before the
        handshake is done, once it is (nothing written: at once)."""
        if self._closing or self._closed:
            return
        self._closing = True
        self.disconnecting = True
        if not self._ready:
            if not self._pending:
                self._closed = True
                self.transport.abortConnection()
            return
        if not self._producer:
            self._shutdown()

    def abortConnection(self) -> None:
        self._closing = self._closed = True
        self.disconnecting = True
        self.transport.abortConnection()

    def _shutdown(self) -> None:
        assert self._tls is not None
        self._closed = True
        try:
            self._tls.unwrap()
        except ssl.SSLError:  # want-read: our alert is out, the peer's is not awaited
            pass
        self._flush()
        self.transport.loseConnection()

    def _fail(self, error: TLSError) -> None:
        """End the connection for C{error} (what the application will be told); an alert is sent first."""
        if self._reason is None:
            self._reason = Failure(error)
        self._closed = self._closing = True
        self._flush()
        self.transport.loseConnection()

    # --- ISSLTransport --------------------------------------------------------------------------

    def getPeerCertificate(self) -> bytes | None:
        """The peer's certificate (DER), once the handshake is done."""
        return None if self._tls is None else self._tls.getpeercert(binary_form=True)


def _describe(error: ssl.SSLError) -> str:
    verify = getattr(error, "verify_message", None)
    if verify:
        return "certificate verify failed: %s" % verify
    return ssl_message(error)


class _TLSFactory(WrappingFactory):
    """The connections of C{wrappedFactory} behind TLS as C{end} says; a
    connection C{wrappedFactory} refuses (its C{buildProtocol} returns
    C{None}) is refused."""

    protocol = TLSProtocol
    server_side = False
    noisy = False

    def __init__(self, end: TLSEnd, wrappedFactory: IProtocolFactory) -> None:
        super().__init__(wrappedFactory)
        self.end = end

    def buildProtocol(self, addr: Any) -> TLSProtocol | None:  # type: ignore[override]
        inner = self.wrappedFactory.buildProtocol(addr)
        return None if inner is None else TLSProtocol(self, inner)


class TLSServerFactory(_TLSFactory):
    """A listening factory's accepted connections behind TLS (the server's end)."""

    server_side = True


class _TLSClientFactory(_TLSFactory):
    """A client endpoint's connections behind TLS (L{wrap_client})."""


@implementer(IStreamClientEndpoint)
class _TLSClientEndpoint:
    def __init__(self, end: TLSEnd, endpoint: IStreamClientEndpoint) -> None:
        self._end = end
        self._endpoint = endpoint

    def connect(self, factory: IProtocolFactory) -> Any:
        d: Any = self._endpoint.connect(_TLSClientFactory(self._end, factory))
        return d.addCallback(_application)


def _application(protocol: Any) -> Any:
    return protocol.wrappedProtocol


def wrap_client(end: TLSEnd, endpoint: IStreamClientEndpoint) -> IStreamClientEndpoint:
    """C{endpoint}'s connections behind TLS as C{end} says (the endpoint's
    C{connect} fires with the application's protocol, as Twisted's
    C{wrapClientTLS} does)."""
    return _TLSClientEndpoint(end, endpoint)
