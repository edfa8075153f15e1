"""C{twistd ganeti-luxid}: options and the composition root.

Run in the foreground with C{twistd -n --pidfile= ganeti-luxid --root DIR}.
LUXI is served on C{ROOT/var/run/ganeti/socket/ganeti-query} and, for old
clients, C{ganeti-master} (mode 0660).
"""

from __future__ import annotations

import os

from twisted.application.service import IService, MultiService
from twisted.python import usage

from ganeti import daemon, errors, forkseed, ports
from ganeti.daemon import FrozenHeapService, PidFileService, lock_pid_file, port_number, positive_float, positive_int
from ganeti.daemons import node_address
from ganeti.ha.epochwatch import EpochWatch
from ganeti.ha.guard import GuardedHandler, MasterGuard
from ganeti.ha.stepdown import StepDown
from ganeti.ha.voting import VotingGate, add_options, check_options
from ganeti.heartbeat import wire as heartbeat_wire
from ganeti.heartbeat.server import DEFAULT_MAX_CONNECTIONS, LivenessService, heartbeat_listener, own_name, store_for
from ganeti.heartbeat.watcher import Watcher
from ganeti.jobs.queue import JobQueueDir, QueueLocked
from ganeti.listening import endpoint_listener
from ganeti.logfile import quiet_twisted
from ganeti.luxi.server import LuxiServerFactory
from ganeti.luxid import forkclient
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.luxid.replication import JobDistributor, JobReplicator
from ganeti.luxid.service import LuxidService
from ganeti.paths import Paths
from ganeti.reactors import IReactor, installed


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "LuxiD answers LUXI requests of the gnt-* commands and RAPI, keeps the job queue and runs jobs."
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["socket-mode", None, 0o660, "Permissions of the LUXI sockets, octal (default 660).", lambda v: int(v, 8)],
        ["max-running-jobs", None, None, "Jobs run at once (default: the cluster's max_running_jobs, 20).", positive_int],
        ["rpc-port", None, ports.NODED,
         "Port of the cluster's ganeti-noded (job file replication, live queries; handed to the job processes).",
         port_number],
        ["heartbeat-port", None, None, "TCP port of node heartbeats (default: $GANETI_HEARTBEAT_PORT or 1817).",
         port_number],
        ["heartbeat-bind", None, None, "Address of the heartbeat listener (default: this node's primary IP)."],
        ["heartbeat-max-connections", None, DEFAULT_MAX_CONNECTIONS, "Open heartbeat connections at most.",
         positive_int],
        ["liveness-timeout", None, None, "Seconds without a byte before a node is unreachable: an override for"
         " tests and benchmarks (default: the cluster's liveness timeout, gnt-cluster modify --liveness-timeout,"
         " followed as it changes).", positive_float],
        ["forkserver-idle", None, forkclient.IDLE, "Seconds without a job before the job fork server is retired"
         " (its memory comes back; the next job starts a new one, about 0.2 s slower); 0: never.",
         daemon.seconds_or_never],
    ]
    optFlags = add_options([
        ["no-forkserver", None, "Start every job process from a fresh interpreter."],
        ["no-watcher", None, "Do not restart instances that stopped by themselves nor archive old jobs."],
    ])

    def opt_listen(self, description: str) -> None:
        """Endpoint string to listen on (repeatable); default: the LUXI sockets."""
        self.setdefault("listen", []).append(description)

    def postOptions(self) -> None:
        check_options(self)
        self["paths"] = paths = Paths.from_option(self["root"])
        if self["heartbeat-port"] is None:
            self["heartbeat-port"] = heartbeat_wire.heartbeat_port()
        if not self["heartbeat-bind"]:
            self["heartbeat-bind"] = node_address(paths)
        if not self.get("listen"):
            self["listen"] = [
                "unix:%s:mode=%o:lockfile=1" % (path.replace(":", r"\:"), self["socket-mode"])
                for path in (paths.luxi_socket, paths.master_socket)
            ]


