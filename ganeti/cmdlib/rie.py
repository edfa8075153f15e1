"""Remote import/export between clusters: Ganeti's handshake, signed X509
certificates and disk information (pure; no I/O).

Both clusters share the cluster domain secret (C{cds}).  Every value that
crosses from one cluster to the other through the client driving the move
(C{move-instance}) carries an HMAC-SHA1 under it, salted:

  - the handshake C{(version, hmac("0:Hi, I'm Ganeti"), salt)};
  - the source's X509 key name C{(name, hmac(name), salt)};
  - each side's certificate, signed: C{"X-Ganeti-Signature: <salt>/<hmac of
    the PEM>"}, an empty line, then the PEM;
  - each destination disk C{(host, port, magic, hmac("<index>:<host>:<port>:<magic>"), salt)}.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

from ganeti import errors
from ganeti.jobs import lifecycle

RIE_VERSION = 0
RIE_HANDSHAKE = "Hi, I'm Ganeti"
#: seconds an X509 certificate made for a move is valid
RIE_CERT_VALIDITY = 86400
SIGNATURE_HEADER = "X-Ganeti-Signature"
#: the job log type of the destination's listening information
ELOG_REMOTE_IMPORT = lifecycle.ELOG_REMOTE_IMPORT

_SALT_RE = re.compile(r"^[a-zA-Z0-9]+$")
_SIGNATURE_RE = re.compile(r"^%s:\s*(?P<salt>[a-zA-Z0-9]+)/(?P<sign>[a-fA-F0-9]+)$" % re.escape(SIGNATURE_HEADER))


def new_salt() -> str:
    return secrets.token_hex(4)


def sha1_hmac(key: str, message: str | bytes, salt: str = "") -> str:
    """Ganeti's C{Sha1Hmac}: HMAC-SHA1 of C{salt + message} under C{key}, hex."""
    data = message.encode("utf-8") if isinstance(message, str) else message
    return hmac.new(key.encode("utf-8"), salt.encode("utf-8") + data, hashlib.sha1).hexdigest()


def verify_hmac(key: str, message: str | bytes, digest: Any, salt: Any) -> bool:
    if not isinstance(digest, str) or not isinstance(salt, str):
        return False
    return hmac.compare_digest(sha1_hmac(key, message, salt).lower(), digest.lower())


def handshake(cds: str) -> list[Any]:
    salt = new_salt()
    return [RIE_VERSION, sha1_hmac(cds, "%s:%s" % (RIE_VERSION, RIE_HANDSHAKE), salt), salt]


def check_handshake(cds: str, value: Any) -> None:
    """@raise errors.OpPrereqError: not a handshake made with C{cds} and our version"""
    try:
        version, digest, salt = value
    except (TypeError, ValueError) as exc:
        raise errors.OpPrereqError("Invalid handshake: %s" % exc, errors.ECODE_INVAL) from None
    if not verify_hmac(cds, "%s:%s" % (version, RIE_HANDSHAKE), digest, salt):
        raise errors.OpPrereqError("Hash didn't match, clusters don't share the same domain secret",
                                   errors.ECODE_INVAL)
    if version != RIE_VERSION:
        raise errors.OpPrereqError("Clusters don't have the same remote import/export protocol (local=%s,"
                                   " remote=%s)" % (RIE_VERSION, version), errors.ECODE_INVAL)


def key_name(cds: str, name: str) -> list[str]:
    salt = new_salt()
    return [name, sha1_hmac(cds, name, salt), salt]


def check_key_name(cds: str, value: Any) -> str:
    try:
        name, digest, salt = value
    except (TypeError, ValueError) as exc:
        raise errors.OpPrereqError("Invalid X509 key name: %s" % exc, errors.ECODE_INVAL) from None
    if not isinstance(name, str) or not verify_hmac(cds, name, digest, salt):
        raise errors.OpPrereqError("HMAC for X509 key name is wrong", errors.ECODE_INVAL)
    return name


def _sane_pem(cert_pem: str | bytes) -> str:
    from cryptography import x509  # here: a job process keeps it out until an export needs it
    from cryptography.hazmat.primitives import serialization

    data = cert_pem.encode("ascii") if isinstance(cert_pem, str) else cert_pem
    try:
        cert = x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise errors.OpPrereqError("Invalid X509 certificate: %s" % exc, errors.ECODE_INVAL) from None
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def sign_cert(cds: str, cert_pem: str | bytes, salt: str | None = None) -> str:
    """C{cert_pem} with Ganeti's signature header."""
    salt = salt or new_salt()
    pem = _sane_pem(cert_pem)
    return "%s: %s/%s\n\n%s" % (SIGNATURE_HEADER, salt, sha1_hmac(cds, pem, salt), pem)


def load_signed_cert(cds: str, signed: Any) -> str:
    """The PEM of a certificate signed with C{cds}.
    @raise errors.OpPrereqError: no signature, or a wrong one
    """
    if not isinstance(signed, str):
        raise errors.OpPrereqError("The X509 certificate must be a PEM string", errors.ECODE_INVAL)
    for line in signed.splitlines():
        if line.startswith("---"):
            break
        found = _SIGNATURE_RE.match(line.strip())
        if found:
            pem = _sane_pem(signed[signed.index("-----BEGIN"):] if "-----BEGIN" in signed else signed)
            if not verify_hmac(cds, pem, found.group("sign"), found.group("salt")):
                raise errors.OpPrereqError("X509 certificate signature is invalid", errors.ECODE_INVAL)
            return pem
    raise errors.OpPrereqError("X509 certificate signature is missing", errors.ECODE_INVAL)


def disk_info(cds: str, salt: str, index: int, host: str, port: int, magic: str) -> list[Any]:
    return [host, port, magic, sha1_hmac(cds, "%s:%s:%s:%s" % (index, host, port, magic), salt), salt]


def check_disk_info(cds: str, index: int, value: Any) -> tuple[str, int, str]:
    """C{(host, port, magic)} of a destination disk.
    @raise errors.OpPrereqError: malformed, or a wrong HMAC
    """
    try:
        host, port, magic, digest, salt = value
    except (TypeError, ValueError) as exc:
        raise errors.OpPrereqError("Invalid data for disk %d: %s" % (index, exc), errors.ECODE_INVAL) from None
    if not (host and port and magic):
        raise errors.OpPrereqError("Missing destination host, port or magic for disk %d" % index,
                                   errors.ECODE_INVAL)
    if not verify_hmac(cds, "%s:%s:%s:%s" % (index, host, port, magic), digest, salt):
        raise errors.OpPrereqError("HMAC is wrong for disk %d" % index, errors.ECODE_INVAL)
    if not isinstance(port, int) or isinstance(port, bool):
        raise errors.OpPrereqError("Invalid port for disk %d" % index, errors.ECODE_INVAL)
    return str(host), port, str(magic)
