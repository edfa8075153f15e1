"""Tests for L{ganeti.jobs.processor}: a real WConfD in memory, no sockets.

Each job gets its own client connection to one L{WConfdService} over an
L{twisted.test.iosim} pipe; one L{Clock} drives WConfD, the processors and
the LUs' sleeps.  L{Env} is also used by the LU tests (test_cmdlib).
"""

from __future__ import annotations

import copy
from typing import Any, Coroutine

import attrs
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.cmdlib import REGISTRY
from ganeti.cmdlib.base import LogicalUnit
from ganeti.cmdlib.test import LUTestDelay
from ganeti.config.bootstrap import DEFAULT_HVPARAMS
from ganeti.jobs import model
from ganeti.jobs.model import QueuedJob
from ganeti.jobs.processor import CANCELED_RESULT, KILLED_RESULT, PRECEDING_FAILED, WAITING_SAVE_DELAY, Processor
from ganeti.locking import Owner
from ganeti.objects import ConfigData
from ganeti.rpc.contract import Runner
from tests.unit.wconfd_helpers import BGL, Wire, job, make_config, make_service

#: 2023-11-14, so that timestamps look like real ones
START = 1_700_000_000.0


def delay(duration: float = 0.001, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_TEST_DELAY", "duration": duration}, **params)


def group_add(name: str, **params: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_GROUP_ADD", "group_name": name}, **params)


@attrs.define
class Run:
    """One job being processed."""

    job: QueuedJob
    processor: Processor
    owner: Owner
    wire: Wire
    saves: list[dict[str, Any]]
    done: Deferred

    @property
    def ops(self) -> list[model.QueuedOpCode]:
        return self.job.ops


class HooksAnswering:
    """A job's node RPC client that answers C{hooks_runner} itself: the LU
    tests count the other calls (the hooks have their own tests)."""

    def __init__(self, rpc: Any, env: Env) -> None:
        self._rpc = rpc
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rpc, name)

    async def run(self, nodes: Any, call: Any, **kwargs: Any) -> Any:
        if call.procedure != "hooks_runner":
            return await self._rpc.run(nodes, call, **kwargs)
        from ganeti.rpc import RpcResult

        offline = set(kwargs.get("offline") or ())
        results = {}
        for name in dict(nodes):
            self._env.hook_calls.append((name, list(call.args)))
            if name in offline:
                results[name] = RpcResult.failure(name, "node offline", offline=True)
            else:
                results[name] = RpcResult(name, True, self._env.hook_answer(name, *call.args))
        return results


class Env:
    """A WConfD on MemoryStorage and a Clock, and jobs connected to it."""

    def __init__(self, config: ConfigData | None = None) -> None:
        #: the hooks_runner calls of the jobs: (node, [hpath, phase, env])
        self.hook_calls: list[tuple[str, list[Any]]] = []
        #: C{(node, hpath, phase, env) -> [[script, status, output], ...]}
        self.hook_answer: Any = lambda node, hpath, phase, env: []
        self.clock = MemoryReactorClock()
        self.clock.advance(START)
        self.config = config if config is not None else make_config(nodes=2, instances=2)
        self.service = make_service(self.config, clock=self.clock)
        self.wires: list[Wire] = []
        self.admin = self.connect()

    def connect(self) -> Wire:
        wire = Wire.connect(self.service)
        self.wires.append(wire)
        return wire

    def settle(self) -> None:
        """Move bytes on every connection until all are quiet.

        One exchange per connection in turn, so that jobs interleave.
        """
        for _ in range(100000):
            moved = False
            for wire in self.wires:
                moved = wire.pump.pump() or moved
            if not moved:
                return
        raise AssertionError("connections never became quiet")

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def call(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run a client call on the admin connection and return its result."""
        d = ensureDeferred(work)
        self.settle()
        results: list[Any] = []
        d.addBoth(results.append)
        assert results, "the call did not finish"
        if isinstance(results[0], Exception) or hasattr(results[0], "raiseException"):
            results[0].raiseException()
        return results[0]

    def read_config(self) -> ConfigData:
        return self.call(self.admin.client.read_config())

    def start(self, job_id: int, ops: list[Any], settle: bool = True, **options: Any) -> Run:
        """Start processing a new job with C{ops}; returns at once.

        With C{settle=False} nothing moves yet: jobs started that way run
        interleaved once the test calls L{settle}.
        """
        wire = self.connect()
        owner = job(job_id)
        queued = QueuedJob.new(job_id, ops, when=self.clock.seconds())
        saves: list[dict[str, Any]] = []

        def save(current: QueuedJob) -> None:
            saves.append(copy.deepcopy(current.to_dict()))

        factory = options.get("rpc_factory") or (lambda: DelayNodes(self.clock))
        options["rpc_factory"] = lambda: HooksAnswering(factory(), self)
        processor = Processor(queued, wire.client, owner, save=save, clock=self.clock, **options)
        done = ensureDeferred(processor.run())
        if settle:
            self.settle()
        return Run(queued, processor, owner, wire, saves, done)

    def finish(self, run: Run, step: float = 1.0, limit: int = 1000) -> QueuedJob:
        """Let time pass until C{run} is done."""
        for _ in range(limit):
            if run.done.called:
                break
            self.advance(step)
        assert run.done.called, "job %d did not finish" % run.job.id
        return run.job

    def execute(self, job_id: int, ops: list[Any], **options: Any) -> QueuedJob:
        return self.finish(self.start(job_id, ops, **options))

    def locks_of(self, owner: Owner) -> list[tuple[str, str]]:
        return self.service.locks.owned(owner)

    def pending(self) -> list[tuple[int, Owner, list[tuple[str, str]]]]:
        return self.service.locks.pending()


class DelayNodes(Runner):
    """Node RPC that knows only C{test_delay}: every node sleeps on C{clock}.

    @ivar calls: C{(procedure, node names, args)} of every call
    """

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.calls: list[tuple[str, list[str], list[Any]]] = []

    async def call(self, nodes: Any, procedure: str, args: Any = (), **kwargs: Any) -> dict[str, Any]:
        from twisted.internet.task import deferLater

        from ganeti.rpc import RpcResult

        names = list(dict(nodes))
        self.calls.append((procedure, names, list(args)))
        if procedure != "test_delay":
            return {name: RpcResult.failure(name, "unknown procedure %s" % procedure) for name in names}
        await deferLater(self.clock, args[0], lambda: None)
        return {name: RpcResult(name, True, None) for name in names}

    async def close(self) -> None:
        pass


class ExclusiveDelay(LUTestDelay):
    """A test delay that wants the BGL exclusively (like node add/remove)."""

    REQ_BGL = True

    def uses_bgl(self) -> bool:
        return True


class Broken(LogicalUnit):
    OP_ID = "OP_TEST_DELAY"
    REQ_BGL = False

    async def exec_(self, feedback: Any) -> Any:
        raise ValueError("bug in the LU")


def registry(**overrides: Any) -> dict[str, type]:
    table = dict(REGISTRY)
    table.update(overrides)
    return table


class ProcessorTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.env = Env()


class TestDelayTests(ProcessorTestCase):
    def test_logs_iterations_and_succeeds(self) -> None:
        """Ganeti's job-1892: C{repeat=2} logs iterations 0/1 and 1/1."""
        run = self.env.start(1, [delay(0.5, repeat=2, no_locks=False)])
        (op,) = run.ops
        self.assertEqual(op.status, model.RUNNING)
        master = "node/" + self.env.config.cluster.master_node if hasattr(self.env, "config") else None
        locks = self.env.locks_of(run.owner)
        self.assertEqual(locks[0], (BGL, "shared"))
        self.assertEqual([(name.split("/")[0], mode) for name, mode in locks[1:]], [("node", "exclusive")])
        if master:
            self.assertEqual(locks[1][0], master)
        self.assertEqual([e[3] for e in op.log], [" - INFO: Test delay iteration 0/1"])
        self.env.advance(0.5)
        self.assertEqual(len(op.log), 2)
        self.assertFalse(run.done.called)
        self.env.advance(0.5)
        self.successResultOf(run.done)
        self.assertEqual(op.status, model.SUCCESS)
        self.assertIsNone(op.result)
        self.assertEqual(
            [(e[0], e[2], e[3]) for e in op.log],
            [(1, "message", " - INFO: Test delay iteration 0/1"), (2, "message", " - INFO: Test delay iteration 1/1")],
        )
        self.assertEqual(model.ts_seconds(op.end_timestamp) - model.ts_seconds(op.exec_timestamp), 1.0)
        self.assertEqual(self.env.locks_of(run.owner), [])

    def test_every_final_save_has_the_end_timestamp(self) -> None:
        """A client that sees the job finished also sees when it ended: the
        first save with a final status carries the end timestamp, even while
        the job still releases its locks."""
        run = self.env.start(1, [delay(0.5, no_locks=False), delay(0.5, no_locks=False)])
        self.env.finish(run)
        final = [QueuedJob.from_dict(saved) for saved in run.saves]
        final = [saved for saved in final if saved.finalized]
        self.assertTrue(final)
        self.assertTrue(all(saved.end_timestamp is not None for saved in final))
        self.assertEqual(final[0].end_timestamp, run.job.end_timestamp)

    def test_a_burst_of_log_lines_is_one_write(self) -> None:
        """Log lines do not make the LU wait for a write each: the lines an
        LU logs before it next waits reach the job file in one save."""

        class Chatty(LUTestDelay):
            async def exec_(self, feedback: Any) -> Any:
                for n in range(3):
                    await self.log_info("line %d", n)
                await self.ctx.sleep(1)
                await self.log_info("after the sleep")

        run = self.env.start(1, [delay(1)], registry=registry(OP_TEST_DELAY=Chatty))
        self.env.advance(0)
        logged = [len(saved["ops"][0]["log"]) for saved in run.saves]
        self.assertIn(3, logged)
        self.assertNotIn(1, logged)
        self.assertNotIn(2, logged)
        self.env.finish(run)
        self.assertEqual(run.job.status, model.SUCCESS)
        final = run.saves[-1]["ops"][0]["log"]
        self.assertEqual([entry[3] for entry in final],
                         [" - INFO: line 0", " - INFO: line 1", " - INFO: line 2", " - INFO: after the sleep"])

    def test_no_locks_takes_nothing(self) -> None:
        run = self.env.start(1, [delay(3)])
        self.assertEqual(run.ops[0].status, model.RUNNING)
        self.assertEqual(self.env.locks_of(run.owner), [])
        self.assertNotIn(run.owner, self.env.service.locks.owners())
        self.env.finish(run)
        self.assertEqual(run.job.status, model.SUCCESS)


class ValidationTests(ProcessorTestCase):
    def test_invalid_opcode_fails_before_any_lock(self) -> None:
        run = self.env.start(1, [{"OP_ID": "OP_TEST_DELAY", "repeat": 1}, delay(0, no_locks=False)])
        self.successResultOf(run.done)
        first, second = run.ops
        self.assertEqual(first.status, model.ERROR)
        self.assertEqual(
            first.result, ["OpPrereqError", ["OP_TEST_DELAY: parameter 'duration' is required", "wrong_input"]]
        )
        self.assertEqual(second.status, model.ERROR)
        self.assertEqual(second.result, ["OpExecError", [PRECEDING_FAILED]])
        self.assertIsNone(first.exec_timestamp)
        self.assertIsNotNone(first.end_timestamp)
        self.assertNotIn(run.owner, self.env.service.locks.owners())
        self.assertEqual(run.job.status, model.ERROR)

    def test_later_invalid_opcode(self) -> None:
        """Earlier opcodes run; the invalid one fails when its turn comes."""
        run = self.env.start(1, [delay(1), {"OP_ID": "OP_NO_SUCH_THING"}, delay(1)])
        self.env.finish(run)
        self.assertEqual([op.status for op in run.ops], [model.SUCCESS, model.ERROR, model.ERROR])
        self.assertEqual(run.ops[1].result, ["OpPrereqError", ["OP_NO_SUCH_THING: unknown opcode", "wrong_input"]])

    def test_wrong_type_names_the_parameter(self) -> None:
        run = self.env.start(1, [delay("soon")])
        self.successResultOf(run.done)
        self.assertIn("parameter 'duration'", run.ops[0].result[1][0])


class FailureTests(ProcessorTestCase):
    def test_failing_middle_opcode(self) -> None:
        """Op 2 fails: op 3 errors too, nothing more changes, no lock stays held."""
        run = self.env.start(1, [group_add("g1"), group_add("g1"), group_add("g2")])
        self.successResultOf(run.done)
        first, second, third = run.ops
        self.assertEqual(first.status, model.SUCCESS)
        self.assertEqual(second.status, model.ERROR)
        (uuid,) = [g.uuid for g in self.env.read_config().nodegroups.values() if g.name == "g1"]
        self.assertEqual(
            second.result,
            [
                "OpPrereqError",
                ["Desired group name 'g1' already exists as a node group (UUID: %s)" % uuid, "already_exists"],
            ],
        )
        self.assertEqual(third.status, model.ERROR)
        self.assertEqual(third.result, ["OpExecError", [PRECEDING_FAILED]])
        self.assertIsNone(third.start_timestamp)
        self.assertEqual(sorted(g.name for g in self.env.read_config().nodegroups.values()), ["default", "g1"])
        self.assertEqual(self.env.call(self.env.admin.client.list_locks(run.owner)), [])
        self.assertFalse(self.env.call(self.env.admin.client.has_pending_request(run.owner)))
        self.assertEqual(run.job.status, model.ERROR)
        self.assertIsNotNone(run.job.end_timestamp)

    def test_unexpected_exception_is_an_exec_error(self) -> None:
        run = self.env.start(1, [delay(0), delay(0)], registry=registry(OP_TEST_DELAY=Broken))
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].result, ["OpExecError", ["bug in the LU"]])
        self.assertEqual(run.ops[1].result, ["OpExecError", [PRECEDING_FAILED]])
        self.flushLoggedErrors(ValueError)

    def test_prereq_error_after_locks_releases_them(self) -> None:
        run = self.env.start(1, [{"OP_ID": "OP_GROUP_REMOVE", "group_name": "default"}])
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].result[0], "OpPrereqError")
        self.assertEqual(run.ops[0].result[1][1], errors.ECODE_STATE)
        self.assertIsNotNone(run.ops[0].exec_timestamp)
        self.assertEqual(self.env.locks_of(run.owner), [])

    def test_dry_run_only_checks(self) -> None:
        run = self.env.start(1, [group_add("g1", dry_run=True)])
        self.successResultOf(run.done)
        self.assertEqual(run.ops[0].status, model.SUCCESS)
        self.assertEqual([g.name for g in self.env.read_config().nodegroups.values()], ["default"])


