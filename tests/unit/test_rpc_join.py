"""The node-join protocol's primitives (ganeti.rpc.join) and the node's install step."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import shutil
import tempfile

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from OpenSSL import SSL

from ganeti import crypto, daemons, errors, ssconf
from ganeti.noded import join as noded_join
from ganeti.paths import Paths
from ganeti.rpc import join

TOKEN = "0123456789abcdef-token"
EKM = bytes(range(32))


@pytest.fixture
def root():
    paths = Paths(tempfile.mkdtemp(prefix="gntu", dir="/tmp"))
    yield paths
    shutil.rmtree(paths.root, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster_pems():
    server = crypto.generate_key_and_cert("cluster.test")
    client = crypto.generate_key_and_cert("node2.test", signer=server)
    return server, client


def payload(server, client, **changes):
    value = {
        "server_pem": (server[0] + server[1]).decode(),
        "client_pem": (client[0] + client[1]).decode(),
        "ssconf": {"cluster_name": ["cluster.test"], "node_list": ["node1.test", "node2.test"]},
        "node_name": "node2.test",
        "address": "127.0.1.2",
        "cluster_name": "cluster.test",
    }
    value.update(changes)
    return value


def test_key_and_proofs_follow_the_specification():
    key = join.derive_key(TOKEN, EKM)
    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=EKM, info=b"ganeti-node-join").derive(TOKEN.encode())
    assert key == expected
    assert join.client_proof(key) == hmac.new(key, b"client", hashlib.sha256).digest()
    assert join.server_proof(key) == hmac.new(key, b"server", hashlib.sha256).digest()
    assert join.client_proof(key) != join.server_proof(key)
    # another connection (ekm) or another token: another key
    assert join.derive_key(TOKEN, bytes(32)) != key
    assert join.derive_key(TOKEN + "x", EKM) != key


def test_seal_and_open_round_trip(cluster_pems):
    key = join.derive_key(TOKEN, EKM)
    value = payload(*cluster_pems)
    body = join.seal_request(key, value)
    assert set(body) == {"proof", "nonce", "payload"}
    assert len(base64.b64decode(body["nonce"])) == 12
    assert bytes.fromhex(body["proof"]) == join.client_proof(key)
    assert join.open_request(key, body) == value


def test_wrong_token_is_a_bad_proof(cluster_pems):
    body = join.seal_request(join.derive_key("some-other-token-value", EKM), payload(*cluster_pems))
    with pytest.raises(join.BadProof):
        join.open_request(join.derive_key(TOKEN, EKM), body)
    for proof in (None, "", "zz", "00" * 32, 42):
        with pytest.raises(join.BadProof):
            join.verify_request_proof(join.derive_key(TOKEN, EKM), dict(body, proof=proof))


def test_tampered_payload_is_refused(cluster_pems):
    key = join.derive_key(TOKEN, EKM)
    body = join.seal_request(key, payload(*cluster_pems))
    sealed = bytearray(base64.b64decode(body["payload"]))
    sealed[10] ^= 1
    with pytest.raises(join.JoinError, match="does not authenticate"):
        join.open_request(key, dict(body, payload=base64.b64encode(bytes(sealed)).decode()))
    with pytest.raises(join.JoinError, match="does not authenticate"):
        join.open_request(key, dict(body, nonce=base64.b64encode(os.urandom(12)).decode()))
    with pytest.raises(join.JoinError, match="nonce"):
        join.open_request(key, dict(body, nonce=base64.b64encode(b"short").decode()))
    with pytest.raises(join.JoinError, match="malformed"):
        join.open_request(key, dict(body, payload="!!not base64!!"))
    with pytest.raises(join.JoinError):
        join.open_request(key, [body])


def test_payload_keys_are_checked(cluster_pems):
    key = join.derive_key(TOKEN, EKM)
    value = payload(*cluster_pems)
    del value["address"]
    with pytest.raises(join.JoinError, match="lacks address"):
        join.open_request(key, join.seal_request(key, value))
    with pytest.raises(join.JoinError, match="ssconf"):
        join.open_request(key, join.seal_request(key, payload(*cluster_pems, ssconf={"node_list": "a"})))


def test_tokens():
    assert join.check_token("  %s\n" % TOKEN) == TOKEN
    with pytest.raises(ValueError, match="at least 16"):
        join.check_token("fifteen-chars-x")
    assert len(join.generate_token()) >= join.MIN_TOKEN_LENGTH
    assert join.generate_token() != join.generate_token()


def test_both_ends_of_a_tls_connection_derive_the_same_key():
    server_ctx = noded_join.UnjoinedContextFactory().getContext()
    client_ctx = join._client_context()
    server, client = SSL.Connection(server_ctx, None), SSL.Connection(client_ctx, None)
    server.set_accept_state()
    client.set_connect_state()
    for _ in range(20):
        for a, b in ((client, server), (server, client)):
            try:
                a.do_handshake()
            except SSL.WantReadError:
                pass
            try:
                data = a.bio_read(65536)
            except SSL.WantReadError:
                data = b""
            if data:
                b.bio_write(data)
    client.do_handshake()
    server.do_handshake()
    ekm = join.export_keying_material(client)
    assert len(ekm) == 32 and ekm == join.export_keying_material(server)
    assert join.derive_key(TOKEN, ekm) == join.derive_key(TOKEN, join.export_keying_material(server))


def test_parse_http_response():
    assert join.parse_http_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}junk") == (200, b"{}")
    chunked = b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    assert join.parse_http_response(chunked) == (403, b"abcde")
    with pytest.raises(join.JoinError):
        join.parse_http_response(b"garbage")


def test_install_writes_everything(root, cluster_pems):
    noded_join.install(root, payload(*cluster_pems))
    assert os.stat(root.server_pem).st_mode & 0o777 == 0o440
    assert crypto.load_pem_file(root.server_pem) == cluster_pems[0]
    assert crypto.load_pem_file(root.client_pem) == cluster_pems[1]
    assert ssconf.SimpleStore(root).get_node_list() == ["node1.test", "node2.test"]
    assert daemons.read_node_identity(root) == {"name": "node2.test", "address": "127.0.1.2"}


def test_install_checks_before_writing(root, cluster_pems):
    server, client = cluster_pems
    foreign = crypto.generate_key_and_cert("node2.test")
    bad = [
        payload(server, foreign),  # client certificate not signed by the cluster key
        payload(server, client, ssconf={"no_such_key": ["x"]}),
        payload(server, client, server_pem=server[1].decode()),  # no key
        payload(server, client, server_pem=(foreign[0] + server[1]).decode()),  # key of another cert
    ]
    for value in bad:
        with pytest.raises(join.JoinError):
            noded_join.install(root, value)
    assert not os.path.exists(root.data_dir) or os.listdir(root.data_dir) == []


def test_join_node_refuses_a_short_token_and_a_master_without_certificate(root):
    with pytest.raises(errors.OpExecError, match="at least 16"):
        join.join_node(root, "127.0.0.1", "short", "node2.test", port=1)
    with pytest.raises(errors.OpExecError, match="Cannot join node node2.test"):
        join.join_node(root, "127.0.0.1", TOKEN, "node2.test", port=1)


def test_build_payload_from_the_master_files(root):
    crypto.bootstrap_secrets(root, "cluster.test", node_name="node1.test")
    value = join.build_payload(root, "127.0.1.2", "node2.test")
    assert value["cluster_name"] == "cluster.test" and value["ssconf"] == {}
    ssconf.write_files(root, {"cluster_name": ["c2.test"], "node_list": ["a", "b"]})
    value = join.check_payload(join.build_payload(root, "127.0.1.2", "node2.test"))
    assert value["cluster_name"] == "c2.test"
    assert value["ssconf"]["node_list"] == ["a", "b"]
    _key, client_cert = noded_join._parse_pem(value["client_pem"], "client_pem")
    assert crypto.is_issued_by(client_cert, crypto.load_pem_file(root.server_pem)[1])


class _FakePort:
    def __init__(self, factory):
        self.factory = factory
        self.stopped = False

    def stopListening(self):
        from twisted.internet import defer

        self.stopped = True
        return defer.succeed(None)


class _FakeEndpoint:
    def __init__(self):
        self.ports = []

    def listen(self, factory):
        from twisted.internet import defer

        self.ports.append(_FakePort(factory))
        return defer.succeed(self.ports[-1])


def test_join_service_burns_the_token_after_five_wrong_proofs(root):
    token_file = os.path.join(root.root, "token")
    with open(token_file, "w") as handle:
        handle.write(TOKEN)
    stopped = []
    service = noded_join.JoinService(root, _FakeEndpoint(), TOKEN, lambda: None, token_file=token_file,
                                     stop=lambda: stopped.append(True))
    service.startService()
    for n in range(1, noded_join.MAX_FAILURES):
        service.wrong_proof(("127.0.0.1", n))
        assert service.waiting and service.token == TOKEN and not stopped
    service.wrong_proof(("127.0.0.1", 99))
    assert not service.waiting and service.token == "" and stopped == [True]
    assert not os.path.exists(token_file)


def test_join_service_switches_listeners_in_process(root):
    from twisted.internet import defer

    endpoint = _FakeEndpoint()
    joined_factory = object()
    service = noded_join.JoinService(root, endpoint, TOKEN, lambda: joined_factory)
    service.startService()
    unjoined = endpoint.ports[0]
    d = defer.ensureDeferred(service.joined())
    assert d.called and unjoined.stopped
    assert [p.factory for p in endpoint.ports[1:]] == [joined_factory]
    assert not service.waiting and service.token == ""
    service.stopService()
    assert endpoint.ports[1].stopped
