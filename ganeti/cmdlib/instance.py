"""Instance creation and removal: OP_INSTANCE_CREATE, OP_INSTANCE_REMOVE.

Creation (mode C{create}, C{import} from an export on a node, see
L{ganeti.cmdlib.backup}, or C{remote-import} from another cluster, see
L{ganeti.cmdlib.backup_remote}) places the instance on
C{pnode} or where an allocator says (L{ganeti.cmdlib.allocator}), then:

  1. adds it to the configuration, administratively down, disks inactive;
  2. creates its disks on the primary node (C{blockdev_create});
  3. installs its OS (C{instance_os_add}, unless C{no_install}), or for an
     import streams each disk's dump into the OS's import script;
  4. unless C{start} is false, marks it up in the configuration and starts it.

The configuration always knows a disk before it exists, so a job killed
between any two steps never leaves storage nobody knows of: it leaves an
instance, down, whose missing disks C{gnt-cluster verify} reports, and
C{gnt-instance remove} (which removes disks that exist and skips those that
do not) cleans it.  A failure at any step undoes the earlier ones in a
removal's order: stop, remove the disks made, then the configuration entry
(which stays, down, if a disk could not be removed).

Disk templates: C{diskless}, C{file}, C{sharedfile} and C{rbd} (Ceph images,
see L{ganeti.cmdlib.rbd_disks}).  A file disk lives
at C{<storage dir>[/<file_storage_dir>]/<instance name>/disk<N>} (see
L{ganeti.rpc.instances.disk_path}); when a disk of the configuration (an
instance renamed since) already uses that directory, the instance's uuid
prefix is added to the directory name.

Locks (spec/opcodes.md section 4): the BGL shared, a new lock for the
instance name, the node groups shared, and the node and node-res locks of
the primary node; with an allocator, those of every candidate node, taken
opportunistically with C{opportunistic_locking}: only the free ones among
those that have room for the instance (asked before locking), waiting
until at least one is free.  Once the allocator has chosen, the other
nodes' locks are released, so that parallel creations proceed on the other
nodes.  A creation that finds no node with room fails with
C{ECODE_NORES}.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ganeti import errors
from ganeti.cmdlib import (
    allocator,
    backup,
    backup_remote,
    cluster_params,
    ext_disks,
    hostcheck,
    instance_networks,
    names,
    rbd_disks,
    transfer,
)
from ganeti.cmdlib import instance_forthcoming as forthcoming
from ganeti.cmdlib import instance_params as params
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.allocator import NAL_MEMBER
from ganeti.cmdlib.base import (
    ALL_SET,
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODE_ALLOC,
    LEVEL_NODE_RES,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    expand_node,
    lookup_group,
    register,
)
from ganeti.cmdlib.tags import TagError, validate_tag
from ganeti.errors import IpInUse, MacInUse
from ganeti.objects import NIC, ConfigData, Disk, Instance, new_uuid
from ganeti.opcodes.typed import OpCode, OpInstanceCreate, OpInstanceRemove
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

#: how often a creation draws new MACs when a parallel one took them first
MAC_ATTEMPTS = 5
#: Ganeti's default file driver
DEFAULT_FILE_DRIVER = "loop"


def candidate_nodes(cfg: ConfigData, group: str | None = None) -> list[str]:
    """UUIDs of the nodes a new instance may go to: online, vm capable, not
    drained, in C{group} (any group that is not C{unallocable} if None)."""
    out = []
    for uuid, node in cfg.nodes.items():
        if node.offline or node.drained or node.vm_capable is False:
            continue
        if group is not None and node.group != group:
            continue
        if group is None:
            grp = cfg.nodegroups.get(node.group or "")
            if grp is not None and grp.alloc_policy == "unallocable":
                continue
        out.append(uuid)
    return sorted(out)


def storage_dir(cfg: ConfigData, template: str) -> str | None:
    if template == iu.DT_FILE:
        return cfg.cluster.file_storage_dir
    if template == iu.DT_SHARED_FILE:
        return cfg.cluster.shared_file_storage_dir
    return None


def instance_dir_name(cfg: ConfigData, base: str, name: str, uuid: str) -> str:
    """The directory name for a new instance's disks under C{base}."""
    prefix = os.path.join(base, name) + os.sep
    for disk in cfg.disks.values():
        lid = disk.logical_id
        if isinstance(lid, list) and len(lid) == 2 and isinstance(lid[1], str) and lid[1].startswith(prefix):
            return "%s-%s" % (name, uuid[:8])
    return name


