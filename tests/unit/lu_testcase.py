"""A base for the LU tests that run one-opcode jobs through a processor."""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from ganeti.jobs import model


class LUTestCase(SynchronousTestCase):
    """Runs opcodes as jobs of C{self.env} (a L{tests.unit.test_processor.Env})
    with C{self.rpc} as the node RPC; C{setUp} of a subclass sets both and
    C{self.next_id}, the job id before the first.

    @ivar log: the log messages of the last opcode run
    """

    env: Any
    rpc: Any
    next_id: int

    def execute_options(self) -> dict[str, Any]:
        """More keyword arguments of C{Env.execute}."""
        return {}

    def run_op(self, op: dict[str, Any]) -> model.QueuedOpCode:
        self.next_id += 1
        job = self.env.execute(self.next_id, [op], rpc_factory=lambda: self.rpc, **self.execute_options())
        qop: model.QueuedOpCode = job.ops[0]
        self.log = [entry[3] for entry in qop.log]
        return qop

    def ok(self, op: dict[str, Any]) -> Any:
        """Run C{op}, which must succeed; its result."""
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.SUCCESS, qop.result)
        return qop.result

    def follow(self, op: dict[str, Any]) -> list[model.QueuedJob]:
        """Run C{op}, which must succeed submitting follow-up jobs, then
        run those jobs in order, as LuxiD would (a job only after the jobs
        it depends on); the jobs run.  C{self.log}: the log messages of all
        their opcodes, in order; C{self.submitted}: the jobs as submitted.
        """
        submitted: list[list[dict[str, Any]]] = []
        first = self.next_id + 1000

        async def submit(jobs: list[list[dict[str, Any]]]) -> list[Any]:
            submitted.extend(jobs)
            return [[True, first + index] for index in range(len(jobs))]

        self.next_id += 1
        options = dict(self.execute_options(), submit_jobs=submit)
        job = self.env.execute(self.next_id, [op], rpc_factory=lambda: self.rpc, **options)
        qop: model.QueuedOpCode = job.ops[0]
        self.assertEqual(qop.status, model.SUCCESS, qop.result)
        self.assertEqual(qop.result["jobs"], [[True, first + index] for index in range(len(submitted))])
        self.submitted = submitted
        done: list[model.QueuedJob] = []
        log: list[str] = []
        for ops in submitted:
            for dep_op in ops:
                for dep, _statuses in dep_op.get("depends") or []:
                    self.assertLess(dep, 0, "only relative dependencies")
                    self.assertGreaterEqual(len(done) + dep, 0, "a dependency on a job submitted earlier")
            self.next_id += 1
            ran = self.env.execute(self.next_id, [dict(o, depends=None) for o in ops],
                                   rpc_factory=lambda: self.rpc, **self.execute_options())
            done.append(ran)
            log += [entry[3] for o in ran.ops for entry in o.log]
        self.log = log
        return done

    def verify_cluster(self, **params: Any) -> bool:
        """Run OP_CLUSTER_VERIFY and the jobs it submits; True when every
        job succeeded with C{True} (what C{gnt-cluster verify} decides)."""
        jobs = self.follow(dict({"OP_ID": "OP_CLUSTER_VERIFY"}, **params))
        return all(o.status == model.SUCCESS and o.result is True for job in jobs for o in job.ops)

    def error(self, op: dict[str, Any], kind: str = "OpPrereqError", code: str | None = None) -> str:
        """Run C{op}, which must fail with C{kind} (and error code C{code}); the message."""
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.ERROR, qop.result)
        self.assertEqual(qop.result[0], kind, qop.result)
        if code is not None:
            self.assertEqual(qop.result[1][1], code, qop.result)
        return str(qop.result[1][0])
