"""Ganeti 3.0's own WConfD protocol, the part its own tools use outside jobs.

Ganeti's C{gnt-cluster master-failover} (C{bootstrap.MasterFailover})
starts WConfD on the new master and changes C{master_node} through Ganeti's
WConfD client (C{ganeti.wconfd.Client}): JSON requests C{{"method",
"args"}} ending in an ETX byte, as LUXI, on the same socket as our AMP
(method names as Ganeti's stub sends them: C{readConfig}, ...).
A connection whose first byte is C{"{"} speaks that protocol (an AMP
connection starts with a key length, a zero byte); it is answered here:

    - C{ReadConfig()}, C{LockConfig(cid, shared)}: the whole config (a
      shared read; an exclusive lock, which Ganeti takes only to write the
      whole config, is refused);
    - C{UnlockConfig(cid)}, C{DropAllReservations(cid)}: nothing to do;
    - C{UpdateCluster(cluster)}: the cluster object replaced, when its
      C{serial_no} is the stored one (a change made since it was read is
      refused); answers C{[serial_no, mtime]};
    - C{VerifyConfig()}: the config's problems; C{FlushConfig()}.

Anything else is refused naming the method; nothing changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from ganeti import errors, serializer
from ganeti.luxi import wire

if TYPE_CHECKING:
    from ganeti.wconfd.service import WConfdService

#: the byte a Ganeti client's first request starts with
FIRST_BYTE = b"{"


class GanetiFront:
    """One connection of Ganeti's WConfD client.

    @param service: the daemon's service
    @param write: sends bytes to the client
    """

    log = Logger()

    def __init__(self, service: WConfdService, write: Callable[[bytes], None]) -> None:
        self.service = service
        self.write = write
        self.framer = wire.Framer()
        #: requests answered in order, one at a time
        self._queue: Deferred[None] = Deferred()
        self._queue.callback(None)

    def feed(self, data: bytes) -> None:
        try:
            payloads = list(self.framer.feed(data))
        except wire.LuxiProtocolError as e:
            self.write(wire.encode_parse_failure(str(e)))
            return
        for payload in payloads:
            self._queue.addCallback(self._next, payload)

    def _next(self, _previous: None, payload: bytes) -> Deferred[None]:
        return Deferred.fromCoroutine(self._answer(payload))

    async def _answer(self, payload: bytes) -> None:
        try:
            method, args = wire.decode_request(payload)
        except wire.LuxiProtocolError as e:
            self.write(wire.encode_parse_failure(str(e)))
            return
        try:
            result = await self.call(method, args)
        except errors.GenericError as e:
            self.write(wire.encode_error(e))
            return
        except Exception as e:  # a bug: the client gets its text, the log the details
            self.log.failure("Ganeti WConfD client: {method} failed", method=method)
            self.write(wire.encode_error(errors.GenericError("%s failed: %s: %s" % (method, type(e).__name__, e))))
            return
        self.write(wire.encode_response(True, result))

    async def call(self, method: str, args: list[Any]) -> Any:
        """The answer to Ganeti's C{method(*args)}.

        @raise errors.GenericError: refused (unknown method, bad arguments, stale cluster)
        """
        service = self.service
        if method == "readConfig" and not args:
            return self._config()
        if method == "lockConfig" and len(args) == 2:
            if not args[1]:
                raise errors.ConfigurationError(
                    "LockConfig exclusive is not supported: Ganeti's tools may read the config and change the"
                    " cluster object (UpdateCluster) only")
            return self._config()
        if method in ("unlockConfig", "dropAllReservations") and len(args) == 1:
            return None
        if method == "verifyConfig" and not args:
            return service.config_store.verify()
        if method == "flushConfig" and not args:
            await service.flush()
            return None
        if method == "updateCluster" and len(args) == 1:
            if not isinstance(args[0], dict):
                raise errors.ConfigurationError("UpdateCluster takes the cluster object")
            stored = await service.update_cluster(args[0])
            return [stored.serial_no, stored.mtime]
        raise errors.ProgrammerError(
            "%s with %d argument(s) is not served here: this WConfD answers Ganeti's readConfig, lockConfig"
            " (shared), unlockConfig, dropAllReservations, verifyConfig, flushConfig and updateCluster"
            % (method, len(args)))

    def _config(self) -> Any:
        data, _serial = self.service.read_config()
        return serializer.loads(data)


__all__ = ["FIRST_BYTE", "GanetiFront"]