async def check_os(lu: LogicalUnit[OpCode], node_uuid: str, os_type: str, osparams: dict[str, Any],
                   force_variant: bool) -> None:
    """Refuse an OS the node does not have (or a bad variant, or unknown
    parameters), from the node's C{os_diagnose}."""
    name, _, variant = os_type.partition("+")
    listing = await iu.call_node(lu, node_uuid, procedures.os_diagnose.call().within(procedures.TMO_NORMAL),
                                 what="list the operating systems")
    entry = None
    for item in listing or []:
        if isinstance(item, list) and item and item[0] == name:
            entry = item
            break
    node = iu.node_name(lu.cfg, node_uuid)
    if entry is None:
        raise errors.OpPrereqError("OS '%s' not in supported OS list for node %s" % (name, node), errors.ECODE_INVAL)
    status = entry[2] if len(entry) > 2 else True
    if status is not True and status is not None:
        diagnose = entry[3] if len(entry) > 3 else ""
        raise errors.OpPrereqError("OS '%s' on node %s is not valid: %s" % (name, node, diagnose), errors.ECODE_INVAL)
    variants = entry[4] if len(entry) > 4 and isinstance(entry[4], list) else []
    if not force_variant and variants:
        if not variant:
            raise errors.OpPrereqError("OS name '%s' must include a variant (one of %s)"
                                       % (os_type, ", ".join(variants)), errors.ECODE_INVAL)
        if variant not in variants:
            raise errors.OpPrereqError("Unsupported OS variant '%s' (one of %s)" % (variant, ", ".join(variants)),
                                       errors.ECODE_INVAL)
    declared = entry[5] if len(entry) > 5 and isinstance(entry[5], list) else None
    if declared is not None and osparams:
        known = [p[0] if isinstance(p, list) and p else p for p in declared]
        params.check_osparams(osparams, known=[k for k in known if isinstance(k, str)])


