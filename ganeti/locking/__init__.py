"""Ganeti's lock semantics as pure logic: names, owners and the manager.

Nothing here does I/O, reads the clock or imports Twisted; WConfD wraps
L{LockManager} and persists it with L{LockManager.to_data}.
"""

from ganeti.locking.manager import LockManager
from ganeti.locking.names import (
    BGL,
    CONFIG_LOCK,
    EXCLUSIVE,
    GROUP_MEMBER,
    LEVELS,
    NAL,
    RELEASE,
    SHARED,
    LockName,
    group_lock,
)
from ganeti.locking.owner import Owner
from ganeti.locking.requests import parse_request

__all__ = [
    "BGL",
    "CONFIG_LOCK",
    "EXCLUSIVE",
    "GROUP_MEMBER",
    "LEVELS",
    "NAL",
    "RELEASE",
    "SHARED",
    "LockManager",
    "LockName",
    "Owner",
    "group_lock",
    "parse_request",
]
