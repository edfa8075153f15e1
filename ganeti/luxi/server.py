"""The LUXI server side: a thin protocol that hands requests to a handler.

    factory = LuxiServerFactory(handler)
    serverFromString(reactor, "unix:/var/run/ganeti/socket/ganeti-query:mode=660").listen(factory)

The handler is any object with C{handle(method, args)} returning a value, a
L{Deferred} or a coroutine (see L{RequestHandler}).  L{DeclaredHandler}
dispatches from a contract table (LuxiD's: L{ganeti.luxi.methods.TABLE}) to
C{luxi_<Method>} methods: it refuses to exist unless every declared method
has a handler and every handler is declared, and refuses a request whose
arguments do not fit the declaration before the handler runs.
L{MethodHandler} dispatches to C{luxi_<Method>} methods by their Python
signatures alone (test servers).  No policy lives here: the protocol
frames, decodes, calls, encodes and keeps the order.

Requests on one connection are answered strictly in order, one at a time:
while a handler runs (a C{WaitForJobChange} may wait for 89 seconds) later
requests of that connection wait in a queue.  A handler's error becomes a
failure answer and the connection stays open (a handler cancelled because
the daemon stops gets no answer: the connection is closed, and the client
asks again); a request that cannot be parsed is answered with C{"Failed to
parse request: ..."} and the connection is closed, as Ganeti's luxid does.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Coroutine
from typing import Any, Callable, cast
from typing import Protocol as TypingProtocol

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred, fail, succeed
from twisted.internet.interfaces import IAddress, IPushProducer, ITransport
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from ganeti import contract, errors
from ganeti.luxi import methods, wire


class RequestHandler(TypingProtocol):
    """What the server calls for each request."""

    def handle(self, method: str, args: list[Any]) -> Any:
        """Answer one request.

        @param method: the request's C{method}, e.g. C{"SubmitJob"}.
        @param args: the request's positional C{args}, as decoded.
        @return: a JSON-encodable value, or a L{Deferred} or coroutine that
            produces one.  Raising (or failing with) a
            L{errors.GenericError} answers C{[ClassName, [args]]}; any
            other exception is logged and answered as a C{GenericError}.
            The Deferred is cancelled if the client goes away first.
        """


class MethodHandler:
    """A L{RequestHandler} that calls the method named C{luxi_<Method>}.

        class Queries(MethodHandler):
            def luxi_QueryTags(self, kind, name):
                return ["a", "b"]

    The request's C{args} become positional arguments.  An unknown method
    answers C{LuxiError("Unknown method 'X'")}; a call with the wrong number
    of arguments answers C{LuxiError("Wrong number of arguments for X:
    ...")} without calling the method.
    """

    #: the prefix of the methods that answer LUXI requests
    prefix = "luxi_"

    # (class, method) -> signature of the bound method; signatures do not
    # depend on the instance, and inspect.signature is slow.
    _signatures: dict[tuple[type, str], inspect.Signature] = {}

    def handle(self, method: str, args: list[Any]) -> Any:
        """Call C{self.luxi_<method>(*args)} and return what it returns."""
        function = getattr(self, self.prefix + method, None)
        if function is None or not callable(function):
            raise errors.LuxiError("Unknown method '%s'" % method)
        signature = self._signature(method, function)
        try:
            signature.bind(*args)
        except TypeError:
            raise errors.LuxiError(
                "Wrong number of arguments for %s: expected %s, got %d"
                % (method, _arity(signature), len(args))
            ) from None
        return function(*args)

    def _signature(self, method: str, function: Callable[..., Any]) -> inspect.Signature:
        key = (type(self), method)
        signature = self._signatures.get(key)
        if signature is None:
            signature = self._signatures[key] = inspect.signature(function)
        return signature


class DeclaredHandler:
    """A L{RequestHandler} serving the methods of a contract table with its
    C{luxi_<Method>} methods.

        class Cluster(DeclaredHandler):
            def luxi_QueryTags(self, kind: str, name: str) -> list[str]: ...
            ...  # one for every method of the table, and no other

    An unknown method answers C{LuxiError("Unknown method 'X'")}; arguments
    that do not fit the declaration answer what L{methods.Method.check}
    raises (C{LuxiError} for their number, C{OpPrereqError} with
    C{wrong_input} for a type), and the handler does not run.

    @raise contract.ContractError: at construction, when a declared method
        has no handler, a handler is not declared, or a handler does not
        take the declared arguments in wire order
    """

    #: the prefix of the methods that answer LUXI requests
    prefix = "luxi_"

    def __init__(self, table: contract.Table[methods.Method[Any, Any]] = methods.TABLE) -> None:
        found = {name[len(self.prefix):]: getattr(self, name) for name in dir(type(self))
                 if name.startswith(self.prefix) and callable(getattr(type(self), name, None))}
        self._entries = contract.pair(table, found, type(self).__name__)
        for declared, function in self._entries.values():
            contract.check_signature(declared, function)

    def handle(self, method: str, args: list[Any]) -> Any:
        """Check C{args} against the declaration of C{method}, then call its handler."""
        entry = self._entries.get(method)
        if entry is None:
            raise errors.LuxiError("Unknown method '%s'" % method)
        declared, function = entry
        declared.check(args)
        return function(*args)


def _arity(signature: inspect.Signature) -> str:
    """How many positional arguments C{signature} takes, in words."""
    required = maximum = 0
    unbounded = False
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            maximum += 1
            if parameter.default is parameter.empty:
                required += 1
        elif parameter.kind is parameter.VAR_POSITIONAL:
            unbounded = True
    if unbounded:
        return "at least %d" % required
    if required == maximum:
        return "%d" % required
    return "%d to %d" % (required, maximum)


class LuxiServerProtocol(Protocol):
    """One LUXI connection: frames requests, calls the handler in order,
    writes the answers.

    Half-closed connections are not supported on purpose: on a Unix socket
    a client that closes and one that only shuts down its writing side look
    the same, and a handler still running for a client that has gone away
    must be cancelled.
    """

    log = Logger()

    #: stop reading from a client that has this many requests waiting
    max_queued = 64

    def __init__(self, handler: RequestHandler, max_message_size: int = wire.DEFAULT_MAX_MESSAGE_SIZE) -> None:
        """
        @param handler: answers the requests (see L{RequestHandler}).
        @param max_message_size: the largest request accepted, in bytes;
            a larger one is refused and the connection closed.
        """
        self.handler = handler
        self._framer = wire.Framer(max_message_size)
        # Payloads not handled yet; a LuxiProtocolError stands for a
        # message that could not even be framed (too large).
        self._queue: deque[bytes | wire.LuxiProtocolError] = deque()
        self._current: Deferred[Any] | None = None  # the running handler
        self._draining = False  # inside _next (guards against recursion)
        self._reading = True  # False once the stream cannot be trusted
        self._closing = False  # a bad request was answered; closing
        self._lost = False
        self._paused = False

    def _connected(self) -> ITransport:
        """The transport (set by Twisted before any callback runs)."""
        transport = self.transport
        assert transport is not None, "LUXI protocol used before its connection was made"
        return transport

    # --- Twisted callbacks --------------------------------------------------
    def connectionMade(self) -> None:
        self.log.debug("LUXI connection from {peer}", peer=_describe(self._connected().getPeer()))

    def dataReceived(self, data: bytes) -> None:
        if not self._reading:
            return
        try:
            for payload in self._framer.feed(data):
                self._queue.append(payload)
        except wire.LuxiProtocolError as e:
            self._reading = False
            self._queue.append(e)
        self._next()

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self._lost = True
        self._reading = False
        self._queue.clear()
        self.log.debug("LUXI connection from {peer} closed", peer=_describe(self._connected().getPeer()))
        if self._current is not None:
            self._current.cancel()  # e.g. drops a WaitForJobChange waiter

    # --- request processing -------------------------------------------------
    def _next(self) -> None:
        """Start the waiting requests, one at a time, until one blocks."""
        if self._draining:
            return  # a handler answered synchronously; the loop goes on
        self._draining = True
        try:
            while self._current is None and self._queue and not self._closing:
                item = self._queue.popleft()
                if isinstance(item, wire.LuxiProtocolError):
                    self._refuse(str(item))
                    break
                try:
                    method, args = wire.decode_request(item)
                except wire.LuxiProtocolError as e:
                    self._refuse(str(e))
                    break
                self._start(method, args)
            self._flow_control()
        finally:
            self._draining = False

    def _start(self, method: str, args: list[Any]) -> None:
        self.log.debug("LUXI request {method}", method=method)
        d = self._current = self._call(method, args)
        d.addBoth(self._finish, method)  # may run at once

    def _call(self, method: str, args: list[Any]) -> Deferred[Any]:
        try:
            result = self.handler.handle(method, args)
        except Exception:
            return fail()
        if isinstance(result, Deferred):
            return result
        if isinstance(result, Coroutine):
            return ensureDeferred(result)
        return succeed(result)

    def _finish(self, outcome: Any, method: str) -> None:
        """Answer the request that just completed, then start the next."""
        self._current = None
        if self._lost:
            if isinstance(outcome, Failure) and not outcome.check(CancelledError):
                self.log.failure("LUXI {method} failed after its client left", outcome, method=method)
            return None
        if isinstance(outcome, Failure) and outcome.check(CancelledError):
            # the daemon is stopping (a failover, a restart): no answer, the connection closes and the
            # client asks again, of the next master if need be (a WaitForJobChange must not fail for this)
            self._closing = True
            self._connected().loseConnection()
            return None
        if isinstance(outcome, Failure):
            data = self._encode_failure(outcome, method)
        else:
            try:
                data = wire.encode_response(True, outcome)
            except TypeError as e:
                self.log.error(
                    "LUXI {method} returned a result that is not JSON: {error}", method=method, error=e
                )
                data = wire.encode_error(
                    errors.GenericError("Cannot encode the result of %s: %s" % (method, e))
                )
        self._connected().write(data)
        self._next()
        return None

    def _encode_failure(self, failure: Failure, method: str) -> bytes:
        if failure.check(errors.GenericError):
            self.log.debug("LUXI {method} failed: {error!r}", method=method, error=failure.value)
        else:
            self.log.failure("LUXI {method} failed unexpectedly", failure, method=method)
        return wire.encode_error(failure.value)

    def _refuse(self, reason: str) -> None:
        """Answer a request that cannot be parsed, then close (as luxid)."""
        self.log.warn(
            "Closing LUXI connection from {peer}: bad request: {reason}",
            peer=_describe(self._connected().getPeer()),
            reason=reason,
        )
        self._closing = True
        self._reading = False
        self._queue.clear()
        self._connected().write(wire.encode_parse_failure(reason))
        self._connected().loseConnection()

    def _flow_control(self) -> None:
        """Stop reading while too many requests wait; resume when drained."""
        if self._lost or self._closing:
            return
        waiting = len(self._queue)
        if not self._paused and waiting >= self.max_queued:
            self._paused = True
            cast(IPushProducer, self._connected()).pauseProducing()
        elif self._paused and waiting <= self.max_queued // 2:
            self._paused = False
            cast(IPushProducer, self._connected()).resumeProducing()


def _describe(address: IAddress) -> str:
    """A short text for a peer address (Unix peers are usually unnamed)."""
    name = getattr(address, "name", None)
    if name is not None:
        return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    host = getattr(address, "host", None)
    if host is not None:
        return "%s:%s" % (host, getattr(address, "port", "?"))
    return "unix peer" if type(address).__name__ == "UNIXAddress" else str(address)


class LuxiServerFactory(Factory):
    """Builds a L{LuxiServerProtocol} per connection, sharing one handler."""

    noisy = False  # no "Starting factory" lines in the daemon log

    def __init__(self, handler: RequestHandler, max_message_size: int = wire.DEFAULT_MAX_MESSAGE_SIZE) -> None:
        """
        @param handler: answers the requests of every connection.
        @param max_message_size: the largest request accepted, in bytes.
        """
        self.handler = handler
        self.max_message_size = max_message_size

    def buildProtocol(self, addr: IAddress | None) -> LuxiServerProtocol:
        protocol = LuxiServerProtocol(self.handler, self.max_message_size)
        protocol.factory = self
        return protocol
