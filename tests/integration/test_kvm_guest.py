"""A real guest: the KVM acceleration probe on this machine, and a Debian
kernel with a busybox initramfs booted through the cluster, its serial
console read with C{gnt-instance console}.

Needs qemu-system-x86_64 (scripts/install-qemu) and the kernel and busybox
that scripts/install-guest unpacks into .venv/guest/ (scripts/test runs
both); without them the tests fail and say so, they are not skipped.
At most one qemu guest runs at a time (128 MiB), and every qemu of the
test's roots is killed at the end, also on failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
import pytest_twisted
from twisted.internet import reactor

from ganeti.backend.hypervisor import kvm_accel
from ganeti.backend.hypervisor.kvm_process import HostFacts
from ganeti.testing import guest, guest_cluster

QEMU = shutil.which("qemu-system-x86_64")
#: what the guest must manage within (the target is 15 s; the machine is shared)
BOOT_LIMIT = 90.0


def need_qemu() -> str:
    if QEMU is None:
        pytest.fail("qemu-system-x86_64 is not installed: run scripts/install-qemu (Debian: apt-get install "
                    "qemu-system-x86)")
    return QEMU


def need_guest_files() -> None:
    try:
        guest.guest_files()
    except guest.GuestFilesMissing as e:
        pytest.fail(str(e))


def hardware_virtualization() -> bool:
    """Whether the CPU announces VMX or SVM (without them KVM cannot run a real guest)."""
    with open("/proc/cpuinfo") as handle:
        flags = set(" ".join(line for line in handle if line.startswith("flags")).split())
    return bool(flags & {"vmx", "svm"})


@pytest_twisted.ensureDeferred
async def test_accel_probe_on_this_machine():
    """The real probe: TCG where the CPU has no VMX/SVM, even when /dev/kvm
    opens (here it does, and qemu's guests hang under it); cached per boot."""
    qemu = need_qemu()
    state_dir = tempfile.mkdtemp(prefix="gnt-accel")
    try:
        probe = kvm_accel.AccelProbe(state_dir, reactor)
        start = reactor.seconds()
        accel = await probe.accel(qemu)
        took = reactor.seconds() - start
        record = probe.cached(qemu)
        assert record is not None and record["accel"] == accel, record
        if not hardware_virtualization():
            assert accel == "tcg", record
        assert took < kvm_accel.PROBE_TIMEOUT + 5, took
        print("probe: %s in %.2f s (%s); /dev/kvm usable: %s" % (accel, took, record["reason"],
                                                               HostFacts().kvm_usable()))
        again = reactor.seconds()
        assert await probe.accel(qemu) == accel
        assert reactor.seconds() - again < 0.5      # the cache answers, no second qemu
        assert [n for n in os.listdir(state_dir) if n != "accel.json"] == []
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest_twisted.ensureDeferred
async def test_real_guest_boots_through_the_cluster():
    qemu = need_qemu()
    try:
        guest.guest_files()
    except guest.GuestFilesMissing as e:
        pytest.fail(str(e))
    result = await guest_cluster.boot_guest(reactor, qemu)
    text = result.get("console_text", "")
    print({k: v for k, v in result.items() if k not in ("console_text", "info")})
    assert result["ready_line"].startswith(guest.READY_LINE), text
    assert guest_cluster.DISK_MARKER in result["disk_line"], text       # it read its virtio disk
    assert result["shell_answer_s"] > result["boot_to_console_s"], text  # and answered on the console
    assert result["boot_to_console_s"] < BOOT_LIMIT, result
    expected = "tcg" if not hardware_virtualization() else result["accel"]
    assert result["accel"] == expected and result["accel"] in ("kvm", "tcg"), result["info"]
    assert result["console_exit"] == 0, result
    assert result["qemu_left"] == [] and result["killed"] == [], result


@pytest_twisted.ensureDeferred
async def test_guest_boots_from_the_image_the_os_wrote():
    """OS C{image} writes a root file system image onto disk 0 offline
    (at C{gnt-instance add}); the guest's kernel mounts it as its root
    (hvparam root_path=/dev/vda) and runs its init, which tells the image's
    name on the serial console."""
    qemu = need_qemu()
    try:
        guest.guest_files()
    except guest.GuestFilesMissing as e:
        pytest.fail(str(e))
    result = await guest_cluster.boot_guest(reactor, qemu, from_image=True)
    text = result.get("console_text", "")
    print({k: v for k, v in result.items() if k not in ("console_text", "info", "boots")})
    assert "switching to the root file system on /dev/vda" in text, text
    assert result["root_line"].startswith(guest.ROOT_LINE + guest_cluster.IMAGE_NAME), text
    assert result["shell_answer_s"] > result["root_from_disk_s"], text  # its shell answers on the console
    assert result["root_from_disk_s"] < BOOT_LIMIT, result
    assert result["console_exit"] == 0, result
    assert result["qemu_left"] == [] and result["killed"] == [], result
