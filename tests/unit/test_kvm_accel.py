"""The acceleration decision of the KVM hypervisor: the pure rule, the
probe's verdict, its cache per boot and binary, the probe process's
timeout, and what a started instance gets (no real qemu here)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor import kvm, kvm_accel
from ganeti.backend.hypervisor.kvm_accel import (
    ACCEL_KVM,
    ACCEL_TCG,
    BOOT_SECTOR,
    PROBE_EXIT_CODE,
    PROBE_TIMEOUT,
    AccelProbe,
    ProbeProtocol,
    decide,
    probe_argv,
    verdict,
)
from ganeti.paths import Paths
from tests.unit.test_kvm_hypervisor import NAME, FakeHost, KVMTestCase, instance


class DecideTests(SynchronousTestCase):
    def test_flag_forces(self) -> None:
        for probed in (ACCEL_KVM, ACCEL_TCG, None):
            self.assertEqual(decide("enabled", probed), ACCEL_KVM)
            self.assertEqual(decide("disabled", probed), ACCEL_TCG)

    def test_default_takes_the_probe(self) -> None:
        self.assertEqual(decide("", ACCEL_KVM), ACCEL_KVM)
        self.assertEqual(decide(None, ACCEL_KVM), ACCEL_KVM)
        self.assertEqual(decide("", ACCEL_TCG), ACCEL_TCG)
        self.assertEqual(decide("", None), ACCEL_TCG)
        self.assertTrue(kvm_accel.needs_probe("") and kvm_accel.needs_probe(None))
        self.assertFalse(kvm_accel.needs_probe("enabled") or kvm_accel.needs_probe("disabled"))

    def test_bad_flag(self) -> None:
        for flag in ("yes", True, 1, "Enabled"):
            with self.assertRaisesRegex(hv.HypervisorError, "kvm_flag"):
                decide(flag, ACCEL_KVM)


class VerdictTests(SynchronousTestCase):
    def test_only_the_probe_exit_means_kvm(self) -> None:
        self.assertEqual(verdict(PROBE_EXIT_CODE, False, "")[0], ACCEL_KVM)
        self.assertEqual(verdict(PROBE_EXIT_CODE, True, "")[0], ACCEL_TCG)
        self.assertEqual(verdict(None, True, "")[0], ACCEL_TCG)
        self.assertIn("within", verdict(None, True, "")[1])
        accel, why = verdict(1, False, "qemu-system-x86_64: Could not access KVM kernel module: No such file\n")
        self.assertEqual(accel, ACCEL_TCG)
        self.assertIn("code 1: qemu-system-x86_64: Could not access KVM kernel module", why)
        self.assertEqual(verdict(0, False, "")[0], ACCEL_TCG)

    def test_boot_sector_and_argv(self) -> None:
        self.assertEqual(len(BOOT_SECTOR), 512)
        self.assertEqual(BOOT_SECTOR[-2:], b"\x55\xaa")
        self.assertEqual(BOOT_SECTOR[:4], bytes([0xB0, 0x2A, 0xE6, 0xF4]))
        argv = probe_argv("/usr/bin/qemu", "/run/a,b")
        self.assertEqual(argv[:3], ["/usr/bin/qemu", "-machine", "pc,accel=kvm"])
        self.assertIn("file=/run/a,,b,format=raw,if=floppy", argv)
        self.assertIn("isa-debug-exit,iobase=0xf4,iosize=0x04", argv)


class FakeProcess(StringTransport):
    def __init__(self) -> None:
        super().__init__()
        self.signals: list[str] = []

    def signalProcess(self, signal: str) -> None:
        self.signals.append(signal)


class ProbeProtocolTests(SynchronousTestCase):
    def test_killed_after_the_timeout(self) -> None:
        clock, process = Clock(), FakeProcess()
        protocol = ProbeProtocol(clock)
        protocol.makeConnection(process)
        clock.advance(PROBE_TIMEOUT - 0.1)
        self.assertEqual(process.signals, [])
        clock.advance(0.1)
        self.assertEqual(process.signals, ["KILL"])
        protocol.processEnded(Failure(ProcessTerminated(signal=9)))
        self.assertEqual(self.successResultOf(protocol.ended), (None, True, ""))

    def test_exit_code_and_output(self) -> None:
        clock = Clock()
        protocol = ProbeProtocol(clock)
        protocol.makeConnection(FakeProcess())
        protocol.errReceived(b"warning: something\n")
        protocol.processEnded(Failure(ProcessTerminated(exitCode=PROBE_EXIT_CODE)))
        self.assertEqual(self.successResultOf(protocol.ended), (PROBE_EXIT_CODE, False, "warning: something\n"))
        self.assertEqual(clock.getDelayedCalls(), [])
        done = ProbeProtocol(clock)
        done.makeConnection(FakeProcess())
        done.processEnded(Failure(ProcessDone(0)))
        self.assertEqual(self.successResultOf(done.ended)[0], 0)


class FakeRunner:
    def __init__(self) -> None:
        self.argvs: list[list[str]] = []
        self.pending: list[Deferred[Any]] = []
        self.floppy: bytes = b""

    def __call__(self, argv: list[str]) -> Deferred[Any]:
        self.argvs.append(argv)
        floppy = next(a for a in argv if a.startswith("file="))[5:].split(",format=")[0]
        with open(floppy, "rb") as handle:
            self.floppy = handle.read()
        d: Deferred[Any] = Deferred()
        self.pending.append(d)
        return d


class AccelProbeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="gnt-accel")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.clock = Clock()
        self.run = FakeRunner()
        self.boot = "boot-1"
        self.probe = AccelProbe(self.dir, self.clock, run=self.run, boot=lambda: self.boot)

    def test_probes_once_and_shares(self) -> None:
        first, second = self.probe.accel("/usr/bin/qemu"), self.probe.accel("/usr/bin/qemu")
        self.assertEqual(len(self.run.argvs), 1)
        self.assertEqual(self.run.floppy, BOOT_SECTOR)
        self.assertNoResult(first)
        self.run.pending[0].callback((PROBE_EXIT_CODE, False, ""))
        self.assertEqual((self.successResultOf(first), self.successResultOf(second)), (ACCEL_KVM, ACCEL_KVM))
        self.assertEqual(self.successResultOf(self.probe.accel("/usr/bin/qemu")), ACCEL_KVM)
        self.assertEqual(len(self.run.argvs), 1)
        with open(os.path.join(self.dir, "accel.json")) as handle:
            record = json.load(handle)
        self.assertEqual((record["boot_id"], record["binary"], record["accel"]), ("boot-1", "/usr/bin/qemu", "kvm"))
        self.assertEqual([n for n in os.listdir(self.dir) if n != "accel.json"], [])  # the floppy is gone

    def test_new_boot_or_binary_probes_again(self) -> None:
        d = self.probe.accel("/usr/bin/qemu")
        self.run.pending[0].callback((None, True, ""))
        self.assertEqual(self.successResultOf(d), ACCEL_TCG)
        self.assertEqual(self.probe.cached()["accel"], ACCEL_TCG)
        self.assertNoResult(self.probe.accel("/opt/qemu"))
        self.assertEqual(len(self.run.argvs), 2)
        self.run.pending[1].callback((PROBE_EXIT_CODE, False, ""))
        self.boot = "boot-2"
        self.assertIsNone(self.probe.cached())
        d = self.probe.accel("/opt/qemu")
        self.assertEqual(len(self.run.argvs), 3)
        self.run.pending[2].callback((PROBE_EXIT_CODE, False, ""))
        self.assertEqual(self.successResultOf(d), ACCEL_KVM)

    def test_kvm_slower_than_tcg_means_tcg(self) -> None:
        # a nested host: the probe passes under KVM after 3.8 s, TCG does it in 0.1 s
        d = self.probe.accel("/usr/bin/qemu")
        self.clock.advance(3.8)
        self.run.pending[0].callback((PROBE_EXIT_CODE, False, ""))
        self.assertNoResult(d)
        self.assertIn("pc,accel=tcg", self.run.argvs[1])
        self.assertEqual(self.run.floppy, BOOT_SECTOR)
        self.clock.advance(0.1)
        self.run.pending[1].callback((PROBE_EXIT_CODE, False, ""))
        self.assertEqual(self.successResultOf(d), ACCEL_TCG)
        self.assertIn("slower than emulation", self.probe.cached()["reason"])

    def test_slow_kvm_on_a_loaded_host_stays(self) -> None:
        # both slow (a loaded host): KVM is kept; a fast KVM is never compared
        d = self.probe.accel("/usr/bin/qemu")
        self.clock.advance(1.6)
        self.run.pending[0].callback((PROBE_EXIT_CODE, False, ""))
        self.clock.advance(1.2)
        self.run.pending[1].callback((PROBE_EXIT_CODE, False, ""))
        self.assertEqual(self.successResultOf(d), ACCEL_KVM)
        self.boot = "boot-2"
        d = self.probe.accel("/usr/bin/qemu")
        self.clock.advance(0.9)
        self.run.pending[2].callback((PROBE_EXIT_CODE, False, ""))
        self.assertEqual(self.successResultOf(d), ACCEL_KVM)
        self.assertEqual(len(self.run.argvs), 3)

    def test_qemu_that_cannot_run_means_tcg(self) -> None:
        def broken(argv: list[str]) -> Deferred[Any]:
            raise hv.HypervisorError("Cannot run /nonexistent: No such file")
        probe = AccelProbe(self.dir, self.clock, run=broken, boot=lambda: "b")
        self.assertEqual(self.successResultOf(probe.accel("/nonexistent")), ACCEL_TCG)
        self.assertIn("Cannot run /nonexistent", probe.cached()["reason"])

    def test_corrupt_cache_probes(self) -> None:
        with open(os.path.join(self.dir, "accel.json"), "w") as handle:
            handle.write("{not json")
        self.assertIsNone(self.probe.cached())
        d = self.probe.accel("/usr/bin/qemu")
        self.assertEqual(len(self.run.argvs), 1)
        self.run.pending[0].callback((PROBE_EXIT_CODE, False, ""))
        self.assertEqual(self.successResultOf(d), ACCEL_KVM)


class KVMHost(FakeHost):
    def kvm_usable(self) -> bool:
        return True


class ProbedKVMTests(KVMTestCase):
    """A hypervisor without a C{kvm_usable} override asks its probe."""

    def probed(self, answer: str, host: Any = None) -> tuple[kvm.KVMHypervisor, list[str]]:
        binaries: list[str] = []

        def run(argv: list[str]) -> Deferred[Any]:
            binaries.append(argv[0])
            return succeed((PROBE_EXIT_CODE if answer == ACCEL_KVM else None, answer != ACCEL_KVM, ""))
        root = self.short_root()
        probe = AccelProbe(os.path.join(root, "probe"), self.clock, run=run, boot=lambda: "b")
        hypervisor = kvm.KVMHypervisor(Paths(root), self.clock, processes=self.node, connect=self.node.connect,
                                       host=host or KVMHost(), accel_probe=probe)
        return hypervisor, binaries

    def test_probe_says_kvm(self) -> None:
        hypervisor, binaries = self.probed(ACCEL_KVM)
        self.start(hypervisor=hypervisor)
        self.assertIn("pc,accel=kvm", self.node.spawned[0][0])
        self.assertEqual(binaries, ["/bin/sh"])
        info = self.successResultOf(self.drive(hypervisor.get_instance_info(NAME)))
        self.assertEqual(info["accel"], "kvm")

    def test_probe_says_tcg(self) -> None:
        hypervisor, _ = self.probed(ACCEL_TCG)
        self.start(hypervisor=hypervisor)
        self.assertIn("pc,accel=tcg", self.node.spawned[0][0])
        self.assertEqual(self.successResultOf(self.drive(hypervisor.get_all_instances_info()))[NAME]["accel"], "tcg")

    def test_no_dev_kvm_needs_no_probe(self) -> None:
        hypervisor, binaries = self.probed(ACCEL_KVM, host=FakeHost())
        self.start(hypervisor=hypervisor)
        self.assertIn("pc,accel=tcg", self.node.spawned[0][0])
        self.assertEqual(binaries, [])

    def test_kvm_flag_forces_without_probing(self) -> None:
        hypervisor, binaries = self.probed(ACCEL_TCG)
        self.start(inst=instance(kvm_flag="enabled"), hypervisor=hypervisor)
        self.assertIn("pc,accel=kvm", self.node.spawned[0][0])
        self.assertEqual(binaries, [])
        other, binaries = self.probed(ACCEL_KVM)
        self.start(inst=instance(kvm_flag="disabled"), hypervisor=other)
        self.assertIn("pc,accel=tcg", self.node.spawned[1][0])
        self.assertEqual(binaries, [])

    def test_bad_kvm_flag_starts_nothing(self) -> None:
        hypervisor, _ = self.probed(ACCEL_KVM)
        d = hypervisor.start_instance(instance(kvm_flag="sometimes"), [], False)
        self.assertIn("kvm_flag", str(self.failureResultOf(d, hv.HypervisorError).value))
        self.assertEqual(self.node.spawned, [])
        self.assertEqual(hypervisor.list_instances(), [])


class InfoDisplayTests(SynchronousTestCase):
    def test_gnt_instance_info_shows_the_accelerator(self) -> None:
        from ganeti.client.instance_info import instance_info

        rows = dict(r for r in instance_info({"name": NAME, "hypervisor": "kvm", "accel": "tcg"})
                    if isinstance(r, tuple))
        self.assertEqual(rows["Acceleration"], "tcg (software emulation)")
        rows = dict(r for r in instance_info({"name": NAME, "hypervisor": "kvm"}) if isinstance(r, tuple))
        self.assertNotIn("Acceleration", rows)


class MondTests(SynchronousTestCase):
    def test_instance_item_and_metric(self) -> None:
        from ganeti.mond.collectors.instances import instance_statuses

        configured = [{"name": NAME, "admin_state": "up", "hypervisor": "kvm"}]
        data = instance_statuses("kvm", configured, {NAME: {"memory": 64, "vcpus": 1, "time": 3, "accel": "tcg"}},
                                 100.0, 5.0)
        self.assertEqual(data["instances"][0]["accel"], "tcg")
        plain = instance_statuses("fake", configured, {NAME: {"memory": 64}}, 100.0, 5.0)
        self.assertNotIn("accel", plain["instances"][0])
        from ganeti.mond import metrics
        from ganeti.promtext import Exposition

        out = Exposition()
        metrics._declare(out)
        metrics._instances(out, "inst-status-kvm", data)
        self.assertIn('ganeti_instance_accel_info{accel="tcg",instance_name="%s",hypervisor="kvm"} 1' % NAME,
                      out.render().decode())

    def test_node_probe_report(self) -> None:
        from ganeti.mond.collectors.instances import KvmAccel, kvm_accel_state

        root = tempfile.mkdtemp(prefix="gnt-accel")
        self.addCleanup(shutil.rmtree, root, True)
        paths = Paths(root)
        self.assertIsNone(kvm_accel_state(paths, "b")["accel"])
        probe = AccelProbe(os.path.join(paths.run_dir, "kvm-hypervisor"), Clock(),
                           run=lambda argv: succeed((None, True, "")), boot=lambda: "b")
        self.assertEqual(self.successResultOf(probe.accel("/usr/bin/qemu")), ACCEL_TCG)
        collector = KvmAccel(paths, lambda: "b")
        report = collector.collect(None)
        self.assertEqual((report["accel"], report["binary"]), ("tcg", "/usr/bin/qemu"))
        self.assertIn("did not finish", report["reason"])
        self.assertIsNone(KvmAccel(paths, lambda: "other boot").collect(None)["accel"])


class SerialConsoleTests(SynchronousTestCase):
    def test_socket_path_from_the_console_command(self) -> None:
        from ganeti.client.serial_console import is_local_socket, socket_path

        console = {"kind": "msg", "command": ["socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:/run/x.serial"]}
        self.assertEqual(socket_path(console), "/run/x.serial")
        self.assertIsNone(socket_path({"kind": "msg", "message": "no console"}))
        self.assertIsNone(socket_path({"kind": "msg", "command": "UNIX-CONNECT:/x"}))
        self.assertIsNone(socket_path({"kind": "msg", "command": ["UNIX-CONNECT:"]}))
        self.assertFalse(is_local_socket(__file__))
        self.assertFalse(is_local_socket("/nonexistent/x.serial"))

    def test_kvm_console_carries_the_command(self) -> None:
        root = tempfile.mkdtemp(prefix="gnt-accel")
        self.addCleanup(shutil.rmtree, root, True)
        hypervisor = kvm.KVMHypervisor(Paths(root), Clock(), host=FakeHost(), kvm_usable=False)
        console = hypervisor.get_console_info(instance())
        self.assertEqual(console["command"][-1], "UNIX-CONNECT:" + hypervisor.files(NAME).serial_socket)
        self.assertIn(hypervisor.files(NAME).serial_socket, console["message"])
