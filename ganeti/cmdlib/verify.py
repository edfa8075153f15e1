"""OP_CLUSTER_VERIFY and OP_CLUSTER_VERIFY_GROUP: Ganeti's verify, as jobs.

C{OP_CLUSTER_VERIFY} checks nothing itself: it submits the jobs that do
(Ganeti's C{LUClusterVerify}), and its result is C{{"jobs": [[true, id],
...]}}.  Without C{group_name}: first one C{OP_CLUSTER_VERIFY_CONFIG} job
(the configuration and the job queue replicas, L{ganeti.cmdlib.cluster}),
then one C{OP_CLUSTER_VERIFY_GROUP} job per node group (by name), each
depending on the config job (relative id, any final status); with
C{group_name}: only that group's job, no dependency.  Every job gets
C{debug_simulate_errors}, C{verbose}, C{error_codes} and C{ignore_errors};
the group jobs also C{skip_checks} and C{verify_clutter}.  The client
follows the jobs: the cluster is sound when every job succeeded with
C{True}.

C{OP_CLUSTER_VERIFY_GROUP} verifies one group, live.  Each online node of
the group runs C{node_verify}: it must reach the node daemon of every
other online node of the cluster, speak our protocol version, hold the
ssconf files the configuration gives and the cluster's name
(L{LUClusterVerifyGroup._check_node}, the place for per-node checks); the
instances it runs and the disk files it holds must match the
configuration (L{ganeti.cmdlib.verify_instances}); every out-of-band
helper a node of the cluster names must be an executable file there
(C{ENODEOOBPATH}, as Ganeti checks).  Before it asks, the job waits
(at most C{SSCONF_SETTLE}) until the configuration's last change has
reached the nodes (WConfD's C{FlushConfig} with C{distributed}): a verify
right after a change would otherwise find ssconf files one change behind,
an error that fixes itself.  An empty group is
skipped, as Ganeti does.  Locks, all shared: the group, its instances
(any node in the group), its nodes and those instances' nodes.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from twisted.internet import defer

from ganeti import errors, oob
from ganeti.cmdlib import verify_instances
from ganeti.cmdlib.base import (
    LEVEL_INSTANCE,
    LEVEL_NODE,
    LEVEL_NODEGROUP,
    Feedback,
    LogicalUnit,
    lookup_group,
    register,
)
from ganeti.cmdlib.cluster import CV_ECLUSTERCFG, SIMULATED, VerifyErrors
from ganeti.cmdlib.instance_params import HV_TYPES
from ganeti.cmdlib.instance_utils import NO_NIC_DEVICES
from ganeti.cmdlib.liveness_verify import verify_liveness
from ganeti.cmdlib.oob import oob_program
from ganeti.objects import ConfigData, Instance, Node
from ganeti.opcodes.typed import OpClusterVerify, OpClusterVerifyGroup, OpGroupVerifyDisks
from ganeti.rpc import instances as rpc_inst
from ganeti.rpc import procedures, wire

_GroupLocksOpT = TypeVar("_GroupLocksOpT", bound=OpClusterVerifyGroup | OpGroupVerifyDisks, covariant=True)

#: Per-node timeout of C{node_verify}, seconds.
VERIFY_TIMEOUT = 60.0
#: How long a group's verify waits for the last config change to reach the nodes, seconds.
SSCONF_SETTLE = 30.0
#: seconds of that wait after which the job says what it waits for
SETTLE_NOTICE = 1.0

CV_ENODERPC = "ENODERPC"
CV_ENODENET = "ENODENET"
CV_ENODEVERSION = "ENODEVERSION"
CV_ENODESSCONF = "ENODESSCONF"
#: ours: little free space in a node's data directory (config, job queue)
CV_ENODEDATASPACE = "ENODEDATASPACE"
#: a data directory with less free space than this (MiB), or than this
#: share of its filesystem, is reported (a warning)
LOW_SPACE_MIB = 50
LOW_SPACE_SHARE = 0.05

#: The parameters every job of OP_CLUSTER_VERIFY inherits, and those only
#: the group jobs take.


def expected_ssconf(cfg: ConfigData) -> dict[str, str]:
    """C{{key: sha1 of the ssconf file}} every node should have."""
    from ganeti import ssconf

    return {key: hashlib.sha1(ssconf.render(lines)).hexdigest() for key, lines in ssconf.compute(cfg).items()}


def address(node: Node) -> str:
    return node.primary_ip or node.name or ""


def verify_jobs(cfg: ConfigData, op: OpClusterVerify) -> list[list[dict[str, Any]]]:
    """The jobs OP_CLUSTER_VERIFY C{op} submits (see the module docstring)."""
    common = {"debug_simulate_errors": op.debug_simulate_errors, "verbose": op.verbose,
              "error_codes": op.error_codes, "ignore_errors": op.ignore_errors}
    group_params = dict(common, skip_checks=op.skip_checks, verify_clutter=op.verify_clutter)
    jobs: list[list[dict[str, Any]]] = []
    if op.group_name:
        groups = [op.group_name]
    else:
        groups = sorted(g.name or g.uuid or "" for g in cfg.nodegroups.values())
        jobs.append([dict(common, OP_ID="OP_CLUSTER_VERIFY_CONFIG")])
    for name in groups:
        job = dict(group_params, OP_ID="OP_CLUSTER_VERIFY_GROUP", group_name=name)
        if not op.group_name:
            job["depends"] = [[-len(jobs), []]]
        jobs.append([job])
    return jobs


def group_instances(cfg: ConfigData, group_uuid: str) -> list[Instance]:
    """The instances with a node in group C{group_uuid}, by name."""
    members = {u for u, n in cfg.nodes.items() if n.group == group_uuid}
    found = []
    for inst in cfg.instances.values():
        nodes = {inst.primary_node} | {n for uuid in inst.disks or [] if uuid in cfg.disks
                                       for n in cfg.disks[uuid].nodes or []}
        if nodes & members:
            found.append(inst)
    return sorted(found, key=lambda i: i.name or "")


@register
class LUClusterVerify(LogicalUnit[OpClusterVerify]):
    """Submit the jobs that verify the cluster (see the module docstring)."""

    OP_ID = "OP_CLUSTER_VERIFY"
    REQ_BGL = False

    def check_prereq(self) -> None:
        if self.op.group_name:
            lookup_group(self.cfg, self.op.group_name)

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti.jobs.lifecycle import ResultWithJobs

        return ResultWithJobs(verify_jobs(self.cfg, self.op))


class GroupLocks(LogicalUnit[_GroupLocksOpT]):
    """Shared locks on the group named by C{op.group_name}, its instances
    and its nodes (with C{PRIMARIES_TOO}, also the primary nodes of its
    instances, wherever they are)."""

    PRIMARIES_TOO = False

    def expand_names(self) -> None:
        self.group_uuid = lookup_group(self.cfg, self.op.group_name)
        self.needed_locks = {LEVEL_INSTANCE: [], LEVEL_NODEGROUP: [self.group_uuid], LEVEL_NODE: []}
        self.share_all()

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_INSTANCE:
            self.needed_locks[level] = [i.name for i in group_instances(self.cfg, self.group_uuid) if i.name]
        elif level == LEVEL_NODE:
            nodes = {u for u, n in self.cfg.nodes.items() if n.group == self.group_uuid}
            if self.PRIMARIES_TOO:
                nodes.update(i.primary_node for i in group_instances(self.cfg, self.group_uuid) if i.primary_node)
            self.needed_locks[level] = sorted(nodes)


def low_space(answer: Any) -> str | None:
    """The warning for a node's C{data-space} answer, or C{None}: enough
    space (or a node that does not know the check)."""
    if not isinstance(answer, dict):
        return None
    path = answer.get("path", "the data directory")
    if "error" in answer:
        return "cannot read the free space of %s: %s" % (path, answer["error"])
    free, total = answer.get("free"), answer.get("total")
    if not isinstance(free, int) or not isinstance(total, int):
        return None
    if free >= LOW_SPACE_MIB and free >= total * LOW_SPACE_SHARE:
        return None
    return ("free space in %s is low: %d MiB of %d MiB; jobs fail when it is full (the job queue and the"
            " configuration are written there)" % (path, free, total))


@register
class LUClusterVerifyGroup(VerifyErrors[OpClusterVerifyGroup], GroupLocks[OpClusterVerifyGroup]):
    """Verify one node group, live (see the module docstring)."""

    OP_ID = "OP_CLUSTER_VERIFY_GROUP"
    REQ_BGL = False
    PRIMARIES_TOO = True

    def check_prereq(self) -> None:
        if self.group_uuid not in self.cfg.nodegroups:
            raise errors.OpPrereqError("Node group '%s' was removed" % self.op.group_name, errors.ECODE_NOENT)

    async def exec_(self, feedback: Feedback) -> Any:
        from ganeti import GANETI_RELEASE

        self.bad = False
        cfg = self.cfg
        group = cfg.nodegroups[self.group_uuid]
        await self.feedback("* Verifying group '%s'" % group.name)
        members = sorted((n for n in cfg.nodes.values() if n.group == self.group_uuid), key=lambda n: n.name or "")
        if not members:
            await self.feedback("* Empty node group, skipping verification")
            return True
        if self.op.debug_simulate_errors:
            await self._item_error("group", CV_ECLUSTERCFG, group.name or "", SIMULATED)
        online = [n for n in members if not n.offline]
        everyone = sorted((n for n in cfg.nodes.values() if not n.offline), key=lambda n: n.name or "")
        scanner = verify_instances.shared_scanner(cfg, everyone)
        checks = {
            "instancelist": [hv for hv in cfg.cluster.enabled_hypervisors or [] if hv in HV_TYPES],
            "nodelist": [[n.name, address(n)] for n in everyone],
            "ssconf": expected_ssconf(cfg),
            "version": None,
            "cluster_name": None,
            wire.NV_DATA_SPACE: None,
        }
        self.bridges = group_bridges(cfg, self.group_uuid)
        if self.bridges:
            checks["bridges"] = self.bridges
        oob_paths = list(dict.fromkeys(p for p in (oob_program(cfg, n) for n in cfg.nodes.values()) if p))
        if oob_paths:
            checks[oob.NV_OOB_PATHS] = oob_paths
        await self._settle()
        await self.feedback("* Gathering data (%d nodes)" % len(members))
        results = {}
        disk_checks = verify_instances.disk_file_checks(cfg, online, scanner)
        if online:
            cluster_name = cfg.cluster.cluster_name or ""
            results = await self.ctx.rpc().run(
                {n.name: address(n) for n in online},
                # once: a node that does not answer now is what verify reports (no retry window)
                procedures.node_verify.call(checks, cluster_name).within(VERIFY_TIMEOUT).once(),
                per_node={name: procedures.node_verify.call(dict(checks, **{wire.NV_DISK_FILES: check}), cluster_name)
                          for name, check in disk_checks.items()},
            )
        await self.feedback("* Verifying node status")
        for node in online:
            await self._check_node(node, results[node.name], GANETI_RELEASE)
        await self._check_instances(online, results)
        await self._check_remote_disks(online)
        await verify_liveness(self, self._node_error, [n.name or "" for n in online])
        offline = len(members) - len(online)
        if offline:
            await self.feedback("  - NOTICE: %d offline node(s) found." % offline)
        return not self.bad

    async def _check_instances(self, online: list[Node], results: dict[str, Any]) -> None:
        """The instances' run state (from C{instancelist}) and disk files
        (from C{disk-files}): L{verify_instances}."""
        problems = []
        lists = {}
        for node in online:
            result = results[node.name or ""]
            payload = result.payload if not result.failed and isinstance(result.payload, dict) else {}
            if "instancelist" in payload:
                lists[node.uuid or ""] = payload["instancelist"]
            problems += verify_instances.disk_file_problems(self.cfg, node, payload.get(wire.NV_DISK_FILES))
        problems = verify_instances.running_problems(self.cfg, lists) + problems
        for problem in problems:
            await self._item_error(problem.kind, problem.code, problem.item, problem.message, problem.warning)

    async def _check_remote_disks(self, online: list[Node]) -> None:
        """The rbd images, ext volumes and adopted block devices of the group's
        instances, asked of their primary nodes (C{blockdev_getdimensions})."""
        cfg = self.cfg
        wanted = verify_instances.remote_disk_checks(cfg, group_instances(cfg, self.group_uuid), online)
        if not wanted:
            return
        await self.feedback("* Verifying the rbd, ext and blockdev disks")
        nodes = {uuid: cfg.nodes[uuid] for uuid in sorted(wanted)}
        instances = {i.name: i for i in cfg.instances.values()}
        results = await self.ctx.rpc().run(
            {n.name: address(n) for n in nodes.values()},
            procedures.blockdev_getdimensions.call([]).within(VERIFY_TIMEOUT),
            per_node={n.name: procedures.blockdev_getdimensions.call(
                [rpc_inst.disk_dict(cfg, e.disk, instances.get(e.instance)) for e in wanted[u]]).within(VERIFY_TIMEOUT)
                for u, n in nodes.items()},
        )
        for uuid, node in nodes.items():
            result = results[node.name]
            problems = verify_instances.remote_disk_problems(
                cfg, node, wanted[uuid], None if result.failed else result.payload,
                (result.fail_msg or "failed") if result.failed else None)
            for problem in problems:
                if problem.kind == "node":
                    await self._node_error(CV_ENODERPC, problem.item, problem.message)
                else:
                    await self._item_error(problem.kind, problem.code, problem.item, problem.message, problem.warning)

    async def _settle(self) -> None:
        waiting = defer.Deferred.fromCoroutine(self.ctx.wconfd.flush_config(distributed=True))
        # (a node the push cannot reach keeps the distribution for up to a minute: say why verify waits)
        slow = self.ctx.clock.callLater(SETTLE_NOTICE, lambda: defer.ensureDeferred(self.feedback(
            "* Waiting (at most %ds) for the last configuration change to reach the nodes" % SSCONF_SETTLE)))
        try:
            await waiting.addTimeout(SSCONF_SETTLE, self.ctx.clock)
        except defer.TimeoutError:
            pass  # a node the push cannot reach: its ssconf differs, reported below
        finally:
            if slow.active():
                slow.cancel()

    async def _check_node(self, node: Node, result: Any, release: str) -> None:
        """The checks of one online node of the group, from its
        C{node_verify} answer C{result}; add per-node checks here."""
        name = node.name or node.uuid or "?"
        if result.failed:
            await self._node_error(CV_ENODERPC, name, "while contacting node: %s" % result.fail_msg)
            return
        payload = result.payload if isinstance(result.payload, dict) else {}
        version = payload.get("version")
        if not isinstance(version, list) or len(version) != 2:
            await self._node_error(CV_ENODERPC, name, "connection to node returned invalid data")
        elif version[0] != wire.PROTOCOL_VERSION:
            await self._node_error(CV_ENODEVERSION, name, "incompatible protocol versions: master %s, node %s"
                                   % (wire.PROTOCOL_VERSION, version[0]))
        elif version[1] != release:
            await self._node_error(CV_ENODEVERSION, name, "software version mismatch: master %s, node %s"
                                   % (release, version[1]), warning=True)
        for other, why in sorted((payload.get("nodelist") or {}).items()):
            await self._node_error(CV_ENODENET, name, "tcp communication with node '%s': %s" % (other, why))
        if getattr(self, "bridges", None):  # Ganeti's check of the bridges the group's instances need
            missing = payload.get("bridges")
            if not isinstance(missing, list):
                await self._node_error(CV_ENODENET, name, "did not return valid bridge information")
            elif missing:
                await self._node_error(CV_ENODENET, name, "missing bridges: %s" % ", ".join(sorted(missing)))
        differing = payload.get("ssconf") or {}
        if differing:
            await self._node_error(CV_ENODESSCONF, name, "ssconf files differ from the configuration: %s"
                                   % ", ".join(sorted(differing)))
        space = low_space(payload.get(wire.NV_DATA_SPACE))
        if space is not None:
            await self._node_error(CV_ENODEDATASPACE, name, space, warning=True)
        for problem in payload.get(oob.NV_OOB_PATHS) or []:
            if problem:
                await self._node_error(oob.CV_ENODEOOBPATH, name, problem)
        cluster_name = payload.get("cluster_name", self.cfg.cluster.cluster_name)
        if cluster_name != self.cfg.cluster.cluster_name:
            await self._node_error(CV_ENODESSCONF, name, "node belongs to cluster %r, expected %r"
                                   % (cluster_name, self.cfg.cluster.cluster_name))


def group_bridges(cfg: Any, group_uuid: str) -> list[str]:
    """The bridges the bridged NICs of the group's instances need (their
    C{nicparams} over the cluster's defaults; not for the C{fake}
    hypervisor, whose NICs are attached to nothing): every node of the
    group must have them, as in Ganeti's verify."""
    default = (cfg.cluster.nicparams or {}).get("default") or {}
    nodes = {uuid for uuid, node in cfg.nodes.items() if node.group == group_uuid}
    bridges: set[str] = set()
    for inst in cfg.instances.values():
        if inst.primary_node not in nodes or (inst.hypervisor or "") in NO_NIC_DEVICES:
            continue
        for nic in inst.nics or []:
            filled = dict(default, **(nic.nicparams or {}))
            if filled.get("mode") == "bridged" and filled.get("link"):
                bridges.add(filled["link"])
    return sorted(bridges)
