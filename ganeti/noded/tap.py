"""C{twistd ganeti-noded}: options and the composition root.

    twistd -n ganeti-noded --root DIR --bind 127.0.1.1 [--port 1811]
           [--join-token TOKEN | --join-token-file FILE]

Serves node RPC over HTTPS with mutual TLS: the TLS layer is a
C{TLSMemoryBIOFactory} around the web site on a plain TCP endpoint, so that
the handshake can require and pin the client's cluster certificate before
any HTTP is parsed.  The same procedures are served as plain HTTP on a
Unix socket (C{var/run/ganeti/socket/ganeti-noded}, mode 0600) to this
node's own processes (L{ganeti.rpc.local}).

Without C{server.pem} but with a join token, noded starts in unjoined mode
(L{ganeti.noded.join}, served by a child process: L{ganeti.noded.joinchild})
and switches to the above once the master joined it.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from twisted.application.service import IService, MultiService
from twisted.internet.endpoints import TCP4ServerEndpoint, TCP6ServerEndpoint, UNIXServerEndpoint
from twisted.internet.interfaces import IReactorProcess
from twisted.logger import Logger
from twisted.python import usage

from ganeti import errors, http_limits
from ganeti.daemon import FrozenHeapService, PidFileService, lock_pid_file, port_number
from ganeti.daemons import node_address
from ganeti.ha.elector import ElectionService
from ganeti.heartbeat import wire as heartbeat_wire
from ganeti.heartbeat.client import heartbeat_client
from ganeti.listening import stream_listener
from ganeti.logfile import quiet_twisted
from ganeti.noded import accel_start, hooks
from ganeti.noded.joinchild import JoinChild
from ganeti.noded.procedures import NodeProcedures
from ganeti.noded.server import node_site
from ganeti.noded.warm import WarmService
from ganeti.paths import Paths
from ganeti.reactors import IReactor, installed
from ganeti.rpc import join, wire
from ganeti.rpc.local import SOCKET_MODE
from ganeti.rpc.tls import ReloadingServerContextFactory

#: noded's defaults: bodies may be large (up to 512 MiB), and only a peer
#: with the cluster certificate gets past the TLS handshake to send one; the
#: master opens up to 4 connections per running job, so one address may
#: hold many (an unauthenticated one is cut at the handshake timeout)
DEFAULT_LIMITS = http_limits.HttpLimits(body_timeout=600.0, max_connections_per_ip=400)

log = Logger()


def mond_port(value: str) -> int:
    """C{--mond-port}: a TCP port, or 0."""
    return 0 if value.strip() == "0" else port_number(value)


def _positive_seconds(value: str) -> float:
    """C{--hooks-timeout}: a positive number of seconds."""
    try:
        seconds = float(value)
    except ValueError:
        raise usage.UsageError("not a number of seconds: %r" % value) from None
    if not 0 < seconds < 86400:
        raise usage.UsageError("must be a positive number of seconds below a day: %r" % value)
    return seconds


class Options(usage.Options):
    synopsis = "[--bind ADDRESS] [options]"
    longdesc = (
        "NodeD runs on every node and serves node RPC (HTTPS, mutual TLS with "
        "the cluster certificate server.pem) to the master and the candidates."
    )
    optFlags = [["access-log", None, "Log a line for every request."],
                ["no-warm-start", None, "On a master candidate, start the master daemons cold in a failover "
                 "(no launcher with their imports done kept running; see ganeti.warmstart)."]]
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["bind", "b", None, "Address to listen on (default: the node's primary IP from var/lib/ganeti/node.json)."],
        ["port", "p", wire.DEFAULT_PORT, "TCP port (default 1811).", port_number],
        ["join-token", None, None, "Without server.pem: wait to be joined by a master that knows TOKEN."],
        ["join-token-file", None, None, "Like --join-token, the token read from FILE (removed once used)."],
        ["heartbeat-port", None, None, "Port of the master's LuxiD heartbeat listener "
         "(default: $GANETI_HEARTBEAT_PORT or 1817; 0: no heartbeats).", port_number],
        ["confd-port", None, 1814, "UDP port of the master candidates' ganeti-confd, asked where the master is "
         "when this node's ssconf names none or a master that does not answer (default 1814).", port_number],
        ["hooks-timeout", None, hooks.DEFAULT_TIMEOUT, "Seconds a hook script may run before it is killed "
         "(default 300).", _positive_seconds],
        ["mond-port", None, 1815, "Once joined, start ganeti-mond on this port of --bind (0: do not).", mond_port],
    ] + http_limits.option_parameters(DEFAULT_LIMITS)

    def postOptions(self) -> None:
        if not self["bind"]:  # the node's primary IP, as gnt-cluster init or a join recorded it
            self["bind"] = node_address(Paths.from_option(self["root"]))
        if not self["bind"]:
            raise usage.UsageError("--bind ADDRESS is required (this root has no node identity to take it from)")
        self["paths"] = Paths.from_option(self["root"])
        if self["heartbeat-port"] is None:
            self["heartbeat-port"] = heartbeat_wire.heartbeat_port()
        self["limits"] = http_limits.limits_from_options(self)
        if self["join-token"] and self["join-token-file"]:
            raise usage.UsageError("give --join-token or --join-token-file, not both")
        token = self["join-token"]
        if self["join-token-file"]:
            try:
                with open(self["join-token-file"]) as handle:
                    token = handle.read()
            except OSError as e:
                raise usage.UsageError("cannot read the join token file: %s" % e) from e
        if token is not None:
            try:
                token = join.check_token(token)
            except ValueError as e:
                raise usage.UsageError(str(e)) from e
        self["token"] = token


def start_mond(paths: Paths, address: str, port: int, reactor: IReactorProcess) -> None:
    """Start the node's ganeti-mond (as Ganeti's node setup does when a node is added); C{port} 0: do not."""
    from twisted.internet.protocol import ProcessProtocol

    from ganeti import daemons

    if not port:
        return
    argv, env = daemons.twistd_command(paths, daemons.MOND, ["--root", paths.root, "--bind", address,
                                                             "--port", str(port)])
    log.info("ganeti-noded: starting ganeti-mond on {address} port {port}", address=address, port=port)
    reactor.spawnProcess(ProcessProtocol(), argv[0], argv, env=env, path=paths.root)


def makeService(options: Options, reactor: IReactor | None = None) -> IService:
    if reactor is None:
        reactor = installed()  # the one global reactor

        quiet_twisted()  # the real daemon: no "Starting factory" line per connection
    paths: Paths = options["paths"]
    paths.ensure_dirs()
    address = options["bind"]
    if ":" in address:
        endpoint: Any = TCP6ServerEndpoint(reactor, options["port"], backlog=http_limits.BACKLOG, interface=address)
    else:
        endpoint = TCP4ServerEndpoint(reactor, options["port"], backlog=http_limits.BACKLOG, interface=address)
    where = "%s port %d (TCP)" % (address, options["port"])

    limits = http_limits.fit_to_fd_limit(options["limits"], http_limits.raise_open_files_limit())
    if limits != options["limits"]:
        log.warn("ganeti-noded: --max-connections lowered to {n} to stay below the open-files limit",
                 n=limits.max_connections)
    report = http_limits.ClosureReport(reactor, "ganeti-noded")

    heap = FrozenHeapService(reactor)  # also gives a flood's memory back (http_limits.ConnectionLimiter)

    def guard(site: Any, tls: Any) -> Any:  # a declared body over the RPC limit: 413 before it is read
        return http_limits.guard(site, limits, report, tls, max_body=wire.MAX_BODY, release=heap.refreeze)

    heartbeats = (heartbeat_client(paths, reactor, options["heartbeat-port"], confd_port=options["confd-port"])
                  if options["heartbeat-port"] else None)
    # automatic failover: the candidate's side (acts only with the cluster's auto_failover on)
    elections = ElectionService(paths, reactor, options["port"])

    local: list[Any] = []  # the factory of the local socket, made with joined mode's

    def joined_factory() -> Any:
        tls = ReloadingServerContextFactory(paths)  # follows server.pem: renew-crypto without a restart
        procedures = NodeProcedures(paths, reactor, shutdown=reactor.stop, port=options["port"],
                                    hooks_timeout=options["hooks-timeout"],
                                    lost_since=(lambda: heartbeats.lost_since) if heartbeats is not None else None)
        elections.procedures = procedures.election
        if heartbeats is not None:
            procedures.ssconf_written = heartbeats.master_moved
            procedures.instances.state_changed = heartbeats.instances_changed
        procedures.config_follower.flush()  # config deltas journalled before a stop: into config.data now
        reactor.callWhenRunning(accel_start.probe_at_start, paths, procedures.instances)
        local.append(guard(node_site(procedures, access_log=bool(options["access-log"]), reactor=reactor), None))
        return guard(node_site(procedures, access_log=bool(options["access-log"]), reactor=reactor), tls)

    def local_listener() -> Any:
        """The same procedures for this node's own processes: plain HTTP on a Unix socket (L{ganeti.rpc.local})."""
        path = paths.noded_socket
        endpoint = UNIXServerEndpoint(reactor, path, backlog=http_limits.BACKLOG, mode=SOCKET_MODE)
        # optional: a root too long for a socket path (108 bytes), say, leaves the node's own processes on TLS
        return stream_listener(endpoint, local[-1], "unix socket %s" % path, daemon="ganeti-noded", reactor=reactor,
                               stale_socket=path, optional=True,
                               fallback="this node's own processes call it over TCP and TLS instead")

    def after_join() -> None:
        local_listener().setServiceParent(root)
        start_mond(paths, address, options["mond-port"], reactor)

    unjoined = not os.path.exists(paths.server_pem) and options.get("token")
    if not unjoined:
        try:
            factory = joined_factory()
        except errors.ConfigurationError as e:
            raise SystemExit(
                "ganeti-noded: %s\n(this node has no cluster certificate; create one with "
                "gnt-cluster init, or start noded with --join-token to be joined to a cluster)" % e
            ) from e
    pid_fd = lock_pid_file(paths, "ganeti-noded")
    root = MultiService()
    root.addService(PidFileService(pid_fd))
    if heartbeats is not None:
        heartbeats.setServiceParent(root)
        elections.setServiceParent(root)
    report.setServiceParent(root)
    heap.setServiceParent(root)
    if not options["no-warm-start"]:
        WarmService(paths, reactor).setServiceParent(root)
    if unjoined:
        # the join in a child process (its pyOpenSSL and cryptography stay out of NodeD)
        JoinChild(paths, endpoint.listen, socket.AF_INET6 if ":" in address else socket.AF_INET, options["token"],
                  joined_factory, limits=limits, reactor=reactor, where=where,
                  token_file=options.get("join-token-file"), stop=reactor.stop, after_join=after_join,
                  ).setServiceParent(root)
    else:
        stream_listener(endpoint, factory, where, daemon="ganeti-noded", reactor=reactor).setServiceParent(root)
        local_listener().setServiceParent(root)
    return root
