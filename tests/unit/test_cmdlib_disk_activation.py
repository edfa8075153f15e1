"""OP_INSTANCE_ACTIVATE_DISKS and OP_INSTANCE_DEACTIVATE_DISKS
(L{ganeti.cmdlib.disk_activation}) through the processor on an in-memory
WConfD, against fake nodes that record which disks are assembled."""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors, opcodes
from ganeti.cmdlib import disk_activation
from ganeti.cmdlib.base import LEVEL_INSTANCE, LEVEL_NODE
from ganeti.opcodes import typed
from tests.unit.instance_fakes import N2, N3, FakeNodes, _Refused, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

WEB = "web1.example.test"
FILES = "/srv/ganeti/file-storage/%s/disk%d"


class AssemblingNodes(FakeNodes):
    """L{FakeNodes} that assemble and shut down the disks they hold."""

    def __init__(self) -> None:
        super().__init__()
        self.assembled: set[tuple[str, str]] = set()
        #: (node, disk path) -> what blockdev_assemble answers on the primary
        self.answers: dict[tuple[str, str], list[Any]] = {}

    def _blockdev_assemble(self, node: str, disk: dict[str, Any], inst: dict[str, Any], on_primary: bool,
                           idx: int) -> Any:
        path = disk["logical_id"][1]
        if path not in self.disks.get(node, set()):
            raise _Refused("Cannot assemble disk %d of instance %s: %s does not exist" % (idx, inst["name"], path))
        if not on_primary:
            return [True, True]
        self.assembled.add((node, path))
        return self.answers.get((node, path), [path, "/var/run/ganeti/instance-disks/%s:%d" % (inst["name"], idx),
                                               None])

    def _blockdev_shutdown(self, node: str, disk: dict[str, Any]) -> Any:
        self.assembled.discard((node, disk["logical_id"][1]))
        return None


