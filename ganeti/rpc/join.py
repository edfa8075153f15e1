"""Joining a node to the cluster with a one-time token (see ganeti-noded(8)).

A node that is not in a cluster yet runs C{ganeti-noded --join-token
TOKEN}: it serves TLS with a throw-away self-signed certificate and answers
only C{POST /node_join}.  Neither end can authenticate the other with a
certificate, so both prove that they know the token, bound to that very TLS
connection:

    ekm          = export_keying_material(b"EXPORTER-ganeti-node-join", 32)
    k            = HKDF-SHA256(ikm=token, salt=ekm, info=b"ganeti-node-join", 32)
    client_proof = HMAC-SHA256(k, b"client")
    server_proof = HMAC-SHA256(k, b"server")

The master sends C{{"proof": hex(client_proof), "nonce": b64(12 bytes),
"payload": b64(AES-GCM(k).encrypt(nonce, json, b"ganeti-node-join"))}},
the JSON holding C{server_pem}, C{client_pem}, C{ssconf}, C{node_name},
C{address} and C{cluster_name}; the node answers C{{"proof":
hex(server_proof)}} once it has written them.  A proof relayed to another
connection is worthless (another C{ekm}), and a man in the middle who does
not know the token can neither produce the client's proof nor read the
payload.

This module holds both ends' primitives and the master's side,
L{join_node} (blocking: pyOpenSSL over a plain socket, for a thread) and
L{join_node_async}.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import os
import socket
import struct
from typing import TYPE_CHECKING, Any, Mapping

from twisted.internet.interfaces import IReactorThreads

from ganeti import crypto, errors, httpresponse, leanimports, ssconf
from ganeti.paths import Paths
from ganeti.rpc import wire

if TYPE_CHECKING:
    from OpenSSL import SSL

#: TLS exporter label (RFC 5705 / RFC 8446 section 7.5).
EXPORTER_LABEL = b"EXPORTER-ganeti-node-join"
#: Bytes of keying material exported from the TLS connection.
EKM_LENGTH = 32
#: HKDF info, and the additional data of the AES-GCM payload.
INFO = b"ganeti-node-join"
#: Shortest join token accepted.
MIN_TOKEN_LENGTH = 16
#: Bytes of the AES-GCM nonce.
NONCE_BYTES = 12
#: The procedure (URL path) of a join.
PROCEDURE = "node_join"
#: Keys the encrypted payload must hold.
PAYLOAD_KEYS = ("server_pem", "client_pem", "ssconf", "node_name", "address", "cluster_name")


class JoinError(Exception):
    """A join request or answer is malformed or does not authenticate."""


class BadProof(JoinError):
    """The peer's proof does not match: it does not know the token."""


# --- primitives (both ends) --------------------------------------------------------


def check_token(token: str) -> str:
    """The token, surrounding whitespace removed; at least L{MIN_TOKEN_LENGTH} characters.

    @raise ValueError: too short
    """
    token = token.strip()
    if len(token) < MIN_TOKEN_LENGTH:
        raise ValueError("a join token must have at least %d characters" % MIN_TOKEN_LENGTH)
    return token


def generate_token() -> str:
    """A fresh random join token (32 URL-safe characters)."""
    return base64.urlsafe_b64encode(os.urandom(24)).decode("ascii")


def export_keying_material(connection: SSL.Connection) -> bytes:
    """The C{ekm} of a TLS connection whose handshake is done."""
    return connection.export_keying_material(EXPORTER_LABEL, EKM_LENGTH)


def openssl() -> Any:
    """pyOpenSSL's C{SSL}, for the join's TLS (the standard library's C{ssl} exports no keying material);
    kept out of the daemons until a join needs it (L{ganeti.leanimports.keep_out_pyopenssl})."""
    leanimports.allow_pyopenssl()
    from OpenSSL import SSL

    return SSL


def derive_key(token: str, ekm: bytes) -> bytes:
    """C{k}: HKDF-SHA256 of the token, salted with the connection's C{ekm}."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=ekm, info=INFO).derive(token.encode("utf-8"))


def client_proof(key: bytes) -> bytes:
    return hmac.new(key, b"client", "sha256").digest()


def server_proof(key: bytes) -> bytes:
    return hmac.new(key, b"server", "sha256").digest()


def check_proof(expected: bytes, proof: Any) -> None:
    """Compare a hex proof in constant time.

    @raise BadProof: missing, malformed or wrong
    """
    try:
        given = bytes.fromhex(proof) if isinstance(proof, str) else b""
    except ValueError:
        given = b""
    if not hmac.compare_digest(given, expected):
        raise BadProof("wrong proof")


def seal_request(key: bytes, payload: Mapping[str, Any], nonce: bytes | None = None) -> dict[str, str]:
    """The master's request body for C{payload}, under C{key}."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    data = json.dumps(payload, sort_keys=True).encode("utf-8")
    sealed = AESGCM(key).encrypt(nonce, data, INFO)
    return {
        "proof": client_proof(key).hex(),
        "nonce": base64.b64encode(nonce).decode("ascii"),
        "payload": base64.b64encode(sealed).decode("ascii"),
    }


