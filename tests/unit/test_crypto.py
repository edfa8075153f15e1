"""Tests for L{ganeti.crypto}."""

from __future__ import annotations

import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from ganeti import crypto, errors
from ganeti.paths import Paths

# Key generation takes a while: make each kind once per module.


@pytest.fixture(scope="module")
def cluster() -> tuple[bytes, bytes]:
    return crypto.generate_key_and_cert("cluster.example.test")


@pytest.fixture(scope="module")
def client(cluster: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    return crypto.generate_key_and_cert("node1.example.test", signer=cluster, days=30)


@pytest.fixture(scope="module")
def bootstrapped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Paths, dict[str, str]]:
    paths = Paths(str(tmp_path_factory.mktemp("node")))
    return paths, crypto.bootstrap_secrets(paths, "cluster.example.test", node_name="node1.example.test")


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# --- certificates ------------------------------------------------------------------------


def test_self_signed_cluster_cert(cluster: tuple[bytes, bytes]) -> None:
    key_pem, cert_pem = cluster
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == 2048
    cert = _cert(cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "cluster.example.test"
    assert cert.issuer == cert.subject
    public = cert.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    assert public.public_numbers() == key.public_key().public_numbers()
    cert.verify_directly_issued_by(cert)  # raises if the self-signature is bad
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["cluster.example.test"]
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert 1825 <= lifetime.days <= 1826


def test_serial_numbers_are_random(cluster: tuple[bytes, bytes], client: tuple[bytes, bytes]) -> None:
    assert _cert(cluster[1]).serial_number != _cert(client[1]).serial_number
    assert _cert(cluster[1]).serial_number > 2**64


def test_client_cert_signed_by_cluster(cluster: tuple[bytes, bytes], client: tuple[bytes, bytes]) -> None:
    issuer, cert = _cert(cluster[1]), _cert(client[1])
    assert cert.issuer == issuer.subject
    assert cert.subject != issuer.subject
    public = issuer.public_key()
    assert isinstance(public, rsa.RSAPublicKey)
    assert cert.signature_hash_algorithm is not None
    hash_algorithm = cert.signature_hash_algorithm
    public.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), hash_algorithm)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert crypto.is_issued_by(client[1], cluster[1])
    assert not crypto.is_issued_by(cluster[1], client[1])
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days in (30, 31)


def test_client_cert_not_signed_by_another_key(client: tuple[bytes, bytes]) -> None:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    cert = _cert(client[1])
    with pytest.raises(InvalidSignature):
        other_key.public_key().verify(
            cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), hashes.SHA256()
        )


def test_signer_as_objects(cluster: tuple[bytes, bytes]) -> None:
    key = serialization.load_pem_private_key(cluster[0], password=None)
    _key_pem, cert_pem = crypto.generate_key_and_cert("n2", signer=(key, _cert(cluster[1])))
    assert crypto.is_issued_by(cert_pem, cluster[1])


