"""Job queue replicas converge: the pure plan, and LuxiD's per-candidate
workers against fake candidates, driven by a Clock."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import replicas
from ganeti.jobs.model import QueuedJob
from ganeti.jobs.replicas import Entry, Remove, Rename, SetDrain, Update, differences, plan
from ganeti.luxid.replication import BACKOFF_FIRST, CHECK_INTERVAL, RESYNC_INTERVAL, JobReplicator
from ganeti.paths import Paths
from ganeti.rpc import wire
from ganeti.rpc.client import RpcResult
from ganeti.rpc.contract import Runner
from tests.unit.queue_helpers import open_queue, temp_root

QUEUE = "/var/lib/ganeti/queue/"


def sha(content: bytes) -> str:
    return hashlib.sha1(content).hexdigest()


class PlanTests(SynchronousTestCase):
    def test_in_sync_needs_nothing(self) -> None:
        listing = {"serial": "a", "job-1": "b", "archive/0/job-0": "c"}
        self.assertEqual(plan(listing, dict(listing)), [])

    def test_missing_and_stale_files_are_pushed_in_job_order(self) -> None:
        desired = {"serial": "s2", "job-2": "new", "job-10": "x"}
        held = {"serial": "s1", "job-2": "old"}
        self.assertEqual(plan(desired, held), [Update("serial"), Update("job-2"), Update("job-10")])

    def test_a_job_archived_meanwhile_is_moved_then_updated(self) -> None:
        desired = {"archive/0/job-5": "final"}
        held = {"job-5": "running"}
        self.assertEqual(plan(desired, held), [Rename("job-5", "archive/0/job-5"), Update("archive/0/job-5")])
        self.assertEqual(plan(desired, {"job-5": "final"}), [Rename("job-5", "archive/0/job-5")])

    def test_drain_flag_and_extra_files(self) -> None:
        self.assertEqual(plan({"drain": "e"}, {"job-3": "x"}), [SetDrain(True), Remove(("job-3",))])
        self.assertEqual(plan({}, {"drain": "e"}), [SetDrain(False)])

    def test_only_the_named_files_are_compared(self) -> None:
        desired = {"job-1": "a", "job-2": "b"}
        self.assertEqual(plan(desired, {}, ["job-2"]), [Update("job-2")])
        self.assertEqual(plan({"archive/0/job-1": "a"}, {"job-1": "a"}, ["archive/0/job-1"]),
                         [Rename("job-1", "archive/0/job-1")])

    def test_differences_name_the_jobs(self) -> None:
        master = {"job-1": Entry("a", "success"), "job-2": Entry("b", "running"), "archive/0/job-3": Entry("c", "error"),
                  "job-4": Entry("d", "success"), "serial": Entry("s", None)}
        replica = {"job-1": Entry("old", "running"), "job-2": Entry("older", "queued"), "job-3": Entry("c", "error"),
                   "job-9": Entry("z", "queued"), "serial": Entry("t", None)}
        self.assertEqual(differences(master, replica), {
            1: "stale (status running, master: success)",
            3: "job-3 there, archive/0/job-3 on the master",
            4: "missing",
            9: "extra (job-9 there, not on the master)",
        })
        self.assertEqual(differences(master, dict(master)), {})


class ByName(Runner):
    """Declared calls through the C{call} of C{target}."""

    def __init__(self, target: Any) -> None:
        self.call = target.call


class FakeCandidates(Runner):
    """Node RPC to in-memory candidate queues; nodes can be down."""

    def __init__(self, names: list[str]) -> None:
        self.queues: dict[str, dict[str, bytes]] = {name: {} for name in names}
        self.down: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.hold: Deferred | None = None  # set: the next call waits for it
        #: (node, file name) of every file written by an update, in order
        self.pushed: list[tuple[str, str]] = []
        #: (node, file name) of the files written without fsync
        self.volatile: list[tuple[str, str]] = []

    def call(self, nodes: dict[str, str], procedure: str, args: list[Any], timeout: float) -> Any:
        results = {}
        for name in nodes:
            self.calls.append((name, procedure))
            if name in self.down:
                results[name] = RpcResult.failure(name, "node unreachable: connection refused")
                continue
            results[name] = RpcResult(name, True, self._run(self.queues[name], procedure, args))
            if procedure == "jobqueue_update":
                self.pushed.append((name, args[0][len(QUEUE):]))
            elif procedure == "jobqueue_update_many":
                self.pushed.extend((name, vpath[len(QUEUE):]) for vpath, _content in args[0])
                if len(args) > 1 and args[1] is False:
                    self.volatile.extend((name, vpath[len(QUEUE):]) for vpath, _content in args[0])
        if self.hold is not None:
            d, self.hold = self.hold, None
            return d.addCallback(lambda _: results)
        return succeed(results)

    @staticmethod
    def _run(queue: dict[str, bytes], procedure: str, args: list[Any]) -> Any:
        def name(vpath: str) -> str:
            assert vpath.startswith(QUEUE), vpath
            return vpath[len(QUEUE):]

        if procedure == "jobqueue_list":
            return {n: [sha(c), None] for n, c in queue.items()}
        if procedure == "jobqueue_update":
            queue[name(args[0])] = wire.decompress(args[1])
            return None
        if procedure == "jobqueue_update_many":
            for vpath, content in args[0]:
                queue[name(vpath)] = wire.decompress(content)
            return None
        if procedure == "jobqueue_rename":
            answers = []
            for old, new in args[0]:
                if name(old) in queue:
                    queue[name(new)] = queue.pop(name(old))
                    answers.append(None)
                else:
                    answers.append("Can't rename")
            return answers
        if procedure == "jobqueue_set_drain_flag":
            if args[0]:
                queue["drain"] = b""
            else:
                queue.pop("drain", None)
            return None
        if procedure == "jobqueue_remove":
            for vpath in args[0]:
                queue.pop(name(vpath), None)
            return None
        raise AssertionError(procedure)


class ReplicatorTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.paths = temp_root(self, "gntq")
        self.clock = Clock()
        self.nodes = {"node2.test": "127.0.1.2", "node3.test": "127.0.1.3"}
        self.fake = FakeCandidates(list(self.nodes))
        self.replicator = JobReplicator(self.paths, self.clock, rpc=self.fake, candidates=lambda: dict(self.nodes))
        self.queue = open_queue(self, self.paths, on_write=self.replicator.written, on_rename=self.replicator.renamed,
                                on_drain=self.replicator.drain_changed)
        self.addCleanup(self.replicator.stop)

    def master(self) -> dict[str, bytes]:
        result = {}
        for name in replicas.queue_names(self.paths.queue_dir):
            with open(os.path.join(self.paths.queue_dir, name), "rb") as handle:
                result[name] = handle.read()
        return result

    def new_job(self, status: str = "queued") -> QueuedJob:
        (job_id,) = self.queue.allocate_ids(1)
        job = QueuedJob.new(job_id, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        if status != "queued":
            job.ops[0].status = status
        self.queue.write_job(job)
        return job

    def settle(self, seconds: float = 0.0) -> None:
        self.clock.advance(0)
        self.clock.advance(seconds)
        self.clock.advance(0)

    def test_start_resyncs_stale_candidates_pushing_only_what_differs(self) -> None:
        """Jobs that finished while LuxiD was down reach the candidates."""
        done = self.new_job("success")
        other = self.new_job("success")
        self.fake.queues["node2.test"] = dict(self.master())
        self.fake.queues["node2.test"]["job-%d" % done.id] = b"stale: still running"
        self.fake.queues["node2.test"]["job-99"] = b"never acknowledged"
        self.replicator.start()
        self.settle()
        self.assertEqual(self.fake.queues["node2.test"], self.master())
        self.assertEqual(self.fake.queues["node3.test"], self.master())
        node2 = [p for n, p in self.fake.calls if n == "node2.test"]
        # and a spare connection opened for the first new job (a cheap call beside the listing)
        self.assertEqual(node2, ["version", "jobqueue_list", "jobqueue_update_many", "jobqueue_remove"])
        self.assertEqual(sorted(f for n, f in self.fake.pushed if n == "node2.test"), ["job-%d" % done.id])
        self.assertTrue(all(v["in_sync"] for v in self.replicator.status().values()))
        self.assertTrue(other.id)

    def test_a_candidate_that_was_down_converges_with_backoff(self) -> None:
        self.replicator.start()
        self.settle()
        self.fake.down.add("node3.test")
        job = self.new_job()
        self.settle()
        job.ops[0].status = "success"
        self.queue.write_job(job)
        self.queue.archive_job(job.id)
        self.queue.set_drained(True)
        self.settle()
        self.assertEqual(self.fake.queues["node2.test"], self.master())
        self.assertNotEqual(self.fake.queues["node3.test"], self.master())
        self.assertFalse(self.replicator.status()["node3.test"]["in_sync"])
        tries = len(self.fake.calls)
        self.settle(BACKOFF_FIRST)  # retried, still down
        self.settle(BACKOFF_FIRST * 2)
        self.assertEqual(len(self.fake.calls), tries + 2)
        self.fake.down.clear()
        self.settle(BACKOFF_FIRST * 4)
        self.assertEqual(self.fake.queues["node3.test"], self.master())
        self.assertIn("archive/0/job-%d" % job.id, self.fake.queues["node3.test"])
        self.assertIn("drain", self.fake.queues["node3.test"])
        self.assertTrue(self.replicator.status()["node3.test"]["in_sync"])

    def test_a_candidate_seen_up_by_the_heartbeat_is_resynced_at_once(self) -> None:
        """node_up (the liveness roster's 'up') skips the rest of the backoff."""
        self.replicator.start()
        self.settle()
        self.fake.down.add("node3.test")
        self.new_job()
        for k in range(4):  # retried and failed four times: the next retry is 4 s away
            self.settle(BACKOFF_FIRST * 2 ** k)
        self.assertNotEqual(self.fake.queues["node3.test"], self.master())
        self.fake.down.clear()
        self.settle()
        self.assertNotEqual(self.fake.queues["node3.test"], self.master())
        self.replicator.node_up("node3.test")
        self.settle()
        self.assertEqual(self.fake.queues["node3.test"], self.master())
        self.replicator.node_up("node9.test")  # not a candidate: nothing

    def test_archive_and_drain_are_replicated_as_renames_and_flags(self) -> None:
        job = self.new_job("success")
        self.replicator.start()
        self.settle()
        self.fake.calls.clear()
        self.queue.archive_job(job.id)
        self.queue.set_drained(True)
        self.settle()
        self.assertEqual(sorted(set(p for _n, p in self.fake.calls)), ["jobqueue_rename", "jobqueue_set_drain_flag"])
        self.assertEqual(self.fake.queues["node2.test"], self.master())
        self.queue.set_drained(False)
        self.settle()
        self.assertNotIn("drain", self.fake.queues["node3.test"])

    def test_a_new_job_counts_its_holders_and_is_pushed_once(self) -> None:
        self.replicator.start()
        self.settle()
        self.fake.down.add("node3.test")
        self.fake.calls.clear()
        self.fake.pushed.clear()
        job = self.new_job()
        content = self.master()["job-%d" % job.id]
        d = Deferred.fromCoroutine(self.replicator.replicate([(self.queue.job_path(job.id), content)]))
        self.assertEqual(self.successResultOf(d), (2, 3))
        self.settle()
        self.assertEqual([p for n, p in self.fake.calls if n == "node2.test"], ["jobqueue_update_many"],
                         "the job and the serial file in one call")
        self.assertEqual(sorted(f for n, f in self.fake.pushed if n == "node2.test"), ["job-%d" % job.id, "serial"])
        # node3 comes back: the next new job succeeds there, which resyncs it at once
        self.fake.down.clear()
        job2 = self.new_job()
        content2 = self.master()["job-%d" % job2.id]
        d = Deferred.fromCoroutine(self.replicator.replicate([(self.queue.job_path(job2.id), content2)]))
        self.assertEqual(self.successResultOf(d), (3, 3))
        self.settle()
        self.assertEqual(self.fake.queues["node3.test"], self.master())

    def test_new_candidates_are_resynced_and_drift_is_repaired(self) -> None:
        self.new_job("success")
        self.replicator.start()
        self.settle()
        self.nodes["node4.test"] = "127.0.1.4"
        self.fake.queues["node4.test"] = {}
        self.settle(CHECK_INTERVAL)
        self.assertEqual(self.fake.queues["node4.test"], self.master())
        self.fake.queues["node4.test"]["job-1"] = b"tampered"
        self.settle(RESYNC_INTERVAL)
        self.assertEqual(self.fake.queues["node4.test"], self.master())


class FakeLU:
    """What verify_queue_replicas uses of an LU: ctx (paths, rpc, sleep), cfg, feedback."""

    def __init__(self, paths: Paths, cfg: Any, rpc: Any, clock: Clock) -> None:
        self.cfg = cfg
        self.lines: list[str] = []
        self.errors: list[tuple[str, str, str, bool]] = []
        lu = self

        class Ctx:
            def __init__(self) -> None:
                self.paths = paths

            def rpc(self) -> Any:
                return ByName(rpc)

            def sleep(self, seconds: float) -> Deferred:
                from twisted.internet.task import deferLater

                return deferLater(clock, seconds, lambda: None)

        self.ctx = Ctx()

        async def node_error(code: str, node: str, message: str, warning: bool = False) -> None:
            lu.errors.append((code, node, message, warning))

        self.node_error = node_error

    def feedback(self, line: str) -> Deferred:
        self.lines.append(line)
        return succeed(None)


class VerifyTests(SynchronousTestCase):
    def setUp(self) -> None:
        from ganeti.testing.cluster import loopback_config

        self.paths = temp_root(self, "gntv")
        self.queue = open_queue(self, self.paths)
        self.clock = Clock()
        self.fake = FakeCandidates(["node2.test", "node3.test"])
        cfg = loopback_config(3, candidate_pool_size=10, candidates=["node2.test", "node3.test"])
        self.lu = FakeLU(self.paths, cfg, self, self.clock)
        self.jobs = []
        for status in ("success", "error", "running"):
            (job_id,) = self.queue.allocate_ids(1)
            job = QueuedJob.new(job_id, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
            job.ops[0].status = status
            self.queue.write_job(job)
            self.jobs.append(job)
        for name in self.fake.queues:
            self.fake.queues[name] = {n: c for n, c in self.master().items()}

    def master(self) -> dict[str, bytes]:
        result = {}
        for name in replicas.queue_names(self.paths.queue_dir):
            with open(os.path.join(self.paths.queue_dir, name), "rb") as handle:
                result[name] = handle.read()
        return result

    def call(self, nodes: dict[str, str], procedure: str, args: list[Any], timeout: float) -> Any:
        """The candidates list their queues with each job's status, as noded does."""
        d = self.fake.call(nodes, procedure, args, timeout)

        def statuses(results: dict[str, RpcResult]) -> dict[str, RpcResult]:
            for name, result in results.items():
                if result.success:
                    queue = self.fake.queues[name]
                    listing = {n: [sha(c), replicas.job_status(c) if replicas.job_id_of(n) is not None else None]
                               for n, c in queue.items()}
                    results[name] = RpcResult(name, True, listing)
            return results

        return d.addCallback(statuses)

    def verify(self) -> None:
        from ganeti.cmdlib.queue_verify import verify_queue_replicas

        d = Deferred.fromCoroutine(verify_queue_replicas(self.lu, self.lu.node_error))
        self.clock.advance(5)
        self.successResultOf(d)

    def test_matching_replicas_pass(self) -> None:
        self.verify()
        self.assertEqual(self.lu.errors, [])
        self.assertEqual(self.lu.lines, ["* Verifying the job queue replicas (2 candidates)"])

    def test_differing_replicas_are_errors_naming_the_jobs(self) -> None:
        done, failed, running = self.jobs
        stale = QueuedJob.from_dict(done.to_dict())
        stale.ops[0].status = "running"
        self.fake.queues["node2.test"]["job-%d" % done.id] = stale.to_json()
        del self.fake.queues["node3.test"]["job-%d" % failed.id]
        self.fake.queues["node3.test"]["job-77"] = b"{}"
        self.fake.queues["node3.test"]["job-%d" % running.id] = b"lagging behind"  # not final: not judged
        self.verify()
        self.assertEqual(self.lu.errors, [
            ("EQUEUEREPLICA", "node2.test", "job queue replica differs from the master's for 1 job(s):"
             " %d stale (status running, master: success)" % done.id, False),
            ("EQUEUEREPLICA", "node3.test", "job queue replica differs from the master's for 2 job(s):"
             " %d missing, 77 extra (job-77 there, not on the master)" % failed.id, False),
        ])

    def test_a_difference_that_heals_before_the_recheck_is_not_reported(self) -> None:
        done = self.jobs[0]
        del self.fake.queues["node2.test"]["job-%d" % done.id]
        from ganeti.cmdlib.queue_verify import verify_queue_replicas

        d = Deferred.fromCoroutine(verify_queue_replicas(self.lu, self.lu.node_error))
        self.fake.queues["node2.test"]["job-%d" % done.id] = self.master()["job-%d" % done.id]
        self.clock.advance(5)
        self.successResultOf(d)
        self.assertEqual(self.lu.errors, [])

    def test_an_unreachable_candidate_is_a_warning(self) -> None:
        self.fake.down.add("node3.test")
        self.verify()
        self.assertEqual([(n, w) for _c, n, _m, w in self.lu.errors], [("node3.test", True)])


_NAMES = ["job-1", "job-2", "job-3", "archive/0/job-1", "archive/0/job-2", "serial", "drain"]


def _apply(held: dict[str, Any], desired: dict[str, Any], steps: list[Any]) -> dict[str, Any]:
    """What a candidate holding C{held} holds after C{steps} (updates take the master's version)."""
    after = dict(held)
    for step in steps:
        if isinstance(step, Rename):
            after[step.new] = after.pop(step.old)
        elif isinstance(step, Update):
            after[step.name] = desired[step.name]
        elif isinstance(step, SetDrain):
            after.pop("drain", None)
            if step.flag:
                after["drain"] = desired["drain"]
        elif isinstance(step, Remove):
            for name in step.names:
                after.pop(name, None)
    return after


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_NAMES), st.sampled_from("abc")),
       st.dictionaries(st.sampled_from(_NAMES), st.sampled_from("abc")),
       st.sets(st.sampled_from(_NAMES)))
def test_a_plan_for_some_names_brings_just_those_to_the_masters_version(desired, held, names) -> None:
    """(The drain flag is a file's presence: its content is not compared.)"""

    def flag(listing: dict[str, Any]) -> dict[str, Any]:
        return {n: (True if n == "drain" else v) for n, v in listing.items()}

    after = flag(_apply(held, desired, plan(desired, held, names)))
    archived_of = {name: "job-" + name.rsplit("-", 1)[1] for name in names if name.startswith("archive/")}
    touched = set(names) | set(archived_of.values())
    assert {n: after.get(n) for n in names} == {n: flag(desired).get(n) for n in names}
    assert {n: v for n, v in after.items() if n not in touched} == {n: v for n, v in flag(held).items()
                                                                    if n not in touched}
    assert flag(_apply(held, desired, plan(desired, held))) == flag(desired)  # (everything, compared in full)