class ContentionTests(ProcessorTestCase):
    def test_exclusive_bgl_runs_one_after_the_other(self) -> None:
        table = registry(OP_TEST_DELAY=ExclusiveDelay)
        a = self.env.start(1, [delay(5)], registry=table, lock_timeouts=())
        b = self.env.start(2, [delay(5)], registry=table, lock_timeouts=())
        self.assertEqual(a.ops[0].status, model.RUNNING)
        self.assertEqual(b.ops[0].status, model.WAITING)
        self.assertEqual(self.env.locks_of(a.owner), [(BGL, "exclusive")])
        self.assertEqual([(p, o) for p, o, _ in self.env.pending()], [(0, b.owner)])
        self.env.advance(5)
        self.successResultOf(a.done)
        self.assertEqual(b.ops[0].status, model.RUNNING)
        self.assertEqual(self.env.locks_of(b.owner), [(BGL, "exclusive")])
        self.assertGreaterEqual(b.ops[0].exec_timestamp, a.ops[0].end_timestamp)
        self.env.advance(5)
        self.successResultOf(b.done)
        self.assertEqual(b.job.status, model.SUCCESS)
        self.assertEqual(model.ts_seconds(b.ops[0].end_timestamp) - START, 10.0)

    def test_shared_bgl_runs_together(self) -> None:
        """Off the master, test delays take only the BGL, shared: neither waits."""
        a = self.env.start(1, [delay(5, no_locks=False, on_master=False)])
        b = self.env.start(2, [delay(5, no_locks=False, on_master=False)])
        self.assertEqual([a.ops[0].status, b.ops[0].status], [model.RUNNING, model.RUNNING])
        self.env.advance(5)
        self.successResultOf(a.done)
        self.successResultOf(b.done)
        self.assertEqual([a.ops[0].status, b.ops[0].status], [model.SUCCESS, model.SUCCESS])

    def test_delays_on_the_master_take_turns_on_its_node_lock(self) -> None:
        a = self.env.start(1, [delay(5, no_locks=False)])
        b = self.env.start(2, [delay(5, no_locks=False)])
        self.assertEqual([a.ops[0].status, b.ops[0].status], [model.RUNNING, model.WAITING])
        self.env.advance(5)
        self.successResultOf(a.done)
        self.assertEqual(b.ops[0].status, model.RUNNING)
        self.env.advance(5)
        self.successResultOf(b.done)

    def recorded_requests(self) -> list[list[tuple[str, str]]]:
        """The lock requests the job processes send to WConfD, from now on."""
        from ganeti.wconfd.client import WConfdClient

        requests: list[list[tuple[str, str]]] = []
        acquire = WConfdClient.acquire

        async def recording(client: WConfdClient, owner: Owner, request: Any, *args: Any, **kwargs: Any) -> None:
            requests.append([tuple(pair) for pair in request])
            await acquire(client, owner, request, *args, **kwargs)

        self.patch(WConfdClient, "acquire", recording)
        return requests

    def test_the_levels_of_an_lu_are_one_request(self) -> None:
        """An LU that computes no level from the locks it holds (no declare_locks of its own) asks for the BGL
        and its nodes at once: one wait, one round trip; a job waiting for a node holds no BGL meanwhile."""
        requests = self.recorded_requests()
        a = self.env.start(1, [delay(5, no_locks=False)])
        b = self.env.start(2, [delay(5, no_locks=False)])
        master = "node/" + self.env.config.cluster.master_node
        self.assertEqual(requests, [[(BGL, "shared"), (master, "exclusive")]] * 2)
        self.assertEqual(self.env.locks_of(b.owner), [])
        self.assertEqual([(o, sorted(r)) for _p, o, r in self.env.pending()],
                         [(b.owner, [(BGL, "shared"), (master, "exclusive")])])
        self.env.advance(5)
        self.assertEqual(self.env.locks_of(b.owner), [(BGL, "shared"), (master, "exclusive")])
        self.env.advance(5)
        self.successResultOf(b.done)
        self.assertEqual(set(b.ops[0].extra["lock_wait"]), {"cluster", "node"})
        self.assertEqual(b.ops[0].extra["lock_wait"]["node"], 5.0)
        self.successResultOf(a.done)

    def test_an_lu_computing_its_locks_asks_level_by_level(self) -> None:
        class Computing(LUTestDelay):
            def declare_locks(self, level: str) -> None:  # (as an LU whose nodes follow its instances)
                pass

        requests = self.recorded_requests()
        run = self.env.start(1, [delay(1, no_locks=False)], registry=registry(OP_TEST_DELAY=Computing))
        master = "node/" + self.env.config.cluster.master_node
        self.assertEqual(requests, [[(BGL, "shared")], [(master, "exclusive")]])
        self.env.finish(run)
        self.assertEqual(run.job.status, model.SUCCESS)

    def test_lock_timeouts_raise_priority_then_block(self) -> None:
        a = self.env.start(1, [delay(10)], registry=registry(OP_TEST_DELAY=ExclusiveDelay), lock_timeouts=())
        b = self.env.start(2, [delay(1, no_locks=False)], lock_timeouts=(1.0, 2.0))
        self.assertEqual([(p, o) for p, o, _ in self.env.pending()], [(0, b.owner)])
        self.env.advance(1)
        self.assertEqual(b.ops[0].priority, -1)
        self.assertEqual([(p, o) for p, o, _ in self.env.pending()], [(-1, b.owner)])
        self.env.advance(2)
        self.assertEqual(b.ops[0].priority, -2)
        self.assertEqual([(p, o) for p, o, _ in self.env.pending()], [(-2, b.owner)])
        self.env.advance(100)  # blocking now: no more timeouts
        self.assertEqual(b.ops[0].priority, -2)
        self.successResultOf(a.done)
        self.env.finish(b)
        self.assertEqual(b.job.status, model.SUCCESS)
        self.assertEqual(b.ops[0].input.get("priority", 0), 0)  # escalation is not a resubmission

    def test_new_lock_waits_for_the_level_lock(self) -> None:
        """OP_GROUP_ADD creates its group's lock; a holder of the whole level delays it."""
        admin = job(99)
        blockers = self.env.call(self.env.admin.client.try_update_locks(admin, [("nodegroup/[lockset]", "shared")]))
        self.assertEqual(blockers, [])
        run = self.env.start(1, [group_add("g1")], lock_timeouts=(1.0,))
        self.assertEqual(run.ops[0].status, model.WAITING)
        self.env.advance(3)  # the timed attempt gives up, the blocking one keeps trying
        self.assertEqual(run.ops[0].status, model.WAITING)
        self.assertEqual(run.ops[0].priority, -1)
        self.env.call(self.env.admin.client.free_locks(admin))
        self.env.finish(run, step=0.5)
        self.assertEqual(run.job.status, model.SUCCESS, run.ops[0].result)
        self.assertIn("g1", [g.name for g in self.env.read_config().nodegroups.values()])
        self.assertEqual(self.env.locks_of(run.owner), [])

    def test_change_priority_of_a_waiting_request(self) -> None:
        a = self.env.start(1, [delay(10)], registry=registry(OP_TEST_DELAY=ExclusiveDelay), lock_timeouts=())
        b = self.env.start(2, [delay(1, no_locks=False), delay(1)], lock_timeouts=())
        self.assertFalse(a.processor.change_priority(-10))  # running: nothing pending
        self.assertTrue(b.processor.change_priority(-10))
        self.env.settle()
        self.assertEqual([op.priority for op in b.ops], [-10, -10])
        self.assertEqual(b.ops[1].input["priority"], -10)
        self.assertEqual([(p, o) for p, o, _ in self.env.pending()], [(-10, b.owner)])
        self.assertFalse(b.processor.change_priority(99))
        self.env.finish(b)
        self.assertEqual(b.job.status, model.SUCCESS)


