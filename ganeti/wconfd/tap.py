"""C{twistd ganeti-wconfd}: options and the composition root.

Run in the foreground with C{twistd -n ganeti-wconfd --root DIR} (or
C{twist ganeti-wconfd --root DIR}).  The socket defaults to
C{ROOT/var/run/ganeti/socket/ganeti-wconfd}, mode 0600.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

from twisted.application.service import IService, MultiService
from twisted.python import usage

from ganeti import ports
from ganeti.daemon import PidFileService, lock_pid_file, positive_float
from ganeti.ha.epochwatch import ConfigEpochMark, EpochWatch
from ganeti.ha.guard import MasterGuard
from ganeti.ha.keeper import HaKeeper, HaStage
from ganeti.ha.voting import VotingGate, add_options, check_options
from ganeti.listening import endpoint_listener
from ganeti.lockfile import holds_lock
from ganeti.logfile import quiet_twisted
from ganeti.paths import Paths
from ganeti.reactors import IReactor, installed
from ganeti.wconfd.protocol import wconfd_factory
from ganeti.wconfd.replication import MAJORITY_TIMEOUT, ConfigPusher
from ganeti.wconfd.service import WConfdService
from ganeti.wconfd.ssconf_writer import LocalSsconf, SsconfValues
from ganeti.wconfd.storage import FileStorage


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = (
        "WConfD owns the cluster configuration (config.data) and the lock "
        "manager of the master node.  Job processes and LuxiD talk to it over "
        "AMP on a Unix socket."
    )
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["socket-mode", None, 0o600, "Permissions of the Unix socket, octal (default 600).", lambda v: int(v, 8)],
        ["death-interval", None, 0.25, "Seconds between checks for dead lock owners.", positive_float],
        ["checkpoint-delay", None, 0.2, "Seconds to coalesce changes before rewriting config.data.", positive_float],
        ["rpc-port", None, ports.NODED, "Port of the other nodes' ganeti-noded (config and ssconf pushes).", int],
        ["majority-timeout", None, MAJORITY_TIMEOUT,
         "Seconds a config change waits for a majority of the master candidates to hold it before it is "
         "refused with an error (default %g)." % MAJORITY_TIMEOUT, positive_float],
    ]
    optFlags = add_options([])

    def opt_listen(self, description: str) -> None:
        """Endpoint string to listen on (repeatable); default: the WConfD socket."""
        self.setdefault("listen", []).append(description)

    def postOptions(self) -> None:
        check_options(self)
        self["paths"] = Paths.from_option(self["root"])
        if not self.get("listen"):
            path = self["paths"].wconfd_socket
            self["listen"] = ["unix:%s:mode=%o:lockfile=1" % (path.replace(":", r"\:"), self["socket-mode"])]


def makeService(options: Options, reactor: IReactor | None = None) -> IService:
    if reactor is None:
        reactor = installed()  # the one global reactor

        quiet_twisted()  # the real daemon: no "Starting factory" line per connection
    paths: Paths = options["paths"]
    paths.ensure_dirs()
    if not os.path.exists(paths.config_data):
        raise SystemExit(
            "ganeti-wconfd: no configuration at %s; initialise the cluster first "
            "(for a test root: ganeti-wconfd-client --root %s init-config ...)" % (paths.config_data, paths.root)
        )
    pid_fd = lock_pid_file(paths, "ganeti-wconfd")
    root = MultiService()
    # fencing: started first, it adopts this node's master epoch before any RPC client exists
    EpochWatch(paths, reactor, "ganeti-wconfd", reactor.stop).setServiceParent(root)
    service = WConfdService(
        FileStorage(paths, reactor),
        reactor,
        owner_dirs=paths.owner_dirs(),
        death_interval=options["death-interval"],
        checkpoint_delay=options["checkpoint-delay"],
        holder=holds_lock,
    )
    next_stage = service.distributor
    values = SsconfValues()  # one ssconf computation per config serial for both stages
    if os.path.exists(paths.server_pem):  # a cluster with certificates: push to the other nodes
        next_stage = ConfigPusher(
            paths,
            reactor,
            lambda: service.config_store.config(),
            service.read_config,
            port=options["rpc-port"],
            values=values,
            majority_timeout=options["majority-timeout"],
        )
        service.quorum = next_stage.majority  # a change is acknowledged once a majority of candidates hold it
        service.durable = next_stage.note  # its journal records go to the candidates as deltas
    rpc_factory: Callable[[], Any] | None = None
    if os.path.exists(paths.server_pem):
        from ganeti.rpc import RpcClient

        rpc_factory = functools.partial(RpcClient.from_paths, reactor, paths, port=options["rpc-port"])
    service.ha = HaKeeper(paths, reactor, lambda: service.config_store.config(), rpc=rpc_factory)
    next_stage = HaStage(next_stage, service.ha)  # the HA parameters to nodes that lack them, after each push
    service.distributor = LocalSsconf(paths, reactor, lambda: service.config_store.config(), next_stage, values)
    root.addService(PidFileService(pid_fd))
    # start-up voting: the config and its socket only once a majority names this node master
    gate = VotingGate(paths, reactor, "ganeti-wconfd", reactor.stop, port=options["rpc-port"],
                      no_voting=bool(options["no-voting"]))
    gate.setServiceParent(root)
    ConfigEpochMark(paths).setServiceParent(gate)  # before the first write: see there
    service.setServiceParent(gate)
    if os.path.exists(paths.server_pem):  # a master that did not run for a while is confirmed before it writes
        service.guard = MasterGuard(paths, reactor, "ganeti-wconfd", port=options["rpc-port"])
        service.guard.setServiceParent(gate)
    factory = wconfd_factory(service)
    for description in options["listen"]:
        endpoint_listener(description, factory, daemon="ganeti-wconfd", reactor=reactor).setServiceParent(gate)
    return root
