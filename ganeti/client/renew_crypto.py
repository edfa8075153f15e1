"""gnt-cluster renew-crypto: new keys for a running cluster.

Ganeti stops every daemon, copies the new files with SSH and starts them
again.  Here the master sends them over node RPC (C{upload_file}) to every
online node, its own NodeD included, and no daemon stops: NodeD, the
heartbeat port and every node RPC client rebuild their TLS context when
C{server.pem} or C{cluster-trust.pem} changes, RAPI when C{rapi.pem}
changes, confd when C{hmac.key} or C{hmac.key.accept} changes.  So that no
call fails while some nodes have the new key and others the old one, a
changed key goes through three rounds, each finished on every node before
the next:

  1. trust: every node trusts the new cluster certificate and the current
     one (C{cluster-trust.pem}), and confd accepts the new HMAC key and the
     current one (C{hmac.key.accept}), besides what its own files hold;
  2. switch: every node gets the new files (C{server.pem}, C{hmac.key},
     C{rapi.pem}, C{cluster-domain-secret}); the trust files are not
     touched, so a node trusts both keys whichever of them each file holds
     at any moment (two files cannot change at once); then, with a new
     cluster certificate or C{--new-node-certificates}, the job
     C{OP_CLUSTER_RENEW_CRYPTO} has every node issue itself a new client
     certificate;
  3. retire: the trust files are emptied: the old certificate and key are
     refused from now on.

A node that fails a round stops the renewal before the next one (the
cluster keeps working with both keys trusted); running the command again
finishes it: what the master's trust files hold is trusted on until that
run's last round, so nodes the failed run had already switched keep working.
"""

from __future__ import annotations

import argparse
from typing import Any

from ganeti import crypto, errors
from ganeti.client.command import EXIT_FAILURE, EXIT_SUCCESS, Context
from ganeti.paths import Paths
from ganeti.rpc import procedures, wire

#: Seconds confd may take to notice a changed key file (its polling interval, plus a margin).
CONFD_SETTLE = 6.0
#: Seconds each node gets to write the files of a round.
ROUND_TIMEOUT = 60.0

START = 'Updating certificates now. Running "gnt-cluster verify"  is recommended after this operation.'
DONE = 'All requested certificates and keys have been replaced. Running "gnt-cluster verify" now is recommended.'
QUESTION = ("This replaces the requested keys on every node while the cluster keeps running (no daemon is"
            " restarted). Continue?")


class RenewError(Exception):
    """A round could not be finished."""


def _fail(ctx: Context, message: str) -> int:
    ctx.err("Failure: prerequisites not met for this operation:\n%s" % message)
    return EXIT_FAILURE


def renew_crypto(ctx: Context, opts: argparse.Namespace) -> int:
    from ganeti.client import prompt

    ctx.out(START)
    if opts.new_rapi_cert and opts.rapi_cert:
        ctx.err("Only one of the --new-rapi-certificate and --rapi-certificate options can be specified at the"
                " same time.")
        return EXIT_FAILURE
    if opts.new_cluster_domain_secret and opts.cluster_domain_secret:
        ctx.err("Only one of the --new-cluster-domain-secret and --cluster-domain-secret options can be"
                " specified at the same time.")
        return EXIT_FAILURE
    if opts.new_spice_cert or opts.spice_cert or opts.spice_cacert:
        return _fail(ctx, "SPICE is not supported by this cluster's hypervisors; nothing was changed")
    paths = Paths.from_option(ctx.root)
    try:
        plan = _plan(paths, opts)
    except (errors.ConfigurationError, OSError) as e:
        return _fail(ctx, "%s; nothing was changed" % e)
    node_certs = bool(opts.new_node_cert or opts.new_cluster_cert)
    if not plan.switch and not node_certs and not opts.new_ssh_keys:
        return _fail(ctx, "nothing to renew: give at least one of the --new-* options")
    if not opts.force and not prompt.ask_user(QUESTION):
        return EXIT_FAILURE
    try:
        targets = _online_nodes(ctx)
    except ValueError as e:
        return _fail(ctx, str(e))

    def submit_job() -> None:
        # blocking LUXI, inside the reactor: nothing else of this process runs meanwhile
        from ganeti.client.jobs import opcode, submit_opcodes

        submit_opcodes(ctx, [opcode(ctx, "OP_CLUSTER_RENEW_CRYPTO", node_certificates=node_certs,
                                    renew_ssh_keys=bool(opts.new_ssh_keys), ssh_key_type=opts.ssh_key_type,
                                    ssh_key_bits=opts.ssh_key_bits, verbose=bool(opts.verbose),
                                    debug=bool(opts.debug))])

    async def main(reactor: Any) -> int:
        from ganeti.client.cluster_commands import _rpc

        rpc = _rpc(reactor, ctx, opts.rpc_port)
        try:
            if plan.trust:
                await _round(ctx, rpc, targets, plan.trust, "trust the new keys")
                await _settle(reactor, plan)
            if plan.switch:
                await _round(ctx, rpc, targets, plan.switch, "install the new keys")
                await _settle(reactor, plan)
            if node_certs or opts.new_ssh_keys:
                submit_job()
            if plan.retire:
                await _round(ctx, rpc, targets, plan.retire, "stop trusting the old keys")
        except RenewError as e:
            ctx.err(str(e))
            return EXIT_FAILURE
        finally:
            await rpc.close()
        return EXIT_SUCCESS

    from ganeti.client.cluster_commands import _react

    if _react(main) != EXIT_SUCCESS:
        return EXIT_FAILURE
    ctx.out(DONE)
    return EXIT_SUCCESS


