"""Shared fixtures for the WConfD unit tests.

Small synthetic configs, a L{WConfdService} on L{MemoryStorage} driven by a
L{Clock}, and client connections to it over L{twisted.test.iosim} (no
sockets, no reactor).
"""

from __future__ import annotations

from typing import Any, Coroutine

import attrs
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock
from twisted.test.iosim import IOPump, connectedServerAndClient

from ganeti.config.bootstrap import grow, initial_config
from ganeti.locking import Owner
from ganeti.objects import ConfigData, Instance
from ganeti.wconfd.client import WConfdClient, _ClientProtocol
from ganeti.wconfd.protocol import WConfdProtocol
from ganeti.wconfd.service import WConfdService
from ganeti.wconfd.storage import MemoryStorage
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = _TESTDATA_DIR

MASTER = "node1.example.test"
LOCK_DIR = "/run/ganeti/lock"
BGL = "cluster/BGL"


def make_config(nodes: int = 2, instances: int = 3) -> ConfigData:
    """A cluster of C{1 + nodes} nodes and C{instances} one-disk instances."""
    return grow(initial_config("cluster.example.test", MASTER, "192.0.2.1"), nodes=nodes, instances=instances)


def job(ident: int) -> Owner:
    """The lock owner of job C{ident}, its lock file under L{LOCK_DIR}."""
    return Owner(ident, "%s/job-%d.lock" % (LOCK_DIR, ident))


def by_name(config: ConfigData | Any, kind: str, name: str) -> Any:
    """The entity of C{kind} called C{name} in a ConfigData or ConfigStore."""
    items = config.maps[kind] if hasattr(config, "maps") else getattr(config, kind + "s")
    (found,) = [x for x in items.values() if x.name == name]
    return found


def first_instance(config: ConfigData) -> Instance:
    return next(iter(config.instances.values()))


class FakeConnection:
    """Stands in for a WConfdProtocol: records the grants pushed to it."""

    def __init__(self) -> None:
        self.granted: list[Owner] = []

    def notify_granted(self, owner: Owner) -> None:
        self.granted.append(owner)


def make_service(
    config: ConfigData | None = None, storage: MemoryStorage | None = None, clock: Clock | None = None, **kwargs: Any
) -> WConfdService:
    """A started service; owners are alive unless the test passes a probe."""
    if storage is None:
        storage = MemoryStorage((config or make_config()).to_json())
    kwargs.setdefault("probe", lambda path: False)
    service = WConfdService(storage, clock or Clock(), **kwargs)
    service.startService()
    return service


@attrs.define
class Wire:
    """One client connection to C{service} over an in-memory pipe."""

    service: WConfdService
    client: WConfdClient
    server: WConfdProtocol
    pump: IOPump

    @classmethod
    def connect(cls, service: WConfdService) -> Wire:
        client, server, pump = connectedServerAndClient(
            lambda: WConfdProtocol(service), _ClientProtocol, clock=service.clock
        )
        return cls(service, WConfdClient(client, service.clock), server, pump)

    def run(self, work: Coroutine[Any, Any, Any] | Deferred) -> Deferred:
        """Start C{work} and move bytes until both sides are quiet.

        A bare Deferred (from C{callRemoteString}) is awaited at once: AMP
        drops the connection when an error answer finds no errback.
        """
        d = ensureDeferred(_wait(work) if isinstance(work, Deferred) else work)
        self.pump.flush()
        return d


async def _wait(d: Deferred) -> Any:
    return await d
