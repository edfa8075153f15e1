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
