"""noded's side of the rbd disk template (see L{ganeti.backend.storage.rbd}).

L{ganeti.noded.instances} hands every C{rbd} disk of the block device
procedures here: C{blockdev_create}, C{blockdev_remove}, C{blockdev_grow},
C{blockdev_getdimensions}, and the devices an instance starts with.  Each
runs C{rbd} without blocking the reactor and checks all of its input (the
image name in the logical id, the C{pool} and C{access} parameters, the
kernel's rbd support for C{kernelspace}) before it runs anything.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ganeti.asyncutil import Network
from ganeti.backend.storage import rbd
from ganeti.noded.failure import RpcFailure
from ganeti.objects import Disk

MIB = 1024 * 1024


def _helper_env() -> dict[str, str]:
    """The environment of the rbd programs run outside the reactor."""
    return {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LC_ALL": "C"}


def is_rbd(disk: Disk) -> bool:
    return disk.dev_type == rbd.DT_RBD


def check(disk: Disk, what: str) -> tuple[str, str, str]:
    """C{(pool, image, access)} of an rbd disk, checked.
    @raise RpcFailure: a malformed logical id or bad parameters
    """
    try:
        image = rbd.image_name(disk.logical_id)
        pool, access = rbd.disk_params(disk.params)
    except rbd.RbdError as exc:
        raise RpcFailure("%s: %s" % (what, exc)) from None
    return pool, image, access


class RbdDisks:
    """The rbd disks of the node rooted at C{root} (see the module docstring)."""

    def __init__(self, root: str, reactor: Any, sys_bus: str = rbd.SYS_BUS_RBD) -> None:
        self.sys_bus = sys_bus
        self.client = rbd.RbdClient(root, Network(reactor), sys_bus)
        #: the kernel devices L{prepare} mapped, by C{(pool, image)}
        self.mapped: dict[tuple[str, str], str] = {}

    def _usable(self, disk: Disk, what: str) -> tuple[str, str, str]:
        pool, image, access = check(disk, what)
        try:
            rbd.check_access(access, self.sys_bus)
        except rbd.RbdError as exc:
            raise RpcFailure("%s: %s" % (what, exc)) from None
        return pool, image, access

    async def _do(self, what: str, call: Any, *args: Any) -> Any:
        try:
            return await call(*args)
        except rbd.RbdError as exc:
            raise RpcFailure("%s: %s" % (what, exc)) from None

    async def create(self, disk: Disk, size_mib: int) -> str:
        """Create the image; its name."""
        pool, image, _access = self._usable(disk, "Cannot create rbd disk")
        await self._do("Cannot create rbd disk %s/%s" % (pool, image), self.client.create, pool, image, size_mib)
        return image

    async def remove(self, disk: Disk) -> None:
        """Remove the image (gone already: fine)."""
        pool, image, _access = check(disk, "Cannot remove rbd disk")
        await self._do("Cannot remove rbd disk %s/%s" % (pool, image), self.client.remove, pool, image)

    async def grow(self, disk: Disk, amount_mib: int, dryrun: bool, backingstore: bool) -> None:
        """Grow the image (only with C{backingstore}, as Ganeti); it must
        exist in any case."""
        pool, image, _access = check(disk, "Cannot grow rbd disk")
        what = "Cannot grow rbd disk %s/%s" % (pool, image)
        if backingstore:
            await self._do(what, self.client.grow, pool, image, amount_mib, dryrun)
        else:
            await self._do(what, self.client.size_bytes, pool, image)

    async def dimensions(self, disk: Disk) -> list[Any] | None:
        """C{[size in bytes, None]}, or C{None} if the image does not exist."""
        pool, image, _access = check(disk, "rbd disk")
        found = await self._do("Cannot look at rbd disk %s/%s" % (pool, image), self.client.info, pool, image)
        return None if found is None else [int(found["size"]), None]

    # --- snapshots and the streams of exports and imports ------------------------------

    async def snapshot(self, disk: Disk, name: str) -> list[str]:
        """Snapshot the image as C{name}; Ganeti's C{[driver, name]} answer."""
        pool, image, _access = check(disk, "Cannot snapshot rbd disk")
        await self._do("Cannot snapshot rbd disk %s/%s" % (pool, image), self.client.snapshot, pool, image, name)
        return [rbd.DRIVER, name]

    async def snapshot_remove(self, disk: Disk, name: str) -> None:
        pool, image, _access = check(disk, "Cannot remove a snapshot of rbd disk")
        await self._do("Cannot remove snapshot %s of rbd disk %s/%s" % (name, pool, image),
                       self.client.snapshot_remove, pool, image, name)

    def export_pipe(self, disk: Disk, snapshot: str | None, stderr: int) -> Any:
        """A factory of the L{stream.DevicePipe} an OS export script reads
        the image (or its snapshot) from: C{rbd export ... -}."""
        from ganeti.noded import stream

        pool, image, _access = check(disk, "Cannot export rbd disk")
        try:
            argv = self.client.export_argv(pool, image, snapshot)
        except rbd.RbdError as exc:
            raise RpcFailure("Cannot export rbd disk %s/%s: %s" % (pool, image, exc)) from None
        return lambda: stream.DevicePipe(argv, _helper_env(), stderr, script_reads=True)

    def import_pipe(self, disk: Disk, stderr: int) -> Any:
        """A factory of the L{stream.DevicePipe} an OS import script writes
        the image through: C{rbd import -} into C{<image>.import}, which then
        replaces the image (grown to the disk's size if the stream was
        shorter), as Ganeti's rbd import recreates the image."""
        import subprocess

        from ganeti.noded import stream

        pool, image, _access = check(disk, "Cannot import into rbd disk")
        staging = image + ".import"
        size = int(disk.size or 0)
        client = self.client

        def run(*args: str) -> str:
            done = subprocess.run(client.argv(*args), capture_output=True, text=True, env=_helper_env(),
                                  timeout=rbd.TIMEOUT)
            if done.returncode != 0:
                raise ValueError("rbd %s failed: %s" % (" ".join(args), (done.stderr or done.stdout).strip()[-500:]))
            return done.stdout

        def in_place() -> None:
            run("rm", "--no-progress", "%s/%s" % (pool, image))
            run("mv", "%s/%s" % (pool, staging), "%s/%s" % (pool, image))
            info = json.loads(run("info", "--format", "json", "%s/%s" % (pool, image)))
            if size and int(info["size"]) < size * MIB:
                run("resize", "--no-progress", "--size", "%dM" % size, "%s/%s" % (pool, image))

        def drop() -> None:
            subprocess.run(client.argv("rm", "--no-progress", "%s/%s" % (pool, staging)), capture_output=True,
                           env=_helper_env(), timeout=rbd.TIMEOUT)

        argv = client.import_argv(pool, staging)
        return lambda: stream.DevicePipe(argv, _helper_env(), stderr, script_reads=False, on_success=in_place,
                                         on_failure=drop)

    def device(self, disk: Disk, what: str) -> str:
        """What the hypervisor opens: the librbd drive (userspace) or the
        kernel's device (kernelspace, mapped by L{prepare})."""
        pool, image, access = self._usable(disk, what)
        if access == rbd.ACCESS_USER:
            try:
                return self.client.uri(pool, image)
            except rbd.RbdError as exc:
                raise RpcFailure("%s: %s" % (what, exc)) from None
        return self.mapped.get((pool, image)) or "/dev/rbd/%s/%s" % (pool, image)  # udev's name otherwise

    async def prepare(self, disks: list[Disk], what: str) -> None:
        """Map the kernelspace disks among C{disks} (userspace ones need nothing)."""
        for disk in disks:
            if not is_rbd(disk):
                continue
            pool, image, access = self._usable(disk, what)
            if access == rbd.ACCESS_KERNEL:
                self.mapped[(pool, image)] = await self._do("%s: cannot map rbd disk %s/%s" % (what, pool, image),
                                                            self.client.map, pool, image)

    async def assemble(self, disk: Disk, what: str) -> tuple[str | None, str | None]:
        """Map a kernelspace disk; C{(device path, None)}, or C{(None, librbd
        drive)} for a userspace one."""
        await self.prepare([disk], what)
        _pool, _image, access = self._usable(disk, what)
        found = self.device(disk, what)
        return (None, found) if access == rbd.ACCESS_USER else (found, None)

    async def shutdown(self, disk: Disk, what: str) -> str | None:
        """Unmap a kernelspace disk where the kernel has it mapped (userspace:
        nothing); the device it had, if this node mapped it."""
        pool, image, access = check(disk, what)
        if access != rbd.ACCESS_KERNEL:
            return None
        await self._do("%s: cannot unmap rbd disk %s/%s" % (what, pool, image), self.client.unmap, pool, image)
        return self.mapped.pop((pool, image), None)
