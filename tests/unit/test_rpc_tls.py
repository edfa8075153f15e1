"""The TLS verification callbacks and the mutual-TLS policy, in memory (no sockets)."""

from __future__ import annotations

import os
import tempfile
import unittest

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL, crypto

from ganeti import crypto as gcrypto
from ganeti import ssconf
from ganeti.paths import Paths
from ganeti.rpc.tls import (
    AllowedClients,
    Credentials,
    PinnedPolicy,
    ReloadingCertificate,
    ReloadingPolicy,
    ReloadingServerContextFactory,
    ServerContextFactory,
    make_verify_callback,
    peer_fingerprint,
    trust_file,
)

CLUSTER = gcrypto.generate_key_and_cert("cluster.test")
OTHER = gcrypto.generate_key_and_cert("other.test")
NODE_CLIENT = gcrypto.generate_key_and_cert("node2.test", signer=CLUSTER)


def x509_of(cert_pem: bytes) -> crypto.X509:
    return crypto.X509.from_cryptography(x509.load_pem_x509_certificate(cert_pem))


def handshake(server: SSL.Context, client: SSL.Connection) -> tuple[bool, bool]:
    """Drive a handshake through memory BIOs; whether each side completed."""
    srv = SSL.Connection(server, None)
    srv.set_accept_state()
    done = {"client": False, "server": False}
    failed = False
    for _ in range(20):
        for name, conn in (("client", client), ("server", srv)):
            if done[name]:
                continue
            try:
                conn.do_handshake()
                done[name] = True
            except SSL.WantReadError:
                pass
            except SSL.Error:
                failed = True
        for src, dst in ((client, srv), (srv, client)):
            try:
                data = src.bio_read(65536)
                dst.bio_write(data)
            except SSL.WantReadError:
                pass
        if failed:
            break
    # TLS 1.3: the server checks the client's certificate after the client
    # believes it is done; an application read shows the alert.
    if done["client"] and not failed:
        try:
            srv.recv(1)
        except SSL.WantReadError:
            pass
        except SSL.Error:
            done["server"] = False
    return done["client"] and not failed, done["server"] and not failed


class VerifyCallbackTests(unittest.TestCase):
    def test_chain_failure_is_refused(self):
        verify = make_verify_callback(lambda: {peer_fingerprint(x509_of(CLUSTER[1]))})
        self.assertFalse(verify(None, x509_of(CLUSTER[1]), 20, 0, 0))

    def test_intermediate_depth_passes_when_chain_is_valid(self):
        verify = make_verify_callback(lambda: set())
        self.assertTrue(verify(None, x509_of(CLUSTER[1]), 0, 1, 1))

    def test_leaf_fingerprint_must_be_allowed(self):
        allowed = {gcrypto.fingerprint(CLUSTER[1])}
        verify = make_verify_callback(lambda: allowed)
        self.assertTrue(verify(None, x509_of(CLUSTER[1]), 0, 0, 1))
        self.assertFalse(verify(None, x509_of(OTHER[1]), 0, 0, 1))

    def test_allowed_is_asked_each_time(self):
        allowed: set[str] = set()
        verify = make_verify_callback(lambda: allowed)
        self.assertFalse(verify(None, x509_of(OTHER[1]), 0, 0, 1))
        allowed.add(gcrypto.fingerprint(OTHER[1]))
        self.assertTrue(verify(None, x509_of(OTHER[1]), 0, 0, 1))

    def test_peer_fingerprint_matches_ganeti_format(self):
        fp = peer_fingerprint(x509_of(CLUSTER[1]))
        self.assertEqual(fp, gcrypto.fingerprint(CLUSTER[1], "sha1"))
        self.assertRegex(fp, r"^([0-9A-F]{2}:){19}[0-9A-F]{2}$")
        self.assertEqual(peer_fingerprint(x509.load_pem_x509_certificate(CLUSTER[1])), fp)


