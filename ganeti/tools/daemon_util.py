"""C{ganeti-daemon-util}: the part of Ganeti's C{daemon-util} its own Python tools call.

Ganeti 3.0's scripts run C{/usr/lib/ganeti/daemon-util} (a fixed path, also
in virtual clusters): C{gnt-cluster master-failover} runs
C{daemon-util start ganeti-wconfd --force-node --no-voting --yes-do-it} on
the new master and C{daemon-util stop ganeti-wconfd} afterwards.  A package
installs this command there; it drives L{ganeti.daemons} on the node's root
(C{$GANETI_ROOTDIR} as Ganeti's virtual clusters set it, else
C{$GANETI_ROOT}, else C{/})::

    ganeti-daemon-util start DAEMON [--force-node] [--no-voting] [--yes-do-it]
    ganeti-daemon-util stop|check DAEMON
    ganeti-daemon-util start-master|stop-master|start-all|stop-all

C{--force-node} is accepted and needs nothing here: a daemon named is
started whatever this node's role.  WConfD and LuxiD get the cluster's node
RPC port and the voting flags.  Ganeti's tools run this command with their
environment and no daemon options, so the port comes from
C{$GANETI_RPC_PORT} (else 1811): the one place that reads it, our own
daemons and tools take C{--rpc-port}.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from ganeti import daemons, ports
from ganeti.paths import Paths

#: Ganeti's exit status of "check" for a daemon that does not run
EXIT_NOT_RUNNING = 1
USAGE = ("usage: ganeti-daemon-util start DAEMON [--force-node] [--no-voting] [--yes-do-it]\n"
         "       ganeti-daemon-util stop|check DAEMON\n"
         "       ganeti-daemon-util start-master|stop-master|start-all|stop-all")
MASTER = ["ganeti-wconfd", "ganeti-rapi", "ganeti-luxid"]
#: the flags "start" accepts
FLAGS = ("--force-node", "--no-voting", "--yes-do-it")


def root_paths(environ: dict[str, str] | None = None) -> Paths:
    """The node's root: C{$GANETI_ROOTDIR}, else C{$GANETI_ROOT}, else C{/}."""
    environ = dict(os.environ) if environ is None else environ
    return Paths(environ.get("GANETI_ROOTDIR") or environ.get("GANETI_ROOT") or "/")


#: how Ganeti's tools, which cannot pass options, name the node daemons' port
RPC_PORT_ENV = "GANETI_RPC_PORT"


def rpc_port(environ: dict[str, str] | None = None) -> int:
    """The node daemons' port from C{environ} (default: this process's), else Ganeti's default.

    A value that is not a port is ignored (the default is used).
    """
    environ = dict(os.environ) if environ is None else environ
    try:
        return ports.port_number(environ.get(RPC_PORT_ENV, "") or str(ports.NODED))
    except ValueError:
        return ports.NODED


def master_options(flags: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """The options of WConfD and LuxiD for C{flags}."""
    return ["--rpc-port", str(rpc_port(environ))] + [f for f in flags if f in ("--no-voting", "--yes-do-it")]


def run(argv: list[str], paths: Paths, out: Callable[[str], object] = print) -> int:
    """Do what C{argv} asks on C{paths}; the exit status."""
    if not argv:
        out(USAGE)
        return daemons.EXIT_USAGE
    action, rest = argv[0], argv[1:]
    if action in ("start-master", "stop-master", "start-all", "stop-all") and not rest:
        names = MASTER if action.endswith("master") else []
        if action.startswith("stop"):
            return daemons.stop(paths, names or [], out=out)
        options = {name: master_options([]) for name in ("ganeti-wconfd", "ganeti-luxid")}
        return daemons.start(paths, names, out=out, options=options)
    if action not in ("start", "stop", "check") or not rest:
        out(USAGE)
        return daemons.EXIT_USAGE
    try:
        spec = daemons.spec_by_name(rest[0])
    except SystemExit as e:
        out(str(e))
        return daemons.EXIT_USAGE
    flags = rest[1:]
    unknown = [f for f in flags if f not in FLAGS] if action == "start" else flags
    if unknown:
        out("%s %s: unknown option(s) %s\n%s" % (action, spec.name, " ".join(unknown), USAGE))
        return daemons.EXIT_USAGE
    if "--no-voting" in flags and "--yes-do-it" not in flags:
        out("--no-voting is dangerous (two masters); confirm it with --yes-do-it")
        return daemons.EXIT_USAGE
    if action == "check":
        return daemons.EXIT_OK if daemons.running_pid(paths, spec) is not None else EXIT_NOT_RUNNING
    if action == "stop":
        return daemons.stop(paths, [spec.name], out=out)
    options = {spec.name: master_options(flags)} if spec.name in ("ganeti-wconfd", "ganeti-luxid") else {}
    return daemons.start(paths, [spec.name], out=out, options=options)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return daemons.EXIT_OK
    return run(args, root_paths())


if __name__ == "__main__":
    sys.exit(main())
