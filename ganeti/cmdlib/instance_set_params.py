"""OP_INSTANCE_SET_PARAMS: change an instance's parameters, disks and NICs.

The steps, in this order: (1) remove the files of the disks removed (a
disk already gone counts as removed; a failure is a warning, the file an
orphan that C{gnt-cluster verify} warns about); (2) store every change in
the configuration, the new disks listed; (3) create the new disks' files,
a failure undoing (2) after removing the files made.  The configuration
thus never lacks a disk that exists: a job killed after (1) leaves an
instance still listing the disks removed, which verify reports as missing
and the same modification run again removes; killed after (2), the new
disks are listed but missing, which verify reports and C{--disk N:remove}
(or removing the instance) cleans.

Supported: C{beparams} (memory, vcpus, ...), C{hvparams}, C{osparams} and
C{osparams_private}, C{os_name}, C{offline} (the admin state C{offline}
and back to C{down}), disks (C{add} with size/mode/name, created on the
primary node, checked by template: ext provider and parameters, blockdev
C{adopt}; C{remove} from a stopped instance, or with hotplug, removed from
the node; C{modify} of mode and name; C{attach}/C{detach} of rbd, ext and
blockdev disks, L{disk_attach}) and NICs (C{add}, C{remove}, C{modify}),
in both formats of the modification lists (L{params.upgrade_mods}).  The
value C{"default"} removes the instance's own parameter.

C{runtime_mem} (ballooning, as Ganeti): the running instance gets that much
memory at once (RPC C{instance_balloon_memory}: the fake hypervisor's state
file, QMP C{balloon} under kvm); it must lie between the instance's
(new) C{minmem} and C{maxmem} unless C{force}, and growing needs that much
free memory on the node.  It changes no configuration; checked before
anything changes, done before the other changes.

C{disk_template} converts the disks to another template (with
C{ext_params}, C{file_driver}, C{file_storage_dir}: L{disk_convert}); the
C{modify} of an ext disk changes its ExtStorage parameters
(L{ext_disks.modified_params}).

Refused with a clear error: a new primary node or secondary (C{pnode},
C{remote_node}, C{iallocator}), attach/detach of NICs and of file disks.

Disk and NIC changes reach a running kvm guest with C{hotplug} or
C{hotplug_if_possible} (L{instance_hotplug}); otherwise every change takes
effect at the next start of the instance.  The result is Ganeti's list of
C{[parameter, new value]}.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from ganeti import errors
from ganeti import network as netpool
from ganeti.cmdlib import cluster_params, disk_attach, disk_convert, ext_disks, rbd_disks
from ganeti.cmdlib import instance_hotplug as hotplug
from ganeti.cmdlib import instance_networks as inetworks
from ganeti.cmdlib import instance_new_primary as new_primary
from ganeti.cmdlib import instance_params as params
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LEVEL_NODE, LEVEL_NODEGROUP, Feedback, expand_node, register
from ganeti.cmdlib.instance import MAC_ATTEMPTS, check_os, storage_dir
from ganeti.cmdlib.instance_ops import InstanceLU
from ganeti.errors import IpInUse, MacInUse
from ganeti.objects import NIC, Disk, Instance, new_uuid
from ganeti.opcodes.typed import OpInstanceSetParams
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

_AUTO_MACS = (params.MAC_AUTO, params.MAC_GENERATE)


def _shown(value: Any) -> Any:
    return params.VALUE_DEFAULT if value is params.DEFAULT else value


@register
class LUInstanceSetParams(InstanceLU[OpInstanceSetParams]):
    """Change an instance (see the module docstring).

    Locks: the instance exclusively, its node groups shared, its nodes
    exclusively.
    """

    OP_ID = "OP_INSTANCE_SET_PARAMS"

    def check_arguments(self) -> None:
        op = self.op
        if op.iallocator is not None:  # Ganeti's use of it: choose the secondary of a conversion to drbd
            raise errors.OpPrereqError("An allocator (-I) only chooses the secondary node of a conversion to drbd,"
                                       " which needs LVM and DRBD (not available on these nodes)",
                                       errors.ECODE_INVAL)
        if op.remote_node is not None and op.disk_template is None:
            raise errors.OpPrereqError("A secondary node (-n) is only for a conversion to drbd, which needs LVM and"
                                       " DRBD (not available on these nodes)", errors.ECODE_INVAL)
        if op.pnode is not None and op.disk_template is not None:
            raise errors.OpPrereqError("Changing the primary node and the disk template at once is not supported:"
                                       " do one, then the other", errors.ECODE_INVAL)
        #: the new ext disks' provider and parameters of a conversion to ext
        self.convert_ext = disk_convert.check_arguments(op)
        if op.instance_communication is not None:
            instance = next((i for i in self.cfg.instances.values() if i.name == op.instance_name), None)
            comm_mod = cluster_params.communication_mod(self.cfg, op.instance_communication, instance) \
                if instance is not None else None
            if comm_mod is not None:
                self.op = op = attrs.evolve(op, nics=list(op.nics or []) + [comm_mod])
        self.disk_mods = params.upgrade_mods(op.disks, "disk")
        self.nic_mods = params.upgrade_mods(op.nics, "NIC")
        for action, _ident, _mod in self.nic_mods:
            if action in (params.MOD_ATTACH, params.MOD_DETACH):
                raise errors.OpPrereqError("NICs cannot be attached or detached (only disks)", errors.ECODE_INVAL)
        for action, _ident, mod in self.disk_mods + self.nic_mods:
            if action in (params.MOD_REMOVE, params.MOD_DETACH) and mod:
                raise errors.OpPrereqError("Not accepting parameters on removal", errors.ECODE_INVAL)
        for position, (action, _ident, mod) in enumerate(self.disk_mods):
            if action == params.MOD_ATTACH:
                disk_attach.check_attach(mod)
            elif action == params.MOD_MODIFY:
                if "size" in mod:
                    raise errors.OpPrereqError("Disk size cannot be changed here (grow the disk instead)",
                                               errors.ECODE_INVAL)
                # other keys: ExtStorage parameters of an ext disk, checked once the disk is known
                params.check_disk(ext_disks.generic_keys(mod), position, require_size=False)
        self.bep = params.check_beparams(op.beparams)
        self.osp = params.check_osparams(op.osparams)
        self.osp_private = params.check_osparams(op.osparams_private or {})
        if not (self.disk_mods or self.nic_mods or self.bep or op.hvparams or self.osp or self.osp_private
                or op.os_name or op.offline is not None or op.runtime_mem or op.disk_template or op.pnode):
            raise errors.OpPrereqError("No changes submitted", errors.ECODE_INVAL)

    def expand_names(self) -> None:
        super().expand_names()
        if self.op.pnode is not None:  # Ganeti's --new-primary
            node = expand_node(self.cfg, self.op.pnode)
            self.op = attrs.evolve(self.op, pnode=node.name, pnode_uuid=node.uuid)
        self.needed_locks[LEVEL_NODEGROUP] = []
        self.needed_locks[LEVEL_NODE] = []
        self.share_locks[LEVEL_NODEGROUP] = True

    def declare_locks(self, level: str) -> None:
        inst = self.cfg.instances.get(self.op.instance_uuid or "")
        if inst is None:
            return
        nodes = iu.instance_nodes(self.cfg, inst)
        if self.op.pnode_uuid and self.op.pnode_uuid not in nodes:
            nodes = nodes + [self.op.pnode_uuid]
        if level == LEVEL_NODEGROUP:
            self.needed_locks[level] = sorted({self.cfg.nodes[n].group for n in nodes if n in self.cfg.nodes}
                                              - {None})
        elif level == LEVEL_NODE:
            self.needed_locks[level] = nodes

    # --- checks --------------------------------------------------------------------
    def check_prereq(self) -> None:
        super().check_prereq()
        inst, op, cfg = self.instance, self.op, self.cfg
        self.hvp = params.check_hvparams(inst.hypervisor or "", op.hvparams)
        new_be = params.merged(inst.beparams, self.bep)
        filled = rpc_inst.filled_beparams(cfg, attrs.evolve(inst, beparams=new_be))
        if isinstance(filled.get("minmem"), int) and isinstance(filled.get("maxmem"), int) \
                and filled["minmem"] > filled["maxmem"]:
            raise errors.OpPrereqError("Minimum memory (%s) is greater than maximum memory (%s)"
                                       % (filled["minmem"], filled["maxmem"]), errors.ECODE_INVAL)
        offline = op.offline
        if offline is not None:
            if offline and inst.admin_state == iu.ADMIN_UP:
                raise errors.OpPrereqError("Instance %s is marked to be up, cannot set it offline" % inst.name,
                                           errors.ECODE_STATE)
        elif inst.admin_state == iu.ADMIN_OFFLINE and (self.disk_mods or self.nic_mods):
            raise errors.OpPrereqError("Instance %s is offline: bring it online first" % inst.name,
                                       errors.ECODE_STATE)
        if self.disk_mods:
            if inst.disk_template == iu.DT_DISKLESS and any(a == params.MOD_ADD for a, _i, _m in self.disk_mods):
                raise errors.OpPrereqError("Disks cannot be added to a diskless instance (no disk template "
                                           "conversion)", errors.ECODE_INVAL)
            if any(a in (params.MOD_REMOVE, params.MOD_DETACH) for a, _i, _m in self.disk_mods) \
                    and inst.admin_state == iu.ADMIN_UP \
                    and not (op.hotplug or op.hotplug_if_possible):
                raise errors.OpPrereqError("Instance %s is marked to be up: stop it before removing disks, or"
                                           " remove them with --hotplug"
                                           % inst.name, errors.ECODE_STATE)
            if any(a in (params.MOD_ADD, params.MOD_ATTACH) for a, _i, _m in self.disk_mods):
                iu.check_node_online(cfg, self.pnode)
        if op.disk_template is not None:
            disk_convert.check_prereq(cfg, inst, op)
        #: Ganeti's --new-primary: the new primary node's uuid
        self.new_primary = op.pnode_uuid if op.pnode_uuid not in (None, inst.primary_node) else None
        if self.new_primary is not None:
            iu.check_node_online(cfg, self.new_primary)
            iu.check_node_vm_capable(cfg, self.new_primary)
        self._plan_disks()
        self._plan_nics()
        self._plan_nic_networks()

    def _plan_disks(self) -> None:
        """The instance's disks after the modifications (pure)."""
        cfg, inst = self.cfg, self.instance
        disks: list[Disk] = rpc_inst.instance_disks(cfg, inst)
        self.new_disks: list[Disk] = []
        self.removed_disks: list[Disk] = []
        self.disk_changes: list[list[Any]] = []
        #: disks that join (attach) or leave (detach) the instance, kept in the configuration
        self.attached_disks: list[Disk] = []
        self.detached_disks: list[Disk] = []
        #: the ext/blockdev specs of new disks, checked on the primary before anything changes
        self.node_specs: list[tuple[Disk, dict[str, Any]]] = []
        #: ext disks whose parameters change: (index, disk, the parameters set), checked the same way
        self.ext_param_checks: list[tuple[int, Disk, dict[str, str]]] = []
        taken = {d.logical_id[1] for d in disks if isinstance(d.logical_id, list) and len(d.logical_id) == 2}
        for action, ident, mod in self.disk_mods:
            def names(disk: Disk) -> list[str]:
                return [x for x in (disk.name, disk.uuid) if x]

            if action == params.MOD_ATTACH:
                disk = disk_attach.find_detached(cfg, inst, mod)
                position = len(disks) if ident == -1 else ident
                if not isinstance(position, int) or not 0 <= position <= len(disks):
                    raise errors.OpPrereqError("Invalid disk index %s for attaching (there are %d)"
                                               % (ident, len(disks)), errors.ECODE_INVAL)
                if any(d.uuid == disk.uuid for d in disks):
                    raise errors.OpPrereqError("Disk %s is attached twice" % (disk.name or disk.uuid),
                                               errors.ECODE_INVAL)
                disks.insert(position, disk)
                if disk in self.detached_disks:
                    self.detached_disks.remove(disk)
                else:
                    self.attached_disks.append(disk)
                self.disk_changes.append(["disk/%d" % position, "attach:size=%s,mode=%s" % (disk.size, disk.mode)])
                continue
            if action == params.MOD_DETACH:
                position = params.find_item(disks, ident, "disk", names)
                disk = disks.pop(position)
                disk_attach.check_detachable(inst, disk)
                if disk in self.new_disks:
                    raise errors.OpPrereqError("A disk added by this modification cannot be detached by it",
                                               errors.ECODE_INVAL)
                if disk in self.attached_disks:
                    self.attached_disks.remove(disk)
                else:
                    self.detached_disks.append(disk)
                self.disk_changes.append(["disk/%d" % position, "detach"])
                continue
            if action == params.MOD_ADD:
                spec = disk_attach.check_new_disk(inst, disks, mod, len(disks))
                if ident == -1:
                    position = len(disks)
                elif isinstance(ident, int) and 0 <= ident <= len(disks):
                    position = ident
                else:
                    raise errors.OpPrereqError("Invalid disk index %s for adding (there are %d)"
                                               % (ident, len(disks)), errors.ECODE_INVAL)
                disk = self._new_disk(spec, taken, position)
                if inst.disk_template in (iu.DT_EXT, iu.DT_BLOCK):
                    self.node_specs.append((disk, spec))
                disks.insert(position, disk)
                self.new_disks.append(disk)
                self.disk_changes.append(["disk/%d" % position,
                                          "add:size=%s,mode=%s" % (disk.size, disk.mode)])
            elif action == params.MOD_REMOVE:
                position = params.find_item(disks, ident, "disk", names)
                disk = disks.pop(position)
                if disk in self.new_disks:
                    self.new_disks.remove(disk)
                elif disk in self.attached_disks:
                    raise errors.OpPrereqError("A disk attached by this modification cannot be removed by it",
                                               errors.ECODE_INVAL)
                else:
                    self.removed_disks.append(disk)
                self.disk_changes.append(["disk/%d" % position, "remove"])
            else:
                position = params.find_item(disks, ident, "disk", names)
                spec = params.check_disk(ext_disks.generic_keys(mod), position, require_size=False)
                changes: dict[str, Any] = {k: spec[k] for k in ("mode", "name") if k in spec}
                for key, value in changes.items():
                    self.disk_changes.append(["disk.%s/%d" % (key, position), value])
                ext_params = ext_disks.modified_params(disks[position], mod, position)
                if ext_params is not None:
                    new_params, shown, given = ext_params
                    changes["params"] = new_params
                    self.disk_changes += [["disk.params:%s/%d" % (k, position), v] for k, v in shown]
                    if given:
                        self.ext_param_checks.append((position, disks[position], given))
                disks[position] = attrs.evolve(disks[position], **changes)
        if disks == [] and self.instance.disk_template != iu.DT_DISKLESS and self.disk_mods:
            raise errors.OpPrereqError("Cannot remove the last disk of instance %s" % inst.name, errors.ECODE_INVAL)
        self.disks = [attrs.evolve(d, iv_name="disk/%d" % i) for i, d in enumerate(disks)]

    def _new_disk(self, spec: dict[str, Any], taken: set[str], position: int) -> Disk:
        cfg, inst = self.cfg, self.instance
        template = inst.disk_template or iu.DT_DISKLESS
        if template in (iu.DT_EXT, iu.DT_BLOCK):
            (disk,) = ext_disks.new_disks(cfg, template, [dict(spec, size=spec.get("size") or 0)],
                                          base_index=position)
            return disk
        if template == iu.DT_RBD:  # a fresh image name; pool and access as for a new instance
            node = cfg.nodes.get(self.pnode)
            (disk,) = rbd_disks.new_disks(cfg, node.group if node is not None else None, inst.hypervisor or "",
                                          [dict(spec, mode=spec.get("mode", "rw"))],
                                          base_index=len(rpc_inst.instance_disks(cfg, inst)))
            return disk
        existing = [d for d in rpc_inst.instance_disks(cfg, inst)
                    if isinstance(d.logical_id, list) and len(d.logical_id) == 2]
        if existing:
            driver, first = existing[0].logical_id
            directory = os.path.dirname(first)
        else:
            driver, directory = "loop", os.path.join(storage_dir(cfg, template) or "", inst.name or "")
        index = 0
        while os.path.join(directory, rpc_inst.DISK_FILE_FORMAT % index) in taken:
            index += 1
        path = os.path.join(directory, rpc_inst.DISK_FILE_FORMAT % index)
        taken.add(path)
        return Disk(uuid=new_uuid(), name=spec.get("name"), dev_type=template, logical_id=[driver, path],
                    nodes=[self.pnode], size=spec["size"], mode=spec.get("mode", "rw"), params={})

    def _plan_nics(self) -> None:
        """The instance's NICs after the modifications (pure but for new MACs)."""
        cfg, inst = self.cfg, self.instance
        nics: list[NIC] = list(inst.nics)
        self.nic_changes: list[list[Any]] = []
        #: for hotplug: the NICs removed, and the uuids of those added and modified
        self.removed_nics: list[NIC] = []
        self.hot_nics: list[tuple[str, str]] = []
        self.auto_macs: list[str] = []  # uuids of NICs with generated MACs
        used = params.used_macs(cfg, skip_instance=inst.uuid)
        for action, ident, mod in self.nic_mods:
            def names(nic: NIC) -> list[str]:
                return [x for x in (nic.name, nic.uuid) if x]

            if action == params.MOD_ADD:
                spec = params.check_nic(cfg, mod, len(nics))
                params.check_nic_mode(cfg, spec, len(nics))
                position = len(nics) if ident == -1 else ident
                if not isinstance(position, int) or not 0 <= position <= len(nics):
                    raise errors.OpPrereqError("Invalid NIC index %s for adding (there are %d)" % (ident, len(nics)),
                                               errors.ECODE_INVAL)
                uuid = new_uuid()
                nic = NIC(uuid=uuid, ip=spec.get("ip"), network=spec.get("network"), name=spec.get("name"),
                          nicparams=dict(spec["nicparams"]), mac=self._mac(spec, used, uuid))
                nics.insert(position, nic)
                self.hot_nics.append((hotplug.ACTION_ADD, uuid))
                self.nic_changes.append(["nic.%d" % position, "add:mac=%s,ip=%s,mode=%s,link=%s,network=%s" % (
                    nic.mac, nic.ip, nic.nicparams.get("mode"), nic.nicparams.get("link"), nic.network)])
            elif action == params.MOD_REMOVE:
                position = params.find_item(nics, ident, "NIC", names)
                removed = nics.pop(position)
                if all(uuid != removed.uuid for _a, uuid in self.hot_nics):
                    self.removed_nics.append(removed)
                self.hot_nics = [(a, u) for a, u in self.hot_nics if u != removed.uuid]
                self.nic_changes.append(["nic.%d" % position, "remove"])
            else:
                position = params.find_item(nics, ident, "NIC", names)
                spec = params.check_nic(cfg, mod, position, modify=True)
                old = nics[position]
                changes: dict[str, Any] = {k: spec[k] for k in ("ip", "network", "name") if k in spec}
                if "nicparams" in spec:
                    changes["nicparams"] = dict(old.nicparams or {}, **spec["nicparams"])
                if "mac" in spec:
                    changes["mac"] = self._mac(spec, used, old.uuid)
                nic = attrs.evolve(old, **changes)
                params.check_nic_mode(cfg, {"ip": nic.ip, "network": nic.network, "nicparams": nic.nicparams},
                                      position)
                nics[position] = nic
                if all(uuid != nic.uuid for _a, uuid in self.hot_nics):
                    self.hot_nics.append((hotplug.ACTION_MODIFY, nic.uuid or ""))
                for key, value in sorted(changes.items()):
                    if key == "nicparams":
                        for pkey, pvalue in sorted(spec["nicparams"].items()):
                            self.nic_changes.append(["nic.%s/%d" % (pkey, position), pvalue])
                    else:
                        self.nic_changes.append(["nic.%s/%d" % (key, position), value])
        self.nics = nics

    def _plan_nic_networks(self) -> None:
        """The planned NICs on networks: the connection's parameters when the
        network changes, addresses checked, C{ip=pool} drawn (see
        L{ganeti.cmdlib.instance_networks})."""
        cfg, inst, op = self.cfg, self.instance, self.op
        before = {n.uuid: n for n in inst.nics}
        own = netpool.nic_addresses(inst.nics)
        self.pool_nics: dict[int, str] = {}
        nics: list[NIC] = []
        used = params.used_macs(cfg, skip_instance=inst.uuid)
        used.update(params.normalize_mac(n.mac) for n in self.nics if n.mac)
        for index, nic in enumerate(self.nics):
            old = before.get(nic.uuid)
            network = nic.network
            if old is not None and old.network != network and nic.mac == old.mac \
                    and params.mac_prefix(cfg, old.network) != params.mac_prefix(cfg, network):
                # as Ganeti: a NIC moving to a network with another MAC prefix gets a new MAC
                nic = attrs.evolve(nic, mac=params.generate_mac(params.mac_prefix(cfg, network), used))
                self.auto_macs.append(nic.uuid or "")
                self.nic_changes.append(["nic.mac/%d" % index, nic.mac])
            if network:
                if old is None or old.network != network:
                    nic = attrs.evolve(nic, nicparams=inetworks.group_netparams(cfg, network, self.pnode))
                if nic.ip == inetworks.IP_POOL:
                    self.pool_nics[index] = network
                elif nic.ip and (old is None or (old.network, old.ip) != (network, nic.ip)):
                    inetworks.check_explicit_ip(cfg, network, nic.ip, op.conflicts_check, index, own)
            elif nic.ip == inetworks.IP_POOL:
                raise errors.OpPrereqError("NIC %d: if ip=pool, parameter network must be passed too" % index,
                                           errors.ECODE_INVAL)
            elif op.conflicts_check and (old is None or old.ip != nic.ip):
                inetworks.check_conflicting_ip(cfg, nic.ip, self.pnode)
            nics.append(nic)
        self.nics = self._draw(nics)

    def _draw(self, nics: list[NIC]) -> list[NIC]:
        drawn = inetworks.draw_pool_ips(self.cfg, self.pool_nics)
        return [attrs.evolve(n, ip=drawn[i]) if i in drawn else n for i, n in enumerate(nics)]

    def _mac(self, spec: dict[str, Any], used: set[str], nic_uuid: str | None) -> str:
        mac = spec["mac"]
        if mac in _AUTO_MACS:
            self.auto_macs.append(nic_uuid or "")
            return params.generate_mac(params.mac_prefix(self.cfg, spec.get("network")), used)
        if mac in used:
            raise errors.OpPrereqError("MAC address %s already in use in the cluster" % mac, errors.ECODE_NOTUNIQUE)
        used.add(mac)
        given: str = mac
        return given

    # --- execution -------------------------------------------------------------------
    def _changed_instance(self) -> tuple[Instance, list[list[Any]]]:
        inst, op = self.instance, self.op
        result: list[list[Any]] = []
        changes: dict[str, Any] = {}
        if self.bep:
            changes["beparams"] = params.merged(inst.beparams, self.bep)
            result += [["be/%s" % k, _shown(v)] for k, v in sorted(self.bep.items())]
        if self.hvp:
            changes["hvparams"] = params.merged(inst.hvparams, self.hvp)
            result += [["hv/%s" % k, _shown(v)] for k, v in sorted(self.hvp.items())]
        if self.osp:
            changes["osparams"] = params.merged(inst.osparams, self.osp)
            result += [["os/%s" % k, _shown(v)] for k, v in sorted(self.osp.items())]
        if self.osp_private:
            changes["osparams_private"] = params.merged(inst.osparams_private, self.osp_private)
            result += [["os_private/%s" % k, "<private>"] for k in sorted(self.osp_private)]
        if op.os_name and op.os_name != inst.os:
            changes["os"] = op.os_name
            result.append(["os_name", op.os_name])
        offline = op.offline
        if offline is True and inst.admin_state != iu.ADMIN_OFFLINE:
            changes["admin_state"] = iu.ADMIN_OFFLINE
            result.append(["admin_state", iu.ADMIN_OFFLINE])
        elif offline is False and inst.admin_state == iu.ADMIN_OFFLINE:
            changes["admin_state"] = iu.ADMIN_DOWN
            result.append(["admin_state", iu.ADMIN_DOWN])
        if self.disk_mods:
            changes["disks"] = [d.uuid for d in self.disks]
            result += self.disk_changes
        if self.nic_mods:
            changes["nics"] = self.nics
            result += self.nic_changes
        return attrs.evolve(inst, **changes), result

    async def _check_memory(self, new: Instance) -> None:
        if self.op.force or "maxmem" not in self.bep:
            return
        old_mem = iu.instance_memory(self.cfg, self.instance)
        new_mem = iu.instance_memory(self.cfg, new)
        if new_mem <= old_mem or self.instance.admin_state != iu.ADMIN_UP:
            return
        info = await iu.instance_info(self, self.instance)
        if info is None:
            return
        current = int(info.get("memory") or old_mem)
        await iu.check_node_free_memory(self, self.pnode, "increasing the memory of instance %s" % new.name,
                                        new_mem - current, new.hypervisor or "")

    async def _check_runtime_mem(self, new: Instance) -> int | None:
        """The checks of C{runtime_mem} (see the module docstring): its value, or C{None}."""
        memory = self.op.runtime_mem
        if not memory:
            return None
        inst = self.instance
        info = await iu.instance_info(self, inst)
        if info is None:
            raise errors.OpPrereqError("Instance %s is not running" % inst.name, errors.ECODE_STATE)
        filled = rpc_inst.filled_beparams(self.cfg, new)
        minmem, maxmem = int(filled.get("minmem") or 0), int(filled.get("maxmem") or 0)
        if not self.op.force and not minmem <= memory <= maxmem:
            raise errors.OpPrereqError("Instance %s must have memory between %d and %d MB of memory unless --force"
                                       " is given" % (inst.name, minmem, maxmem), errors.ECODE_INVAL)
        delta = memory - int(info.get("memory") or 0)
        if delta > 0:
            await iu.check_node_free_memory(self, self.pnode, "ballooning memory for instance %s" % inst.name,
                                            delta, inst.hypervisor or "")
        return memory

    async def exec_(self, feedback: Feedback) -> Any:
        inst, op = self.instance, self.op
        new, result = self._changed_instance()
        self.hotplug = await hotplug.decide(self, bool(self.disk_mods or self.nic_mods))
        if (self.removed_disks or self.detached_disks) and not self.hotplug and inst.admin_state == iu.ADMIN_UP:
            raise errors.OpPrereqError("Instance %s is marked to be up: stop it before removing disks, or remove"
                                       " them with --hotplug" % inst.name, errors.ECODE_STATE)
        if self.node_specs:  # a missing provider or adopted device: refused before anything changes
            new = await self._check_node_specs(new)
        if self.ext_param_checks:  # parameters the provider does not take: the same
            await ext_disks.check_params_on_node(self, self.pnode, self.ext_param_checks)
        await self._check_memory(new)
        runtime_mem = await self._check_runtime_mem(new)
        if op.os_name and op.os_name != inst.os:
            await check_os(self, self.pnode, op.os_name, dict(new.osparams), op.force_variant)
        if op.disk_template is not None:  # the other changes are stored after it, on the converted instance
            if op.remote_node is not None:
                await self.log_warning("Changing the disk template to a non-mirrored one, the secondary node will"
                                       " be ignored")
            converted = await disk_convert.convert(self, inst, self.convert_ext)
            self.instance = inst = self.cfg.instances[inst.uuid or ""]
            new, result = self._changed_instance()
            result += converted
        if runtime_mem is not None:
            await iu.call_node(self, self.pnode, procedures.instance_balloon_memory.call(iu.encode(self, inst), runtime_mem),
                               what="modify the runtime memory of instance %s" % inst.name)
            result.append(["runtime_memory", runtime_mem])
        by_uuid = {d.uuid: d for d in self.disks}
        new_disks = [by_uuid[disk.uuid] for disk in self.new_disks]
        for disk in self.removed_disks:
            if self.hotplug:
                result.append(["disk/%s" % disk.iv_name.split("/")[-1] if disk.iv_name else "disk",
                               await hotplug.remove_disk(self, inst, disk)])
            for node in disk.nodes or [self.pnode]:
                for problem in await iu.remove_disks(self, node, [disk]):
                    await self.log_warning("%s (the disk leaves the configuration anyway)", problem)
        for disk in self.detached_disks:
            result += await disk_attach.detach(self, inst, disk, self.hotplug)
        if self.new_primary is not None:
            await new_primary.check(self, inst, self.new_primary)
            new = attrs.evolve(new, primary_node=self.new_primary)
        stored = await self._store(new, new_disks)
        if self.new_primary is not None:
            await new_primary.move_disks(self, stored, inst.primary_node or "")
        created: list[Disk] = []
        try:
            for disk in new_disks:
                await iu.call_node(self, self.pnode, procedures.blockdev_create.call(
                    disk.to_dict(), disk.size or 0, inst.name, True, "originstname+%s" % inst.name, False),
                                   what="create disk %s of instance %s" % (disk.iv_name, inst.name))
                created.append(disk)
        except Exception:  # not GeneratorExit & co: nothing may be awaited then
            await self._undo_new_disks(inst, new_disks, created)
            raise
        if self.hotplug:
            joined = [by_uuid[d.uuid] for d in self.attached_disks if d.uuid in by_uuid]
            result += await hotplug.after_store(self, stored, new_disks + joined, self.removed_nics, self.hot_nics)
        for disk in self.disks:
            old = self.cfg.disks.get(disk.uuid or "")
            if old is not None and disk.uuid not in {d.uuid for d in new_disks} and \
                    (old.iv_name, old.mode, old.name, old.params) != (disk.iv_name, disk.mode, disk.name, disk.params):
                await self.update("disk", attrs.evolve(old, iv_name=disk.iv_name, mode=disk.mode, name=disk.name,
                                                       params=disk.params))
        if self.hotplug and not (self.hvp or self.bep):
            pass
        elif result and stored.admin_state == iu.ADMIN_UP and (self.disk_mods or self.nic_mods or self.hvp or self.bep):
            await self.log_info("The changes take effect at the next start of instance %s", stored.name)
        return result

    async def _check_node_specs(self, new: Instance) -> Instance:
        """Check the new ext/blockdev disks on the primary (provider, adopted
        device); an adopted disk gets its device's size."""
        specs = [spec for _disk, spec in self.node_specs]
        await ext_disks.check_on_node(self, self.pnode, self.instance.disk_template or "", specs)
        sized = {disk.uuid: spec.get("size") or disk.size for disk, spec in self.node_specs}
        self.disks = [attrs.evolve(d, size=sized[d.uuid]) if d.uuid in sized else d for d in self.disks]
        self.new_disks = [attrs.evolve(d, size=sized[d.uuid]) if d.uuid in sized else d for d in self.new_disks]
        return new

    async def _undo_new_disks(self, original: Instance, new_disks: list[Disk], created: list[Disk]) -> None:
        """After a disk could not be made: remove those made, then put the
        instance back as it was (but for disks already removed), the new
        disks leaving the configuration last."""
        problems = await iu.remove_disks(self, self.pnode, created)
        for problem in problems:
            await self.log_warning("%s", problem)
        if problems:
            await self.log_warning("The new disks stay in the configuration of instance %s; remove them with"
                                   " 'gnt-instance modify --disk N:remove'", original.name)
            return
        removed = {d.uuid for d in self.removed_disks}
        current = self.cfg.instances.get(original.uuid or "", original)
        reverted = attrs.evolve(original, disks=[d for d in original.disks if d not in removed],
                                serial_no=current.serial_no, mtime=current.mtime)
        try:
            await self.update("instance", reverted, remove_disks=[d.uuid for d in new_disks if d.uuid])
        except Exception as e:
            await self.log_warning("Could not undo the changes of instance %s: %s", original.name, e)

    async def _store(self, new: Instance, created: list[Disk]) -> Instance:
        """Store C{new} with its new disks; new automatic MACs if a parallel job took them."""
        removed = [d.uuid for d in self.removed_disks if d.uuid]
        for attempt in range(MAC_ATTEMPTS):
            try:
                stored: Instance = await self.update("instance", new, disks=created, remove_disks=removed)
                return stored
            except MacInUse as e:
                if not self.auto_macs or attempt == MAC_ATTEMPTS - 1:
                    raise errors.OpPrereqError(str(e), errors.ECODE_NOTUNIQUE) from None
                self.cfg = await self.ctx.wconfd.read_config()
                auto = set(self.auto_macs)
                used = params.used_macs(self.cfg, skip_instance=new.uuid)
                used.update(params.normalize_mac(n.mac) for n in new.nics if n.uuid not in auto and n.mac)
                new = attrs.evolve(new, nics=[
                    attrs.evolve(n, mac=params.generate_mac(params.mac_prefix(self.cfg, n.network), used))
                    if n.uuid in auto else n for n in new.nics])
            except IpInUse as e:
                # a parallel job took a pool address first: draw again
                if not self.pool_nics or attempt == MAC_ATTEMPTS - 1:
                    raise errors.OpPrereqError("%s" % e, errors.ECODE_NOTUNIQUE) from None
                self.cfg = await self.ctx.wconfd.read_config()
                new = attrs.evolve(new, nics=self._draw(list(new.nics)))
        raise errors.ProgrammerError("unreachable")  # pragma: no cover
