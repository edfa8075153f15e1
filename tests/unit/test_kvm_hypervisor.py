"""The KVM hypervisor against fake qemu processes and fake QMP monitors.

L{FakeNode} stands in for the machine: C{spawn} reads the QMP socket path
out of qemu's argv and makes a L{FakeQemu} for it, which answers QMP over
an in-memory pipe (L{twisted.test.iosim}).  Time is a L{Clock}; L{drive}
pumps the pipes and advances it until a Deferred fires.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectError
from twisted.internet.task import Clock
from twisted.protocols.basic import LineOnlyReceiver
from twisted.test import iosim
from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm
from ganeti.backend.hypervisor.kvm_process import IQemuProcesses
from ganeti.backend.hypervisor.qmp import QMPProtocol
from ganeti.objects import NIC, Instance
from ganeti.paths import Paths

UUID = "6b9a3b3e-7f2c-4d5e-9a1b-2c3d4e5f6a7b"
NAME = "inst1.example.com"
GREETING = {"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 7}}, "capabilities": []}}


class FakeQemu:
    """The state of one fake qemu process and its monitor."""

    def __init__(self, node: FakeNode, pid: int, argv: list[str]) -> None:
        self.node, self.pid, self.argv = node, pid, argv
        self.status = "inmigrate" if "-incoming" in argv else ("prelaunch" if "-S" in argv else "running")
        self.received: list[dict[str, Any]] = []
        self.obeys_powerdown = True
        self.exits_on_quit = True
        self.migrate_statuses: list[dict[str, Any]] = []
        self.connections = 0
        self.migrate_uri = ""
        self.paused_before = False
        self.mute: bool | str = False

    def commands(self) -> list[str]:
        return [m["execute"] for m in self.received if m["execute"] != "qmp_capabilities"]

    def arguments(self, command: str) -> list[Any]:
        return [m.get("arguments") for m in self.received if m["execute"] == command]

    def arrive(self) -> None:
        """The migration completed: the target qemu listening on our URI runs."""
        for qemu in self.node.qemus.values():
            argv = qemu.argv
            if "-incoming" in argv and argv[argv.index("-incoming") + 1] == self.migrate_uri:
                if qemu.pid in self.node.running and qemu.status == "inmigrate":
                    qemu.status = "paused" if self.paused_before else "running"

    def answer(self, message: dict[str, Any], server: FakeMonitor) -> None:
        self.received.append(message)
        command, result = message["execute"], {}
        if self.mute and command != "qmp_capabilities":
            return
        if command == "query-status":
            result = {"status": self.status, "running": self.status == "running"}
        elif command == "system_powerdown" and self.obeys_powerdown:
            self.status = "shutdown"
        elif command in ("cont",):
            self.status = "running"
        elif command == "migrate":
            self.migrate_uri = message["arguments"]["uri"]
            self.paused_before = self.status in ("prelaunch", "paused")
            self.status = "finish-migrate"
        elif command == "query-migrate":
            result = self.migrate_statuses.pop(0) if self.migrate_statuses else {"status": "completed"}
            if result.get("status") == "completed":
                self.status = "postmigrate"
                self.arrive()
            elif result.get("status") == "failed":
                self.status = "running"
        server.send({"return": result, "id": message.get("id")})
        if command == "quit" and self.exits_on_quit:
            self.node.running.discard(self.pid)
            server.transport.loseConnection()


class FakeMonitor(LineOnlyReceiver):
    delimiter = b"\n"

    def __init__(self, qemu: FakeQemu) -> None:
        self.qemu = qemu

    def connectionMade(self) -> None:
        self.qemu.connections += 1
        self.send(GREETING)

    def send(self, message: dict[str, Any]) -> None:
        self.transport.write(json.dumps(message).encode() + b"\r\n")

    def lineReceived(self, line: bytes) -> None:
        self.qemu.answer(json.loads(line), self)


@implementer(IQemuProcesses)
class FakeNode:
    """The fake machine: processes and the QMP sockets of their qemus."""

    def __init__(self) -> None:
        self.next_pid = 4000
        self.running: set[int] = set()
        self.qemus: dict[str, FakeQemu] = {}        # QMP socket path -> qemu
        self.spawned: list[tuple[list[str], str]] = []
        self.killed: list[int] = []
        self.ran: list[list[str]] = []
        #: the environments of the commands run with one (a custom network script)
        self.envs: list[dict[str, str]] = []
        #: C{(exit code, output)} of a command, by its argv; others answer C{(0, "")}
        self.answers: dict[tuple[str, ...], tuple[int, str]] = {}
        self.pumps: list[iosim.IOPump] = []
        self.dies_at_start = False
        self.dies_on_kill = True
        self.monitor_down = False
        self.connecting: list[Deferred[QMPProtocol]] = []

    def spawn(self, argv: list[str], log_path: str) -> int:
        self.next_pid += 1
        pid = self.next_pid
        self.spawned.append((argv, log_path))
        qmp = argv[argv.index("-qmp") + 1]
        path = qmp[len("unix:"):].split(",server")[0]
        self.qemus[path] = FakeQemu(self, pid, argv)
        if self.dies_at_start:
            os.makedirs(os.path.dirname(log_path), exist_ok=True)
            with open(log_path, "a") as handle:
                handle.write("qemu-system-x86_64: -m 256: cannot set up guest memory\n")
        else:
            self.running.add(pid)
        return pid

    def alive(self, pid: int, marker: str) -> bool:
        qemu = next((q for q in self.qemus.values() if q.pid == pid), None)
        return pid in self.running and qemu is not None and marker in " ".join(qemu.argv)

    def kill(self, pid: int) -> None:
        self.killed.append(pid)
        if self.dies_on_kill:
            self.running.discard(pid)

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> Deferred[tuple[int, str]]:
        self.ran.append(argv)
        if env is not None:
            self.envs.append(env)
        answer = self.answers.get(tuple(argv))
        return succeed(answer if answer is not None else (0, ""))

    def connect(self, path: str) -> Deferred[QMPProtocol]:
        qemu = self.qemus.get(path)
        if qemu is None or qemu.pid not in self.running or self.monitor_down:
            return fail(ConnectError(string="No such file or directory: %s" % path))
        if qemu.mute == "connect":
            hanging: Deferred[QMPProtocol] = Deferred()
            self.connecting.append(hanging)
            return hanging
        client, _server, pump = iosim.connectedServerAndClient(
            lambda: FakeMonitor(qemu), QMPProtocol, greet=False)
        self.pumps.append(pump)
        d: Deferred[QMPProtocol] = Deferred()
        client.ready.addCallbacks(lambda _: d.callback(client), d.errback)
        pump.flush()
        return d

    def flush(self) -> None:
        for pump in list(self.pumps):
            pump.flush()

    def qemu_of(self, hypervisor: kvm.KVMHypervisor, name: str = NAME) -> FakeQemu:
        return self.qemus[hypervisor.files(name).qmp_socket]


class FakeHost:
    def __init__(self) -> None:
        self.memory = {"MemTotal": 8192 * 1024, "MemAvailable": 6144 * 1024}

    def meminfo(self) -> dict[str, int]:
        return dict(self.memory)

    def cpu_topology(self) -> tuple[int, int, int]:
        return 8, 1, 2

    def kvm_usable(self) -> bool:
        return False


def instance(name: str = NAME, **hvparams: Any) -> Instance:
    params = {"kvm_path": "/bin/sh", "vnc_bind_address": "", "serial_console": True}
    params.update(hvparams)
    return Instance(name=name, uuid=UUID, hypervisor="kvm", hvparams=params,
                    beparams={"maxmem": 256, "vcpus": 2})


class KVMTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.node = FakeNode()
        self.kvm = self.make(self.short_root())

    def short_root(self) -> str:
        """A node root short enough for Unix socket paths below it."""
        root = tempfile.mkdtemp(prefix="gnt-kvm", dir="/tmp")
        self.addCleanup(shutil.rmtree, root, True)
        return root

    def make(self, root: str) -> kvm.KVMHypervisor:
        return kvm.KVMHypervisor(Paths(root), self.clock, processes=self.node, connect=self.node.connect,
                                 host=FakeHost(), kvm_usable=False)

    def drive(self, d: Deferred[Any], seconds: float = 1000, step: float = 0.05) -> Deferred[Any]:
        """Pump the monitors and let time pass until C{d} fires."""
        for _ in range(int(seconds / step)):
            self.node.flush()
            if d.called:
                break
            self.clock.advance(step)
        self.node.flush()
        return d

    def start(self, inst: Instance | None = None, hypervisor: kvm.KVMHypervisor | None = None,
              paused: bool = False) -> FakeQemu:
        hypervisor = hypervisor or self.kvm
        inst = inst or instance()
        self.successResultOf(self.drive(hypervisor.start_instance(inst, [], paused)))
        return self.node.qemu_of(hypervisor, inst.name)


class StartTests(KVMTestCase):
    def test_provides_interface(self) -> None:
        verifyObject(hv.IHypervisor, self.kvm)

    def test_start_writes_runtime_files_and_argv(self) -> None:
        inst = Instance(name=NAME, uuid=UUID, hypervisor="kvm", beparams={"maxmem": 256, "vcpus": 2},
                        hvparams={"kvm_path": "/bin/sh"},
                        nics=[NIC(mac="aa:00:00:11:22:33", nicparams={"mode": "bridged", "link": "br0"})])
        devices = [({"mode": "rw"}, "/srv/disk0", None), ({"mode": "ro"}, "/srv/disk1", None)]
        self.successResultOf(self.drive(self.kvm.start_instance(inst, devices, False)))
        files = self.kvm.files(NAME)
        run = os.path.join(self.kvm.paths.run_dir, "kvm-hypervisor")
        self.assertEqual(files.conf, os.path.join(run, "conf", NAME))
        self.assertEqual(files.qmp_socket, os.path.join(run, "ctrl", NAME + ".qmp"))
        self.assertEqual(files.log, os.path.join(self.kvm.paths.log_dir, "kvm", NAME + ".log"))
        [(argv, log_path)] = self.node.spawned
        self.assertEqual(log_path, files.log)
        self.assertEqual(argv[0], "/bin/sh")
        joined = " ".join(argv)
        for piece in ("-m 256", "-smp 2", "-machine pc,accel=tcg", "-pidfile " + files.pidfile,
                      "-qmp unix:%s,server=on,wait=off" % files.qmp_socket,
                      "-serial unix:%s,server=on,wait=off" % files.serial_socket, "-display none",
                      "-drive file=/srv/disk0,format=raw,if=none,id=disk0,aio=threads "
                      "-device virtio-blk-pci,drive=disk0,id=disk0,addr=0xc",
                      "-drive file=/srv/disk1,format=raw,if=none,id=disk1,aio=threads,readonly=on "
                      "-device virtio-blk-pci,drive=disk1,id=disk1,addr=0xd",
                      "-device virtio-net-pci,netdev=nic0,mac=aa:00:00:11:22:33,id=nic0-dev,addr=0xe",
                      "-uuid " + UUID):
            self.assertIn(piece, joined)
        self.assertNotIn("-S", argv)
        tap = argv[argv.index("-netdev") + 1].split("ifname=")[1].split(",")[0]
        self.assertLessEqual(len(tap), 15)
        self.assertEqual(self.node.ran, [["ip", "-o", "link", "show", "dev", tap], ["ip", "link", "set", "dev", tap, "up"],
                                         ["ip", "-o", "-d", "link", "show", "dev", "br0"],
                                         ["ip", "link", "set", "dev", tap, "master", "br0"]])
        record = json.loads(open(files.conf).read())
        self.assertEqual(record["pid"], 4001)
        self.assertEqual(record["argv"], argv)
        self.assertEqual(record["state"], "running")
        self.assertEqual(record["disks"], [["/srv/disk0", "rw", "disk0", 12], ["/srv/disk1", "ro", "disk1", 13]])
        self.assertEqual((record["nics"][0]["id"], record["nics"][0]["pci"]), ("nic0", 14))
        self.assertEqual((record["memory"], record["vcpus"], record["accel"]), (256, 2, "tcg"))
        self.assertEqual(self.node.qemu_of(self.kvm).commands(), ["query-status"])
        self.assertEqual(self.kvm.list_instances(), [NAME])

    def test_accel_kvm_when_usable(self) -> None:
        hypervisor = kvm.KVMHypervisor(Paths(self.short_root()), self.clock, processes=self.node,
                                       connect=self.node.connect, host=FakeHost(), kvm_usable=True)
        self.start(hypervisor=hypervisor)
        self.assertIn("pc,accel=kvm", self.node.spawned[0][0])

    def test_start_paused(self) -> None:
        qemu = self.start(paused=True)
        self.assertIn("-S", qemu.argv)
        self.assertEqual(self.kvm.list_instances(), [NAME])
        self.assertEqual(json.loads(open(self.kvm.files(NAME).conf).read())["state"], "paused")

    def test_already_running(self) -> None:
        self.start()
        failure = self.failureResultOf(self.drive(self.kvm.start_instance(instance(), [], False)),
                                       hv.HypervisorError)
        self.assertIn("already running", str(failure.value))
        self.assertEqual(len(self.node.spawned), 1)

    def test_binary_missing(self) -> None:
        d = self.kvm.start_instance(instance(kvm_path="/nonexistent/qemu-kvm"), [], False)
        message = str(self.failureResultOf(d, hv.HypervisorError).value)
        self.assertIn("/nonexistent/qemu-kvm", message)
        self.assertIn("apt-get install qemu-system-x86", message)
        self.assertEqual(self.node.spawned, [])

    def test_bad_hvparam(self) -> None:
        d = self.kvm.start_instance(instance(disk_cache="bogus"), [], False)
        self.assertIn("disk_cache", str(self.failureResultOf(d, hv.HypervisorError).value))
        self.assertEqual(self.node.spawned, [])

    def test_qemu_dies_at_start(self) -> None:
        self.node.dies_at_start = True
        d = self.drive(self.kvm.start_instance(instance(), [], False))
        message = str(self.failureResultOf(d, hv.HypervisorError).value)
        self.assertIn("exited while starting", message)
        self.assertIn("cannot set up guest memory", message)
        self.assertFalse(os.path.exists(self.kvm.files(NAME).conf))
        self.assertEqual(self.kvm.list_instances(), [])

    def test_monitor_never_answers(self) -> None:
        self.node.monitor_down = True
        d = self.kvm.start_instance(instance(), [], False)
        self.drive(d, seconds=kvm.START_TIMEOUT - 1)
        self.assertNoResult(d)
        self.drive(d, seconds=kvm.QUIT_GRACE + 2)
        message = str(self.failureResultOf(d, hv.HypervisorError).value)
        self.assertIn("did not open its monitor", message)
        self.assertEqual(self.node.killed, [4001])
        self.assertFalse(os.path.exists(self.kvm.files(NAME).conf))

    def test_invalid_name(self) -> None:
        for name in ("", "../x", ".hidden", "a/b"):
            d = self.kvm.start_instance(instance(name=name), [], False)
            self.failureResultOf(d, hv.HypervisorError)


class StopTests(KVMTestCase):
    def test_clean_shutdown(self) -> None:
        """The guest powers off, quit ends qemu: no kill."""
        qemu = self.start()
        self.successResultOf(self.drive(self.kvm.stop_instance(instance(), False, 60)))
        self.assertEqual(qemu.commands(),
                         ["query-status", "query-status", "system_powerdown", "query-status", "quit"])
        self.assertEqual(self.node.killed, [])
        self.assertEqual(self.kvm.list_instances(), [])
        self.assertFalse(os.path.exists(self.kvm.files(NAME).conf))

    def test_powerdown_then_quit_then_kill(self) -> None:
        """A guest ignoring ACPI gets quit at the timeout, a stuck qemu
        SIGKILL after the quit grace."""
        qemu = self.start()
        qemu.obeys_powerdown = False
        qemu.exits_on_quit = False
        d = self.kvm.stop_instance(instance(), False, 10)
        self.drive(d, seconds=9.5)
        self.assertIn("system_powerdown", qemu.commands())
        self.assertNotIn("quit", qemu.commands())
        self.drive(d, seconds=1)
        self.assertEqual(qemu.commands()[-1], "quit")
        self.assertEqual(self.node.killed, [])
        self.drive(d, seconds=kvm.QUIT_GRACE - 1)
        self.assertEqual(self.node.killed, [])
        self.assertNoResult(d)
        self.drive(d, seconds=1.5)
        self.assertEqual(self.node.killed, [qemu.pid])
        self.successResultOf(d)
        self.assertEqual(self.kvm.list_instances(), [])

    def test_survives_kill(self) -> None:
        qemu = self.start()
        qemu.exits_on_quit = False
        self.node.dies_on_kill = False
        d = self.drive(self.kvm.stop_instance(instance(acpi=False), False, 10))
        self.assertIn("survived SIGKILL", str(self.failureResultOf(d, hv.HypervisorError).value))

    def test_paused_quits_at_once(self) -> None:
        qemu = self.start(paused=True)
        self.successResultOf(self.drive(self.kvm.stop_instance(instance(), False, 60), seconds=1))
        self.assertEqual(qemu.commands(), ["query-status", "query-status", "quit"])

    def test_corrupt_record_is_skipped(self) -> None:
        self.start()
        path = self.kvm.files("broken").conf
        with open(path, "w") as handle:
            handle.write("{not json")
        self.assertEqual(self.kvm.list_instances(), [NAME])
        self.failureResultOf(self.kvm.get_instance_info("broken"), hv.HypervisorError)
        self.assertEqual(list(self.successResultOf(self.drive(self.kvm.get_all_instances_info()))), [NAME])

    def test_no_acpi_quits_at_once(self) -> None:
        qemu = self.start(instance(acpi=False))
        self.successResultOf(self.drive(self.kvm.stop_instance(instance(), False, 60)))
        self.assertEqual(qemu.commands(), ["query-status", "quit"])

    def test_monitor_gone_kills(self) -> None:
        qemu = self.start()
        self.node.monitor_down = True
        self.successResultOf(self.drive(self.kvm.stop_instance(instance(), False, 5)))
        self.assertEqual(self.node.killed, [qemu.pid])

    def test_not_running(self) -> None:
        self.successResultOf(self.kvm.stop_instance(instance(), True, 10))
        failure = self.failureResultOf(self.kvm.stop_instance(instance(), False, 10), hv.HypervisorError)
        self.assertIn("not running", str(failure.value))


class StateTests(KVMTestCase):
    def test_list_drops_dead_processes(self) -> None:
        first = self.start()
        self.start(instance("inst2.example.com"))
        self.assertEqual(self.kvm.list_instances(), [NAME, "inst2.example.com"])
        self.node.running.discard(first.pid)
        self.assertEqual(self.kvm.list_instances(), ["inst2.example.com"])
        self.assertFalse(os.path.exists(self.kvm.files(NAME).conf))
        self.assertIsNone(self.successResultOf(self.kvm.get_instance_info(NAME)))

    def test_recycled_pid_is_not_the_instance(self) -> None:
        qemu = self.start()
        qemu.argv = ["/usr/bin/something-else"]
        self.assertEqual(self.kvm.list_instances(), [])

    def test_found_after_restart(self) -> None:
        """A new object (noded restarted) sees the running instances."""
        self.start()
        again = self.make(self.kvm.paths.root)
        self.assertEqual(again.list_instances(), [NAME])
        self.successResultOf(self.drive(again.stop_instance(instance(acpi=False), False, 5)))
        self.assertEqual(self.kvm.list_instances(), [])

    def test_instance_info(self) -> None:
        self.start()
        self.clock.advance(42)
        info = self.successResultOf(self.drive(self.kvm.get_instance_info(NAME)))
        assert info is not None
        self.assertEqual((info["memory"], info["vcpus"], info["state"]), (256, 2, hv.STATE_RUNNING))
        self.assertGreaterEqual(info["time"], 42)
        self.assertEqual(list(self.successResultOf(self.drive(self.kvm.get_all_instances_info()))), [NAME])
        self.assertIsNone(self.successResultOf(self.kvm.get_instance_info("other")))

    def test_reboot(self) -> None:
        qemu = self.start()
        self.successResultOf(self.drive(self.kvm.reboot_instance(instance())))
        self.assertEqual(qemu.commands()[-2:], ["query-status", "system_reset"])
        qemu.status = "shutdown"
        self.successResultOf(self.drive(self.kvm.reboot_instance(instance())))
        self.assertEqual(qemu.commands()[-3:], ["query-status", "system_reset", "cont"])

    def test_reboot_not_running(self) -> None:
        self.failureResultOf(self.kvm.reboot_instance(instance()), hv.HypervisorError)

    def test_balloon(self) -> None:
        """runtime memory: QMP balloon in bytes; the instance's info reports it."""
        qemu = self.start()
        self.assertIn("virtio-balloon,id=balloon", qemu.argv)
        self.successResultOf(self.drive(self.kvm.balloon_instance_memory(instance(), 192)))
        self.assertEqual(qemu.arguments("balloon"), [{"value": 192 * 1024 * 1024}])
        info = self.successResultOf(self.drive(self.kvm.get_instance_info(NAME)))
        self.assertEqual(info["memory"], 192)

    def test_balloon_not_running(self) -> None:
        self.failureResultOf(self.kvm.balloon_instance_memory(instance(), 128), hv.HypervisorError)

    def test_console_serial_and_vnc(self) -> None:
        console = self.kvm.get_console_info(instance())
        self.assertEqual(console["kind"], hv.CONS_MESSAGE)
        self.assertIn("socat", console["message"])
        self.assertIn(self.kvm.files(NAME).serial_socket, console["message"])
        vnc = Instance(name=NAME, uuid=UUID, network_port=5907, hvparams={"vnc_bind_address": "192.0.2.1"})
        self.assertEqual(self.kvm.get_console_info(vnc), {
            "instance": NAME, "kind": hv.CONS_VNC, "host": "192.0.2.1", "port": 5907, "display": 7})

    def test_vnc_needs_a_port(self) -> None:
        d = self.kvm.start_instance(instance(vnc_bind_address="127.0.0.1"), [], False)
        self.assertIn("network port", str(self.failureResultOf(d, hv.HypervisorError).value))

    def test_node_info(self) -> None:
        info = self.kvm.get_node_info()
        self.assertEqual((info["memory_total"], info["memory_free"]), (8192, 6144))
        self.assertEqual((info["cpu_total"], info["cpu_nodes"], info["cpu_sockets"]), (8, 1, 2))
        self.start()
        info = self.kvm.get_node_info()
        self.assertEqual(info["memory_free"], 6144)       # still below total - 256
        self.kvm._host.memory["MemAvailable"] = 8000 * 1024
        self.assertEqual(self.kvm.get_node_info()["memory_free"], 8192 - 256)