def test_openssl_verifies_the_chain(
    cluster: tuple[bytes, bytes], client: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """OpenSSL (strict mode) accepts the cluster cert as CA of the client cert."""
    store = x509.verification.PolicyBuilder().store(x509.verification.Store([_cert(cluster[1])]))
    verifier = store.build_client_verifier()
    verifier.verify(_cert(client[1]), [])
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(cluster[1])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_verify_locations(str(ca_file))
    combined = tmp_path / "server.pem"
    combined.write_bytes(cluster[0] + cluster[1])
    context.load_cert_chain(str(combined))


def test_fingerprints_match_cryptography(cluster: tuple[bytes, bytes]) -> None:
    cert = _cert(cluster[1])
    sha1 = crypto.fingerprint(cluster[1])
    assert sha1 == crypto.fingerprint(cluster[1], "sha1")
    assert sha1 == cert.fingerprint(hashes.SHA1()).hex(":").upper()
    assert len(sha1) == 59 and sha1.count(":") == 19 and sha1 == sha1.upper()
    sha256 = crypto.fingerprint(cluster[1], algorithm="sha256")
    assert sha256 == ":".join("%02X" % b for b in cert.fingerprint(hashes.SHA256()))
    with pytest.raises(ValueError):
        crypto.fingerprint(cluster[1], "md5")


# --- PEM files -----------------------------------------------------------------------------


def test_pem_file_round_trip(cluster: tuple[bytes, bytes], tmp_path: Path) -> None:
    path = str(tmp_path / "server.pem")
    crypto.write_pem_file(path, *cluster)
    assert _mode(path) == 0o440
    data = Path(path).read_bytes()
    assert data.index(b"PRIVATE KEY") < data.index(b"BEGIN CERTIFICATE")
    assert crypto.load_pem_file(path) == cluster
    crypto.write_pem_file(path, *cluster, mode=0o400)
    assert _mode(path) == 0o400
    assert [p.name for p in tmp_path.iterdir()] == ["server.pem"]


def test_load_pem_file_cert_first(cluster: tuple[bytes, bytes], tmp_path: Path) -> None:
    path = tmp_path / "odd.pem"
    path.write_bytes(cluster[1] + cluster[0])
    assert crypto.load_pem_file(str(path)) == cluster


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "Can't read"),
        (b"", "lacks a private key and a certificate"),
        (b"garbage\n", "lacks"),
        ("key", "lacks a certificate"),
        ("cert", "lacks a private key"),
        ("badkey", "bad private key"),
        ("badcert", "bad certificate"),
        ("mismatch", "does not match"),
    ],
)
def test_load_pem_file_errors(
    cluster: tuple[bytes, bytes], client: tuple[bytes, bytes], tmp_path: Path, content: object, message: str
) -> None:
    key_pem, cert_pem = cluster
    body = b"QUJD\n"
    samples = {
        "key": key_pem,
        "cert": cert_pem,
        "badkey": b"-----BEGIN PRIVATE KEY-----\n" + body + b"-----END PRIVATE KEY-----\n" + cert_pem,
        "badcert": key_pem + b"-----BEGIN CERTIFICATE-----\n" + body + b"-----END CERTIFICATE-----\n",
        "mismatch": client[0] + cert_pem,
    }
    path = tmp_path / "x.pem"
    if content is not None:
        path.write_bytes(samples[content] if isinstance(content, str) else content)
    with pytest.raises(errors.ConfigurationError, match=message):
        crypto.load_pem_file(str(path))


# --- secrets -------------------------------------------------------------------------------


@pytest.mark.parametrize("generate", [crypto.generate_hmac_key, crypto.generate_domain_secret])
def test_generated_secrets(generate: object) -> None:
    first, second = generate(), generate()
    assert isinstance(first, bytes)
    assert len(first) == 40
    assert first == first.lower()
    int(first, 16)
    assert first != second


def test_hmac_key_file(tmp_path: Path) -> None:
    path = str(tmp_path / "hmac.key")
    key = crypto.generate_hmac_key()
    crypto.write_hmac_key(path, key)
    assert Path(path).read_bytes() == key + b"\n"
    assert _mode(path) == 0o400
    assert crypto.load_hmac_key(path) == key


def test_domain_secret_file(tmp_path: Path) -> None:
    path = str(tmp_path / "cluster-domain-secret")
    secret = crypto.generate_domain_secret()
    crypto.write_domain_secret(path, secret.decode())
    assert Path(path).read_bytes() == secret + b"\n"
    assert _mode(path) == 0o400
    assert crypto.load_domain_secret(path) == secret


