"""The master daemons' fencing services over L{ganeti.ha.epoch}'s records (Twisted's: the daemons only).

L{EpochWatch} stops a master daemon once a newer master exists; L{ConfigEpochMark} records the epoch under
which WConfD writes config.data.  Apart from L{ganeti.ha.epoch} so that the command line, which reads the
epoch records, imports no Twisted.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.application.service import Service
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from ganeti.ha.epoch import adopt, mark_upgraded_config, process_epoch, read_epoch
from ganeti.paths import Paths


class EpochWatch(Service):
    """Fencing of a master daemon: it stops once a newer master exists.

    It adopts the node's epoch when started (before any RPC client exists
    and before LuxiD spawns its fork server) and stops the daemon (C{stop}) when a node refuses a call for a stale
    epoch, or when this node's own record shows a higher epoch (a new master
    raised it here), checked every C{interval} seconds.
    """

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, daemon: str, stop: Callable[[], None], *,
                 interval: float = 1.0) -> None:
        self.paths = paths
        self.reactor = reactor
        self.daemon = daemon
        self.epoch = read_epoch(paths)
        self._stop = stop
        self._stopping = False
        self._loop = LoopingCall(self._check)
        self._loop.clock = reactor
        self.interval = interval

    def startService(self) -> None:
        """Adopt the epoch (before the daemon's other services start: put
        this one first) and watch for a newer one."""
        super().startService()
        adopt(self.epoch, self.fence)
        self._loop.start(self.interval, now=False)

    def stopService(self) -> Any:
        if self._loop.running:
            self._loop.stop()
        return super().stopService()

    def _check(self) -> None:
        try:
            highest = read_epoch(self.paths)
        except (OSError, ValueError) as e:
            self.log.warn("cannot read the master epoch: {why}", why=str(e))
            return
        if highest > self.epoch:
            self.fence(highest)

    def fence(self, higher: int) -> None:
        """A newer master exists (epoch C{higher}): stop at once."""
        if self._stopping or higher <= self.epoch:
            return
        self._stopping = True
        self.log.critical("{daemon}: master epoch {higher} is newer than this master's {mine}: "
                          "another node took over; stopping", daemon=self.daemon, higher=higher, mine=self.epoch)
        self._stop()


class ConfigEpochMark(Service):
    """WConfD, once its start-up voting made it master: L{mark_upgraded_config}
    with the epoch this process adopted."""

    log = Logger()

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def startService(self) -> None:
        super().startService()
        from ganeti import daemons

        try:
            me = daemons.read_node_identity(self.paths)["name"]
        except (SystemExit, KeyError, TypeError):
            return
        epoch = process_epoch()
        if mark_upgraded_config(self.paths, epoch, me):
            self.log.info("config.data recorded as written under master epoch {epoch}", epoch=epoch)


__all__ = ["ConfigEpochMark", "EpochWatch"]
