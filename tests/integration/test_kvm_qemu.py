"""A real qemu under TCG: start, live-migrate between two node roots, stop;
and the real process spawner on a plain program.

The instance has no disks and no NICs, so the guest is only SeaBIOS looking
for something to boot: enough for QMP, migration and ACPI (which it
ignores, so the stop goes on to quit).  The power-off test boots a one-sector
guest that powers the machine off through the PIIX4 ACPI registers, the way
a guest OS does at the end of its shutdown.  Skipped without qemu-system-x86_64
(scripts/install-qemu installs it where it can).
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.backend.hypervisor import STATE_RUNNING, STATE_SHUTDOWN, HypervisorError, kvm
from ganeti.backend.hypervisor.kvm import KVMHypervisor
from ganeti.backend.hypervisor.kvm_process import QemuProcesses
from ganeti.backend.hypervisor.qmp import connect_qmp
from ganeti.daemons import free_port
from ganeti.objects import Instance
from ganeti.paths import Paths
from ganeti.testing import procs
from ganeti.testing.daemons import make_root, remove_root

QEMU = shutil.which("qemu-system-x86_64")
NAME = "kvm1.example.com"



@pytest.fixture
def qemu_installed() -> None:
    """Without qemu a test that needs it fails and says so (never skipped)."""
    if QEMU is None:
        pytest.fail("qemu-system-x86_64 is not installed (scripts/install-qemu installs it)")


needs_qemu = pytest.mark.usefixtures("qemu_installed")


def zombie_children() -> list[int]:
    """Our children that ended and were not reaped."""
    me, found = str(os.getpid()).encode(), []
    for entry in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % entry, "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[-1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == b"Z" and fields[1] == me:
            found.append(int(entry))
    return found


def qemu_pids(roots) -> list[int]:
    """The pids of the processes whose command line names one of C{roots}."""
    return [pid for pid, argv in procs.processes(live=True)
            if any(paths.root + "/" in "\0".join(argv) for paths in roots)]


async def status(hypervisor: KVMHypervisor) -> str:
    protocol = await connect_qmp(reactor, hypervisor.files(NAME).qmp_socket)
    try:
        answer = await protocol.query_status()
    finally:
        protocol.transport.loseConnection()
        await protocol.closed
    return answer["status"]


def test_processes_detached_and_reaped(tmp_path):
    """A spawned program has its own session and its output in the log;
    once killed it is reaped, not left a zombie that looks alive."""
    processes = QemuProcesses(reactor)
    log = str(tmp_path / "kvm" / "x.log")
    pid = processes.spawn(["/bin/sh", "-c", "echo hello from the child; exec sleep 60", "marker-x"], log)
    try:
        assert os.getsid(pid) == pid != os.getsid(0)
        assert processes.alive(pid, "marker-x")
        assert not QemuProcesses(reactor).alive(pid + 10**7, "marker-x")
        processes.kill(pid)
        deadline = time.monotonic() + 10
        while processes.alive(pid, "marker-x") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not processes.alive(pid, "marker-x")
        assert pid not in zombie_children()
        with open(log) as handle:
            text = handle.read()
        assert "starting: /bin/sh" in text and "hello from the child" in text
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_missing_program(tmp_path):
    with pytest.raises(HypervisorError, match="Cannot run /nonexistent/qemu"):
        QemuProcesses(reactor).spawn(["/nonexistent/qemu"], str(tmp_path / "x.log"))


@needs_qemu
@pytest_twisted.ensureDeferred
async def test_start_migrate_stop():
    roots = [make_root("gntkvm"), make_root("gntkvm")]
    try:
        source, target = (KVMHypervisor(paths, reactor, kvm_usable=False) for paths in roots)
        port = free_port("127.0.0.1")
        inst = Instance(
            name=NAME, uuid="0d4b1d7c-2f5e-4a36-9b1e-5c8f0a6e7d21", hypervisor="kvm",
            beparams={"maxmem": 64, "vcpus": 1},
            hvparams={"kvm_path": QEMU, "vnc_bind_address": "", "serial_console": True, "acpi": True,
                      "migration_port": port, "migration_bandwidth": 1000, "migration_downtime": 300},
        )

        await source.start_instance(inst, [], False)
        assert source.list_instances() == [NAME]
        assert await status(source) == "running"
        argv = source.migration_info(inst)["argv"]
        assert "pc,accel=tcg" in argv and "-incoming" not in argv
        assert os.path.exists(source.files(NAME).log)

        info = source.migration_info(inst)
        await target.accept_instance(inst, info, "127.0.0.1")
        assert target.list_instances() == []
        await source.migrate_instance(inst, "127.0.0.1")
        migration = await source.get_migration_status(inst)
        assert migration["status"] == "completed", migration
        await target.finalize_migration(inst, info, True)
        await source.finalize_migration(inst, None, True)

        assert source.list_instances() == []
        assert target.list_instances() == [NAME]
        assert await status(target) == "running"
        assert len(qemu_pids(roots[:1])) == 0
        assert len(qemu_pids(roots[1:])) == 1

        # noded restarted: a new object finds the instance from its files
        target = KVMHypervisor(roots[1], reactor, kvm_usable=False)
        assert target.list_instances() == [NAME]
        info = await target.get_instance_info(NAME)
        assert info["memory"] == 64 and info["state"] == STATE_RUNNING

        # the guest (SeaBIOS) ignores ACPI, so this is powerdown, wait, quit
        await target.stop_instance(inst, False, 2)
        assert target.list_instances() == []
        assert not os.path.exists(target.files(NAME).conf)
        assert qemu_pids(roots) == []
        assert zombie_children() == []
    finally:
        for pid in qemu_pids(roots):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for paths in roots:
            remove_root(paths)


#: a boot sector: write SLP_EN with SLP_TYP 0 (S5, soft off) to PM1a_CNT at
#: 0x604 (where SeaBIOS puts the PIIX4 PM registers on the pc machine), halt
_POWEROFF_CODE = bytes([0xBA, 0x04, 0x06,   # mov dx, 0x604
                        0xB8, 0x00, 0x20,   # mov ax, 0x2000
                        0xEF,               # out dx, ax
                        0xF4,               # hlt
                        0xEB, 0xFD])        # jmp back to hlt


def poweroff_disk(path) -> str:
    """A 1 MiB raw disk (SeaBIOS will not boot a smaller one) that powers off."""
    with open(path, "wb") as handle:
        handle.write(_POWEROFF_CODE + bytes(510 - len(_POWEROFF_CODE)) + b"\x55\xaa")
        handle.truncate(1024 * 1024)
    return str(path)


async def wait_for_state(hypervisor: KVMHypervisor, state: int, seconds: float = 60) -> dict:
    from twisted.internet.task import deferLater

    deadline = time.monotonic() + seconds
    while True:
        info = await hypervisor.get_instance_info(NAME)
        if info["state"] == state or time.monotonic() > deadline:
            return info
        await deferLater(reactor, 0.2, lambda: None)


@needs_qemu
@pytest_twisted.ensureDeferred
async def test_guest_powers_itself_off(tmp_path):
    """qemu (-no-shutdown) stays with a powered-off guest: reported as
    shutdown, replaced by a start, quit at once by a stop."""
    root = make_root("gntkvm")
    try:
        hypervisor = KVMHypervisor(root, reactor, kvm_usable=False)
        inst = Instance(name=NAME, uuid="5e0c7c1a-8a47-4f57-9d0b-3a0f2b9c6e11", hypervisor="kvm",
                        beparams={"maxmem": 64, "vcpus": 1},
                        hvparams={"kvm_path": QEMU, "vnc_bind_address": "", "serial_console": True,
                                  "acpi": True})
        disk = poweroff_disk(tmp_path / "poweroff.img")
        await hypervisor.start_instance(inst, [disk], False)
        first = qemu_pids([root])
        assert len(first) == 1
        assert (await wait_for_state(hypervisor, STATE_SHUTDOWN))["state"] == STATE_SHUTDOWN
        assert await status(hypervisor) == "shutdown"
        assert hypervisor.list_instances() == [NAME]
        # noded restarted: nothing cached, qemu is asked again
        again = KVMHypervisor(root, reactor, kvm_usable=False)
        assert (await again.get_all_instances_info())[NAME]["state"] == STATE_SHUTDOWN

        await hypervisor.start_instance(inst, [disk], False)
        second = qemu_pids([root])
        assert len(second) == 1 and second != first
        assert (await wait_for_state(hypervisor, STATE_SHUTDOWN))["state"] == STATE_SHUTDOWN

        began = time.monotonic()
        await hypervisor.stop_instance(inst, False, 60)
        assert time.monotonic() - began < kvm.QUIT_GRACE
        assert hypervisor.list_instances() == []
        assert qemu_pids([root]) == []
        assert zombie_children() == []
    finally:
        for pid in qemu_pids([root]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        remove_root(root)


@pytest_twisted.ensureDeferred
async def test_silent_monitor_is_dropped(tmp_path, monkeypatch):
    """A monitor socket that never greets: the connection attempt times out
    and is closed, so that it does not hold qemu's only monitor slot."""
    from twisted.internet import defer
    from twisted.internet.protocol import Factory, Protocol

    monkeypatch.setattr(kvm, "CONNECT_TIMEOUT", 0.3)
    lost: defer.Deferred[None] = defer.Deferred()

    class Silent(Protocol):
        def connectionLost(self, reason=None):
            lost.callback(None)

    path = str(tmp_path / "silent.qmp")
    port = reactor.listenUNIX(path, Factory.forProtocol(Silent))
    try:
        hypervisor = KVMHypervisor(Paths(str(tmp_path / "root")), reactor, kvm_usable=False)
        with pytest.raises(defer.TimeoutError):
            await hypervisor._connect_unix(path)
        await lost
    finally:
        await port.stopListening()


