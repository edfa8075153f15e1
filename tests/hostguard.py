"""The suite reads nothing of the host: a guard on file opens (issue 22).

A test must pass on a fresh clone, on any host: it may read the checkout
(its fixtures are in C{tests/data/}), the virtualenv and Python's own
library, and the temporary directories it makes; it must not read what the
host happens to have (the shared/ folder beside a checkout, C{/usr/lib/ganeti/...},
C{/etc/ganeti/...}, a running cluster's C{/var/lib/ganeti}).

L{HostGuard} is a C{sys.addaudithook} hook on the C{open}, C{os.listdir} and
C{os.scandir} audit events of the pytest process.  While a test module is
imported (collection) or a test runs (setup, call, teardown), a path outside
L{allowed_roots} is recorded and the access is refused with L{HostRead}
(not an C{OSError}, so code that tolerates a missing file does not hide
it).  tests/conftest.py turns what was recorded into a failure of that
test phase (or of the module's collection), so even an access that some
code caught and ignored fails the test, naming the path and the line that
opened it.

Paths are resolved (symlinks too, a directory's once) before the check; a relative name
without a C{/} is let through, because C{os.open(name, dir_fd=...)}
(C{shutil.rmtree}) reports it without its directory.  Only this process is
watched: daemons and tools the integration tests start run in their own
processes, on their own temporary roots.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
import threading
import traceback
from typing import Any

#: the audit events of a file or directory being read or written
EVENTS = frozenset({"open", "os.listdir", "os.scandir"})

#: paths of the system's plumbing, allowed as they are (not resolved: /proc/self
#: resolves to the pid of whichever process asks)
PLUMBING = (
    "/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/full", "/dev/tty", "/dev/ptmx",
    "/dev/pts/", "/dev/shm/", "/dev/fd/", "/dev/stdin", "/dev/stdout", "/dev/stderr",
    # loop devices a test attaches to its own files (ExtStorage, blockdev adoption)
    "/dev/loop",
    # the KVM device the acceleration probe opens (it reads no host file)
    "/dev/kvm",
    # procfs: the running kernel's view (this process and its children, the machine's
    # memory, /proc/locks), on every Linux host and written by no package
    "/proc/",
)


class HostRead(Exception):
    """A test touched a path outside the checkout and its temporary directories."""


def checkout_root() -> str:
    return os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))


def allowed_roots() -> list[str]:
    """The directories a test may read: the checkout, the virtualenv and
    Python's library (C{sys.path}), and the temporary directories."""
    candidates = [checkout_root(), sys.prefix, sys.exec_prefix, tempfile.gettempdir(), "/tmp"]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        candidates.append(sysconfig.get_paths().get(key, ""))
    candidates += [entry for entry in sys.path if entry]
    roots = set()
    for candidate in candidates:
        if not candidate:
            continue
        resolved = os.path.realpath(candidate)
        if resolved != "/":  # never the whole file system
            roots.add(resolved.rstrip("/"))
    return sorted(roots)


class HostGuard:
    """The audit hook (see the module docstring); L{start} a phase, L{take}
    what it recorded."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = tuple(root + "/" for root in roots)
        self.exact = frozenset(roots)
        #: refused even inside an allowed root: the C{shared/} folder beside the
        #: checkout (a clone under /tmp has it in the temporary directory)
        shared = os.path.realpath(os.path.join(checkout_root(), "..", "shared"))
        self.refused = (shared, shared + "/")
        self.active = False
        self._dirs: dict[str, str] = {}
        self._found: list[str] = []
        self._lock = threading.Lock()
        self._inside = threading.local()

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def start(self) -> None:
        with self._lock:
            self._found = []
        self.active = True

    def take(self) -> list[str]:
        """Stop watching; what was refused since L{start}."""
        self.active = False
        with self._lock:
            found, self._found = self._found, []
        return found

    def allowed(self, path: str) -> bool:
        if not path.startswith("/"):
            if "/" not in path:
                return True  # a name relative to a dir_fd we are not told (shutil.rmtree)
            path = os.path.join(os.getcwd(), path)
        path = os.path.normpath(path)
        if path.startswith(PLUMBING) or path + "/" in PLUMBING:
            return True
        return self._inside_roots(self._resolve(path))

    def _inside_roots(self, resolved: str) -> bool:
        if resolved == self.refused[0] or resolved.startswith(self.refused[1]):
            return False
        return resolved in self.exact or resolved.startswith(self.roots)

    def _resolve(self, path: str) -> str:
        """C{os.path.realpath(path)}, its directory's part cached (most opens
        are of modules and fixtures in a few directories)."""
        directory, name = os.path.split(path)
        resolved = self._dirs.get(directory)
        if resolved is None:
            if len(self._dirs) > 4096:
                self._dirs.clear()
            resolved = self._dirs[directory] = os.path.realpath(directory)
        if not name or os.path.islink(path):
            return os.path.realpath(path)
        return os.path.join(resolved, name)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active or event not in EVENTS or not args:
            return
        path = args[0]
        if path is None or isinstance(path, int):
            return
        if getattr(self._inside, "busy", False):
            return
        self._inside.busy = True
        try:
            try:
                text = os.fsdecode(path)
            except TypeError:
                return
            if self.allowed(text):
                return
            where = "".join(traceback.format_stack(limit=9)[:-1])
        finally:
            self._inside.busy = False
        message = "%s %r\n%s" % (event, text, where)
        with self._lock:
            self._found.append(message)
        raise HostRead("tests must not read %r: it is outside the checkout and the temporary directories "
                       "(fixtures belong in tests/data/; see tests/hostguard.py)" % text)


def describe(found: list[str]) -> str:
    head = ("read outside the checkout and the temporary directories (tests/hostguard.py): %d access(es); "
            "fixtures belong in tests/data/, host paths must come from a Paths root\n" % len(found))
    return head + "\n".join(found[:10]) + ("\n... %d more" % (len(found) - 10) if len(found) > 10 else "")


__all__ = ["HostGuard", "HostRead", "allowed_roots", "checkout_root", "describe"]
