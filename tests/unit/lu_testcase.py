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

    def error(self, op: dict[str, Any], kind: str = "OpPrereqError", code: str | None = None) -> str:
        """Run C{op}, which must fail with C{kind} (and error code C{code}); the message."""
        qop = self.run_op(op)
        self.assertEqual(qop.status, model.ERROR, qop.result)
        self.assertEqual(qop.result[0], kind, qop.result)
        if code is not None:
            self.assertEqual(qop.result[1][1], code, qop.result)
        return str(qop.result[1][0])
