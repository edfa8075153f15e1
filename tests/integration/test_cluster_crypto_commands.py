"""Candidate certificates and gnt-cluster command/copyfile on a real 3-node
loopback cluster (real NodeDs, real mutual TLS).

  - C{candidate_certs}: each node has its own client certificate, as a
    join gives it; Ganeti 3.0's own C{gnt-cluster master-failover} run on
    node2 fails its vote ("Unhealthy nodes") while the other nodes do not
    know node2's certificate, and passes it once redist-conf put every
    candidate's digest in the config (and so in every node's
    C{ssconf_master_candidates_certs}); a demoted node's certificate is
    refused again.
  - C{gnt-cluster renew-crypto --new-node-certificates} while queries run:
    every node's new certificate is accepted, the old one refused.
  - C{gnt-cluster command} and C{copyfile} reach the nodes through NodeD,
    not SSH, and each node's C{commands.log} records them.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti import crypto, daemons
from ganeti.noded import commands
from ganeti.objects import ConfigData
from ganeti.rpc import tls
from ganeti.ssconf import SimpleStore
from ganeti.testing.cluster import BIN, LoopbackCluster, gnt, ok, ssconf_of
from ganeti.testing.ganeti_tools import GanetiTools, unavailable_reason
from tests.integration.test_failover import cluster_config, ready_cluster, stop_master_daemons
from tests.integration.test_ganeti_tools import daemon_util_missing, ganeti_gnt_cluster

N1, N2, N3 = "node1.test", "node2.test", "node3.test"


def own_client_certificates(cluster: LoopbackCluster) -> None:
    """Nodes 2 and 3 get a client certificate of their own (what a join writes)."""
    signer = crypto.load_pem_file(cluster.master.server_pem)
    for paths, name in list(zip(cluster.roots, cluster.nodes))[1:]:
        crypto.write_pem_file(paths.client_pem, *crypto.generate_key_and_cert(name, signer=signer))


def candidate_certs(cluster: LoopbackCluster) -> dict[str, str]:
    with open(cluster.master.config_data, "rb") as handle:
        cfg = ConfigData.from_json(handle.read())
    return {cfg.nodes[uuid].name: digest for uuid, digest in cfg.cluster.candidate_certs.items()}


async def certificates_taken(cluster: LoopbackCluster, renewed: dict[str, str]) -> None:
    """Wait until the master's config.data lists the C{renewed} candidate certificates, and every node's
    ssconf too (its NodeD checks client certificates against that list)."""
    await cluster.until(lambda: candidate_certs(cluster) == renewed, timeout=30)
    wanted = {uuid: digest.upper() for uuid, digest in uuid_certs(cluster).items()}
    await cluster.until(lambda: all({u: d.upper() for u, d in SimpleStore(p).get_master_candidates_certs().items()}
                                    == wanted for p in cluster.roots), timeout=30)


def uuid_certs(cluster: LoopbackCluster) -> dict[str, str]:
    with open(cluster.master.config_data, "rb") as handle:
        return dict(ConfigData.from_json(handle.read()).cluster.candidate_certs)


def handshake(client_pem: str, address: str, port: int) -> str:
    """A TLS handshake with a NodeD presenting C{client_pem}: C{"accepted"} or the error."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(client_pem)
    try:
        with socket.create_connection((address, port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
            tls.sendall(b"POST /version HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]")
            answer = tls.recv(4096)
            return "accepted" if answer.startswith(b"HTTP/1.1 200") else "refused: %r" % answer[:40]
    except (ssl.SSLError, ConnectionError) as e:
        return "refused: %s" % e


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
@pytest_twisted.ensureDeferred
async def test_every_candidate_certificate_lets_ganeti_master_failover_vote(root):
    workdir = tempfile.mkdtemp(prefix="gntc")
    config = cluster_config()
    config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, master_ip="127.0.1.254"))
    async with LoopbackCluster(reactor, root, config, prefix="gntc") as cluster:
        roots = cluster.roots
        try:
            await ready_cluster(cluster)
            own_client_certificates(cluster)
            tools = GanetiTools.for_root(roots[1].root, N2, workdir)
            # the defect: only server.pem is known, node2's own certificate is refused by every node
            done = ganeti_gnt_cluster(tools, cluster.rpc_port, "master-failover")
            assert done.returncode == 1 and "Unhealthy nodes: ['%s', '%s', '%s']" % (N1, N2, N3) in done.stderr, \
                done.stderr

            ok(root, "gnt-cluster", "redist-conf")
            digests = {name: crypto.cluster_cert_digest(paths) for paths, name in zip(roots, cluster.nodes)}
            # WConfD rewrites config.data in the background (its journal is what is durable first)
            await cluster.until(lambda: candidate_certs(cluster) == digests, timeout=30)
            assert len(set(digests.values())) == 3
            await cluster.until(lambda: all(len((ssconf_of(p, "master_candidates_certs") or "").split()) == 3
                                            for p in roots))
            # the vote passes now; the command stops at Ganeti's daemon-util, after it (nothing changed)
            done = ganeti_gnt_cluster(tools, cluster.rpc_port, "master-failover")
            assert (done.returncode, done.stderr) == (1, daemon_util_missing(tools.vroot)), done.stderr

            # a demoted node leaves candidate_certs: the others refuse its certificate again
            assert handshake(roots[2].client_pem, cluster.nodes[N1], cluster.rpc_port) == "accepted"
            ok(root, "gnt-node", "modify", "-C", "no", N3)
            # config.data on disk follows WConfD's change (written after the job's end at the latest)
            await cluster.until(lambda: N3 not in candidate_certs(cluster), timeout=30)
            await cluster.until(lambda: len((ssconf_of(roots[0], "master_candidates_certs") or "").split()) == 2)
            assert handshake(roots[2].client_pem, cluster.nodes[N1], cluster.rpc_port).startswith("refused")
            ok(root, "gnt-node", "modify", "-C", "yes", N3)
            await cluster.until(lambda: candidate_certs(cluster).get(N3) == digests[N3], timeout=30)

            # renew-crypto --new-node-certificates while queries run: new client certificates everywhere,
            # their digests in candidate_certs, the old ones refused
            old_pem = os.path.join(workdir, "old-client.pem")
            shutil.copy(roots[1].client_pem, old_pem)
            stream = subprocess.Popen(["/bin/sh", "-c", "for i in $(seq 40); do %s --root %s list --no-headers -o name"
                                       " >/dev/null || exit 1; done" % (os.path.join(BIN, "gnt-node"), root.root)])
            out = ok(root, "gnt-cluster", "renew-crypto", "--new-node-certificates", "-f")
            assert out.endswith('All requested certificates and keys have been replaced. Running "gnt-cluster'
                                ' verify" now is recommended.\n'), out
            assert stream.wait(timeout=120) == 0, "a query failed during the renewal"
            renewed = {name: crypto.cluster_cert_digest(paths) for paths, name in zip(roots, cluster.nodes)}
            await certificates_taken(cluster, renewed)  # (config.data: see above)
            assert not set(renewed.values()) & set(digests.values())
            await cluster.until(lambda: sorted((ssconf_of(roots[0], "master_candidates_certs") or "").split())
                                == sorted("%s=%s" % (uuid, d) for uuid, d in uuid_certs(cluster).items()))
            assert handshake(roots[1].client_pem, cluster.nodes[N1], cluster.rpc_port) == "accepted"
            assert handshake(old_pem, cluster.nodes[N1], cluster.rpc_port).startswith("refused")
            # bad input: a clear error, nothing changed
            before = open(roots[0].rapi_pem, "rb").read()
            refused = gnt(root, "gnt-cluster", "renew-crypto", "-f", "--new-rapi-certificate", "--rapi-certificate",
                          old_pem)
            assert refused.returncode == 1 and "Only one of the --new-rapi-certificate" in refused.stderr
            refused = gnt(root, "gnt-cluster", "renew-crypto", "-f", "--rapi-certificate", "/nonexistent.pem")
            assert refused.returncode == 1 and "nothing was changed" in refused.stderr
            with open(os.path.join(workdir, "cert-only.pem"), "wb") as handle:
                handle.write(crypto.load_pem_file(roots[0].server_pem)[1])
            refused = gnt(root, "gnt-cluster", "renew-crypto", "-f", "--rapi-certificate",
                          os.path.join(workdir, "cert-only.pem"))
            assert refused.returncode == 1 and "lacks a private key" in refused.stderr, refused.stderr
            assert open(roots[0].rapi_pem, "rb").read() == before
        finally:
            for paths in roots:
                stop_master_daemons(paths)
            shutil.rmtree(workdir, ignore_errors=True)