class PoweredOffTests(KVMTestCase):
    """A guest that powered itself off leaves qemu in run state C{shutdown}."""

    def info(self, name: str = NAME, hypervisor: kvm.KVMHypervisor | None = None) -> Any:
        return self.successResultOf(self.drive((hypervisor or self.kvm).get_instance_info(name)))

    def all_info(self) -> dict[str, Any]:
        return self.successResultOf(self.drive(self.kvm.get_all_instances_info()))

    def test_reported_shutdown(self) -> None:
        qemu = self.start()
        self.start(instance("inst2.example.com"))
        qemu.status = "shutdown"
        self.assertEqual(self.info()["state"], hv.STATE_SHUTDOWN)
        self.assertEqual({n: i["state"] for n, i in self.all_info().items()},
                         {NAME: hv.STATE_SHUTDOWN, "inst2.example.com": hv.STATE_RUNNING})
        self.assertEqual(self.kvm.list_instances(), [NAME, "inst2.example.com"])   # its qemu still holds the disks
        qemu.status = "running"                 # rebooted from the console
        self.assertEqual(self.info()["state"], hv.STATE_RUNNING)

    def test_paused_and_panicked_are_not_shutdown(self) -> None:
        qemu = self.start(paused=True)
        self.assertEqual(self.info()["state"], hv.STATE_RUNNING)
        qemu.status = "guest-panicked"
        self.assertEqual(self.info()["state"], hv.STATE_RUNNING)

    def test_seen_after_restart(self) -> None:
        """Nothing is cached: a new noded asks qemu and sees the same."""
        self.start().status = "shutdown"
        again = self.make(self.kvm.paths.root)
        self.assertEqual(self.info(hypervisor=again)["state"], hv.STATE_SHUTDOWN)

    def test_info_does_not_leave_connections_open(self) -> None:
        qemu = self.start()
        for _ in range(3):
            self.all_info()
        self.assertEqual(self.kvm._monitors, {})
        self.assertTrue(all(p.client.closed.called for p in self.node.pumps))
        self.assertEqual(qemu.connections, 4)

    def test_mute_monitors_are_waited_for_at_once(self) -> None:
        """Stuck qemus cost one L{kvm.INFO_TIMEOUT} together, and count as running."""
        names = ["i%d.example.com" % i for i in range(5)]
        qemus = [self.start(instance(n)) for n in names]
        qemus[0].mute = True                    # connected, does not answer
        qemus[1].mute = "connect"               # the connection never completes
        qemus[2].status = "shutdown"
        d = self.kvm.get_all_instances_info()
        self.node.flush()
        self.clock.advance(kvm.INFO_TIMEOUT - 0.1)
        self.node.flush()
        self.assertNoResult(d)
        self.clock.advance(0.1)
        self.node.flush()
        states = {n: i["state"] for n, i in self.successResultOf(d).items()}
        self.assertEqual(states, {names[0]: hv.STATE_RUNNING, names[1]: hv.STATE_RUNNING,
                                  names[2]: hv.STATE_SHUTDOWN, names[3]: hv.STATE_RUNNING,
                                  names[4]: hv.STATE_RUNNING})
        self.assertEqual(self.kvm._monitors, {})
        # the connection that completes after the timeout is closed at once
        [hanging] = self.node.connecting
        client, _server, pump = iosim.connectedServerAndClient(
            lambda: FakeMonitor(qemus[1]), QMPProtocol, greet=False)
        pump.flush()
        hanging.callback(client)
        pump.flush()
        self.assertTrue(client.closed.called)

    def test_stop_quits_at_once(self) -> None:
        qemu = self.start()
        qemu.status = "shutdown"
        d = self.kvm.stop_instance(instance(), False, 60)
        self.successResultOf(self.drive(d, seconds=0.5))
        self.assertEqual(qemu.commands(), ["query-status", "query-status", "quit"])
        self.assertEqual(self.node.killed, [])
        self.assertEqual(self.kvm.list_instances(), [])

    def test_start_replaces_the_stopped_qemu(self) -> None:
        old = self.start()
        old.status = "shutdown"
        self.successResultOf(self.drive(self.kvm.start_instance(instance(), [], False)))
        self.assertEqual(old.commands(), ["query-status", "query-status", "quit"])
        self.assertNotIn(old.pid, self.node.running)
        new = self.node.qemu_of(self.kvm)
        self.assertNotEqual(new.pid, old.pid)
        self.assertEqual(json.loads(open(self.kvm.files(NAME).conf).read())["pid"], new.pid)
        self.assertEqual(self.info()["state"], hv.STATE_RUNNING)

    def test_start_still_refuses_a_running_guest(self) -> None:
        qemu = self.start()
        for status in ("running", "paused"):
            qemu.status = status
            failure = self.failureResultOf(self.drive(self.kvm.start_instance(instance(), [], False)),
                                           hv.HypervisorError)
            self.assertIn("already running", str(failure.value))
        qemu.mute = True                        # cannot tell: do not kill it
        d = self.drive(self.kvm.start_instance(instance(), [], False), seconds=kvm.COMMAND_TIMEOUT + 1)
        self.assertIn("already running", str(self.failureResultOf(d, hv.HypervisorError).value))
        self.assertEqual(len(self.node.spawned), 1)
        self.assertIn(qemu.pid, self.node.running)


