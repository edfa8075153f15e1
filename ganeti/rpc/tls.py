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

import hashlib
import os
import ssl
from typing import Any, Callable, Collection

import attrs
from twisted.logger import Logger

from ganeti import crypto as gcrypto
from ganeti import errors
from ganeti.dirwatch import file_stamp
from ganeti.paths import Paths
from ganeti.ssconf import SimpleStore

log = Logger()


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


def peer_fingerprint(der: bytes) -> str:
    """SHA1 fingerprint C{AA:BB:...} of a DER certificate (as a peer presents it)."""
    return hashlib.sha1(der).digest().hex(":").upper()


def base_context(*, server: bool) -> ssl.SSLContext:
    """A context with the cluster's TLS settings, nothing loaded: TLS 1.2 at least, no compression, host
    names not checked (peers are addressed by IP; their certificates are pinned instead: L{Pinned}), no
    session tickets (no client resumes a session)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    ctx.check_hostname = False
    if server:
        ctx.num_tickets = 0
    return ctx


def context(creds: Credentials, *, server: bool, trusted: Collection[bytes] = ()) -> ssl.SSLContext:
    """A TLS context presenting C{creds}' certificate and requiring the peer's, chained to
    C{creds.ca_pem} or one of C{trusted} (the pin is checked after the handshake: L{Pinned})."""
    ctx = base_context(server=server)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=b"\n".join([creds.ca_pem, *trusted]).decode("ascii"))
    gcrypto.load_chain(ctx, creds.key_pem, creds.cert_pem)
    return ctx


class Pinned:
    """One end of a connection (a L{ganeti.tlsbio.TLSEnd}): the context
    C{make_context()} returns, and the peer's certificate (chained by
    OpenSSL during the handshake) pinned to C{allowed()}, asked anew for
    each connection."""

    def __init__(self, make_context: Callable[[], ssl.SSLContext], allowed: Callable[[], Collection[str]],
                 what: str) -> None:
        self._make_context = make_context
        self._allowed = allowed
        self.what = what

    def getContext(self) -> ssl.SSLContext:
        return self._make_context()

    def check_peer(self, der: bytes | None) -> str | None:
        if der is None:
            log.warn("TLS: the {what} presented no certificate", what=self.what)
            return "the %s presented no certificate" % self.what
        digest = peer_fingerprint(der)
        if digest in self._allowed():
            return None
        log.warn("TLS: {what} certificate {digest} is not a cluster certificate", what=self.what, digest=digest)
        return "the %s certificate %s is not a cluster certificate" % (self.what, digest)

    def handshake_failed(self, reason: str) -> None:
        if "certificate verify failed" in reason:
            log.warn("TLS: {what} certificate refused by chain verification: {reason}", what=self.what, reason=reason)
        else:
            log.warn("TLS: handshake with a {what} failed: {reason}", what=self.what, reason=reason)


class ServerContextFactory(Pinned):
    """noded's TLS end: requires a cluster client certificate."""

    def __init__(self, creds: Credentials, allowed: Callable[[], Collection[str]]) -> None:
        ctx = context(creds, server=True)
        super().__init__(lambda: ctx, allowed, "client")


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
        stamp = file_stamp(path)
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


class PinnedPolicy:
    """The RPC client's TLS policy: present C{creds}, accept only a node
    whose certificate has one of C{fingerprints} (default: the cluster
    certificate's) and chains to the cluster certificate."""

    def __init__(self, creds: Credentials, fingerprints: Collection[str] | None = None) -> None:
        allowed = frozenset(fingerprints) if fingerprints is not None else frozenset([creds.ca_fingerprint])
        ctx = context(creds, server=False)
        self._end = Pinned(lambda: ctx, lambda: allowed, "node")

    def creatorForNetloc(self, hostname: bytes, port: int) -> Pinned:
        return self._end


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


#: per data directory, what every L{ClusterTrust} of this process read last: the two files' stamps, the
#: credentials and the trusted certificates (a job process inherits its fork server's: L{warm_client_context})
_READ: dict[str, tuple[Any, Credentials, tuple[bytes, ...]]] = {}
#: per data directory, the RPC client's last TLS context and the stamps it was built from
_CLIENT_CONTEXTS: dict[str, tuple[Any, ssl.SSLContext]] = {}


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
        stamps = (file_stamp(self.paths.server_pem), file_stamp(trust_file(self.paths)))
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

    def context(self, *, server: bool) -> ssl.SSLContext:
        assert self.creds is not None
        return context(self.creds, server=server, trusted=self.trusted)


