"""Exports: OP_BACKUP_QUERY, OP_BACKUP_PREPARE, OP_BACKUP_EXPORT, OP_BACKUP_REMOVE,
and what OP_INSTANCE_CREATE in mode C{import} needs (L{read_export}).

An export of instance I on node N is Ganeti's layout: the directory
C{<export dir>/I} on N with C{config.ini} (L{export_config}, Ganeti's
sections and keys, so that Ganeti imports it and we import Ganeti's) and
one dump per disk, named by the disk's UUID, written by the OS's
C{export} script on I's primary node and streamed to N
(L{ganeti.cmdlib.transfer}).  The dumps are stored uncompressed
(C{compression = none}, as Ganeti 3.0 writes); C{compress} only applies on
the wire.

Templates: file, sharedfile, ext and rbd.  rbd disks are exported from
snapshots (C{blockdev_snapshot}, C{rbd snap create}; Ganeti 3.0.2 has
none for rbd), and so are the ext disks of an instance marked up (the
provider's C{snapshot} script makes a volume the export reads, removed
afterwards; with a provider without one, C{shutdown} and C{long_sleep}
export the stopped instance instead): the instance may keep running
(C{shutdown} false), or, as
Ganeti does with snapshots, is stopped only while they are taken and
started again before the copy; the OS's export script reads the snapshot
through C{rbd export} (L{ganeti.noded.stream.DevicePipe}) and the
snapshots are removed afterwards, also on failure.  File disks have no
snapshots: as in Ganeti, an instance marked up that is not
removed afterwards is exported only with C{shutdown} and C{long_sleep}
(it stays stopped for the whole copy, then starts again).

An export is written into C{I.new} and renamed into place only when every
disk arrived: a failed or canceled export leaves the previous export (if
any) as it was and nothing of the new one.

Mode C{remote} (exports to another cluster, driven by C{move-instance})
is L{ganeti.cmdlib.backup_remote}; C{zero_free_space} (a helper VM booted
from the cluster's zeroing image) is refused with a clear error, after
Ganeti's checks of its arguments.
"""

from __future__ import annotations

import configparser
import io
import time
from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import backup_remote, transfer
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    Feedback,
    LogicalUnit,
    expand_node,
    register,
)
from ganeti.objects import ConfigData, Disk, Instance
from ganeti.opcodes.typed import (
    OpBackupExport,
    OpBackupPrepare,
    OpBackupQuery,
    OpBackupRemove,
    OpCode,
    OpInstanceCreate,
)
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

EXPORT_VERSION = 0
EXPORT_CONF_FILE = "config.ini"
SEC_EXPORT, SEC_INSTANCE, SEC_HYP, SEC_BEP, SEC_OSP, SEC_OSP_PRIVATE = (
    "export", "instance", "hypervisor", "backend", "os", "os_private")
#: NIC parameters Ganeti writes per NIC
NIC_PARAMS = ("mode", "link", "vlan")
#: hypervisor parameters that are cluster-wide, not written (Ganeti's HVC_GLOBALS)
HV_GLOBALS = ("migration_port", "migration_bandwidth", "migration_mode")
#: timeout of the export RPCs that only touch directories
TMO_EXPORT = 300
#: the templates whose disks are exported: through the OS's export script,
#: rbd images from snapshots (ours: Ganeti 3.0.2 has no rbd snapshots)
EXPORTABLE = (iu.DT_FILE, iu.DT_SHARED_FILE, iu.DT_RBD, iu.DT_EXT)
#: how noded refuses to snapshot the volume of an ExtStorage provider without a snapshot script
NO_SNAPSHOT_SCRIPT = "has no snapshot script"


