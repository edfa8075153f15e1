"""The mutual-TLS ends (chain and pin checks) and the contexts that follow their files, in memory (no sockets)."""

from __future__ import annotations

import os
import ssl
import tempfile
import unittest

import attrs

from ganeti import crypto as gcrypto
from ganeti import ssconf
from ganeti.paths import Paths
from ganeti.rpc.tls import (
    AllowedClients,
    Credentials,
    Pinned,
    PinnedPolicy,
    ReloadingCertificate,
    ReloadingPolicy,
    ReloadingServerContextFactory,
    ServerContextFactory,
    peer_fingerprint,
    trust_file,
)
from ganeti.tlsbio import TLSEnd

CLUSTER = gcrypto.generate_key_and_cert("cluster.test")
OTHER = gcrypto.generate_key_and_cert("other.test")
NODE_CLIENT = gcrypto.generate_key_and_cert("node2.test", signer=CLUSTER)


def der(cert_pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii"))


@attrs.define
class Outcome:
    client_ok: bool = False
    server_ok: bool = False
    #: the certificate each side saw (DER)
    client_saw: bytes | None = None
    server_saw: bytes | None = None


def connect(server: TLSEnd, client: TLSEnd) -> Outcome:
    """Drive a handshake between two ends through memory BIOs, each end's
    C{check_peer} asked once its handshake is done (as L{ganeti.tlsbio})."""
    bios = {side: (ssl.MemoryBIO(), ssl.MemoryBIO()) for side in ("client", "server")}
    objs = {"server": server.getContext().wrap_bio(*bios["server"], server_side=True),
            "client": client.getContext().wrap_bio(*bios["client"], server_side=False)}
    ends = {"server": server, "client": client}
    done = {"client": False, "server": False}
    failed = {"client": False, "server": False}
    out = Outcome()
    for _ in range(20):
        for side in ("client", "server"):
            if done[side] or failed[side]:
                continue
            try:
                objs[side].do_handshake()
            except ssl.SSLWantReadError:
                continue
            except ssl.SSLError:
                failed[side] = True
                continue
            done[side] = True
            seen = objs[side].getpeercert(binary_form=True)
            setattr(out, side + "_saw", seen)
            if ends[side].check_peer(seen) is not None:
                failed[side] = True
        bios["server"][0].write(bios["client"][1].read())
        bios["client"][0].write(bios["server"][1].read())
    out.client_ok = done["client"] and not failed["client"]
    out.server_ok = done["server"] and not failed["server"]
    return out


def handshake(server: TLSEnd, client: TLSEnd) -> tuple[bool, bool]:
    """Whether each side completed the handshake and accepted its peer."""
    out = connect(server, client)
    return out.client_ok, out.server_ok


class _Anyone:
    """A client that presents nothing and checks nothing (to see what a server presents)."""

    def getContext(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def check_peer(self, der: bytes | None) -> str | None:
        return None


class PinTests(unittest.TestCase):
    def test_leaf_fingerprint_must_be_allowed(self):
        pinned = Pinned(ssl.create_default_context, lambda: {gcrypto.fingerprint(CLUSTER[1])}, "node")
        self.assertIsNone(pinned.check_peer(der(CLUSTER[1])))
        refusal = pinned.check_peer(der(OTHER[1]))
        self.assertIn(gcrypto.fingerprint(OTHER[1]), refusal)
        self.assertIn("not a cluster certificate", refusal)

    def test_no_certificate_is_refused(self):
        pinned = Pinned(ssl.create_default_context, lambda: {gcrypto.fingerprint(CLUSTER[1])}, "node")
        self.assertIn("no certificate", pinned.check_peer(None))

    def test_allowed_is_asked_each_time(self):
        allowed: set[str] = set()
        pinned = Pinned(ssl.create_default_context, lambda: allowed, "client")
        self.assertIsNotNone(pinned.check_peer(der(OTHER[1])))
        allowed.add(gcrypto.fingerprint(OTHER[1]))
        self.assertIsNone(pinned.check_peer(der(OTHER[1])))

    def test_peer_fingerprint_matches_ganeti_format(self):
        fp = peer_fingerprint(der(CLUSTER[1]))
        self.assertEqual(fp, gcrypto.fingerprint(CLUSTER[1], "sha1"))
        self.assertRegex(fp, r"^([0-9A-F]{2}:){19}[0-9A-F]{2}$")


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

    def server(self, allowed=None) -> ServerContextFactory:
        creds = Credentials(CLUSTER[0], CLUSTER[1], CLUSTER[1])
        fps = allowed if allowed is not None else {creds.ca_fingerprint}
        return ServerContextFactory(creds, lambda: fps)

    def client(self, creds: Credentials, fingerprints=None) -> Pinned:
        return PinnedPolicy(creds, fingerprints).creatorForNetloc(b"127.0.1.1", 1811)

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
        return handshake(server, client.creatorForNetloc(b"x", 1)) == (True, True)

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
        self.assertFalse(handshake(server, old_client.creatorForNetloc(b"x", 1))[1], "the old certificate is refused")

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
            first = [ReloadingPolicy(self.b).creatorForNetloc(b"x", 1) for _ in range(3)]
            contexts = [end.getContext() for end in first]
            self.assertEqual(reads, [self.b.data_dir])
            self.assertEqual(len({id(ctx) for ctx in contexts}), 1)
            server = ReloadingServerContextFactory(self.a)
            self.assertEqual(handshake(server, first[0]), (True, True))
            self.write(self.b, server=self.new, trust=CLUSTER[1])   # renewed: read again, a new context
            again = ReloadingPolicy(self.b).creatorForNetloc(b"x", 1)
            self.assertIsNot(again.getContext(), contexts[0])
            self.assertEqual(reads, [self.b.data_dir, self.a.data_dir, self.b.data_dir])
            self.write(self.a, trust=self.new[1])  # the server trusts the new one: sees it presented
            seen = connect(server, again)
            self.assertTrue(seen.server_ok)
            self.assertEqual(peer_fingerprint(seen.server_saw), gcrypto.fingerprint(self.new[1]))

    def test_reloading_certificate_follows_its_file(self):
        path = os.path.join(self.a.data_dir, "rapi.pem")
        gcrypto.write_pem_file(path, *CLUSTER)
        rapi = ReloadingCertificate(path)
        first = rapi.getContext()
        self.assertIs(rapi.getContext(), first, "unchanged: the same context")
        gcrypto.write_pem_file(path, *self.new)
        second = rapi.getContext()
        self.assertIsNot(second, first)
        seen = connect(rapi, _Anyone())
        self.assertTrue(seen.client_ok and seen.server_ok)
        self.assertEqual(peer_fingerprint(seen.client_saw), gcrypto.fingerprint(self.new[1]))
        self.assertIsNone(seen.server_saw, "RAPI asks its clients for no certificate")
