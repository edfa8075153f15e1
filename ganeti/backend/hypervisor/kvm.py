"""The KVM hypervisor: one qemu process per instance, driven through QMP.

Runtime files, under the node's C{run_dir}:
  - C{kvm-hypervisor/conf/NAME}: the runtime record (JSON): pid, argv, the
    pieces the command line was built from, state, start time;
  - C{kvm-hypervisor/pid/NAME}: qemu's own pid file;
  - C{kvm-hypervisor/ctrl/NAME.qmp}, C{NAME.serial}: the QMP monitor and
    serial console sockets (qemu listens on both).
qemu's output goes to C{<log_dir>/kvm/NAME.log}.

qemu runs detached from noded (see L{kvm_process.QemuProcesses}), so the
state of the node is always read back from those files plus a check that
the recorded pid is still that instance's qemu: an object made after a
noded restart sees the instances its predecessor started, and a record
whose process is gone is removed when found.

A record's C{state} is C{running}, C{paused} (started with
C{startup_paused}) or C{incoming} (a migration target not yet finalized,
not listed as running).  A migration source adds C{migration} (target and
port) to its record, which is how its finalize knows its role.

A guest that powers itself off (ACPI shutdown from inside, a firmware
halt) does not end qemu, which runs with C{-no-shutdown}: qemu stays, its
QMP status C{shutdown}, holding the instance's disks and memory.  Such an
instance is still listed (L{KVMHypervisor.list_instances}: its qemu
exists), and its info says L{hv.STATE_SHUTDOWN}; the master shows it as
C{USER_down} when the cluster's C{enabled_user_shutdown} and the
instance's C{user_shutdown} hvparam are on, C{ERROR_down} otherwise (as
Ganeti does).  The info methods ask each qemu C{query-status}, all at once,
each within L{INFO_TIMEOUT} seconds; a monitor that does not answer in
time counts as running.  Nothing is cached, so a new noded sees the same.
Stopping such an instance quits qemu at once; starting it quits the
stopped qemu and starts a fresh one with the instance's new parameters.

Waits (start-up, shutdown, migration) poll on the reactor's clock.  The
methods that talk to qemu return Deferreds; the others are synchronous.
Concurrent operations on one instance share one QMP connection, since qemu
serves one monitor client at a time.
"""

from __future__ import annotations

import os
import uuid as uuid_module
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from twisted.internet import defer
from twisted.internet.defer import Deferred, ensureDeferred, fail, succeed
from twisted.internet.endpoints import UNIXClientEndpoint, connectProtocol
from twisted.internet.interfaces import ITCPTransport
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from ganeti import serializer
from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm_accel, kvm_hotplug, kvm_ifup, kvm_pci
from ganeti.backend.hypervisor import kvm_cmdline as cmdline
from ganeti.backend.hypervisor.kvm_process import HostFacts, IQemuProcesses, QemuProcesses, log_tail
from ganeti.backend.hypervisor.qmp import QMPDisconnected, QMPProtocol
from ganeti.paths import Paths

RUNNING = "running"
PAUSED = "paused"
INCOMING = "incoming"

DEFAULT_MIGRATION_PORT = 8102
#: seconds a shutdown waits for the guest when the caller gives no timeout
DEFAULT_SHUTDOWN_TIMEOUT = 120
#: seconds qemu has to come up (its QMP monitor answering) after the spawn
START_TIMEOUT = 30.0
START_POLL = 0.05
#: seconds to connect to a monitor, and for qemu to answer one command
CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0
#: seconds an info call waits for one qemu's query-status
INFO_TIMEOUT = 2.0
#: interval of query-status while the guest powers down
SHUTDOWN_POLL = 0.5
#: seconds qemu has to exit after quit, then after SIGKILL
QUIT_GRACE = 5.0
KILL_GRACE = 5.0
EXIT_POLL = 0.1
#: interval of query-migrate while a migration runs
MIGRATION_POLL = 0.2
#: seconds the target's qemu has to leave "inmigrate" once the source says the migration completed (the source
#: reports "completed" when it sent the last state; the target loads it after)
ARRIVAL_TIMEOUT = 30.0

#: the qemu run state of a guest that powered itself off (qemu runs with -no-shutdown)
_POWERED_OFF = "shutdown"
#: qemu run states after which the guest is stopped but qemu still lives
_GUEST_DOWN = ("shutdown", "guest-panicked")
#: run states of a source whose migration stopped it
_MIGRATION_STOPPED = ("postmigrate", "finish-migrate", "paused")
_SUN_PATH_MAX = 107


from ganeti.backend.hypervisor.kvm_runtime import (
    InstanceFiles,
    MonitorUnreachable,
    SharedMonitor,
    check_name,
    console_info,
    disks_of,
    tcp_port,
)