class _CaseParser(configparser.RawConfigParser):
    """Option names kept as written (Ganeti's exports are case-sensitive)."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


def export_config(cfg: ConfigData, inst: Instance, disks: list[Disk], now: float | None = None) -> str:
    """C{config.ini} of an export of C{inst} with C{disks}, in Ganeti's format."""
    parser = _CaseParser()
    bep = rpc_inst.filled_beparams(cfg, inst)
    hvp = rpc_inst.filled_hvparams(cfg, inst)
    parser.add_section(SEC_EXPORT)
    parser.set(SEC_EXPORT, "version", str(EXPORT_VERSION))
    parser.set(SEC_EXPORT, "timestamp", "%d" % int(time.time() if now is None else now))
    parser.set(SEC_EXPORT, "source", iu.node_name(cfg, inst.primary_node))
    parser.set(SEC_EXPORT, "os", inst.os or "")
    parser.set(SEC_EXPORT, "compression", "none")
    parser.add_section(SEC_INSTANCE)
    parser.set(SEC_INSTANCE, "name", inst.name or "")
    parser.set(SEC_INSTANCE, "maxmem", "%d" % bep.get("maxmem", 128))
    parser.set(SEC_INSTANCE, "minmem", "%d" % bep.get("minmem", bep.get("maxmem", 128)))
    parser.set(SEC_INSTANCE, "memory", "%d" % bep.get("maxmem", 128))
    parser.set(SEC_INSTANCE, "vcpus", "%d" % bep.get("vcpus", 1))
    parser.set(SEC_INSTANCE, "disk_template", inst.disk_template or "diskless")
    parser.set(SEC_INSTANCE, "hypervisor", inst.hypervisor or "")
    parser.set(SEC_INSTANCE, "tags", " ".join(inst.tags or []))
    default_nic = (cfg.cluster.nicparams or {}).get("default") or {}
    for index, nic in enumerate(inst.nics or []):
        params = dict(default_nic, **(nic.nicparams or {}))
        parser.set(SEC_INSTANCE, "nic%d_mac" % index, "%s" % nic.mac)
        parser.set(SEC_INSTANCE, "nic%d_ip" % index, "%s" % nic.ip)
        parser.set(SEC_INSTANCE, "nic%d_network" % index, "%s" % nic.network)
        parser.set(SEC_INSTANCE, "nic%d_name" % index, "%s" % nic.name)
        for param in NIC_PARAMS:
            parser.set(SEC_INSTANCE, "nic%d_%s" % (index, param), "%s" % params.get(param, None))
    parser.set(SEC_INSTANCE, "nic_count", "%d" % len(inst.nics or []))
    for index, disk in enumerate(disks):
        parser.set(SEC_INSTANCE, "disk%d_ivname" % index, "%s" % disk.iv_name)
        parser.set(SEC_INSTANCE, "disk%d_dump" % index, "%s" % disk.uuid)
        parser.set(SEC_INSTANCE, "disk%d_size" % index, "%d" % (disk.size or 0))
        parser.set(SEC_INSTANCE, "disk%d_name" % index, "%s" % disk.name)
    parser.set(SEC_INSTANCE, "disk_count", "%d" % len(disks))
    parser.add_section(SEC_HYP)
    for name, value in sorted(hvp.items()):
        if name not in HV_GLOBALS:
            parser.set(SEC_HYP, name, str(value))
    parser.add_section(SEC_BEP)
    for name, value in sorted(bep.items()):
        parser.set(SEC_BEP, name, str(value))
    parser.add_section(SEC_OSP)
    for name, value in sorted(rpc_inst.filled_osparams(cfg, inst).items()):
        parser.set(SEC_OSP, name, str(value))
    parser.add_section(SEC_OSP_PRIVATE)
    for name, value in sorted((inst.osparams_private or {}).items()):
        parser.set(SEC_OSP_PRIVATE, name, str(value))
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


@attrs.frozen
class ExportInfo:
    """What an import takes from an export's C{config.ini}."""

    name: str
    node_uuid: str
    os: str
    disk_template: str
    hypervisor: str | None
    disks: list[dict[str, Any]]
    dumps: list[str]
    nics: list[dict[str, Any]]
    beparams: dict[str, str]
    hvparams: dict[str, str]
    osparams: dict[str, str]
    osparams_private: dict[str, str]
    tags: list[str]


def _none(value: str | None) -> str | None:
    return None if value in (None, "None", "") else value