class CancelTests(ProcessorTestCase):
    def test_cancel_while_waiting_for_locks(self) -> None:
        table = registry(OP_TEST_DELAY=ExclusiveDelay)
        a = self.env.start(1, [delay(10)], registry=table, lock_timeouts=())
        b = self.env.start(2, [delay(1), delay(1)], registry=table, lock_timeouts=())
        self.assertEqual(b.ops[0].status, model.WAITING)
        self.assertFalse(a.processor.request_cancel())
        self.assertTrue(b.processor.request_cancel())
        self.assertEqual([op.status for op in b.ops], [model.CANCELING, model.CANCELING])
        self.env.settle()
        self.successResultOf(b.done)
        self.assertEqual([op.status for op in b.ops], [model.CANCELED, model.CANCELED])
        self.assertEqual([op.result for op in b.ops], [CANCELED_RESULT, CANCELED_RESULT])
        self.assertEqual(b.job.status, model.CANCELED)
        self.assertIsNotNone(b.job.end_timestamp)
        self.assertEqual(self.env.pending(), [])
        self.assertEqual(self.env.locks_of(b.owner), [])
        self.assertIn(model.CANCELING, [s["ops"][0]["status"] for s in b.saves])
        self.assertFalse(b.processor.request_cancel())
        self.env.finish(a)
        self.assertEqual(a.job.status, model.SUCCESS)

    def test_cancel_during_a_lock_timeout_attempt(self) -> None:
        a = self.env.start(1, [delay(10)], registry=registry(OP_TEST_DELAY=ExclusiveDelay), lock_timeouts=())
        b = self.env.start(2, [delay(1, no_locks=False)], lock_timeouts=(5.0,))
        self.env.advance(1)
        self.assertTrue(b.processor.request_cancel())
        self.env.settle()
        self.assertEqual(b.job.status, model.CANCELED)
        self.assertEqual(self.env.pending(), [])
        self.env.advance(10)  # the cancelled attempt's timer does nothing
        self.assertEqual(b.job.status, model.CANCELED)
        self.successResultOf(a.done)

    def test_cancel_before_start(self) -> None:
        wire = self.env.connect()
        queued = QueuedJob.new(3, [delay(1), delay(1)], when=self.env.clock.seconds())
        processor = Processor(queued, wire.client, job(3), save=lambda j: None, clock=self.env.clock)
        self.assertTrue(processor.request_cancel())
        d = ensureDeferred(processor.run())
        self.env.settle()
        self.successResultOf(d)
        self.assertEqual(queued.status, model.CANCELED)
        self.assertTrue(all(op.start_timestamp is None for op in queued.ops))

    def test_running_opcode_cannot_be_cancelled(self) -> None:
        run = self.env.start(1, [delay(5), delay(5)])
        self.assertFalse(run.processor.request_cancel())
        self.env.finish(run)
        self.assertEqual(run.job.status, model.SUCCESS)

    def test_kill_stops_a_running_opcode(self) -> None:
        """kill (SIGTERM in the job process) ends even a running opcode: the
        job is canceled with the reason, its locks are free, others run."""
        table = registry(OP_TEST_DELAY=ExclusiveDelay)
        run = self.env.start(1, [delay(3600), delay(1)], registry=table, lock_timeouts=())
        self.env.advance(1)
        self.assertEqual(run.ops[0].status, model.RUNNING)
        self.assertNotEqual(self.env.locks_of(run.owner), [])
        other = self.env.start(2, [delay(1)], registry=table, lock_timeouts=())
        self.assertEqual(other.ops[0].status, model.WAITING)
        self.assertTrue(run.processor.kill())
        self.env.settle()
        self.successResultOf(run.done)
        self.assertEqual([op.status for op in run.ops], [model.CANCELED, model.CANCELED])
        self.assertEqual([op.result for op in run.ops], [KILLED_RESULT, KILLED_RESULT])
        self.assertIn(KILLED_RESULT, [entry[3] for entry in run.ops[0].log])
        self.assertEqual(run.saves[-1]["ops"][0]["status"], model.CANCELED)
        self.assertIsNotNone(run.job.end_timestamp)
        self.assertEqual(self.env.locks_of(run.owner), [])
        self.assertFalse(run.processor.kill())
        self.env.finish(other)
        self.assertEqual(other.job.status, model.SUCCESS)

    def test_kill_while_waiting_for_locks(self) -> None:
        table = registry(OP_TEST_DELAY=ExclusiveDelay)
        blocker = self.env.start(1, [delay(10)], registry=table, lock_timeouts=())
        run = self.env.start(2, [delay(1)], registry=table, lock_timeouts=())
        self.assertTrue(run.processor.kill("Job canceled by request (killed): because"))
        self.env.settle()
        self.assertEqual(run.job.status, model.CANCELED)
        self.assertEqual(run.ops[0].result, "Job canceled by request (killed): because")
        self.assertEqual(self.env.pending(), [])
        self.env.finish(blocker)

    def test_cancel_between_opcodes(self) -> None:
        """Once op 1 is done, the queued op 2 can still be cancelled."""
        table = registry(OP_TEST_DELAY=ExclusiveDelay)
        blocker = self.env.start(1, [delay(10)], registry=table, lock_timeouts=())
        run = self.env.start(2, [delay(1), delay(1, no_locks=False)], lock_timeouts=())
        self.env.advance(1)
        self.assertEqual([op.status for op in run.ops], [model.SUCCESS, model.WAITING])
        self.assertTrue(run.processor.request_cancel())
        self.env.settle()
        self.assertEqual([op.status for op in run.ops], [model.SUCCESS, model.CANCELED])
        self.assertEqual(run.job.status, model.CANCELED)
        self.env.finish(blocker)


