"""A real guest for tests and benchmarks: a Debian kernel and a busybox initramfs.

C{scripts/install-guest} unpacks a kernel (C{vmlinuz} and its virtio
disk and network modules, from the C{linux-image-amd64} package) and a static busybox (from
C{busybox-static}) into C{.venv/guest/} of the checkout; nothing goes to the
system.  L{build_initramfs} packs them into an uncompressed C{newc} cpio
whose C{/init}:

  1. prints L{READY_LINE} and the guest's uptime on the console (the
     kernel's C{console=}, i.e. the serial port with the hvparam
     C{serial_console});
  2. loads the virtio modules and, when the guest has a disk, prints
     L{DISK_PREFIX} and the first printable bytes of C{/dev/vda};
  3. then every second prints a tick line that starts with L{READY_LINE}
     too and repeats what the disk said (a console attached late still
     sees both), while a shell reads commands from the serial line.

qemu boots the kernel faster from the uncompressed ELF image (PVH entry, no
decompression under TCG): L{kernel_image} unpacks it from the Debian
C{vmlinuz} once into the cache directory.

Pure file work: no Twisted, no qemu.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable

#: the line the guest's /init prints first
READY_LINE = "ganeti-guest: up"
DISK_PREFIX = "vda says "
#: the modules /init loads, in dependency order
MODULES = ("virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "virtio_blk",
           "failover", "net_failover", "virtio_net", "crc16", "crc32c_generic", "mbcache", "jbd2", "ext4")
#: the guest kernel's command line (hvparam C{kernel_args}): quiet, and without what costs seconds under TCG
#: and a test guest does not need: the crypto self-tests (about 1.5 s), the read-only marking of the kernel's
#: data and its W+X check (about 1 s), speculation mitigations, audit, the clocksource and timer checks
KERNEL_ARGS = "quiet cryptomgr.notests rodata=off mitigations=off audit=0 no_timer_check tsc=reliable"
#: what the init of a root file system image (L{build_root_image}) prints first
ROOT_LINE = "ganeti-guest: root from disk says "

_CACHE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".venv", "guest")

INIT = r"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
echo "%(ready)s after $(cut -d' ' -f1 /proc/uptime) s"
for m in %(modules)s; do
  [ -e /lib/modules/$m.ko ] && insmod /lib/modules/$m.ko 2>/dev/null
done
n=0
while [ ! -b /dev/vda ] && [ $n -lt 30 ]; do sleep 0.1; n=$((n+1)); done
ROOT=$(sed -n 's/.*root=\(\/dev\/vd[a-z0-9]*\).*/\1/p' /proc/cmdline)
if [ -n "$ROOT" ] && [ -b "$ROOT" ] && mkdir -p /newroot && mount -t ext4 "$ROOT" /newroot 2>/dev/null; then
  if [ -x /newroot/sbin/init ]; then
    echo "%(ready)s, switching to the root file system on $ROOT"
    umount /proc /sys
    mount --move /dev /newroot/dev
    exec switch_root /newroot /sbin/init
  fi
  umount /newroot
fi
VDA=none
[ -b /dev/vda ] && VDA=$(head -c 64 /dev/vda | tr -cd 'A-Za-z0-9_.:-')
echo "%(ready)s, %(disk)s$VDA"
(i=0; while true; do sleep 1; echo "%(ready)s, tick $i, %(disk)s$VDA"; i=$((i+1)); done) &
while true; do setsid cttyhack sh; done
"""


class GuestFilesMissing(Exception):
    """The kernel or busybox is not there; the message says how to get them."""


def cache_dir() -> str:
    """Where C{scripts/install-guest} put the kernel and busybox."""
    return os.environ.get("GUEST_CACHE") or _CACHE


def guest_files(directory: str | None = None) -> tuple[str, str, str]:
    """C{(vmlinuz, busybox, modules directory)}.

    @raise GuestFilesMissing: one of them is missing.
    """
    directory = directory or cache_dir()
    kernel, busybox = os.path.join(directory, "vmlinuz"), os.path.join(directory, "busybox")
    modules = os.path.join(directory, "modules")
    # virtio_net: a cache made before the NIC hotplug test lacks it
    for path in (kernel, busybox, modules, os.path.join(modules, "virtio_net.ko")):
        if not os.path.exists(path):
            raise GuestFilesMissing("%s is missing: run scripts/install-guest (it unpacks a Debian kernel and "
                                    "busybox-static into %s)" % (path, directory))
    return kernel, busybox, modules


def _entry(name: str, mode: int, data: bytes = b"", ino: int = 0, rdev: tuple[int, int] = (0, 0)) -> bytes:
    encoded = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(encoded), 0]
    header = b"070701" + b"".join(b"%08X" % value for value in fields)
    out = header + encoded
    out += b"\0" * (-len(out) % 4)
    out += data
    out += b"\0" * (-len(out) % 4)
    return out


