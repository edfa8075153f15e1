"""A whole RAPI stack (WConfD, LuxiD, ganeti-rapi) in one root, for tests and benchmarks."""

from __future__ import annotations

from twisted.internet.interfaces import IReactorTime

from ganeti import crypto, daemons
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.testing.daemons import Daemon, seed_config


class RapiDaemon(Daemon):
    """C{twistd ganeti-rapi}: ready once it accepts TCP connections."""

    def __init__(self, paths: Paths, host: str, port: int, *args: str) -> None:
        super().__init__(paths, "ganeti-rapi", "--bind", host, "--port", str(port), *args, tcp=(host, port))
        self.host, self.port = host, port


class RapiStack:
    """WConfD + LuxiD + RAPI on one root; C{users} is the users file text.

    @param rapi_args: more ganeti-rapi options (e.g. C{("--header-timeout", "2")})
    """

    def __init__(self, paths: Paths, config: ConfigData, users: str, host: str = "127.0.0.1",
                 cluster_name: str = "cluster.test", rapi_args: tuple[str, ...] = ()) -> None:
        self.paths = paths
        seed_config(paths, config)
        self.key_pem, self.cert_pem = crypto.generate_key_and_cert(cluster_name)
        crypto.write_pem_file(paths.rapi_pem, self.key_pem, self.cert_pem)
        self.write_users(users)
        self.host, self.port = host, daemons.free_port(host)
        self.url = "https://%s:%d" % (host, self.port)
        self.wconfd = Daemon(paths, "ganeti-wconfd")
        self.luxid = Daemon(paths, "ganeti-luxid")
        self.rapi = RapiDaemon(paths, host, self.port, *rapi_args)

    def write_users(self, text: str) -> None:
        import os

        os.makedirs(os.path.dirname(self.paths.rapi_users), exist_ok=True)
        with open(self.paths.rapi_users, "w") as handle:
            handle.write(text)

    async def start(self, reactor: IReactorTime) -> RapiStack:
        for daemon in (self.wconfd, self.luxid, self.rapi):
            daemon.start()
            await daemon.ready(reactor, timeout=120)
        return self

    def stop(self) -> None:
        for daemon in (self.rapi, self.luxid, self.wconfd):
            daemon.stop()
