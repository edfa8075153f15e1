"""C{twistd ganeti-mond}: options and the composition root.

Run in the foreground with
C{twistd -n --pidfile= ganeti-mond --root DIR --bind ADDRESS [--port 1815]}.
It serves Ganeti's monitoring API and C{/metrics} over plain HTTP; which
collectors run comes from the cluster through confd.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.service import IService, MultiService
from twisted.python import usage

from ganeti import ports
from ganeti.daemon import FrozenHeapService, PidFileService, lock_pid_file, port_number, positive_float, without_tls
from ganeti.listening import Listener
from ganeti.mond import settings
from ganeti.mond.collectors.plugins import DEFAULT_TIMEOUT
from ganeti.paths import Paths
from ganeti.reactors import IReactor, installed

DEFAULT_PORT = ports.MOND
#: where plugin collectors live, under the node's root
PLUGIN_DIR = "etc/ganeti/mond/plugins"


class Options(usage.Options):
    synopsis = "[--bind ADDRESS] [--port 1815] [options]"
    longdesc = (
        "ganeti-mond, the monitoring daemon: Ganeti's monitoring HTTP API (/1/report/...) and "
        "Prometheus metrics (/metrics) of this node."
    )
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["bind", "b", None, "Address to listen on (default: the node's primary IP from var/lib/ganeti/node.json)."],
        ["port", "p", DEFAULT_PORT, "TCP port (default 1815).", port_number],
        ["node-name", None, None, "This node's name (default: from ROOT/var/lib/ganeti/node.json)."],
        ["confd-port", None, 1814, "UDP port of the candidates' confd (default 1814).", port_number],
        ["config-interval", None, settings.CONFIG_INTERVAL,
         "Seconds between refreshes of the collector settings and instances from confd (default 15).",
         positive_float],
        ["plugin-dir", None, None, "Directory of plugin collectors (default ROOT/%s)." % PLUGIN_DIR],
        ["plugin-timeout", None, DEFAULT_TIMEOUT, "Seconds a plugin may run before it is killed (default 10).",
         positive_float],
        ["proc", None, "/proc", "The kernel's process file system (for tests)."],
    ]

    def postOptions(self) -> None:
        from ganeti.daemons import node_address

        if not self["bind"]:  # the node's primary IP, as gnt-cluster init or a join recorded it
            self["bind"] = node_address(Paths.from_option(self["root"]))
        if not self["bind"]:
            raise usage.UsageError("--bind ADDRESS is required (this root has no node identity to take it from)")
        self["paths"] = Paths.from_option(self["root"])
        if self["plugin-dir"] is None:
            self["plugin-dir"] = os.path.join(self["paths"].root, PLUGIN_DIR)


def build_collectors(paths: Paths, reactor: IReactor, proc_dir: str = "/proc") -> list[Any]:
    """The built-in collectors of a node, in report order."""
    from ganeti import daemons
    from ganeti.mond.collectors.daemons import DaemonStatus
    from ganeti.mond.collectors.host import CpuAvgLoad, DiskStats, Host, NodeResources
    from ganeti.mond.collectors.instances import InstanceStatus, KvmAccel, fake_running
    from ganeti.mond.collectors.storage import FileStorage

    host = Host(proc_dir, clock=reactor.seconds)

    def kvm_running() -> Any:
        from ganeti.backend.hypervisor import get_hypervisor  # only once kvm is enabled: it is not small

        return get_hypervisor("kvm", paths, reactor).get_all_instances_info()

    collectors: list[Any] = [CpuAvgLoad(host), DiskStats(host), NodeResources(host)]
    collectors += [InstanceStatus("fake", lambda: fake_running(paths, reactor.seconds()), reactor.seconds),
                   InstanceStatus("kvm", kvm_running, reactor.seconds), KvmAccel(paths, _boot_id)]
    from twisted.internet.threads import deferToThreadPool

    def in_thread(function: Any, *args: Any) -> Any:
        return deferToThreadPool(reactor, reactor.getThreadPool(), function, *args)

    collectors += [FileStorage(kind, paths.root, run=in_thread) for kind in ("file", "sharedfile")]
    specs = list(daemons.DAEMONS)
    collectors += [DaemonStatus(spec.name, spec.master_only, _pid_of(paths, spec), host,
                                on_candidates=spec.name in daemons.ON_CANDIDATES) for spec in specs]
    return collectors


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _pid_of(paths: Paths, spec: Any) -> Any:
    from ganeti import daemons

    def pid() -> int | None:
        value = daemons.running_pid(paths, spec)
        return value if value is None or value > 0 else None
    return pid


def makeService(options: Options, reactor: IReactor | None = None) -> IService:
    if reactor is None:
        without_tls()
        reactor = installed()  # the one global reactor

        from ganeti.logfile import quiet_twisted

        quiet_twisted()  # the real daemon: no "Starting protocol" line per confd query
    from ganeti import daemons
    from ganeti.mond.collectors.plugins import Plugin, scan
    from ganeti.mond.resource import Api, MondFactory
    from ganeti.mond.service import MondService

    paths: Paths = options["paths"]
    node = options["node-name"] or daemons.read_node_identity(paths)["name"]
    paths.ensure_dirs()
    pid_fd = lock_pid_file(paths, daemons.MOND.name)
    plugin_dir, timeout = options["plugin-dir"], options["plugin-timeout"]
    known: dict[str, Any] = {}

    def plugins() -> dict[str, Any]:
        found = scan(plugin_dir)
        for name in list(known):
            if name not in found:
                del known[name]
        for name in found:
            known.setdefault(name, Plugin(name, plugin_dir, reactor, timeout))
        return dict(known)

    service = MondService(paths, reactor, node, build_collectors(paths, reactor, options["proc"]),
                          plugins=plugins, confd_port=options["confd-port"],
                          config_interval=options["config-interval"])
    root = MultiService()
    root.addService(PidFileService(pid_fd))
    service.setServiceParent(root)
    site = MondFactory(Api(service), paths.log_file("monitoring-daemon-access"), reactor)
    bind, port = options["bind"], options["port"]
    where = "%s port %d (TCP)" % (bind, port)
    # (Twisted types listenTCP's factory as a ServerFactory of its protocol type, invariantly: an HTTPFactory is not one)
    Listener(lambda: reactor.listenTCP(port, site, interface=bind),  # type: ignore[arg-type]
             where, daemon=daemons.MOND.name,
             reactor=reactor).setServiceParent(root)
    FrozenHeapService(reactor).setServiceParent(root)
    return root
