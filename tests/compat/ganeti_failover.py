"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH) with
GANETI_ROOTDIR/GANETI_HOSTNAME set: Ganeti's C{gnt-cluster ARGS...}, its
node RPC sent to the port in C{$GANETI_RPC_PORT} (Ganeti takes it from
/etc/services, else 1811; the test's nodes listen on a free port) and, as
its daemon-util, C{$GANETI_DAEMON_UTIL} when set, else
C{$GANETI_ROOTDIR/usr/lib/ganeti/daemon-util}: Ganeti runs
C{/usr/lib/ganeti/daemon-util}, which GANETI_ROOTDIR does not move, and on a
host with Ganeti installed that would be the host's own (stopping the host's
daemons); under the virtual root it is absent unless a test puts it there.

Ganeti's master-failover then waits for the master IP to go down
(C{TcpPing} to it, every 1 to 5 s, for 30 s); on loopback every address
answers, so that wait always runs to its end and Ganeti warns.  Here its
pings are still made, but the waits between them pass on a virtual clock:
the outcome and the warning are Ganeti's, without 30 s of sleep.

usage: ganeti_failover.py ARGS...    (e.g. master-failover --no-voting --yes-do-it)
"""

import os
import sys

from ganeti import netutils, pathutils, utils  # noqa: E402
from ganeti.client import gnt_cluster  # noqa: E402

_PORT = int(os.environ["GANETI_RPC_PORT"])
_get_daemon_port = netutils.GetDaemonPort
_retry = utils.Retry


def _daemon_port(name):
    return _PORT if name == "ganeti-noded" else _get_daemon_port(name)


def _retry_master_ip_check(fn, delay, timeout, args=None, **kwargs):
    """Ganeti's C{utils.Retry}; for its master IP check (C{_check_ip}), on a virtual clock."""
    if getattr(fn, "__name__", "") != "_check_ip":
        return _retry(fn, delay, timeout, args=args, **kwargs)
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    return _retry(fn, delay, timeout, args=args, wait_fn=sleep, _time_fn=lambda: now[0])


def daemon_util_path(vroot):
    """Where Ganeti's daemon-util is looked for under the virtual root C{vroot}."""
    return os.path.join(vroot, "usr", "lib", "ganeti", "daemon-util")


def main():
    netutils.GetDaemonPort = _daemon_port
    utils.Retry = _retry_master_ip_check
    pathutils.DAEMON_UTIL = os.environ.get("GANETI_DAEMON_UTIL") or daemon_util_path(os.environ["GANETI_ROOTDIR"])
    sys.argv = ["gnt-cluster"] + sys.argv[1:]
    return gnt_cluster.Main()


if __name__ == "__main__":
    sys.exit(main())
