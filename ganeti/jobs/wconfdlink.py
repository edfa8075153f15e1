"""The connection to WConfD a job process makes ready before its job runs
(L{ganeti.jobs.process} for a forked job, L{ganeti.jobs.spare} for the
spare, which makes it before its job is known).

A process forked by the fork server starts with the server's copy of the
config (L{ganeti.luxid.configseed}, handed down with L{inherit}): its
first read then brings that forward instead of reading the whole config.
"""

from __future__ import annotations

from typing import Any

from ganeti.paths import Paths

#: (serial, config) the process was forked with (L{inherit}), if any
_inherited: tuple[int, Any] | None = None


def inherit(serial: int | None, config: Any) -> None:
    """Set, before a fork, the config (of serial C{serial}) the child's L{WConfdLink} starts from (C{None}: none)."""
    global _inherited
    _inherited = None if serial is None or config is None else (serial, config)


class WConfdLink:
    """The connection to WConfD a job process makes ready (with a first read
    of the config) before its job runs; L{deferred} fires with the client."""

    def __init__(self, reactor: Any, paths: Paths) -> None:
        from twisted.internet.defer import Deferred

        from ganeti.wconfd.client import JOB_RECONNECT_FOR, WConfdClient

        self.client: Any = None
        self.failed = False
        #: the first config read (errors dropped: the job reads it again)
        self.prefetched: list[Deferred] = []
        self.deferred: Deferred = Deferred.fromCoroutine(
            WConfdClient.connect(reactor, paths.wconfd_socket, reconnect_for=JOB_RECONNECT_FOR))
        self.deferred.addCallbacks(self._connected, self._failed)

    def _connected(self, client: Any) -> Any:
        from twisted.internet.defer import Deferred

        self.client = client
        client.cache_config = True  # the LUs read the config several times per opcode
        if _inherited is not None:
            client.adopt_config(*_inherited)
        self.prefetched.append(Deferred.fromCoroutine(client.read_config()).addErrback(lambda _f: None))
        return client

    def _failed(self, failure: Any) -> Any:
        self.failed = True
        return failure

    def usable(self) -> bool:
        """Whether the job may use this link (connecting, or connected and not gone for good)."""
        return not self.failed and (self.client is None or not self.client.gone)

    def close(self) -> Any:
        """Close the connection, or stop making it; a failed attempt is dropped."""
        if self.client is None:
            self.deferred.cancel()
        return self.deferred.addCallbacks(lambda client: client.close(), lambda _f: None)
