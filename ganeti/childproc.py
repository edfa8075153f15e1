"""Reaping forked children without blocking: shared by the job fork server
(L{ganeti.luxid.forkserver}) and the warm launcher (L{ganeti.warmstart}).
Standard library only: both import it before forking."""

from __future__ import annotations

import errno
import os
from typing import Iterator


def exited() -> Iterator[tuple[int, int]]:
    """C{(pid, wait status)} of each child that has ended, without waiting
    for the others; stops when none is left to reap now (or none at all)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        except OSError as e:
            if e.errno == errno.EINTR:
                continue
            raise
        if pid == 0:
            return
        yield pid, status


def pid_exists(pid: int) -> bool:
    """Whether a process C{pid} exists (signal 0; one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
