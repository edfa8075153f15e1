"""An asynchronous confd client for any Twisted program.

    client = ConfdClient(reactor, key, ["192.0.2.1", "192.0.2.2"])   # or ConfdClient.from_paths(...)
    result = await client.query(wire.REQ_NODE_ROLE_BYNAME, "node3")
    result.answer, result.serial

A query goes to every peer (the master candidates of ssconf) in parallel,
each copy with its own C{rsalt}.  Replies are filtered: a wrong signature,
an unknown salt or a salt answered from another address than the one it was
sent to is dropped; of the rest the best wins (an OK status over an error,
then the highest serial).  The Deferred fires once C{wait} replies are in
(C{"majority"}: Ganeti's rule, C{"all"}: every peer) or, with what has
arrived, when C{timeout} expires; with no reply at all it fails with
L{ConfdTimeout}.
"""

from __future__ import annotations

import uuid
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.protocol import DatagramProtocol
from twisted.logger import Logger

from ganeti.confd import wire
from ganeti.paths import Paths
from ganeti.reactors import ITimeUDPReactor

#: CONFD_CLIENT_EXPIRE_TIMEOUT
DEFAULT_TIMEOUT = 10.0


class ConfdTimeout(Exception):
    """No peer answered in time."""


@attrs.frozen
class ConfdReply:
    peer: str
    status: int
    answer: Any
    serial: int

    @property
    def ok(self) -> bool:
        return self.status == wire.REPL_STATUS_OK


@attrs.frozen
class ConfdResult:
    """The chosen reply of one query and how it was reached."""

    status: int
    answer: Any
    serial: int
    peer: str
    replies: tuple[ConfdReply, ...]
    sent: int
    timed_out: bool
    #: False when two peers gave different answers with the same serial
    consistent: bool

    @property
    def ok(self) -> bool:
        return self.status == wire.REPL_STATUS_OK


def needed_replies(peers: int, wait: str) -> int:
    """How many replies to wait for (Ganeti's C{WaitForReply} rule for C{majority})."""
    if wait == "all" or peers < 3:
        return peers
    if wait != "majority":
        raise ValueError("wait must be 'majority' or 'all', not %r" % (wait,))
    if peers < 5:
        return peers - 1
    return peers // 2 + 1


def better(new: ConfdReply, old: ConfdReply | None) -> bool:
    """Whether C{new} replaces C{old}: OK beats an error, then the higher serial."""
    if old is None:
        return True
    if new.ok != old.ok:
        return new.ok
    return new.serial > old.serial


class _Query:
    def __init__(self, sent: int, needed: int) -> None:
        self.deferred: Deferred[ConfdResult] = Deferred()
        self.sent = sent
        self.needed = needed
        self.replies: list[ConfdReply] = []
        self.best: ConfdReply | None = None
        self.consistent = True
        self.salts: list[str] = []
        self.timer: Any = None

    def add(self, reply: ConfdReply) -> None:
        for other in self.replies:
            if other.ok and reply.ok and other.serial == reply.serial and other.answer != reply.answer:
                self.consistent = False
        self.replies.append(reply)
        if better(reply, self.best):
            self.best = reply

    def result(self, timed_out: bool) -> ConfdResult:
        best = self.best
        assert best is not None
        return ConfdResult(
            status=best.status,
            answer=best.answer,
            serial=best.serial,
            peer=best.peer,
            replies=tuple(self.replies),
            sent=self.sent,
            timed_out=timed_out,
            consistent=self.consistent,
        )


class _ClientProtocol(DatagramProtocol):
    def __init__(self, client: ConfdClient) -> None:
        self._client = client

    def datagramReceived(self, datagram: bytes, addr: Any) -> None:
        self._client._received(datagram, addr)


class ConfdClient:
    log = Logger()

    def __init__(
        self,
        reactor: ITimeUDPReactor,
        key: bytes,
        peers: list[str],
        *,
        port: int = wire.PORT,
        timeout: float = DEFAULT_TIMEOUT,
        bind: str = "",
    ) -> None:
        if not peers:
            raise ValueError("no confd peers")
        self._reactor = reactor
        self._key = key
        self.peers = list(peers)
        self.port = port
        self.timeout = timeout
        self._bind = bind
        self._listening: Any = None
        self._outstanding: dict[str, tuple[str, _Query]] = {}
        self.dropped = 0

    @classmethod
    def from_paths(cls, reactor: ITimeUDPReactor, paths: Paths, **kwargs: Any) -> ConfdClient:
        """A client for the master candidates of ssconf, with the node's hmac.key."""
        from ganeti.confd.service import read_key  # here: MonD uses the client without them
        from ganeti.ssconf import SimpleStore

        peers = SimpleStore(paths).get_master_candidates_ips()
        return cls(reactor, read_key(paths.hmac_key), peers, **kwargs)

    def _ensure_listening(self) -> None:
        if self._listening is None:
            self._listening = self._reactor.listenUDP(0, _ClientProtocol(self), interface=self._bind, maxPacketSize=65536)

    def query(self, qtype: int, query: Any = None, *, wait: str = "majority", timeout: float | None = None) -> Deferred[ConfdResult]:
        """Ask every peer; see the module docstring for when the Deferred fires."""
        needed = needed_replies(len(self.peers), wait)
        self._ensure_listening()
        state = _Query(len(self.peers), needed)
        now = self._reactor.seconds()
        for peer in self.peers:
            rsalt = str(uuid.uuid4())
            packet = wire.pack_request(self._key, wire.request(qtype, query, rsalt), now)
            self._outstanding[rsalt] = (peer, state)
            state.salts.append(rsalt)
            try:
                self._listening.write(packet, (peer, self.port))
            except Exception as e:
                self.log.warn("cannot send to confd at {peer}: {why}", peer=peer, why=str(e))
        state.timer = self._reactor.callLater(self.timeout if timeout is None else timeout, self._expire, state)
        return state.deferred

    def _finish(self, state: _Query) -> None:
        for salt in state.salts:
            self._outstanding.pop(salt, None)
        if state.timer is not None and state.timer.active():
            state.timer.cancel()

    def _expire(self, state: _Query) -> None:
        state.timer = None
        self._finish(state)
        if state.best is None:
            state.deferred.errback(ConfdTimeout("no confd answer from %d peer(s)" % state.sent))
        else:
            state.deferred.callback(state.result(timed_out=True))

    def _received(self, datagram: bytes, addr: Any) -> None:
        try:
            rep, salt = wire.unpack_reply(self._key, datagram)
        except wire.BadPacket as e:
            self.dropped += 1
            self.log.debug("dropped confd reply from {addr}: {why}", addr=addr, why=str(e))
            return
        entry = self._outstanding.get(salt)
        if entry is None or entry[0] != addr[0] or addr[1] != self.port:
            self.dropped += 1
            return
        peer, state = entry
        del self._outstanding[salt]
        state.add(ConfdReply(peer, rep["status"], rep["answer"], rep.get("serial", 0)))
        if len(state.replies) >= state.needed:
            self._finish(state)
            state.deferred.callback(state.result(timed_out=False))

    def close(self) -> Any:
        """Stop listening; outstanding queries still fire on their timeout."""
        port, self._listening = self._listening, None
        if port is not None:
            return port.stopListening()
        return None