class MigrationTests(KVMTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.target = self.make(self.short_root())
        self.inst = instance(migration_port=8200, migration_bandwidth=64, migration_downtime=100)

    def accept(self) -> FakeQemu:
        info = self.kvm.migration_info(self.inst)
        json.dumps(info)
        self.successResultOf(self.drive(self.target.accept_instance(self.inst, info, "192.0.2.2")))
        return self.node.qemu_of(self.target)

    def test_successful_migration(self) -> None:
        source = self.start(self.inst)
        info = self.kvm.migration_info(self.inst)
        self.assertEqual((info["memory"], info["vcpus"], info["paused"]), (256, 2, False))
        self.assertEqual(info["argv"], source.argv)
        target = self.accept()
        self.assertIn("tcp:192.0.2.2:8200", target.argv[target.argv.index("-incoming") + 1])
        self.assertEqual(self.target.list_instances(), [])          # incoming: not running yet
        self.assertEqual(self.target.get_node_info()["memory_free"], 6144)
        source.migrate_statuses = [{"status": "active"}, {"status": "active"},
                                   {"status": "completed", "ram": {"transferred": 5, "total": 9},
                                    "downtime": 42, "total-time": 1234, "setup-time": 3}]
        d = self.kvm.migrate_instance(self.inst, "192.0.2.2")
        self.drive(d, seconds=kvm.MIGRATION_POLL * 1.5)
        self.assertNoResult(d)
        self.successResultOf(self.drive(d))
        self.assertEqual(source.commands()[1:], [
            "migrate-set-parameters", "migrate", "query-migrate", "query-migrate", "query-migrate"])
        self.assertEqual(source.arguments("migrate-set-parameters"),
                         [{"max-bandwidth": 64 * 1024 * 1024, "downtime-limit": 100}])
        self.assertEqual(source.arguments("migrate"), [{"uri": "tcp:192.0.2.2:8200"}])
        source.migrate_statuses = [{"status": "completed", "ram": {"transferred": 5, "total": 9},
                                    "downtime": 42, "total-time": 1234, "setup-time": 3}]
        status = self.successResultOf(self.drive(self.kvm.get_migration_status(self.inst)))
        self.assertEqual(status, {"status": "completed", "transferred_ram": 5, "total_ram": 9, "downtime_ms": 42,
                                  "total_time_ms": 1234, "setup_time_ms": 3})   # qemu's own figures
        self.successResultOf(self.drive(self.target.finalize_migration(self.inst, info, True)))
        self.assertEqual(target.commands(), ["query-status", "query-status", "cont"])
        self.successResultOf(self.drive(self.kvm.finalize_migration(self.inst, None, True)))
        self.assertEqual(source.commands()[-1], "quit")
        self.assertEqual(self.kvm.list_instances(), [])
        self.assertEqual(self.target.list_instances(), [NAME])
        self.assertEqual(self.successResultOf(self.kvm.get_migration_status(self.inst)), {"status": "none"})

    def test_failed_migration_rolls_back(self) -> None:
        source = self.start(self.inst)
        target = self.accept()
        source.migrate_statuses = [{"status": "failed", "error-desc": "Connection refused"}]
        d = self.drive(self.kvm.migrate_instance(self.inst, "192.0.2.2"))
        self.assertIn("Connection refused", str(self.failureResultOf(d, hv.HypervisorError).value))
        self.successResultOf(self.drive(self.target.finalize_migration(self.inst, None, False)))
        self.assertEqual(target.commands()[-1], "quit")
        self.assertNotIn(target.pid, self.node.running)
        self.assertFalse(os.path.exists(self.target.files(NAME).conf))
        self.successResultOf(self.drive(self.kvm.finalize_migration(self.inst, None, False)))
        self.assertNotIn("quit", source.commands())
        self.assertEqual(self.kvm.list_instances(), [NAME])
        record = json.loads(open(self.kvm.files(NAME).conf).read())
        self.assertNotIn("migration", record)

    def test_source_resumed_after_failure(self) -> None:
        source = self.start(self.inst)
        self.accept()
        self.successResultOf(self.drive(self.kvm.migrate_instance(self.inst, "192.0.2.2")))
        self.assertEqual(source.status, "postmigrate")
        self.successResultOf(self.drive(self.kvm.finalize_migration(self.inst, None, False)))
        self.assertEqual(source.commands()[-2:], ["query-status", "cont"])

    def test_paused_instance_stays_paused(self) -> None:
        self.start(self.inst, paused=True)
        target = self.accept()
        self.successResultOf(self.drive(self.kvm.migrate_instance(self.inst, "192.0.2.2")))
        target.status = "paused"
        self.successResultOf(self.drive(self.target.finalize_migration(self.inst, None, True)))
        self.assertNotIn("cont", target.commands())
        self.assertEqual(json.loads(open(self.target.files(NAME).conf).read())["state"], "paused")

    def test_non_live_migration_stops_the_guest_first(self) -> None:
        source = self.start(self.inst)
        target = self.accept()
        self.successResultOf(self.drive(self.kvm.migrate_instance(self.inst, "192.0.2.2", live=False)))
        self.assertEqual(source.commands()[1:4], ["migrate-set-parameters", "stop", "migrate"])
        self.successResultOf(self.drive(self.target.finalize_migration(self.inst, None, True)))
        self.assertEqual(target.commands()[-1], "cont")

    def test_target_not_arrived(self) -> None:
        self.start(self.inst)
        target = self.accept()
        d = self.drive(self.target.finalize_migration(self.inst, None, True))
        self.assertIn("not arrived here after 30 s", str(self.failureResultOf(d, hv.HypervisorError).value))
        self.assertEqual(target.status, "inmigrate")

    def test_target_arriving_late_is_waited_for(self) -> None:
        # the source reports "completed" once it sent the last state; the target may still be loading it
        self.start(self.inst)
        target = self.accept()
        d = self.target.finalize_migration(self.inst, None, True)
        self.drive(d, seconds=2)
        self.assertNoResult(d)
        target.status = "paused"
        self.successResultOf(self.drive(d))
        self.assertEqual(target.status, "running")
        self.assertEqual(json.loads(open(self.target.files(NAME).conf).read())["state"], "running")

    def test_accept_refuses_existing(self) -> None:
        self.start(self.inst)
        self.start(self.inst, hypervisor=self.target)
        info = self.kvm.migration_info(self.inst)
        d = self.target.accept_instance(self.inst, info, "192.0.2.2")
        self.assertIn("already exists", str(self.failureResultOf(d, hv.HypervisorError).value))

    def test_accept_kvm_on_tcg_node(self) -> None:
        self.start(self.inst)
        info = dict(self.kvm.migration_info(self.inst), accel="kvm")
        d = self.target.accept_instance(self.inst, info, "192.0.2.2")
        self.assertIn("/dev/kvm", str(self.failureResultOf(d, hv.HypervisorError).value))

    def test_default_migration_port(self) -> None:
        inst = instance()
        self.start(inst)
        info = self.kvm.migration_info(inst)
        self.successResultOf(self.drive(self.target.accept_instance(inst, info, "192.0.2.2")))
        argv = self.node.qemu_of(self.target).argv
        self.assertEqual(argv[argv.index("-incoming") + 1], "tcp:192.0.2.2:8102")

    def test_status_shares_the_monitor_of_a_running_migration(self) -> None:
        source = self.start(self.inst)
        self.accept()
        source.migrate_statuses = [{"status": "active"}] * 5
        migrating = self.kvm.migrate_instance(self.inst, "192.0.2.2")
        self.drive(migrating, seconds=kvm.MIGRATION_POLL * 2)
        connections = source.connections
        status = self.successResultOf(self.drive(self.kvm.get_migration_status(self.inst), seconds=0.1))
        self.assertEqual(status["status"], "active")
        self.assertEqual(source.connections, connections)
        self.successResultOf(self.drive(migrating))

    def test_finalize_without_migration(self) -> None:
        self.successResultOf(self.kvm.finalize_migration(self.inst, None, False))
        self.failureResultOf(self.kvm.finalize_migration(self.inst, None, True), hv.HypervisorError)

    def test_migrate_not_running(self) -> None:
        self.assertRaises(hv.HypervisorError, self.kvm.migration_info, self.inst)
        self.failureResultOf(self.kvm.migrate_instance(self.inst, "192.0.2.2"), hv.HypervisorError)


class HostFactsTests(SynchronousTestCase):
    """The host probes, against a made-up /proc and /sys."""

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="gnt-host", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.proc = os.path.join(self.root, "proc")
        os.makedirs(os.path.join(self.root, "sys", "devices", "system", "node", "node0"))
        os.makedirs(os.path.join(self.root, "sys", "devices", "system", "node", "node1"))
        os.makedirs(self.proc)

    def write(self, path: str, text: str | bytes) -> None:
        full = os.path.join(self.proc, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as handle:
            handle.write(text.encode() if isinstance(text, str) else text)

    def test_meminfo_and_topology(self) -> None:
        from ganeti.backend.hypervisor.kvm_process import HostFacts
        self.write("meminfo", "MemTotal:       16384000 kB\nMemFree:  100 kB\nHugePages_Total:       0\n")
        self.write("cpuinfo", "processor\t: 0\nphysical id\t: 0\n\nprocessor\t: 1\nphysical id\t: 1\n")
        facts = HostFacts(proc=self.proc, sys=os.path.join(self.root, "sys"),
                          kvm_device=os.path.join(self.root, "no-kvm"))
        self.assertEqual(facts.meminfo(), {"MemTotal": 16384000, "MemFree": 100, "HugePages_Total": 0})
        cpus, nodes, sockets = facts.cpu_topology()
        self.assertEqual((cpus, nodes, sockets), (os.cpu_count(), 2, 2))
        self.assertFalse(facts.kvm_usable())

    def test_pid_alive(self) -> None:
        from ganeti.backend.hypervisor.kvm_process import pid_alive
        self.write("41/stat", "41 (qemu-system-x86) S 1 41 41 0")
        self.write("41/cmdline", b"qemu\0-qmp\0unix:/run/x.qmp,server=on\0")
        self.write("42/stat", "42 (qemu) Z 1 42 42 0")
        self.write("42/cmdline", b"")
        self.assertTrue(pid_alive(41, "/run/x.qmp", proc=self.proc))
        self.assertFalse(pid_alive(41, "/run/y.qmp", proc=self.proc))
        self.assertFalse(pid_alive(42, "", proc=self.proc))
        self.assertFalse(pid_alive(43, "", proc=self.proc))
        self.assertFalse(pid_alive(0, "", proc=self.proc))
