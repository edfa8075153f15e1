"""TLS policy of node RPC: mutual TLS with the cluster certificate, pinned.

Both ends present the cluster certificate (C{server.pem}, or a node's
C{client.pem} signed by it) and both check the peer's certificate twice:
it must chain to the cluster certificate, and its SHA1 fingerprint must be
one the end expects.

  - noded (server) accepts the fingerprint of C{server.pem} itself and those
    listed in C{ssconf_master_candidates_certs} (the candidates' client
    certificates).  A client without such a certificate fails the
    handshake: no HTTP request is ever parsed for it.
  - the RPC client accepts only the fingerprint of the cluster certificate;
    host names are not checked (nodes are addressed by IP, as in Ganeti).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Collection

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL, crypto
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IOpenSSLContextFactory
from twisted.logger import Logger
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from ganeti import crypto as gcrypto
from ganeti import errors
from ganeti.paths import Paths
from ganeti.ssconf import SimpleStore

log = Logger()

VerifyCallback = Callable[[SSL.Connection, Any, int, int, int], bool]


@attrs.frozen
class Credentials:
    """What one end presents (key and certificate) and what it trusts.

    @ivar key_pem: private key of C{cert_pem}
    @ivar cert_pem: the certificate presented to the peer
    @ivar ca_pem: the cluster certificate (trust root)
    """

    key_pem: bytes
    cert_pem: bytes
    ca_pem: bytes

    @classmethod
    def cluster(cls, paths: Paths) -> Credentials:
        """Present C{server.pem} and trust it (noded, and the default client)."""
        key_pem, cert_pem = gcrypto.load_pem_file(paths.server_pem)
        return cls(key_pem, cert_pem, cert_pem)

    @classmethod
    def node_client(cls, paths: Paths) -> Credentials:
        """Present this node's C{client.pem}, or C{server.pem} without one (Ganeti's choice)."""
        _key, ca_pem = gcrypto.load_pem_file(paths.server_pem)
        if os.path.exists(paths.client_pem):
            key_pem, cert_pem = gcrypto.load_pem_file(paths.client_pem)
            return cls(key_pem, cert_pem, ca_pem)
        return cls.cluster(paths)

    @property
    def ca_fingerprint(self) -> str:
        return gcrypto.fingerprint(self.ca_pem, "sha1")


def peer_fingerprint(cert: Any) -> str:
    """SHA1 fingerprint C{AA:BB:...} of a pyOpenSSL or C{cryptography} certificate."""
    if isinstance(cert, crypto.X509):
        return cert.digest("sha1").decode("ascii").upper()
    return gcrypto.fingerprint(cert.public_bytes(serialization.Encoding.PEM), "sha1")


def make_verify_callback(allowed: Callable[[], Collection[str]], what: str = "peer") -> VerifyCallback:
    """A pyOpenSSL verify callback pinning the leaf certificate's fingerprint.

    OpenSSL's chain verification (C{preverify_ok}) must have passed at
    every depth; at depth 0 (the peer's own certificate) its SHA1
    fingerprint must also be in C{allowed()}, which is asked anew for each
    handshake.
    """

    def verify(connection: SSL.Connection, cert: Any, errno: int, depth: int, preverify_ok: int) -> bool:
        if not preverify_ok:
            log.warn("TLS: {what} certificate refused by chain verification (error {errno}, depth {depth})",
                     what=what, errno=errno, depth=depth)
            return False
        if depth != 0:
            return True
        digest = peer_fingerprint(cert)
        if digest in allowed():
            return True
        log.warn("TLS: {what} certificate {digest} is not a cluster certificate", what=what, digest=digest)
        return False

    return verify


def _context(creds: Credentials, verify: VerifyCallback, *, server: bool) -> SSL.Context:
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE)
    ctx.use_privatekey(gcrypto.load_private_key(creds.key_pem))
    ctx.use_certificate(x509.load_pem_x509_certificate(creds.cert_pem))
    ctx.check_privatekey()
    ctx.get_cert_store().add_cert(crypto.X509.from_cryptography(x509.load_pem_x509_certificate(creds.ca_pem)))  # type: ignore[union-attr]
    ctx.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, verify)
    if server:
        ctx.set_session_id(b"ganeti-noded")
    return ctx


@implementer(IOpenSSLContextFactory)
class ServerContextFactory:
    """noded's TLS context (for C{TLSMemoryBIOFactory}): requires a cluster client certificate."""

    def __init__(self, creds: Credentials, allowed: Callable[[], Collection[str]]) -> None:
        self._ctx = _context(creds, make_verify_callback(allowed, "client"), server=True)

    def getContext(self) -> SSL.Context:
        return self._ctx


class AllowedClients:
    """The fingerprints noded accepts: the cluster certificate's and the
    candidates' client certificates from C{ssconf_master_candidates_certs}
    (re-read when that file changes)."""

    def __init__(self, paths: Paths, cluster_fingerprint: str) -> None:
        self._paths = paths
        self._cluster = cluster_fingerprint
        self._stamp: Any = None
        self._cached: frozenset[str] = frozenset([cluster_fingerprint])

    def __call__(self) -> frozenset[str]:
        path = self._paths.ssconf("master_candidates_certs")
        try:
            st = os.stat(path)
            stamp: Any = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            digests = {self._cluster}
            if stamp is not None:
                try:
                    digests.update(d.upper() for d in SimpleStore(self._paths).get_master_candidates_certs().values())
                except errors.ConfigurationError as e:
                    log.warn("ignoring {path}: {error}", path=path, error=e)
            self._cached = frozenset(digests)
        return self._cached


@implementer(IOpenSSLClientConnectionCreator)
class _PinnedCreator:
    def __init__(self, ctx: SSL.Context) -> None:
        self._ctx = ctx

    def clientConnectionForTLS(self, tlsProtocol: Any) -> SSL.Connection:
        connection = SSL.Connection(self._ctx, None)
        connection.set_app_data(tlsProtocol)
        connection.set_connect_state()
        return connection


@implementer(IPolicyForHTTPS)
class PinnedPolicy:
    """The RPC client's TLS policy: present C{creds}, accept only a node
    whose certificate has one of C{fingerprints} (default: the cluster
    certificate's) and chains to the cluster certificate."""

    def __init__(self, creds: Credentials, fingerprints: Collection[str] | None = None) -> None:
        allowed = frozenset(fingerprints) if fingerprints is not None else frozenset([creds.ca_fingerprint])
        self._creator = _PinnedCreator(_context(creds, make_verify_callback(lambda: allowed, "node"), server=False))

    def creatorForNetloc(self, hostname: bytes, port: int) -> _PinnedCreator:
        return self._creator


# --- renewal without a restart: contexts that follow the files -------------------------------

#: Certificates trusted besides C{server.pem} while the cluster certificate is renewed
#: (C{gnt-cluster renew-crypto --new-cluster-certificate}; in the data directory).
TRUST_FILE = "cluster-trust.pem"


def trust_file(paths: Paths) -> str:
    return os.path.join(paths.data_dir, TRUST_FILE)


def read_trusted(paths: Paths) -> tuple[bytes, ...]:
    """The certificates of C{cluster-trust.pem} (none when it is missing or empty)."""
    try:
        with open(trust_file(paths), "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return ()
    return gcrypto.certificates_in(data)


def _stamp(path: str) -> Any:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


#: per data directory, what every L{ClusterTrust} of this process read last: the two files' stamps, the
#: credentials and the trusted certificates (a job process inherits its fork server's: L{warm_client_context})
_READ: dict[str, tuple[Any, Credentials, tuple[bytes, ...]]] = {}
#: per data directory, the RPC client's last TLS context and the stamps it was built from
_CLIENT_CONTEXTS: dict[str, tuple[Any, SSL.Context]] = {}


class ClusterTrust:
    """C{server.pem} and C{cluster-trust.pem}, read again whenever either
    file changes (two C{stat} calls per use): the credentials to present,
    and every certificate a peer may present or chain to.  A file that
    cannot be read keeps the previous state (and is logged)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self._stamps: Any = object()
        self.creds: Credentials | None = None
        self.trusted: tuple[bytes, ...] = ()
        self.fingerprints: frozenset[str] = frozenset()
        self.generation = 0
        self.refresh()

    def refresh(self) -> bool:
        """Reload if a file changed; whether anything was reloaded."""
        stamps = (_stamp(self.paths.server_pem), _stamp(trust_file(self.paths)))
        if stamps == self._stamps:
            return False
        try:
            known = _READ.get(self.paths.data_dir)
            if known is not None and known[0] == stamps:  # read by another user in this process (or its parent)
                creds, trusted = known[1], known[2]
            else:  # stamped before the read: a change during it is seen at the next use
                creds = Credentials.cluster(self.paths)
                trusted = read_trusted(self.paths)
                _READ[self.paths.data_dir] = (stamps, creds, trusted)
        except (errors.ConfigurationError, OSError, ValueError) as e:
            if self.creds is None:
                raise
            log.error("TLS: keeping the previous cluster certificate: {error}", error=e)
            return False
        self._stamps = stamps
        self.creds, self.trusted = creds, trusted
        self.fingerprints = frozenset([creds.ca_fingerprint, *(gcrypto.fingerprint(c) for c in trusted)])
        self.generation += 1
        if self.generation > 1:
            log.info("TLS: cluster certificate {fp} loaded, {n} more trusted", fp=creds.ca_fingerprint, n=len(trusted))
        return True

    def context(self, verify: VerifyCallback, *, server: bool) -> SSL.Context:
        assert self.creds is not None
        ctx = _context(self.creds, verify, server=server)
        store = ctx.get_cert_store()
        for pem in self.trusted:
            store.add_cert(crypto.X509.from_cryptography(x509.load_pem_x509_certificate(pem)))  # type: ignore[union-attr]
        return ctx


@implementer(IOpenSSLContextFactory)
class ReloadingServerContextFactory:
    """noded's (and the heartbeat port's) TLS context, rebuilt when
    C{server.pem} or C{cluster-trust.pem} changes: new connections get the
    new certificate, those open keep theirs.  A client is accepted with the
    cluster certificate, a trusted one, or a candidate's certificate from
    C{ssconf_master_candidates_certs}, chained to one of them."""

    def __init__(self, paths: Paths) -> None:
        self._trust = ClusterTrust(paths)
        self._candidates = AllowedClients(paths, "")
        self._ctx: SSL.Context | None = None
        self._generation = -1

    def _allowed(self) -> frozenset[str]:
        return self._candidates() | self._trust.fingerprints

    def getContext(self) -> SSL.Context:
        self._trust.refresh()
        if self._ctx is None or self._generation != self._trust.generation:
            self._ctx = self._trust.context(make_verify_callback(self._allowed, "client"), server=True)
            self._generation = self._trust.generation
        return self._ctx


@implementer(IOpenSSLClientConnectionCreator)
class _ReloadingCreator:
    def __init__(self, trust: ClusterTrust) -> None:
        self._trust = trust
        self._ctx: SSL.Context | None = None
        self._generation = -1

    def clientConnectionForTLS(self, tlsProtocol: Any) -> SSL.Connection:
        self._trust.refresh()
        if self._ctx is None or self._generation != self._trust.generation:
            self._ctx = client_context(self._trust)
            self._generation = self._trust.generation
        connection = SSL.Connection(self._ctx, None)
        connection.set_app_data(tlsProtocol)
        connection.set_connect_state()
        return connection


def client_context(trust: ClusterTrust) -> SSL.Context:
    """The RPC client's TLS context for C{trust}'s current files, built once per change of the files in this
    process (a key's parsing and checks take about 10 ms)."""
    cached = _CLIENT_CONTEXTS.get(trust.paths.data_dir)
    if cached is not None and cached[0] == trust._stamps:
        return cached[1]
    ctx = trust.context(make_verify_callback(lambda: trust.fingerprints, "node"), server=False)
    _CLIENT_CONTEXTS[trust.paths.data_dir] = (trust._stamps, ctx)
    return ctx


def warm_client_context(paths: Paths) -> None:
    """Read the cluster certificate and build the RPC client's context now, so that a process forked after
    this (a job, from LuxiD's fork server) starts with both; nothing when they cannot be read yet."""
    try:
        client_context(ClusterTrust(paths))
    except (errors.ConfigurationError, OSError, ValueError):
        pass


@implementer(IPolicyForHTTPS)
class ReloadingPolicy:
    """The RPC client's TLS policy following the files: present the
    current C{server.pem}; accept a node presenting it or a certificate of
    C{cluster-trust.pem} (during a renewal of the cluster certificate)."""

    def __init__(self, paths: Paths) -> None:
        self._creator = _ReloadingCreator(ClusterTrust(paths))

    def creatorForNetloc(self, hostname: bytes, port: int) -> _ReloadingCreator:
        return self._creator


@implementer(IOpenSSLContextFactory)
class ReloadingCertificate:
    """A plain TLS server context (no client certificate) from a key-and-
    certificate PEM file, rebuilt when the file changes (RAPI's C{rapi.pem}:
    C{renew-crypto --new-rapi-certificate} without a restart).  A file that
    cannot be read keeps the previous certificate."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._stamp: Any = object()
        self._ctx: SSL.Context | None = None
        self.getContext()

    def getContext(self) -> SSL.Context:
        stamp = _stamp(self._path)
        if stamp != self._stamp:
            try:
                key_pem, cert_pem = gcrypto.load_pem_file(self._path)
                ctx = SSL.Context(SSL.TLS_METHOD)
                ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
                ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE)
                ctx.use_privatekey(gcrypto.load_private_key(key_pem))
                ctx.use_certificate(x509.load_pem_x509_certificate(cert_pem))
                ctx.check_privatekey()
            except (errors.ConfigurationError, SSL.Error) as e:
                if self._ctx is None:
                    raise
                log.error("TLS: keeping the previous certificate of {path}: {error}", path=self._path, error=e)
                return self._ctx
            if self._ctx is not None:
                log.info("TLS: new certificate {fp} from {path}", fp=gcrypto.fingerprint(cert_pem), path=self._path)
            self._ctx, self._stamp = ctx, stamp
        assert self._ctx is not None
        return self._ctx
