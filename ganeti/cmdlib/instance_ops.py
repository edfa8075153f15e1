"""Instance operations: startup, shutdown, reboot, reinstall, rename, console.

Every LU here locks the instance (by name) exclusively, under the shared
BGL; startup also takes the node-res lock of the primary node (its memory
is checked before starting).  The admin state recorded in the
configuration follows what the user asked (C{up} after a start or reboot,
C{down} after a shutdown) unless C{no_remember}.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ganeti import errors
from ganeti.cmdlib import hostcheck, names
from ganeti.cmdlib import instance_params as params
from ganeti.cmdlib import instance_utils as iu
from ganeti.cmdlib.base import LEVEL_INSTANCE, LEVEL_NODE_RES, Feedback, LogicalUnit, register
from ganeti.cmdlib.instance import check_os
from ganeti.hvconstants import STATE_SHUTDOWN
from ganeti.objects import Instance
from ganeti.opcodes.typed import (
    OpInstanceActivateDisks,
    OpInstanceConsole,
    OpInstanceDeactivateDisks,
    OpInstanceGrowDisk,
    OpInstanceReboot,
    OpInstanceRecreateDisks,
    OpInstanceReinstall,
    OpInstanceRename,
    OpInstanceSetParams,
    OpInstanceShutdown,
    OpInstanceStartup,
)
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures

#: The opcodes of the LUs on one existing instance.
_InstanceLUOpT = TypeVar(
    "_InstanceLUOpT",
    bound=OpInstanceActivateDisks | OpInstanceConsole | OpInstanceDeactivateDisks | OpInstanceGrowDisk
    | OpInstanceReboot | OpInstanceRecreateDisks | OpInstanceReinstall | OpInstanceRename | OpInstanceSetParams | OpInstanceShutdown
    | OpInstanceStartup,
    covariant=True,
)


class InstanceLU(LogicalUnit[_InstanceLUOpT]):
    """An LU on one existing instance, locked (exclusively unless C{SHARED})."""

    REQ_BGL = False
    SHARED = False
    #: whether the LU takes a forthcoming instance (as Ganeti: only a few do)
    ALLOW_FORTHCOMING = False

    def expand_names(self) -> None:
        inst = iu.expand_instance(self.cfg, self.op.instance_name)
        if not self.ALLOW_FORTHCOMING:
            iu.refuse_forthcoming(inst)
        self.op = attrs.evolve(self.op, instance_name=inst.name or "", instance_uuid=inst.uuid)
        self.needed_locks[LEVEL_INSTANCE] = [inst.name]
        if self.SHARED:
            self.share_locks[LEVEL_INSTANCE] = True

    def check_prereq(self) -> None:
        self.instance: Instance = iu.current_instance(self.cfg, self.op.instance_uuid, self.op.instance_name)

    @property
    def pnode(self) -> str:
        return self.instance.primary_node or ""

    def check_primary_online(self, ignore_offline_nodes: bool) -> None:
        """Note in C{primary_offline} whether the primary node is offline;
        refuse it then, unless C{ignore_offline_nodes}."""
        node = iu.get_node(self.cfg, self.pnode)
        self.primary_offline = bool(node.offline)
        if self.primary_offline and not ignore_offline_nodes:
            iu.check_node_online(self.cfg, self.pnode)


@register
class LUInstanceStartup(InstanceLU[OpInstanceStartup]):
    """Start an instance on its primary node.

    The node must have the instance's memory free.  C{hvparams}/C{beparams}
    apply to this start only.  An instance already running is left alone;
    one whose guest powered itself off (hypervisor state C{shutdown}, shown
    as C{USER_down} or C{ERROR_down}) is stopped first, then started.
    With C{ignore_offline_nodes} and an offline primary, only the admin
    state is recorded.  The admin state is recorded up (unless
    C{no_remember}) before the start, as Ganeti does: a start that fails
    leaves the instance marked up and stopped (C{ERROR_down}).
    """

    OP_ID = "OP_INSTANCE_STARTUP"

    def expand_names(self) -> None:
        super().expand_names()
        self.needed_locks[LEVEL_NODE_RES] = []

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_NODE_RES:
            inst = self.cfg.instances.get(self.op.instance_uuid or "")
            self.needed_locks[LEVEL_NODE_RES] = [inst.primary_node] if inst is not None and inst.primary_node else []

    def check_prereq(self) -> None:
        super().check_prereq()
        inst, op = self.instance, self.op
        iu.check_instance_state(inst, msg="start it")
        self.bep = params.check_beparams(op.beparams, allow_default=False)
        self.hvp = params.check_hvparams(inst.hypervisor or "", op.hvparams, allow_default=False)
        self.check_primary_online(op.ignore_offline_nodes)

    async def exec_(self, feedback: Feedback) -> Any:
        inst, op = self.instance, self.op
        info = None
        if not self.primary_offline:
            await iu.check_bridges(self, inst.nics, self.pnode, inst.hypervisor or "")
            info = await iu.instance_info(self, inst)
            if info is None:
                memory = iu.instance_memory(self.cfg, inst, self.bep)
                await iu.check_node_free_memory(self, self.pnode, "starting instance %s" % inst.name, memory,
                                                inst.hypervisor or "")
        if not op.no_remember:
            # marked up before the start, as Ganeti does: a start that fails (or a job killed during it) leaves an
            # instance marked up and not running (ERROR_down), which verify reports and the watcher starts again
            inst = await iu.set_admin_state(self, inst, iu.ADMIN_UP)
        if self.primary_offline:
            await self.log_warning("Primary node offline, marked instance as started")
        elif info is not None and info.get("state") != STATE_SHUTDOWN:
            await self.feedback("Instance %s is already running" % inst.name)
        else:
            if info is not None:
                # its guest powered itself off: end what is left of it (it still holds its memory, so no
                # free-memory check; Ganeti's "requires_cleanup")
                await iu.shutdown_instance_on(self, inst, self.pnode, 0)
            await iu.start_instance_on(self, inst, self.pnode, hvp=self.hvp or None, bep=self.bep or None,
                                       paused=op.startup_paused)
        return None


@register
class LUInstanceShutdown(InstanceLU[OpInstanceShutdown]):
    """Stop an instance (cleanly within C{timeout} seconds, then hard).

    The admin state becomes C{down} (from C{admin_state_source}) first,
    unless C{no_remember}; an instance marked offline is refused unless
    C{force}.
    """

    OP_ID = "OP_INSTANCE_SHUTDOWN"

    def check_prereq(self) -> None:
        super().check_prereq()
        inst, op = self.instance, self.op
        if not op.force:
            iu.check_instance_state(inst, msg="shut it down")
        self.check_primary_online(op.ignore_offline_nodes)

    async def exec_(self, feedback: Feedback) -> Any:
        inst, op = self.instance, self.op
        if not op.no_remember and inst.admin_state != iu.ADMIN_OFFLINE:
            inst = await iu.set_admin_state(self, inst, iu.ADMIN_DOWN,
                                            op.admin_state_source or iu.ADMIN_SOURCE_ADMIN)
        if self.primary_offline:
            await self.log_warning("Primary node offline, marked instance as stopped")
            return None
        await iu.shutdown_instance_on(self, inst, self.pnode, op.timeout)
        return None


@register
class LUInstanceReboot(InstanceLU[OpInstanceReboot]):
    """Reboot a running instance: C{soft}/C{hard} in place, C{full} as a
    shutdown and a start.  The admin state becomes C{up}."""

    OP_ID = "OP_INSTANCE_REBOOT"

    def check_prereq(self) -> None:
        super().check_prereq()
        iu.check_instance_state(self.instance, msg="reboot it")
        iu.check_node_online(self.cfg, self.pnode)

    async def exec_(self, feedback: Feedback) -> Any:
        inst, op = self.instance, self.op
        await iu.check_bridges(self, inst.nics, self.pnode, inst.hypervisor or "")
        if await iu.instance_info(self, inst) is None:
            raise errors.OpPrereqError("Instance %s is not running, cannot reboot it" % inst.name, errors.ECODE_STATE)
        kind = op.reboot_type
        if kind in ("soft", "hard"):
            await iu.call_node(
                self, self.pnode, procedures.instance_reboot.call(
                    rpc_inst.encode_instance(self.cfg, inst), kind, op.shutdown_timeout, iu.reason_trail(self),
                ).within(iu.TMO_START + op.shutdown_timeout), what="reboot instance %s" % inst.name)
        else:
            await iu.shutdown_instance_on(self, inst, self.pnode, op.shutdown_timeout)
            await iu.start_instance_on(self, inst, self.pnode)
        await iu.set_admin_state(self, inst, iu.ADMIN_UP)
        return None


@register
class LUInstanceReinstall(InstanceLU[OpInstanceReinstall]):
    """Reinstall the OS of a stopped instance (its OS create script, run
    again); C{os_type} changes its OS for good, C{osparams} apply to this
    installation only."""

    OP_ID = "OP_INSTANCE_REINSTALL"

    def check_prereq(self) -> None:
        super().check_prereq()
        inst, op = self.instance, self.op
        if inst.disk_template == iu.DT_DISKLESS:
            raise errors.OpPrereqError("Instance '%s' has no disks" % inst.name, errors.ECODE_INVAL)
        iu.check_instance_state(inst, want_down=True, msg="reinstall it")
        iu.check_node_online(self.cfg, self.pnode)
        self.osp = params.check_osparams(op.osparams or {}, allow_default=False)
        self.secret = params.check_osparams(op.osparams_secret or {}, allow_default=False)
        self.private = params.check_osparams(op.osparams_private or {}, allow_default=False)
        if not op.os_type and not inst.os:
            raise errors.OpPrereqError("Instance %s has no OS; give os_type" % inst.name, errors.ECODE_INVAL)

    async def exec_(self, feedback: Feedback) -> Any:
        inst, op = self.instance, self.op
        await iu.check_instance_not_running(self, inst, "cannot reinstall")
        os_type = op.os_type or inst.os or ""
        await check_os(self, self.pnode, os_type, self.osp, op.force_variant)
        probe = attrs.evolve(inst, os=os_type, osparams=dict(inst.osparams or {}, **self.osp),
                             osparams_private=dict(inst.osparams_private or {}, **self.private))
        full = dict(rpc_inst.filled_osparams(self.cfg, probe))
        full.update(rpc_inst.filled_osparams_private(self.cfg, probe))
        full.update(self.secret)
        await iu.check_os_params(self, True, [self.pnode], os_type, full, op.force_variant)
        if op.os_type and op.os_type != inst.os:
            inst = await self.update("instance", attrs.evolve(inst, os=op.os_type))
        override = dict(self.osp, **self.secret) or None
        data = rpc_inst.encode_instance(self.cfg, inst, osp=override)
        if self.private:
            data["osparams_private"] = dict(data.get("osparams_private") or {}, **self.private)
        await self.feedback("Running the instance OS create scripts...")
        await iu.call_node(self, self.pnode, procedures.instance_os_add.call(data, True, op.debug_level or 0),
                           what="install OS for instance %s" % inst.name)
        return None


@register
class LUInstanceRename(InstanceLU[OpInstanceRename]):
    """Rename a stopped instance; the result is the new name.

    Locks: the instance's current name and a new lock for the new name.
    A rename to the instance's own name is accepted, as by Ganeti: the
    same checks (the instance down), no new lock, and the OS's rename
    script runs with the old name equal to the new one.
    The disks keep their paths (a file disk stays under the directory named
    after the old name); the OS's rename script runs on the primary node,
    and its failure is only a warning, as the rename is done by then.
    A forthcoming instance is renamed in the configuration only.
    """

    OP_ID = "OP_INSTANCE_RENAME"
    ALLOW_FORTHCOMING = True  # then only the configuration changes

    def check_arguments(self) -> None:
        op = self.op
        hostcheck.check_ip_needs_name(op.ip_check, op.name_check, "IP address check requires a name check")
        self.op = attrs.evolve(op, new_name=names.normalize_hostname(op.new_name, "instance name"))

    async def resolve(self) -> None:
        """With C{name_check}, the new name must resolve (it becomes the
        canonical name) and, with C{ip_check}, its address must not answer."""
        op = self.op
        if op.name_check:
            new_name = await hostcheck.checked_hostname(self.ctx.net, op.new_name, "new name", op.ip_check)
            self.op = attrs.evolve(op, new_name=new_name)

    def expand_names(self) -> None:
        super().expand_names()
        new, old = self.op.new_name, self.op.instance_name
        if new == old:
            return  # as Ganeti's: no new lock; the rename goes on (the OS rename script runs)
        if self.cfg.find_instance(new) is not None:
            raise errors.OpPrereqError("Instance '%s' is already in the cluster" % new, errors.ECODE_NOTUNIQUE)
        self.add_locks[LEVEL_INSTANCE] = [new]

    def check_prereq(self) -> None:
        super().check_prereq()
        if self.op.new_name != self.instance.name and self.cfg.find_instance(self.op.new_name) is not None:
            raise errors.OpPrereqError("Instance '%s' is already in the cluster" % self.op.new_name,
                                       errors.ECODE_NOTUNIQUE)
        iu.check_instance_state(self.instance, want_down=True, allow_offline=True, msg="rename it")

    async def exec_(self, feedback: Feedback) -> Any:
        inst, new = self.instance, self.op.new_name
        old = inst.name or ""
        node = iu.get_node(self.cfg, self.pnode)
        if inst.forthcoming:  # only reserved: nothing on the nodes to rename
            await self.update("instance", attrs.evolve(inst, name=new))
            return new
        if not node.offline:
            await iu.check_instance_not_running(self, inst, "cannot rename")
        inst = await self.update("instance", attrs.evolve(inst, name=new))
        if not node.offline:
            await self._set_disk_info(inst)
        if node.offline:
            await self.log_warning("Primary node %s is offline: the OS rename script did not run", node.name)
        elif inst.os:
            result = await iu.call_node_result(
                self, self.pnode, procedures.instance_run_rename.call(
                    rpc_inst.encode_instance(self.cfg, inst), old, self.op.debug_level or 0))
            if result.failed:
                await self.log_warning("Could not run OS rename script for instance %s on node %s (but the instance"
                                       " has been renamed in Ganeti): %s", new, node.name, result.fail_msg)
        return new


    async def _set_disk_info(self, inst: Instance) -> None:
        """As Ganeti: the disks' metadata names the new instance (an ext
        volume's C{setinfo} script; the other templates keep none)."""
        for index, disk in enumerate(rpc_inst.instance_disks(self.cfg, inst)):
            if disk.dev_type != iu.DT_EXT:
                continue
            result = await iu.call_node_result(self, self.pnode, procedures.blockdev_setinfo.call(
                rpc_inst.disk_dict(self.cfg, disk, inst), "originstname+%s" % inst.name))
            if result.failed:
                await self.log_warning("Error setting info on node %s for disk %d: %s",
                                       iu.node_name(self.cfg, self.pnode), index, result.fail_msg)


@register
class LUInstanceConsole(InstanceLU[OpInstanceConsole]):
    """How to reach a running instance's console (the node's
    C{instance_console_info} answer)."""

    OP_ID = "OP_INSTANCE_CONSOLE"
    SHARED = True

    def check_prereq(self) -> None:
        super().check_prereq()
        iu.check_node_online(self.cfg, self.pnode)

    async def exec_(self, feedback: Feedback) -> Any:
        inst = self.instance
        if await iu.instance_info(self, inst) is None:
            if inst.admin_state == iu.ADMIN_UP:
                raise errors.OpExecError("Instance %s is marked to be up, but not running" % inst.name)
            raise errors.OpExecError("Instance %s is not running" % inst.name)
        console = await iu.call_node(self, self.pnode, procedures.instance_console_info.call(rpc_inst.encode_instance(self.cfg, inst)),
                                     what="get the console of instance %s" % inst.name)
        if not isinstance(console, dict):
            raise errors.OpExecError("Node %s gave no console description for instance %s"
                                     % (iu.node_name(self.cfg, self.pnode), inst.name))
        return console
