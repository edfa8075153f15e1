"""The watcher on events: which instances it restarts, its budget, its pause."""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.heartbeat import watcher as w
from ganeti.jobs.model import QueuedJob
from ganeti.paths import Paths

from .test_luxid_live import make_config

RUNNING = {"state": "running"}


class PureTests(SynchronousTestCase):
    def test_needs_restart(self) -> None:
        """Admin-up instances of the node that do not run; not admin-down ones, not offline nodes,
        not one running on another node, not without the node's report."""
        config = make_config()
        n1, n2 = "node1.example.test", "node2.example.test"
        self.assertEqual(w.needs_restart(config, n1, {n1: {}}), ["web1"])
        self.assertEqual(w.needs_restart(config, n1, {n1: {"web1": RUNNING}}), [])
        self.assertEqual(w.needs_restart(config, n1, {n1: {"web1": {"state": "shutdown"}}}), ["web1"])
        self.assertEqual(w.needs_restart(config, n1, {n1: {}, n2: {"web1": RUNNING}}), [])  # WRONG_node
        self.assertEqual(w.needs_restart(config, n1, {n2: {}}), [])
        self.assertEqual(w.needs_restart(config, "node3.example.test", {"node3.example.test": {}}), [])  # offline
        self.assertEqual(w.needs_restart(config, "nosuch", {"nosuch": {}}), [])

    def test_user_down_is_left_alone(self) -> None:
        """A guest that powered itself off with user shutdown enabled is USER_down: no restart."""
        import attrs

        config = make_config()
        config = attrs.evolve(config, cluster=attrs.evolve(config.cluster, enabled_user_shutdown=True))
        n1 = "node1.example.test"
        self.assertEqual(w.needs_restart(config, n1, {n1: {"web1": {"state": "shutdown"}}}), [])
        self.assertEqual(w.needs_restart(config, n1, {n1: {}}), ["web1"])  # gone: a crash

    def test_budget(self) -> None:
        """Three restarts in 30 minutes, the fourth refused; allowed again once the first is old."""
        budget = w.RestartBudget()
        self.assertEqual([budget.allow("a", t) for t in (0, 60, 120, 180)], [True, True, True, False])
        self.assertTrue(budget.allow("b", 180))
        self.assertTrue(budget.allow("a", 1801))

    def test_busy_instances(self) -> None:
        running = QueuedJob.new(1, [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1"}])
        done = QueuedJob.new(2, [{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web2"}])
        done.fail("gone")
        self.assertEqual(w.busy_instances([running, done]), {"web1"})

    def test_pause_file(self) -> None:
        """Ganeti's file: an integer epoch; past pauses read as None and long-past files go away."""
        path = os.path.join(tempfile.mkdtemp(), "watcher.pause")
        self.assertIsNone(w.read_pause(path, 100))
        w.write_pause(path, 1000.7)
        with open(path) as handle:
            self.assertEqual(handle.read(), "1000\n")
        self.assertEqual(w.read_pause(path, 999), 1000.0)
        self.assertIsNone(w.read_pause(path, 1001))
        self.assertTrue(os.path.exists(path))
        self.assertIsNone(w.read_pause(path, 1000 + 3601))
        self.assertFalse(os.path.exists(path))
        w.write_pause(path, 5)
        w.write_pause(path, None)
        self.assertFalse(os.path.exists(path))


class FakeLuxid:
    def __init__(self) -> None:
        self.paths = Paths(tempfile.mkdtemp(prefix="wt"))
        os.makedirs(self.paths.data_dir)
        self.jobs: dict[int, QueuedJob] = {}
        self.submitted: list[Any] = []

    async def submit(self, jobs: list[Any]) -> list[Any]:
        job_id = len(self.submitted) + 1
        self.submitted.append(jobs[0][0])
        self.jobs[job_id] = QueuedJob.new(job_id, jobs[0])
        return [[True, job_id]]

    def finish(self) -> None:
        for job in self.jobs.values():
            if not job.finalized:
                job.fail("done")

    def auto_archive(self, age: float, timeout: float) -> list[int]:
        self.archived = (age, timeout)
        return [0, 0]


class FakeLiveness:
    def __init__(self) -> None:
        self.report_hooks: list[Any] = []
        self.reports: dict[str, Any] = {}

    def fresh_instance_reports(self) -> Any:
        return {name: report["instances"] for name, report in self.reports.items()}

    @property
    def roster(self) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(nodes=dict(self.reports))

    def fresh_report(self, name: str) -> Any:
        return self.reports.get(name)


class WatcherTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(time.time())
        self.luxid, self.liveness = FakeLuxid(), FakeLiveness()
        config = make_config()

        async def get_config() -> Any:
            return config

        self.watcher = w.Watcher(self.luxid, self.liveness, get_config, self.clock)
        self.watcher.startService()

    def tearDown(self) -> None:
        self.watcher.stopService()

    def report(self, instances: dict[str, Any]) -> None:
        self.liveness.reports["node1.example.test"] = {"instances": instances}
        for hook in self.liveness.report_hooks:
            hook("node1.example.test", {"t": "report", "full": False, "instances": instances})

    def test_restart_after_confirmation_with_watcher_reason(self) -> None:
        """A report without web1: after the confirmation delay, one startup job naming the watcher."""
        self.report({})
        self.assertEqual(self.luxid.submitted, [])
        self.clock.advance(w.CONFIRM_DELAY)
        (op,) = self.luxid.submitted
        self.assertEqual((op["OP_ID"], op["instance_name"]), ("OP_INSTANCE_STARTUP", "web1"))
        self.assertEqual(op["reason"][0][0], "gnt:watcher")
        # more reports while its job runs: no second job
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.submitted), 1)

    def test_a_report_behind_the_node_restarts_nothing(self) -> None:
        """The node itself, asked before a restart, says the instance runs: no job; when it
        says it is down, or does not answer, the restart goes ahead."""
        answers: list[Any] = [{"web1": RUNNING}]

        async def ask_node(config: Any, node: str) -> Any:
            self.assertEqual(node, "node1.example.test")
            return answers[0]

        self.watcher.ask_node = ask_node
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(self.luxid.submitted, [])
        answers[0] = None  # the node does not answer: the report decides
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.submitted), 1)
        self.luxid.finish()
        self.clock.advance(w.STALE_GRACE + 1)
        answers[0] = {}  # the node says it is down: restarted again
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.submitted), 2)

    def test_back_before_confirmation_no_restart(self) -> None:
        self.report({})
        self.report({"web1": RUNNING})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(self.luxid.submitted, [])

    def test_budget_then_left_down(self) -> None:
        """Three restarts; the fourth crash in 30 minutes is left down."""
        for _ in range(4):
            self.report({})
            self.clock.advance(w.CONFIRM_DELAY)
            self.luxid.finish()
            self.clock.advance(60)
        self.assertEqual(len(self.luxid.submitted), 3)
        self.assertEqual(self.watcher.given_up, {"web1"})

    def test_paused(self) -> None:
        """While paused: no restart, no archive; after 'continue' the next report restarts."""
        path = w.pause_file(self.luxid.paths.data_dir)
        w.write_pause(path, time.time() + 3600)
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(self.watcher.archive(), [])
        self.assertEqual(self.luxid.submitted, [])
        w.write_pause(path, None)
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.submitted), 1)

    def test_busy_instance_left_alone(self) -> None:
        self.luxid.jobs[99] = QueuedJob.new(99, [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1"}])
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(self.luxid.submitted, [])

    def test_archives_old_jobs(self) -> None:
        self.clock.advance(w.ARCHIVE_EVERY)
        self.assertEqual(self.luxid.archived, (w.ARCHIVE_AGE, w.ARCHIVE_TIMEOUT))

    def test_resume_looks_at_every_node(self) -> None:
        """'continue' (resume) checks the nodes at once, without waiting for a report."""
        path = w.pause_file(self.luxid.paths.data_dir)
        w.write_pause(path, time.time() + 3600)
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(self.luxid.submitted, [])
        w.write_pause(path, None)
        self.watcher.resume()
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.submitted), 1)