def log_of(paths) -> list[dict]:
    path = commands.log_path(paths)
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [record for record in map(commands.parse_record, handle) if record is not None]


@pytest_twisted.ensureDeferred
async def test_command_and_copyfile_through_noded(root):
    async with LoopbackCluster(reactor, root, cluster_config(), prefix="gntk") as cluster:
        roots = cluster.roots
        await ready_cluster(cluster)
        port = ("--rpc-port", str(cluster.rpc_port))
        # every online node, the master last; each node's own shell answers
        out = ok(root, "gnt-cluster", "command", *port, "echo", "hello;", "exit", "0")
        assert out == "".join("%s\nnode: %s\nhello\n\nreturn code = 0\n" % ("-" * 48, name) for name in (N2, N3, N1))
        out = ok(root, "gnt-cluster", "command", *port, "-M", "-n", N3, "--failure-only", "printf 'a\\nb\\n'; exit 4")
        assert out == "-" * 48 + "\n%s: a\n%s: b\nreturn code = 4\n" % (N3, N3)
        out = ok(root, "gnt-cluster", "command", *port, "--failure-only", "true")
        assert out == ""
        for paths in roots:
            entries = log_of(paths)
            assert [e["argv"] for e in entries][:1] == [["/bin/sh", "-c", "echo hello; exit 0"]]
        assert log_of(roots[2])[1]["exit_code"] == 4

        # a command that runs too long is killed at --timeout
        out = ok(root, "gnt-cluster", "command", *port, "-n", N2, "--timeout", "1", "sleep 60")
        assert "(killed after 1 seconds)" in out and "return code = -9" in out
        assert log_of(roots[1])[-1]["timed_out"] is True

        # bad input: a clear error, nothing run
        done = gnt(root, "gnt-cluster", "command", *port, "-n", "nosuchnode", "true")
        assert done.returncode == 1 and "Node 'nosuchnode' not known" in done.stderr
        done = gnt(root, "gnt-cluster", "command", *port, "--timeout", "0", "true")
        assert done.returncode == 2 and "--timeout" in done.stderr

        # copyfile: the same path under every other node's root, the mode kept
        os.makedirs(os.path.join(root.root, "etc", "app"))
        for paths in roots[1:]:
            os.makedirs(os.path.join(paths.root, "etc", "app"))
        source = os.path.join(root.root, "etc", "app", "motd")
        with open(source, "w") as handle:
            handle.write("welcome\n")
        os.chmod(source, 0o640)
        assert ok(root, "gnt-cluster", "copyfile", *port, source) == ""
        for paths in roots[1:]:
            target = os.path.join(paths.root, "etc", "app", "motd")
            with open(target) as handle:
                assert handle.read() == "welcome\n"
            assert os.stat(target).st_mode & 0o777 == 0o640
            assert log_of(paths)[-1]["path"] == "/etc/app/motd" and log_of(paths)[-1]["size"] == 8
        assert not [e for e in log_of(roots[0]) if e["action"] == "copyfile"], "not to the master"
        # a node without the directory: an error on stderr, the others still get it
        shutil.rmtree(os.path.join(roots[2].root, "etc", "app"))
        done = gnt(root, "gnt-cluster", "copyfile", *port, source)
        assert done.returncode == 0
        assert "Copy of file %s to node %s failed:" % (source, N3) in done.stderr
        assert "does not exist on this node" in done.stderr
        done = gnt(root, "gnt-cluster", "copyfile", *port, os.path.join(root.root, "nope"))
        assert done.returncode == 1 and "No such filename" in done.stderr


