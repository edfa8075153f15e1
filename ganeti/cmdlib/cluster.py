"""Cluster LUs: OP_CLUSTER_QUERY, OP_CLUSTER_VERIFY_CONFIG, OP_CLUSTER_SET_PARAMS.

The other verify LUs are in L{ganeti.cmdlib.verify}; they report through
L{VerifyErrors}.
"""

from __future__ import annotations

import copy
import re
from typing import Any, TypeVar

import attrs

from ganeti import errors, uidpool
from ganeti.cmdlib import allocator, cluster_os, cluster_params, group_params, instance_params, rbd_disks
from ganeti.cmdlib.base import ALL_SET, LEVEL_CLUSTER, LEVELS, Feedback, LogicalUnit, register
from ganeti.cmdlib.instance_utils import check_os_params
from ganeti.cmdlib.queue_verify import verify_queue_replicas
from ganeti.config import verify as config_verify
from ganeti.config.bootstrap import DEFAULT_HVPARAMS
from ganeti.jobs.lifecycle import ResultWithJobs
from ganeti.opcodes.typed import OpClusterQuery, OpClusterSetParams, OpClusterVerifyConfig, OpClusterVerifyGroup
from ganeti.query import cluster_info


@register
class LUClusterQuery(LogicalUnit[OpClusterQuery]):
    """The cluster's information (the dict of LUXI QueryClusterInfo)."""

    OP_ID = "OP_CLUSTER_QUERY"
    REQ_BGL = False

    async def exec_(self, feedback: Feedback) -> Any:
        return cluster_info(self.cfg)


#: Ganeti's error code for configuration problems, and the item type.
CV_ECLUSTERCFG = "ECLUSTERCFG"
_ITEM_CLUSTER = "cluster"
#: The line of C{debug_simulate_errors}.
SIMULATED = "simulated error (debug_simulate_errors)"


#: The opcodes of the LUs that report as Ganeti's verify does.
_VerifyOpT = TypeVar("_VerifyOpT", bound=OpClusterVerifyConfig | OpClusterVerifyGroup, covariant=True)


class VerifyErrors(LogicalUnit[_VerifyOpT]):
    """How the verify LUs report (Ganeti's C{_VerifyErrors}): one feedback
    line per problem, C{"  - ERROR: <kind> <item>: <text>"}, or with
    C{error_codes} C{"  - ERROR:<code>:<kind>:<item>:<text>"}; a code in
    C{ignore_errors}, or a warning, is a C{WARNING} line.  Any error makes
    C{self.bad} true: the opcode's result is C{not self.bad}.
    """

    bad: bool = False

    def _item_error(self, kind: str, code: str, item: str, message: str, warning: bool = False) -> Any:
        ltype = "WARNING" if warning or code in (self.op.ignore_errors or []) else "ERROR"
        if ltype == "ERROR":
            self.bad = True
        if self.op.error_codes:
            line = "%s:%s:%s:%s:%s" % (ltype, code, kind, item, message)
        elif item:
            line = "%s: %s %s: %s" % (ltype, kind, item, message)
        else:
            line = "%s: %s: %s" % (ltype, kind, message)
        return self.feedback("  - %s" % line)

    def _node_error(self, code: str, node: str, message: str, warning: bool = False) -> Any:
        return self._item_error("node", code, node, message, warning)


@register
class LUClusterVerifyConfig(VerifyErrors[OpClusterVerifyConfig]):
    """Verify the configuration's consistency, and the job queue's replicas;
    result True when both are sound.

    Every lock, shared.  Problems are those WConfD's own check and
    L{ganeti.config.verify} find, each reported as a feedback line in
    Ganeti's format (C{"  - ERROR: cluster: <text>"}, or
    C{"  - ERROR:ECLUSTERCFG:cluster::<text>"} with C{error_codes}).  The
    job queue is cluster-wide, not a group's: its check
    (L{ganeti.cmdlib.queue_verify}: every online master candidate's replica
    must match the master's queue) runs here, in the job
    C{gnt-cluster verify} submits first.
    """

    OP_ID = "OP_CLUSTER_VERIFY_CONFIG"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.needed_locks = {level: ALL_SET for level in LEVELS if level != LEVEL_CLUSTER}
        self.share_all()

    async def exec_(self, feedback: Feedback) -> Any:
        self.bad = False
        await self.feedback("* Verifying cluster config")
        problems: list[str] = []
        for problem in list(await self.ctx.wconfd.verify_config()) + config_verify.verify(self.cfg):
            if problem not in problems:
                problems.append(problem)
        if self.op.debug_simulate_errors:
            problems.append(SIMULATED)
        for problem in problems:
            await self._item_error(_ITEM_CLUSTER, CV_ECLUSTERCFG, "", problem)
        await verify_queue_replicas(self, self._node_error)
        return not self.bad