class ReloadingServerContextFactory(Pinned):
    """noded's (and the heartbeat port's) TLS end, its context rebuilt when
    C{server.pem} or C{cluster-trust.pem} changes: new connections get the
    new certificate, those open keep theirs.  A client is accepted with the
    cluster certificate, a trusted one, or a candidate's certificate from
    C{ssconf_master_candidates_certs}, chained to one of them."""

    def __init__(self, paths: Paths) -> None:
        self._trust = ClusterTrust(paths)
        self._candidates = AllowedClients(paths, "")
        self._ctx: ssl.SSLContext | None = None
        self._generation = -1
        super().__init__(self._context, self._allowed_clients, "client")

    def _allowed_clients(self) -> frozenset[str]:
        return self._candidates() | self._trust.fingerprints

    def _context(self) -> ssl.SSLContext:
        self._trust.refresh()
        if self._ctx is None or self._generation != self._trust.generation:
            self._ctx = self._trust.context(server=True)
            self._generation = self._trust.generation
        return self._ctx


class _ReloadingCreator(Pinned):
    def __init__(self, trust: ClusterTrust) -> None:
        self._trust = trust
        super().__init__(self._context, lambda: trust.fingerprints, "node")

    def _context(self) -> ssl.SSLContext:
        self._trust.refresh()
        return client_context(self._trust)


def client_context(trust: ClusterTrust) -> ssl.SSLContext:
    """The RPC client's TLS context for C{trust}'s current files, built once per change of the files in this
    process (a key's parsing and checks take about 10 ms)."""
    cached = _CLIENT_CONTEXTS.get(trust.paths.data_dir)
    if cached is not None and cached[0] == trust._stamps:
        return cached[1]
    ctx = trust.context(server=False)
    _CLIENT_CONTEXTS[trust.paths.data_dir] = (trust._stamps, ctx)
    return ctx


def warm_client_context(paths: Paths) -> None:
    """Read the cluster certificate and build the RPC client's context now, so that a process forked after
    this (a job, from LuxiD's fork server) starts with both; nothing when they cannot be read yet."""
    try:
        client_context(ClusterTrust(paths))
    except (errors.ConfigurationError, OSError, ValueError):
        pass


class ReloadingPolicy:
    """The RPC client's TLS policy following the files: present the
    current C{server.pem}; accept a node presenting it or a certificate of
    C{cluster-trust.pem} (during a renewal of the cluster certificate)."""

    def __init__(self, paths: Paths) -> None:
        self._creator = _ReloadingCreator(ClusterTrust(paths))

    def creatorForNetloc(self, hostname: bytes, port: int) -> _ReloadingCreator:
        return self._creator


class ReloadingCertificate:
    """A plain TLS server end (no client certificate) from a key-and-
    certificate PEM file, its context rebuilt when the file changes (RAPI's
    C{rapi.pem}: C{renew-crypto --new-rapi-certificate} without a restart).
    A file that cannot be read keeps the previous certificate."""

    what = "RAPI client"

    def __init__(self, path: str) -> None:
        self._path = path
        self._stamp: Any = object()
        self._ctx: ssl.SSLContext | None = None
        self.getContext()

    def getContext(self) -> ssl.SSLContext:
        stamp = file_stamp(self._path)
        if stamp != self._stamp:
            try:
                key_pem, cert_pem = gcrypto.load_pem_file(self._path)
                ctx = base_context(server=True)
                gcrypto.load_chain(ctx, key_pem, cert_pem)
            except (errors.ConfigurationError, ssl.SSLError) as e:
                if self._ctx is None:
                    raise
                log.error("TLS: keeping the previous certificate of {path}: {error}", path=self._path, error=e)
                return self._ctx
            if self._ctx is not None:
                log.info("TLS: new certificate {fp} from {path}", fp=gcrypto.fingerprint(cert_pem), path=self._path)
            self._ctx, self._stamp = ctx, stamp
        assert self._ctx is not None
        return self._ctx

    def check_peer(self, der: bytes | None) -> str | None:
        return None  # RAPI's clients authenticate with a password, not a certificate