class SlowSubmitLuxid(FakeLuxid):
    """A submission that waits (for the candidates) until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: list[Any] = []

    async def submit(self, jobs: list[Any]) -> list[Any]:
        from twisted.internet.defer import Deferred

        gate: Deferred[None] = Deferred()
        self.waiting.append(gate)
        await gate
        return await super().submit(jobs)


class RaceTests(SynchronousTestCase):
    """What a loaded master sees: slow submissions, reports that come late."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(time.time())
        self.luxid, self.liveness = SlowSubmitLuxid(), FakeLiveness()
        config = make_config()

        async def get_config() -> Any:
            return config

        self.watcher = w.Watcher(self.luxid, self.liveness, get_config, self.clock)
        self.watcher.startService()
        self.addCleanup(self.watcher.stopService)

    report = WatcherTests.report

    def test_one_look_at_a_time(self) -> None:
        """A report while a look still submits its restart: looked at after it, no second job."""
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 1)
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 1)  # the second look waits for the first
        self.luxid.waiting[0].callback(None)
        self.assertEqual(len(self.luxid.submitted), 1)
        self.assertEqual(len(self.luxid.waiting), 1)  # ... then sees the job running: nothing more

    def test_a_report_older_than_the_restart_is_not_trusted(self) -> None:
        """The restart job ended after the node's latest report (which still says
        the instance is down): no second restart until a newer report says so."""
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.luxid.waiting[0].callback(None)
        (job,) = self.luxid.jobs.values()
        self.report({})  # sent before the restart took effect
        self.clock.advance(1)
        for op in job.ops:
            op.status = "success"
        job.end_timestamp = [int(self.clock.seconds()) + 1, 0]  # the job ended after that report
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 1)
        self.clock.advance(5)
        self.report({})  # a report after the end, which has not shown it running since
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 1)  # its instance states may predate the end
        self.clock.advance(w.STALE_GRACE)  # the look planned for the grace's end ...
        self.clock.advance(w.CONFIRM_DELAY)  # ... confirms it down
        self.assertEqual(len(self.luxid.waiting), 2)  # still down when the grace ends: really down again

    def _restarted_and_ended(self) -> None:
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.luxid.waiting[0].callback(None)
        (job,) = self.luxid.jobs.values()
        for op in job.ops:
            op.status = "success"
        job.end_timestamp = [int(self.clock.seconds()), 0]
        self.clock.advance(1)

    def test_a_stale_report_after_the_end_does_not_restart_twice(self) -> None:
        """A report sent after the restart's end whose instance part was polled
        before it (only the node's resources changed): no second restart, and
        none once a report shows the instance running."""
        self._restarted_and_ended()
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.report({"web1": RUNNING})
        self.clock.advance(w.STALE_GRACE)
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 1)

    def test_a_spent_budget_leaves_it_down_without_the_grace(self) -> None:
        """Down again right after its last allowed restart: given up at once."""
        now = self.clock.seconds()
        for _ in range(w.RESTART_LIMIT - 1):
            self.watcher.budget.allow("web1", now)
        self._restarted_and_ended()
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(self.watcher.given_up, {"web1"})
        self.assertEqual(len(self.luxid.waiting), 1)

    def test_down_by_the_nodes_own_word_after_the_end_is_restarted_at_once(self) -> None:
        """The reports that showed the restarted instance running came before its job's end
        (the node reports a start at once); it stops again and the node itself, asked after
        the end, says it is down: no wait for the stale-report grace."""
        answers: list[Any] = [{}]

        async def ask_node(config: Any, node: str) -> Any:
            return answers[0]

        self.watcher.ask_node = ask_node
        began = self.clock.seconds()
        self._restarted_and_ended()
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 2)
        self.assertLess(self.clock.seconds() - began, w.STALE_GRACE)

    def test_down_after_running_again_is_restarted_at_once(self) -> None:
        """A guest that runs after its restart, then stops again (it powers itself off)."""
        self._restarted_and_ended()
        self.report({"web1": RUNNING})
        self.report({})
        self.clock.advance(w.CONFIRM_DELAY)
        self.assertEqual(len(self.luxid.waiting), 2)
