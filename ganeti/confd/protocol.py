"""The confd DatagramProtocol: bytes in, signed answer out, no policy.

Everything about the packet format is in L{ganeti.confd.wire}; the answers
come from the L{ganeti.confd.answers.Index} the state object currently
holds (read once per datagram, so a reload swaps it atomically).
"""

from __future__ import annotations

import socket
from typing import Any, Protocol, cast

from twisted.internet.interfaces import IReactorTime, IUDPTransport
from twisted.internet.protocol import DatagramProtocol
from twisted.logger import Logger

from ganeti.confd import answers, wire

#: socket receive buffer asked for, so that bursts (and floods) queue in the kernel
RECEIVE_BUFFER = 4 * 1024 * 1024
#: seconds between two log lines about dropped packets
DROP_LOG_INTERVAL = 5.0


class ConfdState(Protocol):
    """What the protocol reads per datagram: the HMAC key and the current index."""

    key: bytes
    index: answers.Index | None
    #: keys accepted besides C{key} (renew-crypto); optional
    accepted_keys: tuple[bytes, ...]


class ConfdServerProtocol(DatagramProtocol):
    log = Logger()

    @property
    def _connected(self) -> IUDPTransport:
        """The transport, in methods that run only while connected."""
        return cast(IUDPTransport, self.transport)

    def __init__(self, state: ConfdState, clock: IReactorTime) -> None:
        self._state = state
        self._clock = clock
        self.answered = 0
        self.dropped = 0
        self._dropped_since_log = 0
        self._last_drop_log = float("-inf")
        self._no_config = answers.no_config_answer()

    def startProtocol(self) -> None:
        sock = getattr(self.transport, "socket", None)
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            except OSError:
                pass

    def datagramReceived(self, datagram: bytes, addr: Any) -> None:
        state = self._state
        key = state.key
        try:
            req = wire.unpack_request(key, datagram, self._clock.seconds())
        except wire.BadPacket as e:
            # while renew-crypto changes the key, the other key is accepted too (and answered with)
            for other in getattr(state, "accepted_keys", ()):
                try:
                    req = wire.unpack_request(other, datagram, self._clock.seconds())
                except wire.BadPacket:
                    continue
                key = other
                break
            else:
                self._drop(addr, e)
                return
        index = state.index
        try:
            if index is None:
                msg = self._no_config
            else:
                msg = index.encoded_answer(req["type"], req.get("query"))
            self._connected.write(wire.pack_reply(key, msg, req["rsalt"]), addr)
        except Exception:
            self.log.failure("answering a confd request from {addr}", addr=addr)
            return
        self.answered += 1

    def _drop(self, addr: Any, why: Exception) -> None:
        """Count a dropped packet; log at most one line per L{DROP_LOG_INTERVAL}."""
        self.dropped += 1
        self._dropped_since_log += 1
        now = self._clock.seconds()
        if now - self._last_drop_log >= DROP_LOG_INTERVAL:
            self.log.info(
                "dropped {count} bad confd packet(s); latest from {addr}: {why}",
                count=self._dropped_since_log,
                addr=addr,
                why=str(why),
            )
            self._last_drop_log = now
            self._dropped_since_log = 0
