"""Run Ganeti 3.0.2's own C{gnt-cluster watcher ARGS} against a LUXI socket.

    python ganeti_watcher.py SOCKET pause 30m | continue | info

Ganeti's C{WatcherOps} is called as C{gnt-cluster} would call it, with its
LUXI client pointed at SOCKET (Ganeti's path is fixed at build time).
Node RPC is never used here, so a missing C{pycurl} is stubbed.
"""

import sys
import types


def main():
    sock, args = sys.argv[1], sys.argv[2:]
    try:
        import pycurl  # noqa: F401
    except ImportError:
        stub = sys.modules["pycurl"] = types.ModuleType("pycurl")
        stub.Curl = stub.CurlMulti = object
    from ganeti import luxi
    from ganeti.client import gnt_cluster

    gnt_cluster.GetClient = lambda: luxi.Client(address=sock)
    return gnt_cluster.WatcherOps(None, args)


if __name__ == "__main__":
    sys.exit(main() or 0)
