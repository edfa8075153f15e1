"""The node RPC client: one procedure on many nodes, in parallel.

    client = RpcClient.from_paths(reactor, paths)
    results = await client.run({"node1": "127.0.1.1", "node2": "127.0.1.2"}, procedures.version.call())
    for name, result in results.items():
        if result.failed:
            print(name, result.fail_msg)      # e.g. "node unreachable: connection refused"
        else:
            print(name, result.payload)
    await client.close()

Every node gets its own request and its own timeout; a node that is down,
slow, or answers garbage gives a failed L{RpcResult} for that node only.
A call is built from its declaration in L{ganeti.rpc.procedures}
(arguments checked by mypy and at run time, timeout from its class);
L{RpcClient.call} by name with a positional list remains for callers not
converted yet.

With a C{retry_window} (jobs use L{wire.RETRY_WINDOW}, 15 s), a call that
cannot have reached the node's handler (connection refused: its NodeD is
restarting; the request not sent in full) is sent again, after 0.1 s, then
twice as long each time up to 1 s, for up to the window and within the
call's timeout; a procedure declared idempotent is sent again after any
transport failure (a connection lost before the answer).  A connect
timeout, a TLS or certificate failure, an answer of the node (its error
included) and the timeout are never retried.  Without a window (the
default: the election, the failover and the replication have their own
rules) every call is tried once.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import attrs
from twisted.internet import defer
from twisted.internet import error as ierror
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti.asyncutil import tcp_client_endpoint
from ganeti.ha import epoch as master_epoch
from ganeti.jobs import trace
from ganeti.paths import Paths
from ganeti.reactors import ITimeTCPReactor
from ganeti.rpc import procedures, wire
from ganeti.rpc.contract import Call, Runner
from ganeti.rpc.http import AnswerCut, HttpClient, Key, NoAnswer, NotSent
from ganeti.rpc.local import LocalNoded, unix_endpoint
from ganeti.rpc.tls import PinnedPolicy, ReloadingPolicy
from ganeti.tlsbio import TLSError, wrap_client

#: How a node is reached: an IP address (default port) or C{(address, port)}.
Address = str | tuple[str, int]

#: Seconds the nodes still silent get once a call's C{enough} holds (see L{RpcClient.call}).
QUORUM_GRACE = 0.3
#: How the result of a node L{RpcClient.call} stopped waiting for begins.
ABANDONED = "abandoned"
#: A call's condition on the results so far: the caller has what it needs.
Enough = Callable[[Mapping[str, "RpcResult"]], bool]

#: idle connections kept open to each node (a daemon's fds grow by at most this per node)
MAX_PERSISTENT_PER_HOST = 4


class NodeEndpoints:
    """Where a connection goes: a node's IP address directly.

    Twisted's C{HostnameEndpoint} reports a refused connection only after
    its 0.3 s "happy eyeballs" delay, even for an address literal with
    nothing else to try: every call that includes a dead node (the old
    master in a failover, the start-up vote of the new master's daemons)
    waited for it.  L{tcp_client_endpoint} connects to an IPv4 or IPv6
    literal directly (a refusal is known at once).

    @param policy: the TLS policy
    @param connect_timeout: seconds to establish a TCP connection
    @param local: this node's NodeD, reached over its Unix socket without
        TLS (L{ganeti.rpc.local}); C{None}: every node over TCP
    """

    def __init__(self, reactor: ITimeTCPReactor, policy: Any, connect_timeout: float,
                 local: LocalNoded | None = None) -> None:
        self._reactor = reactor
        self._policy = policy
        self._timeout = connect_timeout
        self._local = local

    def route(self, host: str, port: int) -> Key:
        """The pool's key for a request to C{host}:C{port} (this node's own NodeD: its socket)."""
        return (self._local.socket_for(host, port) if self._local is not None else None, host, port)

    def endpoint(self, key: Key) -> Any:
        path, host, port = key
        if path is not None:
            return unix_endpoint(self._reactor, path, self._timeout)
        endpoint = tcp_client_endpoint(self._reactor, host, port, self._timeout)
        return wrap_client(self._policy.creatorForNetloc(host.encode("ascii"), port), endpoint)


class RpcError(Exception):
    """Raised by L{RpcResult.raise_on_fail}."""


@attrs.frozen
class RpcResult:
    """What one node answered to one call.

    @ivar node: the node's name, as given to the call
    @ivar success: whether the node ran the procedure and it succeeded
    @ivar payload: the procedure's result (C{None} on failure)
    @ivar fail_msg: why the call failed (C{None} on success): the node's
        own error message, or a transport failure such as
        C{"node unreachable: connection refused"} or C{"timeout after 60s"}
    @ivar offline: the node was not contacted because it is offline
    """

    node: str
    success: bool
    payload: Any = None
    fail_msg: str | None = None
    offline: bool = False

    @property
    def failed(self) -> bool:
        return not self.success

    def raise_on_fail(self, prefix: str = "") -> Any:
        """The payload, or L{RpcError} with the failure message."""
        if not self.success:
            raise RpcError("%s%s: %s" % (prefix + ": " if prefix else "", self.node, self.fail_msg))
        return self.payload

    @classmethod
    def failure(cls, node: str, msg: str, *, offline: bool = False) -> RpcResult:
        return cls(node, False, None, msg, offline)


def _transport_message(reason: BaseException) -> str:
    """A clear, short message for a transport-level failure."""
    if isinstance(reason, ierror.ConnectionRefusedError):
        return "node unreachable: connection refused"
    if isinstance(reason, (ierror.TimeoutError, ierror.TCPTimedOutError)):
        return "node unreachable: connect timeout"
    if isinstance(reason, (ierror.NoRouteError, ierror.DNSLookupError, ierror.ConnectError)):
        return "node unreachable: %s" % (reason.__class__.__name__,)
    if isinstance(reason, (NotSent, NoAnswer, AnswerCut)):
        inner = [f.value for f in reason.reasons]
        if any(isinstance(r, TLSError) for r in inner):
            return "TLS handshake failed (certificate not accepted): %s" % "; ".join(str(r) for r in inner)
        return "connection lost: %s" % "; ".join(str(r) or r.__class__.__name__ for r in inner)
    if isinstance(reason, TLSError):
        return "TLS error: %s" % (reason,)
    return "%s: %s" % (reason.__class__.__name__, reason)


def _never_reached(reason: BaseException) -> bool:
    """Whether a call that failed with C{reason} cannot have reached the
    node's handler (connection refused or not made, request not sent in full)."""
    if isinstance(reason, (ierror.TimeoutError, ierror.TCPTimedOutError)):
        return False  # a connect timeout: the node is down, not restarting (5 s spent already)
    if isinstance(reason, ierror.ConnectError):
        return True
    return isinstance(reason, NotSent) and not _tls_failure(reason)


