"""The cluster's keys, certificates and shared secrets.

Layout, as Ganeti keeps them in the data directory:

  - C{server.pem}: the cluster certificate and its key (noded's TLS
    certificate and the CA of the RPC client certificates), mode 0440;
  - C{client.pem}: this node's RPC client certificate, signed by the cluster
    key; the SHA1 digest of its certificate is what C{cluster.candidate_certs}
    and C{ssconf_master_candidates_certs} hold;
  - C{rapi.pem}: the RAPI TLS certificate and key;
  - C{hmac.key}: confd's HMAC key, 40 hex digits and a newline, mode 0400;
  - C{cluster-domain-secret}: the secret for moves between clusters, same
    format.

A PEM file holds the private key first, then the certificate.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import os
import re
import secrets
import socket
from typing import TYPE_CHECKING, Any

from ganeti import errors, serializer
from ganeti.paths import Paths

if TYPE_CHECKING:
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import rsa

#: Validity of generated certificates, in days (Ganeti's default: 5 years).
DEFAULT_VALIDITY_DAYS = 1825
#: RSA key size of generated keys.
KEY_BITS = 2048
#: How far back a new certificate's C{notBefore} lies, to tolerate clock skew.
CLOCK_SKEW = datetime.timedelta(hours=1)
#: Mode of PEM files holding a private key.
PEM_MODE = 0o440
#: Mode of the HMAC key and the cluster domain secret.
SECRET_MODE = 0o400
#: Bytes of randomness in a generated secret (40 hex digits).
SECRET_BYTES = 20

_PEM_BLOCK = re.compile(
    rb"-----BEGIN (?P<label>[A-Z0-9 ]+)-----\r?\n.*?-----END (?P=label)-----\r?\n?",
    re.DOTALL,
)
_PEM_FRAME = re.compile(rb"-----(?:BEGIN|END) CERTIFICATE-----|\s")
_SSL_SOURCE = re.compile(r" \(_ssl\.c:\d+\)")
#: the digests a fingerprint may use
_HASHES = ("sha1", "sha256")


# --- keys and certificates -------------------------------------------------------
#
# What the daemons do with them (read, check, fingerprint, present over TLS) uses the standard library's
# ssl; making them (cluster init, renew-crypto, a node's join) uses cryptography, imported then: its Rust
# extension is 9 MiB of memory a daemon does without.


def load_private_key(pem: bytes | str) -> Any:
    """A private key from PEM text we wrote ourselves (C{server.pem} and
    friends, readable only by us).

    C{cryptography}'s RSA consistency check costs ~100 ms per load, every
    job process loads the cluster key, and OpenSSL checks that the key
    matches its certificate when it is used; so the check is skipped.
    """
    from cryptography.hazmat.primitives import serialization

    data = pem.encode() if isinstance(pem, str) else pem
    return serialization.load_pem_private_key(data, password=None, unsafe_skip_rsa_key_validation=True)


def _as_key(key: Any) -> rsa.RSAPrivateKey:
    from cryptography.hazmat.primitives.asymmetric import rsa

    if isinstance(key, (bytes, str)):
        key = load_private_key(key)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise TypeError("signer key must be an RSA private key, not %s" % type(key).__name__)
    return key


def _as_cert(cert: Any) -> x509.Certificate:
    from cryptography import x509

    if isinstance(cert, (bytes, str)):
        cert = x509.load_pem_x509_certificate(cert.encode() if isinstance(cert, str) else cert)
    if not isinstance(cert, x509.Certificate):
        raise TypeError("signer certificate must be an X.509 certificate, not %s" % type(cert).__name__)
    return cert


def generate_key_and_cert(
    common_name: str,
    *,
    days: int = DEFAULT_VALIDITY_DAYS,
    signer: tuple[Any, Any] | None = None,
) -> tuple[bytes, bytes]:
    """Create an RSA key and an X.509 certificate for C{common_name}.

    Without C{signer} the certificate is self-signed and marked as a CA, so
    it can both serve TLS and sign client certificates (the cluster
    certificate).  With C{signer} it is an end-entity certificate issued by
    that key and certificate (a node's client certificate).

    @param common_name: the subject CN, also put in subjectAltName as a DNS name
    @param days: validity from now
    @param signer: C{(key, cert)} of the issuer, as PEM bytes or
        C{cryptography} objects
    @return: C{(key_pem, cert_pem)}; the key is unencrypted PKCS#8
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    public_key = key.public_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    is_ca = signer is None
    if signer is None:
        sign_key: rsa.RSAPrivateKey = key
        builder = builder.issuer_name(subject).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False
        )
    else:
        sign_key, issuer = _as_key(signer[0]), _as_cert(signer[1])
        builder = builder.issuer_name(issuer.subject).add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(sign_key.public_key()), critical=False
        )
    builder = builder.add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    builder = builder.add_extension(
        x509.KeyUsage(
            digital_signature=True,
            content_commitment=False,
            key_encipherment=True,
            data_encipherment=False,
            key_agreement=False,
            key_cert_sign=is_ca,
            crl_sign=is_ca,
            encipher_only=False,
            decipher_only=False,
        ),
        critical=True,
    )
    cert = builder.sign(sign_key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def write_pem_file(path: str, key_pem: bytes, cert_pem: bytes, mode: int = PEM_MODE) -> None:
    """Write key then certificate to C{path}, atomically."""
    if not key_pem.endswith(b"\n"):
        key_pem += b"\n"
    serializer.write_file(path, key_pem + cert_pem, mode=mode)


def load_pem_file(path: str) -> tuple[bytes, bytes]:
    """Read a key-and-certificate PEM file such as C{server.pem}.

    Both parts are parsed, and the key must belong to the certificate.

    @return: C{(key_pem, cert_pem)}, each the PEM block as found in the file
    @raise errors.ConfigurationError: the file is missing or malformed
    """
    try:
        data = serializer.read_file(path)
    except OSError as e:
        raise errors.ConfigurationError("Can't read PEM file %s: %s" % (path, e.strerror or e)) from e
    return parse_pem(data, "PEM file %s" % path)


def parse_pem(data: bytes, what: str) -> tuple[bytes, bytes]:
    """The first private key and certificate blocks of C{data}, checked:
    both parse, and the key belongs to the certificate.

    @param what: names C{data} in the error messages
    @raise errors.ConfigurationError: a part is missing, malformed or the
        two do not match
    """
    key_pem = cert_pem = None
    for match in _PEM_BLOCK.finditer(data):
        label = match.group("label")
        if label.endswith(b"PRIVATE KEY") and key_pem is None:
            key_pem = match.group(0)
        elif label == b"CERTIFICATE" and cert_pem is None:
            cert_pem = match.group(0)
    if key_pem is None or cert_pem is None:
        missing = " and ".join(
            part for part, block in (("a private key", key_pem), ("a certificate", cert_pem)) if block is None
        )
        raise errors.ConfigurationError("%s lacks %s" % (what, missing))
    _check_pair(key_pem, cert_pem, what)
    return key_pem, cert_pem


def _der(cert_pem: bytes) -> bytes:
    """The DER of the first certificate block of C{cert_pem}.
    @raise ValueError: none, or not base64"""
    for match in _PEM_BLOCK.finditer(cert_pem):
        if match.group("label") == b"CERTIFICATE":
            body = _PEM_FRAME.sub(b"", match.group(0))
            try:
                return base64.b64decode(body, validate=True)
            except binascii.Error as e:
                raise ValueError("not a PEM certificate: %s" % e) from None
    raise ValueError("no certificate found")


def _parsed(ctx: ssl.SSLContext, cert_pem: bytes) -> None:
    """OpenSSL parses C{cert_pem}'s first certificate (into C{ctx}'s trust store).
    @raise ValueError: it does not parse"""
    import ssl

    try:
        ctx.load_verify_locations(cadata=_der(cert_pem))
    except ssl.SSLError as e:
        raise ValueError(ssl_message(e)) from None


def ssl_message(error: Exception) -> str:
    """An C{ssl.SSLError}'s text without the C source line it names."""
    return _SSL_SOURCE.sub("", str(error))


def load_chain(ctx: ssl.SSLContext, key_pem: bytes, cert_pem: bytes) -> None:
    """Have C{ctx} present C{cert_pem} with C{key_pem} (OpenSSL checks that they match).

    The standard library loads a key from a path only: it goes through a memory file, never on disk.
    @raise ssl.SSLError: either does not parse, or they do not match
    """
    fd = os.memfd_create("ganeti-key", os.MFD_CLOEXEC)
    try:
        data = key_pem.rstrip(b"\n") + b"\n" + cert_pem
        while data:
            data = data[os.write(fd, data):]
        ctx.load_cert_chain("/proc/self/fd/%d" % fd)
    finally:
        os.close(fd)


def _check_pair(key_pem: bytes, cert_pem: bytes, what: str) -> None:
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        _parsed(ctx, cert_pem)
    except ValueError as e:
        raise errors.ConfigurationError("%s has a bad certificate: %s" % (what, e)) from e
    try:
        load_chain(ctx, key_pem, cert_pem)
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            raise errors.ConfigurationError("%s: the private key does not match the certificate" % what) from e
        raise errors.ConfigurationError("%s has a bad private key: %s" % (what, ssl_message(e))) from e


def certificates_in(data: bytes) -> tuple[bytes, ...]:
    """Every certificate block of C{data} (PEM), each checked to parse.

    @raise errors.ConfigurationError: a block that is not a certificate
    """
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    found = []
    for match in _PEM_BLOCK.finditer(data):
        if match.group("label") != b"CERTIFICATE":
            continue
        try:
            _parsed(ctx, match.group(0))
        except ValueError as e:
            raise errors.ConfigurationError("bad certificate: %s" % e) from e
        found.append(match.group(0))
    return tuple(found)


def fingerprint(cert_pem: bytes, algorithm: str = "sha1") -> str:
    """The certificate's digest as C{AA:BB:...} (upper-case hex).

    @param algorithm: C{"sha1"} (Ganeti's candidate_certs) or C{"sha256"}
    @raise ValueError: C{cert_pem} holds no certificate
    """
    if algorithm.lower() not in _HASHES:
        raise ValueError("unsupported fingerprint algorithm %r" % (algorithm,))
    return hashlib.new(algorithm.lower(), _der(cert_pem)).digest().hex(":").upper()


def is_issued_by(cert_pem: bytes, issuer_pem: bytes) -> bool:
    """Whether C{issuer_pem}'s key signed C{cert_pem} and names match."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature

    cert, issuer = x509.load_pem_x509_certificate(cert_pem), x509.load_pem_x509_certificate(issuer_pem)
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


# --- shared secrets --------------------------------------------------------------


def generate_secret() -> bytes:
    """40 random lower-case hex digits."""
    return secrets.token_hex(SECRET_BYTES).encode("ascii")


def generate_hmac_key() -> bytes:
    """A new confd HMAC key (40 lower-case hex digits)."""
    return generate_secret()


def generate_domain_secret() -> bytes:
    """A new cluster domain secret (40 lower-case hex digits)."""
    return generate_secret()


def _write_secret(path: str, secret: bytes | str, what: str) -> None:
    if isinstance(secret, str):
        secret = secret.encode("ascii")
    secret = secret.strip()
    check_secret(secret, path, what)
    serializer.write_file(path, secret + b"\n", mode=SECRET_MODE)


def check_secret(secret: bytes, path: str, what: str) -> None:
    if not secret:
        raise errors.ConfigurationError("%s %s is empty" % (what, path))
    if not secret.isascii() or any(c <= 0x20 or c == 0x7F for c in secret):
        raise errors.ConfigurationError(
            "%s %s must be printable ASCII without spaces" % (what, path)
        )


def _load_secret(path: str, what: str) -> bytes:
    try:
        secret = serializer.read_file(path).strip()
    except OSError as e:
        raise errors.ConfigurationError("Can't read %s %s: %s" % (what, path, e.strerror or e)) from e
    check_secret(secret, path, what)
    return secret


def write_hmac_key(path: str, key: bytes | str) -> None:
    """Store the confd HMAC key: the key and a newline, mode 0400."""
    _write_secret(path, key, "HMAC key")


def load_hmac_key(path: str) -> bytes:
    """The confd HMAC key, surrounding whitespace removed.

    @raise errors.ConfigurationError: missing, empty or not printable ASCII
    """
    return _load_secret(path, "HMAC key")


def write_domain_secret(path: str, secret: bytes | str) -> None:
    """Store the cluster domain secret: the secret and a newline, mode 0400."""
    _write_secret(path, secret, "cluster domain secret")


def load_domain_secret(path: str) -> bytes:
    """The cluster domain secret, surrounding whitespace removed."""
    return _load_secret(path, "cluster domain secret")


# --- a node's set of secrets -----------------------------------------------------------


def bootstrap_secrets(
    paths: Paths,
    cluster_name: str,
    *,
    overwrite: bool = False,
    node_name: str | None = None,
) -> dict[str, str]:
    """Create the cluster's certificates and secrets under C{paths.data_dir}.

    Existing files are kept unless C{overwrite}; the one exception is
    C{client.pem}, which is re-issued whenever C{server.pem} is created
    here, because the old one was signed by a key that is gone.

    @param cluster_name: CN of the cluster and RAPI certificates
    @param node_name: CN of the client certificate (default: this host's FQDN)
    @return: C{{file name: path}} of the files created
    """
    os.makedirs(paths.data_dir, mode=0o755, exist_ok=True)
    created: dict[str, str] = {}

    def wanted(path: str) -> bool:
        return overwrite or not os.path.exists(path)

    if wanted(paths.server_pem):
        server = generate_key_and_cert(cluster_name)
        write_pem_file(paths.server_pem, *server)
        created["server.pem"] = paths.server_pem
    if "server.pem" in created or wanted(paths.client_pem):
        signer = load_pem_file(paths.server_pem)
        client = generate_key_and_cert(node_name or socket.getfqdn(), signer=signer)
        write_pem_file(paths.client_pem, *client)
        created["client.pem"] = paths.client_pem
    if wanted(paths.rapi_pem):
        write_pem_file(paths.rapi_pem, *generate_key_and_cert(cluster_name))
        created["rapi.pem"] = paths.rapi_pem
    if wanted(paths.hmac_key):
        write_hmac_key(paths.hmac_key, generate_hmac_key())
        created["hmac.key"] = paths.hmac_key
    if wanted(paths.cluster_domain_secret):
        write_domain_secret(paths.cluster_domain_secret, generate_domain_secret())
        created["cluster-domain-secret"] = paths.cluster_domain_secret
    return created


def cluster_cert_digest(paths: Paths) -> str:
    """SHA1 digest of this node's client certificate, as candidate_certs holds it."""
    _key_pem, cert_pem = load_pem_file(paths.client_pem)
    return fingerprint(cert_pem, "sha1")