def parse_export(text: str, export_name: str, node_uuid: str) -> ExportInfo:
    """Read C{config.ini} text (ours or Ganeti's).
    @raise errors.OpPrereqError: it lacks what an import needs
    """
    parser = _CaseParser()
    try:
        parser.read_string(text)
        if not parser.has_section(SEC_EXPORT) or not parser.has_section(SEC_INSTANCE):
            raise ValueError("Export info file doesn't have the required fields")
        version = parser.getint(SEC_EXPORT, "version")
        if version != EXPORT_VERSION:
            raise ValueError("Wrong export version %s (wanted %d)" % (version, EXPORT_VERSION))
        compression = parser.get(SEC_EXPORT, "compression", fallback="none")
        if compression != "none":
            raise ValueError("stored dumps compressed with %s are not supported" % compression)
        get = lambda key, default=None: parser.get(SEC_INSTANCE, key, fallback=default)  # noqa: E731
        disks, dumps = [], []
        for index in range(int(get("disk_count", "0"))):
            dump = get("disk%d_dump" % index)
            if not dump:
                raise ValueError("disk %d has no dump" % index)
            disk: dict[str, Any] = {"size": int(get("disk%d_size" % index, "0")), "mode": "rw"}
            name = _none(get("disk%d_name" % index))
            if name:
                disk["name"] = name
            disks.append(disk)
            dumps.append(dump)
        nics = []
        for index in range(int(get("nic_count", "0"))):
            nic: dict[str, Any] = {"mac": _none(get("nic%d_mac" % index)) or "auto"}
            for key in ("ip", "network", "name") + NIC_PARAMS:
                value = _none(get("nic%d_%s" % (index, key)))
                if value is not None:
                    nic[key] = value
            nics.append(nic)
        section = lambda name: dict(parser.items(name)) if parser.has_section(name) else {}  # noqa: E731
        beparams = section(SEC_BEP)
        if not beparams and get("memory"):
            beparams = {"maxmem": get("memory"), "minmem": get("memory"), "vcpus": get("vcpus", "1")}
        return ExportInfo(
            name=export_name, node_uuid=node_uuid, os=parser.get(SEC_EXPORT, "os"),
            disk_template=get("disk_template", "file"), hypervisor=_none(get("hypervisor")), disks=disks,
            dumps=dumps, nics=nics, beparams=beparams, hvparams=section(SEC_HYP), osparams=section(SEC_OSP),
            osparams_private=section(SEC_OSP_PRIVATE), tags=(get("tags", "") or "").split(),
        )
    except (configparser.Error, ValueError) as exc:
        raise errors.OpPrereqError("Export %s is not usable: %s" % (export_name, exc), errors.ECODE_INVAL) from None


def _export_name(src_path: str, export_dir: str = "/var/lib/ganeti/export") -> str:
    """The export name in C{src_path} (a name, or a path in the export dir)."""
    if "/" not in src_path:
        return src_path
    path = src_path.rstrip("/")
    head, _, name = path.rpartition("/")
    if head.rstrip("/") != export_dir:
        raise errors.OpPrereqError("Import source path %s is not in the export directory %s" % (src_path, export_dir),
                                   errors.ECODE_INVAL)
    return name


async def read_export(lu: LogicalUnit[OpCode], src_node: str | None, src_path: str) -> ExportInfo:
    """Find and read export C{src_path} on C{src_node} (every node when None)."""
    cfg = lu.cfg
    name = _export_name(src_path)
    if src_node:
        uuids = [expand_node(cfg, src_node).uuid or ""]
        iu.check_node_online(cfg, uuids[0], "Cannot import from node %s: it is offline" % src_node)
    else:
        uuids = sorted(u for u, n in cfg.nodes.items() if not n.offline)
    for uuid in uuids:
        listing = await iu.call_node_result(lu, uuid, procedures.export_list.call())
        if listing.failed or name not in (listing.payload or []):
            continue
        text = await iu.call_node(lu, uuid, procedures.export_info.call(name), what="read export %s" % name)
        return parse_export(text, name, uuid)
    where = ("node %s" % iu.node_name(cfg, uuids[0])) if src_node else "any node"
    raise errors.OpPrereqError("No export '%s' found on %s" % (name, where), errors.ECODE_NOENT)