def _cancelled(reason: BaseException) -> bool:
    """Whether a call failed because its caller cancelled it: plainly, or
    wrapped by the HTTP client (L{NoAnswer} of a C{CancelledError})."""
    if isinstance(reason, CancelledError):
        return True
    inner = getattr(reason, "reasons", None) or []
    return any(isinstance(f.value, CancelledError) for f in inner)


def _tls_failure(reason: BaseException) -> bool:
    if isinstance(reason, TLSError):
        return True
    inner = getattr(reason, "reasons", None) or []
    return any(isinstance(f.value, TLSError) for f in inner)


def _retriable(reason: BaseException, idempotent: bool) -> bool:
    """Whether a call that failed with C{reason} may be sent again."""
    if _never_reached(reason):
        return True
    if not idempotent or _tls_failure(reason):
        return False
    if isinstance(reason, (ierror.TimeoutError, ierror.TCPTimedOutError)):
        return False
    return isinstance(reason, (NoAnswer, AnswerCut, ierror.ConnectionLost, ierror.ConnectionDone))


def _until_enough(reactor: Any, names: list[str], calls: list[Deferred[RpcResult]], enough: Enough, grace: float,
                  procedure: str) -> list[Deferred[RpcResult]]:
    """C{calls} (one per name), each of which ends C{grace} seconds after
    C{enough} first holds for the results in, as L{ABANDONED} if it has not
    ended by then (its request is cancelled)."""
    results: dict[str, RpcResult] = {}
    pending: dict[str, Deferred[RpcResult]] = {}
    timer: list[Any] = []

    def cut() -> None:
        for d in list(pending.values()):
            d.cancel()

    def check() -> None:
        if not timer and pending and enough(dict(results)):
            timer.append(reactor.callLater(grace, cut))
        if not pending and timer and timer[0].active():
            timer[0].cancel()

    out: list[Deferred[RpcResult]] = []
    for name, d in zip(names, calls):
        pending[name] = d

        def ended(result: Any, name: str = name) -> Any:
            pending.pop(name, None)
            if isinstance(result, Failure):
                if not result.check(CancelledError):
                    return result
                result = RpcResult.failure(name, "%s: no answer %gs after enough nodes had answered (%s)"
                                           % (ABANDONED, grace, procedure))
            results[name] = result
            check()
            return result

        out.append(d.addBoth(ended))
    check()
    return out