class AllowedClientsTests(unittest.TestCase):
    def setUp(self):
        self.paths = Paths(tempfile.mkdtemp(prefix="gnttls"))
        self.addCleanup(__import__("shutil").rmtree, self.paths.root, True)
        self.cluster_fp = gcrypto.fingerprint(CLUSTER[1])

    def test_bootstrap_accepts_only_the_cluster_certificate(self):
        self.assertEqual(AllowedClients(self.paths, self.cluster_fp)(), {self.cluster_fp})

    def test_candidate_certificates_from_ssconf(self):
        allowed = AllowedClients(self.paths, self.cluster_fp)
        allowed()
        node_fp = gcrypto.fingerprint(NODE_CLIENT[1])
        ssconf.write_files(self.paths, {"master_candidates_certs": ["uuid-2=%s" % node_fp]})
        self.assertEqual(allowed(), {self.cluster_fp, node_fp})
        os.unlink(self.paths.ssconf("master_candidates_certs"))
        self.assertEqual(allowed(), {self.cluster_fp})

    def test_malformed_ssconf_is_ignored(self):
        ssconf.write_files(self.paths, {"master_candidates_certs": ["garbage"]})
        self.assertEqual(AllowedClients(self.paths, self.cluster_fp)(), {self.cluster_fp})


class MutualTLSTests(unittest.TestCase):
    """noded's context against the client policy, through memory BIOs."""

    def server(self, allowed=None) -> SSL.Context:
        creds = Credentials(CLUSTER[0], CLUSTER[1], CLUSTER[1])
        fps = allowed if allowed is not None else {creds.ca_fingerprint}
        return ServerContextFactory(creds, lambda: fps).getContext()

    def client(self, creds: Credentials, fingerprints=None) -> SSL.Connection:
        return PinnedPolicy(creds, fingerprints).creatorForNetloc(b"127.0.1.1", 1811).clientConnectionForTLS(None)

    def test_cluster_certificate_both_ways(self):
        self.assertEqual(handshake(self.server(), self.client(Credentials(CLUSTER[0], CLUSTER[1], CLUSTER[1]))), (True, True))

    def test_client_with_foreign_certificate_is_refused_by_the_server(self):
        # the client trusts the cluster, but presents a certificate of its own
        creds = Credentials(OTHER[0], OTHER[1], CLUSTER[1])
        _client_ok, server_ok = handshake(self.server(), self.client(creds, {gcrypto.fingerprint(CLUSTER[1])}))
        self.assertFalse(server_ok)

    def test_signed_but_unlisted_client_certificate_is_refused(self):
        creds = Credentials(NODE_CLIENT[0], NODE_CLIENT[1], CLUSTER[1])
        _c, server_ok = handshake(self.server(), self.client(creds))
        self.assertFalse(server_ok)
        fps = {gcrypto.fingerprint(CLUSTER[1]), gcrypto.fingerprint(NODE_CLIENT[1])}
        self.assertEqual(handshake(self.server(fps), self.client(creds)), (True, True))

    def test_listed_fingerprint_without_cluster_signature_is_refused(self):
        creds = Credentials(OTHER[0], OTHER[1], CLUSTER[1])
        fps = {gcrypto.fingerprint(CLUSTER[1]), gcrypto.fingerprint(OTHER[1])}
        _c, server_ok = handshake(self.server(fps), self.client(creds, {gcrypto.fingerprint(CLUSTER[1])}))
        self.assertFalse(server_ok)

    def test_client_refuses_a_server_of_another_cluster(self):
        creds = Credentials(OTHER[0], OTHER[1], OTHER[1])
        client_ok, _s = handshake(self.server(), self.client(creds))
        self.assertFalse(client_ok)


