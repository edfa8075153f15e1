"""A whole RAPI stack (WConfD, LuxiD, ganeti-rapi) in one root, for tests and benchmarks."""

from __future__ import annotations

import socket
import time
from typing import Any

from twisted.internet.task import deferLater

from ganeti import crypto
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.testing.daemons import Daemon, seed_config


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class RapiDaemon(Daemon):
    """C{twistd ganeti-rapi}: ready once it accepts TCP connections."""

    def __init__(self, paths: Paths, host: str, port: int, *args: str) -> None:
        super().__init__(paths, "ganeti-rapi", "--bind", host, "--port", str(port), *args)
        self.host, self.port = host, port

    async def ready(self, reactor: Any, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError("ganeti-rapi exited with %s:\n%s" % (self.process.returncode, self.output()))
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("ganeti-rapi did not start within %ss:\n%s" % (timeout, self.output()))
            await deferLater(reactor, 0.02, lambda: None)


class RapiStack:
    """WConfD + LuxiD + RAPI on one root; C{users} is the users file text."""

    def __init__(self, paths: Paths, config: ConfigData, users: str, host: str = "127.0.0.1",
                 cluster_name: str = "cluster.test") -> None:
        self.paths = paths
        seed_config(paths, config)
        self.key_pem, self.cert_pem = crypto.generate_key_and_cert(cluster_name)
        crypto.write_pem_file(paths.rapi_pem, self.key_pem, self.cert_pem)
        self.write_users(users)
        self.host, self.port = host, free_port(host)
        self.url = "https://%s:%d" % (host, self.port)
        self.wconfd = Daemon(paths, "ganeti-wconfd")
        self.luxid = Daemon(paths, "ganeti-luxid")
        self.rapi = RapiDaemon(paths, host, self.port)

    def write_users(self, text: str) -> None:
        import os

        os.makedirs(os.path.dirname(self.paths.rapi_users), exist_ok=True)
        with open(self.paths.rapi_users, "w") as handle:
            handle.write(text)

    async def start(self, reactor: Any) -> "RapiStack":
        for daemon in (self.wconfd, self.luxid, self.rapi):
            daemon.start()
            await daemon.ready(reactor, timeout=120)
        return self

    def stop(self) -> None:
        for daemon in (self.rapi, self.luxid, self.wconfd):
            daemon.stop()
