"""Ganeti's watcher, on events: LuxiD restarts what stopped by itself.

Ganeti's C{ganeti-watcher} runs from cron every 5 minutes; here the same
decisions are taken when a node's state report arrives
(L{ganeti.heartbeat.reporter}: at once on a change, in full on every
(re)connect of a node, so also when a node comes back or reboots):

  - an instance whose admin state is up and which does not run on its
    primary node is started again, by an ordinary C{OP_INSTANCE_STARTUP}
    job whose reason trail names the watcher (L{REASON_SOURCE}); before
    that the watcher waits L{CONFIRM_DELAY} seconds and looks again, and
    leaves alone instances a live job works on (a migration, a creation);
  - one look at a node at a time (a report during a slow look, e.g. while
    a submission waits for the candidates, is looked at after it), and an
    instance whose restart job ended is restarted again only on a report
    the node sent after that end: an older one may predate the restart
    (on a loaded node the poll that sees the new process comes late);
  - nor before a report has shown it running since that end, unless
    L{STALE_GRACE} seconds have passed or the node itself (asked, see
    below) says it is down: a report sent after the end may
    still carry instance states polled before it (a report of the node's
    resources alone changes nothing of its instances), and the watcher
    looks again when the grace ends;
  - right before a restart the watcher asks the node itself what runs
    there (C{all_instances_info} by node RPC: L{Watcher.ask_node}) and
    restarts only what the node says is down, since a pushed report may lag
    what happened on the node; a node that does not answer leaves the
    decision to its report;
  - a restart budget: at most L{RESTART_LIMIT} restarts of one instance in
    L{RESTART_WINDOW} seconds; after that the instance is left down
    (C{ERROR_down} in C{gnt-instance list}) and a warning is logged;
  - old jobs are archived (finished more than L{ARCHIVE_AGE} s ago), every
    L{ARCHIVE_EVERY} s.

C{gnt-cluster watcher pause DURATION} (LUXI C{SetWatcherPause}) stops all
of it until then; the pause lives in Ganeti's file
C{var/lib/ganeti/watcher.pause} (an integer epoch), so Ganeti's own
C{gnt-cluster watcher} commands work unchanged.

L{read_pause}, L{RestartBudget}, L{needs_restart} and L{busy_instances}
are pure (or touch only the pause file).
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, Iterable, Mapping, cast

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from ganeti.heartbeat.pause import PAUSE_REMOVE_AFTER, pause_file, read_pause, write_pause  # noqa: F401
from ganeti.objects import ConfigData

#: C{await ask_node(config, node)}: what runs on C{node} now, asked by RPC
#: (C{{instance: info}}, C{None} if it did not answer)
AskNode = Callable[[ConfigData, str], Awaitable["Mapping[str, Any] | None"]]

#: the reason trail source of the watcher's jobs (Ganeti's C{gnt:watcher})
REASON_SOURCE = "gnt:watcher"
RESTART_LIMIT = 3
RESTART_WINDOW = 30 * 60.0
#: seconds between seeing an instance down and looking again before restarting it
CONFIRM_DELAY = 2.0
#: seconds after a restart job's end during which only a report that showed the
#: instance running since then makes a new "down" count (see the module docstring);
#: a loaded node may take longer than 20 s to report the restarted instance, and
#: Ganeti's own watcher looks only every 5 minutes
STALE_GRACE = 60.0
ARCHIVE_AGE = 6 * 3600.0
ARCHIVE_EVERY = 600.0
#: seconds an archive run may take (Ganeti's watcher: 89)
ARCHIVE_TIMEOUT = 89.0
# the pause file (Ganeti's C{watcher.pause}): L{ganeti.heartbeat.pause}, shared with NodeD
class RestartBudget:
    """At most C{limit} restarts per instance in any C{window} seconds."""

    def __init__(self, limit: int = RESTART_LIMIT, window: float = RESTART_WINDOW) -> None:
        self.limit, self.window = limit, window
        self._restarts: dict[str, list[float]] = {}

    def allow(self, name: str, now: float) -> bool:
        """Whether C{name} may be restarted now; if so, the restart is counted."""
        recent = [t for t in self._restarts.get(name, []) if now - t < self.window]
        if len(recent) >= self.limit:
            self._restarts[name] = recent
            return False
        recent.append(now)
        self._restarts[name] = recent
        return True

    def used(self, name: str, now: float) -> int:
        return len([t for t in self._restarts.get(name, []) if now - t < self.window])


def needs_restart(config: ConfigData, node_name: str, reports: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The instances of C{node_name} (as primary) that C{gnt-instance list}
    would call C{ERROR_down}: marked up, not running there nor anywhere
    else a report shows, and not stopped by their user (C{USER_down}, with
    user shutdown enabled).

    @param reports: C{{node name: {instance name: {"state": ...}}}} of every
        node with a fresh report (C{node_name}'s included)
    """
    from ganeti.query import fields as q
    from ganeti.query.instance import ST_ERROR_DOWN, instance_status

    node = next((n for n in config.nodes.values() if n.name == node_name), None)
    if node is None or node.offline or node_name not in reports:
        return []
    ctx = q.QueryContext(config=config, live={name: {"instances": dict(found)} for name, found in reports.items()})
    out = []
    for inst in config.instances.values():
        if inst.primary_node != node.uuid or inst.admin_state != "up" or not inst.name:
            continue
        try:
            status = instance_status(inst, ctx)
        except (q.NoData, q.Unavail, q.Offline):
            continue
        if status == ST_ERROR_DOWN:
            out.append(inst.name)
    return sorted(out)