@needs_qemu
@pytest_twisted.ensureDeferred
async def test_balloon_reaches_qemu():
    """runtime memory: qemu has a balloon device, takes the target in bytes,
    and the instance's info reports the new memory."""
    root = make_root("gntkvm")
    try:
        hypervisor = KVMHypervisor(root, reactor, kvm_usable=False)
        inst = Instance(name=NAME, uuid="7a0c7c1a-8a47-4f57-9d0b-3a0f2b9c6e12", hypervisor="kvm",
                        beparams={"maxmem": 64, "vcpus": 1},
                        hvparams={"kvm_path": QEMU, "vnc_bind_address": "", "serial_console": True})
        await hypervisor.start_instance(inst, [], False)
        await hypervisor.balloon_instance_memory(inst, 48)
        assert (await hypervisor.get_instance_info(NAME))["memory"] == 48
        protocol = await connect_qmp(reactor, hypervisor.files(NAME).qmp_socket)
        try:
            balloon = await protocol.execute("query-balloon")  # without the device: an error
        finally:
            protocol.transport.loseConnection()
            await protocol.closed
        assert balloon["actual"] == 64 * 1024 * 1024  # SeaBIOS has no balloon driver to give memory back
        await hypervisor.stop_instance(inst, True, 10)
        assert hypervisor.list_instances() == []
    finally:
        for pid in qemu_pids([root]):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        remove_root(root)
