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
it when it runs, as usual.  Standard library only: it runs before
Twisted is imported (L{ganeti.launcher}, L{ganeti.warmstart}).  Not for
job processes or the command-line tools, which may use HTTPS through
C{urllib}.
"""

from __future__ import annotations

import importlib
import sys

#: what loads the system's OpenSSL
OPENSSL = ("ssl", "_ssl", "_hashlib")
#: what only probes for it (imported while it is blocked)
PROBING = ("hashlib", "hmac", "asyncio", "http.client", "urllib.request", "http.cookiejar")


def defer_system_openssl() -> bool:
    """Import L{PROBING} with L{OPENSSL} blocked (see the module docstring).

    @return: whether it did (not when OpenSSL is loaded already: too late
        to save anything)
    """
    if any(name in sys.modules for name in OPENSSL):
        return False
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
