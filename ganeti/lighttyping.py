"""The few names of C{typing} the gnt-* tools' modules use at run time, without importing C{typing}.

Importing C{typing} was 14 M of the 128 M instructions of a C{gnt-instance list} (valgrind's count), yet
the tools' modules use its names almost only in annotations, which are never evaluated (C{from __future__
import annotations}).  Such a module imports them for mypy alone::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import Any, Callable

(mypy reads any name C{TYPE_CHECKING} as true), and takes from here the names it needs when it runs:
generic base classes, type variables, C{cast} and C{overload}.  mypy sees C{typing}'s own; at run time
these stand-ins do nothing: a subscripted generic base is the class itself, a type variable is a name.
A string in a runtime alias (C{dict[str, "Any"]}) is a forward reference, which
L{ganeti.contract} resolves with C{typing}'s names when it reads a stub's types.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic, ParamSpec, Protocol, TypeVar, cast, overload
else:

    class Generic:
        """A generic base class: C{Generic[T]}, and a subclass subscripted, are the class itself."""

        __slots__ = ()

        def __class_getitem__(cls, params):
            return cls

    class Protocol:
        """A structural type: only mypy checks it; C{Protocol[T]} is the class itself."""

        __slots__ = ()

        def __class_getitem__(cls, params):
            return cls

    class TypeVar:
        """A type variable: its name only."""

        __slots__ = ("__name__",)

        def __init__(self, name, *constraints, **options):
            self.__name__ = name

        def __repr__(self):
            return "~" + self.__name__

    ParamSpec = TypeVar

    def cast(kind, value):
        """C{value} itself (a cast tells mypy only)."""
        return value

    def overload(function):
        """The one definition that runs is the last, undecorated one; this returns C{function}."""
        return function


__all__ = ["TYPE_CHECKING", "Generic", "ParamSpec", "Protocol", "TypeVar", "cast", "overload"]
