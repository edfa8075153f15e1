"""noded's instance procedures: hypervisor, node storage and OS scripts.

The procedures and their arguments are declared in
L{ganeti.rpc.procedures}; the C{INST_DICT} encoding and where disks live
are in the docstring of L{ganeti.rpc.instances}.  Every
procedure checks all of its input before it changes anything and refuses
bad input with L{RpcFailure}.  Hypervisor methods may answer with a
Deferred; they are called through C{maybeDeferred}.

File disks: the node's storage directories are the cluster's
(C{ssconf_file_storage_dir}, C{ssconf_shared_file_storage_dir}) under the
node root, or the node's defaults when ssconf lacks them; a disk lives at
C{node_path(root, logical_id[1])} and must lie inside its directory.
"""

from __future__ import annotations

import inspect
import os
import re
from typing import Any, Callable, cast

from twisted.internet import defer
from twisted.logger import Logger

from ganeti import errors, ssconf
from ganeti.backend import hypervisor as hv
from ganeti.backend import osapi, storage
from ganeti.noded import extstorage as ext_disks
from ganeti.noded import rbd as rbd_disks
from ganeti.noded import storage_units
from ganeti.noded.dispatch import handler
from ganeti.noded.failure import RpcFailure
from ganeti.objects import NIC, Disk, Instance
from ganeti.reactors import IReactor
from ganeti.rpc import procedures
from ganeti.rpc.instances import decode_instance, node_path

#: the most memory an instance may be ballooned to (MiB: 16 TiB)
MAX_MEMORY_MIB = 16 * 1024 * 1024
REBOOT_SOFT = "soft"
REBOOT_HARD = "hard"
REBOOT_FULL = "full"
REBOOT_TYPES = (REBOOT_SOFT, REBOOT_HARD, REBOOT_FULL)

#: seconds an instance gets to stop cleanly when the caller gives none
DEFAULT_SHUTDOWN_TIMEOUT = 120
#: longest shutdown timeout accepted, seconds
MAX_SHUTDOWN_TIMEOUT = 24 * 3600
#: largest disk or growth accepted, MiB (1 PiB)
MAX_DISK_MIB = 1 << 30
#: highest disk index accepted
MAX_DISK_INDEX = 1023
#: the directory, in the run directory, of the links C{blockdev_assemble} makes
DISK_LINKS_DIR = "instance-disks"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")
_DISK_MODES = (None, "rw", "ro")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise RpcFailure(message)


def _name(value: Any, what: str = "instance name") -> str:
    _check(isinstance(value, str) and bool(_NAME_RE.match(value)), "Invalid %s %.100r" % (what, value))
    return cast("str", value)


def _flag(value: Any, what: str) -> bool:
    """A boolean argument (C{None} and 0/1 accepted as false/true)."""
    if value is None:
        return False
    _check(isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)),
           "%s must be a boolean, not %.100r" % (what, value))
    return bool(value)


def _integer(value: Any, what: str, low: int, high: int) -> int:
    _check(isinstance(value, int) and not isinstance(value, bool) and low <= value <= high,
           "%s must be an integer between %d and %d, not %.100r" % (what, low, high, value))
    return cast("int", value)


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    _check(isinstance(value, dict), "%s must be a dict, not %.100r" % (what, value))
    return cast("dict[str, Any]", value)


def _names(value: Any, what: str) -> list[str]:
    _check(isinstance(value, list) and all(isinstance(v, str) for v in value),
           "%s must be a list of names, not %.100r" % (what, value))
    return cast("list[str]", value)


def _reason(value: Any) -> None:
    _check(value is None or isinstance(value, list), "reason must be a list (the reason trail)")


def _check_disk(disk: Disk, what: str) -> Disk:
    _check(isinstance(disk.dev_type, str), "%s has no dev_type" % what)
    _check(disk.dev_type in storage.TEMPLATES or rbd_disks.is_rbd(disk) or ext_disks.handles(disk),
           "%s: disk template %r is not supported on this node" % (what, disk.dev_type))
    _check(disk.mode in _DISK_MODES, "%s: invalid access mode %.100r" % (what, disk.mode))
    _check(disk.size is None or (isinstance(disk.size, int) and not isinstance(disk.size, bool)),
           "%s: invalid size %.100r" % (what, disk.size))
    for field in ("uuid", "name", "iv_name"):
        value = getattr(disk, field)
        _check(value is None or isinstance(value, str), "%s: invalid %s %.100r" % (what, field, value))
    if rbd_disks.is_rbd(disk):
        rbd_disks.check(disk, what)
    elif ext_disks.is_ext(disk):
        ext_disks.check_ext(disk, what)
    elif ext_disks.is_blockdev(disk):
        ext_disks.check_adopted(disk, what)
    elif disk.dev_type != storage.DT_DISKLESS:
        lid = disk.logical_id
        _check(isinstance(lid, list) and len(lid) == 2 and isinstance(lid[0], str) and isinstance(lid[1], str)
               and lid[1].startswith("/") and "\0" not in lid[1],
               "%s: logical_id must be [driver, absolute path], not %.100r" % (what, lid))
    return disk


