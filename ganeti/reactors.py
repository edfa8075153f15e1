"""The reactor's types: Twisted's interfaces that modules need of it, named together.

A module takes its reactor as a parameter (C{reactor} or C{clock}) typed with
what it uses of it: one of Twisted's interfaces (C{IReactorTime} for timers
and timestamps, ...) or, when it needs several, one of the combinations
below.  zope interfaces are nominal, so a combination is an interface of its
own, and L{IReactor} extends them all: the composition roots (C{makeService},
C{scripts/}) take the global reactor as an L{IReactor} with L{installed} or
L{as_reactor}, and pass it down.

For typing only: no class declares these and nothing tests C{providedBy}
against them (a test's fake reactor is passed as it is).
"""

from __future__ import annotations

from typing import Any, cast

from twisted.internet.interfaces import (
    IReactorCore,
    IReactorFDSet,
    IReactorPluggableNameResolver,
    IReactorProcess,
    IReactorSSL,
    IReactorTCP,
    IReactorThreads,
    IReactorTime,
    IReactorUDP,
    IReactorUNIX,
)


class ITimeTCPReactor(IReactorTime, IReactorTCP):
    """Timers and TCP connections (node RPC, heartbeats)."""


class ITimeUNIXReactor(IReactorTime, IReactorUNIX):
    """Timers and UNIX socket connections (WConfD, LuxiD clients)."""


class ITimeThreadsReactor(IReactorTime, IReactorThreads):
    """Timers and the thread pool (blocking file writes)."""


class ITimeProcessReactor(IReactorTime, IReactorProcess):
    """Timers and child processes (jobs, OS scripts, collectors)."""


class ITimeUDPReactor(IReactorTime, IReactorUDP):
    """Timers and UDP ports (confd queries)."""


class IReactor(
    IReactorCore,
    ITimeTCPReactor,
    ITimeUNIXReactor,
    ITimeThreadsReactor,
    ITimeProcessReactor,
    ITimeUDPReactor,
    IReactorSSL,
    IReactorFDSet,
    IReactorPluggableNameResolver,
):
    """All a real reactor provides of what our modules use."""


def as_reactor(reactor: Any) -> IReactor:
    """C{reactor} (the global one, or one given to a composition root) as an L{IReactor}."""
    return cast(IReactor, reactor)


def installed() -> IReactor:
    """The global reactor (installing the default one if none is yet)."""
    from twisted.internet import reactor

    return as_reactor(reactor)
