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


#: in a fresh interpreter, as ganeti-twistd starts a TLS daemon: what is loaded at idle, then what a
#: transfer or a digest still gets
_LEAN_SCRIPT = """
import sys
import ganeti.launcher
import twisted.internet.epollreactor, twisted.internet.ssl, twisted.web.server, twisted.web.client
import ganeti.rpc.client, ganeti.noded.bulk
idle = sorted(name for name in ("ssl", "_ssl", "_hashlib") if name in sys.modules)
import hashlib, hmac
digest = hmac.new(b"key", b"msg", hashlib.sha256).hexdigest()[:8] + hashlib.md5(b"").hexdigest()[:8]
import ssl
print(",".join(idle) or "-", digest, ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).verify_mode == ssl.CERT_REQUIRED)
"""


def test_a_daemon_loads_the_system_openssl_only_when_it_uses_it() -> None:
    output = subprocess.run([sys.executable, "-c", _LEAN_SCRIPT], capture_output=True, text=True, check=True).stdout
    idle, digest, tls = output.split()
    assert idle == "-"  # neither ssl nor _hashlib at idle (ganeti.leanimports)
    assert digest == "2d93cbc1d41d8cd9"  # Python's own digests give the same answers
    assert tls == "True"  # and the standard library's TLS is there when a transfer needs it
