"""Importing this first stands a module in for pycurl: Ganeti's gnt_cluster
imports its node RPC (pycurl) at import time, which the compat scripts
that drive LUXI or ssconf only never use; any use fails loudly."""

import sys
import types


class _NoCurl:
    def __init__(self, name):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise AssertionError("pycurl.%s used: node RPC is not available here" % self.name)


_pycurl = types.ModuleType("pycurl")
_pycurl.__getattr__ = _NoCurl
sys.modules.setdefault("pycurl", _pycurl)