def activate(name: str = WEB, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": name}, **extra)


def deactivate(name: str = WEB, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": name}, **extra)


class DiskActivationTests(LUTestCase):
    def setUp(self) -> None:
        self.env = Env(cluster())
        self.rpc = AssemblingNodes()
        self.next_id = 100
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": WEB, "mode": "create", "disk_template": "file",
                 "disks": [{"size": 1024}, {"size": 512}], "nics": [{}], "os_type": "noop", "pnode": N2,
                 "start": False})
        self.rpc.calls.clear()

    def disks_active(self, name: str = WEB) -> bool | None:
        inst = self.env.read_config().find_instance(name)
        assert inst is not None
        return inst.disks_active

    def test_activate_returns_the_paths(self) -> None:
        self.assertEqual(self.ok(activate()), [[N2, "disk/0", FILES % (WEB, 0)], [N2, "disk/1", FILES % (WEB, 1)]])
        self.assertEqual(self.rpc.assembled, {(N2, FILES % (WEB, 0)), (N2, FILES % (WEB, 1))})
        calls = [(node, args[2], args[3], args[0]["size"]) for node, args in self.rpc.calls_of("blockdev_assemble")]
        # pass 1 (not primary) on every node of each disk, then pass 2 on the primary
        self.assertEqual(calls, [(N2, False, 0, 1024), (N2, False, 1, 512), (N2, True, 0, 1024), (N2, True, 1, 512)])
        (_node, args), = self.rpc.calls_of("blockdev_assemble")[:1]
        self.assertEqual(args[1]["name"], WEB)
        self.assertTrue(self.disks_active())

    def test_ignore_size_and_a_path_less_disk(self) -> None:
        self.rpc.answers[(N2, FILES % (WEB, 1))] = [None, None, "kvm:rbd:pool/volume"]
        result = self.ok(activate(ignore_size=True, wait_for_sync=True))
        self.assertEqual(result, [[N2, "disk/0", FILES % (WEB, 0)], [N2, "disk/1", None]])
        self.assertEqual({args[0]["size"] for _node, args in self.rpc.calls_of("blockdev_assemble")}, {None})

    def test_a_failing_disk_fails_and_leaves_the_disks_inactive(self) -> None:
        self.rpc.disks[N2].discard(FILES % (WEB, 1))
        message = self.error(activate(), kind="OpExecError")
        self.assertEqual(message, "Cannot activate block devices")
        self.assertIn(" - WARNING: Could not prepare block device disk/1 on node %s (is_primary=True, pass=2):"
                      " Cannot assemble disk 1 of instance %s: %s does not exist" % (N2, WEB, FILES % (WEB, 1)),
                      self.log)
        self.assertFalse(self.disks_active())

    def test_deactivate(self) -> None:
        self.ok(activate())
        self.rpc.calls.clear()
        self.assertIsNone(self.ok(deactivate()))
        self.assertEqual(self.rpc.assembled, set())
        self.assertEqual([(node, args[0]["logical_id"][1]) for node, args in self.rpc.calls_of("blockdev_shutdown")],
                         [(N2, FILES % (WEB, 0)), (N2, FILES % (WEB, 1))])
        self.assertFalse(self.disks_active())

    def test_deactivate_refused_while_running_unless_forced(self) -> None:
        self.ok({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": WEB})
        self.ok(activate())
        self.rpc.calls.clear()
        message = self.error(deactivate(), code=errors.ECODE_STATE)
        self.assertEqual(message, "Instance %s is marked to be up, cannot shutdown disks" % WEB)
        self.assertEqual(self.rpc.calls, [])
        self.assertTrue(self.disks_active())
        # marked down, yet still running on its node
        self.ok({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": WEB, "no_remember": False})
        self.rpc.start(N2, WEB)
        message = self.error(deactivate(), code=errors.ECODE_STATE)
        self.assertEqual(message, "Instance %s is running, cannot shutdown disks" % WEB)
        self.assertEqual(self.rpc.calls_of("blockdev_shutdown"), [])
        self.assertTrue(self.disks_active())
        self.ok(deactivate(force=True))
        self.assertEqual(len(self.rpc.calls_of("blockdev_shutdown")), 2)
        self.assertFalse(self.disks_active())

    def test_a_failing_shutdown_is_a_warning(self) -> None:
        self.rpc.fail[("blockdev_shutdown", None)] = "detach failed"
        self.ok(deactivate())
        self.assertIn(" - WARNING: Could not shutdown block device disk/0 on node %s: detach failed" % N2, self.log)

    def test_unknown_instance_and_diskless(self) -> None:
        self.assertIn("not known", self.error(activate("nosuch"), code=errors.ECODE_NOENT))
        self.assertIn("not known", self.error(deactivate("nosuch"), code=errors.ECODE_NOENT))
        self.ok({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "d.example.test", "mode": "create",
                 "disk_template": "diskless", "disks": [], "nics": [{}], "os_type": "noop", "pnode": N3,
                 "start": False})
        self.assertEqual(self.ok(activate("d.example.test")), [])
        self.assertEqual(self.rpc.calls_of("blockdev_assemble"), [])

    def test_offline_primary_is_refused(self) -> None:
        cfg = self.env.read_config()
        node = cfg.find_node(N2)
        from tests.unit.wconfd_helpers import job

        self.env.call(self.env.admin.client.lock_config(job(1)))
        self.env.call(self.env.admin.client.write_config_and_unlock(
            job(1), attrs.evolve(cfg, nodes=dict(cfg.nodes, **{node.uuid: attrs.evolve(node, offline=True)}))))
        self.assertIn("offline node", self.error(activate(), code=errors.ECODE_STATE))
        self.assertEqual(self.rpc.calls, [])

    def test_locks(self) -> None:
        cfg = self.env.read_config()
        for op, cls in ((activate(), disk_activation.LUInstanceActivateDisks),
                        (deactivate(), disk_activation.LUInstanceDeactivateDisks)):
            lu = cls(typed.from_dict(opcodes.validate(op)), None, cfg)
            lu.expand_names()
            self.assertEqual(lu.needed_locks, {LEVEL_INSTANCE: [WEB], LEVEL_NODE: []})
            lu.declare_locks(LEVEL_NODE)
            self.assertEqual(lu.needed_locks[LEVEL_NODE], [cfg.find_node(N2).uuid])
            self.assertEqual(lu.share_locks, {})

    def test_dry_run_changes_nothing(self) -> None:
        self.ok(deactivate(dry_run=True))
        self.assertEqual(self.rpc.calls, [])