@implementer(hv.IHypervisor)
class KVMHypervisor:
    """The KVM hypervisor of the node rooted at C{paths.root}.

    @param paths: the node's file layout.
    @param reactor: provides the clock (C{callLater}, C{seconds}) and, by
        default, connects to the monitors and runs helper commands.
    @param processes: an L{IQemuProcesses} (default: real processes).
    @param connect: C{connect(socket_path)} -> Deferred of a negotiated
        L{QMPProtocol} (default: over the Unix socket).
    @param host: the node's L{HostFacts}.
    @param kvm_usable: overrides the node's acceleration probe
        (L{kvm_accel}): C{True} gives new instances KVM, C{False} TCG
        (software emulation); the hvparam C{kvm_flag} still forces either.
    @param accel_probe: the node's L{kvm_accel.AccelProbe} (default: a
        real probe, cached under C{state_dir}).
    """

    name = hv.HT_KVM
    log = Logger()

    def __init__(self, paths: Paths, reactor: Any, *, processes: IQemuProcesses | None = None,
                 connect: Any = None, host: HostFacts | None = None,
                 kvm_usable: bool | None = None, accel_probe: kvm_accel.AccelProbe | None = None) -> None:
        self.paths = paths
        self._reactor = reactor
        self._processes = processes if processes is not None else QemuProcesses(reactor)
        self._connect = connect if connect is not None else self._connect_unix
        self._host = host if host is not None else HostFacts()
        self._kvm_usable = kvm_usable
        self.state_dir = os.path.join(paths.run_dir, "kvm-hypervisor")
        self._monitors: dict[str, SharedMonitor] = {}
        self.accel_probe = accel_probe if accel_probe is not None else kvm_accel.AccelProbe(self.state_dir, reactor)

    # --- files ---------------------------------------------------------------
    def files(self, name: str) -> InstanceFiles:
        """The runtime files of instance C{name} on this node."""
        check_name(name)
        ctrl = os.path.join(self.state_dir, "ctrl")
        return InstanceFiles(
            conf=os.path.join(self.state_dir, "conf", name),
            pidfile=os.path.join(self.state_dir, "pid", name),
            qmp_socket=os.path.join(ctrl, name + ".qmp"),
            serial_socket=os.path.join(ctrl, name + ".serial"),
            events_socket=os.path.join(ctrl, name + ".kvmd"),
            log=os.path.join(self.paths.log_dir, "kvm", name + ".log"),
        )

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            record = serializer.read_json(self.files(name).conf)
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise hv.HypervisorError("Corrupt runtime file of instance %s: %s" % (name, e)) from None
        return record if isinstance(record, dict) else None

    def _write(self, name: str, record: dict[str, Any]) -> None:
        path = self.files(name).conf
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        serializer.write_json(path, record, mode=0o600, durable=False)

    def _cleanup(self, name: str) -> None:
        """Forget instance C{name}: every runtime file but the log."""
        files = self.files(name)
        for path in (files.conf, files.pidfile, files.qmp_socket, files.serial_socket, files.events_socket):
            if path is None:
                continue
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _alive(self, name: str, record: dict[str, Any]) -> bool:
        pid = record.get("pid")
        return isinstance(pid, int) and self._processes.alive(pid, self.files(name).marker)

    def _live(self, name: str) -> dict[str, Any] | None:
        """The record of C{name} if its qemu runs; a dead one is removed."""
        record = self._read(name)
        if record is None:
            return None
        if self._alive(name, record):
            return record
        self.log.info("qemu of instance {name} (pid {pid}) is gone; removing its runtime files",
                      name=name, pid=record.get("pid"))
        self._cleanup(name)
        return None

    def _all_live(self) -> dict[str, dict[str, Any]]:
        try:
            names = sorted(os.listdir(os.path.join(self.state_dir, "conf")))
        except FileNotFoundError:
            return {}
        result = {}
        for name in names:
            if name.startswith("."):
                continue
            try:
                record = self._live(name)
            except hv.HypervisorError as e:
                self.log.warn("skipping instance {name}: {e}", name=name, e=e)
                continue
            if record is not None:
                result[name] = record
        return result

    def _running(self, name: str, doing: str) -> dict[str, Any]:
        record = self._live(name)
        if record is None or record.get("state") == INCOMING:
            raise hv.HypervisorError("Failed to %s instance %s: not running" % (doing, name))
        return record

    # --- QMP -----------------------------------------------------------------
    def _connect_unix(self, path: str) -> Deferred[QMPProtocol]:
        """Connect and negotiate within L{CONNECT_TIMEOUT}; a connection
        that does not get there is dropped (it would hold the monitor)."""
        protocol = QMPProtocol()
        d = connectProtocol(UNIXClientEndpoint(self._reactor, path, timeout=CONNECT_TIMEOUT), protocol)
        d.addCallback(lambda _: protocol.ready)
        d.addCallback(lambda _: protocol)
        d.addTimeout(CONNECT_TIMEOUT, self._reactor)

        def failed(failure: Failure) -> Failure:
            if protocol.transport is not None:
                cast(ITCPTransport, protocol.transport).abortConnection()
            return failure
        return cast("Deferred[QMPProtocol]", d.addErrback(failed))

    @asynccontextmanager
    async def _qmp(self, name: str) -> AsyncIterator[QMPProtocol]:
        """The (shared) monitor connection of instance C{name}."""
        path = self.files(name).qmp_socket
        monitor = self._monitors.get(path)
        if monitor is None or not monitor.usable:
            monitor = self._monitors[path] = SharedMonitor(self._connect(path))
        monitor.users += 1
        try:
            try:
                protocol = await monitor.wait()
            except Exception as e:
                raise MonitorUnreachable("Cannot reach the QMP monitor of instance %s at %s: %s"
                                         % (name, path, e)) from None
            yield protocol
        finally:
            monitor.users -= 1
            if monitor.users == 0:
                if self._monitors.get(path) is monitor:
                    del self._monitors[path]
                monitor.close()

    async def _execute(self, protocol: QMPProtocol, command: str, arguments: dict[str, Any] | None = None,
                       timeout: float = COMMAND_TIMEOUT) -> Any:
        d = protocol.execute(command, arguments)
        d.addTimeout(timeout, self._reactor)
        try:
            return await d
        except defer.TimeoutError:
            raise hv.HypervisorError("qemu did not answer %s within %s seconds" % (command, timeout)) from None

    async def _status(self, protocol: QMPProtocol) -> str:
        answer = await self._execute(protocol, "query-status")
        return str(answer.get("status", "")) if isinstance(answer, dict) else ""

    async def _sleep(self, seconds: float) -> None:
        await deferLater(self._reactor, seconds, lambda: None)

    # --- starting qemu -------------------------------------------------------
    def _binary(self, hvparams: dict[str, Any]) -> str:
        configured = hvparams.get("kvm_path") or ""
        if configured:
            if not isinstance(configured, str) or not os.path.isabs(configured):
                raise hv.HypervisorError("hvparam kvm_path must be an absolute path, not %r" % (configured,))
            if os.access(configured, os.X_OK) and os.path.isfile(configured):
                return configured
            raise hv.HypervisorError(
                "The qemu binary %s (hvparam kvm_path) is missing or not executable; install QEMU "
                "(Debian/Ubuntu: apt-get install qemu-system-x86) or set kvm_path" % configured)
        for directory in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin", "/usr/local/bin"]:
            candidate = os.path.join(directory or ".", cmdline.DEFAULT_BINARY)
            if os.access(candidate, os.X_OK) and os.path.isfile(candidate):
                return candidate
        raise hv.HypervisorError(
            "%s is not installed; install QEMU (Debian/Ubuntu: apt-get install qemu-system-x86) "
            "or set hvparam kvm_path" % cmdline.DEFAULT_BINARY)

    async def node_accel(self, binary: str) -> str:
        """C{"kvm"} if KVM acceleration works on this node with C{binary}
        (the constructor's C{kvm_usable}, else a usable C{/dev/kvm} and the
        probe's answer), else C{"tcg"}."""
        if self._kvm_usable is not None:
            return kvm_accel.ACCEL_KVM if self._kvm_usable else kvm_accel.ACCEL_TCG
        if not self._host.kvm_usable():
            return kvm_accel.ACCEL_TCG
        return await self.accel_probe.accel(binary)

    async def _choose_accel(self, hvparams: dict[str, Any]) -> str:
        """The accelerator of a new qemu: hvparam C{kvm_flag}, else the node's."""
        flag = hvparams.get(kvm_accel.KVM_FLAG)
        probed = await self.node_accel(self._binary(hvparams)) if kvm_accel.needs_probe(flag) else None
        return kvm_accel.decide(flag, probed)

    def _tap(self, uuid: str, index: int) -> str:
        return kvm_ifup.tap_name(self.paths.root, uuid, index)

    def _nics(self, instance: Any, uuid: str) -> list[dict[str, Any]]:
        return [kvm_ifup.nic_entry(instance.name, index, nic, self._tap(uuid, index))
                for index, nic in enumerate(getattr(instance, "nics", None) or [])]

    def _new_record(self, instance: Any, disks: list[list[str]], paused: bool, accel: str) -> dict[str, Any]:
        hvparams = dict(getattr(instance, "hvparams", None) or {})
        uuid = instance.uuid or str(uuid_module.uuid5(uuid_module.NAMESPACE_DNS, instance.name))
        vnc_port = None
        if hvparams.get("vnc_bind_address"):
            vnc_port = getattr(instance, "network_port", None)
            if vnc_port is None:
                raise hv.HypervisorError("Instance %s has a VNC console but no network port" % instance.name)
        return {
            "name": instance.name, "uuid": uuid, "memory": hv.instance_memory(instance),
            "vcpus": hv.instance_vcpus(instance), "hvparams": hvparams, "disks": disks,
            "nics": self._nics(instance, uuid), "vnc_port": vnc_port,
            "accel": accel, "state": PAUSED if paused else RUNNING,
        }

    def _argv(self, name: str, record: dict[str, Any], incoming: str | None) -> list[str]:
        files = self.files(name)
        for path in (files.qmp_socket, files.serial_socket, files.events_socket or ""):
            if len(path.encode()) > _SUN_PATH_MAX:
                raise hv.HypervisorError("Socket path %s is longer than a Unix socket allows (%d bytes); "
                                         "use a shorter node root or instance name" % (path, _SUN_PATH_MAX))
        hvparams = record["hvparams"]
        argv = cmdline.build_command(
            name, record["uuid"], record["memory"], record["vcpus"], hvparams,
            *kvm_pci.command_devices(record),
            files.runtime, vnc_port=record["vnc_port"], incoming=incoming, accel=record["accel"],
            binary=self._binary(hvparams))
        if incoming is None and record["state"] == PAUSED:
            argv.append("-S")
        return argv

    async def _launch(self, name: str, record: dict[str, Any], incoming: str | None, tags: Any = ()) -> None:
        """Spawn qemu for C{record}, wait for its monitor, set it up; on
        any failure kill it and remove its files."""
        argv = self._argv(name, record, incoming)
        files = self.files(name)
        for directory in (os.path.dirname(files.conf), os.path.dirname(files.pidfile),
                          os.path.dirname(files.qmp_socket)):
            os.makedirs(directory, mode=0o750, exist_ok=True)
        self._cleanup(name)
        pid = self._processes.spawn(argv, files.log)
        record.update(pid=pid, argv=argv, started=self._reactor.seconds())
        self._write(name, record)
        try:
            status = await self._wait_for_monitor(name, record)
            expected = "inmigrate" if incoming is not None else None
            if expected is not None and status != expected:
                raise hv.HypervisorError("qemu of instance %s is %r, not waiting for the migration"
                                         % (name, status))
            await self._set_vnc_password(name, record)
            await self.nics_up(name, tags, [(i, nic) for i, nic in enumerate(record["nics"])
                                            if incoming is None or nic["mode"] != "routed"])
        except BaseException:
            await self._destroy(name, record)
            raise

    async def _wait_for_monitor(self, name: str, record: dict[str, Any]) -> str:
        deadline = self._reactor.seconds() + START_TIMEOUT
        while True:
            if not self._alive(name, record):
                tail = log_tail(self.files(name).log)
                raise hv.HypervisorError("qemu of instance %s exited while starting%s"
                                         % (name, (": " + tail) if tail else ""))
            try:
                async with self._qmp(name) as protocol:
                    return await self._status(protocol)
            except (MonitorUnreachable, QMPDisconnected) as e:
                if self._reactor.seconds() >= deadline:
                    raise hv.HypervisorError("qemu of instance %s did not open its monitor within %s seconds: %s"
                                             % (name, START_TIMEOUT, e)) from None
            await self._sleep(START_POLL)

    async def _set_vnc_password(self, name: str, record: dict[str, Any]) -> None:
        password_file = record["hvparams"].get("vnc_password_file")
        if record.get("vnc_port") is None or not password_file:
            return
        try:
            with open(password_file) as handle:
                password = handle.readline().strip()
        except OSError as e:
            raise hv.HypervisorError("Cannot read the VNC password file %s: %s" % (password_file, e)) from None
        async with self._qmp(name) as protocol:
            await self._execute(protocol, "set_password", {"protocol": "vnc", "password": password})

    async def nics_up(self, name: str, tags: Any, nics: list[tuple[int, dict[str, Any]]]) -> None:
        """Connect the taps of C{nics} (C{(index, record entry)}), L{kvm_ifup}."""
        ifup = kvm_ifup.Ifup(self._processes.run, self.paths.conf_dir)
        for index, nic in nics:
            await ifup.up(kvm_ifup.environment(name, tags, index, nic))

    async def nics_down(self, name: str, nics: list[dict[str, Any]]) -> None:
        """Remove what the taps of C{nics} leave behind (L{kvm_ifup.Ifup.down}); failures are logged."""
        ifup = kvm_ifup.Ifup(self._processes.run, self.paths.conf_dir)
        for nic in nics:
            try:
                await ifup.down(nic)
            except Exception as e:
                self.log.warn("cleaning up tap {tap} of instance {name} failed: {e}", tap=nic.get("tap"),
                              name=name, e=e)

    # --- stopping qemu -------------------------------------------------------
    async def _wait_gone(self, name: str, record: dict[str, Any], seconds: float) -> bool:
        deadline = self._reactor.seconds() + seconds
        while self._alive(name, record):
            if self._reactor.seconds() >= deadline:
                return False
            await self._sleep(EXIT_POLL)
        return True

    async def _destroy(self, name: str, record: dict[str, Any]) -> None:
        """End qemu: quit through QMP, SIGKILL after L{QUIT_GRACE}; then
        remove the runtime files."""
        if self._alive(name, record):
            try:
                async with self._qmp(name) as protocol:
                    d = protocol.quit()
                    d.addTimeout(QUIT_GRACE, self._reactor)
                    await d
            except Exception as e:
                self.log.info("quit of instance {name} failed: {e}", name=name, e=e)
            if not await self._wait_gone(name, record, QUIT_GRACE):
                self.log.warn("qemu of instance {name} (pid {pid}) did not quit; killing it",
                              name=name, pid=record["pid"])
                self._processes.kill(record["pid"])
                if not await self._wait_gone(name, record, KILL_GRACE):
                    raise hv.HypervisorError("qemu of instance %s (pid %s) survived SIGKILL"
                                             % (name, record["pid"]))
        await self.nics_down(name, record.get("nics") or [])
        self._cleanup(name)

    async def _power_down(self, name: str, record: dict[str, Any], timeout: float) -> None:
        """Press the ACPI power button and wait up to C{timeout} seconds for
        the guest to stop; failures only mean we go on harder."""
        try:
            async with self._qmp(name) as protocol:
                if await self._status(protocol) != "running":
                    return              # paused or already down: ACPI cannot help
                await self._execute(protocol, "system_powerdown")
                deadline = self._reactor.seconds() + timeout
                while self._reactor.seconds() < deadline:
                    await self._sleep(min(SHUTDOWN_POLL, max(0.0, deadline - self._reactor.seconds())))
                    if not self._alive(name, record) or await self._status(protocol) in _GUEST_DOWN:
                        return
                self.log.info("instance {name} did not power down within {timeout} s", name=name,
                              timeout=timeout)
        except (hv.HypervisorError, QMPDisconnected) as e:
            self.log.info("powerdown of instance {name} failed: {e}", name=name, e=e)

    async def _stop(self, instance: Any, force: bool, timeout: int | None) -> None:
        name = check_name(instance.name)
        record = self._live(name)
        if record is None:
            if force:
                return
            raise hv.HypervisorError("Failed to stop instance %s: not running" % name)
        timeout = DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else max(0, timeout)
        acpi = record["hvparams"].get("acpi", True) is not False
        if acpi and timeout > 0 and record.get("state") != INCOMING:
            await self._power_down(name, record, timeout)
        await self._destroy(name, record)

    # --- the interface: lifecycle --------------------------------------------
    def start_instance(self, instance: Any, block_devices: list[Any], startup_paused: bool) -> Deferred[None]:
        return ensureDeferred(self._start(instance, block_devices, startup_paused))

    async def _start(self, instance: Any, block_devices: list[Any], startup_paused: bool) -> None:
        name = check_name(instance.name)
        current = self._live(name)
        if current is not None and current.get("state") == INCOMING:
            raise hv.HypervisorError("Instance %s is being migrated here" % name)
        if current is not None:
            status = await self._status_of(name)
            if status != _POWERED_OFF:
                raise hv.HypervisorError("Instance %s is already running" % name)
            self.log.info("the guest of instance {name} powered itself off; ending its qemu (pid {pid}) "
                          "to start it afresh", name=name, pid=current.get("pid"))
            await self._destroy(name, current)
        disks = disks_of(block_devices)
        accel = await self._choose_accel(dict(getattr(instance, "hvparams", None) or {}))
        record = self._new_record(instance, disks, bool(startup_paused), accel)
        kvm_pci.assign(record)
        await self._launch(name, record, incoming=None, tags=getattr(instance, "tags", None))

    def stop_instance(self, instance: Any, force: bool = False, timeout: int | None = None) -> Deferred[None]:
        return ensureDeferred(self._stop(instance, force, timeout))

    def reboot_instance(self, instance: Any) -> Deferred[None]:
        return ensureDeferred(self._reboot(instance))

    async def _reboot(self, instance: Any) -> None:
        name = check_name(instance.name)
        record = self._running(name, "reboot")
        async with self._qmp(name) as protocol:
            status = await self._status(protocol)
            await self._execute(protocol, "system_reset")
            if status in _GUEST_DOWN and record.get("state") != PAUSED:
                await self._execute(protocol, "cont")

    def balloon_instance_memory(self, instance: Any, memory: int) -> Deferred[None]:
        """Ask the guest's balloon driver (QMP C{balloon}, in bytes) to leave it
        C{memory} MiB; the runtime file then records it as the instance's memory."""
        return ensureDeferred(self._balloon(instance, memory))

    async def _balloon(self, instance: Any, memory: int) -> None:
        name = check_name(instance.name)
        record = self._running(name, "balloon the memory of")
        async with self._qmp(name) as protocol:
            await self._execute(protocol, "balloon", {"value": int(memory) * 1024 * 1024})
        record["memory"] = int(memory)
        self._write(name, record)

    def hotplug_supported(self, instance: Any) -> None:
        """Refuse (L{hv.HypervisorError}) unless C{instance} runs here, so that
        devices can be hotplugged (L{kvm_hotplug})."""
        kvm_hotplug.check_supported(self, instance.name)

    def hotplug_device(self, instance: Any, action: str, dev_type: str, device: dict[str, Any],
                       path: str | None) -> Deferred[None]:
        """Hot-add, -remove or -modify a disk or NIC (L{kvm_hotplug.hotplug})."""
        return ensureDeferred(kvm_hotplug.hotplug(self, instance, action, dev_type, device, path))

    def list_instances(self) -> list[str]:
        """The instances whose qemu runs here, guest powered off or not
        (such a qemu still holds the instance's disks and memory)."""
        return sorted(n for n, r in self._all_live().items() if r.get("state") != INCOMING)

    async def _status_of(self, name: str) -> str:
        """qemu's run state of instance C{name}, C{""} if it cannot be asked."""
        try:
            async with self._qmp(name) as protocol:
                return await self._status(protocol)
        except (hv.HypervisorError, QMPDisconnected) as e:
            self.log.info("cannot ask qemu of instance {name} for its state: {e}", name=name, e=e)
            return ""

    def _guest_state(self, name: str) -> Deferred[int]:
        """L{hv.STATE_SHUTDOWN} if the guest of C{name} powered itself off,
        else L{hv.STATE_RUNNING} (also when qemu does not answer within
        L{INFO_TIMEOUT}: an unknown state is no reason to report it down)."""
        d = ensureDeferred(self._status_of(name))
        d.addTimeout(INFO_TIMEOUT, self._reactor)

        def timed_out(failure: Failure) -> str:
            failure.trap(defer.TimeoutError)
            self.log.info("qemu of instance {name} did not tell its state within {timeout} s",
                          name=name, timeout=INFO_TIMEOUT)
            return ""
        d.addErrback(timed_out)
        return d.addCallback(lambda status: hv.STATE_SHUTDOWN if status == _POWERED_OFF else hv.STATE_RUNNING)

    async def _info(self, name: str, record: dict[str, Any]) -> dict[str, Any]:
        state = await self._guest_state(name)
        started = float(record.get("started") or 0)
        return {
            "memory": int(record.get("memory") or 0),
            "vcpus": int(record.get("vcpus") or 0),
            "state": state,
            "time": max(0, int(self._reactor.seconds() - started)),
            "accel": str(record.get("accel") or ""),
        }

    def get_instance_info(self, name: str) -> Deferred[dict[str, Any] | None]:
        """C{{"memory", "vcpus", "state", "time"}} of instance C{name},
        C{None} if it does not run here; C{state} comes from qemu."""
        try:
            record = self._live(check_name(name))
        except hv.HypervisorError:
            return fail()
        if record is None or record.get("state") == INCOMING:
            return succeed(None)
        return ensureDeferred(self._info(name, record))

    def get_all_instances_info(self) -> Deferred[dict[str, dict[str, Any]]]:
        """The info of every instance here, their qemus asked all at once."""
        records = {n: r for n, r in self._all_live().items() if r.get("state") != INCOMING}
        names = list(records)
        d = defer.gatherResults([ensureDeferred(self._info(n, records[n])) for n in names], consumeErrors=True)
        return d.addCallback(lambda infos: dict(zip(names, infos)))

    def get_console_info(self, instance: Any) -> dict[str, Any]:
        name = check_name(instance.name)
        hvparams = getattr(instance, "hvparams", None) or {}
        record = self._read(name) or {}
        port = record.get("vnc_port") or getattr(instance, "network_port", None)
        return console_info(name, hvparams, port, self.files(name).serial_socket)

    # --- the interface: migration --------------------------------------------
    def _migration_port(self, instance: Any, record: dict[str, Any] | None = None) -> int:
        hvparams = dict((record or {}).get("hvparams") or {})
        hvparams.update(getattr(instance, "hvparams", None) or {})
        return tcp_port(hvparams.get("migration_port") or DEFAULT_MIGRATION_PORT, "hvparam migration_port")

    def migration_info(self, instance: Any) -> dict[str, Any]:
        """Source side: the pieces the target's command line is built from
        (memory, vcpus, hvparams, disks, NICs, VNC port, acceleration), the
        source's own command line (for the record) and whether it is paused."""
        name = check_name(instance.name)
        record = self._running(name, "migrate")
        info = {key: record.get(key) for key in ("uuid", "memory", "vcpus", "hvparams", "disks", "vnc_port", "accel")}
        info["nics"] = [{k: nic.get(k) for k in kvm_ifup.RECORD_KEYS} for nic in record.get("nics") or []]
        info["paused"] = record.get("state") == PAUSED
        info["argv"] = record.get("argv")
        return info

    def accept_instance(self, instance: Any, info: Any, target: str = "") -> Deferred[None]:
        return ensureDeferred(self._accept(instance, info, target))

    async def _accept(self, instance: Any, info: Any, target: str) -> None:
        name = check_name(instance.name)
        if self._live(name) is not None:
            raise hv.HypervisorError("Instance %s already exists on this node" % name)
        if not isinstance(info, dict) or not isinstance(info.get("hvparams"), dict):
            raise hv.HypervisorError("Bad migration info for instance %s: %.200r" % (name, info))
        accel = info.get("accel") or "kvm"
        if accel == "kvm" and await self.node_accel(self._binary(info["hvparams"])) != "kvm":
            raise hv.HypervisorError("Instance %s runs with KVM acceleration on its source, but this node "
                                     "has no working KVM acceleration (no usable /dev/kvm, or its probe failed)" % name)
        uuid = info.get("uuid") or instance.uuid or str(uuid_module.uuid5(uuid_module.NAMESPACE_DNS, name))
        port = self._migration_port(instance, info)
        address = target or "0.0.0.0"
        nics = []
        for index, nic in enumerate(info.get("nics") or []):
            params = {"mode": nic.get("mode") or "bridged", "link": nic.get("link") or "", "vlan": nic.get("vlan")}
            entry = kvm_ifup.nic_entry(name, index, dict(nic, nicparams=params), self._tap(uuid, index))
            nics.append(dict(entry, **{k: nic[k] for k in ("id", "pci") if nic.get(k) is not None}))  # L{kvm_pci}
        record = {
            "name": name, "uuid": uuid, "memory": info.get("memory") or hv.instance_memory(instance),
            "vcpus": info.get("vcpus") or hv.instance_vcpus(instance), "hvparams": dict(info["hvparams"]),
            "disks": [list(d) for d in info.get("disks") or []], "nics": nics, "vnc_port": info.get("vnc_port"),
            "accel": accel, "state": INCOMING, "source_paused": bool(info.get("paused")),
            "incoming": {"address": address, "port": port},
        }
        await self._launch(name, record, incoming=cmdline.incoming_tcp(address, port),
                           tags=getattr(instance, "tags", None))

    def migrate_instance(self, instance: Any, target: str, live: bool = True) -> Deferred[None]:
        """Source side: send C{instance} to C{target} over TCP and wait for
        the end of the transfer.  Not C{live}: the guest's CPUs stop first
        (the target resumes it at its finalize)."""
        return ensureDeferred(self._migrate(instance, target, live))

    async def _migrate(self, instance: Any, target: str, live: bool) -> None:
        name = check_name(instance.name)
        record = self._running(name, "migrate")
        if not target or not isinstance(target, str):
            raise hv.HypervisorError("Migration of instance %s needs the target's address" % name)
        port = self._migration_port(instance, record)
        hvparams = dict(record["hvparams"])
        hvparams.update(getattr(instance, "hvparams", None) or {})
        parameters = cmdline.migration_parameters(hvparams)
        uri = cmdline.incoming_tcp(target, port)
        record["migration"] = {"target": target, "port": port}
        self._write(name, record)
        async with self._qmp(name) as protocol:
            await self._execute(protocol, "migrate-set-parameters", parameters)
            if not live:
                await self._execute(protocol, "stop")
            await self._execute(protocol, "migrate", {"uri": uri})
            while True:
                answer = await self._execute(protocol, "query-migrate")
                status = answer.get("status") if isinstance(answer, dict) else None
                if status == "completed":
                    return
                if status in ("failed", "cancelled"):
                    why = answer.get("error-desc") or "no reason given"
                    raise hv.HypervisorError("Migration of instance %s to %s %s: %s" % (name, uri, status, why))
                await self._sleep(MIGRATION_POLL)

    def get_migration_status(self, instance: Any) -> Deferred[dict[str, Any]]:
        """Source side: C{{"status", "transferred_ram", "total_ram"}} from
        qemu's query-migrate (RAM in bytes), once completed also qemu's own
        C{downtime_ms}, C{total_time_ms} and C{setup_time_ms};
        C{{"status": "none"}} if no migration is known here."""
        return ensureDeferred(self._migration_status(instance))

    async def _migration_status(self, instance: Any) -> dict[str, Any]:
        name = check_name(instance.name)
        record = self._live(name)
        if record is None or record.get("state") == INCOMING or "migration" not in record:
            return {"status": "none"}
        async with self._qmp(name) as protocol:
            answer = await self._execute(protocol, "query-migrate")
        answer = answer if isinstance(answer, dict) else {}
        result: dict[str, Any] = {"status": answer.get("status") or "none"}
        ram = answer.get("ram")
        if isinstance(ram, dict):
            result["transferred_ram"] = ram.get("transferred")
            result["total_ram"] = ram.get("total")
        for key, ours in (("downtime", "downtime_ms"), ("total-time", "total_time_ms"),
                          ("setup-time", "setup_time_ms")):
            if isinstance(answer.get(key), int):
                result[ours] = answer[key]
        if answer.get("error-desc"):
            result["error"] = answer["error-desc"]
        return result

    def finalize_migration(self, instance: Any, info: Any, success: bool) -> Deferred[None]:
        return ensureDeferred(self._finalize(instance, info, success))

    async def _finalize(self, instance: Any, info: Any, success: bool) -> None:
        name = check_name(instance.name)
        record = self._read(name)
        if record is not None and record.get("state") == INCOMING:
            await self._finalize_target(name, record, success, getattr(instance, "tags", None))
        elif record is not None and "migration" in record:
            await self._finalize_source(name, record, success)
        elif success:
            raise hv.HypervisorError("No migration of instance %s to finalize here" % name)

    async def _finalize_target(self, name: str, record: dict[str, Any], success: bool, tags: Any) -> None:
        if not success:
            await self._destroy(name, record)
            return
        if not self._alive(name, record):
            self._cleanup(name)
            raise hv.HypervisorError("qemu of instance %s died on the target during the migration" % name)
        paused = bool(record.get("source_paused"))
        async with self._qmp(name) as protocol:
            deadline = self._reactor.seconds() + ARRIVAL_TIMEOUT
            while await self._status(protocol) == "inmigrate":
                if self._reactor.seconds() >= deadline:
                    raise hv.HypervisorError("Instance %s has not arrived here after %d s (qemu is still inmigrate)"
                                             % (name, ARRIVAL_TIMEOUT))
                await self._sleep(MIGRATION_POLL)
            if not paused:
                await self._execute(protocol, "cont")
        # as Ganeti's FinalizeMigrationDst: routed NICs now that the guest runs here (failures only logged)
        for index, nic in enumerate(record["nics"]):
            if nic["mode"] == "routed":
                try:
                    await self.nics_up(name, tags, [(index, nic)])
                except hv.HypervisorError as e:
                    self.log.warn("{e}", e=e)
        for key in ("incoming", "source_paused"):
            record.pop(key, None)
        record["state"] = PAUSED if paused else RUNNING
        self._write(name, record)

    async def _finalize_source(self, name: str, record: dict[str, Any], success: bool) -> None:
        if success:
            await self._destroy(name, record)
            return
        record.pop("migration", None)
        if not self._alive(name, record):
            self._cleanup(name)
            return
        self._write(name, record)
        async with self._qmp(name) as protocol:
            if await self._status(protocol) in _MIGRATION_STOPPED and record.get("state") != PAUSED:
                await self._execute(protocol, "cont")

    # --- the interface: node -------------------------------------------------
    def get_node_info(self) -> dict[str, Any]:
        """Memory from C{/proc/meminfo}: C{memory_free} is what the kernel
        has available less what the instances here may still claim (qemu
        takes guest memory lazily); CPUs from the host."""
        meminfo = self._host.meminfo()
        total = meminfo.get("MemTotal", 0) // 1024
        if "MemAvailable" in meminfo:
            available = meminfo["MemAvailable"] // 1024
        else:
            available = sum(meminfo.get(k, 0) for k in ("MemFree", "Buffers", "Cached")) // 1024
        instances = sum(int(r.get("memory") or 0) for r in self._all_live().values())
        cpus, nodes, sockets = self._host.cpu_topology()
        return {
            "memory_total": total,
            "memory_free": max(0, min(available, total - instances)),
            "memory_dom0": max(0, total - available - instances),
            "memory_hv": 0,
            "cpu_total": cpus,
            "cpu_nodes": nodes,
            "cpu_sockets": sockets,
            "cpu_dom0": 0,
        }
