"""Node RPC to this node's own NodeD over a Unix socket, without TLS.

A process that calls the NodeD of the node it runs on (a job on the
master calling the master node, as every job of a one-node cluster does)
need not go through TCP and mutual TLS: NodeD serves the same procedures as
plain HTTP on C{var/run/ganeti/socket/ganeti-noded} (L{Paths.noded_socket}),
a socket only its owner may open (mode 0600, in a directory of mode 0750),
as LuxiD's and WConfD's sockets are.  A job process is a new process, so
over TLS its first call to a node paid a whole handshake, in which both ends
sign with the cluster's RSA key: 4.5 ms on an idle machine, 10-16 ms while
other jobs ran (C{scripts/bench jobs}, node lock + RPC).

L{LocalNoded} picks the way per connection: a URL whose address is this
node's primary address (C{node.json}) and whose port is the client's NodeD
port goes to the socket when it exists; any other node, or a NodeD without
the socket, is reached over TCP and TLS.  What NodeD checks in a request
(the master epoch, the procedure's arguments) it checks on both ways.
"""

from __future__ import annotations

import os
from typing import Any

from ganeti.dirwatch import file_stamp
from ganeti.paths import Paths

#: permissions of NodeD's socket: its owner only (the daemons run as root)
SOCKET_MODE = 0o600


class LocalNoded:
    """Where this node's NodeD listens for its own node's processes.

    @param paths: this node's paths (C{node.json}, the socket)
    @param port: the NodeD port of the client's URLs (the socket serves that NodeD)
    """

    def __init__(self, paths: Paths, port: int) -> None:
        self._paths = paths
        self._port = port
        self._stamp: Any = object()
        self._address = ""

    def socket_for(self, host: str, port: int) -> str | None:
        """The socket to reach C{host}:C{port} by, or C{None} (TCP and TLS).

        Asked for every request (the HTTP client picks the way before it
        looks for an open connection): C{node.json} is read again whenever
        it changed (one C{stat}), so a node whose address changed is never
        taken for this one."""
        if port != self._port or host != self._own_address():
            return None
        path = self._paths.noded_socket
        return path if os.path.exists(path) else None

    def _own_address(self) -> str:
        from ganeti.daemons import node_address, node_file

        stamp = file_stamp(node_file(self._paths))
        if stamp != self._stamp:
            self._stamp = stamp
            self._address = node_address(self._paths) if stamp is not None else ""
        return self._address


def unix_endpoint(reactor: Any, path: str, timeout: float) -> Any:
    """A client endpoint to the Unix socket C{path}."""
    from twisted.internet.endpoints import UNIXClientEndpoint

    return UNIXClientEndpoint(reactor, path, timeout=timeout)


__all__ = ["SOCKET_MODE", "LocalNoded", "unix_endpoint"]
