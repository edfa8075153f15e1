"""NodeD's kvm event watcher: qemu's QMP events and exits make the node report at once."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import Logger
from twisted.trial.unittest import SynchronousTestCase

from ganeti.backend.hypervisor import kvm_cmdline as cmdline
from ganeti.heartbeat.kvmd import KvmEvents


class FakeProtocol:
    def __init__(self) -> None:
        self.closed: Deferred[None] = Deferred()
        self.transport = None


class KvmEventsTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.ctrl = tempfile.mkdtemp()
        self.changes = 0
        self.connects: list[str] = []
        self.callbacks: dict[str, Any] = {}
        self.protocols: dict[str, FakeProtocol] = {}
        self.refuse: set[str] = set()

        async def connect(path: str, on_event: Any) -> Any:
            self.connects.append(os.path.basename(path))
            if os.path.basename(path) in self.refuse:
                raise OSError("connection refused")
            self.callbacks[os.path.basename(path)] = on_event
            protocol = self.protocols[os.path.basename(path)] = FakeProtocol()
            return protocol

        def changed() -> None:
            self.changes += 1

        self.events = KvmEvents(Clock(), self.ctrl, changed, connect)

    def socket(self, name: str) -> None:
        open(os.path.join(self.ctrl, name + ".kvmd"), "w").close()

    def test_events_and_exit_report_at_once(self) -> None:
        """A guest power-off (SHUTDOWN) and a qemu exit each call changed(); other events do not."""
        self.socket("vm1")
        self.events.sync()
        self.events.sync()  # connected already: no second connection
        self.assertEqual(self.connects, ["vm1.kvmd"])
        on_event = self.callbacks["vm1.kvmd"]
        on_event("SHUTDOWN", {"guest": True, "reason": "guest-shutdown"}, None)
        self.assertEqual(self.changes, 1)
        on_event("BLOCK_JOB_READY", {}, None)
        self.assertEqual(self.changes, 1)
        self.protocols["vm1.kvmd"].closed.callback(None)  # qemu killed
        self.assertEqual(self.changes, 2)
        self.assertEqual(self.events.events, [("vm1", "SHUTDOWN", {"guest": True, "reason": "guest-shutdown"})])

    def test_a_dead_socket_is_not_retried_until_it_is_new(self) -> None:
        self.socket("old")
        self.refuse.add("old.kvmd")
        self.events.sync()
        self.events.sync()
        self.assertEqual(self.connects, ["old.kvmd"])
        os.unlink(os.path.join(self.ctrl, "old.kvmd"))
        self.refuse.clear()
        self.socket("spacer")  # keep the old inode from being reused at once
        self.socket("old")
        # ... which a file system may still do: a new socket is also newer (qemu's, seconds later)
        path = os.path.join(self.ctrl, "old.kvmd")
        newer = os.stat(path).st_mtime_ns + 10**9
        os.utime(path, ns=(newer, newer))
        self.events.sync()
        self.assertIn("old.kvmd", self.connects[1:])

    def test_a_failed_watch_is_logged_with_its_own_socket(self) -> None:
        """When watching one socket fails after the scan moved on, the log names that socket."""
        self.socket("vm1")
        self.socket("vm2")
        self.events.sync()
        first = self.connects[0]  # the scan went on to the other socket after this one
        logged: list[dict[str, Any]] = []
        self.events.log = Logger(observer=logged.append)

        def broken() -> None:
            raise RuntimeError("reporter gone")

        self.events.changed = broken
        self.protocols[first].closed.callback(None)  # its qemu exits; reporting that fails
        failures = [e for e in logged if "log_failure" in e]
        self.assertEqual([e["path"] for e in failures], [os.path.join(self.ctrl, first)])

    def test_no_directory(self) -> None:
        KvmEvents(Clock(), os.path.join(self.ctrl, "nosuch"), lambda: None).sync()


class CommandLineTests(SynchronousTestCase):
    def test_second_monitor_for_events(self) -> None:
        """With an events socket, qemu gets a second QMP monitor for it."""
        paths = cmdline.RuntimePaths(qmp_socket="/r/ctrl/i.qmp", serial_socket="/r/ctrl/i.serial",
                                     pidfile="/r/pid/i", events_socket="/r/ctrl/i.kvmd")
        argv = cmdline.build_command("i", "7a3e1a52-9c3e-4d0e-8d0f-3c2b1a000001", 128, 1, {}, [], [], paths)
        monitors = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-qmp"]
        self.assertEqual(monitors, ["unix:/r/ctrl/i.qmp,server=on,wait=off", "unix:/r/ctrl/i.kvmd,server=on,wait=off"])