def _known(values: dict[str, str], types: dict[str, str], defaults: dict[str, Any]) -> dict[str, Any]:
    """The C{values} of keys in C{types} that differ from C{defaults} (as text)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in types and value not in ("None", "") and str(defaults.get(key)) != value:
            out[key] = value
    return out


def fill_from_export(op: OpInstanceCreate, cfg: ConfigData, export: ExportInfo) -> OpInstanceCreate:
    """The import opcode C{op} completed from C{export}: what the opcode gives wins.

    Parameters equal to the cluster's defaults are not copied (the instance
    keeps following the cluster), NIC MACs already used in this cluster are
    replaced by generated ones.
    @raise errors.OpPrereqError: the opcode's disks do not match the export's
    """
    from ganeti.cmdlib import instance_params as params

    if not op.os_type:
        op = attrs.evolve(op, os_type=export.os)
    if not op.disk_template:
        op = attrs.evolve(op, disk_template=export.disk_template)
    if not op.disks:
        op = attrs.evolve(op, disks=[dict(d) for d in export.disks])
    elif len(op.disks) != len(export.disks):
        raise errors.OpPrereqError("The export has %d disk(s), the import asks for %d"
                                   % (len(export.disks), len(op.disks)), errors.ECODE_INVAL)
    else:
        for disk, exported in zip(op.disks, export.disks):
            disk.setdefault("size", exported["size"])
    if not op.nics:
        used = params.used_macs(cfg)
        nics = []
        for nic in export.nics:
            nic = dict(nic)
            if nic.get("mac") in used:
                nic["mac"] = "generate"
            nics.append(nic)
        op = attrs.evolve(op, nics=nics)
    hypervisor = op.hypervisor or export.hypervisor
    if hypervisor not in (cfg.cluster.enabled_hypervisors or []):
        hypervisor = None
    if hypervisor and not op.hypervisor:
        op = attrs.evolve(op, hypervisor=hypervisor)
    cluster = cfg.cluster
    op = attrs.evolve(op, beparams=dict(_known(export.beparams, params.BE_TYPES,
                                               (cluster.beparams or {}).get("default") or {}), **op.beparams))
    if hypervisor and hypervisor == export.hypervisor:
        op = attrs.evolve(op, hvparams=dict(_known(export.hvparams, params.HV_TYPES.get(hypervisor, {}),
                                                   (cluster.hvparams or {}).get(hypervisor) or {}), **op.hvparams))
    os_defaults = (cluster.osparams or {}).get(export.os.split("+", 1)[0]) or {}
    op = attrs.evolve(op, osparams=dict({k: v for k, v in export.osparams.items() if str(os_defaults.get(k)) != v},
                                        **op.osparams))
    if export.osparams_private and not op.osparams_private:
        op = attrs.evolve(op, osparams_private=dict(export.osparams_private))
    if not op.tags:
        op = attrs.evolve(op, tags=list(export.tags))
    return op


async def import_disks(lu: LogicalUnit[OpCode], export: ExportInfo, inst: Instance, pnode: str, compress: str) -> None:
    """Stream each dump of C{export} into the OS import script for C{inst}'s disks on C{pnode}."""
    data = rpc_inst.encode_instance(lu.cfg, inst)
    disks = rpc_inst.instance_disks(lu.cfg, inst)
    for index, dump in enumerate(export.dumps):
        size = (disks[index].size or 0) * 1024 * 1024 if index < len(disks) else None
        await transfer.transfer(
            lu, "disk/%d" % index,
            transfer.Endpoint(export.node_uuid, {"type": "file", "export": export.name, "file": dump}),
            transfer.Endpoint(pnode, {"type": "os", "instance": data, "index": index}),
            compress, size)


async def _exports_by_node(lu: LogicalUnit[OpCode], uuids: list[str]) -> dict[str, Any]:
    """C{{node name: [export, ...] or False}} from C{export_list}."""
    out: dict[str, Any] = {}
    for uuid in uuids:
        result = await iu.call_node_result(lu, uuid, procedures.export_list.call())
        out[iu.node_name(lu.cfg, uuid)] = False if result.failed else list(result.payload or [])
    return out


@register
class LUBackupQuery(LogicalUnit[OpBackupQuery]):
    """The exports on the nodes: C{{node name: [export names] or False}}."""

    OP_ID = "OP_BACKUP_QUERY"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.share_all()
        self.nodes = [expand_node(self.cfg, n).uuid or "" for n in self.op.nodes] if self.op.nodes else \
            sorted(self.cfg.nodes)

    async def exec_(self, feedback: Feedback) -> Any:
        return await _exports_by_node(self, self.nodes)


