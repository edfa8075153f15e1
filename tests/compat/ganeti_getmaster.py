"""Run under Ganeti 3.0.2's own Python package (PYTHONPATH): Ganeti's
C{gnt-cluster getmaster} (its C{ShowClusterMaster}, which reads ssconf)
on one of our node roots; prints what it printed.

usage: ganeti_getmaster.py DATA_DIR
"""

import sys

import no_pycurl  # noqa: E402,F401  (first: a stand-in for pycurl)

from ganeti import pathutils  # noqa: E402
from ganeti.client import gnt_cluster  # noqa: E402


def main():
    pathutils.DATA_DIR = sys.argv[1]  # the node's root instead of /var/lib/ganeti
    return gnt_cluster.ShowClusterMaster(None, [])


if __name__ == "__main__":
    sys.exit(main())
