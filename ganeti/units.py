"""Sizes as people read them: the one formatter of MiB values.

Used by the command-line tools' tables and by the logical units' messages
(C{disk grow} says by how much), so both print sizes the same way.
Standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: units L{format_unit} accepts
UNITS = ("h", "m", "g", "t")


def format_unit(value: Any, unit: str) -> str:
    """A size in MiB: C{h} human-readable (C{512M}, C{1.5G}, C{2.0T}),
    C{m}/C{g}/C{t} a number in that unit without suffix.

    A value that is not a number is shown as it is.

    @raise ValueError: an unknown unit.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if unit not in UNITS:
        raise ValueError("invalid unit %r" % unit)
    if unit == "m" or (unit == "h" and value < 1024):
        return "%d%s" % (round(value), "M" if unit == "h" else "")
    if unit == "g" or (unit == "h" and value < 1024 * 1024):
        return "%0.1f%s" % (round(value / 1024.0, 1), "G" if unit == "h" else "")
    return "%0.1f%s" % (round(value / 1024.0 / 1024.0, 1), "T" if unit == "h" else "")
