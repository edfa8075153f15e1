"""Contracts declared once from typed stubs (pure: the standard library and L{ganeti.lighttyping}).

A protocol whose calls are positional JSON arguments (node RPC, LUXI)
declares each call once, as a typed stub function: its name is the
call's, its parameters are the positional arguments in wire order (a
default makes an argument optional on the wire), its annotations are the
argument types and its return annotation the result; the first paragraph
of its docstring says what it does.  The same declaration serves both
sides:

  - a caller builds the call's argument list with L{Declaration.bind},
    which mypy checks against the stub's signature (through C{ParamSpec}
    in the protocol's C{call} method) and which checks the values once
    more at run time;
  - the server refuses a request whose arguments do not fit with
    L{Declaration.check} before any handler runs, and pairs every
    declaration with exactly one handler (L{pair}).

Argument types are JSON types: C{Any}, C{None}, C{bool}, C{int} (not a
boolean), C{float} (an C{int} too), C{str}, C{list[X]} (or C{Sequence[X]},
read the same), C{dict[K, V]} and unions (C{X | None}).  How strict the check is belongs to the protocol
(L{Declaration.strict}): node RPC accepts C{0} and C{1} as booleans, as
Ganeti's tools sometimes send them, and checks only the container of a
list or dict; LUXI takes JSON booleans only and checks the elements too.

This module is imported by the blocking LUXI client of the gnt-* tools, so
it stays cheap: no C{inspect}, C{dataclasses} nor C{typing}.  A stub is
read when its declaration is first used: its names and defaults (all a
caller needs to bind a call), and its types (with C{typing}) only when
values are checked, as a server does.
"""

from __future__ import annotations

import collections.abc
import types

from ganeti.lighttyping import Generic, ParamSpec, TypeVar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, Mapping

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
D = TypeVar("D", bound="Declaration[Any, Any]")


