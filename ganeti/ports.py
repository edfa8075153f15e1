"""The daemons' default ports (Ganeti's C{DEFAULT_*_PORT}), defined once.

A cluster may run its node daemons on another port: the master daemons
get it as C{--rpc-port} and hand it on (LuxiD to its job processes), and
the commands that talk to node daemons take C{--rpc-port} too; these are
only the defaults.  Standard library only.
"""

from __future__ import annotations

#: ganeti-noded (node RPC, TCP); also the port the instance IP check probes
NODED = 1811
#: ganeti-confd (UDP)
CONFD = 1814
#: ganeti-mond (HTTP)
MOND = 1815
#: ganeti-rapi (HTTPS)
RAPI = 5080


def port_number(value: str) -> int:
    """A TCP/UDP port given on a command line (0 lets the kernel choose).

    @raise ValueError: not a number from 0 to 65535.
    """
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError("not a port number (0-65535)")
    return number
