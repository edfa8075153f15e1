"""LUXI methods of LuxiD: the handlers of L{ganeti.luxi.methods}' declarations.

The contract table declares every method's arguments and their JSON types;
L{LuxiHandler} (a L{DeclaredHandler}) refuses to be built unless it has a
C{luxi_<Method>} handler for each, taking the declared arguments, and
answers a request only once its arguments fit.  The handlers check what
the types cannot say (a known tag kind, a non-empty job list, no locking).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, cast

import attrs
from twisted.internet.defer import Deferred

from ganeti import errors, serializer
from ganeti.ha import params as ha_params
from ganeti.jobs.model import QueuedJob
from ganeti.luxi.methods import Filter, JobId, Opcode, Row
from ganeti.luxi.server import DeclaredHandler
from ganeti.luxid import live
from ganeti.luxid.filters import FilterMethods
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from ganeti.query import engine, qlang
from ganeti.query import fields as q
from ganeti.querydefs import QR_CLUSTER, QR_GROUP, QR_INSTANCE, QR_NODE, RS_NORMAL
from ganeti.rpc import procedures

TAG_KINDS = ("cluster", "instance", "node", "nodegroup", "network")
#: resources whose query answers come from the config alone, unless the
#: query needs live node data (L{live.needed}): those are never cached
CONFIG_ONLY_RESOURCES = frozenset({QR_INSTANCE, QR_NODE, QR_GROUP, QR_CLUSTER})
QUERY_CACHE_SIZE = 64


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise errors.OpPrereqError("%s must be a number, not %r" % (what, value), errors.ECODE_INVAL)
    try:
        return int(value)
    except ValueError:
        raise errors.OpPrereqError("%s must be a number, not %r" % (what, value), errors.ECODE_INVAL) from None


class JobService(Protocol):
    """What the LUXI methods need of LuxiD's job service (L{LuxidService} is one).

    @ivar liveness: the node liveness roster, or C{None}.
    @ivar watcher: the watcher on events, or C{None}.
    @ivar filters: the job filter rules (L{ganeti.luxid.filters.FilterTable}).
    @ivar queue: the job queue.
    """

    liveness: Any
    watcher: Any
    filters: Any
    queue: Any

    def wconfd_client(self) -> Any:
        """The connected WConfD client, or C{None}."""

    def live_jobs(self) -> dict[int, QueuedJob]:
        """The live jobs as clients see them (a final state only once a majority holds it)."""

    def job(self, job_id: JobId) -> QueuedJob: ...

    def view(self, job_id: JobId) -> QueuedJob:
        """Job C{job_id} as clients see it."""

    def is_drained(self) -> bool: ...

    def archived_job_ids(self) -> list[int]: ...

    def read_archived_job(self, job_id: int) -> QueuedJob | None: ...

    async def submit(self, jobs_ops: list[Any], *, drained_ok: bool = False) -> list[Any]: ...

    async def wait_for_change(self, job_id: JobId, current: Callable[[QueuedJob], Any], previous: list[Any],
                              timeout: float) -> Any: ...

    def cancel(self, job_id: JobId, kill: bool = False) -> Deferred[list[Any]]: ...

    async def archive(self, job_id: JobId) -> bool: ...

    def auto_archive(self, age: float, timeout: float) -> list[int]: ...

    def change_priority(self, job_id: JobId, priority: int) -> list[Any]: ...

    def set_drained(self, flag: bool) -> bool: ...


class LuxiHandler(FilterMethods, DeclaredHandler):
    """Every LUXI method LuxiD answers (spec/luxi.md section 3; declared in
    L{ganeti.luxi.methods}).

    @param service: the jobs, the queue and the WConfD connection.
    @param paths: the node's root (the watcher's pause file).
    @param live_data: asks the node daemons for live data.
    """

    def __init__(self, service: JobService, paths: Paths, live_data: live.LiveData) -> None:
        super().__init__()
        self.service: JobService = service
        self.paths = paths
        self._config: ConfigData | None = None
        #: answers kept with the (serial, mtime) of the config they were made from
        self._query_cache: dict[Any, tuple[tuple[int, float | None], Any]] = {}
        #: the config-only columns of the listings of L{CONFIG_ONLY_RESOURCES} (see
        #: L{q.QueryContext.columns}), for C{_config}: emptied when the serial changes
        self._columns: dict[Any, Any] = {}
        self.live = live_data

    # --- helpers ---------------------------------------------------------------
    async def _wconfd(self) -> Any:
        client = self.service.wconfd_client()
        if client is None:
            raise errors.LuxiError("WConfD is not reachable; is ganeti-wconfd running on this node?")
        return client

    async def config(self) -> ConfigData:
        """The config: LuxiD's WConfD client keeps the copy it read last and brings it forward by WConfD's
        changes (one round trip; nothing is sent or decoded while the copy is current)."""
        config: ConfigData = await (await self._wconfd()).read_config()
        if config is not self._config:
            self._config, self._columns = config, {}
        return config

    async def context(self, what: str, fields: Sequence[str] = (), qfilter: Filter = None,
                      names: list[Any] | None = None) -> q.QueryContext:
        """The query context of C{what}, with the live node data C{fields}
        and C{qfilter} need (C{names}: the items asked for, default: from
        the filter)."""
        config = await self.config() if what != "job" or self._config is None else self._config
        locks: Any = [[], []]
        if what == "lock":
            locks = await (await self._wconfd()).list_locks_waiting_status()
        data: Any = {}
        needs = live.needed(what, fields, qfilter) - q.LOCAL_NEEDS
        liveness = self.service.liveness
        if needs:
            if names is None and isinstance(qfilter, list):
                names = qlang.names_from_filter(qfilter, "name")
            reports = liveness.fresh_report if liveness is not None else None
            data = await self.live.gather(config, needs, names, reports)
        roster = liveness.snapshot() if liveness is not None else {}
        jobs, archived = self.jobs_for_query(fields, qfilter) if what == "job" else (self.service.live_jobs(), None)
        columns = self._columns if what in CONFIG_ONLY_RESOURCES and config is self._config else None
        return q.QueryContext(config=config, jobs=jobs, locks=locks, live=data, archived_jobs=archived or frozenset(),
                              liveness=roster, watcher_pause=self.watcher_pause() if what == "cluster" else None,
                              columns=columns)

    def watcher_pause(self) -> float | None:
        """Until when the watcher is paused (Ganeti's C{watcher.pause} file), or None."""
        import time

        from ganeti.heartbeat.watcher import pause_file, read_pause

        return read_pause(pause_file(self.paths.data_dir), time.time())

    def jobs_for_query(self, fields: Sequence[str] | None, qfilter: Filter) -> tuple[dict[int, QueuedJob], frozenset[int]]:
        """The jobs a job query looks at, and which of them are archived: as
        Ganeti's, the live jobs, plus the archived ones the filter names by
        id, or every archived one when the C{archived} field is asked for."""
        live = self.service.live_jobs()
        wanted = qlang.names_from_filter(qfilter, "id")
        if wanted is not None:
            candidates = []
            for name in wanted:
                try:
                    candidates.append(int(name))
                except (TypeError, ValueError):
                    continue
        elif "archived" in (fields or ()):
            candidates = self.service.archived_job_ids()
        else:
            return live, frozenset()
        found = {i: job for i in candidates if i not in live for job in [self.service.read_archived_job(i)] if job is not None}
        if not found:
            return live, frozenset()
        return {**live, **found}, frozenset(found)

    def job_values(self, job: QueuedJob, fields: list[str]) -> list[Any]:
        archived = frozenset() if job.id in self.service.live_jobs() else frozenset([job.id])
        ctx = q.QueryContext(config=self._config or ConfigData(), jobs={job.id: job}, locks=[[], []], live={},
                             archived_jobs=archived)
        row = engine.query("job", fields, None, ctx)["data"][0]
        return [value if status == RS_NORMAL else None for status, value in row]

    # --- jobs --------------------------------------------------------------------
    async def luxi_SubmitJob(self, ops: list[Opcode]) -> int:
        return await self._submit_one(ops, drained_ok=False)

    async def luxi_SubmitJobToDrainedQueue(self, ops: list[Opcode]) -> int:
        return await self._submit_one(ops, drained_ok=True)

    async def _submit_one(self, ops: list[Opcode], drained_ok: bool) -> int:
        ((ok, value),) = await self.service.submit([ops], drained_ok=drained_ok)
        if not ok:
            raise errors.OpPrereqError(value, errors.ECODE_INVAL)
        return int(value)

    async def luxi_SubmitManyJobs(self, jobs: list[list[Opcode]]) -> list[list[Any]]:
        """One invalid job refuses the whole request and creates nothing
        (Ganeti's LuxiD fails to decode it; Ganeti's C{gnt-debug
        test-jobqueue} expects an error, not a per-job C{[false, why]}).
        No job at all is no error: the answer is C{[]}, as Ganeti's (its
        C{gnt-group evacuate} of an empty group submits none)."""
        return await self.service.submit(list(jobs))

    async def luxi_WaitForJobChange(self, job_id: JobId, fields: list[str], prev_job_info: list[Any] | None,
                                    prev_log_serial: int | None, timeout: float) -> Any:
        def current(job: QueuedJob) -> list[Any]:
            return [self.job_values(job, fields), job.log_since(prev_log_serial)]

        answer = await self.service.wait_for_change(job_id, current, [prev_job_info, []], float(timeout))
        return "nochange" if answer is None else answer

    def luxi_CancelJob(self, job_id: JobId, kill: bool = False) -> Deferred[list[Any]]:
        return self.service.cancel(job_id, kill=kill)

    async def luxi_ArchiveJob(self, job_id: JobId) -> bool:
        return await self.service.archive(job_id)

    def luxi_AutoArchiveJobs(self, age: float, timeout: float) -> list[int]:
        return self.service.auto_archive(float(age), float(timeout))

    def luxi_ChangeJobPriority(self, job_id: JobId, priority: int) -> list[Any]:
        return self.service.change_priority(job_id, priority)

    def luxi_QueryJobs(self, job_ids: Sequence[JobId] | None, fields: list[str]) -> list[Row | None]:
        if not job_ids:
            jobs, _ = self.jobs_for_query(fields, None)  # with "archived" asked: the archived jobs too
            ids = sorted(jobs)
        else:
            ids = [_int(i, "job id") for i in job_ids]
        rows: list[Row | None] = []
        for job_id in ids:
            try:
                rows.append(self.job_values(self.service.view(job_id), fields))
            except errors.JobLost:
                rows.append(None)
        return rows

    def luxi_SetDrainFlag(self, flag: bool) -> bool:
        return self.service.set_drained(flag)

    def luxi_PickupJob(self, job_id: JobId) -> None:
        raise errors.GenericError("PickupJob is internal to Ganeti's own daemons")

    # --- queries -------------------------------------------------------------------
    async def _exports(self, nodes: list[str] | None = None) -> list[list[str]]:
        """C{[[node, export], ...]} from C{export_list} on the online nodes
        (those named in C{nodes}, when given); a node that fails is left out."""
        config = await self.config()
        wanted: set[str] | None = None
        if nodes:
            wanted = set()
            for name in nodes:
                node = config.find_node(name)
                if node is None:
                    raise errors.OpPrereqError("Node '%s' not known" % name, errors.ECODE_NOENT)
                wanted.add(node.name or name)
        asked = {n.name: n.primary_ip or n.name for n in config.nodes.values()
                 if n.name is not None and not n.offline and (wanted is None or n.name in wanted)}
        answers = await self.live._call(asked, procedures.export_list.call())
        return [[node, name] for node, names in sorted(answers.items()) if isinstance(names, list)
                for name in names if isinstance(name, str)]

    async def luxi_QueryExports(self, nodes: list[str] | None, use_locking: bool) -> list[list[str]]:
        if use_locking:
            raise errors.OpPrereqError("Sync queries are not allowed", errors.ECODE_INVAL)
        return await self._exports(nodes)

    async def luxi_Query(self, what: str, fields: list[str], qfilter: Filter) -> dict[str, Any]:
        if what == "export":
            ctx = await self.context(what)
            ctx = attrs.evolve(ctx, live={"exports": await self._exports()})
            return engine.query(what, fields, qfilter, ctx)
        if what not in CONFIG_ONLY_RESOURCES or live.needed(what, fields, qfilter):
            return engine.query(what, fields, qfilter, await self.context(what, fields, qfilter))
        # Answers about config-only resources depend on nothing but the config:
        # cache them per config serial (exact, and always current).
        ctx = await self.context(what)
        try:
            key = (what, tuple(fields), serializer.dumps(qfilter))
        except TypeError:
            return engine.query(what, fields, qfilter, ctx)
        made_from = (ctx.config.serial_no, ctx.config.mtime)
        hit = self._query_cache.get(key)
        if hit is not None and hit[0] == made_from:
            return cast("dict[str, Any]", hit[1])
        result = engine.query(what, fields, qfilter, ctx)
        if len(self._query_cache) >= QUERY_CACHE_SIZE:
            self._query_cache.clear()
        self._query_cache[key] = (made_from, result)
        return result

    def luxi_QueryFields(self, what: str, fields: list[str] | None) -> dict[str, Any]:
        return engine.query_fields(what, fields)

    async def luxi_QueryClusterInfo(self) -> dict[str, Any]:
        info = q.cluster_info(await self.config())
        info.update(ha_params.cluster_fields(self.paths))  # small local files: read at once
        return info

    async def luxi_QueryConfigValues(self, names: list[str]) -> list[Any]:
        latency = None
        if "config_write_latency" in names:
            latency = await (await self._wconfd()).read_write_latency()
        return q.config_values(await self.config(), names, self.service.is_drained(), self.watcher_pause(),
                               latency)

    async def luxi_SetWatcherPause(self, until: float | None = None) -> float | None:
        """Pause the watcher until C{until} (an epoch), or end the pause (C{None}); the value set.
        As Ganeti's, the other online master candidates get it too (node RPC
        C{set_watcher_pause}), so that the pause outlives a master failover;
        one that does not answer is skipped (logged)."""
        from ganeti.heartbeat.watcher import pause_file, write_pause

        write_pause(pause_file(self.paths.data_dir), until)
        watcher = self.service.watcher
        if until is None and watcher is not None:
            watcher.resume()  # catch up with what happened during the pause
        config = await self.config()
        master = config.cluster.master_node
        candidates = {n.name: n.primary_ip or n.name for uuid, n in config.nodes.items()
                      if n.name and n.master_candidate and not n.offline and uuid != master}
        if candidates:
            await self.live._call(candidates, procedures.set_watcher_pause.call(until))
        return until

    async def luxi_QueryTags(self, kind: str, name: str) -> list[str]:
        if kind not in TAG_KINDS:
            raise errors.OpPrereqError("Invalid tag kind %r" % (kind,), errors.ECODE_INVAL)
        config = await self.config()
        if kind == "cluster":
            return list(config.cluster.tags)
        finder = {
            "instance": config.find_instance,
            "node": config.find_node,
            "nodegroup": config.find_group,
            "network": lambda key: next((n for n in config.networks.values() if key in (n.name, n.uuid)), None),
        }[kind]
        found = finder(name)
        if found is None:
            raise errors.OpPrereqError("%s %r not known" % (kind, name), errors.ECODE_NOENT)
        return list(found.tags)

    async def _legacy(self, what: str, names: list[str], fields: list[str], use_locking: bool) -> list[Row]:
        if use_locking:
            raise errors.OpPrereqError("Sync queries are not allowed", errors.ECODE_INVAL)
        return engine.legacy_query(what, names, fields, await self.context(what, fields, None, names))

    async def luxi_QueryNodes(self, names: list[str], fields: list[str], use_locking: bool) -> list[Row]:
        return await self._legacy("node", names, fields, use_locking)

    async def luxi_QueryInstances(self, names: list[str], fields: list[str], use_locking: bool) -> list[Row]:
        return await self._legacy("instance", names, fields, use_locking)

    async def luxi_QueryGroups(self, names: list[str], fields: list[str], use_locking: bool) -> list[Row]:
        return await self._legacy("group", names, fields, use_locking)

    async def luxi_QueryNetworks(self, names: list[str], fields: list[str], use_locking: bool) -> list[Row]:
        """Rows of network fields (Ganeti's C{QueryNetworks})."""
        return await self._legacy("network", names, fields, use_locking)
