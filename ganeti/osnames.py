"""The names instances use for an operating system: C{name+variant} for each of its variants, else C{name}.

Pure (the standard library only): OP_OS_DIAGNOSE's answer is turned into these names by the command line
(C{gnt-os list}, C{gnt-instance add}'s OS choices) and by RAPI, without the opcodes' model.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable


def os_names(name: str, variants: Iterable[str] | None) -> list[str]:
    """The names instances use for an OS: C{name+variant} for each variant, else C{name}."""
    variants = list(variants or [])
    return ["%s+%s" % (name, v) for v in variants] if variants else [name]


__all__ = ["os_names"]
