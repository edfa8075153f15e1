"""The memory floor of a daemon: what its runtime alone takes.

A daemon's memory is its interpreter, the libraries it imports (Twisted,
the standard library, its C{ssl} with the system's OpenSSL) and
ours: Ganeti's modules and the data they hold.  To tell the two apart,
the benchmark asks each running daemon which modules it has loaded, then
starts a fresh interpreter (the same executable) that imports the same
modules except Ganeti's, with the same modules blocked (every daemon
blocks pyOpenSSL), and measures it.  That process is the floor: the daemon
cannot go under it without dropping a library it uses.

How the daemons are asked: the benchmark puts a C{sitecustomize} module
first on the daemons' C{PYTHONPATH} (L{install_probe}); when
C{GANETI_BENCH_PROBE} names a directory, it installs a C{SIGUSR2} handler
that writes the loaded and blocked module names to C{<dir>/<pid>.modules}.
Nothing in Ganeti itself changes; the handler imports nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

PROBE_ENV = "GANETI_BENCH_PROBE"

PROBE_SOURCE = '''\
"""Benchmark probe (tests/bench/memfloor.py): SIGUSR2 lists the loaded modules."""
import os
import signal
import sys


def _list_modules(signum, frame):
    directory = os.environ["%(env)s"]
    path = os.path.join(directory, "%%d.modules" %% os.getpid())
    lines = ["%%s %%s" %% ("blocked" if module is None else "loaded", name)
             for name, module in list(sys.modules.items())]
    with open(path + ".tmp", "w") as handle:
        handle.write("\\n".join(lines) + "\\n")
    os.rename(path + ".tmp", path)


if os.environ.get("%(env)s"):
    signal.signal(signal.SIGUSR2, _list_modules)
''' % {"env": PROBE_ENV}

#: modules that are Ganeti's (or the probe's, or the process's own script)
OURS = ("ganeti", "twisted.plugins.ganeti_", "tests", "sitecustomize", "__main__", "__mp_main__")

#: imports the modules named on stdin (blocking those marked so), then prints
#: C{rss pss anon} in KiB from smaps_rollup
FLOOR_SOURCE = """\
import gc, importlib, sys
lines = sys.stdin.read().split("\\n")
for line in lines:
    if line.startswith("blocked "):
        sys.modules[line[8:]] = None
for line in lines:
    if line.startswith("loaded ") and line[7:] not in sys.modules:
        try:
            importlib.import_module(line[7:])
        except Exception:
            pass
gc.collect()
values = {}
with open("/proc/self/smaps_rollup") as handle:
    for row in handle:
        fields = row.split()
        if fields and fields[0] in ("Rss:", "Pss:", "Anonymous:"):
            values[fields[0]] = fields[1]
print(values["Rss:"], values["Pss:"], values["Anonymous:"])
"""


def is_ours(name: str) -> bool:
    """Whether module C{name} is Ganeti's (or the probe's) rather than the runtime's."""
    return any(name == prefix or name.startswith(prefix if prefix.endswith("_") else prefix + ".")
               for prefix in OURS)


def runtime_modules(listing: str) -> str:
    """The lines of a probe listing that the floor process imports or blocks:
    every module that is not ours, in the daemon's order."""
    kept = []
    for line in listing.splitlines():
        kind, _, name = line.partition(" ")
        if kind in ("loaded", "blocked") and name and not is_ours(name):
            kept.append(line)
    return "\n".join(kept) + "\n"


def install_probe(directory: str) -> dict[str, str]:
    """Write the probe into C{directory}; the environment variables that
    make the daemons started afterwards load it."""
    with open(os.path.join(directory, "sitecustomize.py"), "w") as handle:
        handle.write(PROBE_SOURCE)
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": directory + (os.pathsep + path if path else ""), PROBE_ENV: directory}


def catches_sigusr2(pid: int) -> bool:
    """Whether C{pid} handles C{SIGUSR2} (else the signal would kill it)."""
    with open("/proc/%d/status" % pid) as handle:
        for line in handle:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGUSR2 - 1)))
    return False


def loaded_modules(pid: int, directory: str, timeout: float = 10.0) -> str:
    """Ask daemon C{pid} for its module listing (the probe must be loaded)."""
    if not catches_sigusr2(pid):
        raise RuntimeError("process %d has no benchmark probe (was it started with install_probe's environment?)" % pid)
    path = os.path.join(directory, "%d.modules" % pid)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError("process %d did not list its modules within %.0f s" % (pid, timeout))
        time.sleep(0.05)
    with open(path) as handle:
        return handle.read()


def floor(listing: str, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """C{(rss, pss, anon)} in MiB of a fresh interpreter that imports the
    runtime modules of C{listing} (see L{runtime_modules})."""
    output = subprocess.run([sys.executable, "-c", FLOOR_SOURCE], input=runtime_modules(listing), text=True,
                            capture_output=True, check=True, env=env).stdout
    rss, pss, anon = (int(value) / 1024.0 for value in output.split())
    return rss, pss, anon


_TWISTD = "loaded twisted.scripts.twistd\nloaded twisted.internet.reactor\n"

_NO_PYOPENSSL = "blocked OpenSSL\n"

#: the runtime in layers, each a listing for L{floor} that includes the one
#: before: an interpreter; twistd's runner and the reactor without TLS (confd,
#: MonD); with the standard library's ssl (every other daemon: ganeti.tlsbio);
#: with twisted.web's server (NodeD, RAPI); and for comparison, twistd with
#: pyOpenSSL and cryptography, as Twisted's own TLS would have it
LAYERS = (
    ("python", ""),
    ("twistd", _TWISTD + _NO_PYOPENSSL),
    ("tls", _TWISTD + _NO_PYOPENSSL + "loaded ssl\n"),
    ("web", _TWISTD + _NO_PYOPENSSL + "loaded ssl\nloaded twisted.web.server\n"),
    ("pyopenssl", _TWISTD + "loaded OpenSSL.SSL\nloaded twisted.internet.ssl\n"),
)


def layers(env: dict[str, str] | None = None) -> dict[str, float]:
    """The RSS in MiB of each of L{LAYERS}."""
    return {name: floor(listing, env)[0] for name, listing in LAYERS}
