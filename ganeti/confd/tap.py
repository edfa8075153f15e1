"""C{twistd ganeti-confd}: options and the composition root.

Run in the foreground with
C{twistd -n ganeti-confd --root DIR --bind ADDRESS [--port 1814]}.
It answers from C{ROOT/var/lib/ganeti/config.data}, signed with
C{ROOT/var/lib/ganeti/hmac.key}.
"""

from __future__ import annotations

import os

from twisted.application.service import IService, MultiService
from twisted.python import usage

from ganeti import daemons
from ganeti.confd.protocol import ConfdServerProtocol
from ganeti.confd.service import CHECK_INTERVAL, ConfdService, inotify_watch
from ganeti.daemon import PidFileService, lock_pid_file, port_number, positive_float, without_tls
from ganeti.listening import datagram_listener
from ganeti.logfile import quiet_twisted
from ganeti.paths import Paths
from ganeti.reactors import IReactor, installed


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = (
        "RConfD answers HMAC-signed configuration queries over UDP from the "
        "local replica of config.data (Ganeti's confd protocol)."
    )
    optParameters = [
        ["root", "r", None, "Root of this node's files (default: $GANETI_ROOT or /)."],
        ["bind", "b", "0.0.0.0", "Address to listen on."],
        ["port", "p", None, "UDP port (default: $GANETI_CONFD_PORT or 1814).", port_number],
        ["check-interval", None, CHECK_INTERVAL, "Seconds between fallback checks of config.data.", positive_float],
    ]
    optFlags = [["no-inotify", None, "Do not watch config.data with inotify (timer only)."]]

    def postOptions(self) -> None:
        self["paths"] = Paths.from_option(self["root"])
        if self["port"] is None:
            self["port"] = daemons.port_of(daemons.BY_NAME["ganeti-confd"])


def makeService(options: Options, reactor: IReactor | None = None) -> IService:
    if reactor is None:
        without_tls()  # confd signs with hmac, never TLS
        reactor = installed()  # the one global reactor

        quiet_twisted()  # the real daemon: no "Starting factory" line per connection
    paths: Paths = options["paths"]
    if not os.path.exists(paths.hmac_key):
        raise SystemExit("ganeti-confd: no HMAC key at %s" % paths.hmac_key)
    pid_fd = lock_pid_file(paths, "ganeti-confd")
    root = MultiService()
    watch = None if options["no-inotify"] else inotify_watch(reactor)
    service = ConfdService(paths, reactor, check_interval=options["check-interval"], watch=watch, freeze_gc=True)
    service.load_key()  # fail now, not after the fork, on an unreadable key
    service.setServiceParent(root)
    root.addService(PidFileService(pid_fd))
    protocol = ConfdServerProtocol(service, reactor)
    datagram_listener(options["port"], protocol, interface=options["bind"], max_packet=8192, daemon="ganeti-confd",
                      reactor=reactor).setServiceParent(root)
    return root
