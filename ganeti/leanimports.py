"""Keep the system's OpenSSL out of a daemon until it is used.

Twisted's start imports standard modules that only probe for OpenSSL:
C{twisted.internet.defer} imports C{asyncio} (which imports C{ssl} in
case a loop speaks TLS), C{twisted.python.compat} imports
C{http.cookiejar}, hence C{urllib.request} and C{http.client} (both import
C{ssl} for HTTPS), and C{hashlib} loads C{_hashlib}.  C{ssl} and
C{_hashlib} map the system's C{libssl} and C{libcrypto}: 4.7 MiB of RSS in
every daemon, none of which uses them at idle (their TLS is pyOpenSSL's,
cryptography's own OpenSSL).

L{defer_system_openssl} imports those probing modules while C{ssl},
C{_ssl} and C{_hashlib} are blocked, then unblocks them: C{asyncio},
C{http.client} and C{urllib.request} then have no TLS of their own in
this process (no daemon uses them for TLS), C{hashlib} and C{hmac} use
Python's built-in digests (the daemons hash small things: job files,
HMACs, certificates' fingerprints), and a module that needs C{ssl}
(NodeD's disk transfers, a candidate's RAPI reaching the master) imports
it when it runs, as usual.

Some modules Twisted imports at its start are used only by rare paths:
C{pdb} (twistd's C{--debug}), C{http.cookiejar} and C{urllib.request}
(Twisted's cookie agent: C{twisted.web.client}, in the daemons that
are RPC clients, runs them).  L{defer_module} puts them in C{sys.modules}
without running them: their code runs when one of their attributes is
first asked for.  Up to 1.2 MiB of RSS per daemon (confd, MonD).

Standard library only: it runs before Twisted is imported
(L{ganeti.launcher}, L{ganeti.warmstart}, the fork server).  Not for the
command-line tools, which may use HTTPS through C{urllib}.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

#: what loads the system's OpenSSL
OPENSSL = ("ssl", "_ssl", "_hashlib")
#: what only probes for it (imported while it is blocked)
PROBING = ("hashlib", "hmac", "asyncio", "http.client")
#: what runs only when used (L{defer_module})
DEFERRED = ("pdb", "http.cookiejar", "urllib.request")

_lock = threading.RLock()
_running: set[str] = set()


class _Deferred(types.ModuleType):
    """A module imported but not run yet (L{defer_module})."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        name = self.__name__
        with _lock:  # another thread waits until the module has run
            if type(self) is _Deferred:
                if name in _running:  # its own code, while it runs
                    raise AttributeError(attr)
                _running.add(name)
                try:
                    self.__spec__.loader.exec_module(self)  # type: ignore[union-attr]
                except BaseException:
                    sys.modules.pop(name, None)
                    raise
                finally:
                    _running.discard(name)
                    self.__class__ = types.ModuleType  # type: ignore[assignment]
        return getattr(self, attr)


def defer_module(name: str) -> bool:
    """Put module C{name} in C{sys.modules} without running it: it runs when
    an attribute of it is first asked for (C{import name} and C{try: import
    name} do not; C{from name import x} does).

    @return: whether it did (not when it is imported already or not found)
    """
    if name in sys.modules:
        return False
    parent, _, child = name.rpartition(".")
    if parent:
        importlib.import_module(parent)
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _Deferred
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)
    return True


def defer_system_openssl() -> bool:
    """Defer L{DEFERRED}, import L{PROBING} with L{OPENSSL} blocked (see the module docstring).

    @return: whether it did (not when OpenSSL is loaded already: too late
        to save anything)
    """
    if any(name in sys.modules for name in OPENSSL):
        return False
    for name in DEFERRED:
        defer_module(name)
    for name in OPENSSL:
        sys.modules[name] = None  # type: ignore[assignment]  # an ImportError for whoever imports it now
    try:
        for name in PROBING:
            importlib.import_module(name)
    finally:
        for name in OPENSSL:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return True
