"""gnt-backup import: the export defaults to the one named after the instance."""

from __future__ import annotations

import io

from ganeti.client import gnt_backup, runner
from tests.unit.test_cli_commands import following, submitted_op


def _import(*argv: str):
    fake, out, err = following(), io.StringIO(), io.StringIO()
    code = runner.run("gnt-backup", gnt_backup.COMMANDS, ["import", *argv], client_factory=lambda ctx: fake,
                      stdout=out, stderr=err)
    assert code == 0, out.getvalue() + err.getvalue()
    return submitted_op(fake)


def test_import_without_src_dir_uses_the_instance_name():
    """Ganeti's rule: no --src-dir, the export is named after the instance."""
    op = _import("-n", "node2.test", "web1.test")
    assert (op["mode"], op["src_path"], op["instance_name"]) == ("import", "web1.test", "web1.test")
    assert "src_node" not in op


def test_import_with_src_dir_and_node():
    op = _import("-n", "node2.test", "--src-node", "node3.test", "--src-dir", "old-web", "web1.test")
    assert (op["src_path"], op["src_node"]) == ("old-web", "node3.test")
