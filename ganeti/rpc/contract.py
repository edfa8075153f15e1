"""The machinery of the node RPC contract (pure: stdlib and attrs only).

A L{Procedure} is declared from a typed stub function (see
L{ganeti.rpc.procedures}): its name is the procedure's, its parameters are
the positional arguments in wire order (a default makes an argument
optional on the wire), its annotations are the argument types and its
return annotation the payload.  The same declaration serves both sides:

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

import inspect
import types
import typing
from typing import Any, Callable, Generic, Iterable, Mapping, ParamSpec, TypeVar

import attrs

P = ParamSpec("P")
R = TypeVar("R")


class ContractError(TypeError):
    """A call does not fit its procedure's declaration (unknown procedure,
    wrong argument count or type); the message names the procedure and
    the argument."""


@attrs.frozen
class Argument:
    """One positional argument of a procedure.

    @ivar name: its name (in messages and keyword calls)
    @ivar kind: its type (a JSON type, see the module docstring)
    @ivar optional: whether a call may leave it (and all after it) out
    """

    name: str
    kind: Any
    optional: bool

    def accepts(self, value: Any) -> bool:
        return _fits(self.kind, value)

    def describe(self) -> str:
        return _type_name(self.kind)


@attrs.frozen
class Call(Generic[R]):
    """A call of a procedure, ready to send: the positional argument list
    and the per-node time limit (the procedure's timeout class unless
    changed with L{within}).  C{R} is the payload type the node answers.
    """

    procedure: str
    args: tuple[Any, ...]
    timeout: float

    def within(self, timeout: float) -> Call[R]:
        """The same call with another time limit (seconds)."""
        return attrs.evolve(self, timeout=timeout)


def _type_name(kind: Any) -> str:
    if kind is Any:
        return "any value"
    if kind is None or kind is type(None):
        return "null"
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(_type_name(k) for k in typing.get_args(kind))
    if origin is not None:
        kind = origin
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a dict"}.get(kind, getattr(kind, "__name__", str(kind)))


def _fits(kind: Any, value: Any) -> bool:
    if kind is Any:
        return True
    if kind is None or kind is type(None):
        return value is None
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):
        return any(_fits(k, value) for k in typing.get_args(kind))
    if origin is not None:
        kind = origin
    if kind is bool:
        return isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in (str, list, dict):
        return isinstance(value, kind)
    raise ContractError("type %r cannot be declared for a node RPC argument" % (kind,))


class Procedure(Generic[P, R]):
    """One node RPC procedure, declared from a typed stub (see the module
    docstring).

    @ivar name: the procedure's name on the wire
    @ivar timeout: its time limit class, seconds (C{wire.TMO_*})
    @ivar arguments: its positional arguments, in wire order
    @ivar result: the payload type
    @ivar doc: one line saying what it does
    """

    def __init__(self, stub: Callable[P, R], timeout: float) -> None:
        self.name: str = stub.__name__
        self.timeout = timeout
        self._signature = inspect.signature(stub)
        hints = typing.get_type_hints(stub)
        arguments = []
        for parameter in self._signature.parameters.values():
            if parameter.kind is not parameter.POSITIONAL_OR_KEYWORD:
                raise ContractError("%s: argument %s must be a plain positional one" % (self.name, parameter.name))
            kind = hints.get(parameter.name, Any)
            _fits(kind, None)  # refuses a type the checker does not know, at declaration
            arguments.append(Argument(parameter.name, kind, parameter.default is not parameter.empty))
        self.arguments: tuple[Argument, ...] = tuple(arguments)
        self.result: Any = hints.get("return", Any)
        self.doc: str = (inspect.getdoc(stub) or "").split("\n\n")[0].replace("\n", " ")
        self._defaults = [p.default for p in self._signature.parameters.values()]

    def __repr__(self) -> str:
        return "<Procedure %s(%s)>" % (self.name, ", ".join(a.name for a in self.arguments))

    @property
    def required(self) -> int:
        """How many arguments every call must give."""
        return sum(1 for a in self.arguments if not a.optional)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> Call[R]:
        """The call with these arguments (positional or by name).

        Optional arguments after the last one given are left out of the
        list, as a caller of Ganeti's RPC would; one left out before a
        given one is sent as its default.

        @raise ContractError: the arguments do not fit the declaration
        """
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ContractError("Bad arguments for %s: %s" % (self.name, e)) from None
        given = [i for i, a in enumerate(self.arguments) if a.name in bound.arguments]
        count = given[-1] + 1 if given else 0
        values = [bound.arguments.get(a.name, self._defaults[i]) for i, a in enumerate(self.arguments[:count])]
        self.check(values)
        return Call(self.name, tuple(values), self.timeout)

    def check(self, args: list[Any] | tuple[Any, ...]) -> None:
        """Refuse arguments that do not fit the declaration (L{check_count}
        and L{check_types})."""
        self.check_count(args)
        self.check_types(args)

    def check_count(self, args: list[Any] | tuple[Any, ...]) -> None:
        """@raise ContractError: more arguments than declared, or fewer than required"""
        total = len(self.arguments)
        if not self.required <= len(args) <= total:
            wanted = ("%d" % total if self.required == total else "%d to %d" % (self.required, total))
            raise ContractError("Bad arguments for %s: it takes %s argument%s (%s), not %d" % (
                self.name, wanted, "" if total == 1 else "s", ", ".join(a.name for a in self.arguments), len(args)))

    def check_types(self, args: list[Any] | tuple[Any, ...]) -> None:
        """@raise ContractError: an argument of another type than declared
        (the message names the procedure and the argument)"""
        for index, (argument, value) in enumerate(zip(self.arguments, args)):
            if not argument.accepts(value):
                raise ContractError("Bad arguments for %s: argument %d (%s) must be %s, not %.100r" % (
                    self.name, index + 1, argument.name, argument.describe(), value))


class Table:
    """The procedures of one contract, by name (filled by L{declare})."""

    def __init__(self) -> None:
        self._by_name: dict[str, Procedure[Any, Any]] = {}

    def declare(self, timeout: float) -> Callable[[Callable[P, R]], Procedure[P, R]]:
        """Decorator: the stub below declares a procedure of time limit
        class C{timeout}."""

        def make(stub: Callable[P, R]) -> Procedure[P, R]:
            procedure = Procedure(stub, timeout)
            if procedure.name in self._by_name:
                raise ContractError("procedure %s declared twice" % procedure.name)
            self._by_name[procedure.name] = procedure
            return procedure

        return make

    def get(self, name: str) -> Procedure[Any, Any] | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return list(self._by_name)

    def __iter__(self) -> typing.Iterator[Procedure[Any, Any]]:
        return iter(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


class Runner:
    """Makes declared calls with the by-name C{call} method of its class
    (C{call(nodes, procedure, args, *, timeout, node_args, offline)} of
    L{ganeti.rpc.RpcClient}, or a test's fake of it)."""

    call: Callable[..., Any]

    async def run(self, nodes: Any, call: Call[Any], *, per_node: Mapping[str, Call[Any]] | None = None,
                  offline: Iterable[str] = ()) -> Any:
        """Make C{call} on every node of C{nodes} (C{{name: address}} or
        pairs) at once, within its timeout: C{{name: RpcResult}}.

        @param per_node: calls of the same procedure replacing C{call} on some nodes
        @param offline: names not to contact (their result says "node offline")
        """
        options: dict[str, Any] = {}
        if per_node:
            if any(c.procedure != call.procedure for c in per_node.values()):
                raise ContractError("per-node calls must be of procedure %s" % call.procedure)
            options["node_args"] = {name: list(c.args) for name, c in per_node.items()}
        offline = list(offline)
        if offline:
            options["offline"] = offline
        return await self.call(nodes, call.procedure, list(call.args), timeout=call.timeout, **options)

    async def run_one(self, name: str, address: Any, call: Call[Any]) -> Any:
        """Make C{call} on one node: its C{RpcResult}."""
        return (await self.run({name: address}, call))[name]