class JobFileTests(ProcessorTestCase):
    def test_job_dict_after_run(self) -> None:
        run = self.env.start(
            7,
            [
                delay(0.25, repeat=2),
                {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["a"]},
                delay(0.25, repeat=1),
            ],
        )
        job = self.env.finish(run, step=0.25)
        data = serializer.loads(serializer.dumps(job.to_dict()))
        self.assertEqual(job.status, model.SUCCESS)
        self.assertEqual(data["id"], 7)
        self.assertEqual([op["status"] for op in data["ops"]], ["success"] * 3)
        serials = [entry[0] for op in data["ops"] for entry in op["log"]]
        self.assertEqual(serials, [1, 2, 3])
        self.assertEqual([len(op["log"]) for op in data["ops"]], [2, 0, 1])
        stamps = [data["received_timestamp"]]
        for op in data["ops"]:
            stamps += [op["start_timestamp"], op["exec_timestamp"], op["end_timestamp"]]
        stamps.append(data["end_timestamp"])
        self.assertNotIn(None, stamps)
        self.assertEqual(stamps, sorted(stamps))
        self.assertEqual(data["start_timestamp"], data["ops"][0]["start_timestamp"])
        self.assertEqual(data["ops"][0]["input"]["reason"][-1][0], "gnt:opcode:test_delay")
        self.assertEqual(data["ops"][0]["input"]["duration"], 0.25)
        self.assertNotIn("on_master", data["ops"][0]["input"])  # the input stays as submitted
        self.assertEqual(QueuedJob.from_dict(data).to_dict(), data)
        self.assertEqual(run.saves[-1], job.to_dict())

    def test_saved_after_every_change(self) -> None:
        """Locks granted at once: the job file goes from queued straight to running."""
        run = self.env.start(1, [delay(1, repeat=2, no_locks=False)])
        self.env.finish(run)
        states = [(s["ops"][0]["status"], len(s["ops"][0]["log"])) for s in run.saves]
        for expected in [("running", 0), ("running", 1), ("running", 2), ("success", 2)]:
            self.assertIn(expected, states)
        self.assertNotIn(("waiting", 0), states)
        self.assertEqual(states, sorted(states, key=lambda s: (model.status_index(s[0]), s[1])))

    def test_waiting_is_saved_when_the_locks_take_a_while(self) -> None:
        table = registry(OP_TEST_DELAY=ExclusiveDelay)
        a = self.env.start(1, [delay(10)], registry=table, lock_timeouts=())
        b = self.env.start(2, [delay(1)], registry=table, lock_timeouts=())
        self.assertEqual(b.ops[0].status, model.WAITING)
        self.assertNotIn("waiting", [s["ops"][0]["status"] for s in b.saves])
        self.env.advance(WAITING_SAVE_DELAY)
        self.assertEqual(b.saves[-1]["ops"][0]["status"], "waiting")
        self.env.finish(a)
        self.env.finish(b)
        self.assertEqual(b.job.status, model.SUCCESS)

    def test_slow_saves_do_not_overlap(self) -> None:
        wire = self.env.connect()
        queued = QueuedJob.new(5, [delay(1, repeat=3, on_master=False)], when=self.env.clock.seconds())
        pending: list[Deferred] = []
        active = [0]

        def save(current: QueuedJob) -> Deferred:
            self.assertEqual(active[0], 0)
            active[0] += 1
            d: Deferred = Deferred()

            def done(_: Any) -> None:
                active[0] -= 1

            d.addCallback(done)
            pending.append(d)
            return d

        processor = Processor(queued, wire.client, job(5), save=save, clock=self.env.clock)
        finished = ensureDeferred(processor.run())
        for _ in range(100):
            self.env.advance(1)
            if finished.called:
                break
            while pending:
                pending.pop(0).callback(None)
        self.successResultOf(finished)
        self.assertEqual(queued.status, model.SUCCESS)
        self.assertEqual(len(queued.ops[0].log), 3)