class Plan:
    """The files of each round: C{[(real path on the master, content, mode)]}."""

    def __init__(self) -> None:
        self.trust: list[tuple[str, bytes, int]] = []
        self.switch: list[tuple[str, bytes, int]] = []
        self.retire: list[tuple[str, bytes, int]] = []
        self.hmac = False


def _plan(paths: Paths, opts: argparse.Namespace) -> Plan:
    """What to write, checked and generated before anything is sent.

    @raise errors.ConfigurationError: a given file is not usable
    """
    from ganeti.confd.service import accept_file, read_accepted_keys
    from ganeti.rpc.tls import read_trusted, trust_file

    plan = Plan()
    if opts.new_cluster_cert:
        _old_key, old_cert = crypto.load_pem_file(paths.server_pem)
        key_pem, cert_pem = crypto.generate_key_and_cert(_cluster_name(old_cert))
        trusted = _unique([cert_pem, old_cert, *read_trusted(paths)])
        plan.trust.append((trust_file(paths), b"".join(_line(c) for c in trusted), 0o444))
        plan.switch.append((paths.server_pem, _pem(key_pem, cert_pem), crypto.PEM_MODE))
        plan.retire.append((trust_file(paths), b"", 0o444))
    if opts.new_confd_hmac_key:
        new = crypto.generate_hmac_key()
        accepted = _unique([new, crypto.load_hmac_key(paths.hmac_key), *read_accepted_keys(paths)])
        plan.hmac = True
        plan.trust.append((accept_file(paths), b"".join(_line(k) for k in accepted), crypto.SECRET_MODE))
        plan.switch.append((paths.hmac_key, _line(new), crypto.SECRET_MODE))
        plan.retire.append((accept_file(paths), b"", crypto.SECRET_MODE))
    if opts.new_rapi_cert or opts.rapi_cert:
        if opts.rapi_cert:
            with open(opts.rapi_cert, "rb") as handle:
                key_pem, cert_pem = crypto.parse_pem(handle.read(), "RAPI certificate %s" % opts.rapi_cert)
        else:
            _key, current = crypto.load_pem_file(paths.rapi_pem)
            key_pem, cert_pem = crypto.generate_key_and_cert(_cluster_name(current))
        plan.switch.append((paths.rapi_pem, _pem(key_pem, cert_pem), crypto.PEM_MODE))
    if opts.new_cluster_domain_secret or opts.cluster_domain_secret:
        if opts.cluster_domain_secret:
            with open(opts.cluster_domain_secret, "rb") as handle:
                secret = handle.read().strip()
            crypto.check_secret(secret, opts.cluster_domain_secret, "cluster domain secret")
        else:
            secret = crypto.generate_domain_secret()
        plan.switch.append((paths.cluster_domain_secret, secret + b"\n", crypto.SECRET_MODE))
    return plan


