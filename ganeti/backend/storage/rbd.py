"""The rbd template: disks as RADOS block device images in a Ceph pool.

A disk of template C{rbd} has C{logical_id = ["rbd", "<uuid>.rbd.disk<N>"]}
(the image name; the pool is not in the id) and, once the master filled
them, C{params = {"pool": ..., "access": ...}} (Ganeti's disk parameters,
defaults C{pool=rbd}, C{access=kernelspace}).  The node runs Ceph's C{rbd}
tool, asynchronously (L{ganeti.asyncutil.Network.run}), as Ganeti does:

  - create: C{rbd create -p <pool> <name> --size <MiB>};
  - remove: (unmap,) C{rbd rm -p <pool> <name>}; an image already gone is
    no error;
  - grow: C{rbd resize -p <pool> <name> --size <old + amount>};
  - rename: nothing (the image keeps its name, as in Ganeti);
  - size: C{rbd info --format json}.

Access.  With C{access=userspace} the hypervisor opens the image itself
through librbd: nothing is mapped on the node, and kvm gets the drive
C{rbd:<pool>/<image>[:id=<user>][:conf=<ceph.conf>]} (L{RbdClient.uri}).
This is what works where the kernel rbd module is missing.  With
C{access=kernelspace} the image is mapped (C{rbd map}) to C{/dev/rbdN}
where the kernel offers C{/sys/bus/rbd}; where it does not, every use of
such a disk is refused with a clear error before anything is created.

Which Ceph (our addition, Ganeti always uses the node's defaults): the
node reads C{<node root>/etc/ceph/ceph.conf} when that file exists (for
the root C{/} this is Ceph's own default, which is then left to Ceph),
and the client id from the one-line file C{<node root>/etc/ganeti/ceph-client}
(default: Ceph's C{admin}).  The keyring is found as Ceph finds it: through
the C{keyring} option of that C{ceph.conf}, or Ceph's default locations.
A test or bench names its own throw-away Ceph this way in each node root
(L{ganeti.testing.ceph.CephCluster.install_client}).
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

from ganeti.rbd_params import (  # noqa: F401  (re-exported for the node's users)
    ACCESS_KERNEL,
    ACCESS_MODES,
    ACCESS_USER,
    DEFAULTS,
    DRIVER,
    DT_RBD,
    PARAM_ACCESS,
    PARAM_POOL,
    RbdError,
    check_name,
    disk_params,
    image_name,
)

#: the ceph client id file, under the node root
CLIENT_FILE = "etc/ganeti/ceph-client"
CONF_FILE = "etc/ceph/ceph.conf"
DEFAULT_CLIENT = "admin"
#: where the kernel offers rbd mapping
SYS_BUS_RBD = "/sys/bus/rbd"
#: seconds any rbd command may take
TIMEOUT = 120.0
RBD = "rbd"
#: how rbd says an image or pool does not exist
_ENOENT = ("No such file or directory", "(2)")


def kernel_rbd_available(sys_bus: str = SYS_BUS_RBD) -> bool:
    """Whether the kernel can map rbd images here."""
    return os.path.isdir(sys_bus)


def check_access(access: str, sys_bus: str = SYS_BUS_RBD) -> None:
    """Refuse C{kernelspace} access where the kernel has no rbd module.
    @raise RbdError: it has not
    """
    if access == ACCESS_KERNEL and not kernel_rbd_available(sys_bus):
        raise RbdError("rbd access 'kernelspace' needs the kernel rbd module (%s is missing) on this node;"
                       " use the disk parameter access=userspace (qemu opens the image through librbd)"
                       % sys_bus)


class RbdClient:
    """Ceph's C{rbd} tool on the node rooted at C{root}, run through
    C{net} (a L{ganeti.asyncutil.Network})."""

    def __init__(self, root: str, net: Any, sys_bus: str = SYS_BUS_RBD) -> None:
        self.root = root or "/"
        self.net = net
        self.sys_bus = sys_bus

    # --- configuration -------------------------------------------------------------

    def conf(self) -> str | None:
        """The ceph.conf the node uses, C{None} for Ceph's own default."""
        path = os.path.join(self.root, CONF_FILE)
        if self.root != "/" and os.path.isfile(path):
            return path
        return None

    def client_id(self) -> str | None:
        """The Ceph client id the node uses, C{None} for Ceph's default.
        @raise RbdError: the client file names an invalid id
        """
        try:
            with open(os.path.join(self.root, CLIENT_FILE)) as handle:
                value = handle.read().strip()
        except OSError:
            return None
        if not value:
            return None
        return check_name(value, "client id (%s)" % CLIENT_FILE)

    def _global_args(self) -> list[str]:
        args = []
        conf, client = self.conf(), self.client_id()
        if conf is not None:
            args += ["-c", conf]
        if client is not None:
            args += ["--id", client]
        return args

    def uri(self, pool: str, image: str) -> str:
        """The qemu drive of a userspace rbd disk."""
        uri = "rbd:%s/%s" % (check_name(pool, "pool"), check_name(image, "image name"))
        client, conf = self.client_id(), self.conf()
        if client is not None:
            uri += ":id=%s" % client
        if conf is not None:
            if ":" in conf or "," in conf or "\\" in conf:
                raise RbdError("ceph.conf path %r cannot go into a qemu rbd drive" % conf)
            uri += ":conf=%s" % conf
        return uri

    # --- commands --------------------------------------------------------------------

    async def _rbd(self, *args: str) -> str:
        from ganeti.asyncutil import ProgramTimeout

        argv = [*self._global_args(), *args]
        try:
            out, err, code = await self.net.run(RBD, argv, TIMEOUT)
        except ProgramTimeout:
            raise RbdError("rbd %s: no answer within %ds" % (" ".join(args), TIMEOUT)) from None
        except OSError as exc:
            raise RbdError("cannot run rbd (is ceph-common installed?): %s" % exc) from None
        if code != 0:
            text = (err or out).decode("utf-8", "replace").strip()
            raise RbdError("rbd %s failed (%d): %s" % (" ".join(args), code, text[-1000:]))
        return cast("str", out.decode("utf-8", "replace"))

    async def create(self, pool: str, image: str, size_mib: int) -> None:
        """Create image C{pool/image} of C{size_mib} MiB."""
        await self._rbd("create", "-p", pool, image, "--size", "%dM" % size_mib)

    async def info(self, pool: str, image: str) -> dict[str, Any] | None:
        """C{rbd info} of the image, C{None} if it does not exist."""
        try:
            text = await self._rbd("info", "-p", pool, image, "--format", "json")
        except RbdError as exc:
            if any(mark in str(exc) for mark in _ENOENT):
                return None
            raise
        try:
            found = json.loads(text)
        except ValueError:
            raise RbdError("rbd info -p %s %s: unreadable answer %.200r" % (pool, image, text)) from None
        if not isinstance(found, dict) or not isinstance(found.get("size"), int):
            raise RbdError("rbd info -p %s %s: no size in %.200r" % (pool, image, text))
        return found

    async def size_bytes(self, pool: str, image: str) -> int:
        """The size of the image in bytes.
        @raise RbdError: it does not exist
        """
        found = await self.info(pool, image)
        if found is None:
            raise RbdError("rbd image %s/%s does not exist" % (pool, image))
        return int(found["size"])

    async def remove(self, pool: str, image: str) -> None:
        """Remove the image (unmapping it first where mapped); one already
        gone is no error."""
        if kernel_rbd_available(self.sys_bus):
            device = await self.mapped(pool, image)
            if device is not None:
                await self._rbd("unmap", device)
        try:
            await self._rbd("rm", "-p", pool, image, "--no-progress")
        except RbdError as exc:
            if any(mark in str(exc) for mark in _ENOENT) and await self.info(pool, image) is None:
                return
            raise

    async def grow(self, pool: str, image: str, amount_mib: int, dryrun: bool = False) -> int:
        """Grow the image by C{amount_mib}; its new size in MiB (a dry run
        only checks that it exists)."""
        old = await self.size_bytes(pool, image) // (1024 * 1024)
        if dryrun or amount_mib == 0:
            return old
        new = old + amount_mib
        await self._rbd("resize", "-p", pool, image, "--size", "%dM" % new, "--no-progress")
        return new

    # --- snapshots and streams (exports, imports) ----------------------------------------

    async def snapshot(self, pool: str, image: str, snap: str) -> None:
        """C{rbd snap create POOL/IMAGE@SNAP}."""
        await self._rbd("snap", "create", "--no-progress", "%s/%s@%s" % (pool, image, check_name(snap, "snapshot")))

    async def snapshot_remove(self, pool: str, image: str, snap: str) -> None:
        """C{rbd snap rm POOL/IMAGE@SNAP}; one already gone is no error."""
        try:
            await self._rbd("snap", "rm", "--no-progress", "%s/%s@%s" % (pool, image, check_name(snap, "snapshot")))
        except RbdError as exc:
            if not any(mark in str(exc) for mark in _ENOENT):
                raise

    def argv(self, *args: str) -> list[str]:
        """The command line of C{rbd ARGS} with this node's conf and client id
        (for programs run outside the reactor: the streams of exports and imports)."""
        return [RBD, *self._global_args(), *args]

    def export_argv(self, pool: str, image: str, snap: str | None = None) -> list[str]:
        """C{rbd export} of the image (or of its snapshot C{snap}) to stdout."""
        spec = "%s/%s" % (pool, image) + ("@%s" % check_name(snap, "snapshot") if snap else "")
        return self.argv("export", "--no-progress", spec, "-")

    def import_argv(self, pool: str, image: str) -> list[str]:
        """C{rbd import} from stdin into a new image."""
        return self.argv("import", "--no-progress", "-", "%s/%s" % (pool, image))

    # --- kernel mapping (kernelspace only) -------------------------------------------------

    async def mapped(self, pool: str, image: str) -> str | None:
        """The C{/dev/rbdN} the image is mapped to, if any."""
        text = await self._rbd("showmapped", "--format", "json")
        try:
            entries = json.loads(text or "[]")
        except ValueError:
            return None
        if isinstance(entries, dict):  # older rbd: {"0": {...}}
            entries = list(entries.values())
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("pool") == pool and entry.get("name") == image:
                device = entry.get("device")
                return device if isinstance(device, str) else None
        return None

    async def map(self, pool: str, image: str) -> str:
        """Map the image through the kernel (once); its device path."""
        check_access(ACCESS_KERNEL, self.sys_bus)
        device = await self.mapped(pool, image)
        if device is None:
            device = (await self._rbd("map", "-p", pool, image)).strip()
        if not device.startswith("/dev/"):
            raise RbdError("rbd map -p %s %s gave no device (%r)" % (pool, image, device))
        return device

    async def unmap(self, pool: str, image: str) -> None:
        """Unmap the image where the kernel has it mapped."""
        if not kernel_rbd_available(self.sys_bus):
            return
        device = await self.mapped(pool, image)
        if device is not None:
            await self._rbd("unmap", device)