class _Filled:
    """A default the caller fills in, on an argument the wire requires (see L{filled})."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


def filled(value: T) -> T:
    """The default of a stub's argument that callers may leave out but the
    server still requires on the wire: the caller sends C{value}.

        def Query(what: str, fields: list[str], qfilter: Filter = filled(None)) -> ...
    """
    return _Filled(value)  # type: ignore[return-value]


_NO_DEFAULT: Any = object()


class _Typing:
    """C{typing}'s names the type checks use, imported when first used: a
    declaration's types are read (and values checked) by a server; a client
    only binds arguments and never imports C{typing} (L{ganeti.lighttyping})."""

    def __getattr__(self, name: str) -> Any:
        import typing

        value = getattr(typing, name)
        setattr(self, name, value)
        return value


_typing = _Typing()
#: names of C{typing} a stub's annotations may use while its module imports them for mypy alone
_HINT_NAMES = ("Any", "Callable", "Iterable", "Mapping", "Optional", "Sequence", "Union")


class ContractError(TypeError):
    """A call does not fit its declaration (unknown call, wrong argument
    count or type), or handlers do not match a table; the message names
    the call and the argument."""


class Strictness:
    """How strictly a protocol checks argument types.

    @ivar numeric_bools: C{0} and C{1} pass as booleans
    @ivar elements: the elements of C{list[X]} and the keys and values of
        C{dict[K, V]} are checked too, not only the container

    This and L{Argument} are plain classes rather than C{NamedTuple}s: with
    postponed annotations each C{NamedTuple} field compiles a C{ForwardRef}
    at import, which the command-line tools would pay for at every start.
    """

    __slots__ = ("numeric_bools", "elements")

    def __init__(self, numeric_bools: bool = True, elements: bool = False) -> None:
        self.numeric_bools = numeric_bools
        self.elements = elements

    def __repr__(self) -> str:
        return "Strictness(numeric_bools=%r, elements=%r)" % (self.numeric_bools, self.elements)


#: node RPC's: lenient booleans, containers only
LENIENT = Strictness()
#: JSON booleans only, elements checked
STRICT = Strictness(numeric_bools=False, elements=True)


class Argument:
    """One positional argument of a declared call.

    @ivar name: its name (in messages and keyword calls)
    @ivar kind: its type (a JSON type, see the module docstring)
    @ivar optional: whether a call may leave it (and all after it) out
    """

    __slots__ = ("name", "kind", "optional")

    def __init__(self, name: str, kind: Any, optional: bool) -> None:
        self.name = name
        self.kind = kind
        self.optional = optional

    def __repr__(self) -> str:
        return "Argument(%r, %r, optional=%r)" % (self.name, self.kind, self.optional)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Argument):
            return NotImplemented
        return (self.name, self.kind, self.optional) == (other.name, other.kind, other.optional)

    def __hash__(self) -> int:
        return hash((self.name, self.optional))

    def accepts(self, value: Any, strictness: Strictness = LENIENT) -> bool:
        return fits(self.kind, value, strictness)

    def describe(self) -> str:
        return type_name(self.kind)


#: annotations read as a JSON array: C{Sequence[X]} (which lets a caller pass a list of a narrower type)
_ARRAYS: dict[Any, Any] = {collections.abc.Sequence: list}
_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a dict"}
_PLURALS = {bool: "booleans", int: "integers", float: "numbers", str: "strings", list: "lists", dict: "dicts"}


def type_name(kind: Any, plural: bool = False) -> str:
    """C{kind} in words, for messages: C{"a list of strings or null"}."""
    if kind is _typing.Any:
        return "any values" if plural else "any value"
    if kind is None or kind is type(None):
        return "nulls" if plural else "null"
    origin = _typing.get_origin(kind)
    if origin in (types.UnionType, _typing.Union):
        return " or ".join(type_name(k, plural) for k in _typing.get_args(kind))
    parameters = _typing.get_args(kind)
    base = _ARRAYS.get(origin, origin) if origin is not None else kind
    name = (_PLURALS if plural else _NAMES).get(base, getattr(base, "__name__", str(base)))
    if base is list and parameters and parameters[0] is not _typing.Any:
        return "%s of %s" % (name, type_name(parameters[0], plural=True))
    return name


def fits(kind: Any, value: Any, strictness: Strictness = LENIENT) -> bool:
    """Whether the decoded JSON C{value} is of type C{kind}.

    @raise ContractError: C{kind} is not a JSON type
    """
    if kind is _typing.Any:
        return True
    if kind is None or kind is type(None):
        return value is None
    origin = _typing.get_origin(kind)
    if origin in (types.UnionType, _typing.Union):
        return any(fits(k, value, strictness) for k in _typing.get_args(kind))
    parameters: tuple[Any, ...] = _typing.get_args(kind) if origin is not None else ()
    if origin is not None:
        kind = _ARRAYS.get(origin, origin)
    if kind is bool:
        return isinstance(value, bool) or (strictness.numeric_bools and isinstance(value, int) and value in (0, 1))
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        return isinstance(value, str)
    if kind is list:
        if not isinstance(value, list):
            return False
        if strictness.elements and parameters and parameters[0] is not _typing.Any:
            return all(fits(parameters[0], v, strictness) for v in value)
        return True
    if kind is dict:
        if not isinstance(value, dict):
            return False
        if strictness.elements and len(parameters) == 2 and parameters != (str, _typing.Any):
            key, item = parameters
            return all(fits(key, k, strictness) and fits(item, v, strictness) for k, v in value.items())
        return True
    raise ContractError("type %r cannot be declared for an argument" % (kind,))


def _check_kind(kind: Any) -> None:
    """Refuse, at declaration, a type the checker does not know (also inside containers and unions)."""
    fits(kind, None)
    for inner in _typing.get_args(kind):
        if inner is not _typing.Any and inner is not type(None):
            _check_kind(inner)


class Declaration(Generic[P, R]):
    """One call of a contract, declared from a typed stub (see the module
    docstring).

    @ivar name: the call's name on the wire
    @ivar arguments: its positional arguments, in wire order
    @ivar result: the result type
    @ivar doc: one line saying what it does
    """

    #: how strictly arguments are checked (a protocol's subclass sets it)
    strictness: Strictness = LENIENT
    #: what one is called in messages ("procedure", "method")
    kind_name = "call"
    #: whether L{bind} sends every argument (defaults filled in), as
    #: Ganeti's LUXI client does, rather than leaving out trailing ones
    send_all = False

    def __init__(self, stub: Callable[P, R]) -> None:
        self.name: str = stub.__name__
        self._stub = stub
        self._shaped: tuple[tuple[str, ...], tuple[bool, ...], list[Any], str] | None = None
        self._parsed: tuple[tuple[Argument, ...], Any] | None = None
        code = stub.__code__
        if code.co_flags & (0x04 | 0x08) or code.co_kwonlyargcount or code.co_posonlyargcount:  # *args, **kwargs
            raise ContractError("%s: every argument must be a plain positional one" % self.name)

    def _shape(self) -> tuple[tuple[str, ...], tuple[bool, ...], list[Any], str]:
        """Read the stub once, without its types: its argument names, which
        are optional, their defaults and its doc line (all that binding a
        call needs: a client never imports C{typing})."""
        if self._shaped is None:
            stub, code = self._stub, self._stub.__code__
            names = tuple(code.co_varnames[: code.co_argcount])
            given = list(stub.__defaults__ or ())
            defaults = [_NO_DEFAULT] * (len(names) - len(given)) + given
            optional = tuple(d is not _NO_DEFAULT and not isinstance(d, _Filled) for d in defaults)
            values = [d.value if isinstance(d, _Filled) else d for d in defaults]
            doc = " ".join(line.strip() for line in (stub.__doc__ or "").strip().split("\n\n")[0].splitlines())
            self._shaped = (names, optional, values, doc)
        return self._shaped

    def _parse(self) -> tuple[tuple[Argument, ...], Any]:
        """Read the stub's types once: its arguments and its result type.
        A name of C{typing} its module imports for mypy alone (L{ganeti.lighttyping}) is C{typing}'s."""
        if self._parsed is None:
            stub = self._stub
            names, optional, _, _ = self._shape()
            known = stub.__globals__
            hints = _typing.get_type_hints(stub, localns={n: getattr(_typing, n) for n in _HINT_NAMES if n not in known})
            arguments = []
            for name, is_optional in zip(names, optional):
                kind = hints.get(name, _typing.Any)
                _check_kind(kind)
                arguments.append(Argument(name, kind, is_optional))
            self._parsed = (tuple(arguments), hints.get("return", _typing.Any))
        return self._parsed

    @property
    def arguments(self) -> tuple[Argument, ...]:
        """Its positional arguments, in wire order."""
        return self._parse()[0]

    @property
    def result(self) -> Any:
        """The result type."""
        return self._parse()[1]

    @property
    def doc(self) -> str:
        """One line saying what it does."""
        return self._shape()[3]

    def __repr__(self) -> str:
        return "<%s %s(%s)>" % (type(self).__name__, self.name, ", ".join(a.name for a in self.arguments))

    @property
    def required(self) -> int:
        """How many arguments every call must give."""
        return sum(1 for a in self.arguments if not a.optional)

    def bind(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The checked positional argument list of a call with these arguments
        (L{bind_unchecked}, then L{check})."""
        values = self.bind_unchecked(*args, **kwargs)
        self.check(values)
        return values

    def bind_unchecked(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """The positional argument list of a call with these arguments
        (positional or by name); their types are not checked.

        Optional arguments after the last one given are left out of the
        list, as a caller of Ganeti's RPC would (unless L{send_all}); one
        left out before a given one is sent as its default, and so is a
        L{filled} one.

        @raise ContractError: too many, too few or unknown arguments (or
            what L{refuse_count} raises)
        """
        names, optional, defaults, _ = self._shape()
        if len(args) > len(names):
            raise self.refuse_count("Bad arguments for %s: too many positional arguments" % self.name)
        bound = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in bound or name not in names:
                raise self.refuse_count("Bad arguments for %s: unexpected or repeated argument %r" % (self.name, name))
            bound[name] = value
        missing = [n for n, d in zip(names, defaults) if n not in bound and d is _NO_DEFAULT]
        if missing:
            raise self.refuse_count("Bad arguments for %s: missing %s" % (self.name, ", ".join(missing)))
        given = [i for i, n in enumerate(names) if n in bound or not optional[i]]
        count = len(names) if self.send_all else (given[-1] + 1 if given else 0)
        return tuple(bound.get(n, defaults[i]) for i, n in enumerate(names[:count]))

    def check(self, args: list[Any] | tuple[Any, ...]) -> None:
        """Refuse arguments that do not fit the declaration (L{check_count}
        and L{check_types})."""
        self.check_count(args)
        self.check_types(args)

    def arity(self) -> str:
        """How many arguments it takes, in words: C{"2"}, C{"1 to 2"}."""
        total = len(self.arguments)
        return "%d" % total if self.required == total else "%d to %d" % (self.required, total)

    def check_count(self, args: list[Any] | tuple[Any, ...]) -> None:
        """@raise ContractError: more arguments than declared, or fewer than required"""
        total = len(self.arguments)
        if not self.required <= len(args) <= total:
            raise self.refuse_count("Bad arguments for %s: it takes %s argument%s (%s), not %d" % (
                self.name, self.arity(), "" if total == 1 else "s", ", ".join(a.name for a in self.arguments),
                len(args)), len(args))

    def check_types(self, args: list[Any] | tuple[Any, ...]) -> None:
        """@raise ContractError: an argument of another type than declared
        (the message names the call and the argument)"""
        for index, (argument, value) in enumerate(zip(self.arguments, args)):
            if not argument.accepts(value, self.strictness):
                raise self.refuse_type(index, argument, value)

    def refuse_count(self, message: str, given: int | None = None) -> Exception:
        """The error for a call with the wrong number of arguments
        (C{given}, when known); a protocol may answer with its own."""
        return ContractError(message)

    def refuse_type(self, index: int, argument: Argument, value: Any) -> Exception:
        """The error for argument C{index} (C{value}) not of its declared type."""
        return ContractError("Bad arguments for %s: argument %d (%s) must be %s, not %.100r" % (
            self.name, index + 1, argument.name, argument.describe(), value))


class Table(Generic[D]):
    """The declarations of one contract, by name."""

    #: what one declaration is called in messages
    kind_name = "call"

    def __init__(self) -> None:
        self._by_name: dict[str, D] = {}

    def add(self, declaration: D) -> D:
        """Add C{declaration}; a name may be declared once."""
        if declaration.name in self._by_name:
            raise ContractError("%s %s declared twice" % (self.kind_name, declaration.name))
        self._by_name[declaration.name] = declaration
        return declaration

    def get(self, name: str) -> D | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return list(self._by_name)

    def __iter__(self) -> Iterator[D]:
        return iter(self._by_name.values())

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self._by_name)


def pair(table: Table[D], handlers: Mapping[str, Callable[..., Any]], server: str) -> dict[str, tuple[D, Callable[..., Any]]]:
    """Each declaration of C{table} with its handler from C{handlers} (by name).

    @param server: who serves the table, for the message ("noded")
    @raise ContractError: a declaration has no handler or a handler is not
        declared (the message lists both)
    """
    declared = set(table.names())
    undeclared = sorted(set(handlers) - declared)
    unserved = sorted(declared - set(handlers))
    if undeclared or unserved:
        raise ContractError("%s's handlers do not match the contract: undeclared %s, without handler %s"
                            % (server, ", ".join(undeclared) or "none", ", ".join(unserved) or "none"))
    return {d.name: (d, handlers[d.name]) for d in table}


def check_signature(declaration: Declaration[Any, Any], function: Callable[..., Any]) -> None:
    """Refuse a handler that does not take the declared arguments in wire
    order (same names; every count the declaration allows binds).

    @raise ContractError: it does not
    """
    import inspect

    parameters = list(inspect.signature(function).parameters.values())
    names = [p.name for p in parameters]
    wanted = [a.name for a in declaration.arguments]
    if names != wanted:
        raise ContractError("the handler of %s takes (%s), not the declared (%s)"
                            % (declaration.name, ", ".join(names), ", ".join(wanted)))
    for count in range(declaration.required, len(wanted) + 1):
        try:
            inspect.signature(function).bind(*range(count))
        except TypeError:
            raise ContractError("the handler of %s cannot be called with %d arguments"
                                % (declaration.name, count)) from None