@register
class LUBackupPrepare(LogicalUnit[OpBackupPrepare]):
    """Prepare an export: nothing to do in mode local (the result is None);
    in mode remote, the handshake, key name and signed certificate the
    destination cluster needs (L{ganeti.cmdlib.backup_remote})."""

    OP_ID = "OP_BACKUP_PREPARE"
    REQ_BGL = False

    def expand_names(self) -> None:
        inst = iu.expand_instance(self.cfg, self.op.instance_name)
        iu.refuse_forthcoming(inst)
        self.op = attrs.evolve(self.op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        self.needed_locks[LEVEL_INSTANCE] = [inst.name]
        self.share_all()

    def check_prereq(self) -> None:
        self.instance = iu.current_instance(self.cfg, self.op.instance_uuid, self.op.instance_name)
        if self.op.mode == "remote":
            backup_remote.domain_secret(self)
            iu.check_node_online(self.cfg, self.instance.primary_node or "")

    async def exec_(self, feedback: Feedback) -> Any:
        if self.op.mode == "remote":
            return await backup_remote.prepare(self, self.instance)
        return None


@register
class LUBackupExport(LogicalUnit[OpBackupExport]):
    """Export an instance to a node (see the module docstring).

    Result (Ganeti's): C{[finalized, [disk exported, ...]]}.
    """

    OP_ID = "OP_BACKUP_EXPORT"
    REQ_BGL = False

    def check_arguments(self) -> None:
        op = self.op
        self.remote = op.mode == "remote"
        if self.remote and not isinstance(op.target_node, list):
            raise errors.OpPrereqError("In mode remote, target_node must be the list of destination disks",
                                       errors.ECODE_INVAL)
        if not self.remote and (not isinstance(op.target_node, str) or not op.target_node):
            raise errors.OpPrereqError("In mode local, target_node must be a node name", errors.ECODE_INVAL)
        if op.zero_free_space:  # Ganeti's checks of the arguments first
            if not op.compress or op.compress == "none":
                raise errors.OpPrereqError("Zeroing free space does not make sense unless compression is used",
                                           errors.ECODE_INVAL)
            if not op.shutdown:
                raise errors.OpPrereqError("Unless the instance is shut down, zeroing cannot be used",
                                           errors.ECODE_INVAL)
            raise errors.OpPrereqError(
                "Zeroing the free space of the disks (--zero-free-space) is not supported here: Ganeti boots a"
                " helper VM from the cluster's zeroing image (gnt-cluster modify --zeroing-image) on the"
                " instance's disks, which this implementation does not run; export without it",
                errors.ECODE_INVAL)
        if op.zeroing_timeout_fixed is not None or op.zeroing_timeout_per_mib is not None:
            raise errors.OpPrereqError("Zeroing timeout options can only be used only with the --zero-free-space"
                                       " option", errors.ECODE_INVAL)
        if op.remove_instance and not op.shutdown:
            raise errors.OpPrereqError("Can not remove instance without shutting it down before", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        cfg, op = self.cfg, self.op
        inst = iu.expand_instance(cfg, op.instance_name)
        iu.refuse_forthcoming(inst)
        self.op = op = attrs.evolve(op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        self.needed_locks[LEVEL_INSTANCE] = [inst.name]
        if self.remote:
            self.needed_locks[LEVEL_NODE] = [inst.primary_node or ""]
            return
        node = expand_node(cfg, op.target_node)
        self.op = op = attrs.evolve(op, target_node=node.name, target_node_uuid=node.uuid)
        self.needed_locks[LEVEL_NODE] = sorted({node.uuid, inst.primary_node or ""} - {""})

    def check_prereq(self) -> None:
        cfg, op = self.cfg, self.op
        self.instance = iu.current_instance(cfg, op.instance_uuid, op.instance_name)
        transfer.check_compression(self, op.compress)
        if not self.remote:
            iu.check_node_online(cfg, op.target_node_uuid or "", "Cannot export to node %s: it is offline"
                                 % op.target_node)
        iu.check_node_online(cfg, self.instance.primary_node or "")
        self.disks = rpc_inst.instance_disks(cfg, self.instance)
        if self.remote:
            self.key, self.dest_cert, self.targets = backup_remote.check_export(self, op, len(self.disks))
        if not self.disks:
            raise errors.OpPrereqError("Instance %s has no disks to export" % self.instance.name, errors.ECODE_INVAL)
        if self.instance.disk_template not in EXPORTABLE:
            raise errors.OpPrereqError("Cannot export disk template %s" % self.instance.disk_template,
                                       errors.ECODE_INVAL)
        # rbd disks are exported from snapshots (Ganeti 3.0.2 has none for rbd), ext disks of an instance
        # marked up too, as Ganeti (their provider's snapshot script)
        self.snapshots = not self.remote and (
            all(d.dev_type == iu.DT_RBD for d in self.disks)
            or (self.instance.admin_state == iu.ADMIN_UP and all(d.dev_type == iu.DT_EXT for d in self.disks)))
        # Ganeti's rule: an instance marked up that stays (not removed) is
        # exported from a snapshot; without one it must be stopped for the
        # whole copy, which the caller allows with long_sleep
        if self.instance.admin_state == iu.ADMIN_UP and not op.remove_instance and not self.snapshots:
            if not op.shutdown:
                raise errors.OpPrereqError("Not all disks could be snapshotted, and you requested a live export;"
                                           " aborting", errors.ECODE_STATE)
            if not op.long_sleep:
                raise errors.OpPrereqError(
                    "Not all disks could be snapshotted, and you did not allow the instance to remain offline for"
                    " a longer time through the --long-sleep option; aborting", errors.ECODE_STATE)

    async def exec_(self, feedback: Feedback) -> Any:
        op, inst = self.op, self.instance
        src = inst.primary_node or ""
        was_up = inst.admin_state == iu.ADMIN_UP
        running = await iu.instance_info(self, inst) is not None
        if running and not op.shutdown and not self.snapshots:
            raise errors.OpExecError("Instance %s is running and shutdown is false: its disks cannot be"
                                     " snapshotted, so a consistent export needs the instance stopped" % inst.name)
        if running and op.shutdown:
            await self.feedback("Shutting down instance %s" % inst.name)
            await iu.shutdown_instance_on(self, inst, src, op.shutdown_timeout)
        restart = running and op.shutdown and was_up and not op.remove_instance
        snapshots: list[str | None] = [None] * len(self.disks)
        try:
            if self.snapshots:
                # as Ganeti: snapshot, start the instance again, copy from the snapshots
                try:
                    snapshots = await self._snapshot()
                except errors.OpExecError as exc:
                    if NO_SNAPSHOT_SCRIPT not in str(exc):
                        raise
                    if not (op.shutdown and op.long_sleep):
                        raise errors.OpExecError("%s: export the instance stopped (with --long-sleep)" % exc) from None
                    # an ExtStorage provider without snapshots: stopped for the whole copy, as allowed
                    await self.log_warning("%s; exporting the stopped instance instead", exc)
                    snapshots = [None] * len(self.disks)
                    running = False
                if restart and running:
                    restart = False
                    await self.feedback("Starting instance %s" % inst.name)
                    await iu.start_instance_on(self, inst, src)
            finalized, results = await (self._export_remote() if self.remote else self._export_local(snapshots))
        finally:
            await self._remove_snapshots(snapshots)
            if restart:
                await self.feedback("Starting instance %s" % inst.name)
                await iu.start_instance_on(self, inst, src)
        if op.remove_instance:
            await self._remove_instance(feedback)
        return [finalized, results]

    async def _export_remote(self) -> tuple[bool, Any]:
        """The disks to the other cluster's nodes (L{backup_remote}); the source's key goes afterwards."""
        inst, src = self.instance, self.instance.primary_node or ""
        try:
            results = await backup_remote.remote_export(self, inst, self.key, self.dest_cert, self.targets,
                                                        self.op.compress)
        finally:
            await iu.call_node_result(self, src, procedures.x509_cert_remove.call(self.key))
        return True, results

    async def _snapshot(self) -> list[str | None]:
        """A snapshot of every disk on the primary node (rbd: C{rbd snap
        create}); their names.  One failing removes those already made."""
        inst, src = self.instance, self.instance.primary_node or ""
        name = "ganeti-export-%d" % int(self.ctx.clock.seconds())
        made: list[str | None] = []
        try:
            for index, disk in enumerate(self.disks):
                await self.feedback("Creating a snapshot of disk/%d on node %s" % (index, iu.node_name(self.cfg, src)))
                # an ext snapshot is a volume of its provider: named after the disk's
                snap = "%s.%s" % (disk.logical_id[1], name) if disk.dev_type == iu.DT_EXT else name
                answer = await iu.call_node(self, src, procedures.blockdev_snapshot.call(
                    rpc_inst.disk_dict(self.cfg, disk, inst), snap, None),
                    what="snapshot disk/%d of instance %s" % (index, inst.name))
                made.append(str(answer[1]) if isinstance(answer, list) and len(answer) == 2 else name)
        except Exception:
            await self._remove_snapshots(made)
            raise
        return made

    async def _remove_snapshots(self, snapshots: list[str | None]) -> None:
        """Remove the snapshots L{_snapshot} made (a failure is a warning)."""
        inst, src = self.instance, self.instance.primary_node or ""
        for index, (disk, snap) in enumerate(zip(self.disks, snapshots)):
            if snap is None:
                continue
            await self.feedback("Removing the snapshot of disk/%d" % index)
            result = await iu.call_node_result(self, src, procedures.blockdev_snapshot_remove.call(
                rpc_inst.disk_dict(self.cfg, disk, inst), snap))
            if result.failed:
                await self.log_warning("Could not remove snapshot %s of disk/%d of instance %s: %s", snap, index,
                                       inst.name, result.fail_msg)

    async def _export_local(self, snapshots: list[str | None]) -> tuple[bool, list[bool]]:
        """The disks (or their snapshots) to the target node's export
        directory, finalized there; a failure discards the partial export."""
        op, inst, src = self.op, self.instance, self.instance.primary_node or ""
        dst = op.target_node_uuid or ""
        results: list[bool] = []
        await iu.call_node(self, dst, procedures.export_start.call(inst.name or "").within(TMO_EXPORT),
                           what="prepare export %s" % inst.name)
        try:
            data = rpc_inst.encode_instance(self.cfg, inst)
            for index, disk in enumerate(self.disks):
                await self.feedback("Exporting disk/%d to node %s" % (index, op.target_node))
                source: dict[str, Any] = {"type": "os", "instance": data, "index": index}
                if snapshots[index] is not None:
                    source["snapshot"] = snapshots[index]
                await transfer.transfer(
                    self, "disk/%d" % index, transfer.Endpoint(src, source),
                    transfer.Endpoint(dst, {"type": "file", "export": inst.name, "file": disk.uuid}),
                    op.compress, (disk.size or 0) * 1024 * 1024)
                results.append(True)
            await self.feedback("Finalizing export on %s" % op.target_node)
            await iu.call_node(self, dst, procedures.export_finalize.call(
                inst.name or "", export_config(self.cfg, inst, self.disks)).within(TMO_EXPORT),
                what="finalize export %s" % inst.name)
        except Exception:
            result = await iu.call_node_result(self, dst,
                                               procedures.export_discard.call(inst.name or "").within(TMO_EXPORT))
            if result.failed:
                await self.log_warning("Could not remove the partial export on node %s: %s",
                                       op.target_node, result.fail_msg)
            raise
        return True, results

    async def _remove_instance(self, feedback: Feedback) -> None:
        await self.feedback("Removing instance %s" % self.instance.name)
        # the removal's shutdown records no reason trail (as when it ran as a sub-LU of its own)
        await iu.remove_instance(self, self.instance, self.op.shutdown_timeout, self.op.ignore_remove_failures, [])


@register
class LUBackupRemove(LogicalUnit[OpBackupRemove]):
    """Remove the exports of an instance (by name; the instance may be gone) from every node."""

    OP_ID = "OP_BACKUP_REMOVE"
    REQ_BGL = False

    def expand_names(self) -> None:
        inst = self.cfg.find_instance(self.op.instance_name)
        if inst is not None:
            self.op = attrs.evolve(self.op, instance_name=inst.name or "")
        self.needed_locks[LEVEL_NODE] = ALL_SET
        self.share_all()

    async def exec_(self, feedback: Feedback) -> Any:
        name = self.op.instance_name
        found = False
        failed = []
        for uuid in sorted(u for u, n in self.cfg.nodes.items() if not n.offline):
            listing = await iu.call_node_result(self, uuid, procedures.export_list.call())
            if listing.failed:
                failed.append(iu.node_name(self.cfg, uuid))
                continue
            if name not in (listing.payload or []):
                continue
            found = True
            result = await iu.call_node_result(self, uuid, procedures.export_remove.call(name).within(TMO_EXPORT))
            if result.failed:
                await self.log_warning("Could not remove export for instance %s on node %s: %s", name,
                                       iu.node_name(self.cfg, uuid), result.fail_msg)
        if not found:
            if failed:
                await self.log_warning("Could not list the exports of node(s) %s", ", ".join(failed))
            raise errors.OpExecError("No exports found for instance %s; remove it by hand if it exists on a node"
                                     " that could not be asked" % name if failed else
                                     "No export found for instance %s" % name)
        return None
