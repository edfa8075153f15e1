"""The machinery of the node RPC contract (pure: stdlib and attrs only).

A L{Procedure} is declared from a typed stub function (see
L{ganeti.rpc.procedures}) on the machinery shared with LUXI
(L{ganeti.contract}): its name is the procedure's, its parameters are the
positional arguments in wire order (a default makes an argument optional on
the wire), its annotations are the argument types and its return
annotation the payload.  The same declaration serves both sides:

  - the caller builds a L{Call} with C{procedure.call(...)}, which mypy
    checks against the stub's signature (through C{ParamSpec}) and which
    checks the values once more at run time;
  - noded refuses a request whose arguments do not fit with
    L{Procedure.check} before any handler runs.

Argument types are JSON types: C{Any}, C{None}, C{bool} (JSON C{true} and
C{false}; C{0} and C{1} are accepted as Ganeti's tools sometimes send
them), C{int} (not a boolean), C{float} (an C{int} too), C{str}, C{list}
and C{dict}; for C{list[X]} and C{dict[K, V]} only the container is checked
(the handler checks the elements with a message about their meaning).
Unions (C{X | None}) accept any of their members.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Iterable, Mapping, ParamSpec, TypeVar

import attrs

from ganeti import contract
from ganeti.contract import Argument, ContractError

__all__ = ["Argument", "Call", "ContractError", "Procedure", "Runner", "Table"]

P = ParamSpec("P")
R = TypeVar("R")


@attrs.frozen
class Call(Generic[R]):
    """A call of a procedure, ready to send: the positional argument list
    and the per-node time limit (the procedure's timeout class unless
    changed with L{within}).  C{R} is the payload type the node answers.
    """

    procedure: str
    args: tuple[Any, ...]
    timeout: float
    #: whether a client with a retry window may send it again (L{once}: no)
    retry: bool = True

    def within(self, timeout: float) -> Call[R]:
        """The same call with another time limit (seconds)."""
        return attrs.evolve(self, timeout=timeout)

    def once(self) -> Call[R]:
        """The same call, tried once even by a client that retries (a check of
        whether the node answers now, as C{gnt-cluster verify}'s)."""
        return attrs.evolve(self, retry=False)


class Procedure(contract.Declaration[P, R]):
    """One node RPC procedure, declared from a typed stub (see the module
    docstring).

    @ivar name: the procedure's name on the wire
    @ivar timeout: its time limit class, seconds (C{wire.TMO_*})
    @ivar arguments: its positional arguments, in wire order
    @ivar result: the payload type
    @ivar doc: one line saying what it does
    @ivar idempotent: running it twice has the effect of running it once
        (a read, or a write of a state): a caller that retries on a
        node's restart (L{ganeti.rpc.RpcClient} with a C{retry_window})
        sends it again after any transport failure, also when the first
        one may have reached the handler
    """

    strictness = contract.LENIENT
    kind_name = "procedure"

    def __init__(self, stub: Callable[P, R], timeout: float, idempotent: bool = False) -> None:
        super().__init__(stub)
        self.timeout = timeout
        self.idempotent = idempotent

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[R]:
        """The call with these arguments (positional or by name).

        Optional arguments after the last one given are left out of the
        list, as a caller of Ganeti's RPC would; one left out before a
        given one is sent as its default.

        @raise ContractError: the arguments do not fit the declaration
        """
        return Call(self.name, self.bind(*args, **kwargs), self.timeout)


class Table(contract.Table[Procedure[Any, Any]]):
    """The procedures of one contract, by name (filled by L{declare})."""

    kind_name = "procedure"

    def declare(self, timeout: float, *, idempotent: bool = False) -> Callable[[Callable[P, R]], Procedure[P, R]]:
        """Decorator: the stub below declares a procedure of time limit
        class C{timeout}, C{idempotent} or not (L{Procedure.idempotent})."""

        def make(stub: Callable[P, R]) -> Procedure[P, R]:
            procedure = Procedure(stub, timeout, idempotent)
            self.add(procedure)
            return procedure

        return make


class Runner:
    """Makes declared calls with the by-name C{call} method of its class
    (C{call(nodes, procedure, args, *, timeout, node_args, offline)} of
    L{ganeti.rpc.RpcClient}, or a test's fake of it)."""

    call: Callable[..., Any]

    async def run(self, nodes: Any, call: Call[Any], *, per_node: Mapping[str, Call[Any]] | None = None,
                  offline: Iterable[str] = (), enough: Callable[[Mapping[str, Any]], bool] | None = None,
                  grace: float | None = None) -> Any:
        """Make C{call} on every node of C{nodes} (C{{name: address}} or
        pairs) at once, within its timeout: C{{name: RpcResult}}.

        @param per_node: calls of the same procedure replacing C{call} on some nodes
        @param offline: names not to contact (their result says "node offline")
        @param enough: stop waiting for the silent nodes C{grace} seconds
            after this holds for the results in (C{call}'s C{enough})
        """
        options: dict[str, Any] = {}
        if per_node:
            if any(c.procedure != call.procedure for c in per_node.values()):
                raise ContractError("per-node calls must be of procedure %s" % call.procedure)
            options["node_args"] = {name: list(c.args) for name, c in per_node.items()}
        offline = list(offline)
        if offline:
            options["offline"] = offline
        if not call.retry:
            options["retry"] = False
        if enough is not None:
            options["enough"] = enough
            if grace is not None:
                options["grace"] = grace
        return await self.call(nodes, call.procedure, list(call.args), timeout=call.timeout, **options)

    async def run_one(self, name: str, address: Any, call: Call[Any]) -> Any:
        """Make C{call} on one node: its C{RpcResult}."""
        return (await self.run({name: address}, call))[name]
