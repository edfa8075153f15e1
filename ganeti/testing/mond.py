"""MonD and its confd on real loopback nodes, for tests and benchmarks.

    confd = ConfdDaemon(cluster.master, "127.0.1.1", free_port("127.0.1.1", udp=True))
    confd.start(); await confd.ready(reactor)
    mond = MondDaemon(paths, "node2.test", "127.0.1.2", free_port("127.0.1.2"), confd.port)
    mond.start(); await mond.ready(reactor)
    status, headers, body = http_get(mond.address, mond.port, "/1/report/all")
"""

from __future__ import annotations

import http.client
import json
import os
import time
from typing import Any

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import deferLater

from ganeti.daemons import udp_bound
from ganeti.paths import Paths
from ganeti.testing.daemons import Daemon

PLUGIN_DIR = os.path.join("etc", "ganeti", "mond", "plugins")


class ConfdDaemon(Daemon):
    """C{twistd ganeti-confd} on a free UDP port; ready once the port is bound."""

    def __init__(self, paths: Paths, address: str, port: int) -> None:
        super().__init__(paths, "ganeti-confd", "--bind", address, "--port", str(port))
        self.address, self.port = address, port

    async def ready(self, reactor: IReactorTime, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not udp_bound(self.address, self.port):
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError("ganeti-confd exited:\n%s" % self.output())
            if time.monotonic() > deadline:
                raise RuntimeError("ganeti-confd did not start:\n%s" % self.output())
            await deferLater(reactor, 0.05, lambda: None)


class MondDaemon(Daemon):
    """C{twistd ganeti-mond} of one node; ready once it accepts TCP connections."""

    def __init__(self, paths: Paths, node: str, address: str, port: int, confd_port: int, *args: str) -> None:
        super().__init__(paths, "ganeti-mond", "--bind", address, "--port", str(port), "--node-name", node,
                         "--confd-port", str(confd_port), *args, tcp=(address, port))
        self.node, self.address, self.port = node, address, port

    @property
    def plugin_dir(self) -> str:
        return os.path.join(self.paths.root, PLUGIN_DIR)

    def get(self, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        return http_get(self.address, self.port, path, method)

    def json(self, path: str) -> Any:
        status, _headers, body = self.get(path)
        assert status == 200, (path, status, body)
        return json.loads(body)


def http_get(address: str, port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """One plain HTTP request: C{(status, headers, body)}."""
    connection = http.client.HTTPConnection(address, port, timeout=10)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


__all__ = ["ConfdDaemon", "MondDaemon", "PLUGIN_DIR", "http_get"]
