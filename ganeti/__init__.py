"""Ganeti's refactored daemon architecture, rebuilt on Twisted.

Wire formats (LUXI, confd, RAPI, node RPC, job files, config.data) follow
Ganeti 3.0 so that its tools work against these daemons.
"""

__version__ = "0.1.0"

#: The Ganeti release whose formats we speak (ssconf_release_version, RAPI /version).
GANETI_RELEASE = "3.0.2"
#: config.data "version": 1000000*major + 10000*minor + revision (Ganeti 3.0).
CONFIG_VERSION = 3000000
