"""NodeD's kvm event watcher (Ganeti's kvmd): qemu tells, NodeD reports at once.

Every kvm instance's qemu has a second QMP monitor,
C{kvm-hypervisor/ctrl/NAME.kvmd} (the first one belongs to the hypervisor
methods, and qemu serves one client per monitor).  L{KvmEvents} holds a
connection to each and calls C{changed()} (the state reporter's C{check})
when qemu sends C{SHUTDOWN} (with its reason: a guest powering itself
off is told apart from the host's request), C{POWERDOWN}, C{STOP},
C{RESUME} or C{RESET}, and when the connection closes (qemu exited or was
killed).  L{KvmEvents.sync} (called on every look of the reporter) connects
to instances that appeared; a qemu started before this watcher existed has
no such monitor and is left to the reporter's poll.
"""

from __future__ import annotations

import os
from typing import Any, Awaitable, Callable

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

#: the QMP events that change what the node reports
EVENTS = frozenset({"SHUTDOWN", "POWERDOWN", "STOP", "RESUME", "RESET"})
SUFFIX = ".kvmd"

Connect = Callable[[str, Callable[[str, dict[str, Any], Any], None]], Awaitable[Any]]


class KvmEvents:
    """Connections to the event monitors of this node's qemu processes.

    @param ctrl_dir: C{ROOT/var/run/ganeti/kvm-hypervisor/ctrl}
    @param changed: called when an instance's state may have changed
    @param connect: C{await connect(socket_path, on_event)} -> a connected
        L{ganeti.backend.hypervisor.qmp.QMPProtocol} (default: over the Unix socket)
    """

    log = Logger()

    def __init__(self, reactor: Any, ctrl_dir: str, changed: Callable[[], Any], connect: Connect | None = None) -> None:
        self.reactor = reactor
        self.ctrl_dir = ctrl_dir
        self.changed = changed
        self._connect = connect or self._connect_unix
        #: socket path -> protocol (connected) or None (connecting)
        self.monitors: dict[str, Any] = {}
        #: socket path -> its (inode, mtime) when a connection failed (not retried until
        #: it changes: a file system may give a new socket the inode of the old one)
        self._failed: dict[str, tuple[int, int]] = {}
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def _connect_unix(self, path: str, on_event: Callable[[str, dict[str, Any], Any], None]) -> Any:
        from ganeti.backend.hypervisor.qmp import connect_qmp

        return await connect_qmp(self.reactor, path, on_event, timeout=2)

    def sync(self) -> None:
        """Connect to the event monitors that appeared since the last look."""
        try:
            names = [n for n in os.listdir(self.ctrl_dir) if n.endswith(SUFFIX)]
        except FileNotFoundError:
            return
        for entry in names:
            path = os.path.join(self.ctrl_dir, entry)
            if path in self.monitors:
                continue
            try:
                found = os.stat(path)
            except FileNotFoundError:
                continue
            inode = (found.st_ino, found.st_mtime_ns)
            if self._failed.get(path) == inode:
                continue
            self.monitors[path] = None
            d = Deferred.fromCoroutine(self._watch(path, entry[: -len(SUFFIX)], inode))
            d.addErrback(self._watch_failed, path)

    def _watch_failed(self, failure: Failure, path: str) -> None:
        self.log.failure("kvm events: watching {path} failed", failure, path=path)

    async def _watch(self, path: str, name: str, inode: tuple[int, int]) -> None:
        def on_event(event: str, data: dict[str, Any], _when: Any) -> None:
            if event in EVENTS:
                self.events.append((name, event, data))
                self.log.info("kvm events: instance {name}: {event} {data}", name=name, event=event, data=data)
                self.changed()

        try:
            protocol = await self._connect(path, on_event)
        except Exception as e:
            self._failed[path] = inode
            del self.monitors[path]
            self.log.debug("kvm events: cannot watch {name}: {why}", name=name, why=str(e))
            return
        self._failed.pop(path, None)
        self.monitors[path] = protocol
        try:
            await protocol.closed
        except Exception:
            pass
        finally:
            self.monitors.pop(path, None)
        self.changed()  # qemu exited (or was killed)

    def stop(self) -> None:
        for protocol in list(self.monitors.values()):
            if protocol is not None and protocol.transport is not None:
                protocol.transport.loseConnection()
        self.monitors.clear()


__all__ = ["EVENTS", "KvmEvents"]
