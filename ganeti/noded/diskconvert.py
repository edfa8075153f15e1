"""The node's side of a disk template conversion and of disk metadata:
C{blockdev_convert} and C{blockdev_setinfo}.

C{blockdev_convert} copies a disk's data onto a new disk of another
template (Ganeti's C{BlockdevConvert}, which pipes the source's export
command into the target's import command): both disks are made usable here
as C{blockdev_assemble} makes them (a file disk's file, an rbd image mapped
by the kernel, an ext volume attached, an adopted device), the bytes are
copied in a thread (at most the smaller of the two sizes; runs of zeros are
skipped, so a file target stays sparse), and the volumes attached for the
copy are released again.  A disk the hypervisor can only open itself (an rbd
or ext disk with C{access=userspace} and no block device) cannot be copied
here: the error says so.

C{blockdev_setinfo} hands an ext volume its metadata (the C{setinfo} script,
as at creation); the other templates keep none (as Ganeti's).
"""

from __future__ import annotations

import os
import stat
from typing import Any

from twisted.internet import threads
from twisted.logger import Logger

from ganeti import errors
from ganeti.backend import storage
from ganeti.noded import extstorage as ext_disks
from ganeti.noded import rbd as rbd_disks
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.noded.instances import InstanceProcedures, decode_disk
from ganeti.objects import Disk
from ganeti.rpc import procedures

#: bytes copied at a time
BLOCK = 1024 * 1024


def copy_data(source: str, target: str, block: int = BLOCK) -> int:
    """Copy C{source} onto C{target} (both exist), up to the smaller size;
    the bytes copied.  All-zero blocks are skipped (seeked over) when the
    target is a file (new, so it reads as zeros there and stays sparse); a
    block device may hold what a volume before it left, so it gets them written."""
    with open(source, "rb") as src, open(target, "r+b") as dst:
        sparse = stat.S_ISREG(os.fstat(dst.fileno()).st_mode)
        size = min(src.seek(0, os.SEEK_END), dst.seek(0, os.SEEK_END))
        src.seek(0)
        dst.seek(0)
        done = 0
        zeros = bytes(block)
        while done < size:
            chunk = src.read(min(block, size - done))
            if not chunk:
                break
            if sparse and chunk == zeros[:len(chunk)]:
                dst.seek(len(chunk), os.SEEK_CUR)
            else:
                dst.write(chunk)
            done += len(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return done


class DiskConvertProcedures:
    """C{blockdev_convert} and C{blockdev_setinfo} on the node of C{instances}."""

    log = Logger()

    def __init__(self, instances: InstanceProcedures) -> None:
        self.instances = instances

    async def _open(self, disk: Disk, what: str) -> tuple[str, bool]:
        """The path of C{disk}'s data here, and whether it was attached for the copy."""
        inst = self.instances
        if disk.dev_type == storage.DT_DISKLESS:
            raise RpcFailure("%s: a diskless disk has no data" % what)
        if rbd_disks.is_rbd(disk):
            dev_path, _uri = await inst.rbd.assemble(disk, what)
            attached = True
        elif ext_disks.handles(disk):
            dev_path, _uri = await inst.ext.assemble(disk, what)
            attached = ext_disks.is_ext(disk)
        else:
            driver, path = inst.locate(disk, what)
            try:
                return driver.hypervisor_path(path), False
            except errors.OpExecError as exc:
                raise RpcFailure("%s: %s" % (what, exc)) from None
        if dev_path is None:
            if attached:
                await self._release(disk, what)
            raise RpcFailure("%s: the disk has no block device here (access=userspace): it cannot be copied"
                             % what)
        return dev_path, attached

    async def _release(self, disk: Disk, what: str) -> None:
        try:
            if rbd_disks.is_rbd(disk):
                await self.instances.rbd.shutdown(disk, what)
            elif ext_disks.is_ext(disk):
                await self.instances.ext.shutdown(disk, what)
        except RpcFailure as exc:
            self.log.warn("could not release disk {disk} after copying: {why}", disk=disk.uuid, why=exc)

    @handler(procedures.blockdev_convert)
    async def blockdev_convert(self, bdev_src: Any, bdev_dest: Any) -> None:
        source = decode_disk(bdev_src, "source disk")
        target = decode_disk(bdev_dest, "target disk")
        src_what = "Cannot copy from device '%s'" % source.uuid
        dst_what = "Cannot copy to device '%s'" % target.uuid
        src_path, src_attached = await self._open(source, src_what)
        try:
            dst_path, dst_attached = await self._open(target, dst_what)
            try:
                try:
                    copied = await threads.deferToThread(copy_data, src_path, dst_path)
                except OSError as exc:
                    raise RpcFailure("Disk conversion from %s to %s failed: %s" % (src_path, dst_path, exc)) from None
            finally:
                if dst_attached:
                    await self._release(target, dst_what)
        finally:
            if src_attached:
                await self._release(source, src_what)
        self.log.info("copied {size} bytes of disk {src} ({src_type}) to disk {dst} ({dst_type})", size=copied,
                      src=source.uuid, src_type=source.dev_type, dst=target.uuid, dst_type=target.dev_type)
        return None

    @handler(procedures.blockdev_setinfo)
    async def blockdev_setinfo(self, disk: Any, info: Any) -> None:
        record = decode_disk(disk)
        if not isinstance(info, str):
            raise RpcFailure("info must be a string, not %.100r" % (info,))
        if ext_disks.handles(record):
            await self.instances.ext.setinfo(record, info)
        return None
