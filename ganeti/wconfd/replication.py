"""A distributor stage: config.data to the master candidates, ssconf to all.

After each durable config.data (coalesced by WConfD), the master pushes it
with the node RPC C{upload_file} to every online master candidate but
itself, and the ssconf values with C{write_ssconf_files} to every online
node.  A node that did not take it (down, unreachable) is retried on a
timer with the newest config, so it catches up when it returns.

A node this WConfD has not reached yet (at its start, a new node) first
gets the cluster-wide files the master has (L{ancillary_files}): confd's
HMAC key, RAPI's certificate and users file (RAPI runs on every
candidate and serves locally once its node is master), the cluster
domain secret.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from ganeti import ports, ssconf
from ganeti.objects import ConfigData
from ganeti.paths import Paths

#: seconds between attempts to reach nodes that missed a config
RETRY_INTERVAL = 5.0
PUSH_TIMEOUT = 60.0


class ConfigPusher:
    log = Logger()

    def __init__(
        self,
        paths: Paths,
        reactor: Any,
        config: Callable[[], ConfigData],
        snapshot: Callable[[], tuple[bytes, int]],
        *,
        rpc: Any = None,
        port: int = ports.NODED,
        retry_interval: float = RETRY_INTERVAL,
        values: Callable[[ConfigData], dict[str, list[str]]] = ssconf.compute,
    ) -> None:
        self.paths = paths
        self.reactor = reactor
        self.config = config
        self.snapshot = snapshot
        self.port = port
        self.retry_interval = retry_interval
        self.values = values
        self._rpc = rpc
        self._retry: Any = None
        #: node name -> last serial it confirmed (config for candidates, ssconf for all)
        self.confirmed: dict[str, int] = {}
        self.lagging: set[str] = set()

    def rpc(self) -> Any:
        if self._rpc is None:
            from ganeti.rpc import RpcClient

            self._rpc = RpcClient.from_paths(self.reactor, self.paths, port=self.port)
        return self._rpc

    def __call__(self, data: bytes, serial: int) -> Deferred:
        return Deferred.fromCoroutine(self.push(data, serial))

    async def push(self, data: bytes, serial: int) -> None:
        from ganeti.rpc import wire

        config = self.config()
        master = config.cluster.master_node
        nodes = [n for n in config.nodes.values() if n.uuid != master and not n.offline]
        if not nodes:
            self.lagging.clear()
            return
        pool = self.reactor.getThreadPool()
        vpath = wire.virtual_path(self.paths.root, self.paths.config_data)
        details = await deferToThreadPool(self.reactor, pool, wire.file_details, vpath, data, mode=0o640)
        values = await deferToThreadPool(self.reactor, pool, self.values, config)
        candidates = {n.name: n.primary_ip for n in nodes if n.master_candidate}
        everyone = {n.name: n.primary_ip for n in nodes}
        rpc = self.rpc()
        newcomers = {name: ip for name, ip in everyone.items() if name not in self.confirmed}
        if newcomers:  # the secrets every node needs (confd's key, RAPI's certificate, ...)
            for ancillary in await deferToThreadPool(self.reactor, pool, self._ancillary):
                await rpc.call(newcomers, "upload_file", [ancillary], timeout=PUSH_TIMEOUT)
        uploads = await rpc.call(candidates, "upload_file", [details], timeout=PUSH_TIMEOUT) if candidates else {}
        writes = await rpc.call(everyone, "write_ssconf_files", [values], timeout=PUSH_TIMEOUT)
        missed = set()
        for name in everyone:
            results = [writes[name]] + ([uploads[name]] if name in uploads else [])
            failed = [r for r in results if r.failed]
            if failed:
                missed.add(name)
                if name not in self.lagging:
                    self.log.warn("node {node} missed config serial {serial}: {why}", node=name, serial=serial, why=failed[0].fail_msg)
            else:
                if name in self.lagging:
                    self.log.info("node {node} caught up with config serial {serial}", node=name, serial=serial)
                self.confirmed[name] = serial
        self.lagging = missed
        if missed and (self._retry is None or not self._retry.active()):
            self._retry = self.reactor.callLater(self.retry_interval, self._retry_lagging)

    def _ancillary(self) -> list[list[Any]]:
        return ancillary_files(self.paths)

    def _retry_lagging(self) -> None:
        self._retry = None
        data, serial = self.snapshot()
        d = self(data, serial)
        d.addErrback(lambda f: self.log.failure("retrying config distribution failed", f))

    def stop(self) -> None:
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None


def ancillary_files(paths: Paths) -> list[list[Any]]:
    """C{upload_file} arguments for the cluster-wide files this node has
    (missing ones are left out: the RAPI users file is optional)."""
    from ganeti.rpc import wire

    files = []
    for path, mode in (
        (paths.hmac_key, 0o400),
        (paths.rapi_pem, 0o440),
        (paths.rapi_users, 0o640),
        (paths.cluster_domain_secret, 0o400),
    ):
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        files.append(wire.file_details(wire.virtual_path(paths.root, path), data, mode=mode))
    return files
