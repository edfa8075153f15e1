"""WConfD's side of the HA parameters (L{ganeti.ha.params}): change, store, replicate.

    keeper = HaKeeper(paths, reactor, config, rpc=...)
    params = await keeper.change({"liveness_timeout": 5.0})   # durable here, then sent to every node
    distributor = HaStage(next_stage, keeper)                 # after each config push: nodes that lag

A change is validated against the current version (a bad value raises
L{errors.OpPrereqError} naming the parameter, and nothing changes), written
durably to this node's C{ha.data} with the serial one higher and this
master's epoch, and only then sent to every other online node with the
node RPC C{ha_params_store} (a node keeps the newest copy, by epoch then
serial: L{HaParams.rank}; the RPC carries the master epoch like every
other).  A node that answers with a newer version
than the master's (the master was down when it changed, and took over
since) makes the master adopt it and send it on.  A node that did not take it (down,
unreachable, added later) is sent the current version again after every
config distribution and on a timer, until it confirms.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet.defer import Deferred, DeferredLock, maybeDeferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from ganeti import errors
from ganeti.ha import params as ha_params
from ganeti.ha.epoch import read_epoch
from ganeti.ha.params import HaParams
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.rpc import procedures

#: seconds between attempts to reach nodes that missed a version
RETRY_INTERVAL = 5.0
#: seconds a node has to store a version
STORE_TIMEOUT = 10.0


def targets(config: ConfigData) -> dict[str, str]:
    """C{{name: primary ip}} of the nodes to send a version to: every online node but the master."""
    master = config.cluster.master_node
    return {n.name: n.primary_ip for n in config.nodes.values()
            if n.uuid != master and not n.offline and n.name and n.primary_ip}


def lagging(nodes: dict[str, str], confirmed: dict[str, tuple[int, int]], rank: tuple[int, int]) -> dict[str, str]:
    """The nodes of C{nodes} that have not confirmed the version of C{rank} (or a newer one)."""
    return {name: ip for name, ip in nodes.items() if confirmed.get(name, (-1, -1)) < rank}


class HaKeeper:
    """The master's copy of the HA parameters and its replication.

    @param config: the current configuration (who the nodes are)
    @param rpc: makes the node RPC client (L{ganeti.rpc.RpcClient}) when
        first needed; C{None}: this node has no certificates, nothing is sent
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, config: Callable[[], ConfigData], *,
                 rpc: Callable[[], Any] | None = None,
                 retry_interval: float = RETRY_INTERVAL) -> None:
        self.paths = paths
        self.reactor = reactor
        self.config = config
        self._make_rpc = rpc
        self._rpc: Any = None
        self.retry_interval = retry_interval
        self.current: HaParams = ha_params.read(paths)
        #: node name -> the newest version it confirmed (L{HaParams.rank})
        self.confirmed: dict[str, tuple[int, int]] = {}
        self._lock = DeferredLock()
        self._retry: Any = None

    async def change(self, changes: dict[str, Any]) -> HaParams:
        """Apply C{changes}: validate, store durably here, then send to every node.

        @raise errors.OpPrereqError: an unknown parameter or a bad value (nothing changed)
        """
        await self._lock.acquire()
        try:
            try:
                new = self.current.changed(**changes).under(read_epoch(self.paths))
            except (ha_params.HaParamsError, TypeError) as err:
                raise errors.OpPrereqError(str(err), errors.ECODE_INVAL) from None
            await self._blocking(ha_params.write, self.paths, new)
            self.current = new
            self.log.info("HA parameters changed (serial {serial}): {changes}", serial=new.serial_no,
                          changes=changes)
        finally:
            self._lock.release()
        await self.replicate()
        return new

    def _blocking(self, function: Callable[..., Any], *args: Any) -> Deferred:
        get_pool = getattr(self.reactor, "getThreadPool", None)
        if get_pool is None:
            return maybeDeferred(function, *args)
        return deferToThreadPool(self.reactor, get_pool(), function, *args)

    async def replicate(self) -> None:
        """Send the current version to every node that has not confirmed it."""
        params = self.current
        if self._make_rpc is None or params.serial_no == 0:  # no file anywhere means the defaults everywhere
            return
        nodes = lagging(targets(self.config()), self.confirmed, params.rank())
        if not nodes:
            return
        if self._rpc is None:
            self._rpc = self._make_rpc()
        results = await self._rpc.run(nodes, procedures.ha_params_store.call(params.to_dict()).within(STORE_TIMEOUT))
        missed = []
        newer = params
        for name, result in results.items():
            if result.failed:
                missed.append(name)
                self.log.warn("node {node} missed HA parameters serial {serial}: {why}", node=name,
                              serial=params.serial_no, why=result.fail_msg)
                continue
            held = _held(result.payload)
            self.confirmed[name] = max(self.confirmed.get(name, (-1, -1)), params.rank(),
                                       held.rank() if held is not None else (0, 0))
            if held is not None and held.rank() > newer.rank():
                newer = held
        if newer.rank() > self.current.rank():
            await self._adopt(newer)
        if missed and (self._retry is None or not self._retry.active()):
            self._retry = self.reactor.callLater(self.retry_interval, self._retry_lagging)

    async def _adopt(self, newer: HaParams) -> None:
        """A node holds a newer version than this master (it was down when
        it changed, then became master): keep it, and send it to the others."""
        await self._lock.acquire()
        try:
            if newer.rank() <= self.current.rank():
                return
            await self._blocking(ha_params.write, self.paths, newer)
            self.current = newer
            self.log.info("HA parameters serial {serial} adopted from a node (this one was behind)",
                          serial=newer.serial_no)
        finally:
            self._lock.release()
        self._retry_soon()

    def _retry_soon(self) -> None:
        if self._retry is None or not self._retry.active():
            self._retry = self.reactor.callLater(0, self._retry_lagging)

    def _retry_lagging(self) -> None:
        self._retry = None
        Deferred.fromCoroutine(self.replicate()).addErrback(
            lambda f: self.log.failure("retrying the HA parameters' replication failed", f))

    def stop(self) -> None:
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None


def _held(payload: Any) -> HaParams | None:
    """The version a node says it holds (C{ha_params_store}'s answer), if readable."""
    if not isinstance(payload, list) or len(payload) != 2:
        return None
    try:
        return HaParams.from_dict(payload[1])
    except ha_params.HaParamsError:
        return None


class HaStage:
    """A distributor stage: the next stage (the config push), then the HA
    parameters to the nodes that lack them (new nodes, nodes back up)."""

    log = Logger()

    def __init__(self, next_stage: Callable[[bytes, int], Any], keeper: HaKeeper) -> None:
        self.next_stage = next_stage
        self.keeper = keeper

    def __call__(self, data: bytes, serial: int) -> Deferred:
        d = maybeDeferred(self.next_stage, data, serial)

        def then(result: Any) -> Deferred:
            after = Deferred.fromCoroutine(self.keeper.replicate())
            after.addErrback(lambda f: self.log.failure("replicating the HA parameters failed", f))
            return after.addCallback(lambda _: result)

        return d.addBoth(then)
