"""JSON for the gnt-* tools: the standard library's C codec without the C{json} package's import.

Importing C{json} compiles five regular expressions (its pure-Python fallbacks' and its string
escaping's): 4.9 M of the 103 M instructions of a C{gnt-instance list}, valgrind's count.  Its C
accelerator, C{_json}, which C{json} itself uses for what a client sends and reads, needs none of
them.  L{dumps} and L{loads} are C{json.dumps(value, separators=(",", ":"), allow_nan=False)} and
C{json.loads} with that accelerator (CPython's, as Ganeti runs on).  Their errors are C{json}'s: C{TypeError} for what cannot be encoded, C{ValueError} for NaN or an
infinity, C{json.JSONDecodeError} (a C{ValueError}) for what is not JSON.

Daemons use orjson; this is for the blocking clients' few and small messages.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from _json import encode_basestring_ascii, make_encoder, make_scanner

#: JSON's blanks, skipped after a document
_BLANKS = " \t\n\r"


def _refuse(value: Any) -> Any:
    raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)


class _Options:
    """What the C scanner reads of its decoder: C{json.loads}' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = make_scanner(_Options())  # type: ignore[arg-type]  # (typeshed: a scanner)


def dumps(value: Any) -> str:
    """C{value} as compact JSON text (ASCII; NaN and the infinities refused)."""
    # a new encoder each time: its table of the containers being encoded (circular references) may
    # keep entries after an error
    encode = make_encoder({}, _refuse, encode_basestring_ascii, None, ":", ",", False, False, False)
    return "".join(encode(value, 0))


def loads(text: str | bytes) -> Any:
    """The value of the JSON document C{text} (bytes are UTF-8)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    start = 0
    while start < len(text) and text[start] in _BLANKS:
        start += 1
    try:
        value, end = _scan(text, start)
    except StopIteration as e:
        return _error("Expecting value", text, e.value)
    while end < len(text) and text[end] in _BLANKS:
        end += 1
    if end != len(text):
        return _error("Extra data", text, end)
    return value


def _error(message: str, text: str, position: int) -> Any:
    from json import JSONDecodeError

    raise JSONDecodeError(message, text, position)


__all__ = ["dumps", "loads"]
