"""Validating the names opcodes give to new objects (pure, no I/O).

Instance and node names follow Ganeti's hostname rule
(C{netutils.Hostname.GetNormalizedName}): lower-cased, 1 to 255 of
C{a-z 0-9 . _ -}, no empty label (C{..} or a leading dot), a trailing dot
dropped.  Ganeti itself takes any non-empty node group name; ours must be
usable as a word on a command line and in file and lock names: 1 to 255
of C{A-Z a-z 0-9 . _ + -}, not starting with C{.} or C{-}.  Errors are
L{errors.OpPrereqError} with C{ECODE_INVAL}, naming the value.
"""

from __future__ import annotations

import re
from typing import Any

from ganeti import errors

_HOSTNAME_RE = re.compile(r"^[a-z0-9._-]{1,255}$")
_GROUP_RE = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]{0,254}$")


def normalize_hostname(name: Any, what: str = "hostname") -> str:
    """C{name} lower-cased without a trailing dot, if it is a valid host name.

    @param what: what the name is, for the error (C{"instance name"})
    """
    if not isinstance(name, str):
        raise errors.OpPrereqError("Invalid %s %r: not a string" % (what, name), errors.ECODE_INVAL)
    lowered = name.lower()
    if not _HOSTNAME_RE.match(lowered) or ".." in lowered or lowered.startswith("."):
        raise errors.OpPrereqError(
            "Invalid %s '%s': a host name of letters, digits, '.', '_' and '-' (at most 255), without empty labels"
            % (what, name), errors.ECODE_INVAL)
    return lowered.rstrip(".")


def check_group_name(name: Any) -> str:
    """C{name} if it is a valid node group name."""
    if not isinstance(name, str) or not _GROUP_RE.match(name):
        raise errors.OpPrereqError(
            "Invalid node group name %r: 1 to 255 letters, digits, '.', '_', '+' and '-', not starting with"
            " '.' or '-'" % (name,), errors.ECODE_INVAL)
    return name
