"""C{cluster.candidate_certs}: one client certificate digest per master candidate.

As in Ganeti, C{candidate_certs} maps the UUID of the master and of every
master candidate to the SHA1 digest of that node's own client certificate
(C{client.pem}), and WConfD writes it to every node as
C{ssconf_master_candidates_certs}: the client certificates a NodeD accepts
(L{ganeti.rpc.tls.AllowedClients}).  A candidate that is missing there
cannot call the other nodes with its own certificate: Ganeti's
C{gnt-cluster master-failover}, run on it, then finds every other node
"unhealthy".

The digest is asked of the node itself (C{node_crypto_tokens}, Ganeti's
C{GetClientCertDigest}), when it becomes a candidate: node add, promotion
(C{gnt-node modify -C yes}, auto-promotion, pool growth), redist-conf for
candidates still missing (clusters made before this was kept), and
renew-crypto.  A node that leaves the candidates (demoted, offlined,
drained, removed) leaves the map.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from ganeti.cmdlib.base import ALL_SET, LEVEL_NODE, Feedback, LogicalUnit, register
from ganeti.objects import ConfigData, Node
from ganeti.opcodes.typed import OpClusterRenewCrypto, OpCode
from ganeti.rpc import procedures

#: Seconds a node gets to tell its digest.
DIGEST_TIMEOUT = 60.0
#: Ganeti's C{_MAX_NUM_RETRIES} of renew-crypto.
ATTEMPTS = 3


def holders(cfg: ConfigData) -> dict[str, Node]:
    """The nodes that belong in C{candidate_certs}: the master and the master candidates."""
    master = cfg.cluster.master_node
    return {uuid: node for uuid, node in cfg.nodes.items() if node.master_candidate or uuid == master}


def _address(node: Node) -> str:
    return node.primary_ip or node.name or ""


async def fetch_digests(lu: LogicalUnit[OpCode], nodes: Iterable[Node], *, create: bool = False,
                        attempts: int = 1) -> tuple[dict[str, str], dict[str, str]]:
    """Each node's client certificate digest (with C{create}: of a new
    certificate the node issues itself first).

    @return: C{({uuid: digest}, {node name: error})}
    """
    action = "create" if create else "get"
    wanted = {node.name or "": node for node in nodes if node.name}
    found: dict[str, str] = {}
    failed: dict[str, str] = {}
    rpc = lu.ctx.rpc()
    for _attempt in range(max(1, attempts)):
        pending = {name: _address(node) for name, node in wanted.items() if node.uuid not in found}
        if not pending:
            break
        answers = await rpc.run(pending, procedures.node_crypto_tokens.call([["ssl", action, {}]])
                                .within(DIGEST_TIMEOUT))
        for name, answer in answers.items():
            node = wanted[name]
            payload = answer.payload if not answer.failed else None
            if (isinstance(payload, list) and len(payload) == 1 and isinstance(payload[0], list)
                    and len(payload[0]) == 2 and isinstance(payload[0][1], str) and payload[0][1]):
                found[node.uuid or ""] = payload[0][1].upper()
                failed.pop(name, None)
            else:
                failed[name] = answer.fail_msg if answer.failed else "unexpected answer %.100r" % (payload,)
    return found, failed


async def sync(lu: LogicalUnit[OpCode], nodes: Iterable[str] | None = None, *,
               refresh: Iterable[str] = ()) -> dict[str, Any]:
    """Bring C{candidate_certs} in line with the candidates in C{lu.cfg}.

    @param nodes: UUIDs of the nodes to look at (default: every node; an LU
        holding only some node locks names those)
    @param refresh: UUIDs whose digest is asked again even if one is known
        (a re-added node has a new certificate)
    @return: the map as stored
    """
    cfg = lu.cfg
    scope = set(cfg.nodes) if nodes is None else set(nodes)
    wanted = holders(cfg)
    known = cfg.cluster.candidate_certs or {}
    again = set(refresh)
    ask = [wanted[uuid] for uuid in sorted(scope & set(wanted)) if uuid not in known or uuid in again]
    drop = {uuid for uuid in scope if uuid not in wanted and uuid in known}
    drop |= {uuid for uuid in known if uuid not in cfg.nodes and nodes is None}
    found, failed = await fetch_digests(lu, ask) if ask else ({}, {})
    for name, why in sorted(failed.items()):
        await lu.log_warning("Could not fetch the client certificate digest of node %s: %s; Ganeti's tools on"
                             " it cannot reach the other nodes until gnt-cluster redist-conf or renew-crypto"
                             " --new-node-certificates succeeds", name, why)
    if not found and not drop:
        return dict(known)

    def change(cluster: Any) -> Any:
        certs = {uuid: digest for uuid, digest in (cluster.candidate_certs or {}).items() if uuid not in drop}
        certs.update(found)
        return attrs.evolve(cluster, candidate_certs=certs)

    stored = await lu.modify("cluster", None, change)
    return dict(stored.candidate_certs or {})


async def replace(lu: LogicalUnit[OpCode], digests: dict[str, str]) -> None:
    """Set C{candidate_certs} to C{digests} wholesale (renew-crypto; Ganeti's C{SetCandidateCerts})."""
    await lu.modify("cluster", None, lambda cluster: attrs.evolve(cluster, candidate_certs=dict(digests)))


@register
class LUClusterRenewCrypto(LogicalUnit[OpClusterRenewCrypto]):
    """Ganeti's C{OP_CLUSTER_RENEW_CRYPTO}: with C{node_certificates}, every
    online node issues itself a new client certificate (C{node_crypto_tokens}
    C{create}, signed by the cluster certificate it holds; up to three tries
    each) and C{candidate_certs} becomes the new digests of the master and
    the candidates.  Nodes that fail are reported and keep their old
    certificate and digest.  Locks every node.

    Our daemons call nodes with the cluster certificate, so nothing they do
    fails meanwhile; a Ganeti tool run on a candidate is refused between its
    new certificate and the ssconf that carries its digest (seconds).
    """

    OP_ID = "OP_CLUSTER_RENEW_CRYPTO"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.needed_locks[LEVEL_NODE] = ALL_SET

    async def exec_(self, feedback: Feedback) -> Any:
        if self.op.node_certificates:
            await self.feedback("Renewing Node SSL certificates")
            await self._renew_node_certificates()
        if self.op.renew_ssh_keys:
            await self.feedback("Cannot renew SSH keys if the cluster is configured to not modify the SSH setup.")
        return None

    async def _renew_node_certificates(self) -> None:
        cfg = self.cfg
        online = [node for node in sorted(cfg.nodes.values(), key=lambda n: n.name or "") if not node.offline]
        for node in cfg.nodes.values():
            if node.offline:
                await self.log_info("Skipping offline node %s", node.name)
        found, failed = await fetch_digests(self, online, create=True, attempts=ATTEMPTS)
        if failed:
            await self.feedback("Some nodes' SSL client certificates could not be renewed. Please make sure those"
                                " nodes are reachable and rerun the operation. The affected nodes and their"
                                " errors are:\n" + "".join("Node %s: %s\n" % item for item in sorted(failed.items())))
        wanted = holders(cfg)
        known = cfg.cluster.candidate_certs or {}
        digests = {uuid: found.get(uuid) or known.get(uuid, "") for uuid in wanted}
        await replace(self, {uuid: digest for uuid, digest in digests.items() if digest})