_MAC_PREFIX = re.compile(r"^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$")
#: a data collector's name (built-in or a MonD plugin executable)
_COLLECTOR_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: Ganeti's default data collector interval (microseconds)
_COLLECTOR_INTERVAL = 5000000


def data_collectors_changed(current: dict[str, Any], enabled: dict[str, bool] | None,
                            intervals: dict[str, int] | None) -> dict[str, Any]:
    """The cluster's C{data_collectors} with C{enabled} and C{intervals} applied.

    @raise errors.OpPrereqError: a name that cannot be a collector's
    """
    changed = {name: dict(params) for name, params in (current or {}).items() if isinstance(params, dict)}
    for name in list(enabled or {}) + list(intervals or {}):
        if not _COLLECTOR_NAME.match(name):
            raise errors.OpPrereqError("Invalid data collector name %r" % name, errors.ECODE_INVAL)
    for name, active in (enabled or {}).items():
        changed.setdefault(name, {"active": True, "interval": _COLLECTOR_INTERVAL})["active"] = active
    for name, interval in (intervals or {}).items():
        changed.setdefault(name, {"active": True, "interval": _COLLECTOR_INTERVAL})["interval"] = interval
    return changed


def _without_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """C{params} refusing the value C{default}: the cluster's values are the
    defaults, there is nothing above them."""
    for key, value in params.items():
        if value is instance_params.DEFAULT:
            raise errors.OpPrereqError("Parameter '%s' has no default above the cluster's own value" % key,
                                       errors.ECODE_INVAL)
    return params


