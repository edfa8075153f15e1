"""NodeD's KVM acceleration probe at start (L{ganeti.noded.accel_start})."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from twisted.internet.defer import succeed
from twisted.trial.unittest import SynchronousTestCase

from ganeti import ssconf
from ganeti.noded import accel_start
from ganeti.paths import Paths


class FakeKvm:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def _binary(self, hvparams: dict[str, Any]) -> str:
        return hvparams.get("kvm_path") or "/usr/bin/qemu-system-x86_64"

    def node_accel(self, binary: str) -> Any:
        self.asked.append(binary)
        return succeed("tcg")


class FakeInstances:
    def __init__(self) -> None:
        self.kvm = FakeKvm()

    def hypervisor(self, name: str) -> Any:
        assert name == "kvm"
        return self.kvm


class ProbeAtStartTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="gnt-accel-start"))
        self.addCleanup(shutil.rmtree, self.paths.root, True)
        self.paths.ensure_dirs()
        self.instances = FakeInstances()

    def write(self, hypervisors: str, kvm_path: str = "") -> None:
        ssconf.write_files(self.paths, {"hypervisor_list": hypervisors,
                                        "hvparams_kvm": ["kvm_path=%s" % kvm_path] if kvm_path else []})

    def test_probes_the_configured_qemu_when_kvm_is_enabled(self) -> None:
        self.write("fake\nkvm", "/opt/qemu/bin/qemu-system-x86_64")
        d = accel_start.probe_at_start(self.paths, self.instances)
        assert d is not None
        self.assertEqual(self.successResultOf(d), "tcg")
        self.assertEqual(self.instances.kvm.asked, ["/opt/qemu/bin/qemu-system-x86_64"])

    def test_nothing_without_kvm_or_before_joining(self) -> None:
        self.assertIsNone(accel_start.probe_at_start(self.paths, self.instances))  # no ssconf yet
        self.write("fake")
        self.assertIsNone(accel_start.probe_at_start(self.paths, self.instances))
        self.assertEqual(self.instances.kvm.asked, [])

    def test_a_probe_that_cannot_run_is_no_error(self) -> None:
        self.write("kvm")

        def broken(binary: str) -> Any:
            raise RuntimeError("qemu is missing")

        self.instances.kvm.node_accel = broken
        d = accel_start.probe_at_start(self.paths, self.instances)
        assert d is not None
        self.assertIsNone(self.successResultOf(d))
