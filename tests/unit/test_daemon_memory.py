"""Freed memory goes back to the system (issue 13, item 8: the allocator side)."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: in a fresh interpreter: 40 MiB freed below a live block (so not at the
#: heap's top, where malloc would give it back by itself), then released
_SCRIPT = """
from ganeti.daemon import release_freed_memory
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) // 1024
chunks = [bytes(2000) + b"%d" % i for i in range(20000)]
keep = [bytes(2000) + b"k"]
del chunks
before = anon()
released = release_freed_memory()
print(released, before, anon())
"""


def test_memory_freed_below_live_data_goes_back_to_the_system() -> None:
    output = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True).stdout
    released, before, after = output.split()
    if released != "True":
        pytest.skip("this C library has no malloc_trim")
    assert int(before) - int(after) >= 20


#: in a fresh interpreter, as ganeti-twistd starts a daemon: what a daemon without TLS loads (confd, MonD), what
#: a TLS daemon loads, then what a digest gets
_LEAN_SCRIPT = """
import sys
import ganeti.launcher
import twisted.internet.epollreactor, twisted.web.server, twisted.web.client
plain = sorted(name for name in ("ssl", "_ssl", "_hashlib") if name in sys.modules)
import ganeti.rpc.client, ganeti.noded.bulk, ganeti.tlsbio, ganeti.http_limits, ganeti.heartbeat.server
tls = sorted(name for name in ("ssl", "_hashlib", "OpenSSL", "cryptography") if sys.modules.get(name) is not None)
import hashlib, hmac
digest = hmac.new(b"key", b"msg", hashlib.sha256).hexdigest()[:8] + hashlib.md5(b"").hexdigest()[:8]
print(",".join(plain) or "-", ",".join(tls) or "-", digest, "_hashlib" in sys.modules)
"""


def test_a_daemon_loads_no_pyopenssl_and_the_system_openssl_only_for_tls() -> None:
    output = subprocess.run([sys.executable, "-c", _LEAN_SCRIPT], capture_output=True, text=True, check=True).stdout
    plain, tls, digest, hashlib_loaded = output.split()
    assert plain == "-"  # neither ssl nor _hashlib without TLS (ganeti.leanimports)
    assert tls == "ssl"  # TLS through the standard library's ssl: neither pyOpenSSL nor cryptography (ganeti.tlsbio)
    assert digest == "2d93cbc1d41d8cd9"  # Python's own digests give the same answers
    assert hashlib_loaded == "False"


#: in a fresh interpreter, as ganeti-twistd starts a daemon: Twisted's start leaves asyncio and http.client
#: unrun (twisted.internet.defer's names come from asyncio's submodules), and both work once used
_DEFERRED_SCRIPT = """
import sys
import ganeti.launcher
import twisted.internet.defer, twisted.internet.epollreactor
import asyncio, http.client
from twisted.internet import defer
idle = [name for name in ("asyncio", "http.client") if name in sys.modules and type(sys.modules[name]).__name__
        == "_Deferred"]
same = defer.Future is asyncio.futures.Future and defer.iscoroutine is asyncio.coroutines.iscoroutine
async def answer():
    await asyncio.sleep(0)
    return 42
got = asyncio.run(answer())
print(",".join(idle), same, got, asyncio.Future is defer.Future, http.client.HTTP_PORT, "ssl" in sys.modules)
"""


def test_twisted_start_leaves_asyncio_and_http_client_unrun_until_used() -> None:
    output = subprocess.run([sys.executable, "-c", _DEFERRED_SCRIPT], capture_output=True, text=True,
                            check=True).stdout
    idle, same, got, future, port, ssl_loaded = output.split()
    assert idle == "asyncio,http.client"  # imported, not run: about 1.2 MiB less per daemon
    assert (same, got, future, port) == ("True", "42", "True", "80")  # the same objects, and they work
    assert ssl_loaded == "False"  # they ran with the system's OpenSSL blocked, as when probed at the start


#: in a fresh interpreter: while a deferred module runs, its thread does not find the system's OpenSSL; another
#: thread imports it meanwhile as usual (no global block another thread could trip over)
_THREAD_SCRIPT = """
import importlib, threading
from ganeti import leanimports
others = []
def run():
    try:
        import ssl
        here = "loaded"
    except ImportError:
        here = "blocked"
    thread = threading.Thread(target=lambda: others.append(importlib.import_module("ssl").__name__))
    thread.start()
    thread.join()
    return here
print(leanimports._without_openssl(True, run), ",".join(others))
"""


def test_a_deferred_module_runs_without_openssl_in_its_own_thread_only() -> None:
    output = subprocess.run([sys.executable, "-c", _THREAD_SCRIPT], capture_output=True, text=True, check=True).stdout
    assert output.split() == ["blocked", "ssl"]
