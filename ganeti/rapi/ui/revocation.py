"""A logout reaches every master candidate: the revoked sessions pushed to their nodes.

The web console's sessions are signed cookies that every candidate's RAPI
accepts (L{ganeti.rapi.ui.sessions}).  A logout on the master writes the
revoked session to C{var/lib/ganeti/rapi/ui-revoked}; L{RevocationPusher}
then copies that file at once to every online master candidate through its
node daemon (C{upload_file}, as WConfD copies the RAPI users file), so the
RAPI of whichever candidate becomes master after a failover refuses the
session too (each RAPI reads the file again when it changes).  A candidate
that misses the push (down at the time) gets the file with the next
configuration WConfD distributes, which carries it beside the users file.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger

from ganeti.daemons import read_node_identity
from ganeti.luxi import methods
from ganeti.paths import Paths
from ganeti.rpc import procedures, wire

#: seconds a candidate's node daemon has to take the file
PUSH_TIMEOUT = 30.0


class RevocationPusher:
    """Copies the revocation file to the other online master candidates.

    @param luxi: RAPI's LUXI pool (who the candidates are)
    @param rpc_port: the node daemons' port
    """

    log = Logger()

    def __init__(self, luxi: Any, paths: Paths, reactor: Any, rpc_port: int) -> None:
        self.luxi = luxi
        self.paths = paths
        self.reactor = reactor
        self.rpc_port = rpc_port

    def __call__(self, data: bytes) -> None:
        d = ensureDeferred(self.push(data))
        d.addErrback(lambda f: self.log.warn("web console: the logout was not pushed to the master candidates: "
                                             "{why} (WConfD carries it with the next configuration)",
                                             why=f.getErrorMessage()))

    async def push(self, data: bytes) -> dict[str, str | None]:
        """Push C{data}; node -> C{None} (taken) or why not."""
        from ganeti.rpc.client import RpcClient

        answer = await self.luxi.call(methods.Query.name, "node", ["name", "pip", "master_candidate", "offline"],
                                      None)
        try:
            me = read_node_identity(self.paths).get("name")
        except (OSError, ValueError, KeyError):
            me = None
        targets = {}
        for row in answer.get("data", []):
            (_, name), (_, pip), (_, candidate), (_, offline) = row
            if candidate and not offline and name != me and pip:
                targets[name] = pip
        if not targets:
            return {}
        details = wire.file_details(wire.virtual_path(self.paths.root, self.paths.ui_revoked), data, mode=0o640)
        client = RpcClient.from_paths(self.reactor, self.paths, port=self.rpc_port, persistent=False)
        try:
            results = await client.run(targets, procedures.upload_file.call(details).within(PUSH_TIMEOUT))
        finally:
            await client.close()
        outcome: dict[str, str | None] = {}
        for name, result in sorted(results.items()):
            outcome[name] = result.fail_msg if result.failed else None
            if result.failed:
                self.log.warn("web console: the logout did not reach candidate {node}: {why}", node=name,
                              why=result.fail_msg)
        return outcome
