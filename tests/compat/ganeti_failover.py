"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH) with
GANETI_ROOTDIR/GANETI_HOSTNAME set: Ganeti's C{gnt-cluster ARGS...}, its
node RPC sent to the port in C{$GANETI_RPC_PORT} (Ganeti takes it from
/etc/services, else 1811; the test's nodes listen on a free port) and, as
its daemon-util, C{$GANETI_DAEMON_UTIL} when set, else
C{$GANETI_ROOTDIR/usr/lib/ganeti/daemon-util}: Ganeti runs
C{/usr/lib/ganeti/daemon-util}, which GANETI_ROOTDIR does not move, and on a
host with Ganeti installed that would be the host's own (stopping the host's
daemons); under the virtual root it is absent unless a test puts it there.

usage: ganeti_failover.py ARGS...    (e.g. master-failover --no-voting --yes-do-it)
"""

import os
import sys

from ganeti import netutils, pathutils  # noqa: E402
from ganeti.client import gnt_cluster  # noqa: E402

_PORT = int(os.environ["GANETI_RPC_PORT"])
_get_daemon_port = netutils.GetDaemonPort


def _daemon_port(name):
    return _PORT if name == "ganeti-noded" else _get_daemon_port(name)


def daemon_util_path(vroot):
    """Where Ganeti's daemon-util is looked for under the virtual root C{vroot}."""
    return os.path.join(vroot, "usr", "lib", "ganeti", "daemon-util")


def main():
    netutils.GetDaemonPort = _daemon_port
    pathutils.DAEMON_UTIL = os.environ.get("GANETI_DAEMON_UTIL") or daemon_util_path(os.environ["GANETI_ROOTDIR"])
    sys.argv = ["gnt-cluster"] + sys.argv[1:]
    return gnt_cluster.Main()


if __name__ == "__main__":
    sys.exit(main())
