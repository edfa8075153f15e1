"""noded's side of the C{ext} (ExtStorage) and C{blockdev} (adopted) templates.

L{ganeti.noded.instances} hands every C{ext} and C{blockdev} disk of the
block device procedures here (C{blockdev_create}, C{blockdev_remove},
C{blockdev_grow}, C{blockdev_getdimensions}) and asks for the devices an
instance starts with; C{extstorage_diagnose} and C{bdev_sizes} are served
from here too.

An C{ext} disk has C{logical_id = [provider, volume name]} and its
C{params} (the provider's parameters, C{provider}, C{access}); the
provider's scripts do the work (L{ganeti.backend.storage.extstorage}),
without blocking the reactor.  Before any script runs the provider must be
found and valid and the parameters known to its C{parameters.list}.

A C{blockdev} disk is a block device the admin made (C{logical_id =
["manual", path]}); the cluster never creates, grows or removes it: create
only checks that it is there, remove does nothing.  Its path must resolve to
a block device under C{/dev/} (Ganeti's node-side rule; Ganeti's master also
wants it under C{/dev/disk/}, which we relax to C{/dev/}, see
L{ganeti.cmdlib.ext_disks}).
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import attrs
from twisted.logger import Logger

from ganeti.backend.storage import extstorage as es
from ganeti.noded.failure import RpcFailure
from ganeti.objects import Disk

DT_EXT = "ext"
DT_BLOCK = "blockdev"
#: the first element of an adopted block device's logical_id
BLOCKDEV_DRIVER = "manual"
MIB = 1024 * 1024

_VOLUME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,254}$")


def is_ext(disk: Disk) -> bool:
    return disk.dev_type == DT_EXT


def is_blockdev(disk: Disk) -> bool:
    return disk.dev_type == DT_BLOCK


def handles(disk: Disk) -> bool:
    return disk.dev_type in (DT_EXT, DT_BLOCK)


def check_ext(disk: Disk, what: str) -> tuple[str, str, dict[str, Any]]:
    """C{(provider, volume name, params)} of an ext disk, checked.
    @raise RpcFailure: a malformed logical id or parameters
    """
    lid = disk.logical_id
    if not (isinstance(lid, list) and len(lid) == 2 and isinstance(lid[0], str) and isinstance(lid[1], str)):
        raise RpcFailure("%s: logical_id must be [provider, volume name], not %.100r" % (what, lid))
    try:
        provider = es.check_name(lid[0])
    except es.ExtStorageError as exc:
        raise RpcFailure("%s: %s" % (what, exc)) from None
    if not _VOLUME_RE.match(lid[1]):
        raise RpcFailure("%s: invalid volume name %.100r" % (what, lid[1]))
    params = disk.params if disk.params is not None else {}
    if not isinstance(params, dict):
        raise RpcFailure("%s: params must be a dict, not %.100r" % (what, params))
    if params.get(es.PARAM_PROVIDER, provider) != provider:
        raise RpcFailure("%s: params name provider %.100r, the logical id %s"
                         % (what, params.get(es.PARAM_PROVIDER), provider))
    # Ganeti's RPC fills the template's disk parameters (access: kernelspace by default)
    return provider, lid[1], {es.PARAM_ACCESS: es.ACCESS_KERNEL, **params, es.PARAM_PROVIDER: provider}


def check_adopted(disk: Disk, what: str) -> str:
    """The device path of an adopted block device, checked for form only.
    @raise RpcFailure: a malformed logical id
    """
    lid = disk.logical_id
    if not (isinstance(lid, list) and len(lid) == 2 and isinstance(lid[1], str) and lid[1].startswith("/dev/")
            and "\0" not in lid[1] and ".." not in lid[1].split("/")):
        raise RpcFailure("%s: logical_id must be [%r, /dev/... path], not %.100r" % (what, BLOCKDEV_DRIVER, lid))
    return lid[1]


def block_device(path: str, what: str) -> str:
    """C{path}, which must resolve to a block device under C{/dev/}.
    @raise RpcFailure: it does not exist, or is something else
    """
    real = os.path.realpath(path)
    if not real.startswith("/dev/"):
        raise RpcFailure("%s: %s resolves to %s, which is not under /dev/" % (what, path, real))
    try:
        st = os.stat(real)
    except OSError as exc:
        raise RpcFailure("%s: cannot use %s: %s" % (what, path, exc.strerror or exc)) from None
    if not stat.S_ISBLK(st.st_mode):
        raise RpcFailure("%s: %s is not a block device" % (what, path))
    return real


def bdev_sizes(devices: list[str]) -> dict[str, int]:
    """C{{path: MiB}} of the paths that are block devices under C{/dev/}
    (Ganeti's C{GetBlockDevSizes}: the others are left out)."""
    out = {}
    for path in devices:
        try:
            real = block_device(path, "device")
            out[path] = es.device_size(real) // MIB
        except (RpcFailure, OSError):
            continue
    return out


class ExtDisks:
    """The ext and blockdev disks of the node at C{paths} (see the module docstring)."""

    log = Logger()

    def __init__(self, paths: Any, reactor: Any) -> None:
        self.paths = paths
        self.runner = es.Runner(paths, reactor)
        #: what C{attach} answered, by C{(provider, volume)}: C{(device path, URIs)}
        self.attached: dict[tuple[str, str], tuple[str | None, list[str]]] = {}

    def provider(self, name: str, what: str) -> es.Provider:
        try:
            return es.find(self.paths.root, name)
        except es.ExtStorageError as exc:
            raise RpcFailure("%s: %s" % (what, exc)) from None

    def _prepare(self, disk: Disk, what: str) -> tuple[es.Provider, str, dict[str, str]]:
        name, volume, params = check_ext(disk, what)
        provider = self.provider(name, what)
        try:
            return provider, volume, es.check_params(provider, params)
        except es.ExtStorageError as exc:
            raise RpcFailure("%s: %s" % (what, exc)) from None

    async def _run(self, provider: es.Provider, action: str, volume: str, params: dict[str, str], what: str,
                   **env: Any) -> str | None:
        try:
            return await self.runner.run(provider, action, volume, es.environment(volume, params, **env))
        except es.ExtStorageError as exc:
            raise RpcFailure("%s: %s" % (what, exc)) from None

    async def _attach(self, disk: Disk, what: str) -> tuple[str | None, list[str]]:
        provider, volume, params = self._prepare(disk, what)
        out = await self._run(provider, es.ATTACH, volume, params, what, name=disk.name, uuid=disk.uuid)
        try:
            dev_path, uris = es.parse_attach(out or "")
            if dev_path is not None:
                es.check_block_device(dev_path)
        except es.ExtStorageError as exc:
            raise RpcFailure("%s: attach of volume %s: %s" % (what, volume, exc)) from None
        self.attached[(provider.name, volume)] = (dev_path, uris)
        return dev_path, uris

    # --- the block device procedures -------------------------------------------------

    async def create(self, disk: Disk, size_mib: int, info: str | None) -> str:
        """Create, attach, open and set the info of the volume; its name.
        A volume whose attach fails after its creation is removed again."""
        if is_blockdev(disk):
            path = check_adopted(disk, "Cannot adopt block device")
            block_device(path, "Cannot adopt block device")
            return path
        what = "Cannot create ExtStorage disk"
        provider, volume, params = self._prepare(disk, what)
        what = "Cannot create volume %s of ExtStorage provider %s" % (volume, provider.name)
        await self._run(provider, es.CREATE, volume, params, what, size=size_mib, name=disk.name, uuid=disk.uuid)
        try:
            await self._attach(disk, what)
            await self._run(provider, es.OPEN, volume, params, what, name=disk.name, uuid=disk.uuid,
                            exclusive=True)
            if info:
                await self._run(provider, es.SETINFO, volume, params, what, metadata=es.sanitize_metadata(info),
                                name=disk.name, uuid=disk.uuid)
        except RpcFailure:
            try:
                await self.remove(disk)
            except RpcFailure as exc:
                self.log.warn("could not remove volume {volume} after a failed creation: {why}",
                              volume=volume, why=exc)
            raise
        self.log.info("created ExtStorage volume {volume} ({size} MiB) with provider {provider}",
                      volume=volume, size=size_mib, provider=provider.name)
        return volume

    async def setinfo(self, disk: Disk, info: str) -> None:
        """Run the volume's C{setinfo} script with C{info} as its metadata
        (an adopted device: nothing)."""
        if is_blockdev(disk):
            check_adopted(disk, "Cannot set the info of block device")
            return None
        what = "Cannot set the info of ExtStorage disk"
        provider, volume, params = self._prepare(disk, what)
        await self._run(provider, es.SETINFO, volume, params,
                        "Cannot set the info of volume %s of ExtStorage provider %s" % (volume, provider.name),
                        metadata=es.sanitize_metadata(info), name=disk.name, uuid=disk.uuid)
        return None

    async def remove(self, disk: Disk) -> None:
        """Close, detach and remove the volume (an adopted device: nothing)."""
        if is_blockdev(disk):
            check_adopted(disk, "Cannot release block device")
            return None
        provider, volume, params = self._prepare(disk, "Cannot remove ExtStorage disk")
        what = "Cannot remove volume %s of ExtStorage provider %s" % (volume, provider.name)
        ids = {"name": disk.name, "uuid": disk.uuid}
        await self._run(provider, es.CLOSE, volume, params, what, **ids)
        await self._run(provider, es.DETACH, volume, params, what, **ids)
        await self._run(provider, es.REMOVE, volume, params, what, **ids)
        self.attached.pop((provider.name, volume), None)
        return None

    async def grow(self, disk: Disk, amount_mib: int, dryrun: bool, backingstore: bool) -> None:
        """Grow the volume by C{amount_mib} (only the C{backingstore} step,
        not a dry run); it must be attachable in any case."""
        if is_blockdev(disk):
            raise RpcFailure("Cannot grow disk %s: adopted block devices (template blockdev) cannot grow"
                             % (disk.iv_name or disk.uuid))
        what = "Cannot grow ExtStorage disk"
        await self._attach(disk, what)
        if not backingstore or dryrun:
            return None
        provider, volume, params = self._prepare(disk, what)
        size = disk.size or 0
        await self._run(provider, es.GROW, volume, params, "Cannot grow volume %s of ExtStorage provider %s"
                        % (volume, provider.name), size=size, grow=size + amount_mib, name=disk.name, uuid=disk.uuid)
        return None

    async def dimensions(self, disk: Disk) -> list[Any] | None:
        """C{[size in bytes, None]}, C{None} if it cannot be attached (or has no device)."""
        try:
            if is_blockdev(disk):
                dev_path: str | None = block_device(check_adopted(disk, "disk"), "disk")
            else:
                dev_path, _uris = await self._attach(disk, "disk")
        except RpcFailure as exc:
            self.log.info("no dimensions for disk {disk}: {why}", disk=disk.iv_name or disk.uuid, why=exc)
            return None
        if dev_path is None:
            return None
        try:
            return [es.device_size(dev_path), None]
        except OSError:
            return None

    # --- snapshots (exports of running instances) -----------------------------------

    def _snapshot_disk(self, disk: Disk, snap: str, what: str) -> Disk:
        """The snapshot volume C{snap} of C{disk}, as a disk of the same provider."""
        provider, _volume, _params = check_ext(disk, what)
        if not _VOLUME_RE.match(snap):
            raise RpcFailure("%s: invalid snapshot name %.100r" % (what, snap))
        return attrs.evolve(disk, logical_id=[provider, snap], name=None, uuid=None)

    async def snapshot(self, disk: Disk, snap_name: str | None, snap_size: int | None) -> list[str]:
        """Ganeti's ExtStorage snapshot: the provider's C{snapshot} script
        makes the volume C{snap_name} (default C{<volume>.snap}, as large as
        the disk); it is attached here for the export that reads it
        (L{snapshot_device}).  C{[provider, snapshot volume]}.  A provider
        without the script refuses (Ganeti skips the action and exports
        nothing usable)."""
        if is_blockdev(disk):
            raise RpcFailure("Cannot snapshot disk %s: adopted block devices (template blockdev) have no snapshots"
                             % (disk.iv_name or disk.uuid))
        what = "Cannot snapshot ExtStorage disk"
        provider, volume, params = self._prepare(disk, what)
        if provider.scripts.get(es.SNAPSHOT) is None:
            raise RpcFailure("%s: provider %s has no snapshot script" % (what, provider.name))
        snap = snap_name or "%s.snap" % volume
        snapshot = self._snapshot_disk(disk, snap, what)
        what = "Cannot snapshot volume %s of ExtStorage provider %s" % (volume, provider.name)
        await self._run(provider, es.SNAPSHOT, volume, params, what, snap_name=snap,
                        snap_size=snap_size if snap_size is not None else disk.size)
        try:
            await self._attach(snapshot, what)
        except RpcFailure:
            await self.snapshot_remove(disk, snap)
            raise
        self.log.info("snapshot {snap} of ExtStorage volume {volume} made", snap=snap, volume=volume)
        return [provider.name, snap]

    def snapshot_device(self, disk: Disk, snap: str) -> str:
        """The block device of the snapshot C{snap} of C{disk}, which L{snapshot} attached."""
        what = "Cannot export snapshot %s" % snap
        snapshot = self._snapshot_disk(disk, snap, what)
        found = self.attached.get((snapshot.logical_id[0], snap))
        if found is None or found[0] is None:
            raise RpcFailure("%s: it is not attached on this node (it has no block device)" % what)
        return found[0]

    async def snapshot_remove(self, disk: Disk, snap: str) -> None:
        """Close, detach and remove the snapshot volume C{snap} of C{disk}."""
        await self.remove(self._snapshot_disk(disk, snap, "Cannot remove snapshot %s" % snap))

    # --- instances -------------------------------------------------------------------

    async def prepare(self, disks: list[Disk], what: str, exclusive: bool = True) -> None:
        """Attach and open the ext disks among C{disks} (C{exclusive} false
        while migrating, as Ganeti), check the adopted ones."""
        for disk in disks:
            if is_ext(disk):
                await self._attach(disk, what)
                provider, volume, params = self._prepare(disk, what)
                await self._run(provider, es.OPEN, volume, params, what, name=disk.name, uuid=disk.uuid,
                                exclusive=exclusive)
            elif is_blockdev(disk):
                block_device(check_adopted(disk, what), what)

    async def assemble(self, disk: Disk, what: str) -> tuple[str | None, str | None]:
        """Attach and open an ext volume (an adopted device: check it);
        C{(device path, kvm URI)}: the URI only for C{access=userspace},
        the path C{None} when the provider gave none (then a URI is needed)."""
        if is_blockdev(disk):
            return block_device(check_adopted(disk, what), what), None
        await self.prepare([disk], what)
        name, volume, params = check_ext(disk, what)
        dev_path, uris = self.attached.get((name, volume), (None, []))
        uri = es.kvm_uri(uris) if params.get(es.PARAM_ACCESS) == es.ACCESS_USER else None
        if dev_path is None and uri is None:
            raise RpcFailure("%s: volume %s of ExtStorage provider %s has no block device (access=%s)"
                             % (what, volume, name, params.get(es.PARAM_ACCESS) or es.ACCESS_KERNEL))
        return dev_path, uri

    async def shutdown(self, disk: Disk, what: str) -> str | None:
        """Detach an ext volume (Ganeti's C{Shutdown}: the C{detach} script;
        an adopted device: nothing); the device it had, if this node knows it."""
        if is_blockdev(disk):
            check_adopted(disk, what)
            return None
        provider, volume, params = self._prepare(disk, what)
        await self._run(provider, es.DETACH, volume, params, "%s: detach of volume %s" % (what, volume),
                        name=disk.name, uuid=disk.uuid)
        dev_path, _uris = self.attached.pop((provider.name, volume), (None, []))
        return dev_path

    def device(self, disk: Disk, what: str) -> str:
        """What the hypervisor opens for the disk: the adopted device, or
        the device (kernelspace) or C{kvm:} URI (userspace) the last attach
        gave."""
        if is_blockdev(disk):
            return block_device(check_adopted(disk, what), what)
        name, volume, params = check_ext(disk, what)
        found = self.attached.get((name, volume))
        if found is None:
            raise RpcFailure("%s: volume %s of ExtStorage provider %s is not attached" % (what, volume, name))
        dev_path, uris = found
        if params.get(es.PARAM_ACCESS) == es.ACCESS_USER:
            uri = es.kvm_uri(uris)
            if uri is not None:
                return uri
        if dev_path is None:
            raise RpcFailure("%s: volume %s of ExtStorage provider %s has no block device (access=%s)"
                             % (what, volume, name, params.get(es.PARAM_ACCESS) or es.ACCESS_KERNEL))
        return dev_path

    def diagnose(self) -> list[list[Any]]:
        return es.diagnose(self.paths.root)