def busy_instances(jobs: Iterable[Any]) -> set[str]:
    """Instances named by the opcodes of jobs not finished yet."""
    busy = set()
    for job in jobs:
        if getattr(job, "finalized", True):
            continue
        for op in job.ops:
            data = getattr(op, "input", op)
            if isinstance(data, Mapping):
                for key in ("instance_name", "instance_uuid"):
                    if isinstance(data.get(key), str):
                        busy.add(data[key])
    return busy


class Watcher(Service):
    """The watcher of one LuxiD (see the module docstring).

    @param luxid: the L{ganeti.luxid.service.LuxidService} (jobs, submit, archive)
    @param liveness: the L{ganeti.heartbeat.server.LivenessService}
    @param config: C{await config()} -> the current L{ConfigData}
    """

    log = Logger()

    def __init__(self, luxid: Any, liveness: Any, config: Callable[[], Awaitable[ConfigData]], reactor: IReactorTime, *,
                 confirm_delay: float = CONFIRM_DELAY, budget: RestartBudget | None = None,
                 archive_every: float = ARCHIVE_EVERY, archive_age: float = ARCHIVE_AGE,
                 ask_node: AskNode | None = None) -> None:
        self.luxid = luxid
        self.liveness = liveness
        self.config = config
        self.reactor = reactor
        self.confirm_delay = confirm_delay
        self.budget = budget or RestartBudget()
        self.ask_node = ask_node
        self.archive_every = archive_every
        self.archive_age = archive_age
        self.pause_path = pause_file(luxid.paths.data_dir)
        self._checks: dict[str, Any] = {}
        #: nodes being looked at, and those to look at again when that ends
        self._looking: set[str] = set()
        self._look_again: set[str] = set()
        #: node -> when its latest report arrived (reactor time)
        self._reported_at: dict[str, float] = {}
        #: instance name -> id of its watcher restart job
        self.restarting: dict[str, int] = {}
        #: instances a report showed running since their restart job ended
        self._seen_up: set[str] = set()
        #: pending looks at the end of a restart's grace (L{STALE_GRACE})
        self._regrace: dict[str, Any] = {}
        #: instances left down because the budget is spent
        self.given_up: set[str] = set()
        self.restarts = 0
        self._archiver: LoopingCall | None = None

    def startService(self) -> None:
        super().startService()
        self.liveness.report_hooks.append(self._report_arrived)
        self._archiver = LoopingCall(self.archive)
        self._archiver.clock = self.reactor
        self._archiver.start(self.archive_every, now=False)

    def stopService(self) -> Any:
        super().stopService()
        if self._report_arrived in self.liveness.report_hooks:
            self.liveness.report_hooks.remove(self._report_arrived)
        if self._archiver is not None and self._archiver.running:
            self._archiver.stop()
        for call in list(self._checks.values()) + list(self._regrace.values()):
            if call.active():
                call.cancel()
        self._checks.clear()
        self._regrace.clear()
        return None

    def paused(self) -> bool:
        return read_pause(self.pause_path, time.time()) is not None

    # --- events ------------------------------------------------------------------------
    def _report_arrived(self, node: str, report: Mapping[str, Any]) -> None:
        self._reported_at[node] = self.reactor.seconds()
        self._note_running(node)
        self.node_reported(node, report)

    def _note_running(self, node: str) -> None:
        """Remember the restarted instances that C{node}'s report (merged) shows running."""
        if not self.restarting:
            return
        full = self.liveness.fresh_report(node)
        found = full.get("instances", {}) if isinstance(full, Mapping) else {}
        if not isinstance(found, Mapping):
            return
        for name, job_id in self.restarting.items():
            job = self.luxid.jobs.get(job_id)
            if job is None or not job.finalized:
                continue  # only what is seen after the restart's end counts
            info = found.get(name)
            if isinstance(info, Mapping) and info.get("state", "running") == "running":
                self._seen_up.add(name)

    def node_reported(self, node: str, report: Mapping[str, Any]) -> None:
        """A node reported its state: look at its instances soon (once per burst)."""
        if not self.running or node in self._checks or self.paused():
            return
        self._checks[node] = self.reactor.callLater(self.confirm_delay, self._check_soon, node)

    def resume(self) -> None:
        """The pause ended: look at every node with a fresh report."""
        for node in list(self.liveness.roster.nodes):
            if self.liveness.fresh_report(node) is not None:
                self.node_reported(node, {})

    def _check_soon(self, node: str) -> None:
        self._checks.pop(node, None)
        if node in self._looking:  # after the look under way (it may be submitting a restart)
            self._look_again.add(node)
            return
        self._looking.add(node)
        d = Deferred.fromCoroutine(self.check(node))
        d.addErrback(lambda f: self.log.failure("watcher: checking {node} failed", f, node=node))
        d.addBoth(lambda _: self._looked(node))

    def _looked(self, node: str) -> None:
        self._looking.discard(node)
        if node in self._look_again and self.running:
            self._look_again.discard(node)
            self._check_soon(node)

    def _ended_after_report(self, job: Any, node: str) -> bool:
        """Whether C{job} (a finished restart job) ended after C{node}'s latest
        report, which then says nothing about what the job did."""
        from ganeti.jobs.model import ts_seconds

        ended = ts_seconds(getattr(job, "end_timestamp", None))
        reported = self._reported_at.get(node)
        return ended is not None and reported is not None and reported <= ended

    def _within_grace(self, name: str, job: Any, node: str, now: float) -> bool:
        """Whether a finished restart job of C{name} is too recent for a
        report that has not shown C{name} running since to count; if so, a
        look at C{node} is planned for the end of the grace."""
        from ganeti.jobs.model import ts_seconds

        if name in self._seen_up:
            return False
        ended = ts_seconds(getattr(job, "end_timestamp", None))
        if ended is None or now - ended >= STALE_GRACE:
            return False
        if node not in self._regrace:
            def look() -> None:
                self._regrace.pop(node, None)
                self.node_reported(node, {})
            self._regrace[node] = self.reactor.callLater(max(0.0, ended + STALE_GRACE - now) + 0.1, look)
        return True

    async def check(self, node: str) -> list[int]:
        """Restart the instances of C{node} that should run and do not; the job ids."""
        if self.paused():
            return []
        reports = self.liveness.fresh_instance_reports()
        if node not in reports:
            return []
        config = await self.config()
        down = needs_restart(config, node, reports)
        for name in list(self.given_up):
            if name not in down:
                self.given_up.discard(name)
        confirmed = False
        if self.ask_node is not None and set(down) - self.given_up:  # not for instances left down for good
            down, confirmed = await self._still_down(config, node, reports, down)
        busy = busy_instances(self.luxid.jobs.values())
        jobs = []
        now = self.reactor.seconds()
        for name in down:
            pending = self.restarting.get(name)
            if pending is not None:
                job = self.luxid.jobs.get(pending)
                if job is not None and (not job.finalized or self._ended_after_report(job, node)):
                    continue
                # an instance whose budget is spent is left down at once, without the grace; so is
                # one the node itself, asked after the restart's end, says is down: no report lag there
                if (job is not None and self.budget.used(name, now) < self.budget.limit and not confirmed
                        and self._within_grace(name, job, node, now)):
                    continue
            if name in busy or name in self.given_up:
                continue
            if not self.budget.allow(name, now):
                self.given_up.add(name)
                self.log.warn("watcher: instance {instance} stopped again; {n} restarts in {w:.0f} min already, "
                              "leaving it down (ERROR_down)", instance=name, n=self.budget.limit,
                              w=self.budget.window / 60)
                continue
            job_id = await self._restart(name, node)
            if job_id is not None:
                self.restarting[name] = job_id
                self._seen_up.discard(name)
                jobs.append(job_id)
        return jobs

    async def _still_down(self, config: ConfigData, node: str, reports: Mapping[str, Mapping[str, Any]],
                          down: list[str]) -> tuple[list[str], bool]:
        """Of C{down}, those the node itself says are down now: a pushed report
        may lag what happened on the node (a restart that just ended), and a
        restart is a real action; if the node does not answer, the report
        decides.  Also whether the node answered."""
        assert self.ask_node is not None
        try:
            now = await self.ask_node(config, node)
        except Exception as e:
            self.log.info("watcher: cannot ask {node} what runs there: {e}", node=node, e=e)
            return down, False
        if now is None:
            return down, False
        still = needs_restart(config, node, dict(reports, **{node: now}))
        for name in sorted(set(down) - set(still)):
            self.log.info("watcher: instance {instance} runs on {node} after all (its report was behind)",
                          instance=name, node=node)
        return [name for name in down if name in still], True

    async def _restart(self, name: str, node: str) -> int | None:
        op = {
            "OP_ID": "OP_INSTANCE_STARTUP",
            "instance_name": name,
            "reason": [[REASON_SOURCE, "instance %s is down on %s; restarted by the watcher" % (name, node),
                        time.time_ns()]],
        }
        try:
            ((ok, job_id),) = await self.luxid.submit([[op]])
        except Exception as e:
            self.log.warn("watcher: cannot submit the restart of {instance}: {why}", instance=name, why=str(e))
            return None
        self.restarts += 1
        self.log.info("watcher: instance {instance} is down on {node}; restarting it (job {job})", instance=name,
                      node=node, job=job_id)
        return int(job_id) if ok else None

    def archive(self) -> list[int]:
        """Archive jobs finished more than L{ARCHIVE_AGE} seconds ago (unless paused)."""
        if self.paused():
            return []
        archived = self.luxid.auto_archive(self.archive_age, ARCHIVE_TIMEOUT)
        if archived and archived[0]:
            self.log.info("watcher: archived {n} old job(s)", n=archived[0])
        return cast("list[int]", archived)


__all__ = ["REASON_SOURCE", "RESTART_LIMIT", "RESTART_WINDOW", "STALE_GRACE", "RestartBudget", "Watcher", "busy_instances",
           "needs_restart", "pause_file", "read_pause", "write_pause"]
