"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): Ganeti's
C{gnt-cluster getmaster} (its C{ShowClusterMaster}, which reads ssconf)
on one of our node roots; prints what it printed.

usage: ganeti_getmaster.py DATA_DIR
"""

import sys
import types


class _NoCurl:
    """Stands for every name of pycurl: Ganeti's gnt_cluster imports its
    node RPC (pycurl) at import time, which getmaster never uses."""

    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise AssertionError("pycurl.%s used: node RPC is not available here" % self.name)


_pycurl = types.ModuleType("pycurl")
_pycurl.__getattr__ = _NoCurl
sys.modules.setdefault("pycurl", _pycurl)

from ganeti import pathutils  # noqa: E402
from ganeti.client import gnt_cluster  # noqa: E402


def main():
    pathutils.DATA_DIR = sys.argv[1]  # the node's root instead of /var/lib/ganeti
    return gnt_cluster.ShowClusterMaster(None, [])


if __name__ == "__main__":
    sys.exit(main())