def test_hmac_key_whitespace_stripped(tmp_path: Path) -> None:
    path = tmp_path / "hmac.key"
    path.write_bytes(b"  abc123\r\n\n")
    assert crypto.load_hmac_key(str(path)) == b"abc123"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "Can't read"),
        (b"", "empty"),
        (b" \n\n", "empty"),
        (b"ab cd\n", "printable"),
        (b"\xff\xfe\n", "printable"),
    ],
)
def test_hmac_key_errors(tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "hmac.key"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(errors.ConfigurationError, match=message):
        crypto.load_hmac_key(str(path))


def test_write_empty_hmac_key_refused(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigurationError):
        crypto.write_hmac_key(str(tmp_path / "hmac.key"), b"")
    assert list(tmp_path.iterdir()) == []


# --- bootstrap ---------------------------------------------------------------------------------


def test_bootstrap_creates_everything(bootstrapped: tuple[Paths, dict[str, str]]) -> None:
    paths, created = bootstrapped
    assert created == {
        "server.pem": paths.server_pem,
        "client.pem": paths.client_pem,
        "rapi.pem": paths.rapi_pem,
        "hmac.key": paths.hmac_key,
        "cluster-domain-secret": paths.cluster_domain_secret,
    }
    for name in ("server.pem", "client.pem", "rapi.pem"):
        assert _mode(created[name]) == 0o440
    for name in ("hmac.key", "cluster-domain-secret"):
        assert _mode(created[name]) == 0o400
    assert sorted(os.listdir(paths.data_dir)) == sorted(created)
    _skey, server_cert = crypto.load_pem_file(paths.server_pem)
    _ckey, client_cert = crypto.load_pem_file(paths.client_pem)
    _rkey, rapi_cert = crypto.load_pem_file(paths.rapi_pem)
    assert crypto.is_issued_by(client_cert, server_cert)
    assert crypto.is_issued_by(rapi_cert, rapi_cert)
    assert _cert(server_cert).subject.rfc4514_string() == "CN=cluster.example.test"
    assert _cert(client_cert).subject.rfc4514_string() == "CN=node1.example.test"
    assert len(crypto.load_hmac_key(paths.hmac_key)) == 40
    assert crypto.load_hmac_key(paths.hmac_key) != crypto.load_domain_secret(paths.cluster_domain_secret)


def test_cluster_cert_digest(bootstrapped: tuple[Paths, dict[str, str]]) -> None:
    paths, _created = bootstrapped
    _key, client_cert = crypto.load_pem_file(paths.client_pem)
    digest = crypto.cluster_cert_digest(paths)
    assert digest == _cert(client_cert).fingerprint(hashes.SHA1()).hex(":").upper()


def test_cluster_cert_digest_missing(tmp_path: Path) -> None:
    with pytest.raises(errors.ConfigurationError, match="client.pem"):
        crypto.cluster_cert_digest(Paths(str(tmp_path)))


def _snapshot(paths: Paths) -> dict[str, bytes]:
    return {name: Path(paths.data_dir, name).read_bytes() for name in os.listdir(paths.data_dir)}


def test_bootstrap_keeps_existing_files(bootstrapped: tuple[Paths, dict[str, str]]) -> None:
    paths, _created = bootstrapped
    before = _snapshot(paths)
    assert crypto.bootstrap_secrets(paths, "cluster.example.test") == {}
    assert _snapshot(paths) == before


def test_bootstrap_fills_gaps(tmp_path: Path, cluster: tuple[bytes, bytes]) -> None:
    paths = Paths(str(tmp_path))
    os.makedirs(paths.data_dir)
    crypto.write_pem_file(paths.server_pem, *cluster)
    crypto.write_hmac_key(paths.hmac_key, b"0" * 40)
    created = crypto.bootstrap_secrets(paths, "cluster.example.test", node_name="n1")
    assert sorted(created) == ["client.pem", "cluster-domain-secret", "rapi.pem"]
    assert crypto.load_pem_file(paths.server_pem) == cluster
    assert crypto.load_hmac_key(paths.hmac_key) == b"0" * 40
    assert crypto.is_issued_by(crypto.load_pem_file(paths.client_pem)[1], cluster[1])


def test_new_server_cert_reissues_client_cert(tmp_path: Path, client: tuple[bytes, bytes]) -> None:
    """An existing client.pem signed by a lost cluster key is replaced."""
    paths = Paths(str(tmp_path))
    os.makedirs(paths.data_dir)
    crypto.write_pem_file(paths.client_pem, *client)
    created = crypto.bootstrap_secrets(paths, "cluster.example.test", node_name="n1")
    assert "client.pem" in created
    server_cert = crypto.load_pem_file(paths.server_pem)[1]
    assert crypto.is_issued_by(crypto.load_pem_file(paths.client_pem)[1], server_cert)


def test_bootstrap_overwrite(bootstrapped: tuple[Paths, dict[str, str]]) -> None:
    paths, _created = bootstrapped
    before = _snapshot(paths)
    created = crypto.bootstrap_secrets(paths, "cluster.example.test", overwrite=True, node_name="n1")
    assert sorted(created) == sorted(before)
    after = _snapshot(paths)
    assert all(after[name] != before[name] for name in before)
    client_cert = crypto.load_pem_file(paths.client_pem)[1]
    assert crypto.is_issued_by(client_cert, crypto.load_pem_file(paths.server_pem)[1])
    assert [n for n in os.listdir(paths.data_dir) if n.startswith(".")] == []
