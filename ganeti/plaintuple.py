"""Named tuples for the command-line path, built without compiling anything.

typing's C{NamedTuple} (and C{collections.namedtuple}, which it uses)
compile source at class creation: C{namedtuple} its C{__new__}, and under
postponed annotations each field's type as a C{ForwardRef}.  A process's
first compile costs a gnt-* command about 1.5 ms, so the few named tuples
every command builds are made here from a plain C{tuple} subclass instead;
the modules keep a C{NamedTuple} of the same fields for the type checker
(under C{TYPE_CHECKING}).  Standard library only.
"""

from __future__ import annotations

from operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def plain_tuple(name: str, fields: tuple[str, ...], module: str, doc: str) -> Any:
    """A tuple class with C{fields} as named, read-only attributes, taking them by position or by name,
    shown as C{Name(field=value, ...)}, copied and pickled as a C{NamedTuple} is; C{Name[X]} is the class itself
    (for generic aliases)."""

    def __new__(cls: type, *values: Any, **named: Any) -> Any:
        rest = fields[len(values):]
        if len(values) > len(fields) or set(named) != set(rest):
            raise TypeError("%s takes the fields %s" % (name, ", ".join(fields)))
        return tuple.__new__(cls, values + tuple(named[field] for field in rest))

    def __repr__(self: tuple[Any, ...]) -> str:
        return "%s(%s)" % (name, ", ".join("%s=%r" % pair for pair in zip(fields, self)))

    namespace: dict[str, Any] = {
        "__slots__": (), "__module__": module, "__doc__": doc, "_fields": fields,
        "__new__": __new__, "__repr__": __repr__, "__getnewargs__": lambda self: tuple(self),  # (copy, pickle)
        "__class_getitem__": classmethod(lambda cls, _item: cls),
    }
    namespace.update((field, property(itemgetter(index))) for index, field in enumerate(fields))
    return type(name, (tuple,), namespace)
