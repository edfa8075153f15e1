"""The machine side of the KVM hypervisor: qemu processes and host facts.

No QMP and no policy here.  L{QemuProcesses} starts qemu detached from
noded (its own session, stdin from C{/dev/null}, stdout and stderr appended
to a log file), so that qemu outlives a noded restart, and answers whether
a pid is still the qemu it started.  L{HostFacts} reads what the node has
(memory, CPUs, a usable C{/dev/kvm}).  The hypervisor takes both as
parameters, so that tests give it fakes.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import signal
import time
from typing import Any, cast

from twisted.internet.defer import Deferred
from twisted.internet.utils import getProcessOutputAndValue
from zope.interface import Interface, implementer

from ganeti.backend.hypervisor import HypervisorError
from ganeti.childproc import pid_alive

#: ioctl KVM_GET_API_VERSION, and the only API version Linux ever had
_KVM_GET_API_VERSION = 0xAE00
_KVM_API_VERSION = 12

#: the environment qemu and the network commands run with
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class IQemuProcesses(Interface):
    """Starts, watches and kills the qemu processes of one node."""

    def spawn(argv: list[str], log_path: str) -> int:
        """Start C{argv} detached, output appended to C{log_path}; its pid.

        @raise HypervisorError: the program could not be run.
        """

    def alive(pid: int, marker: str) -> bool:
        """Whether C{pid} runs and its command line contains C{marker}
        (which guards against a recycled pid)."""

    def kill(pid: int) -> None:
        """Send C{SIGKILL} to C{pid}, if it still exists."""

    def run(argv: list[str], env: dict[str, str] | None = None) -> Deferred[tuple[int, str]]:
        """Run a short helper command (with C{env} added to its environment);
        fires with C{(exit code, output)}."""


def _inheritable_fds() -> list[int]:
    """Our descriptors a spawned program would inherit."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return []
    result = []
    for fd in fds:
        try:
            if os.get_inheritable(fd):
                result.append(fd)
        except OSError:
            pass        # the descriptor listdir itself used
    return result


def log_tail(path: str, limit: int = 2000) -> str:
    """The last C{limit} characters of the log at C{path}, or C{""}."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


#: the qemu processes this process spawned and has not reaped yet
_CHILDREN: set[int] = set()


@implementer(IQemuProcesses)
class QemuProcesses:
    """Real processes.

    qemu is started with C{posix_spawn} in a new session, so that signals
    to noded's process group do not reach it; it gets no descriptor of
    noded but its log.  Our children are reaped in L{alive} (no zombie
    looks alive), by any object of this process (L{_CHILDREN}); after a
    noded restart the pids are no longer our children and are checked
    through C{/proc} only.
    """

    def __init__(self, reactor: Any, proc: str = "/proc") -> None:
        self._reactor = reactor
        self._proc = proc
        self._children = _CHILDREN

    def spawn(self, argv: list[str], log_path: str) -> int:
        os.makedirs(os.path.dirname(log_path), mode=0o750, exist_ok=True)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        except OSError as e:
            raise HypervisorError("Cannot open the qemu log %s: %s" % (log_path, e.strerror)) from None
        try:
            os.write(log_fd, ("--- %s starting: %s\n" % (stamp, shlex.join(argv))).encode())
            actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                       (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]
            actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable_fds() if fd > 2]
            pid = os.posix_spawn(argv[0], argv, {"PATH": _PATH, "LC_ALL": "C"}, file_actions=actions,
                                 setsid=True)
        except OSError as e:
            raise HypervisorError("Cannot run %s: %s" % (argv[0], e.strerror or e)) from None
        finally:
            os.close(log_fd)
        self._children.add(pid)
        return pid

    def _reap(self, pid: int) -> bool:
        """Reap our child C{pid} if it ended; whether it is gone."""
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done == pid:
            self._children.discard(pid)
            return True
        return False

    def alive(self, pid: int, marker: str) -> bool:
        if pid in self._children:
            # our child's pid cannot be recycled before we reap it; and a
            # multi-threaded qemu whose main thread ended already looks
            # like a zombie while its other threads still run
            return not self._reap(pid)
        return pid_alive(pid, marker, self._proc)

    def kill(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if pid in self._children:
            self._reap(pid)

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> Deferred[tuple[int, str]]:
        environment = {"PATH": _PATH, "LC_ALL": "C"}
        # where Open vSwitch keeps its sockets, if not in its default places (ovs-vsctl reads these)
        environment.update({k: v for k, v in os.environ.items() if k.startswith("OVS_")})
        environment.update(env or {})
        d = getProcessOutputAndValue(argv[0], argv[1:], env=environment, reactor=self._reactor)

        def done(result: tuple[bytes, bytes, int]) -> tuple[int, str]:
            out, err, code = result
            return code, (out + err).decode("utf-8", "replace").strip()
        return cast("Deferred[tuple[int, str]]", d.addCallback(done))


class HostFacts:
    """What the node has: memory, CPUs, hardware virtualization.

    @param proc: where procfs is mounted.
    @param sys: where sysfs is mounted.
    @param kvm_device: the KVM device node.
    """

    def __init__(self, proc: str = "/proc", sys: str = "/sys", kvm_device: str = "/dev/kvm") -> None:
        self.proc, self.sys, self.kvm_device = proc, sys, kvm_device

    def meminfo(self) -> dict[str, int]:
        """C{/proc/meminfo} as C{{field: kB}}; C{{}} if unreadable."""
        result: dict[str, int] = {}
        try:
            with open(os.path.join(self.proc, "meminfo")) as handle:
                for line in handle:
                    key, _, rest = line.partition(":")
                    parts = rest.split()
                    if parts and parts[0].isdigit():
                        result[key.strip()] = int(parts[0])
        except OSError:
            pass
        return result

    def cpu_topology(self) -> tuple[int, int, int]:
        """C{(CPUs, NUMA nodes, sockets)}, each at least 1."""
        cpus = os.cpu_count() or 1
        try:
            nodes = sum(1 for e in os.listdir(os.path.join(self.sys, "devices", "system", "node"))
                        if e.startswith("node") and e[4:].isdigit())
        except OSError:
            nodes = 0
        sockets: set[str] = set()
        try:
            with open(os.path.join(self.proc, "cpuinfo")) as handle:
                for line in handle:
                    if line.startswith("physical id"):
                        sockets.add(line.partition(":")[2].strip())
        except OSError:
            pass
        return cpus, max(1, nodes), max(1, len(sockets))

    def kvm_usable(self) -> bool:
        """Whether this process can open C{/dev/kvm} and it speaks KVM's API."""
        try:
            fd = os.open(self.kvm_device, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return fcntl.ioctl(fd, _KVM_GET_API_VERSION) == _KVM_API_VERSION
        except OSError:
            return False
        finally:
            os.close(fd)