def cpio(entries: Iterable[tuple[str, int, bytes, tuple[int, int]]]) -> bytes:
    """An uncompressed C{newc} archive of C{(name, mode, data, (major, minor))}."""
    parts = [_entry(name, mode, data, ino, rdev) for ino, (name, mode, data, rdev) in enumerate(entries, 1)]
    parts.append(_entry("TRAILER!!!", 0))
    return b"".join(parts)


def build_initramfs(target: str, directory: str | None = None) -> str:
    """Write the initramfs to C{target}; its path."""
    _, busybox, modules = guest_files(directory)
    with open(busybox, "rb") as handle:
        busybox_data = handle.read()
    directory_mode, file_mode = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o755
    entries: list[tuple[str, int, bytes, tuple[int, int]]] = [
        (d, directory_mode, b"", (0, 0)) for d in ("bin", "dev", "proc", "sys", "tmp", "lib", "lib/modules")
    ]
    entries.append(("dev/console", stat.S_IFCHR | 0o600, b"", (5, 1)))
    entries.append(("bin/busybox", file_mode, busybox_data, (0, 0)))
    entries.append(("bin/sh", stat.S_IFLNK | 0o777, b"busybox", (0, 0)))
    for module in MODULES:
        path = os.path.join(modules, module + ".ko")
        if os.path.exists(path):
            with open(path, "rb") as handle:
                entries.append(("lib/modules/%s.ko" % module, stat.S_IFREG | 0o644, handle.read(), (0, 0)))
    script = INIT % {"ready": READY_LINE, "modules": " ".join(MODULES), "disk": DISK_PREFIX}
    entries.append(("init", file_mode, script.encode(), (0, 0)))
    data = cpio(entries)
    tmp = target + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, target)
    return target


def kernel_image(directory: str | None = None) -> str:
    """The uncompressed kernel (ELF C{vmlinux}) of the cached C{vmlinuz},
    unpacked once next to it; its path."""
    import lzma
    import zlib

    directory = directory or cache_dir()
    vmlinuz, _, _ = guest_files(directory)
    target = os.path.join(directory, "vmlinux")
    if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(vmlinuz):
        return target
    with open(vmlinuz, "rb") as handle:
        data = handle.read()
    image = None
    start = data.find(b"\xfd7zXZ\x00")
    if start >= 0:
        image = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(data[start:])
    else:
        start = data.find(b"\x1f\x8b\x08")
        if start >= 0:
            image = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[start:])
    if not image or image[:4] != b"\x7fELF":
        return vmlinuz                  # not a format we unpack: qemu boots the bzImage itself
    tmp = target + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(image)
    os.replace(tmp, target)
    return target


ROOT_INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
echo "%(root)s$(cat /etc/ganeti-guest-os) after $(cut -d' ' -f1 /proc/uptime) s"
(i=0; while true; do sleep 1; echo "%(root)s$(cat /etc/ganeti-guest-os), tick $i"; i=$((i+1)); done) &
while true; do setsid cttyhack sh; done
"""


def build_root_image(target: str, name: str, size_mib: int = 16, directory: str | None = None) -> str:
    """An ext2 file system image (no partition table) that boots as the
    guest's root: busybox, an C{/sbin/init} printing L{ROOT_LINE} and
    C{name}, then ticks and a shell on the console.  Made with C{mke2fs -d}
    (e2fsprogs), without mounting anything; its path.

    @raise GuestFilesMissing: no busybox, or no mke2fs.
    """
    import shutil
    import subprocess
    import tempfile

    _, busybox, _ = guest_files(directory)
    mke2fs = shutil.which("mke2fs") or ("/usr/sbin/mke2fs" if os.path.exists("/usr/sbin/mke2fs") else None)
    if mke2fs is None:
        raise GuestFilesMissing("mke2fs is missing: install e2fsprogs")
    staging = tempfile.mkdtemp(prefix="gntguest-root")
    try:
        for sub in ("bin", "sbin", "dev", "proc", "sys", "tmp", "etc"):
            os.makedirs(os.path.join(staging, sub))
        shutil.copy(busybox, os.path.join(staging, "bin", "busybox"))
        with open(os.path.join(staging, "sbin", "init"), "w") as handle:
            handle.write(ROOT_INIT % {"root": ROOT_LINE})
        os.chmod(os.path.join(staging, "sbin", "init"), 0o755)
        with open(os.path.join(staging, "etc", "ganeti-guest-os"), "w") as handle:
            handle.write(name + "\n")
        done = subprocess.run([mke2fs, "-q", "-F", "-t", "ext2", "-L", "ganeti-guest", "-d", staging, target,
                               "%dM" % size_mib], capture_output=True, text=True)
        if done.returncode != 0:
            raise GuestFilesMissing("mke2fs failed: %s" % (done.stderr or done.stdout).strip())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
