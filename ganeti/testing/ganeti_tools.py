"""Run Ganeti 3.0.2's own gnt-* scripts against a node root of ours.

Debian's ganeti-3.0 package, extracted under C{.venv/ganeti-3.0} by
scripts/install-ganeti-clients, has the scripts (C{usr/share/ganeti/3.0/gnt-*})
and their Python package.  They use fixed paths (C{/var/run/ganeti/...},
C{/var/lib/ganeti/...}) unless Ganeti's own virtual-cluster support
redirects them: with C{GANETI_ROOTDIR} and C{GANETI_HOSTNAME} set, every
path is under that directory, whose last component must be the node's
name.  So a node's root is reached through a symlink named after the node,
nothing on the host is touched and no privilege is needed::

    tools = GanetiTools.for_root(master_root, "node1.test", workdir)
    out = tools.ok("gnt-cluster", "getmaster")          # "node1.test\\n"
    done = tools.run("gnt-instance", "rename", ..., answer="y")  # a tty answers its question
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import attrs

#: where scripts/install-ganeti-clients extracts Ganeti 3.0.2's scripts and package
GANETI_LIB = Path(__file__).resolve().parents[2] / ".venv" / "ganeti-3.0" / "usr" / "share" / "ganeti" / "3.0"


def unavailable_reason(lib: Path = GANETI_LIB) -> str | None:
    """Why Ganeti's gnt-* scripts cannot run here (C{None}: they can)."""
    if not (lib / "gnt-cluster").exists() or not (lib / "ganeti" / "cli.py").exists():
        return "Ganeti 3.0.2's package is not extracted (scripts/install-ganeti-clients fetches it)"
    probe = subprocess.run([sys.executable, "-c", "import pycurl, pyparsing, bitarray, simplejson"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return "a Python module Ganeti's scripts import is missing: %s" % probe.stderr.strip().splitlines()[-1:]
    return None


@attrs.define
class GanetiTools:
    """Ganeti's gnt-* scripts seeing one node root (see the module docstring)."""

    vroot: str
    hostname: str
    lib: Path = GANETI_LIB
    timeout: float = 120.0

    @classmethod
    def for_root(cls, root: str, hostname: str, workdir: str) -> GanetiTools:
        """Link C{workdir/hostname} to C{root} and use it as the virtual root."""
        link = os.path.join(workdir, hostname)
        if not os.path.islink(link):
            os.symlink(root, link)
        return cls(link, hostname)

    def env(self) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(self.lib), GANETI_ROOTDIR=self.vroot, GANETI_HOSTNAME=self.hostname)

    def argv(self, tool: str, *args: str) -> list[str]:
        return [sys.executable, str(self.lib / tool), *args]

    def run(self, tool: str, *args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run C{tool}; with C{answer}, on a terminal that answers its questions."""
        if answer is not None:
            return self._run_on_tty(self.argv(tool, *args), answer)
        return subprocess.run(self.argv(tool, *args), capture_output=True, text=True, timeout=self.timeout,
                              env=self.env(), cwd="/", check=False)

    def ok(self, tool: str, *args: str, answer: str | None = None) -> str:
        """L{run}, which must succeed; what it printed on stdout."""
        done = self.run(tool, *args, answer=answer)
        assert done.returncode == 0, (tool, args, done.returncode, done.stdout, done.stderr)
        return done.stdout

    def start(self, tool: str, *args: str) -> subprocess.Popen[str]:
        """Start C{tool} in the background (stdout piped, line by line)."""
        return subprocess.Popen(self.argv(tool, *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=self.env(), cwd="/", bufsize=1)

    def _run_on_tty(self, argv: list[str], answer: str) -> subprocess.CompletedProcess[str]:
        """Run C{argv} with a pseudo-terminal as its controlling terminal
        (Ganeti asks its questions on C{/dev/tty}); C{answer} is typed once."""
        env = self.env()
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its terminal
            try:
                os.chdir("/")
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        output = b""
        deadline = time.monotonic() + self.timeout
        answered = False
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([fd], [], [], 0.1)
                if ready:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:  # the child closed the terminal
                        break
                    if not chunk:
                        break
                    output += chunk
                    if not answered and b"?" in output:
                        os.write(fd, answer.encode() + b"\n")
                        answered = True
            else:
                os.kill(pid, 9)
                raise AssertionError("%s did not finish:\n%s" % (argv, output.decode("utf-8", "replace")))
        finally:
            os.close(fd)
            _, status = os.waitpid(pid, 0)
        text = output.decode("utf-8", "replace").replace("\r\n", "\n")
        return subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(status), text, "")


__all__ = ["GANETI_LIB", "GanetiTools", "unavailable_reason"]