def _line(data: bytes) -> bytes:
    return data if data.endswith(b"\n") else data + b"\n"


def _unique(items: list[bytes]) -> list[bytes]:
    """C{items} without repeats (compared without surrounding whitespace), in order."""
    kept: dict[bytes, bytes] = {}
    for item in items:
        kept.setdefault(item.strip(), item)
    return list(kept.values())


def _pem(key_pem: bytes, cert_pem: bytes) -> bytes:
    return _line(key_pem) + cert_pem


def _cluster_name(cert_pem: bytes) -> str:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    names = x509.load_pem_x509_certificate(cert_pem).subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else "ganeti.example.com"


def _online_nodes(ctx: Context) -> list[tuple[str, str]]:
    """Every online node, the master last (its files change last in a round)."""
    from ganeti.client.cluster_commands import online_nodes

    return online_nodes(ctx, [], None)


async def _round(ctx: Context, rpc: Any, targets: list[tuple[str, str]], files: list[tuple[str, bytes, int]],
                 what: str) -> None:
    """Write C{files} on every node in C{targets}; all must succeed."""
    root = Paths.from_option(ctx.root).root
    failed = []
    for name, address in targets:
        for path, data, mode in files:
            details = wire.file_details(wire.virtual_path(root, path), data, mode=mode)
            result = await rpc.run_one(name, address, procedures.upload_file.call(details).within(ROUND_TIMEOUT))
            if result.failed:
                failed.append("%s (%s): %s" % (name, path.rsplit("/", 1)[-1], result.fail_msg))
                break
    if failed:
        raise RenewError("Could not %s on every node; stopped here (the cluster keeps working, run the command"
                         " again):\n%s" % (what, "\n".join(failed)))


async def _settle(reactor: Any, plan: Plan) -> None:
    """Give confd the time to notice a changed key file (it polls as well as watching)."""
    if plan.hmac:
        from twisted.internet.task import deferLater

        await deferLater(reactor, CONFD_SETTLE, lambda: None)


def setup(parser: argparse.ArgumentParser) -> None:
    from ganeti import ports

    add = parser.add_argument
    add("--new-cluster-certificate", dest="new_cluster_cert", action="store_true",
        help="Generate a new cluster certificate (and new node client certificates)")
    add("--new-node-certificates", dest="new_node_cert", action="store_true",
        help="Issue every online node a new client certificate")
    add("--new-rapi-certificate", dest="new_rapi_cert", action="store_true",
        help="Generate a new self-signed RAPI certificate")
    add("--rapi-certificate", dest="rapi_cert", metavar="FILE",
        help="Install FILE (private key and certificate, PEM) as the RAPI certificate")
    add("--new-spice-certificate", dest="new_spice_cert", action="store_true", help="(no SPICE here)")
    add("--spice-certificate", dest="spice_cert", metavar="FILE", help="(no SPICE here)")
    add("--spice-ca-certificate", dest="spice_cacert", metavar="FILE", help="(no SPICE here)")
    add("--new-confd-hmac-key", dest="new_confd_hmac_key", action="store_true",
        help="Create a new HMAC key for confd")
    add("--new-cluster-domain-secret", dest="new_cluster_domain_secret", action="store_true",
        help="Create a new cluster domain secret")
    add("--cluster-domain-secret", dest="cluster_domain_secret", metavar="FILE",
        help="Load the new cluster domain secret from FILE")
    add("--new-ssh-keys", dest="new_ssh_keys", action="store_true",
        help="Renew the nodes' SSH keys (a no-op: no SSH setup is kept)")
    add("--ssh-key-type", dest="ssh_key_type", choices=("rsa", "dsa", "ecdsa"), help="Type of the SSH keys")
    add("--ssh-key-bits", dest="ssh_key_bits", type=int, metavar="BITS", help="Size of the SSH keys")
    add("--no-ssh-key-check", action="store_true", help="Accepted for Ganeti compatibility")
    add("-f", "--force", action="store_true", help="Do not ask for confirmation")
    add("-v", "--verbose", action="store_true", help="Verbose mode")
    add("--rpc-port", type=ports.port_number, default=ports.NODED, metavar="PORT",
        help="Port of the cluster's node daemons (default %d)" % ports.NODED)
