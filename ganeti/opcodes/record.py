"""The base of the typed opcode classes of L{ganeti.opcodes.typed}.

Opcodes are declared once, as data, in the family modules of
L{ganeti.opcodes}; L{ganeti.opcodes.generate} writes one frozen attrs class
per opcode from those declarations, so that mypy sees every field a
logical unit reads (C{self.op.instance_name}) and a misspelt one is a type
error.  This module holds what those classes share: building one from a
validated opcode dict and giving the dict back.

The wire form stays the dict: job files, LUXI and RAPI carry exactly what
was submitted; the typed object lives only inside the job process, built
from the dict L{ganeti.opcodes.validate} returned.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, TypeVar

import attrs

from ganeti import errors

_R = TypeVar("_R", bound="Record")


class Record:
    """Mixed into every typed opcode class (which are frozen attrs classes).

    @cvar OP_ID: the opcode's id.
    """

    __slots__ = ()

    OP_ID: ClassVar[str] = ""

    @classmethod
    def from_dict(cls: type[_R], op: Mapping[str, Any]) -> _R:
        """The typed opcode for C{op}, a dict L{ganeti.opcodes.validate}
        returned (defaults filled in); C{OP_ID} may be left out.

        @raise errors.ProgrammerError: C{op} is another opcode, or has a
            key the opcode does not declare.
        """
        op_id = op.get("OP_ID", cls.OP_ID)
        if op_id != cls.OP_ID:
            raise errors.ProgrammerError("%s cannot be built from %r" % (cls.__name__, op_id))
        fields = attrs.fields_dict(cls)  # type: ignore[arg-type]
        unknown = sorted(str(k) for k in op if k != "OP_ID" and k not in fields)
        if unknown:
            raise errors.ProgrammerError("%s has no field(s) %s" % (cls.__name__, ", ".join(unknown)))
        return cls(**{k: v for k, v in op.items() if k != "OP_ID"})

    def to_dict(self) -> dict[str, Any]:
        """The opcode dict again: C{OP_ID} and every field, except those
        without a default that are C{None} (absent, as
        L{ganeti.opcodes.validate} treats a null)."""
        out: dict[str, Any] = {"OP_ID": self.OP_ID}
        for field in attrs.fields(type(self)):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if value is None and field.default is None:
                continue
            out[field.name] = value
        return out
