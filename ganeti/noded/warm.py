"""NodeD keeps a warm launcher of the master daemons on a master candidate.

L{WarmService} looks at this node's ssconf every L{CHECK_INTERVAL}
seconds: on a master candidate (or the master: it is warm already when the
master role comes back to it) it keeps a
L{ganeti.warmstart.WarmStarter} running (not where this node is the only
candidate: there is no failover to start them) and hands it to
L{ganeti.daemons.start} (L{ganeti.daemons.WARM}), so that a failover
(C{node_start_master_daemons}) forks WConfD, LuxiD and RAPI with their
imports done instead of starting cold Pythons; elsewhere (a plain node, no
cluster yet) it keeps none, and the daemons start cold.
"""

from __future__ import annotations

from typing import Any

from twisted.logger import Logger

from ganeti import daemons, errors, ssconf
from ganeti.asyncutil import Ticker
from ganeti.paths import Paths
from ganeti.warmstart import WarmStarter

#: seconds between two looks at this node's role
CHECK_INTERVAL = 5.0


def wanted(paths: Paths) -> bool:
    """Whether this node is a master candidate or the master, in a cluster
    where the master role can move (another candidate: its ssconf)."""
    store = ssconf.SimpleStore(paths)
    try:
        name = daemons.read_node_identity(paths)["name"]
        able = {store.get_master_node(), *store.get_master_candidates()}
        return name in able and len(able) > 1
    except (errors.ConfigurationError, SystemExit, OSError):
        return False


class WarmService(Ticker):
    """See the module docstring."""

    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, interval: float = CHECK_INTERVAL) -> None:
        super().__init__(reactor, interval)
        self.paths = paths
        self.starter: WarmStarter | None = None

    def startService(self) -> None:
        super().startService()
        self.check()

    def check(self) -> None:
        if wanted(self.paths):
            if self.starter is None or not self.starter.alive():
                self._stop_starter()
                self.starter = WarmStarter(self.paths.root, self.paths.run_dir)
                try:
                    self.starter.start()
                except OSError as e:
                    self.log.warn("ganeti-noded: no warm launcher of the master daemons: {e}", e=e)
                    self.starter = None
                    return
                daemons.WARM = self.starter.run
        elif self.starter is None or not self.starter.busy():  # not in the middle of a failover's start
            self._stop_starter()

    def _stop_starter(self) -> None:
        starter, self.starter = self.starter, None
        if starter is not None:
            if daemons.WARM == starter.run:
                daemons.WARM = None
            starter.stop()

    def stopService(self) -> Any:
        self._stop_starter()
        return super().stopService()


__all__ = ["CHECK_INTERVAL", "WarmService", "wanted"]