def decode_disk(data: Any, what: str = "disk") -> Disk:
    """The L{Disk} record of a disk dict argument, checked.
    @raise RpcFailure: not a usable disk description
    """
    _check(isinstance(data, dict), "%s must be a disk dict, not %.100r" % (what, data))
    try:
        disk = Disk.from_dict(data)
    except (TypeError, ValueError, AttributeError) as exc:
        raise RpcFailure("Invalid %s: %s" % (what, exc)) from None
    return _check_disk(disk, what)


def decode(data: Any) -> tuple[Instance, list[Disk]]:
    """An C{INST_DICT} argument, checked: the instance and its disks (the
    disks are checked where they are used).
    @raise RpcFailure: not a usable instance description
    """
    try:
        instance, disks = decode_instance(data)
    except (TypeError, ValueError, AttributeError) as exc:
        raise RpcFailure("Invalid instance: %s" % (exc,)) from None
    name = _name(instance.name)
    _check(isinstance(instance.hypervisor, str) and bool(instance.hypervisor),
           "Instance %s has no hypervisor" % name)
    _check(instance.os is None or isinstance(instance.os, str), "Instance %s: invalid OS %.100r" % (name, instance.os))
    _check(instance.uuid is None or isinstance(instance.uuid, str), "Instance %s: invalid uuid" % name)
    for field in ("hvparams", "beparams", "osparams", "osparams_private"):
        _check(isinstance(getattr(instance, field), dict), "Instance %s: %s must be a dict" % (name, field))
    _check(isinstance(instance.nics, list) and all(isinstance(n, NIC) for n in instance.nics),
           "Instance %s: nics must be a list of NIC dicts" % name)
    for index, nic in enumerate(instance.nics):
        _check(isinstance(nic.nicparams, dict), "Instance %s: NIC %d has invalid nicparams" % (name, index))
        _check(nic.mac is None or isinstance(nic.mac, str), "Instance %s: NIC %d has an invalid MAC" % (name, index))
    return instance, disks


def _accepts_keyword(method: Callable[..., Any], keyword: str) -> bool:
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return keyword in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


#: seconds an instance procedure waits for the node's state report it asked for (L{InstanceProcedures.state_changed})
REPORT_WAIT = 5.0