def makeService(options: Options, reactor: IReactor | None = None) -> IService:
    if reactor is None:
        reactor = installed()  # the one global reactor

        quiet_twisted()  # the real daemon: no "Starting factory" line per connection
    paths: Paths = options["paths"]
    paths.ensure_dirs()
    if options["no-forkserver"]:
        forkseed.discard()  # (ganeti.launcher forks none for this option's usual spellings)
    # fencing: started first, it adopts this node's master epoch before any RPC client or job process exists
    fence = EpochWatch(paths, reactor, "ganeti-luxid", reactor.stop)
    replicator = JobReplicator(paths, reactor, port=options["rpc-port"]) if os.path.exists(paths.server_pem) else None
    # every job file write, LuxiD's and the job processes', goes out to the candidates
    distributor = JobDistributor(replicator.background if replicator is not None else None)
    queue = JobQueueDir(paths, on_write=distributor, on_rename=replicator.renamed if replicator else None,
                        on_drain=replicator.drain_changed if replicator else None)
    try:
        queue.open()
    except QueueLocked as e:
        raise SystemExit("ganeti-luxid: %s" % e) from e
    pid_fd = lock_pid_file(paths, "ganeti-luxid")
    root = MultiService()
    fence.setServiceParent(root)
    service = LuxidService(
        paths,
        reactor,
        queue,
        max_running=options["max-running-jobs"],
        use_forkserver=not options["no-forkserver"],
        forkserver_idle=options["forkserver-idle"],
        distributor=distributor,
        replicator=replicator,
        rpc_port=options["rpc-port"],
    )
    root.addService(PidFileService(pid_fd))
    # start-up voting: jobs, heartbeats and the LUXI sockets only once a majority names this node master
    gate = VotingGate(paths, reactor, "ganeti-luxid", reactor.stop, port=options["rpc-port"],
                      no_voting=bool(options["no-voting"]))
    gate.setServiceParent(root)
    service.setServiceParent(gate)
    gate.addService(FrozenHeapService(reactor))
    # a master that did not run for a while (SIGSTOP, a stuck loop) is confirmed by a majority before it acts
    guard = MasterGuard(paths, reactor, "ganeti-luxid", port=options["rpc-port"])
    guard.setServiceParent(gate)
    service.guard = guard
    guard.on_confirmed.append(service.schedule)
    handler = LuxiHandler(service, paths, LiveData.for_node(reactor, paths, port=options["rpc-port"]))
    factory = LuxiServerFactory(GuardedHandler(handler, guard, errors.JobQueueError))
    if os.path.exists(paths.server_pem) and options["heartbeat-bind"]:
        liveness = LivenessService(paths, reactor, store_for(paths), timeout=options["liveness-timeout"],
                                   port=options["heartbeat-port"])
        liveness.setServiceParent(gate)
        service.liveness = liveness
        heartbeat_listener(liveness, options["heartbeat-bind"], options["heartbeat-port"],
                           max_connections=options["heartbeat-max-connections"], reactor=reactor,
                           luxi=factory).setServiceParent(gate)  # LUXI for the other nodes' clients too
        if replicator is not None:
            liveness.hooks.append(lambda t: replicator.node_up(t.node) if t.state == "up" else None)
        if not options["no-watcher"]:
            service.watcher = Watcher(service, liveness, handler.config, reactor, ask_node=handler.live.instances_now)
            service.watcher.setServiceParent(gate)
        # automatic failover: a master that reaches no majority steps down
        StepDown(paths, reactor, liveness, own_name(paths), service.step_down, reactor.stop).setServiceParent(gate)
    for description in options["listen"]:
        endpoint_listener(description, factory, daemon="ganeti-luxid", reactor=reactor).setServiceParent(gate)
    return root


__all__ = ["Options", "makeService"]