@register
class LUClusterSetParams(LogicalUnit[OpClusterSetParams]):
    """Change cluster parameters (those our model has).

    Locks: the BGL and every instance, node group and node, all shared (as
    Ganeti); the cluster object itself is changed through WConfD, retried
    if another job changed it in between.
    """

    OP_ID = "OP_CLUSTER_SET_PARAMS"
    REQ_BGL = False

    def expand_names(self) -> None:
        self.needed_locks = {level: ALL_SET for level in ("instance", "nodegroup", "node")}
        self.share_all()

    def check_arguments(self) -> None:
        """Type every parameter dict (one check per family), so that an
        unknown key or a value of the wrong type is refused before anything
        changes, whether it came from the CLI, RAPI or LUXI."""
        op = self.op
        if op.hvparams is not None:
            hvparams = instance_params.check_hvparams_by_hypervisor(op.hvparams, allow_default=False)
            self.op = op = attrs.evolve(op, hvparams=hvparams)
        if op.beparams is not None:
            self.op = op = attrs.evolve(op, beparams=instance_params.check_beparams(op.beparams, allow_default=False))
        if op.nicparams is not None:
            nicparams = instance_params.check_nicparams(op.nicparams, allow_default=False)
            self.op = op = attrs.evolve(op, nicparams=nicparams)
        if op.ndparams is not None:
            self.op = op = attrs.evolve(op, ndparams=_without_defaults(group_params.check_ndparams(op.ndparams)))
        if op.diskparams is not None:
            diskparams = group_params.check_diskparams(op.diskparams)
            self.op = op = attrs.evolve(op, diskparams=diskparams)
            rbd_disks.check_cluster_params(diskparams.get(rbd_disks.DT_RBD))
        if op.os_hvp is not None:
            self.op = op = attrs.evolve(op, os_hvp=cluster_os.check_os_hvp(op.os_hvp))
        if op.hidden_os is not None:
            self.op = op = attrs.evolve(op, hidden_os=cluster_os.check_os_mods(op.hidden_os, "hidden"))
        if op.blacklisted_os is not None:
            self.op = op = attrs.evolve(op, blacklisted_os=cluster_os.check_os_mods(op.blacklisted_os, "blacklisted"))
        if op.ipolicy:
            self.op = op = attrs.evolve(op, ipolicy=cluster_params.check_cluster_ipolicy(op.ipolicy))
        cluster_params.check_arguments(op)

    def check_prereq(self) -> None:
        op = self.op
        self.warnings: list[str] = []
        cluster_params.check_prereq(op, self.cfg, self.warnings.append)
        if op.ipolicy:
            cluster_params.ipolicy_changed(self.cfg.cluster.ipolicy or {}, op.ipolicy,
                                           op.enabled_disk_templates or self.cfg.cluster.enabled_disk_templates)
        prefix = op.mac_prefix
        if prefix is not None and not _MAC_PREFIX.match(prefix.lower()):
            raise errors.OpPrereqError("Invalid MAC prefix %r (expected aa:bb:cc)" % prefix, errors.ECODE_INVAL)
        running = op.max_running_jobs or self.cfg.cluster.max_running_jobs
        tracked = op.max_tracked_jobs or self.cfg.cluster.max_tracked_jobs
        if running and tracked and tracked < running:
            raise errors.OpPrereqError(
                "max_tracked_jobs (%s) must not be below max_running_jobs (%s)" % (tracked, running), errors.ECODE_INVAL
            )
        wanted = op.default_iallocator
        if wanted and wanted != allocator.BUILTIN and allocator.find_allocator(wanted, allocator.root_of(self)) is None:
            # as Ganeti: a default allocator must be installed where it is looked for
            raise errors.OpPrereqError("Invalid default iallocator script '%s' specified" % wanted,
                                       errors.ECODE_INVAL)
        instances = list(self.cfg.instances.values())
        hypervisors = op.enabled_hypervisors
        if hypervisors is not None:
            if not hypervisors:
                raise errors.OpPrereqError("At least one hypervisor must be enabled", errors.ECODE_INVAL)
            used = sorted({i.hypervisor or "" for i in instances if i.hypervisor not in hypervisors})
            if used:
                raise errors.OpPrereqError(
                    "Hypervisor(s) %s still used by instances" % ", ".join(used), errors.ECODE_STATE
                )
        data_collectors_changed({}, op.enabled_data_collectors, op.data_collector_interval)
        templates = op.enabled_disk_templates
        if templates is not None:
            if not templates:
                raise errors.OpPrereqError("At least one disk template must be enabled", errors.ECODE_INVAL)
            used = sorted({i.disk_template for i in instances if i.disk_template and i.disk_template not in templates})
            if used:
                raise errors.OpPrereqError(
                    "Disk template(s) %s still used by instances" % ", ".join(used), errors.ECODE_STATE
                )

    def _changed(self, cluster: Any) -> Any:
        op = self.op
        simple: dict[str, Any] = {
            "candidate_pool_size": op.candidate_pool_size, "max_running_jobs": op.max_running_jobs,
            "max_tracked_jobs": op.max_tracked_jobs, "file_storage_dir": op.file_storage_dir,
            "shared_file_storage_dir": op.shared_file_storage_dir, "master_netdev": op.master_netdev,
            "mac_prefix": op.mac_prefix, "maintain_node_health": op.maintain_node_health,
            "modify_etc_hosts": op.modify_etc_hosts, "prealloc_wipe_disks": op.prealloc_wipe_disks,
            "default_iallocator": op.default_iallocator,
        }
        changes = {name: value for name, value in simple.items() if value is not None}
        changes.update(cluster_params.simple_changes(op))
        changes.update(cluster_params.static_state(op, cluster))
        if op.master_netmask is not None:
            changes["master_netmask"] = op.master_netmask
        if op.uid_pool is not None or op.add_uids or op.remove_uids:
            changes["uid_pool"] = uidpool.uid_pool_changed(cluster.uid_pool, op.add_uids, op.remove_uids,
                                                                  op.uid_pool)
        if op.instance_communication_network is not None:
            changes["instance_communication_network"] = op.instance_communication_network
        if op.enabled_hypervisors is not None:
            changes["enabled_hypervisors"] = list(op.enabled_hypervisors)
            hvparams = dict(cluster.hvparams)
            for hv in op.enabled_hypervisors:
                # a hypervisor enabled after init gets the defaults init gives
                hvparams[hv] = dict(copy.deepcopy(DEFAULT_HVPARAMS.get(hv, {})), **(hvparams.get(hv) or {}))
            changes["hvparams"] = hvparams
        if op.enabled_disk_templates is not None:
            changes["enabled_disk_templates"] = list(op.enabled_disk_templates)
        if op.hvparams:
            hvparams = dict(changes.get("hvparams", cluster.hvparams))
            for hv, params in op.hvparams.items():
                hvparams[hv] = dict(hvparams.get(hv, {}), **params)
            changes["hvparams"] = hvparams
        for name, given in (("beparams", op.beparams), ("nicparams", op.nicparams)):
            if given:
                merged = dict(getattr(cluster, name))
                merged["default"] = dict(merged.get("default", {}), **given)
                changes[name] = merged
        if op.ndparams:
            changes["ndparams"] = dict(cluster.ndparams, **op.ndparams)
        if op.diskparams:
            changes["diskparams"] = group_params.merged_nested(cluster.diskparams or {}, op.diskparams)
        if op.os_hvp:
            changes["os_hvp"] = cluster_os.os_hvp_changed(cluster.os_hvp, op.os_hvp)
        if op.osparams:
            changes["osparams"] = cluster_os.osparams_changed(cluster.osparams, op.osparams)
        if op.osparams_private_cluster:
            changes["osparams_private_cluster"] = cluster_os.osparams_changed(cluster.osparams_private_cluster,
                                                                              op.osparams_private_cluster)
        if op.ipolicy:
            changes["ipolicy"] = cluster_params.ipolicy_changed(cluster.ipolicy or {}, op.ipolicy, list(
                op.enabled_disk_templates or cluster.enabled_disk_templates))
        self.os_notes: list[str] = []  # said after the change (this may run again on a retry)
        for name in ("hidden_os", "blacklisted_os"):
            if getattr(op, name):
                changes[name] = cluster_os.os_list_changed(getattr(cluster, name), getattr(op, name),
                                                           name.split("_")[0], self.os_notes.append)
        if op.enabled_data_collectors or op.data_collector_interval:
            changes["data_collectors"] = data_collectors_changed(
                cluster.data_collectors, op.enabled_data_collectors, op.data_collector_interval)
        return attrs.evolve(cluster, **changes) if changes else cluster

    def _ha_changes(self) -> dict[str, Any]:
        """The HA parameters (L{ganeti.ha.params}) this opcode changes."""
        op = self.op
        given = {"liveness_timeout": op.liveness_timeout, "auto_failover": op.auto_failover,
                 "failover_timeout": op.failover_timeout}
        return {name: value for name, value in given.items() if value is not None}

    async def exec_(self, feedback: Feedback) -> Any:
        ha_changes = self._ha_changes()
        if ha_changes:
            # first: WConfD validates them against the current values (failover_timeout above
            # liveness_timeout); a refusal leaves the cluster object unchanged too
            stored = await self.ctx.wconfd.set_ha_params(ha_changes)
            await self.feedback("HA parameters: %s (serial %s)" % (
                ", ".join("%s=%s" % (name, stored[name]) for name in sorted(ha_changes)), stored["serial_no"]))
        for warning in getattr(self, "warnings", []):
            await self.log_warning(warning)
        op = self.op
        old = self.cfg.cluster
        await self._validate_osparams()
        netmask = op.master_netmask is not None and op.master_netmask != old.master_netmask
        if netmask:
            await self.feedback("Changing master IP netmask to %s" % op.master_netmask)
            await self._master_ip("deactivate")
        try:
            await self.modify("cluster", None, self._changed)
        finally:
            if netmask:
                await self._master_ip("activate")
        for note in getattr(self, "os_notes", []):
            await self.feedback(note)
        return await self._communication_network(old.instance_communication_network)

    async def _validate_osparams(self) -> None:
        """Ganeti's check of changed OS parameters: each OS's new public and
        private ones validated on the master (C{os_validate}, not required:
        an OS the master lacks is only noted)."""
        op, cluster = self.op, self.cfg.cluster
        if not (op.osparams or op.osparams_private_cluster):
            return
        public = cluster_os.osparams_changed(cluster.osparams, op.osparams or {})
        private = cluster_os.osparams_changed(cluster.osparams_private_cluster, op.osparams_private_cluster or {})
        for os_name in sorted(set(op.osparams or {}) | set(op.osparams_private_cluster or {})):
            wanted = dict(public.get(os_name) or {}, **(private.get(os_name) or {}))
            if wanted:
                await check_os_params(self, False, [cluster.master_node or ""], os_name, wanted, False)

    async def _master_ip(self, verb: str) -> None:
        """The master IP off, or on again (with the new netmask); a failure
        is a warning, as Ganeti's netmask change is."""
        from ganeti.cmdlib.queries import master_ip
        from ganeti.rpc import procedures

        procedure = procedures.node_activate_master_ip if verb == "activate" else procedures.node_deactivate_master_ip
        try:
            await master_ip(self, procedure, verb)
        except errors.OpExecError as e:
            await self.log_warning("Could not change the master IP netmask: %s", e)

    async def _communication_network(self, old: str | None) -> Any:
        """Ganeti's C{_ModifyInstanceCommunicationNetwork}: the network is
        created and connected to every group by jobs submitted after this one."""
        name = self.op.instance_communication_network
        if name is None:
            return None
        if name == (old or ""):
            await self.feedback("Instance communication network already is '%s', nothing to do." % name)
            return None
        if old and any(n.name == old for n in self.cfg.networks.values()):
            await self.feedback("Previous instance communication network '%s' should be removed manually." % old)
        if not name:
            await self.feedback("Disabling instance communication network, only new instances will be affected.")
            return None
        await self.feedback("Changing instance communication network to '%s', only new instances will be"
                            " affected." % name)
        jobs = cluster_params.communication_jobs(self.cfg, name)
        return ResultWithJobs(jobs) if jobs else None