def verify_request_proof(key: bytes, body: Any) -> None:
    """@raise BadProof: the body's proof is not the client's proof under C{key}
    @raise JoinError: the body is not an object"""
    if not isinstance(body, dict):
        raise JoinError("the join request must be a JSON object")
    check_proof(client_proof(key), body.get("proof"))


def open_request(key: bytes, body: Any) -> dict[str, Any]:
    """Check the proof of a request body and decrypt its payload.

    @return: the payload, its keys and types checked
    @raise BadProof: wrong proof (the sender does not know the token)
    @raise JoinError: anything else wrong (malformed, tampered with)
    """
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    verify_request_proof(key, body)
    try:
        nonce = base64.b64decode(body["nonce"], validate=True)
        sealed = base64.b64decode(body["payload"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise JoinError("malformed join request: %s" % e) from None
    if len(nonce) != NONCE_BYTES:
        raise JoinError("malformed join request: the nonce must have %d bytes" % NONCE_BYTES)
    try:
        data = AESGCM(key).decrypt(nonce, sealed, INFO)
    except InvalidTag:
        raise JoinError("the join payload does not authenticate (tampered with?)") from None
    try:
        payload = json.loads(data)
    except ValueError as e:
        raise JoinError("the join payload is not JSON: %s" % e) from None
    return check_payload(payload)


def check_payload(payload: Any) -> dict[str, Any]:
    """@raise JoinError: a key is missing or of the wrong type"""
    if not isinstance(payload, dict):
        raise JoinError("the join payload must be a JSON object")
    missing = [k for k in PAYLOAD_KEYS if k not in payload]
    if missing:
        raise JoinError("the join payload lacks %s" % ", ".join(missing))
    for name in PAYLOAD_KEYS:
        if name != "ssconf" and not isinstance(payload[name], str):
            raise JoinError("%s in the join payload must be a string" % name)
    values = payload["ssconf"]
    if not isinstance(values, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(line, str) for line in v)
        for k, v in values.items()
    ):
        raise JoinError("ssconf in the join payload must map keys to lists of lines")
    if not payload["node_name"] or not payload["address"]:
        raise JoinError("node_name and address in the join payload must not be empty")
    return payload


# --- the master's side ---------------------------------------------------------------


def _ssconf_lines(values: Mapping[str, Any]) -> dict[str, list[str]]:
    return {
        key: (list(value) if not isinstance(value, str) else (value.split("\n") if value else []))
        for key, value in values.items()
    }


def build_payload(
    paths: Paths,
    address: str,
    node_name: str,
    ssconf_values: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the master sends: its cluster certificate, a client certificate
    for the new node signed by it, and the ssconf values (default: the
    master's ssconf files)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        key_pem, cert_pem = crypto.load_pem_file(paths.server_pem)
        values = ssconf.read_values(paths) if ssconf_values is None else ssconf_values
    except errors.ConfigurationError as e:
        raise errors.OpExecError("Cannot join node %s: %s" % (node_name, e)) from e
    client_key, client_cert = crypto.generate_key_and_cert(node_name, signer=(key_pem, cert_pem))
    lines = _ssconf_lines(values)
    cluster_name = lines.get("cluster_name", [""])[0] if lines.get("cluster_name") else ""
    if not cluster_name:
        names = x509.load_pem_x509_certificate(cert_pem).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        cluster_name = str(names[0].value) if names else ""
    if not key_pem.endswith(b"\n"):
        key_pem += b"\n"
    if not client_key.endswith(b"\n"):
        client_key += b"\n"
    return {
        "server_pem": (key_pem + cert_pem).decode("ascii"),
        "client_pem": (client_key + client_cert).decode("ascii"),
        "ssconf": lines,
        "node_name": node_name,
        "address": address,
        "cluster_name": cluster_name,
    }


def _client_context() -> Any:
    # No certificate check: the node's certificate is throw-away; the
    # node proves itself by the token proof bound to this connection.
    ossl = openssl()
    ctx = ossl.Context(ossl.TLS_METHOD)
    ctx.set_min_proto_version(ossl.TLS1_2_VERSION)
    ctx.set_options(ossl.OP_NO_COMPRESSION | ossl.OP_NO_TICKET)
    ctx.set_verify(ossl.VERIFY_NONE, lambda *_: True)
    return ctx


def _set_timeouts(sock: socket.socket, timeout: float) -> None:
    # pyOpenSSL wants a blocking socket; time out through the kernel
    sock.settimeout(None)
    seconds = int(timeout)
    timeval = struct.pack("ll", seconds, int((timeout - seconds) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def _read_all(conn: SSL.Connection, limit: int) -> bytes:
    ossl = openssl()
    chunks = []
    size = 0
    while True:
        try:
            chunk = conn.recv(65536)
        except ossl.ZeroReturnError:
            break
        except ossl.SysCallError as e:
            if e.args and e.args[0] == -1:  # EOF without close_notify
                break
            raise
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise JoinError("the node's answer is longer than %d bytes" % limit)
    return b"".join(chunks)


def parse_http_response(raw: bytes) -> tuple[int, bytes]:
    """C{(status, body)} of an HTTP/1.1 answer read until EOF (L{ganeti.httpresponse})."""
    try:
        return httpresponse.parse(raw)
    except ValueError as e:
        raise JoinError("the node's answer is not HTTP: %s" % e) from None


def _post(conn: SSL.Connection, host: str, port: int, body: bytes) -> tuple[int, bytes]:
    netloc = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
    request = (
        "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\nConnection: close\r\n\r\n" % (PROCEDURE, netloc, len(body))
    ).encode("ascii") + body
    conn.sendall(request)
    return parse_http_response(_read_all(conn, wire.MAX_BODY))


def _error_message(body: bytes) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")[:200]
    if isinstance(value, dict) and "error" in value:
        return str(value["error"])
    return str(value)[:200]


def join_node(
    paths: Paths,
    address: str,
    token: str,
    node_name: str,
    *,
    port: int = wire.DEFAULT_PORT,
    timeout: float = 30,
    ssconf_values: Mapping[str, Any] | None = None,
) -> None:
    """Join the node at C{address} (running C{ganeti-noded --join-token}) to
    this master's cluster.  Blocking: run it in a thread.

    @param paths: the master's root (its C{server.pem} and ssconf files)
    @param token: the token the node was started with
    @param node_name: the node's name (CN of its new client certificate)
    @param ssconf_values: C{{key: [lines] or text}} to send instead of the
        master's ssconf files (e.g. values that already include the node)
    @raise errors.OpExecError: unreachable node, refused token, a node that
        cannot prove it knows the token, or any other failure
    """
    ossl = openssl()
    where = "node %s (%s:%d)" % (node_name, address, port)
    try:
        token = check_token(token)
    except ValueError as e:
        raise errors.OpExecError("Cannot join %s: %s" % (where, e)) from None
    payload = build_payload(paths, address, node_name, ssconf_values)
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as e:
        raise errors.OpExecError("Cannot join %s: node unreachable (%s)" % (where, e.strerror or e)) from None
    try:
        _set_timeouts(sock, timeout)
        conn = ossl.Connection(_client_context(), sock)
        conn.set_connect_state()
        conn.do_handshake()
        key = derive_key(token, export_keying_material(conn))
        body = json.dumps(seal_request(key, payload)).encode("utf-8")
        status, answer = _post(conn, address, port, body)
        try:
            conn.shutdown()
        except ossl.Error:
            pass
    except (ossl.Error, OSError) as e:
        raise errors.OpExecError("Cannot join %s: TLS or connection failure: %s" % (where, e or type(e).__name__)) from None
    except JoinError as e:
        raise errors.OpExecError("Cannot join %s: %s" % (where, e)) from None
    finally:
        sock.close()
    if status == 403:
        raise errors.OpExecError(
            "Cannot join %s: the node refused the join token (%s)" % (where, _error_message(answer))
        )
    if status != 200:
        raise errors.OpExecError("Cannot join %s: the node answered %d: %s" % (where, status, _error_message(answer)))
    try:
        value = json.loads(answer)
        check_proof(server_proof(key), value.get("proof") if isinstance(value, dict) else None)
    except (ValueError, BadProof):
        raise errors.OpExecError("Cannot join %s: the node could not prove it knows the token" % where) from None


async def join_node_async(
    reactor: IReactorThreads,
    paths: Paths,
    address: str,
    token: str,
    node_name: str,
    *,
    port: int = wire.DEFAULT_PORT,
    timeout: float = 30,
    ssconf_values: Mapping[str, Any] | None = None,
) -> None:
    """L{join_node} in a thread of C{reactor}'s pool."""
    from twisted.internet.threads import deferToThreadPool

    await deferToThreadPool(
        reactor, reactor.getThreadPool(), join_node, paths, address, token, node_name,
        port=port, timeout=timeout, ssconf_values=ssconf_values,
    )