class RpcClient(Runner):
    """Calls node daemons over mutual TLS (see L{ganeti.rpc.tls}): a
    declared call with L{run} and L{run_one} (L{Runner}).

    @param reactor: provides C{IReactorTCP} and C{IReactorTime}
    @param policy: the TLS policy (L{PinnedPolicy})
    @param port: default noded port
    @param persistent: keep connections open between calls
    @param connect_timeout: seconds to establish a TCP connection
    @param epoch: the master epoch sent with every call (L{ganeti.ha.epoch});
        C{None}: none is sent
    @param retry_window: seconds a call is sent again while the node's
        NodeD is restarting (see the module docstring); 0: never
    @param local: this node's NodeD, called over its Unix socket
        (L{ganeti.rpc.local}; L{from_paths} gives it); C{None}: over TCP
    """

    log = Logger()

    def __init__(
        self,
        reactor: ITimeTCPReactor,
        policy: PinnedPolicy | ReloadingPolicy,
        *,
        port: int = wire.DEFAULT_PORT,
        persistent: bool = True,
        connect_timeout: float = wire.CONNECT_TIMEOUT,
        epoch: int | None = None,
        retry_window: float = 0.0,
        local: LocalNoded | None = None,
    ) -> None:
        self._reactor = reactor
        self.epoch = epoch
        self.retry_window = retry_window
        self._headers = b"Content-Type: application/json\r\n"
        if epoch is not None:
            self._headers += b"%s: %d\r\n" % (master_epoch.HEADER, epoch)
        self._port = port
        self._endpoints = NodeEndpoints(reactor, policy, connect_timeout, local)
        self._http = HttpClient(self._endpoints.endpoint, persistent=persistent, max_idle=MAX_PERSISTENT_PER_HOST)
        #: the calls waiting for a warm-up's connection (L{warm}), by node (host, port)
        self._warming: dict[tuple[str, int], list[Deferred[None]]] = {}

    @classmethod
    def from_paths(cls, reactor: ITimeTCPReactor, paths: Paths, **kwargs: Any) -> RpcClient:
        """A client presenting this node's cluster certificate (C{server.pem}),
        calling this node's own NodeD over its Unix socket (L{ganeti.rpc.local}).

        Unless C{epoch} is given, it sends the epoch this process acts under
        (L{ganeti.ha.epoch.process_epoch}: set in the master daemons).
        """
        kwargs.setdefault("epoch", master_epoch.process_epoch())
        kwargs.setdefault("local", LocalNoded(paths, kwargs.get("port", wire.DEFAULT_PORT)))
        return cls(reactor, ReloadingPolicy(paths), **kwargs)

    async def close(self) -> None:
        await self._http.close()

    def _target(self, address: Address) -> tuple[str, int]:
        """A node's host and port (an address alone: this client's NodeD port)."""
        return (address, self._port) if isinstance(address, str) else address

    async def call(
        self,
        nodes: Mapping[str, Address] | Iterable[tuple[str, Address]],
        procedure: str,
        args: list[Any] | tuple[Any, ...] = (),
        *,
        timeout: float = wire.TMO_URGENT,
        node_args: Mapping[str, list[Any]] | None = None,
        offline: Iterable[str] = (),
        retry: bool = True,
        enough: Enough | None = None,
        grace: float = QUORUM_GRACE,
    ) -> dict[str, RpcResult]:
        """Call C{procedure} on every node at once, by name with a positional
        list (unchecked: new code uses L{run} with a declared call).

        @param nodes: C{{name: address}} (or pairs), in the order wanted
        @param args: positional arguments, the same for every node
        @param timeout: per-node limit in seconds for the whole call
        @param node_args: per-node arguments replacing C{args}
        @param offline: names not to contact (their result says "node offline")
        @param retry: whether this client's retry window applies (see the module docstring)
        @param enough: given the results so far, whether the caller has what
            it needs (a strict majority, say); once it does, the nodes still
            silent get C{grace} more seconds, then count as not answering
            (L{ABANDONED}): a frozen or cut-off node does not hold the
            caller up for the whole C{timeout}
        @return: C{{name: RpcResult}} for every node, in the given order;
            never raises for a node's failure
        """
        if not wire.valid_procedure(procedure):
            raise ValueError("invalid procedure name %r" % (procedure,))
        pairs = list(nodes.items()) if isinstance(nodes, Mapping) else list(nodes)
        skip = set(offline)
        common = wire.encode_request(args)
        calls = []
        for name, address in pairs:
            if name in skip:
                calls.append(defer.succeed(RpcResult.failure(name, "node offline", offline=True)))
                continue
            body = wire.encode_request(node_args[name]) if node_args and name in node_args else common
            calls.append(defer.ensureDeferred(self._call_one(name, address, procedure, body, timeout, retry)))
        if enough is not None:
            calls = _until_enough(self._reactor, [name for name, _address in pairs], calls, enough, grace, procedure)
        results = await defer.gatherResults(calls)
        return {result.node: result for result in results}

    async def run(
        self,
        nodes: Mapping[str, Address] | Iterable[tuple[str, Address]],
        call: Call[Any],
        *,
        per_node: Mapping[str, Call[Any]] | None = None,
        offline: Iterable[str] = (),
        enough: Enough | None = None,
        grace: float | None = None,
    ) -> dict[str, RpcResult]:
        """Make a declared C{call} (L{ganeti.rpc.procedures}) on every node at
        once, within its timeout; as L{call} otherwise."""
        results: dict[str, RpcResult] = await super().run(nodes, call, per_node=per_node, offline=offline,
                                                          enough=enough, grace=grace)
        return results

    async def run_one(self, name: str, address: Address, call: Call[Any]) -> RpcResult:
        """Make a declared C{call} on a single node."""
        result: RpcResult = await super().run_one(name, address, call)
        return result

    async def warm(self, name: str, address: Address, call: Call[Any]) -> None:
        """Make C{call} on one node to open a connection before it is needed
        (the TCP and TLS handshakes, the client's first use).  Calls to that
        node made meanwhile wait for it to end, then find its connection in
        the pool, instead of paying for a second one.  Never raises."""
        key = self._target(address)
        if key in self._warming:
            return
        # runs to its first wait, past _call_one's look at the warm-ups: it does not wait for itself
        made = defer.ensureDeferred(self.run_one(name, address, call))
        self._warming[key] = []
        try:
            await made
        except Exception:  # a node that does not answer leaves the callers to connect for themselves
            pass
        finally:
            for waiter in self._warming.pop(key, []):
                if not waiter.called:  # (a waiter cancelled by its caller is left alone)
                    waiter.callback(None)

    async def call_one(
        self, name: str, address: Address, procedure: str, args: list[Any] | tuple[Any, ...] = (), *, timeout: float = wire.TMO_URGENT
    ) -> RpcResult:
        """Call C{procedure} on a single node."""
        return (await self.call([(name, address)], procedure, args, timeout=timeout))[name]

    async def _call_one(self, name: str, address: Address, procedure: str, body: bytes, timeout: float,
                        retry: bool = True) -> RpcResult:
        clock = self._reactor
        declared = procedures.TABLE.get(procedure)
        idempotent = declared is not None and declared.idempotent
        start = clock.seconds()
        end, retry_end = start + timeout, start + (self.retry_window if retry else 0.0)
        delay, tries = wire.RETRY_FIRST_DELAY, 1
        waiting = self._warming.get(self._target(address)) if self._warming else None
        if waiting is not None:  # a warm-up is opening this node's connection: use that one
            waiter: Deferred[None] = Deferred()
            waiting.append(waiter)
            await waiter
        while True:
            outcome = await self._try_one(name, address, procedure, body, timeout, end - clock.seconds())
            if isinstance(outcome, RpcResult):
                break
            reason = outcome
            now = clock.seconds()
            if not _retriable(reason, idempotent) or now + delay > min(retry_end, end):
                if tries > 1:
                    return RpcResult.failure(name, "%s (%d tries in %.1fs)" % (_transport_message(reason), tries,
                                                                                now - start))
                return RpcResult.failure(name, _transport_message(reason))
            if tries == 1:
                self.log.info("{node}: {procedure}: {why}; trying again for up to {window}s", node=name,
                              procedure=procedure, why=_transport_message(reason), window=self.retry_window)
            await deferLater(clock, delay, lambda: None)
            delay, tries = min(delay * 2, wire.RETRY_MAX_DELAY), tries + 1
        if tries > 1 and outcome.success:
            self.log.info("{node}: {procedure} answered at try {tries}", node=name, procedure=procedure, tries=tries)
        return outcome

    async def _try_one(self, name: str, address: Address, procedure: str, body: bytes, timeout: float,
                       left: float) -> RpcResult | BaseException:
        """One try: the node's result, or the transport failure (to retry or report)."""
        timed_out = []
        d: Deferred[Any] = defer.ensureDeferred(self._exchange(address, procedure, body))

        def expire() -> None:
            timed_out.append(True)
            d.cancel()

        timer = self._reactor.callLater(max(left, 0.0), expire)
        try:
            code, answer, epoch_header = await d
        except Exception as e:  # any transport failure is this node's result
            if timed_out:  # the cancellation may arrive wrapped (ResponseNeverReceived)
                return RpcResult.failure(name, "timeout after %gs calling %s" % (timeout, procedure))
            if _cancelled(e):  # the caller gave up on the call (a killed job): never sent again
                raise CancelledError() from e
            return e
        finally:
            if timer.active():
                timer.cancel()
        try:
            success, payload = wire.decode_response(answer)
        except wire.RpcWireError as e:
            return RpcResult.failure(name, "HTTP %d, %s" % (code, e) if code != 200 else str(e))
        if code == master_epoch.STALE_CODE and self.epoch is not None:
            higher = master_epoch.parse(epoch_header)
            if higher is not None and higher > self.epoch:
                master_epoch.fenced(higher)
        if code != 200:
            return RpcResult.failure(name, "HTTP %d: %s" % (code, payload))
        if not success:
            return RpcResult.failure(name, str(payload))
        return RpcResult(name, True, payload)

    async def _exchange(self, address: Address, procedure: str, body: bytes) -> tuple[int, bytes, bytes | None]:
        host, port = self._target(address)
        head = b"POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n%s\r\n" % (
            procedure.encode("ascii"), (("[%s]" % host) if ":" in host else host).encode("ascii"), len(body),
            self._headers)
        trace.step("rpc.request")
        code, headers, answer = await self._http.request(self._endpoints.route(host, port), head, body)
        trace.step("rpc.response")
        return code, answer, headers.get(master_epoch.HEADER.lower())