class ClusterSetParamsTests(ProcessorTestCase):
    def test_changes_land_in_the_config_and_merge_params(self) -> None:
        op = {
            "OP_ID": "OP_CLUSTER_SET_PARAMS",
            "candidate_pool_size": 3,
            "max_running_jobs": 7,
            "beparams": {"maxmem": 256},
            "hvparams": {"fake": {"migration_mode": "non-live"}},
        }
        job = self.env.execute(1, [op])
        self.assertEqual(job.status, model.SUCCESS, job.ops[0].result)
        cluster = self.env.read_config().cluster
        self.assertEqual((cluster.candidate_pool_size, cluster.max_running_jobs), (3, 7))
        self.assertEqual(cluster.beparams["default"]["maxmem"], 256)
        self.assertEqual(cluster.beparams["default"]["vcpus"], 1, "other defaults are kept")
        self.assertEqual(cluster.hvparams["fake"]["migration_mode"], "non-live")

    def test_a_hypervisor_enabled_later_gets_the_default_params(self) -> None:
        """As at cluster init: enabling kvm gives it kvm's default
        parameters (not an empty dict), under the ones given with it."""
        op = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "enabled_hypervisors": ["fake", "kvm"],
              "hvparams": {"kvm": {"migration_port": 9100, "kvm_path": "/opt/qemu"}}}
        job = self.env.execute(1, [op])
        self.assertEqual(job.status, model.SUCCESS, job.ops[0].result)
        kvm = self.env.read_config().cluster.hvparams["kvm"]
        self.assertEqual((kvm["migration_port"], kvm["kvm_path"]), (9100, "/opt/qemu"))
        self.assertEqual((kvm["acpi"], kvm["serial_console"], kvm["migration_mode"]), (True, True, "live"))
        self.assertEqual(set(kvm), set(DEFAULT_HVPARAMS["kvm"]))

    def test_refuses_to_disable_what_instances_use_and_changes_nothing(self) -> None:
        before = self.env.read_config().cluster
        job = self.env.execute(1, [{"OP_ID": "OP_CLUSTER_SET_PARAMS", "enabled_hypervisors": ["kvm"]}])
        self.assertEqual(job.status, model.ERROR)
        self.assertIn("still used by instances", str(job.ops[0].result))
        self.assertEqual(self.env.read_config().cluster, before)

    def test_bad_mac_prefix_is_a_prerequisite_error(self) -> None:
        job = self.env.execute(1, [{"OP_ID": "OP_CLUSTER_SET_PARAMS", "mac_prefix": "zz:00"}])
        self.assertEqual(job.ops[0].result[0], "OpPrereqError")
