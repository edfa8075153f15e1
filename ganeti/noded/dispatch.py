"""noded's dispatch table: each declared procedure and its handler.

The procedures and their arguments are declared in
L{ganeti.rpc.procedures}; a handler is a method of the same name, marked
with L{handler}, on one of the objects noded's procedures are split into
(node, instances, transfers, master role).  L{Dispatch} pairs them once,
and refuses to exist when a declared procedure has no handler or a marked
handler is not declared, so that noded serves exactly the contract.

A handler marked C{@handler(procedures.NAME)} is checked by mypy against
the procedure's stub: it takes the stub's parameters (same names, types
the stub's or wider, the same defaults) after C{self}, and gives the
stub's result, or a Deferred or coroutine of it.  The bare C{@handler}
(not checked) remains for handlers not yet converted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Concatenate, Coroutine, Generic, Iterable, ParamSpec, TypeVar, overload

import attrs

from ganeti import contract
from ganeti.rpc import procedures
from ganeti.rpc.contract import ContractError, Procedure, Table

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")

#: the attribute marking a handler method
_MARK = "_noded_handler"


class _Checked(Generic[P, R]):
    """The decorator C{handler(procedure)} gives: marks a method whose
    parameters (after C{self}) are the procedure's C{P} and whose result is
    its C{R}, at once or later (a Deferred or a coroutine)."""

    def __init__(self, procedure: Procedure[P, R]) -> None:
        self._procedure = procedure

    @overload
    def __call__(
        self, method: Callable[Concatenate[S, P], Coroutine[Any, Any, R]]
    ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]: ...

    @overload
    def __call__(self, method: Callable[Concatenate[S, P], Deferred[R]]) -> Callable[Concatenate[S, P], Deferred[R]]: ...

    @overload
    def __call__(self, method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]: ...

    @overload
    def __call__(
        self, method: Callable[Concatenate[S, P], Deferred[R] | R]
    ) -> Callable[Concatenate[S, P], Deferred[R] | R]: ...

    def __call__(self, method: Callable[..., Any]) -> Callable[..., Any]:
        if method.__name__ != self._procedure.name:
            raise ContractError("handler %s marked as the handler of procedure %s"
                                % (method.__name__, self._procedure.name))
        setattr(method, _MARK, True)
        return method


@overload
def handler(target: Procedure[P, R]) -> _Checked[P, R]: ...


@overload
def handler(target: F) -> F: ...


def handler(target: Procedure[Any, Any] | Callable[..., Any]) -> Any:
    """Mark a method as the handler of the declared procedure of its name.

    C{@handler(procedures.NAME)} has mypy check the method against the
    procedure's declaration (see the module docstring); the bare
    C{@handler} marks it unchecked.
    """
    if isinstance(target, Procedure):
        return _Checked(target)
    setattr(target, _MARK, True)
    return target


def handlers_of(target: object) -> dict[str, Callable[..., Any]]:
    """The marked handler methods of C{target}, bound, by name."""
    found = {}
    for name in dir(type(target)):
        if getattr(getattr(type(target), name, None), _MARK, False):
            found[name] = getattr(target, name)
    return found


@attrs.frozen
class Entry:
    """A procedure and the method that serves it."""

    procedure: Procedure[Any, Any]
    function: Callable[..., Any]


class Dispatch:
    """The handlers of C{targets} paired with the declarations of C{table}.

    @raise ContractError: a declared procedure has no handler, a handler is
        not declared, or two objects handle the same procedure
    """

    def __init__(self, targets: Iterable[object], table: Table = procedures.TABLE) -> None:
        found: dict[str, Callable[..., Any]] = {}
        for target in targets:
            for name, function in handlers_of(target).items():
                if name in found:
                    raise ContractError("procedure %s has two handlers" % name)
                found[name] = function
        paired = contract.pair(table, found, "noded")
        self._entries = {name: Entry(procedure, function) for name, (procedure, function) in paired.items()}

    def get(self, name: str) -> Entry | None:
        return self._entries.get(name)

    def names(self) -> list[str]:
        return list(self._entries)