class RenewalTests(unittest.TestCase):
    """The contexts that follow server.pem and cluster-trust.pem (renew-crypto): the three rounds."""

    def setUp(self) -> None:
        self.a = Paths(tempfile.mkdtemp(prefix="tlsa"))
        self.b = Paths(tempfile.mkdtemp(prefix="tlsb"))
        for paths in (self.a, self.b):
            os.makedirs(paths.data_dir)
            gcrypto.write_pem_file(paths.server_pem, *CLUSTER, mode=0o600)
        self.new = gcrypto.generate_key_and_cert("cluster.test")

    def tearDown(self) -> None:
        import shutil

        for paths in (self.a, self.b):
            shutil.rmtree(paths.root)

    def write(self, paths: Paths, server: tuple[bytes, bytes] | None = None, trust: bytes | None = None) -> None:
        from ganeti import serializer

        if server is not None:
            gcrypto.write_pem_file(paths.server_pem, *server, mode=0o600)
        if trust is not None:
            serializer.write_file(trust_file(paths), trust)

    def works(self, server: ReloadingServerContextFactory, client: ReloadingPolicy) -> bool:
        conn = client.creatorForNetloc(b"x", 1).clientConnectionForTLS(None)
        return handshake(server.getContext(), conn) == (True, True)

    def test_a_renewal_never_breaks_a_handshake_and_retires_the_old_certificate(self):
        server, client = ReloadingServerContextFactory(self.a), ReloadingPolicy(self.b)
        self.assertTrue(self.works(server, client))
        # round 1: both trust the new certificate
        for paths in (self.a, self.b):
            self.write(paths, trust=self.new[1])
        self.assertTrue(self.works(server, client))
        # round 2, one node after the other: either may hold the new certificate
        self.write(self.a, server=self.new, trust=CLUSTER[1])
        self.assertTrue(self.works(server, client), "server new, client old")
        self.write(self.b, server=self.new, trust=CLUSTER[1])
        self.assertTrue(self.works(server, client), "both new")
        # round 3: the old certificate is refused
        for paths in (self.a, self.b):
            self.write(paths, trust=b"")
        self.assertTrue(self.works(server, client))
        old_client = PinnedPolicy(Credentials(CLUSTER[0], CLUSTER[1], CLUSTER[1]))
        conn = old_client.creatorForNetloc(b"x", 1).clientConnectionForTLS(None)
        self.assertFalse(handshake(server.getContext(), conn)[1], "the old certificate is refused")

    def test_without_the_trust_round_a_switch_breaks(self):
        server, client = ReloadingServerContextFactory(self.a), ReloadingPolicy(self.b)
        self.write(self.a, server=self.new)
        self.assertFalse(self.works(server, client))

    def test_an_unreadable_file_keeps_the_previous_certificate(self):
        server = ReloadingServerContextFactory(self.a)
        before = server.getContext()
        with open(self.a.server_pem, "wb") as handle:
            handle.write(b"garbage")
        self.assertIs(server.getContext(), before)

    def test_the_files_are_read_and_the_client_context_built_once_per_change(self):
        """A job process makes a new RPC client per job step: the certificate's parsing and the context are
        the process's (or its fork server's: warm_client_context), redone only when a file changes."""
        from unittest import mock

        from ganeti.rpc import tls

        reads = []
        real = tls.Credentials.cluster

        def counted(paths: Paths) -> Credentials:
            reads.append(paths.data_dir)
            return real(paths)

        with mock.patch.object(tls.Credentials, "cluster", staticmethod(counted)):
            tls.warm_client_context(self.b)
            first = [ReloadingPolicy(self.b).creatorForNetloc(b"x", 1).clientConnectionForTLS(None)
                     for _ in range(3)]
            self.assertEqual(reads, [self.b.data_dir])
            self.assertEqual(len({id(conn.get_context()) for conn in first}), 1)
            server = ReloadingServerContextFactory(self.a)
            self.assertEqual(handshake(server.getContext(), first[0]), (True, True))
            self.write(self.b, server=self.new, trust=CLUSTER[1])   # renewed: read again, a new context
            again = ReloadingPolicy(self.b).creatorForNetloc(b"x", 1).clientConnectionForTLS(None)
            self.assertEqual(reads, [self.b.data_dir, self.a.data_dir, self.b.data_dir])
            self.assertIsNot(again.get_context(), first[0].get_context())
            self.assertEqual(gcrypto.fingerprint(again.get_certificate().to_cryptography().public_bytes(
                serialization.Encoding.PEM)), gcrypto.fingerprint(self.new[1]))

    def test_reloading_certificate_follows_its_file(self):
        path = os.path.join(self.a.data_dir, "rapi.pem")
        gcrypto.write_pem_file(path, *CLUSTER)
        rapi = ReloadingCertificate(path)
        first = rapi.getContext()
        self.assertIs(rapi.getContext(), first, "unchanged: the same context")
        gcrypto.write_pem_file(path, *self.new)
        second = rapi.getContext()
        self.assertIsNot(second, first)
        srv = SSL.Connection(second, None)
        self.assertEqual(gcrypto.fingerprint(srv.get_certificate().to_cryptography().public_bytes(
            serialization.Encoding.PEM)), gcrypto.fingerprint(self.new[1]))