@register
class LUInstanceCreate(LogicalUnit[OpInstanceCreate]):
    """Create an instance (see the module docstring).  Result: the names of
    the instance's nodes (its primary)."""

    OP_ID = "OP_INSTANCE_CREATE"
    REQ_BGL = False

    # --- arguments ---------------------------------------------------------------
    def check_arguments(self) -> None:
        op = self.op
        forthcoming.check_flags(op.forthcoming, op.commit, op.mode)
        #: with --commit: the forthcoming instance (set when expanding names)
        self.reserved: Instance | None = None
        self.importing = op.mode == "import"
        self.remote_source: str | None = None
        if op.mode == "remote-import":
            self.remote_source = backup_remote.check_import(self, op)
        self.export: Any = None
        if self.importing:
            self.op = attrs.evolve(op, instance_name=names.normalize_hostname(op.instance_name, "instance name"))
            return  # the rest is checked once the export is read (probe)
        self._check_spec()

    def _check_spec(self) -> None:
        op, cfg = self.op, self.cfg
        if op.pnode and op.iallocator:
            raise errors.OpPrereqError("Give either a primary node or an allocator, not both", errors.ECODE_INVAL)
        hostcheck.check_ip_needs_name(op.ip_check, op.name_check, "Cannot do IP address check without a name check")
        self.op = op = attrs.evolve(op, instance_name=names.normalize_hostname(op.instance_name, "instance name"))
        if op.instance_communication:  # Ganeti's: a NIC on the cluster's communication network, unless given
            nic = cluster_params.communication_nic(cfg, op.instance_name)
            if not any(given.get("name") == nic["name"] for given in op.nics or []):
                self.op = op = attrs.evolve(op, nics=list(op.nics or []) + [nic])
        template = op.disk_template or next(iter(cfg.cluster.enabled_disk_templates or []), None)
        if template not in iu.SUPPORTED_TEMPLATES:
            raise errors.OpPrereqError(
                "Disk template '%s' is not supported (supported: %s)" % (template, ", ".join(iu.SUPPORTED_TEMPLATES)),
                errors.ECODE_INVAL,
            )
        self.template = template
        self.disks = [ext_disks.check_disk(template, d, i) for i, d in enumerate(op.disks)]
        if template == iu.DT_DISKLESS and self.disks:
            raise errors.OpPrereqError("Disk template diskless takes no disks", errors.ECODE_INVAL)
        if template != iu.DT_DISKLESS and not self.disks:
            raise errors.OpPrereqError("Disk template %s needs at least one disk" % template, errors.ECODE_INVAL)
        for disk in self.disks:
            disk.setdefault("mode", "rw")
        self.nics = [params.check_nic(cfg, n, i) for i, n in enumerate(op.nics)]
        subdir = op.file_storage_dir
        if subdir is not None and (os.path.isabs(subdir) or ".." in subdir.split("/")):
            raise errors.OpPrereqError("file_storage_dir must be a relative path without '..': %r" % subdir,
                                       errors.ECODE_INVAL)
        for tag in op.tags:
            try:
                validate_tag(tag)
            except TagError as e:
                raise errors.OpPrereqError("Invalid tag %r: %s" % (tag, e), errors.ECODE_INVAL) from None
        hypervisor = op.hypervisor or next(iter(cfg.cluster.enabled_hypervisors or []), None)
        if not hypervisor:
            raise errors.OpPrereqError("No hypervisor given and none enabled in the cluster", errors.ECODE_STATE)
        self.hypervisor: str = hypervisor
        self.beparams = {k: v for k, v in params.check_beparams(op.beparams).items() if v is not params.DEFAULT}
        self.hvparams = {k: v for k, v in params.check_hvparams(self.hypervisor, op.hvparams).items()
                         if v is not params.DEFAULT}
        self.osparams = {k: v for k, v in params.check_osparams(op.osparams).items() if v is not params.DEFAULT}
        self.osparams_private = params.check_osparams(op.osparams_private or {}, allow_default=False)
        self.osparams_secret = params.check_osparams(op.osparams_secret or {}, allow_default=False)
        if op.identify_defaults:
            cluster = cfg.cluster
            self.beparams = params.without_defaults(self.beparams, (cluster.beparams or {}).get("default") or {})
            self.hvparams = params.without_defaults(self.hvparams, (cluster.hvparams or {}).get(self.hypervisor) or {})
        self.no_install = bool(op.no_install)
        if not op.os_type and not self.no_install:
            raise errors.OpPrereqError("No guest OS specified (os_type), and no_install is not set", errors.ECODE_INVAL)
        if op.os_type and op.mode not in ("import", "remote-import") and op.os_type in (cfg.cluster.blacklisted_os or []):
            # as Ganeti: a blacklisted OS installs no new instance (imports and existing ones are left alone)
            raise errors.OpPrereqError("Guest OS '%s' is not allowed for installation" % op.os_type,
                                       errors.ECODE_STATE)

    async def resolve(self) -> None:
        """With C{name_check}, the name must resolve (it becomes the
        canonical name) and, with C{ip_check}, its address must not answer."""
        op = self.op
        if op.name_check:
            name = await hostcheck.checked_hostname(self.ctx.net, op.instance_name, "instance name", op.ip_check)
            self.op = attrs.evolve(op, instance_name=name)

    # --- locks -----------------------------------------------------------------------
    def expand_names(self) -> None:
        op, cfg = self.op, self.cfg
        name = op.instance_name
        self.share_locks[LEVEL_NODEGROUP] = True
        if op.commit:
            self._expand_commit()
            return
        if cfg.find_instance(name) is not None:
            raise errors.OpPrereqError("Instance '%s' is already in the cluster" % name, errors.ECODE_EXISTS)
        self.add_locks[LEVEL_INSTANCE] = [name]
        self.allocating = not op.pnode
        if not self.allocating:
            node = expand_node(cfg, op.pnode or "")
            self.op = attrs.evolve(op, pnode=node.name, pnode_uuid=node.uuid or "")
            self.needed_locks[LEVEL_NODEGROUP] = [node.group]
            self.needed_locks[LEVEL_NODE] = [node.uuid]
            self.needed_locks[LEVEL_NODE_RES] = [node.uuid]
            return
        group = lookup_group(cfg, op.group_name) if op.group_name else None
        self.group = group
        # the node-allocation lock: allocations that lock every node hold it
        # exclusively, opportunistic ones share it; released once placed
        self.needed_locks[LEVEL_NODE_ALLOC] = [NAL_MEMBER]
        self.share_locks[LEVEL_NODE_ALLOC] = bool(op.opportunistic_locking)
        if op.opportunistic_locking:
            self.needed_locks[LEVEL_NODE] = candidate_nodes(cfg, group)
            self.opportunistic_locks[LEVEL_NODE] = True
        elif group is not None:
            self.needed_locks[LEVEL_NODE] = sorted(u for u, n in cfg.nodes.items() if n.group == group)
        else:
            self.needed_locks[LEVEL_NODE] = ALL_SET
        self.needed_locks[LEVEL_NODEGROUP] = [group] if group is not None else ALL_SET
        self.needed_locks[LEVEL_NODE_RES] = []

    def _expand_commit(self) -> None:
        """C{--commit}: the forthcoming instance's lock and its nodes' (as
        Ganeti: it stays where it was reserved)."""
        cfg = self.cfg
        reserved = forthcoming.reserved_instance(cfg, self.op.instance_name)
        forthcoming.check_primary(cfg, reserved, self.op.pnode)
        self.reserved = reserved
        pnode = cfg.nodes[reserved.primary_node or ""]
        self.op = attrs.evolve(self.op, instance_name=reserved.name or "", pnode=pnode.name,
                               pnode_uuid=pnode.uuid or "")
        nodes = forthcoming.instance_nodes(cfg, reserved)
        self.allocating = False
        self.needed_locks[LEVEL_INSTANCE] = [reserved.name]
        self.needed_locks[LEVEL_NODEGROUP] = sorted({cfg.nodes[n].group for n in nodes if n in cfg.nodes})
        self.needed_locks[LEVEL_NODE] = nodes
        self.needed_locks[LEVEL_NODE_RES] = list(nodes)

    async def probe(self) -> None:
        """For an import, read the export first (its values fill what the
        opcode leaves out); without C{src_path}, as Ganeti's, the export
        is the one named after the instance, looked for on C{src_node} or
        else on every online node.  With opportunistic locking, ask for the locks of the nodes that
        have room for the instance only: the creation then waits for one of
        those instead of failing on a busy node that has none.  When no
        node has room, fail at once (waiting would not help)."""
        if self.importing and self.export is None:
            if not self.op.src_path:
                # Ganeti's rule: the export named after the (resolved) instance name
                self.op = attrs.evolve(self.op, src_path=self.op.instance_name)
            self.export = await backup.read_export(self, self.op.src_node, self.op.src_path or "")
            self.op = backup.fill_from_export(self.op, self.cfg, self.export)
            self._check_spec()
        if not (self.allocating and self.op.opportunistic_locking):
            return
        request = self._request()
        states = await self._node_states(self.needed_locks[LEVEL_NODE])
        fitting = [s.uuid for s in states if allocator.place(request, [s]).node is not None]
        if not fitting:
            placement = allocator.place(request, states)
            raise errors.OpPrereqError(
                "No node has the resources for instance %s (%d MiB memory, %d MiB disk): %s"
                % (request.name, request.memory, request.disk_space, placement.explain()), errors.ECODE_NORES)
        self.needed_locks[LEVEL_NODE] = fitting

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_NODE_RES and self.allocating:
            held = self.acquired.get(LEVEL_NODE)
            self.needed_locks[LEVEL_NODE_RES] = ALL_SET if held is ALL_SET else list(held or [])

    # --- checks ------------------------------------------------------------------------
    def check_prereq(self) -> None:
        op, cfg = self.op, self.cfg
        name = op.instance_name
        if self.reserved is not None:
            self.reserved = forthcoming.still_reserved(cfg, self.reserved.uuid or "", name,
                                                       self.owned_locks(LEVEL_NODE))
            forthcoming.check_spec(cfg, self.reserved, self.template, self.disks)
        elif cfg.find_instance(name) is not None:
            raise errors.OpPrereqError("Instance '%s' is already in the cluster" % name, errors.ECODE_EXISTS)
        cluster = cfg.cluster
        if self.template not in (cluster.enabled_disk_templates or []):
            raise errors.OpPrereqError(
                "Disk template '%s' is not enabled in the cluster (enabled: %s)"
                % (self.template, ", ".join(cluster.enabled_disk_templates or []) or "none"),
                errors.ECODE_STATE,
            )
        if self.template in (iu.DT_FILE, iu.DT_SHARED_FILE) and not storage_dir(cfg, self.template):
            raise errors.OpPrereqError("The cluster has no storage directory for template %s" % self.template,
                                       errors.ECODE_STATE)
        iu.check_hypervisor_enabled(cfg, self.hypervisor)
        used = params.used_macs(cfg, skip_instance=self.reserved.uuid if self.reserved else None)
        for index, nic in enumerate(self.nics):
            params.check_nic_mode(cfg, nic, index)
            if nic["mac"] not in (params.MAC_AUTO, params.MAC_GENERATE) and nic["mac"] in used:
                raise errors.OpPrereqError("MAC address %s already in use in the cluster" % nic["mac"],
                                           errors.ECODE_NOTUNIQUE)
        explicit = [n["mac"] for n in self.nics if n["mac"] not in (params.MAC_AUTO, params.MAC_GENERATE)]
        if len(set(explicit)) != len(explicit):
            raise errors.OpPrereqError("The same MAC address is given to two NICs", errors.ECODE_INVAL)
        if self.template == ext_disks.DT_BLOCK and self.allocating:
            raise errors.OpPrereqError("Disk adoption is not possible with an allocator", errors.ECODE_INVAL)
        if not self.allocating:
            pnode = op.pnode_uuid or ""
            self.nics = self._fill_nics(pnode)
            if self.template == iu.DT_RBD:  # refuse bad rbd parameters before anything happens
                rbd_disks.new_disks(cfg, cfg.nodes[pnode].group, self.hypervisor or "", self.disks)
            iu.check_node_online(cfg, pnode)
            iu.check_node_not_drained(cfg, pnode)
            iu.check_node_vm_capable(cfg, pnode)
            self.candidates = [pnode]
            # as Ganeti: a dry run answers the instance's node uuids (with an
            # allocator the node is chosen only when executing, so None then)
            self.dry_run_result = [pnode]
        else:
            wanted = set(candidate_nodes(cfg, self.group))
            self.candidates = sorted(wanted & self.owned_locks(LEVEL_NODE))
            if not self.candidates:
                if self.op.opportunistic_locking:
                    raise errors.OpPrereqError("No free node to place instance %s on (all are locked)" % name,
                                               errors.ECODE_TEMP_NORES)
                raise errors.OpPrereqError("No node can host instance %s (online, vm capable and not drained)"
                                           % name, errors.ECODE_NORES)

    # --- execution --------------------------------------------------------------------
    def _request(self) -> allocator.Request:
        probe = Instance(name=self.op.instance_name, hypervisor=self.hypervisor, beparams=self.beparams)
        return allocator.Request(
            name=self.op.instance_name,
            memory=iu.instance_memory(self.cfg, probe),
            vcpus=iu.instance_vcpus(self.cfg, probe),
            disk_template=self.template,
            disks=[dict(d) for d in self.disks],
            # as Ganeti: each NIC as its object's dict
            nics=[{"mac": n["mac"], "ip": n.get("ip"), "network": n.get("network"), "name": n.get("name"),
                   "nicparams": dict(n["nicparams"])} for n in self.nics],
            hypervisor=self.hypervisor,
            os=self.op.os_type or "",
            tags=list(self.op.tags),
            spindle_use=int(rpc_inst.filled_beparams(self.cfg, probe).get("spindle_use") or 1),
            group_name=self.cfg.nodegroups[self.group].name if self.group in self.cfg.nodegroups else None,
        )

    async def _allocate(self) -> str:
        """Choose the primary node among the candidates; returns its uuid."""
        cfg = self.cfg
        request = self._request()
        name, executable = allocator.resolve(self.op.iallocator, cfg.cluster.default_iallocator,
                                             allocator.root_of(self))
        states = await self._node_states(self.candidates)
        if executable is None:
            placement = allocator.place(request, states)
            if placement.node is None:
                raise errors.OpPrereqError(
                    "Can't compute nodes using iallocator '%s': no node has the resources for instance %s (%d MiB"
                    " memory, %d MiB disk): %s" % (allocator.BUILTIN, request.name, request.memory,
                                                   request.disk_space, placement.explain()),
                    errors.ECODE_NORES,
                )
            chosen = placement.node.uuid
        else:
            by_name = {iu.node_name(cfg, u): u for u in self.candidates}
            if self.op.opportunistic_locking:  # as Ganeti: the node white list
                request = attrs.evolve(request, restrict_to=sorted(by_name))
            chosen = await allocator.choose_node(cfg, name, executable, request, states, by_name,
                                                 request.required_nodes, self.ctx.clock)
        await self.log_info("Selected node %s for instance %s (allocator %s)", iu.node_name(cfg, chosen),
                            request.name, name)
        return chosen

    async def _node_states(self, uuids: list[str]) -> list[allocator.NodeState]:
        """The allocator's view of nodes C{uuids}, from their C{node_info}."""
        return await allocator.node_states(self, uuids, self.hypervisor, self.template)

    async def _narrow_locks(self, pnode: str) -> None:
        """Keep only the locks of the chosen node (and its group)."""
        await self.release_locks(LEVEL_NODE_ALLOC)
        await self.release_locks(LEVEL_NODE, keep=[pnode])
        await self.release_locks(LEVEL_NODE_RES, keep=[pnode])
        group = self.cfg.nodes[pnode].group
        await self.release_locks(LEVEL_NODEGROUP, keep=[group] if group else [])

    def _fill_nics(self, pnode: str) -> list[dict[str, Any]]:
        """L{instance_networks.fill_nics}; a commit's NICs keep the
        addresses reserved for them (not checked against their own
        reservation)."""
        if self.reserved is None:
            return instance_networks.fill_nics(self.cfg, self.nics, pnode, self.op.conflicts_check)
        kept = forthcoming.kept_addresses(self.reserved, self.nics)
        unchecked = [dict(n, ip=None) if i in kept else n for i, n in enumerate(self.nics)]
        filled = instance_networks.fill_nics(self.cfg, unchecked, pnode, self.op.conflicts_check)
        return [dict(n, ip=kept[i]) if i in kept else n for i, n in enumerate(filled)]

    def _build(self, pnode: str) -> tuple[Instance, list[Disk]]:
        """The new instance and its disks (forthcoming ones with
        C{--forthcoming}; with C{--commit}, the reserved ones made real)."""
        if self.reserved is not None:
            reserved = self.reserved
            disks = [attrs.evolve(self.cfg.disks[u], forthcoming=False) for u in reserved.disks or []]
            inst = self._record(pnode, reserved.uuid or "", disks)
            return attrs.evolve(inst, network_port=reserved.network_port, forthcoming=False), disks
        uuid = new_uuid()
        disks = self._new_disks(pnode, self.op.instance_name, uuid)
        if self.op.forthcoming:
            disks = [attrs.evolve(d, forthcoming=True) for d in disks]
            return attrs.evolve(self._record(pnode, uuid, disks), forthcoming=True), disks
        return self._record(pnode, uuid, disks), disks

    def _new_disks(self, pnode: str, name: str, uuid: str) -> list[Disk]:
        cfg, op = self.cfg, self.op
        disks: list[Disk] = []
        base = storage_dir(cfg, self.template)
        if self.template == iu.DT_RBD:
            disks = rbd_disks.new_disks(cfg, cfg.nodes[pnode].group, self.hypervisor or "", self.disks)
        elif self.template in ext_disks.TEMPLATES:
            disks = ext_disks.new_disks(cfg, self.template, self.disks)
        elif base is not None:
            if op.file_storage_dir:
                base = os.path.join(base, op.file_storage_dir)
            dirname = instance_dir_name(cfg, base, name, uuid)
            driver = op.file_driver or DEFAULT_FILE_DRIVER
            for index, spec in enumerate(self.disks):
                disks.append(Disk(
                    uuid=new_uuid(), name=spec.get("name"), dev_type=self.template,
                    logical_id=[driver, rpc_inst.disk_path(base, dirname, index)], nodes=[pnode],
                    iv_name="disk/%d" % index, size=spec["size"], mode=spec["mode"], params={},
                ))
        return disks

    def _record(self, pnode: str, uuid: str, disks: list[Disk]) -> Instance:
        op = self.op
        name = op.instance_name
        return Instance(
            name=name, uuid=uuid, primary_node=pnode, os=op.os_type or "", hypervisor=self.hypervisor,
            hvparams=self.hvparams, beparams=self.beparams, osparams=self.osparams,
            osparams_private=self.osparams_private,
            admin_state=iu.ADMIN_DOWN, admin_state_source=iu.ADMIN_SOURCE_ADMIN,
            nics=self._make_nics(), disks=[d.uuid for d in disks], disk_template=self.template,  # type: ignore[misc]
            disks_active=False, tags=list(op.tags),
        )

    def _make_nics(self) -> list[NIC]:
        used = params.used_macs(self.cfg)
        used.update(n["mac"] for n in self.nics)
        drawn = instance_networks.draw_pool_ips(self.cfg, self._pool_nics())
        kept = forthcoming.kept_macs(self.reserved, self.nics) if self.reserved is not None else {}
        nics = []
        for index, nic in enumerate(self.nics):
            mac = kept.get(index, nic["mac"])
            if mac in (params.MAC_AUTO, params.MAC_GENERATE):
                mac = params.generate_mac(params.mac_prefix(self.cfg, nic.get("network")), used)
            nics.append(NIC(mac=mac, ip=drawn.get(index, nic.get("ip")), network=nic.get("network"),
                            name=nic.get("name"), nicparams=dict(nic["nicparams"]), uuid=new_uuid()))
        return nics

    def _pool_nics(self) -> dict[int, str]:
        """NIC index -> network of the NICs with C{ip=pool}."""
        return {i: n["network"] for i, n in enumerate(self.nics) if n.get("ip") == instance_networks.IP_POOL}

    async def _add_to_config(self, inst: Instance, disks: list[Disk]) -> Instance:
        """Add C{inst}; draw new automatic MACs when a parallel creation took them."""
        for attempt in range(MAC_ATTEMPTS):
            try:
                stored: Instance = await self.add("instance", inst, disks=disks)
                return stored
            except MacInUse as e:
                automatic = [n["mac"] in (params.MAC_AUTO, params.MAC_GENERATE) for n in self.nics]
                if not any(automatic) or attempt == MAC_ATTEMPTS - 1:
                    raise errors.OpPrereqError(str(e), errors.ECODE_NOTUNIQUE) from None
                self.cfg = await self.ctx.wconfd.read_config()
                fresh = self._make_nics()
                nics = [attrs.evolve(old, mac=new.mac) if auto else old
                        for old, new, auto in zip(inst.nics, fresh, automatic)]
                inst = attrs.evolve(inst, nics=nics)
            except IpInUse as e:
                # a parallel creation took a pool address first: draw again
                pooled = self._pool_nics()
                if not pooled or attempt == MAC_ATTEMPTS - 1:
                    raise errors.OpPrereqError("%s" % e, errors.ECODE_NOTUNIQUE) from None
                self.cfg = await self.ctx.wconfd.read_config()
                drawn = instance_networks.draw_pool_ips(self.cfg, pooled)
                inst = attrs.evolve(inst, nics=[attrs.evolve(n, ip=drawn[i]) if i in drawn else n
                                                for i, n in enumerate(inst.nics)])
        raise errors.ProgrammerError("unreachable")  # pragma: no cover

    async def _commit_config(self, inst: Instance, disks: list[Disk]) -> Instance:
        """C{--commit}: the forthcoming instance's entry becomes C{inst}
        (same uuid), then its disks stop being forthcoming; both before any
        disk is made, so that a job killed later leaves a real instance,
        down, whose missing disks C{gnt-cluster verify} reports and
        C{gnt-instance remove} cleans."""
        current = self.cfg.instances[inst.uuid or ""]
        await self.feedback("* committing forthcoming instance %s" % inst.name)
        try:
            stored: Instance = await self.update("instance", attrs.evolve(
                inst, serial_no=current.serial_no, ctime=current.ctime, mtime=current.mtime))
        except (MacInUse, IpInUse) as e:
            raise errors.OpPrereqError(str(e), errors.ECODE_NOTUNIQUE) from None
        for disk in disks:
            await self.update("disk", attrs.evolve(self.cfg.disks[disk.uuid or ""], forthcoming=False))
        return stored

    async def _back_to_reserved(self, inst: Instance, reserved: Instance) -> None:
        """A failed commit whose disks are all gone: the instance is
        forthcoming again, as it was reserved."""
        for uuid in reserved.disks or []:
            disk = self.cfg.disks.get(uuid)
            if disk is not None and not disk.forthcoming:
                await self.update("disk", attrs.evolve(disk, forthcoming=True))
        current = self.cfg.instances[inst.uuid or ""]
        await self.update("instance", attrs.evolve(reserved, serial_no=current.serial_no))
        await self.log_warning("Instance %s is forthcoming again, as it was reserved", inst.name)

    async def _allocate_port(self, inst: Instance) -> Instance:
        """A VNC port for KVM instances that have a VNC bind address."""
        if inst.hypervisor != "kvm" or not rpc_inst.filled_hvparams(self.cfg, inst).get("vnc_bind_address"):
            return inst
        port: list[int] = []

        def take(cluster: Any) -> Any:
            pool = list(cluster.tcpudp_port_pool or [])
            if pool:
                port[:] = [pool.pop(0)]
                return attrs.evolve(cluster, tcpudp_port_pool=pool)
            port[:] = [(cluster.highest_used_port or 11000) + 1]
            return attrs.evolve(cluster, highest_used_port=port[0])

        await self.modify("cluster", None, take)
        return attrs.evolve(inst, network_port=port[0])

    def _probe_instance(self) -> Instance:
        """An instance record with this creation's own OS parameters (for their merging with the cluster's)."""
        return Instance(osparams=self.osparams, osparams_private=self.osparams_private)

    async def exec_(self, feedback: Feedback) -> Any:
        op = self.op
        if self.allocating:
            pnode = await self._allocate()
            await self._narrow_locks(pnode)
        else:
            pnode = op.pnode_uuid or ""
        self.nics = self._fill_nics(pnode)
        if op.os_type:
            await check_os(self, pnode, op.os_type, self.osparams, op.force_variant)
            # Ganeti's full OS parameters: the cluster's (public and private), the instance's, the secret ones
            full = dict(rpc_inst.filled_osparams(self.cfg, attrs.evolve(self._probe_instance(), os=op.os_type)),
                        **rpc_inst.filled_osparams_private(self.cfg, attrs.evolve(self._probe_instance(),
                                                                                 os=op.os_type)))
            await iu.check_os_params(self, True, [pnode], op.os_type, dict(full, **self.osparams_secret),
                                     op.force_variant)
        await ext_disks.check_on_node(self, pnode, self.template, self.disks)  # before anything is made
        inst, disks = self._build(pnode)
        await iu.check_bridges(self, inst.nics, pnode, self.hypervisor)
        if op.start and not self.allocating:
            await iu.check_node_free_memory(self, pnode, "creating instance %s" % inst.name,
                                            iu.instance_memory(self.cfg, inst), self.hypervisor)
        if not inst.network_port:  # a commit keeps the port reserved
            inst = await self._allocate_port(inst)
        if self.reserved is not None:
            inst = await self._commit_config(inst, disks)
        else:
            inst = await self._add_to_config(inst, disks)
        for index, nic in enumerate(inst.nics):
            if self.nics[index].get("ip") == instance_networks.IP_POOL:
                await self.log_info("Chose IP %s from network %s", nic.ip,
                                    self.cfg.networks[nic.network or ""].name if nic.network in self.cfg.networks
                                    else nic.network)
        if op.forthcoming:
            await self.feedback("Instance is forthcoming: its resources are reserved, no disk is created and"
                                " nothing is started")
            return [iu.node_name(self.cfg, pnode)]
        created: list[Disk] = []
        started = False
        try:
            for disk in disks:
                await iu.call_node(self, pnode, procedures.blockdev_create.call(
                    rpc_inst.disk_dict(self.cfg, disk, inst), disk.size or 0, inst.name, True, "originstname+%s" % inst.name, False),
                                   what="create disk %s of instance %s" % (disk.iv_name, inst.name))
                created.append(disk)
            if self.remote_source is not None:
                transfer.check_compression(self, op.compress)
                await self.feedback("* importing instance disks from instance %s of another cluster..."
                                    % op.source_instance_name)
                await backup_remote.remote_import(self, self.cfg.instances.get(inst.uuid or "", inst), pnode,
                                                  self.remote_source, op.compress)
            elif self.importing:
                transfer.check_compression(self, op.compress)
                await self.feedback("* importing instance disks from export %s on node %s..."
                                    % (self.export.name, iu.node_name(self.cfg, self.export.node_uuid)))
                await backup.import_disks(self, self.export, self.cfg.instances.get(inst.uuid or "", inst), pnode,
                                          op.compress)
            elif not self.no_install:
                await self.feedback("* running the instance OS create scripts...")
                osp = dict(self.osparams_secret) if self.osparams_secret else None
                data = rpc_inst.encode_instance(self.cfg, inst, osp=osp)
                await iu.call_node(self, pnode, procedures.instance_os_add.call(data, False, op.debug_level or 0),
                                   what="add os for instance %s" % inst.name)
            if op.start:
                await self.feedback("* starting instance...")
                current = self.cfg.instances.get(inst.uuid or "", inst)
                inst = await self.update("instance", attrs.evolve(
                    current, admin_state=iu.ADMIN_UP, disks_active=self.template != iu.DT_DISKLESS))
                started = True
                await iu.start_instance_on(self, inst, pnode)
        except Exception as e:  # not GeneratorExit & co: nothing may be awaited then
            await self._undo(inst, pnode, created, started, e)
            raise
        return [iu.node_name(self.cfg, pnode)]

    async def _undo(self, inst: Instance, pnode: str, created: list[Disk], started: bool,
                    error: BaseException) -> None:
        """Remove what a failed creation made (best effort, with warnings),
        in the order of a removal: stop, disks, then the config entry, which
        stays (down) when a disk could not be removed, for C{gnt-instance
        remove} to finish."""
        await self.log_warning("Creation of instance %s failed (%s): removing what was made", inst.name, error)
        if started:
            result = await iu.call_node_result(self, pnode, procedures.instance_shutdown.call(
                rpc_inst.encode_instance(self.cfg, inst), 0, iu.reason_trail(self)))
            if result.failed:
                await self.log_warning("Could not stop instance %s: %s", inst.name, result.fail_msg)
            try:
                inst = await iu.set_admin_state(self, inst, iu.ADMIN_DOWN)
            except Exception as e:
                await self.log_warning("Could not mark instance %s down: %s", inst.name, e)
        problems = await iu.remove_disks(self, pnode, created)
        for problem in problems:
            await self.log_warning("%s", problem)
        if problems:
            await self.log_warning("Instance %s stays in the configuration, down, until 'gnt-instance remove'"
                                   " removes its disks", inst.name)
            return
        try:
            if self.reserved is not None:
                await self._back_to_reserved(inst, self.reserved)
                return
            await self.remove("instance", inst.uuid or "")
        except Exception as e:
            await self.log_warning("Could not remove instance %s from the configuration: %s", inst.name, e)


