"""Runtime pieces of the KVM hypervisor: where an instance's files live, the
one shared QMP connection per instance, and the checks of what noded is given.

Split from L{ganeti.backend.hypervisor.kvm}, which uses all of it.
"""

from __future__ import annotations

import socket
from typing import Any

import attrs
from twisted.internet.defer import Deferred, fail, succeed
from twisted.python.failure import Failure

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm_cmdline as cmdline
from ganeti.backend.hypervisor.qmp import QMPProtocol


class MonitorUnreachable(hv.HypervisorError):
    """The QMP monitor of an instance could not be connected to."""


@attrs.frozen
class InstanceFiles:
    """Where the runtime files of one instance live on the node."""

    conf: str
    pidfile: str
    qmp_socket: str
    serial_socket: str
    log: str
    #: the second QMP monitor NodeD's event watcher listens on (L{ganeti.heartbeat.kvmd})
    events_socket: str | None = None

    @property
    def runtime(self) -> cmdline.RuntimePaths:
        return cmdline.RuntimePaths(qmp_socket=self.qmp_socket, serial_socket=self.serial_socket,
                                    pidfile=self.pidfile, events_socket=self.events_socket)

    @property
    def marker(self) -> str:
        """What qemu's command line contains, and no other process's."""
        return cmdline.escape_opt(self.qmp_socket)


class SharedMonitor:
    """One QMP connection to one instance, shared by concurrent users."""

    def __init__(self, connecting: Deferred[QMPProtocol]) -> None:
        self.users = 0
        self.protocol: QMPProtocol | None = None
        self.failure: Failure | None = None
        self._closing = False
        self._waiting: list[Deferred[QMPProtocol]] = []
        connecting.addCallbacks(self._connected, self._failed)

    def _connected(self, protocol: QMPProtocol) -> None:
        self.protocol = protocol
        if self._closing:                   # every user gave up (timed out) while we connected
            self.close()
        self._wake()

    def _failed(self, failure: Failure) -> None:
        self.failure = failure
        self._wake()

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            self.wait().chainDeferred(d)

    def wait(self) -> Deferred[QMPProtocol]:
        if self.failure is not None:
            return fail(self.failure)
        if self.protocol is not None:
            return succeed(self.protocol)
        d: Deferred[QMPProtocol] = Deferred()
        self._waiting.append(d)
        return d

    @property
    def usable(self) -> bool:
        if self.failure is not None:
            return False
        return self.protocol is None or not self.protocol.closed.called

    def close(self) -> None:
        self._closing = True
        if self.protocol is not None and self.protocol.transport is not None and not self.protocol.closed.called:
            self.protocol.transport.loseConnection()


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not name or "/" in name or name.startswith(".") or "\0" in name:
        raise hv.HypervisorError("Invalid instance name %r" % (name,))
    return name


def disk_mode(disk: Any) -> str:
    mode = disk.get("mode") if isinstance(disk, dict) else getattr(disk, "mode", None)
    return cmdline.DISK_RDONLY if mode == cmdline.DISK_RDONLY else cmdline.DISK_RDWR


def disks_of(block_devices: Any) -> list[list[str]]:
    """C{[[path, mode], ...]} from C{(disk, path, uri)} triples (or paths)."""
    result = []
    for index, device in enumerate(block_devices or []):
        if isinstance(device, str):
            result.append([device, cmdline.DISK_RDWR])
        elif isinstance(device, (list, tuple)) and len(device) >= 3 and isinstance(device[2], str) and device[2]:
            result.append([device[2], disk_mode(device[0])])  # userspace access: qemu opens the URI
        elif isinstance(device, (list, tuple)) and len(device) >= 2 and isinstance(device[1], str):
            result.append([device[1], disk_mode(device[0])])
        else:
            raise hv.HypervisorError("Block device %d is not a (disk, path, uri) triple: %r" % (index, device))
    return result


def tcp_port(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        raise hv.HypervisorError("%s must be a TCP port, not %r" % (what, value))
    return value


_WILDCARD = ("0.0.0.0", "::", "[::]")


def console_info(name: str, hvparams: dict[str, Any], vnc_port: int | None, serial_socket: str) -> dict[str, Any]:
    """How to reach the console of instance C{name}: its VNC display when it
    has one, else its serial console, described as a message plus the
    command Ganeti runs on the node over ssh (C{gnt-instance console}
    attaches by itself where the socket is: L{ganeti.client.serial_console})."""
    bind = hvparams.get("vnc_bind_address") or ""
    if bind and vnc_port:
        host = socket.gethostname() if bind in _WILDCARD else bind
        return {"instance": name, "kind": hv.CONS_VNC, "host": host, "port": vnc_port,
                "display": vnc_port - cmdline.VNC_BASE_PORT}
    if hvparams.get("serial_console", True):
        host = socket.gethostname()
        return {"instance": name, "kind": hv.CONS_MESSAGE, "host": host,
                "command": ["socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:%s" % serial_socket],
                "message": "The serial console of instance %s is the Unix socket %s on node %s; attach "
                           "with: socat STDIO,raw,echo=0,escape=0x1d UNIX-CONNECT:%s (Ctrl-] leaves)"
                           % (name, serial_socket, host, serial_socket)}
    return {"instance": name, "kind": hv.CONS_MESSAGE,
            "message": "Instance %s has no console (no vnc_bind_address, serial_console off)" % name}
