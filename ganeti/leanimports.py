"""Keep the system's OpenSSL out of a daemon until it is used.

Twisted's start imports standard modules that only probe for OpenSSL:
C{twisted.internet.defer} imports C{asyncio} (which imports C{ssl} in
case a loop speaks TLS), C{twisted.python.compat} imports
C{http.cookiejar}, hence C{urllib.request} and C{http.client} (both import
C{ssl} for HTTPS), and C{hashlib} loads C{_hashlib}.  C{ssl} and
C{_hashlib} map the system's C{libssl} and C{libcrypto}: 4.7 MiB of RSS in
every daemon, none of which uses them at idle (their TLS is pyOpenSSL's,
cryptography's own OpenSSL).

L{defer_system_openssl} imports C{hashlib} and C{hmac} while C{ssl},
C{_ssl} and C{_hashlib} are blocked, then unblocks them: they use
Python's built-in digests (the daemons hash small things: job files,
HMACs, certificates' fingerprints).  C{asyncio}, C{http.client} and
C{urllib.request} are deferred (below) and run, when they do, with the
system's OpenSSL blocked the same way: no TLS of their own in this process
(no daemon uses them for TLS).  A module that needs C{ssl} (NodeD's disk
transfers, a candidate's RAPI reaching the master) imports it when it
runs, as usual.

Some modules Twisted imports at its start are used only by rare paths:
C{pdb} (twistd's C{--debug}), C{http.cookiejar}, C{urllib.request} and
C{http.client} (Twisted's cookie agent: C{twisted.web.client}, which
RAPI's forwarding imports, runs them), C{asyncio} (what
C{twisted.internet.defer} imports from it, L{PARTIAL}, comes from its
submodules: C{iscoroutine}, and two names for annotations).
L{defer_module} puts them in C{sys.modules} without running them: their
code runs when one of their attributes is first asked for.  22-27 modules
and 1.1-1.3 MiB of RSS less per daemon (C{asyncio} alone is 29 modules).

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
PROBING = ("hashlib", "hmac")
#: what runs only when used (L{defer_module}), with the system's OpenSSL blocked while it runs
DEFERRED = ("pdb", "http.client", "http.cookiejar", "urllib.request", "asyncio")
#: attributes of a deferred package taken from its submodules, without running the package: what
#: C{twisted.internet.defer} imports from C{asyncio} (its one use at run time is C{iscoroutine})
PARTIAL = {"asyncio": {"iscoroutine": "asyncio.coroutines", "Future": "asyncio.futures",
                       "AbstractEventLoop": "asyncio.events"}}

_lock = threading.RLock()
_running: set[str] = set()
#: deferred modules that run with L{OPENSSL} blocked
_blocking: set[str] = set()


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
                partial = _partial(self, attr)
                if partial is not None:
                    return partial
                _running.add(name)
                try:
                    _without_openssl(name in _blocking, self.__spec__.loader.exec_module,  # type: ignore[union-attr]
                                     self)
                except BaseException:
                    sys.modules.pop(name, None)
                    raise
                finally:
                    _running.discard(name)
                    self.__class__ = types.ModuleType  # type: ignore[assignment]
        return getattr(self, attr)


def _partial(package: _Deferred, attr: str) -> Any:
    """What C{attr} of a deferred package in L{PARTIAL} is without running the package: a submodule, or an
    attribute L{PARTIAL} takes from one; None when the package must run."""
    name = package.__name__
    if name not in PARTIAL:
        return None
    if attr in PARTIAL[name]:
        return getattr(_without_openssl(name in _blocking, importlib.import_module, PARTIAL[name][attr]), attr)
    submodule = "%s.%s" % (name, attr)
    if importlib.util.find_spec(submodule) is None:
        return None
    return _without_openssl(name in _blocking, importlib.import_module, submodule)


def _without_openssl(blocked: bool, run: Any, *args: Any) -> Any:
    """C{run(*args)}, with L{OPENSSL} not found by this thread's imports while it runs if C{blocked}
    (L{_OpenSSLBlocker}; what is loaded already stays so).  Other threads import as usual meanwhile."""
    if not blocked:
        return run(*args)
    _OpenSSLBlocker.install()
    _here.blocking += 1
    try:
        return run(*args)
    finally:
        _here.blocking -= 1


class _Here(threading.local):
    #: how many deferred modules this thread is running with L{OPENSSL} blocked
    blocking = 0


_here = _Here()


class _OpenSSLBlocker:
    """A finder first on C{sys.meta_path}: L{OPENSSL} is not found in a thread running a deferred module
    (L{_without_openssl}); it finds nothing else, and nothing in other threads."""

    @classmethod
    def install(cls) -> None:
        with _lock:
            if cls not in sys.meta_path:
                sys.meta_path.insert(0, cls)

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name in OPENSSL and _here.blocking:
            raise ModuleNotFoundError("No module named %r (ganeti.leanimports)" % name, name=name)
        return None


def defer_module(name: str, without_openssl: bool = False) -> bool:
    """Put module C{name} in C{sys.modules} without running it: it runs when
    an attribute of it is first asked for (C{import name} and C{try: import
    name} do not; C{from name import x} does).

    @param without_openssl: block L{OPENSSL} while it runs (unless loaded by then)
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
    if without_openssl:
        _blocking.add(name)
    module.__class__ = _Deferred
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)
    return True


def keep_out_pyopenssl() -> None:
    """Keep pyOpenSSL (and the C{cryptography} it loads, with an OpenSSL of its own: 8-13 MiB) out of this
    daemon: Twisted's TCP, endpoints and web client import it when it is installed, for TLS the daemons do
    with the standard library's C{ssl} (L{ganeti.tlsbio}).  Until L{allow_pyopenssl}: only a node's join
    uses it (TLS exporters, which the standard library lacks)."""
    if "OpenSSL" not in sys.modules:
        sys.modules["OpenSSL"] = None  # type: ignore[assignment]  # an ImportError for whoever imports it


def allow_pyopenssl() -> None:
    """Undo L{keep_out_pyopenssl}: pyOpenSSL can be imported again."""
    modules: dict[str, Any] = sys.modules
    if "OpenSSL" in modules and modules["OpenSSL"] is None:
        del modules["OpenSSL"]


def defer_system_openssl() -> bool:
    """Defer L{DEFERRED}, import L{PROBING} with L{OPENSSL} blocked (see the module docstring); keep
    pyOpenSSL out (L{keep_out_pyopenssl}).

    @return: whether it did (not when OpenSSL is loaded already: too late
        to save anything)
    """
    keep_out_pyopenssl()
    if any(name in sys.modules for name in OPENSSL):
        return False
    for name in DEFERRED:
        defer_module(name, without_openssl=True)
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
