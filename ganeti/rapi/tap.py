"""C{twistd ganeti-rapi}: options and the composition root.

Run in the foreground with
C{twistd -n --pidfile= ganeti-rapi --root DIR --bind ADDRESS [--port 5080]}.
HTTPS with C{ROOT/var/lib/ganeti/rapi.pem}; users from
C{ROOT/var/lib/ganeti/rapi/users}; every request goes to LuxiD over
C{ROOT/var/run/ganeti/socket/ganeti-query}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.service import IService, MultiService, Service
from twisted.internet.endpoints import SSL4ServerEndpoint
from twisted.internet.ssl import PrivateCertificate
from twisted.python import usage

from ganeti import crypto
from ganeti.daemon import FrozenHeapService, PidFileService, lock_pid_file, port_number, positive_int
from ganeti.listening import stream_listener
from ganeti.paths import Paths
from ganeti.rapi.luxi import LuxiPool
from ganeti.rapi.server import DEFAULT_MAX_BODY, RapiResource, RapiSite, request_factory
from ganeti.rapi.users import UsersFile

DEFAULT_PORT = 5080


class Options(usage.Options):
    synopsis = "--bind ADDRESS [--port 5080] [options]"
    longdesc = (
        "ganeti-rapi serves Ganeti's remote API (version 2) over HTTPS and forwards every "
        "request to LuxiD over LUXI."
    )
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["bind", "b", None, "Address to listen on (e.g. 127.0.0.1 or ::)."],
        ["port", "p", DEFAULT_PORT, "TCP port (default 5080).", port_number],
        ["max-body", None, DEFAULT_MAX_BODY, "Largest request body accepted, in bytes.", positive_int],
        ["luxi-connections", None, 4, "LUXI connections kept open to LuxiD.", positive_int],
    ]
    optFlags = [
        ["require-authentication", None, "Require authentication for reads too."],
        ["public-metrics", None, "Serve /metrics without authentication, even with --require-authentication."],
    ]

    def postOptions(self) -> None:
        if not self["bind"]:
            raise usage.UsageError("--bind ADDRESS is required")
        self["paths"] = Paths.from_option(self["root"])


class _ClosePool(Service):
    def __init__(self, pool: LuxiPool) -> None:
        self.pool = pool

    def stopService(self) -> None:
        super().stopService()
        self.pool.close()


def makeService(options: Options, reactor: Any = None) -> IService:
    if reactor is None:
        from twisted.internet import reactor
    paths: Paths = options["paths"]
    if not os.path.exists(paths.rapi_pem):
        raise SystemExit("ganeti-rapi: no certificate at %s; initialise the cluster first" % paths.rapi_pem)
    key_pem, cert_pem = crypto.load_pem_file(paths.rapi_pem)
    tls = PrivateCertificate.loadPEM(key_pem + b"\n" + cert_pem).options()
    paths.ensure_dirs()
    pid_fd = lock_pid_file(paths, "ganeti-rapi")
    pool = LuxiPool(reactor, paths.luxi_socket, size=options["luxi-connections"])
    resource = RapiResource(
        pool,
        UsersFile(paths.rapi_users),
        require_authentication=options["require-authentication"],
        max_body=options["max-body"],
        public_metrics=options["public-metrics"],
    )
    site = RapiSite(resource, requestFactory=request_factory(options["max-body"]))
    site.displayTracebacks = False
    root = MultiService()
    root.addService(PidFileService(pid_fd))
    endpoint = SSL4ServerEndpoint(reactor, options["port"], tls, interface=options["bind"])
    where = "%s port %d (HTTPS)" % (options["bind"], options["port"])
    stream_listener(endpoint, site, where, daemon="ganeti-rapi", reactor=reactor).setServiceParent(root)
    _ClosePool(pool).setServiceParent(root)
    FrozenHeapService(reactor).setServiceParent(root)
    return root
