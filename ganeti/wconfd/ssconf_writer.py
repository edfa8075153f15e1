"""A distributor stage: this node's ssconf files follow every config.data.

WConfD hands each durable config.data to its distributor (coalesced).  This
stage takes the store's in-memory config (no re-parse of config.data),
computes the ssconf values and writes the files that changed in a worker
thread, then passes the config on to the next stage (the node RPC push to
the master candidates, when the node daemon provides it).
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from ganeti import ssconf
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.reactors import ITimeThreadsReactor


class SsconfValues:
    """The ssconf values of a config, computed once per config serial.

    Shared by the distribution stages (this node's files, the push to the
    other nodes), which would otherwise each walk the whole config.  The
    sorted instance list is kept while the set of instance names stays the
    same (most changes: an instance modified, started, migrated), so that a
    change's ssconf costs a set of the names, not their sort (at 10,000
    instances 58 ms of a checkpoint's 80).
    """

    def __init__(self) -> None:
        self._cached: tuple[int, dict[str, list[str]]] | None = None
        self._instances: tuple[frozenset[str], list[str]] | None = None

    def __call__(self, config: ConfigData) -> dict[str, list[str]]:
        cached = self._cached  # one tuple: safe to read from worker threads
        if cached is not None and cached[0] == config.serial_no:
            return cached[1]
        names = frozenset(i.name for i in config.instances.values() if i.name is not None)
        kept = self._instances
        values = ssconf.compute(config, instance_list=kept[1] if kept is not None and kept[0] == names else None)
        self._instances = (names, values["instance_list"])
        self._cached = (config.serial_no, values)
        return values


class LocalSsconf:
    log = Logger()

    def __init__(
        self,
        paths: Paths,
        reactor: ITimeThreadsReactor,
        config: Callable[[], ConfigData],
        next_stage: Callable[[bytes, int], Any] | None = None,
        values: Callable[[ConfigData], dict[str, list[str]]] = ssconf.compute,
    ) -> None:
        self.paths = paths
        self.reactor = reactor
        self.config = config
        self.next_stage = next_stage
        self.values = values
        self.written_serial = 0

    def __call__(self, data: bytes, serial: int) -> Deferred:
        config = self.config()  # immutable records: safe to hand to a thread
        d = deferToThreadPool(self.reactor, self.reactor.getThreadPool(), self._write, config)

        def written(keys: list[str]) -> Any:
            self.written_serial = serial
            if keys:
                self.log.debug("ssconf for serial {serial}: wrote {keys}", serial=serial, keys=", ".join(keys))
            if self.next_stage is not None:
                return maybeDeferred(self.next_stage, data, serial)
            return None

        return d.addCallback(written)

    def _write(self, config: ConfigData) -> list[str]:
        return ssconf.write_files(self.paths, self.values(config), max_size=None)
