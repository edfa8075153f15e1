"""noded's dispatch table: each declared procedure and its handler.

The procedures and their arguments are declared in
L{ganeti.rpc.procedures}; a handler is a method of the same name, marked
with L{handler}, on one of the objects noded's procedures are split into
(node, instances, transfers, master role).  L{Dispatch} pairs them once,
and refuses to exist when a declared procedure has no handler or a marked
handler is not declared, so that noded serves exactly the contract.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, TypeVar

import attrs

from ganeti import contract
from ganeti.rpc import procedures
from ganeti.rpc.contract import ContractError, Procedure, Table

F = TypeVar("F", bound=Callable[..., Any])

#: the attribute marking a handler method
_MARK = "_noded_handler"


def handler(method: F) -> F:
    """Mark C{method} as the handler of the declared procedure of its name."""
    setattr(method, _MARK, True)
    return method


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
