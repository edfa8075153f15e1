"""The node's crypto tokens (Ganeti's C{node_crypto_tokens}).

The master asks each master candidate for the SHA1 digest of its own
client certificate (C{client.pem}), which goes into
C{cluster.candidate_certs} and so into every node's
C{ssconf_master_candidates_certs}: the certificates NodeD accepts from a
client (L{ganeti.rpc.tls.AllowedClients}).  C{create} issues the node a new
client certificate, signed by the cluster certificate the node holds
(C{gnt-cluster renew-crypto --new-node-certificates}).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from twisted.logger import Logger

from ganeti import crypto, daemons, errors
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.paths import Paths
from ganeti.rpc import procedures

#: Ganeti's C{CRYPTO_TYPE_SSL_DIGEST}: the only token type served (C{ssh} is not: no SSH here).
TYPE_SSL = "ssl"
#: Ganeti's C{CRYPTO_ACTIONS}.
ACTION_GET = "get"
ACTION_CREATE = "create"
#: Most token requests in one call.
MAX_REQUESTS = 8


def _node_name(paths: Paths) -> str:
    try:
        return daemons.read_node_identity(paths)["name"] or socket.getfqdn()
    except SystemExit:  # no identity file
        return socket.getfqdn()


class CryptoTokenProcedures:
    """C{node_crypto_tokens} of one node root."""

    log = Logger()

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @handler(procedures.node_crypto_tokens)
    def node_crypto_tokens(self, token_requests: list[Any]) -> list[Any]:
        _check_requests(token_requests)
        answers = []
        for token_type, action, _options in token_requests:
            if action == ACTION_CREATE:
                self._create_client_cert()
            answers.append([token_type, self._digest()])
        return answers

    def _digest(self) -> str:
        """The digest of the certificate this node presents as a client: its
        C{client.pem}, or without one C{server.pem} (what Ganeti's RPC client
        then presents, and every NodeD accepts anyway)."""
        try:
            if not os.path.exists(self.paths.client_pem):
                return crypto.fingerprint(crypto.load_pem_file(self.paths.server_pem)[1])
            return crypto.cluster_cert_digest(self.paths)
        except errors.ConfigurationError as e:
            raise RpcFailure("Cannot read the node's client certificate: %s" % e) from None

    def _create_client_cert(self) -> None:
        """A new C{client.pem} for this node, signed by its C{server.pem}."""
        try:
            signer = crypto.load_pem_file(self.paths.server_pem)
        except errors.ConfigurationError as e:
            raise RpcFailure("Cannot issue a client certificate: %s" % e) from None
        key_pem, cert_pem = crypto.generate_key_and_cert(_node_name(self.paths), signer=signer)
        crypto.write_pem_file(self.paths.client_pem, key_pem, cert_pem)
        self.log.info("new client certificate {digest} in {path}", digest=crypto.fingerprint(cert_pem),
                      path=os.path.basename(self.paths.client_pem))


def _check_requests(token_requests: Any) -> None:
    if not isinstance(token_requests, list) or not token_requests:
        raise RpcFailure("node_crypto_tokens takes a non-empty list of [type, action, options]")
    if len(token_requests) > MAX_REQUESTS:
        raise RpcFailure("node_crypto_tokens takes at most %d requests" % MAX_REQUESTS)
    for request in token_requests:
        if not isinstance(request, list) or len(request) != 3:
            raise RpcFailure("a crypto token request is [type, action, options], not %.100r" % (request,))
        token_type, action, options = request
        if token_type != TYPE_SSL:
            raise RpcFailure("Token type '%s' not supported." % (token_type,))
        if action not in (ACTION_GET, ACTION_CREATE):
            raise RpcFailure("Action '%s' is not supported." % (action,))
        if options not in (None, {}):
            raise RpcFailure("crypto token options are not supported here: %.100r" % (options,))
