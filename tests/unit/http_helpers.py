"""Node RPC over an in-memory connection: the real HTTP client (L{ganeti.rpc.http})
talking to a real C{twisted.web} site, bytes moved by C{iosim} when the test says."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import succeed
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.test import iosim
from twisted.web.server import Site
from zope.interface import implementer


@implementer(IStreamClientEndpoint)
class InMemoryEndpoint:
    """Connects to C{resource}'s site in memory; L{flush} moves the bytes both ways."""

    def __init__(self, resource: Any) -> None:
        self.site = Site(resource)
        self.pumps: list[iosim.IOPump] = []

    def connect(self, factory: Any) -> Any:
        client = factory.buildProtocol(None)
        server = self.site.buildProtocol(None)
        pump = iosim.connect(server, iosim.FakeTransport(server, isServer=True),
                             client, iosim.FakeTransport(client, isServer=False), greet=False)
        self.pumps.append(pump)
        return succeed(client)

    def flush(self) -> None:
        for pump in self.pumps:
            pump.flush()


def in_memory(client: Any, resource: Any) -> InMemoryEndpoint:
    """Make C{client} (an L{ganeti.rpc.RpcClient}) reach every node at C{resource}."""
    endpoint = InMemoryEndpoint(resource)
    client._http._endpoint_for = lambda _key: endpoint
    return endpoint
