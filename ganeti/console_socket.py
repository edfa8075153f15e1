"""Where a kvm instance's serial console is: the Unix socket named by its console description.

The kvm hypervisor describes a serial console as a message plus the command
Ganeti runs on the node (C{socat ... UNIX-CONNECT:<socket>}).  Both
C{gnt-instance console} (L{ganeti.client.serial_console}) and the web
console (L{ganeti.rapi.ui.console}) attach to that socket where it is on
their machine.  Standard library only.
"""

from __future__ import annotations

import os
import stat
from typing import Any

_PREFIX = "UNIX-CONNECT:"


def socket_path(console: Any) -> str | None:
    """The Unix socket a console description's C{command} connects to."""
    command = console.get("command") if isinstance(console, dict) else None
    if not isinstance(command, (list, tuple)):
        return None
    for part in command:
        if isinstance(part, str) and part.startswith(_PREFIX) and len(part) > len(_PREFIX):
            return part[len(_PREFIX):]
    return None


def is_local_socket(path: str) -> bool:
    """Whether C{path} is a Unix socket on this machine."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False
