"""A job's final status is shown to clients only once a majority of the
master candidates hold its final file (L{JobReplicator.confirm} and
L{LuxidService.view}); candidates are in-memory queues that can freeze."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred

from ganeti.rpc.contract import Runner
from tests.unit.queue_helpers import DELAY, ReplicatedLuxidCase
from tests.unit.test_queue_replicas import FakeCandidates


class FreezableCandidates(FakeCandidates, Runner):
    """Calls to a frozen candidate answer only when it is thawed (SIGSTOP/SIGCONT)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.frozen: set[str] = set()
        self.stalled: list[tuple[dict[str, str], str, list[Any], Deferred]] = []

    def call(self, nodes: dict[str, str], procedure: str, args: list[Any], timeout: float) -> Any:
        if set(nodes) & self.frozen:
            d: Deferred = Deferred()
            self.stalled.append((nodes, procedure, args, d))
            return d
        return super().call(nodes, procedure, args, timeout)

    def thaw(self, name: str) -> None:
        self.frozen.discard(name)
        stalled, self.stalled = self.stalled, []
        for nodes, procedure, args, d in stalled:
            if name in nodes:
                super().call(nodes, procedure, args, 30).chainDeferred(d)
            else:
                self.stalled.append((nodes, procedure, args, d))


class FinalStatusTests(ReplicatedLuxidCase):
    prefix = "gntf"

    def make_fake(self, names: list[str]) -> FreezableCandidates:
        return FreezableCandidates(names)

    run_job = ReplicatedLuxidCase.write

    def shown(self, job_id: int) -> str:
        return self.service.view(job_id).status

    def test_a_final_status_waits_for_a_majority(self) -> None:
        job_id = self.submit()
        self.run_job(job_id, "running")
        self.assertEqual(self.shown(job_id), "running")  # intermediate statuses show at once
        self.fake.frozen.update(self.nodes)
        self.run_job(job_id, "success")
        self.settle()
        self.assertEqual(self.service.jobs[job_id].status, "success")  # LuxiD knows
        self.assertEqual(self.shown(job_id), "running")  # clients do not, yet
        self.assertEqual(self.service.live_jobs()[job_id].status, "running")
        self.assertFalse(self.successResultOf(ensureDeferred(self.service.archive(job_id))))
        waiting = ensureDeferred(self.service.wait_for_change(job_id, lambda j: j.status, "running", 60))
        self.assertNoResult(waiting)
        self.fake.thaw("node3.test")
        self.settle()
        self.assertEqual(self.successResultOf(waiting), "success")
        self.assertEqual(self.shown(job_id), "success")
        self.assertEqual(self.service.shown, {})

    def test_one_slow_candidate_does_not_delay_the_final_status(self) -> None:
        job_id = self.submit()
        self.run_job(job_id, "running")
        self.fake.frozen.add("node2.test")
        self.run_job(job_id, "success")
        self.settle()
        self.assertEqual(self.shown(job_id), "success")

    def test_a_job_luxid_cancels_shows_canceled_once_a_majority_holds_it(self) -> None:
        job_id = self.submit()
        self.fake.frozen.update(self.nodes)
        ok, _message = self.successResultOf(self.service.cancel(job_id))
        self.assertTrue(ok)
        self.settle()
        self.assertEqual(self.service.jobs[job_id].status, "canceled")
        self.assertEqual(self.shown(job_id), "queued")
        self.fake.thaw("node2.test")
        self.settle()
        self.assertEqual(self.shown(job_id), "canceled")

    def test_without_candidates_the_final_status_shows_at_once(self) -> None:
        self.nodes.clear()
        self.replicator.refresh_candidates()
        job_id = self.submit()
        self.run_job(job_id, "error")
        self.assertEqual(self.shown(job_id), "error")

    def test_confirm_counts_this_node_and_matching_content_only(self) -> None:
        job_id = self.submit()
        path = self.queue.job_path(job_id)
        with open(path, "rb") as handle:
            content = handle.read()
        self.successResultOf(self.replicator.confirm(path, content))  # held by all already
        self.fake.frozen.update(self.nodes)
        d = self.replicator.confirm(path, b"other content")
        self.settle()
        self.assertNoResult(d)
        self.assertEqual(self.replicator.holders("job-%d" % job_id, "x"), (1, 3))

    def test_a_frozen_candidate_does_not_delay_a_submission(self) -> None:
        self.fake.frozen.add("node3.test")
        d = ensureDeferred(self.service.submit([DELAY]))
        ((ok, job_id),) = self.successResultOf(d)  # node1 and node2 hold it: a majority
        self.assertTrue(ok)
        self.assertIn("job-%d" % job_id, self.fake.queues["node2.test"])
        self.fake.thaw("node3.test")
        self.settle()
        self.assertIn("job-%d" % job_id, self.fake.queues["node3.test"])

    def test_without_a_majority_a_submission_is_refused(self) -> None:
        self.fake.down.update(self.nodes)
        d = ensureDeferred(self.service.submit([DELAY]))
        self.assertIn("not replicated to a majority", str(self.failureResultOf(d).value))
        self.assertEqual(self.service.live_jobs(), {})

    def test_a_refused_submission_sent_again_with_its_id_makes_a_job(self) -> None:
        """The refused job was never acknowledged: its submission id is not kept, so the client's
        retry (same id) once the candidates answer again is a new, acknowledged job, not the
        refused job's id (which ended in error)."""
        job = [dict(DELAY[0], reason=[["gnt:submission", "retry-me", 1]])]
        self.fake.down.update(self.nodes)
        d = ensureDeferred(self.service.submit([job]))
        self.assertIn("not replicated to a majority", str(self.failureResultOf(d).value))
        refused = self.queue.serial()
        self.fake.down.clear()
        ((ok, job_id),) = self.successResultOf(ensureDeferred(self.service.submit([job])))
        self.assertTrue(ok)
        self.assertNotEqual(job_id, refused)
        self.assertIn(job_id, self.service.live_jobs())