class InstanceProcedures:
    """The instance procedures of the node rooted at C{paths.root}.

    @param get_hypervisor: C{(name, paths, reactor) -> hypervisor}
        (default: L{ganeti.backend.hypervisor.get_hypervisor})
    @param os_timeouts: seconds per OS script, overriding L{osapi.TIMEOUTS}
    """

    log = Logger()

    def __init__(self, paths: Any, reactor: IReactor, *, get_hypervisor: Callable[..., Any] | None = None,
                 os_timeouts: dict[str, float] | None = None) -> None:
        self.paths = paths
        self._reactor = reactor
        self._get_hypervisor = get_hypervisor or hv.get_hypervisor
        self.os_runner = osapi.OSRunner(paths, reactor, os_timeouts)
        self.rbd = rbd_disks.RbdDisks(paths.root, reactor)
        self.ext = ext_disks.ExtDisks(paths, reactor)
        #: called once a procedure changed what runs here (NodeD's heartbeat reports it at once); may return
        #: a Deferred (NodeD's fires once LuxiD has handled the report), awaited for at most L{REPORT_WAIT}
        #: seconds before the procedure answers
        self.state_changed: Callable[[], Any] = lambda: None

    # --- helpers ---------------------------------------------------------------------

    def hypervisor(self, name: Any) -> Any:
        try:
            return self._get_hypervisor(name, self.paths, self._reactor)
        except errors.GenericError as exc:
            raise RpcFailure(str(exc)) from None

    async def _reported(self) -> None:
        """Have the node's state reported now (L{state_changed}); wait a bounded time for it."""
        d = defer.maybeDeferred(self.state_changed)
        d.addTimeout(REPORT_WAIT, self._reactor)
        try:
            await d
        except Exception as e:  # the report is a courtesy: the procedure's own outcome stands
            self.log.info("the state report after an instance change failed: {why}", why=str(e))

    async def _hv_call(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return await defer.maybeDeferred(method, *args, **kwargs)
        except errors.GenericError as exc:
            raise RpcFailure("%s: %s" % (what, exc)) from None

    async def _running_info(self, hyper: Any, name: str | None) -> dict[str, Any] | None:
        info = await self._hv_call("Cannot get the state of instance %s" % name, hyper.get_instance_info, name)
        return info if isinstance(info, dict) and info else None

    def storage_dirs(self) -> tuple[str, str]:
        """The node's file and sharedfile storage directories."""
        store = ssconf.SimpleStore(self.paths)
        found = []
        for key, default in (("file_storage_dir", self.paths.file_storage_dir),
                             ("shared_file_storage_dir", self.paths.shared_file_storage_dir)):
            try:
                value = store.get_value(key).strip()
            except errors.ConfigurationError:
                value = ""
            found.append(node_path(self.paths.root, value) if value.startswith("/") else default)
        return found[0], found[1]

    def locate(self, disk: Disk, what: str = "disk") -> tuple[Any, str]:
        """The storage driver of a file disk and its path on this node.
        @raise RpcFailure: an unsupported template or a path outside the
            storage directory
        """
        _check(disk.dev_type in (storage.DT_FILE, storage.DT_SHARED_FILE),
               "%s: disk template %r has no disks on this node" % (what, disk.dev_type))
        file_dir, shared_dir = self.storage_dirs()
        driver = storage.for_template(disk.dev_type or "", self.paths, file_dir, shared_dir)
        path = node_path(self.paths.root, disk.logical_id[1])
        try:
            driver.check_path(path)
        except errors.OpExecError as exc:
            raise RpcFailure("%s refused: %s" % (what, exc)) from None
        return driver, path

    def _disk_paths(self, instance: Instance, disks: list[Disk]) -> list[tuple[Disk, str]]:
        """C{(disk, real path)} of each disk that exists on this node."""
        found = []
        for index, disk in enumerate(disks):
            if disk.dev_type == storage.DT_DISKLESS:
                continue
            what = "disk %d of instance %s" % (index, instance.name)
            if rbd_disks.is_rbd(disk):
                found.append((disk, self.rbd.device(_check_disk(disk, what), what)))
                continue
            if ext_disks.handles(disk):
                found.append((disk, self.ext.device(_check_disk(disk, what), what)))
                continue
            driver, path = self.locate(_check_disk(disk, what), what)
            try:
                found.append((disk, driver.hypervisor_path(path)))
            except errors.OpExecError as exc:
                raise RpcFailure("Cannot use %s: %s" % (what, exc)) from None
        return found

    def block_devices(self, instance: Instance, disks: list[Disk]) -> list[tuple[Disk, str, str | None]]:
        """The C{(disk, path, uri)} triples the hypervisor starts C{instance} with."""
        return [(disk, path, None if path.startswith("/") else path)  # a URI: opened by the hypervisor
                for disk, path in self._disk_paths(instance, disks)]

    async def _start(self, hyper: Any, instance: Instance, devices: list[Any], paused: bool) -> None:
        await self._hv_call("Could not start instance %s" % instance.name,
                            hyper.start_instance, instance, devices, paused)
        await self._reported()  # running here now: LuxiD's next query must not read the report from before

    async def _stop(self, hyper: Any, instance: Instance, timeout: int) -> None:
        if await self._running_info(hyper, instance.name) is None:
            return
        try:
            await self._hv_call("Could not shut down instance %s" % instance.name,
                                hyper.stop_instance, instance, False, timeout)
        except RpcFailure:
            if await self._running_info(hyper, instance.name) is not None:
                raise  # it stopped meanwhile otherwise: that is what was asked
        await self._reported()  # stopped: reported before the procedure answers, as a start is

    # --- lifecycle -------------------------------------------------------------------

    @handler(procedures.instance_start)
    async def instance_start(self, inst: Any, startup_paused: Any = False, reason: Any = None) -> None:
        """Start the instance; one already running is left alone, one whose
        guest powered itself off (state L{hv.STATE_SHUTDOWN}) is handed to
        the hypervisor, which replaces it."""
        instance, disks = decode(inst)
        paused = _flag(startup_paused, "startup_paused")
        _reason(reason)
        hyper = self.hypervisor(instance.hypervisor)
        await self.ext.prepare(disks, "Cannot start instance %s" % instance.name)
        self.block_devices(instance, disks)  # every disk usable here, before anything is mapped
        await self.rbd.prepare(disks, "Cannot start instance %s" % instance.name)
        devices = self.block_devices(instance, disks)
        info = await self._running_info(hyper, instance.name)
        if info is not None and info.get("state") != hv.STATE_SHUTDOWN:
            self.log.info("instance {name} already runs; not started again", name=instance.name)
            return None
        await self._start(hyper, instance, devices, paused)
        self.log.info("instance {name} started", name=instance.name)
        return None

    @handler(procedures.instance_shutdown)
    async def instance_shutdown(self, inst: Any, timeout: Any = DEFAULT_SHUTDOWN_TIMEOUT, reason: Any = None) -> None:
        instance, _disks = decode(inst)
        seconds = DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else _integer(timeout, "timeout", 0, MAX_SHUTDOWN_TIMEOUT)
        _reason(reason)
        hyper = self.hypervisor(instance.hypervisor)
        await self._stop(hyper, instance, seconds)
        return None

    @handler(procedures.instance_reboot)
    async def instance_reboot(self, inst: Any, reboot_type: Any, shutdown_timeout: Any = DEFAULT_SHUTDOWN_TIMEOUT,
                              reason: Any = None) -> None:
        instance, disks = decode(inst)
        _check(reboot_type in REBOOT_TYPES,
               "reboot_type must be one of %s, not %.100r" % (", ".join(REBOOT_TYPES), reboot_type))
        seconds = (DEFAULT_SHUTDOWN_TIMEOUT if shutdown_timeout is None
                   else _integer(shutdown_timeout, "shutdown_timeout", 0, MAX_SHUTDOWN_TIMEOUT))
        _reason(reason)
        hyper = self.hypervisor(instance.hypervisor)
        if reboot_type == REBOOT_FULL:
            await self.ext.prepare(disks, "Cannot reboot instance %s" % instance.name)
        devices = self.block_devices(instance, disks) if reboot_type == REBOOT_FULL else []
        if devices:
            await self.rbd.prepare(disks, "Cannot reboot instance %s" % instance.name)
            devices = self.block_devices(instance, disks)
        if await self._running_info(hyper, instance.name) is None:
            raise RpcFailure("Cannot reboot instance %s: it is not running" % instance.name)
        if reboot_type == REBOOT_FULL:
            await self._stop(hyper, instance, seconds)
            await self._start(hyper, instance, devices, False)
        else:
            await self._hv_call("Could not reboot instance %s" % instance.name, hyper.reboot_instance, instance)
            await self._reported()  # its uptime starts again
        return None

    @handler(procedures.instance_balloon_memory)
    async def instance_balloon_memory(self, inst: Any, memory: Any) -> None:
        instance, _disks = decode(inst)
        mib = _integer(memory, "memory", 1, MAX_MEMORY_MIB)
        hyper = self.hypervisor(instance.hypervisor)
        if await self._running_info(hyper, instance.name) is None:
            raise RpcFailure("Cannot balloon the memory of instance %s: it is not running" % instance.name)
        _check(hasattr(hyper, "balloon_instance_memory"),
               "hypervisor %s cannot change the memory of a running instance" % instance.hypervisor)
        await self._hv_call("Cannot balloon the memory of instance %s to %d MiB" % (instance.name, mib),
                            hyper.balloon_instance_memory, instance, mib)
        await self._reported()  # its memory as reported
        return None

    # --- queries ---------------------------------------------------------------------

    @handler(procedures.instance_list)
    async def instance_list(self, hypervisor_names: Any, hvparams_by_hv: Any = None) -> list[str]:
        names = _names(hypervisor_names, "hypervisor_list")
        _mapping(hvparams_by_hv, "hvparams")
        hypers = [(name, self.hypervisor(name)) for name in names]
        found: set[str] = set()
        for name, hyper in hypers:
            listed = await self._hv_call("Cannot list the instances of hypervisor %s" % name, hyper.list_instances)
            found.update(listed or ())
        return sorted(found)

    @handler(procedures.instance_info)
    async def instance_info(self, name: Any, hypervisor: Any, hvparams: Any = None) -> dict[str, Any]:
        _name(name)
        _mapping(hvparams, "hvparams")
        hyper = self.hypervisor(hypervisor)
        return await self._running_info(hyper, name) or {}

    @handler(procedures.all_instances_info)
    async def all_instances_info(self, hypervisor_names: Any, hvparams_by_hv: Any = None) -> dict[str, dict[str, Any]]:
        names = _names(hypervisor_names, "hypervisor_list")
        _mapping(hvparams_by_hv, "hvparams")
        hypers = [(name, self.hypervisor(name)) for name in names]
        result: dict[str, Any] = {}
        for name, hyper in hypers:
            infos = await self._hv_call("Cannot get the instances of hypervisor %s" % name,
                                        hyper.get_all_instances_info)
            for instance_name, info in (infos or {}).items():
                result.setdefault(instance_name, info)
        return result

    @handler(procedures.instance_console_info)
    async def instance_console_info(self, inst: Any) -> dict[str, Any]:
        instance, _disks = decode(inst)
        hyper = self.hypervisor(instance.hypervisor)
        info: dict[str, Any] = await self._hv_call("Cannot get the console of instance %s" % instance.name,
                                                   hyper.get_console_info, instance)
        return info

    # --- migration -------------------------------------------------------------------

    @handler(procedures.migration_info)
    async def migration_info(self, inst: Any) -> Any:
        instance, _disks = decode(inst)
        hyper = self.hypervisor(instance.hypervisor)
        return await self._hv_call("Cannot prepare the migration of instance %s" % instance.name,
                                   hyper.migration_info, instance)

    @handler(procedures.accept_instance)
    async def accept_instance(self, inst: Any, info: Any, target_ip: Any) -> None:
        instance, disks = decode(inst)
        _check(isinstance(target_ip, str) and bool(target_ip), "target_ip must be an address")
        hyper = self.hypervisor(instance.hypervisor)
        await self.ext.prepare(disks, "Cannot accept instance %s" % instance.name, exclusive=False)
        self._disk_paths(instance, disks)  # the disks must be reachable here
        await self.rbd.prepare(disks, "Cannot accept instance %s" % instance.name)
        await self._hv_call("Cannot accept instance %s" % instance.name,
                            hyper.accept_instance, instance, info, target=target_ip)
        await self._reported()  # the incoming qemu: its event monitor watched from now on
        return None

    @handler(procedures.instance_migrate)
    async def instance_migrate(self, cluster_name: Any, inst: Any, target_ip: Any, live: Any = True) -> None:
        _check(isinstance(cluster_name, str), "cluster_name must be a string")
        instance, _disks = decode(inst)
        _check(isinstance(target_ip, str) and bool(target_ip), "target_ip must be an address")
        live_flag = _flag(live, "live")
        hyper = self.hypervisor(instance.hypervisor)
        extra = {"live": live_flag} if _accepts_keyword(hyper.migrate_instance, "live") else {}
        await self._hv_call("Could not migrate instance %s" % instance.name,
                            hyper.migrate_instance, instance, target_ip, **extra)
        return None

    @handler(procedures.instance_get_migration_status)
    async def instance_get_migration_status(self, inst: Any) -> dict[str, Any]:
        instance, _disks = decode(inst)
        hyper = self.hypervisor(instance.hypervisor)
        status = await self._hv_call("Cannot get the migration status of instance %s" % instance.name,
                                     hyper.get_migration_status, instance)
        _check(isinstance(status, dict) and isinstance(status.get("status"), str),
               "The hypervisor gave no migration status for instance %s" % instance.name)
        return cast("dict[str, Any]", status)

    @handler(procedures.instance_finalize_migration_dst)
    async def instance_finalize_migration_dst(self, inst: Any, info: Any, success: Any) -> None:
        instance, _disks = decode(inst)
        ok = _flag(success, "success")
        hyper = self.hypervisor(instance.hypervisor)
        try:
            await self._hv_call("Could not finalize the migration of instance %s here" % instance.name,
                                hyper.finalize_migration, instance, info, ok)
        finally:
            await self._reported()  # running here now (or gone): reported before the migration job ends
        return None

    @handler(procedures.instance_finalize_migration_src)
    async def instance_finalize_migration_src(self, inst: Any, success: Any, live: Any = True) -> None:
        instance, _disks = decode(inst)
        ok = _flag(success, "success")
        _flag(live, "live")
        hyper = self.hypervisor(instance.hypervisor)
        try:
            await self._hv_call("Could not finalize the migration of instance %s here" % instance.name,
                                hyper.finalize_migration, instance, None, ok)
        finally:
            await self._reported()
        return None

    # --- block devices ---------------------------------------------------------------

    @handler(procedures.blockdev_create)
    def blockdev_create(self, disk: Any, size: Any, owner: Any = None, on_primary: Any = True, info: Any = "",
                        exclusive_storage: Any = False) -> str:
        """Create a file disk; the path it has on this node."""
        record = decode_disk(disk)
        mib = _integer(size, "size", 1, MAX_DISK_MIB)
        _check(owner is None or isinstance(owner, str), "owner must be an instance name")
        _flag(on_primary, "on_primary")
        _check(info is None or isinstance(info, str), "info must be a string")
        _check(not _flag(exclusive_storage, "exclusive_storage"),
               "exclusive storage is not supported by disk template %s" % record.dev_type)
        _check(record.dev_type != storage.DT_DISKLESS, "a diskless disk cannot be created")
        if rbd_disks.is_rbd(record):
            return self.rbd.create(record, mib)  # type: ignore[return-value]  # a coroutine: noded awaits it
        if ext_disks.handles(record):
            return self.ext.create(record, mib, info)  # type: ignore[return-value]  # a coroutine: noded awaits it
        driver, path = self.locate(record)
        try:
            driver.create(path, mib)
        except errors.OpExecError as exc:
            raise RpcFailure("Cannot create disk: %s" % exc) from None
        self.log.info("created disk {path} ({size} MiB) for {owner}", path=path, size=mib, owner=owner)
        return path

    @handler(procedures.blockdev_remove)
    def blockdev_remove(self, disk: Any) -> None:
        """Remove a file disk; one already gone (or diskless) succeeds."""
        record = decode_disk(disk)
        if record.dev_type == storage.DT_DISKLESS:
            return None
        if rbd_disks.is_rbd(record):
            return self.rbd.remove(record)  # type: ignore[return-value]  # a coroutine: noded awaits it
        if ext_disks.handles(record):
            return self.ext.remove(record)  # type: ignore[return-value]  # a coroutine: noded awaits it
        driver, path = self.locate(record)
        try:
            driver.remove(path)
        except errors.OpExecError as exc:
            raise RpcFailure("Cannot remove disk: %s" % exc) from None
        return None

    @handler(procedures.blockdev_snapshot)
    def blockdev_snapshot(self, disk: Any, snap_name: Any = None, snap_size: Any = None) -> list[str]:
        """Snapshot an rbd disk (C{rbd snap create}) or an ext disk (its provider's C{snapshot})."""
        record = decode_disk(disk)
        _check(rbd_disks.is_rbd(record) or ext_disks.is_ext(record),
               "Disk template %s has no snapshots here" % record.dev_type)
        if ext_disks.is_ext(record):
            _check(snap_name is None or isinstance(snap_name, str), "A snapshot name must be a string")
            _check(snap_size is None or (isinstance(snap_size, int) and not isinstance(snap_size, bool)
                                         and snap_size > 0), "A snapshot size must be a positive number of MiB")
            return self.ext.snapshot(record, snap_name, snap_size)  # type: ignore[return-value]  # a coroutine
        _check(isinstance(snap_name, str) and bool(snap_name), "A snapshot needs a name")
        return self.rbd.snapshot(record, snap_name)  # type: ignore[return-value]  # a coroutine: noded awaits it

    @handler(procedures.blockdev_snapshot_remove)
    def blockdev_snapshot_remove(self, disk: Any, snap_name: Any) -> None:
        record = decode_disk(disk)
        _check(rbd_disks.is_rbd(record) or ext_disks.is_ext(record),
               "Disk template %s has no snapshots here" % record.dev_type)
        _check(isinstance(snap_name, str) and bool(snap_name), "A snapshot needs a name")
        if ext_disks.is_ext(record):
            return self.ext.snapshot_remove(record, snap_name)  # type: ignore[return-value]  # a coroutine
        return self.rbd.snapshot_remove(record, snap_name)  # type: ignore[return-value]  # a coroutine

    @handler(procedures.blockdev_grow)
    def blockdev_grow(self, disk: Any, amount: Any, dryrun: Any = False, backingstore: Any = True,
                      exclusive_storage: Any = False) -> None:
        """Grow a file disk by C{amount} MiB.

        As in Ganeti, only the call with C{backingstore} true grows a file;
        the logical step (C{backingstore} false) leaves it as it is.
        """
        record = decode_disk(disk)
        mib = _integer(amount, "amount", 0, MAX_DISK_MIB)
        dry = _flag(dryrun, "dryrun")
        backing = _flag(backingstore, "backingstore")
        _check(not _flag(exclusive_storage, "exclusive_storage"),
               "exclusive storage is not supported by disk template %s" % record.dev_type)
        _check(record.dev_type != storage.DT_DISKLESS, "a diskless disk cannot grow")
        if rbd_disks.is_rbd(record):
            return self.rbd.grow(record, mib, dry, backing)  # type: ignore[return-value]  # awaited by noded
        if ext_disks.handles(record):
            return self.ext.grow(record, mib, dry, backing)  # type: ignore[return-value]  # awaited by noded
        driver, path = self.locate(record)
        try:
            driver.size(path)  # it must exist, even for a dry run or the logical step
            if backing:
                driver.grow(path, mib, dry)
        except errors.OpExecError as exc:
            raise RpcFailure("Cannot grow disk: %s" % exc) from None
        return None

    def _symlink(self, instance_name: str, index: int, dev_path: str) -> str:
        """Ganeti's C{_SymlinkBlockDev}: C{<run dir>/instance-disks/<instance>:<index>} -> C{dev_path}."""
        directory = os.path.join(self.paths.run_dir, DISK_LINKS_DIR)
        link = os.path.join(directory, "%s:%d" % (instance_name, index))
        try:
            os.makedirs(directory, 0o755, exist_ok=True)
            if os.path.islink(link) and os.readlink(link) == dev_path:
                return link
            if os.path.lexists(link):
                os.remove(link)
            os.symlink(dev_path, link)
        except OSError as exc:
            raise RpcFailure("Error while symlinking disk: %s" % exc) from None
        return link

    @handler(procedures.blockdev_assemble)
    async def blockdev_assemble(self, disk: Any, inst: Any, on_primary: Any, idx: Any) -> list[Any]:
        """Make a disk usable here (see L{procedures.blockdev_assemble}).

        On the primary: a file disk must exist; an rbd disk is mapped
        (kernelspace) or given as its librbd drive (userspace); an ext
        volume is attached and opened; an adopted device must be there.
        Elsewhere nothing happens (nothing here is mirrored): C{[True, True]}.
        """
        record = decode_disk(disk)
        instance, _disks = decode(inst)
        primary = _flag(on_primary, "on_primary")
        index = _integer(idx, "idx", 0, MAX_DISK_INDEX)
        _check(record.dev_type != storage.DT_DISKLESS, "a diskless disk cannot be assembled")
        if not primary:
            return [True, True]
        what = "Cannot assemble disk %d of instance %s" % (index, instance.name)
        if rbd_disks.is_rbd(record):
            dev_path, uri = await self.rbd.assemble(record, what)
        elif ext_disks.handles(record):
            dev_path, uri = await self.ext.assemble(record, what)
        else:
            driver, path = self.locate(record, what)
            try:
                dev_path, uri = driver.hypervisor_path(path), None
            except errors.OpExecError as exc:
                raise RpcFailure("%s: %s" % (what, exc)) from None
        link = self._symlink(instance.name or "", index, dev_path) if dev_path else None
        self.log.info("assembled disk {index} of instance {name}: {path}", index=index, name=instance.name,
                      path=dev_path or uri)
        return [dev_path, link, uri]

    @handler(procedures.blockdev_shutdown)
    async def blockdev_shutdown(self, disk: Any) -> None:
        """Undo C{blockdev_assemble}: detach an ext volume, unmap a
        kernelspace rbd disk, and remove the links to the device they had;
        file, sharedfile, adopted and userspace rbd disks need nothing (a
        file disk must still be a valid one; its links stay, as Ganeti's)."""
        record = decode_disk(disk)
        what = "Cannot shut down disk %s" % (record.iv_name or record.uuid)
        if record.dev_type == storage.DT_DISKLESS:
            return None
        released = None
        if rbd_disks.is_rbd(record):
            released = await self.rbd.shutdown(record, what)
        elif ext_disks.handles(record):
            released = await self.ext.shutdown(record, what)
        else:
            self.locate(record, what)
        if released:
            self._unlink(released)
        return None

    def _unlink(self, dev_path: str) -> None:
        """Remove the links C{blockdev_assemble} made to a device now
        released (the kernel may give its name to another volume)."""
        directory = os.path.join(self.paths.run_dir, DISK_LINKS_DIR)
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for name in names:
            link = os.path.join(directory, name)
            try:
                if os.path.islink(link) and os.readlink(link) == dev_path:
                    os.remove(link)
            except OSError as exc:
                self.log.warn("could not remove the disk link {link}: {why}", link=link, why=exc)

    @handler(procedures.blockdev_getdimensions)
    def blockdev_getdimensions(self, disks: Any) -> list[list[Any] | None]:
        """C{[size in bytes, spindles (None)]} of each file disk, C{None} for
        one that does not exist here (Ganeti's answer)."""
        _check(isinstance(disks, list), "disks must be a list")
        out: list[list[Any] | None] = []
        remote: list[tuple[int, Disk]] = []
        external: list[tuple[int, Disk]] = []
        for index, data in enumerate(disks):
            record = decode_disk(data, "disk %d" % index)
            if record.dev_type == storage.DT_DISKLESS:
                out.append(None)
                continue
            if rbd_disks.is_rbd(record):
                rbd_disks.check(record, "disk %d" % index)
                remote.append((index, record))
                out.append(None)
                continue
            if ext_disks.handles(record):
                external.append((index, record))
                out.append(None)
                continue
            driver, path = self.locate(record, "disk %d" % index)
            try:
                out.append([os.stat(driver.hypervisor_path(path)).st_size, None])
            except (errors.OpExecError, OSError):
                out.append(None)
        if remote or external:
            return self._remote_dimensions(out, remote, external)  # type: ignore[return-value]  # awaited by noded
        return out

    async def _remote_dimensions(self, out: list[list[Any] | None], remote: list[tuple[int, Disk]],
                                 external: list[tuple[int, Disk]]) -> Any:
        for index, record in remote:
            try:
                out[index] = await self.rbd.dimensions(record)
            except RpcFailure:
                out[index] = None
        for index, record in external:
            out[index] = await self.ext.dimensions(record)
        return out

    @handler(procedures.storage_list)
    def storage_list(self, su_name: Any, su_args: Any, name: Any, fields: Any) -> list[list[Any]]:
        """The storage units of a type (L{ganeti.noded.storage_units})."""
        kind, key, unit, wanted = storage_units.check(su_name, su_args, name, fields)
        if kind == storage_units.RADOS:
            return storage_units.rados_units(self.rbd.client, key, unit, wanted)  # type: ignore[return-value]
        return storage_units.file_units(self.paths.root, key, unit, wanted)

    @handler(procedures.extstorage_diagnose)
    def extstorage_diagnose(self) -> list[list[Any]]:
        """The ExtStorage providers of this node (L{ganeti.backend.storage.extstorage.diagnose})."""
        return self.ext.diagnose()

    @handler(procedures.bdev_sizes)
    def bdev_sizes(self, devices: Any) -> dict[str, int]:
        """C{{path: MiB}} of the C{devices} that are block devices under C{/dev/}."""
        _check(isinstance(devices, list) and all(isinstance(d, str) for d in devices),
               "devices must be a list of paths")
        return ext_disks.bdev_sizes(devices)

    # --- OS scripts ------------------------------------------------------------------

    def _os(self, instance: Instance) -> tuple[osapi.OSDefinition, str]:
        _check(isinstance(instance.os, str) and bool(instance.os), "Instance %s has no OS" % instance.name)
        try:
            return osapi.find(self.paths, instance.os or "")
        except osapi.InvalidOS as exc:
            raise RpcFailure(str(exc)) from None

    async def _run_os_script(self, instance: Instance, disks: list[Disk], script: str, debug: Any,
                             extra: dict[str, str]) -> None:
        level = int(debug) if isinstance(debug, bool) else _integer(debug, "debug", 0, 10)
        definition, variant = self._os(instance)
        try:
            definition.script(script)
        except osapi.InvalidOS as exc:
            raise RpcFailure(str(exc)) from None
        await self.ext.prepare(disks, "Cannot run the OS scripts of instance %s" % instance.name)
        disk_paths = self._disk_paths(instance, disks)
        for _disk, path in disk_paths:
            _check(path.startswith("/"), "Cannot run the OS scripts of instance %s: disk %s is opened by the"
                   " hypervisor itself (%s), not a device on this node" % (instance.name, _disk.iv_name, path))
        env = osapi.script_environment(definition, variant, instance, disk_paths, level, extra)
        try:
            await self.os_runner.run(definition, script, env, instance.name or "", instance.os or "")
        except errors.OpExecError as exc:
            raise RpcFailure(str(exc)) from None

    @handler(procedures.instance_os_add)
    async def instance_os_add(self, inst: Any, reinstall: Any = False, debug: Any = 0) -> None:
        """Run the OS's create script for the instance."""
        instance, disks = decode(inst)
        extra = {"INSTANCE_REINSTALL": "1"} if _flag(reinstall, "reinstall") else {}
        await self._run_os_script(instance, disks, osapi.SCRIPT_CREATE, debug, extra)
        return None

    @handler(procedures.instance_run_rename)
    async def instance_run_rename(self, inst: Any, old_name: Any, debug: Any = 0) -> None:
        """Run the OS's rename script (the instance already has its new name)."""
        instance, disks = decode(inst)
        old = _name(old_name, "old instance name")
        await self._run_os_script(instance, disks, osapi.SCRIPT_RENAME, debug, {"OLD_INSTANCE_NAME": old})
        return None

    @handler(procedures.os_diagnose)
    def os_diagnose(self) -> list[list[Any]]:
        return osapi.diagnose(self.paths)

    # --- node_info's hypervisor part -------------------------------------------------

    async def hypervisor_node_info(self, name: Any) -> dict[str, Any]:
        """The memory and CPU figures of hypervisor C{name} on this node."""
        hyper = self.hypervisor(name)
        info = await self._hv_call("Cannot get the node info of hypervisor %s" % name, hyper.get_node_info)
        _check(isinstance(info, dict), "Hypervisor %s gave no node info" % name)
        return dict(info, hv_name=name)
