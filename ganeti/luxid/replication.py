"""Job files to the master candidates, with the node RPC C{jobqueue_update}.

The candidates (and their addresses) come from this node's ssconf files,
which WConfD keeps current.  A new job is acknowledged only once a
majority of the candidates hold its file (this node's own durable write
counts as one); every later write of a job file is pushed in the
background, newest content per file.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ganeti.paths import Paths

TIMEOUT = 30.0


class JobReplicator:
    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, *, port: int = 1811, rpc: Any = None) -> None:
        self.paths = paths
        self.reactor = reactor
        self.port = port
        self._rpc = rpc
        self._pending: dict[str, bytes] = {}
        self._pushing = False

    def rpc(self) -> Any:
        if self._rpc is None:
            from ganeti.rpc import RpcClient

            self._rpc = RpcClient.from_paths(self.reactor, self.paths, port=self.port)
        return self._rpc

    def candidates(self) -> dict[str, str]:
        """The other master candidates: {name: address} (from ssconf)."""
        try:
            with open(self.paths.ssconf("master_candidates")) as handle:
                names = handle.read().split()
            with open(self.paths.ssconf("master_candidates_ips")) as handle:
                ips = handle.read().split()
            with open(self.paths.ssconf("master_node")) as handle:
                master = handle.read().strip()
        except OSError:
            return {}
        return {name: ip for name, ip in zip(names, ips) if name != master}

    async def replicate(self, files: list[tuple[str, bytes]]) -> tuple[int, int]:
        """Push C{files} to every candidate; returns (holders, candidates), self included."""
        from ganeti.rpc import wire

        others = self.candidates()
        if not others:
            return 1, 1
        holders = set(others)
        for path, content in files:
            vpath = wire.virtual_path(self.paths.root, path)
            results = await self.rpc().call(others, "jobqueue_update", [vpath, wire.compress(content)], timeout=TIMEOUT)
            for name, result in results.items():
                if result.failed:
                    holders.discard(name)
                    self.log.warn("job file {path} not replicated to {node}: {why}", path=path, node=name, why=result.fail_msg)
        return len(holders) + 1, len(others) + 1

    def background(self, path: str, content: bytes) -> None:
        """Push a write later (coalesced: only the newest content per file)."""
        if not self.candidates():
            return
        self._pending[path] = content
        if not self._pushing:
            self._pushing = True
            d = Deferred.fromCoroutine(self._drain())
            d.addErrback(lambda f: self.log.failure("job file replication failed", f))

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch, self._pending = list(self._pending.items()), {}
                await self.replicate(batch)
        finally:
            self._pushing = False
