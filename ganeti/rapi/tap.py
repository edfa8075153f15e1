"""C{twistd ganeti-rapi}: options and the composition root.

Run in the foreground with
C{twistd -n --pidfile= ganeti-rapi --root DIR --bind ADDRESS [--port 5080]}.
HTTPS with C{ROOT/var/lib/ganeti/rapi.pem}; users from
C{ROOT/var/lib/ganeti/rapi/users}; every request goes to LuxiD over
C{ROOT/var/run/ganeti/socket/ganeti-query}; on a master candidate that is
not the master, to the master's RAPI (L{ganeti.rapi.forward}).
"""

from __future__ import annotations

import os

from twisted.application.service import IService, MultiService, Service
from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint
from twisted.logger import Logger
from twisted.python import usage

from ganeti import crypto, daemons, http_limits, ports
from ganeti.daemon import FrozenHeapService, PidFileService, lock_pid_file, port_number, positive_int
from ganeti.daemons import node_address
from ganeti.listening import stream_listener
from ganeti.logfile import quiet_twisted
from ganeti.paths import Paths
from ganeti.rapi.forward import ForwardingResource
from ganeti.rapi.luxi import LuxiPool
from ganeti.rapi.server import DEFAULT_MAX_BODY, RapiResource, RapiSite, request_factory
from ganeti.rapi.users import UsersFile
from ganeti.reactors import IReactor, installed

DEFAULT_PORT = ports.RAPI


class Options(usage.Options):
    synopsis = "[--bind ADDRESS] [--port 5080] [options]"
    longdesc = (
        "ganeti-rapi serves Ganeti's remote API (version 2) over HTTPS and forwards every "
        "request to LuxiD over LUXI."
    )
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["bind", "b", None, "Address to listen on (default: the node's primary IP from var/lib/ganeti/node.json)."],
        ["port", "p", None, "TCP port (default: $GANETI_RAPI_PORT or 5080).", port_number],
        ["max-body", None, DEFAULT_MAX_BODY, "Largest request body accepted, in bytes.", positive_int],
        ["luxi-connections", None, 4, "LUXI connections kept open to LuxiD.", positive_int],
        ["rpc-port", None, ports.NODED, "The node daemons' port (a logout in the web console is pushed to the "
         "master candidates' node daemons).", port_number],
        ["mond-port", None, ports.MOND, "MonD's port on the nodes, read for the web console's charts (0: no charts).",
         int],
    ] + http_limits.option_parameters(http_limits.HttpLimits())
    optFlags = [
        ["require-authentication", None, "Require authentication for reads too."],
        ["no-ui", None, "Do not serve the web console at /ui/."],
        ["public-metrics", None, "Serve /metrics without authentication, even with --require-authentication."],
    ]

    def postOptions(self) -> None:
        if self["port"] is None:
            self["port"] = daemons.port_of(daemons.BY_NAME["ganeti-rapi"])
        if not self["bind"]:  # the node's primary IP, as gnt-cluster init or a join recorded it
            self["bind"] = node_address(Paths.from_option(self["root"]))
        if not self["bind"]:
            raise usage.UsageError("--bind ADDRESS is required (this root has no node identity to take it from)")
        self["paths"] = Paths.from_option(self["root"])
        self["limits"] = http_limits.limits_from_options(self)


class _ClosePool(Service):
    def __init__(self, pool: LuxiPool) -> None:
        self.pool = pool

    def stopService(self) -> None:
        super().stopService()
        self.pool.close()


log = Logger()


def connection_limits(requested: http_limits.HttpLimits) -> http_limits.HttpLimits:
    """C{requested}, fitted below the open-files limit (raised to its hard limit first)."""
    limits = http_limits.fit_to_fd_limit(requested, http_limits.raise_open_files_limit())
    if limits != requested:
        log.warn("ganeti-rapi: --max-connections lowered to {n} to stay below the open-files limit",
                 n=limits.max_connections)
    return limits


def makeService(options: Options, reactor: IReactor | None = None) -> IService:
    if reactor is None:
        reactor = installed()  # the one global reactor

        quiet_twisted()  # the real daemon: no "Starting factory" line per connection
    paths: Paths = options["paths"]
    if not os.path.exists(paths.rapi_pem):
        raise SystemExit("ganeti-rapi: no certificate at %s; initialise the cluster first" % paths.rapi_pem)
    from ganeti.rpc.tls import ReloadingCertificate

    tls = ReloadingCertificate(paths.rapi_pem)  # follows rapi.pem: renew-crypto without a restart
    key_pem, cert_pem = crypto.load_pem_file(paths.rapi_pem)  # the key also signs web console sessions
    paths.ensure_dirs()
    pid_fd = lock_pid_file(paths, "ganeti-rapi")
    from ganeti.luxi.master import wait_window

    # rides through a failover: a call under way goes on at the new master (over TLS, from here)
    pool = LuxiPool(reactor, paths.luxi_socket, size=options["luxi-connections"], paths=paths,
                    window=lambda: wait_window(paths))
    resource = RapiResource(
        pool,
        UsersFile(paths.rapi_users),
        require_authentication=options["require-authentication"],
        max_body=options["max-body"],
        public_metrics=options["public-metrics"],
    )
    # on a master candidate that is not the master: every request goes to the master's RAPI
    forwarding = ForwardingResource.for_node(resource, paths, options["port"], reactor, cert_pem)
    resource.forwarding = lambda: forwarding.master() is not None
    if not options["no-ui"]:
        from ganeti.rapi.ui.resource import UiResource
        from ganeti.rapi.ui.revocation import RevocationPusher

        resource.ui = UiResource.for_rapi(resource, key_pem, os.path.join(paths.data_dir, "liveness.log"), reactor,
                                          mond_port=options["mond-port"], revoked=paths.ui_revoked)
        resource.ui.keeper.on_revoke = RevocationPusher(pool, paths, reactor, options["rpc-port"])
    site = RapiSite(forwarding, requestFactory=request_factory(options["max-body"]), reactor=reactor,
                    **http_limits.json_site_options())
    site.displayTracebacks = False
    report = http_limits.ClosureReport(reactor, "ganeti-rapi")
    heap = FrozenHeapService(reactor)
    factory = http_limits.guard(site, connection_limits(options["limits"]), report, tls, max_body=options["max-body"],
                                release=heap.refreeze)
    root = MultiService()
    root.addService(PidFileService(pid_fd))
    report.setServiceParent(root)
    address = options["bind"]
    endpoint_type = TCP6ServerEndpoint if ":" in address else TCP4ServerEndpoint
    endpoint = endpoint_type(reactor, options["port"], backlog=http_limits.BACKLOG, interface=address)
    where = "%s port %d (HTTPS)" % (address, options["port"])
    stream_listener(endpoint, factory, where, daemon="ganeti-rapi", reactor=reactor).setServiceParent(root)
    _ClosePool(pool).setServiceParent(root)
    heap.setServiceParent(root)
    return root