def confd_ping(key: bytes, address: str, port: int) -> bool:
    """Whether confd answers a ping signed with C{key} (within 3 s)."""
    from ganeti.confd import wire as cwire

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        sock.sendto(cwire.pack_request(key, cwire.request(cwire.REQ_PING, rsalt="x1"), time.time()), (address, port))
        try:
            packet, _addr = sock.recvfrom(65536)
        except TimeoutError:
            return False
    cwire.unpack_reply(key, packet)
    return True


def served_certificate(address: str, port: int) -> bytes:
    """The certificate a TLS server presents (DER)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((address, port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
        return tls.getpeercert(binary_form=True) or b""


def der_of(pem_path: str) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    _key, cert = crypto.load_pem_file(pem_path)
    return x509.load_pem_x509_certificate(cert).public_bytes(serialization.Encoding.DER)


@pytest_twisted.ensureDeferred
async def test_renew_crypto_while_jobs_and_queries_run(root):
    workdir = tempfile.mkdtemp(prefix="gntr")
    async with LoopbackCluster(reactor, root, cluster_config(), rapi_users="jack abc123 write\n",
                               prefix="gntr") as cluster:
        roots = cluster.roots
        master_address = cluster.nodes[N1]
        confd = daemons.BY_NAME["ganeti-confd"]
        confd_port = daemons.free_port(master_address, udp=True)
        try:
            await ready_cluster(cluster)
            own_client_certificates(cluster)
            ok(root, "gnt-cluster", "redist-conf")
            await cluster.until(lambda: all(os.path.exists(p.hmac_key) for p in roots))
            argv, env = daemons.twistd_command(root, confd, ["--root", root.root, "--bind", master_address,
                                                             "--port", str(confd_port)])
            started = subprocess.run(argv, cwd=root.root, env=env, capture_output=True, text=True)
            assert started.returncode == 0, started.stdout + started.stderr
            old_key = open(root.hmac_key, "rb").read()
            await cluster.until(lambda: confd_ping(old_key, master_address, confd_port))
            for name, path in (("server", root.server_pem), ("client2", roots[1].client_pem),
                               ("rapi", root.rapi_pem)):
                shutil.copy(path, os.path.join(workdir, name + ".pem"))
            old_cds = open(root.cluster_domain_secret, "rb").read()
            rapi_address, rapi_port = cluster.rapi.host, cluster.rapi.port
            assert served_certificate(rapi_address, rapi_port) == der_of(root.rapi_pem)

            # jobs (node RPC to node2 and node3) and queries all along the renewal
            tools = os.path.dirname(sys.executable)
            loop = (f"for i in $(seq 30); do {tools}/gnt-node --root {root.root} list --no-headers -o name"
                    f" >/dev/null || exit 1; {tools}/gnt-debug --root {root.root} delay --no-master -n {N2}"
                    f" -n {N3} 0.01 >/dev/null || exit 2; done")
            stream = subprocess.Popen(["/bin/sh", "-c", loop], stderr=subprocess.PIPE, text=True)
            out = ok(root, "gnt-cluster", "renew-crypto", "--rpc-port", str(cluster.rpc_port), "-f",
                     "--new-cluster-certificate", "--new-rapi-certificate", "--new-confd-hmac-key",
                     "--new-cluster-domain-secret")
            assert out.endswith("now is recommended.\n"), out
            assert stream.wait(timeout=300) == 0, stream.stderr.read()

            # every node holds the same new files, and trusts nothing else
            for paths in roots:
                assert open(paths.server_pem, "rb").read() == open(root.server_pem, "rb").read()
                assert open(paths.hmac_key, "rb").read() == open(root.hmac_key, "rb").read()
                assert open(paths.rapi_pem, "rb").read() == open(root.rapi_pem, "rb").read()
                assert open(paths.cluster_domain_secret, "rb").read() == open(root.cluster_domain_secret, "rb").read()
                assert os.path.getsize(tls.trust_file(paths)) == 0
            assert open(root.server_pem, "rb").read() != open(os.path.join(workdir, "server.pem"), "rb").read()
            assert open(root.cluster_domain_secret, "rb").read() != old_cds
            renewed = {name: crypto.cluster_cert_digest(paths) for paths, name in zip(roots, cluster.nodes)}
            await certificates_taken(cluster, renewed)  # (config.data: see above)

            # the old cluster and client certificates are refused by NodeD, the new ones accepted
            for address in cluster.nodes.values():
                assert handshake(os.path.join(workdir, "server.pem"), address, cluster.rpc_port).startswith("refused")
                assert handshake(os.path.join(workdir, "client2.pem"), address, cluster.rpc_port).startswith("refused")
                assert handshake(roots[1].client_pem, address, cluster.rpc_port) == "accepted"
            # RAPI serves the new certificate (without a restart); confd answers only the new key
            assert served_certificate(rapi_address, rapi_port) == der_of(root.rapi_pem)
            assert served_certificate(rapi_address, rapi_port) != der_of(os.path.join(workdir, "rapi.pem"))
            assert confd_ping(open(root.hmac_key, "rb").read(), master_address, confd_port)
            assert not confd_ping(old_key, master_address, confd_port)
            # and the cluster goes on: a job reaching every node
            ok(root, "gnt-debug", "delay", "--no-master", "-n", N2, "-n", N3, "0.01")
        finally:
            daemons.stop(root, ["ganeti-confd"], out=lambda _line: None)
            for paths in roots:
                stop_master_daemons(paths)
            shutil.rmtree(workdir, ignore_errors=True)
