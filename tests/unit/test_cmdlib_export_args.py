"""OP_BACKUP_EXPORT's refusals of arguments (L{ganeti.cmdlib.backup}):
C{zero_free_space} after Ganeti's checks, the zeroing timeouts without it,
and a forthcoming instance; nothing reaches the nodes."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from tests.unit.instance_fakes import N2, N3
from tests.unit.test_cmdlib_instance import WEB, InstanceTestCase, create


def export(**extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_BACKUP_EXPORT", "instance_name": WEB, "target_node": N3, "mode": "local"}, **extra)


class ExportArgumentTests(InstanceTestCase):
    def test_zeroing(self) -> None:
        self.ok(create(pnode=N2, start=False))
        self.rpc.calls.clear()
        for opcode, text in [
            (export(zero_free_space=True), "does not make sense unless compression is used"),
            (export(zero_free_space=True, compress="gzip", shutdown=False),
             "Unless the instance is shut down, zeroing cannot be used"),
            (export(zero_free_space=True, compress="gzip"), "helper VM from the cluster's zeroing image"),
            (export(zeroing_timeout_fixed=10), "only with the --zero-free-space option"),
        ]:
            self.assertIn(text, self.error(opcode, code=errors.ECODE_INVAL), opcode)
        self.assertEqual(self.rpc.calls, [])

    def test_forthcoming_instance(self) -> None:
        self.ok(create(pnode=N2, forthcoming=True))
        self.rpc.calls.clear()
        self.assertIn("forthcoming instances are not supported", self.error(export(), code=errors.ECODE_STATE))
        self.assertEqual(self.rpc.calls, [])
