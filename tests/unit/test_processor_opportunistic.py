"""The processor's opportunistic locking and L{LogicalUnit.release_locks}.

LUs declare C{opportunistic_locks[level]}: the processor asks WConfD for
the free members only (guarded by a count), waiting pushed by lock changes,
and records what it got in C{lu.acquired}.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti.cmdlib.base import ALL_SET, LEVEL_NODE, LEVEL_NODE_RES, LogicalUnit
from ganeti.jobs import model
from ganeti.opcodes.typed import OpTestDelay
from tests.unit.test_processor import Env, registry
from tests.unit.wconfd_helpers import make_config

SEEN: dict[int, Any] = {}


def nodes(env: Env) -> list[str]:
    return sorted(env.config.nodes)


class Grab(LogicalUnit[OpTestDelay]):
    """Locks nodes (op["nodes"], or all) opportunistically, records what it
    got, keeps op["keep"] of them, then sleeps op["duration"]."""

    OP_ID = "OP_TEST_DELAY"
    REQ_BGL = False

    def expand_names(self) -> None:
        wanted = self.op.on_node_uuids
        self.needed_locks[LEVEL_NODE] = wanted if wanted else ALL_SET
        self.needed_locks[LEVEL_NODE_RES] = []
        if not self.op.no_locks:
            self.opportunistic_locks[LEVEL_NODE] = True
            self.opportunistic_locks_count[LEVEL_NODE] = self.op.repeat or 1

    def declare_locks(self, level: str) -> None:
        if level == LEVEL_NODE_RES:
            held = self.acquired.get(LEVEL_NODE)
            self.needed_locks[level] = ALL_SET if held is ALL_SET else list(held or [])

    async def exec_(self, feedback: Any) -> Any:
        job_id = self.ctx.job_id
        SEEN[job_id] = {"got": list(self.owned_locks(LEVEL_NODE))}
        if self.op.interruptible:  # keep only the first
            keep = sorted(self.owned_locks(LEVEL_NODE))[:1]
            await self.release_locks(LEVEL_NODE, keep=keep)
            await self.release_locks(LEVEL_NODE_RES, keep=keep)
            SEEN[job_id]["kept"] = [n for n, _m in await self.ctx.wconfd.list_locks(self.ctx.owner)]
        await self.ctx.sleep(self.op.duration)
        return sorted(self.owned_locks(LEVEL_NODE))


def grab(duration: float, uuids: list[str] | None = None, count: int = 1, narrow: bool = False,
         exclusive: bool = False) -> dict[str, Any]:
    op: dict[str, Any] = {"OP_ID": "OP_TEST_DELAY", "duration": duration, "repeat": count, "interruptible": narrow,
                          "no_locks": exclusive}
    if uuids:
        op["on_node_uuids"] = uuids
    return op


class OpportunisticTests(SynchronousTestCase):
    def setUp(self) -> None:
        SEEN.clear()
        self.env = Env(make_config(nodes=2, instances=0))
        self.table = registry(OP_TEST_DELAY=Grab)
        self.uuids = nodes(self.env)

    def start(self, job_id: int, op: dict[str, Any]) -> Any:
        return self.env.start(job_id, [op], registry=self.table)

    def test_takes_only_the_free_ones(self) -> None:
        first = self.start(1, grab(10, self.uuids[:2], exclusive=True))
        self.assertEqual(first.ops[0].status, model.RUNNING)
        second = self.start(2, grab(1))
        self.assertEqual(second.ops[0].status, model.RUNNING)
        self.assertEqual(SEEN[2]["got"], self.uuids[2:])
        held = [name for name, _mode in self.env.locks_of(second.owner)]
        self.assertIn("node-res/%s" % self.uuids[2], held)
        self.env.finish(second)
        self.assertEqual(second.ops[0].result, self.uuids[2:])

    def test_waits_until_one_is_free(self) -> None:
        first = self.start(1, grab(30, exclusive=True))
        second = self.start(2, grab(1))
        self.assertEqual(second.ops[0].status, model.WAITING)
        self.env.advance(20)
        self.assertEqual(second.ops[0].status, model.WAITING, "still nothing free after the timed attempts")
        self.env.finish(first)
        self.assertEqual(second.ops[0].status, model.RUNNING)
        self.assertEqual(sorted(SEEN[2]["got"]), self.uuids)
        self.env.finish(second)
        self.assertEqual(second.ops[0].status, model.SUCCESS)

    def test_count_is_all_or_nothing(self) -> None:
        first = self.start(1, grab(5, self.uuids[:2], exclusive=True))
        second = self.start(2, grab(1, count=2))
        self.assertEqual(second.ops[0].status, model.WAITING, "one free node is not enough")
        self.assertEqual([n for n, _m in self.env.locks_of(second.owner) if n.startswith("node/")], [])
        self.env.finish(first)
        self.env.finish(second)
        self.assertEqual(len(SEEN[2]["got"]), 3)

    def test_release_locks_keeps_what_is_asked(self) -> None:
        run = self.start(1, grab(5, narrow=True))
        keep = self.uuids[0]
        self.assertEqual(SEEN[1]["kept"], ["cluster/BGL", "node/%s" % keep, "node-res/%s" % keep])
        # what was released is free for others at once
        other = self.start(2, grab(1, self.uuids[1:], exclusive=True))
        self.assertEqual(other.ops[0].status, model.RUNNING)
        self.env.finish(run)
        self.assertEqual(run.ops[0].result, [keep])


class ReleaseAllSetTests(SynchronousTestCase):
    def test_a_whole_level_narrows_to_the_members_kept(self) -> None:
        class Narrow(LogicalUnit):
            OP_ID = "OP_TEST_DELAY"
            REQ_BGL = False

            def expand_names(self) -> None:
                self.needed_locks[LEVEL_NODE] = ALL_SET

            async def exec_(self, feedback: Any) -> Any:
                keep = sorted(self.cfg.nodes)[-1]
                await self.release_locks(LEVEL_NODE, keep=[keep])
                return [[n, m] for n, m in await self.ctx.wconfd.list_locks(self.ctx.owner)], keep

        env = Env(make_config(nodes=2, instances=0))
        job = env.execute(1, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}], registry=registry(OP_TEST_DELAY=Narrow))
        self.assertEqual(job.ops[0].status, model.SUCCESS, job.ops[0].result)
        locks, keep = job.ops[0].result
        self.assertEqual(locks, [["cluster/BGL", "shared"], ["node/%s" % keep, "exclusive"]])