@register
class LUInstanceRemove(LogicalUnit[OpInstanceRemove]):
    """Remove an instance: stop it, remove its disks, drop it from the config.

    The steps, in this order, so that a job killed between any two of
    them leaves a state C{gnt-cluster verify} reports (or a consistent one)
    and running the same removal again finishes it:

      1. mark the instance administratively down in the config, if it is
         up (nothing restarts it from now on);
      2. stop it on its primary node (stopping a stopped instance succeeds);
      3. remove its disks on their nodes (removing a disk that is already
         gone succeeds); killed here, the config still lists the instance,
         down, with disks missing: verify reports each missing disk;
      4. remove the instance and its disks from the config.

    With C{ignore_failures}, a failure to stop it or to remove a disk is a
    warning and the instance leaves the configuration anyway (a disk file
    left behind is then an orphan, a warning of verify).
    """

    OP_ID = "OP_INSTANCE_REMOVE"
    REQ_BGL = False

    def expand_names(self) -> None:
        inst = iu.expand_instance(self.cfg, self.op.instance_name)
        self.op = attrs.evolve(self.op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        self.needed_locks[LEVEL_INSTANCE] = [inst.name]
        self.needed_locks[LEVEL_NODE] = []
        self.needed_locks[LEVEL_NODE_RES] = []

    def declare_locks(self, level: str) -> None:
        inst = self.cfg.instances.get(self.op.instance_uuid or "")
        if inst is None:
            return
        if level == LEVEL_NODE:
            self.needed_locks[LEVEL_NODE] = iu.instance_nodes(self.cfg, inst)
        elif level == LEVEL_NODE_RES:
            self.needed_locks[LEVEL_NODE_RES] = list(self.acquired.get(LEVEL_NODE) or [])

    def check_prereq(self) -> None:
        self.instance = iu.current_instance(self.cfg, self.op.instance_uuid, self.op.instance_name)

    async def exec_(self, feedback: Feedback) -> Any:
        op = self.op
        await iu.remove_instance(self, self.instance, op.shutdown_timeout, op.ignore_failures, iu.reason_trail(self))
        return None
