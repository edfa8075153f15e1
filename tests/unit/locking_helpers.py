"""Shared names and helpers of the L{ganeti.locking.manager.LockManager} tests."""

from __future__ import annotations

from typing import Any

from ganeti.locking import LockManager, Owner

S, X, R = "shared", "exclusive", "release"
A, B, C = "instance/a", "instance/b", "instance/c"
G = "instance/[lockset]"
CG = "cluster/[lockset]"
N1, N2 = "node/n1", "node/n2"
NG = "node/[lockset]"
NR1 = "node-res/n1"

NAMES = [A, B, C, N1, N2, NR1, "node-res/n2", "nodegroup/g1", "network/net1"]


def O(ident: int | str) -> Owner:
    """The owner with identifier C{ident}."""
    return Owner(ident, "/var/run/ganeti/livelocks/owner_%s" % (ident,), 4000 + len(str(ident)))


def make(holdings: dict[Any, list[tuple[str, str]]] | None = None) -> LockManager:
    """A manager knowing L{NAMES} where each owner holds what C{holdings} says."""
    manager = LockManager(NAMES)
    for ident, locks in (holdings or {}).items():
        manager.set_owner_state(O(ident), locks, None)
    manager.retry_pending()
    manager.take_dirty()
    return manager
