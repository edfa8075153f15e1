"""Tests for the instance LUs: removal (L{ganeti.cmdlib.instance}), the operations
(L{ganeti.cmdlib.instance_ops}), set-params and query-data; creation is tested in
L{tests.unit.test_cmdlib_instance_create}, with the helpers defined here.

The LUs run through the processor on an in-memory WConfD (the L{Env} of the
processor tests); node RPC is L{FakeNodes}, a model of the nodes that
records every call.
"""

from __future__ import annotations

from typing import Any

import attrs

from ganeti import errors
from ganeti.objects import ConfigData, Instance
from tests.unit.instance_fakes import N2, N3, FakeNodes, cluster
from tests.unit.lu_testcase import LUTestCase
from tests.unit.test_processor import Env

WEB = "web1.example.test"


def create(name: str = WEB, **extra: Any) -> dict[str, Any]:
    op = {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create", "disk_template": "file",
          "disks": [{"size": 1024}], "nics": [{}], "os_type": "noop"}
    op.update(extra)
    return op


def op(op_id: str, name: str = WEB, **extra: Any) -> dict[str, Any]:
    return dict({"OP_ID": "OP_INSTANCE_" + op_id, "instance_name": name}, **extra)


class InstanceTestCase(LUTestCase):
    config: ConfigData | None = None

    def setUp(self) -> None:
        self.env = Env(self.config if self.config is not None else cluster())
        self.rpc = FakeNodes()
        self.next_id = 100

    def cfg(self) -> ConfigData:
        return self.env.read_config()

    def instance(self, name: str = WEB) -> Instance | None:
        return self.cfg().find_instance(name)

    def node_of(self, name: str = WEB) -> str:
        cfg = self.cfg()
        inst = cfg.find_instance(name)
        assert inst is not None
        return cfg.nodes[inst.primary_node].name

    def disks(self, name: str = WEB) -> list[Any]:
        cfg = self.cfg()
        inst = cfg.find_instance(name)
        assert inst is not None
        return [cfg.disks[d] for d in inst.disks]

    def lock_names(self) -> set[str]:
        return set(self.env.service.locks._known)


def _owner(ident: int) -> Any:
    from tests.unit.wconfd_helpers import job

    return job(ident)


# --- removal ---------------------------------------------------------------------------


class RemoveTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, disks=[{"size": 10}, {"size": 20}]))
        self.rpc.calls.clear()

    def test_remove(self) -> None:
        self.assertIsNone(self.ok(op("REMOVE")))
        self.assertEqual(self.rpc.procedures(), ["instance_shutdown", "blockdev_remove", "blockdev_remove"])
        self.assertIsNone(self.instance())
        self.assertEqual(self.cfg().disks, {})
        self.assertEqual(self.rpc.disks[N2], set())
        self.assertNotIn("instance/%s" % WEB, self.lock_names())
        self.assertIn("not known", self.error(op("REMOVE"), code=errors.ECODE_NOENT))

    def test_failures(self) -> None:
        self.rpc.fail[("instance_shutdown", N2)] = "stuck"
        self.assertIn("Could not shutdown instance %s on node %s: stuck" % (WEB, N2),
                      self.error(op("REMOVE"), kind="OpExecError"))
        self.assertIsNotNone(self.instance())
        self.rpc.fail[("blockdev_remove", N2)] = "busy"
        self.ok(op("REMOVE", ignore_failures=True))
        self.assertIsNone(self.instance())
        self.assertTrue(any("WARNING: Could not shutdown" in line for line in self.log), self.log)
        self.assertTrue(any("could not remove disk disk/1" in line for line in self.log), self.log)

    def test_disk_failure_without_ignore_keeps_the_instance(self) -> None:
        self.rpc.fail[("blockdev_remove", N2)] = "busy"
        self.assertIn("Can't remove instance's disks", self.error(op("REMOVE"), kind="OpExecError"))
        self.assertIsNotNone(self.instance())


# --- startup, shutdown, reboot ------------------------------------------------------------


class StateTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, start=False, beparams={"memory": 512}))
        self.rpc.calls.clear()

    def admin(self) -> tuple[str | None, str | None]:
        inst = self.instance()
        assert inst is not None
        return inst.admin_state, inst.admin_state_source

    def test_startup_and_shutdown(self) -> None:
        self.assertIsNone(self.ok(op("STARTUP")))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "node_info", "instance_start"])
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.admin()[0], "up")
        self.ok(op("STARTUP"))
        self.assertIn("Instance %s is already running" % WEB, self.log)
        self.ok(op("SHUTDOWN", timeout=7, admin_state_source="user"))
        self.assertEqual(self.rpc.running_on(N2), set())
        self.assertEqual(self.admin(), ("down", "user"))
        self.assertEqual(self.rpc.calls_of("instance_shutdown")[-1][1][1], 7)

    def test_startup_of_a_powered_off_guest(self) -> None:
        """An instance whose guest powered itself off is stopped, then
        started, without a memory check (it still holds its memory)."""
        self.ok(op("STARTUP"))
        self.rpc.powered_off.add(WEB)
        self.rpc.memory[N2] = 600
        self.rpc.calls.clear()
        self.ok(op("STARTUP"))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "instance_shutdown", "instance_start"])
        self.assertEqual(self.rpc.calls_of("instance_shutdown")[0][1][1], 0)
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.rpc.powered_off, set())
        self.assertNotIn("already running", self.log)

    def test_startup_checks_memory_and_takes_overrides(self) -> None:
        self.rpc.memory[N2] = 256
        self.assertIn("Not enough memory on node %s for starting instance %s: needed 512 MiB, available 256 MiB"
                      % (N2, WEB), self.error(op("STARTUP"), code=errors.ECODE_NORES))
        self.ok(op("STARTUP", beparams={"maxmem": 200}, hvparams={"migration_mode": "non-live"},
                   startup_paused=True))
        (_node, args), = self.rpc.calls_of("instance_start")
        self.assertEqual(args[0]["beparams"]["maxmem"], 200)
        self.assertEqual(args[0]["hvparams"]["migration_mode"], "non-live")
        self.assertTrue(args[1])
        self.assertEqual(self.instance().beparams, {"maxmem": 512, "minmem": 512}, "overrides are not stored")
        self.assertIn("Unknown backend parameter", self.error(op("STARTUP", beparams={"x": 1})))

    def test_a_failed_start_leaves_the_instance_marked_up_as_in_ganeti(self) -> None:
        self.rpc.fail[("instance_start", N2)] = "qemu died"
        self.assertIn("qemu died", self.error(op("STARTUP"), kind="OpExecError"))
        self.assertEqual(self.admin()[0], "up")  # shown ERROR_down; the watcher tries again
        self.rpc.memory[N2] = 256
        self.ok(op("SHUTDOWN"))
        self.error(op("STARTUP"), code=errors.ECODE_NORES)
        self.assertEqual(self.admin()[0], "down", "a prerequisite that fails marks nothing")

    def test_no_remember(self) -> None:
        self.ok(op("STARTUP", no_remember=True))
        self.assertEqual(self.admin()[0], "down")
        self.ok(op("STARTUP"))
        self.ok(op("SHUTDOWN", no_remember=True))
        self.assertEqual(self.admin()[0], "up")

    def test_offline_node(self) -> None:
        cfg = self.cfg()
        node = next(n for n in cfg.nodes.values() if n.name == N2)
        self.env.call(self.env.admin.client.lock_config(_owner(1)))
        self.env.call(self.env.admin.client.write_config_and_unlock(
            _owner(1), attrs.evolve(cfg, nodes=dict(cfg.nodes, **{node.uuid: attrs.evolve(node, offline=True)}))))
        self.assertIn("Can't use offline node", self.error(op("STARTUP"), code=errors.ECODE_STATE))
        self.ok(op("STARTUP", ignore_offline_nodes=True))
        self.assertEqual(self.admin()[0], "up")
        self.assertEqual(self.rpc.calls, [])
        self.ok(op("SHUTDOWN", ignore_offline_nodes=True))
        self.assertEqual(self.admin()[0], "down")

    def test_offline_instance(self) -> None:
        self.ok(op("SET_PARAMS", offline=True))
        self.assertEqual(self.admin()[0], "offline")
        self.assertIn("is marked to be offline", self.error(op("STARTUP"), code=errors.ECODE_STATE))
        self.assertIn("is marked to be offline", self.error(op("REBOOT", reboot_type="soft")))
        self.ok(op("SET_PARAMS", offline=False))
        self.assertEqual(self.admin()[0], "down")
        self.ok(op("STARTUP"))
        self.assertIn("is marked to be up, cannot set it offline", self.error(op("SET_PARAMS", offline=True)))

    def test_reboot(self) -> None:
        self.assertIn("is not running, cannot reboot", self.error(op("REBOOT", reboot_type="soft"),
                                                                  code=errors.ECODE_STATE))
        self.ok(op("STARTUP"))
        self.rpc.calls.clear()
        self.ok(op("REBOOT", reboot_type="hard", shutdown_timeout=9))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "instance_reboot"])
        self.assertEqual(self.rpc.calls_of("instance_reboot")[0][1][1:3], ["hard", 9])
        self.rpc.calls.clear()
        self.ok(op("REBOOT", reboot_type="full"))
        self.assertEqual(self.rpc.procedures(), ["instance_info", "instance_shutdown", "instance_start"])
        self.assertEqual(self.rpc.running_on(N2), {WEB})
        self.assertEqual(self.admin()[0], "up")

    def test_console(self) -> None:
        self.assertIn("is not running", self.error(op("CONSOLE"), kind="OpExecError"))
        self.ok(op("STARTUP"))
        console = self.ok(op("CONSOLE"))
        self.assertEqual(console, {"instance": WEB, "kind": "msg", "message": "fake console"})
        self.rpc.running.clear()
        self.assertIn("marked to be up, but not running", self.error(op("CONSOLE"), kind="OpExecError"))

    def test_unknown_instance(self) -> None:
        for name in ("STARTUP", "SHUTDOWN", "CONSOLE", "REINSTALL"):
            self.assertIn("not known", self.error(op(name, "nope"), code=errors.ECODE_NOENT))


# --- rename, reinstall ------------------------------------------------------------------


class RenameReinstallTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2))
        self.ok(create("other.example.test", pnode=N3, start=False))
        self.rpc.calls.clear()

    def test_rename(self) -> None:
        new = "a-renamed.example.test"
        self.assertIn("is marked to be up", self.error(op("RENAME", new_name=new), code=errors.ECODE_STATE))
        self.ok(op("SHUTDOWN"))
        self.assertIn("already in the cluster", self.error(op("RENAME", new_name="other.example.test"),
                                                           code=errors.ECODE_NOTUNIQUE))
        disks = self.disks()
        self.assertEqual(self.ok(op("RENAME", new_name=new)), new)
        self.assertIsNone(self.instance())
        self.assertEqual(self.disks(new), disks, "disks keep their paths")
        (_node, args), = self.rpc.calls_of("instance_run_rename")
        self.assertEqual((args[0]["name"], args[1]), (new, WEB))
        self.assertNotIn("instance/%s" % WEB, self.lock_names())
        self.assertIn("instance/%s" % new, self.lock_names())
        # and to a name after the old one in lock order
        self.assertEqual(self.ok(op("RENAME", new, new_name="z.example.test")), "z.example.test")
        # a new instance under the old name gets its own disk directory
        self.ok(create(pnode=N2, start=False))
        self.assertNotEqual(self.disks()[0].logical_id, disks[0].logical_id)

    def test_rename_to_its_own_name(self) -> None:
        """Issue 26: as Ganeti's, a rename to the instance's own name is
        accepted (the instance must still be down) and runs the OS's rename
        script with the old name equal to the new one."""
        self.assertIn("is marked to be up", self.error(op("RENAME", new_name=WEB), code=errors.ECODE_STATE))
        self.ok(op("SHUTDOWN"))
        before = self.instance()
        self.assertEqual(self.ok(op("RENAME", new_name=WEB)), WEB)
        after = self.instance()
        assert before is not None and after is not None
        self.assertEqual((after.uuid, after.disks, self.cfg().find_instance("other.example.test") is not None),
                         (before.uuid, before.disks, True))
        (_node, args), = self.rpc.calls_of("instance_run_rename")
        self.assertEqual((args[0]["name"], args[1]), (WEB, WEB))
        self.assertIn("instance/%s" % WEB, self.lock_names())

    def test_rename_script_failure_is_a_warning(self) -> None:
        self.ok(op("SHUTDOWN"))
        self.rpc.fail[("instance_run_rename", None)] = "script broke"
        self.ok(op("RENAME", new_name="b.example.test"))
        self.assertTrue(any("Could not run OS rename script" in line for line in self.log), self.log)

    def test_reinstall(self) -> None:
        self.assertIn("is marked to be up", self.error(op("REINSTALL")))
        self.ok(op("SHUTDOWN"))
        self.rpc.start(N2, WEB)  # running behind our back
        self.assertIn("is running", self.error(op("REINSTALL"), code=errors.ECODE_STATE))
        self.rpc.running.clear()
        self.rpc.calls.clear()
        self.ok(op("REINSTALL", os_type="debootstrap+default", osparams={"dhcp": "no"}))
        (_node, args), = self.rpc.calls_of("instance_os_add")
        self.assertEqual(args[1], True)
        self.assertEqual(args[0]["os"], "debootstrap+default")
        self.assertEqual(args[0]["osparams"], {"dhcp": "no"})
        inst = self.instance()
        assert inst is not None
        self.assertEqual((inst.os, inst.osparams), ("debootstrap+default", {}))
        self.rpc.fail[("instance_os_add", None)] = "no space"
        self.assertIn("no space", self.error(op("REINSTALL"), kind="OpExecError"))


# --- set params ------------------------------------------------------------------------


class SetParamsTests(InstanceTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.ok(create(pnode=N2, start=False, nics=[{"name": "eth0"}]))
        self.rpc.calls.clear()

    def test_parameters(self) -> None:
        result = self.ok(op("SET_PARAMS", beparams={"memory": 256, "vcpus": 2},
                            hvparams={"migration_mode": "non-live"}, osparams={"x": "1"}))
        self.assertEqual(result, [["be/maxmem", 256], ["be/minmem", 256], ["be/vcpus", 2],
                                  ["hv/migration_mode", "non-live"], ["os/x", "1"]])
        inst = self.instance()
        assert inst is not None
        self.assertEqual(inst.beparams, {"maxmem": 256, "minmem": 256, "vcpus": 2})
        self.assertEqual(inst.hvparams, {"migration_mode": "non-live"})
        result = self.ok(op("SET_PARAMS", beparams={"vcpus": "default"}, hvparams={"migration_mode": "default"}))
        self.assertEqual(result, [["be/vcpus", "default"], ["hv/migration_mode", "default"]])
        self.assertEqual(self.instance().beparams, {"maxmem": 256, "minmem": 256})
        self.assertEqual(self.instance().hvparams, {})

    def test_refusals(self) -> None:
        for opcode, text in [
            (op("SET_PARAMS"), "No changes submitted"),
            (op("SET_PARAMS", disk_template="plain"), "needs LVM, which these nodes cannot run"),
            (op("SET_PARAMS", beparams={"minmem": 4096}), "greater than maximum"),
            (op("SET_PARAMS", hvparams={"acpi": True}), "Unknown hypervisor parameter 'acpi' for hypervisor 'fake'"),
            (op("SET_PARAMS", disks=[["attach", -1, {}]]), "Only one argument is permitted in attach op"),
            (op("SET_PARAMS", disks=[["modify", 0, {"size": 5}]]), "grow the disk"),
            (op("SET_PARAMS", disks=[["remove", 7, {}]]), "Invalid disk index 7"),
            (op("SET_PARAMS", disks=[["remove", 0, {}]]), "Cannot remove the last disk"),
            (op("SET_PARAMS", nics=[["remove", "nosuch", {}]]), "No NIC named 'nosuch'"),
            (op("SET_PARAMS", nics=[["add", {"mac": "bad"}]]), "invalid MAC"),
        ]:
            self.assertIn(text, self.error(opcode), opcode)
        self.assertEqual(self.rpc.calls, [])

    def test_add_and_remove_disks(self) -> None:
        result = self.ok(op("SET_PARAMS", disks=[["add", {"size": 512, "mode": "ro", "name": "logs"}]]))
        self.assertEqual(result, [["disk/1", "add:size=512,mode=ro"]])
        first, second = self.disks()
        self.assertEqual((second.size, second.mode, second.name, second.iv_name), (512, "ro", "logs", "disk/1"))
        self.assertEqual(second.logical_id, ["loop", "/srv/ganeti/file-storage/%s/disk1" % WEB])
        self.assertEqual(self.rpc.procedures(), ["blockdev_create"])
        # the new format, at index 0, then remove by name
        self.ok(op("SET_PARAMS", disks=[["add", 0, {"size": 64}]]))
        disks = self.disks()
        self.assertEqual([d.size for d in disks], [64, 1024, 512])
        self.assertEqual([d.iv_name for d in disks], ["disk/0", "disk/1", "disk/2"])
        self.assertEqual(disks[0].logical_id[1][-5:], "disk2", "a free file name")
        self.rpc.calls.clear()
        self.assertEqual(self.ok(op("SET_PARAMS", disks=[["remove", "logs", {}]])), [["disk/2", "remove"]])
        self.assertEqual([d.size for d in self.disks()], [64, 1024])
        self.assertNotIn(second.uuid, self.cfg().disks)
        self.assertEqual(self.rpc.procedures(), ["blockdev_remove"])
        self.assertEqual(self.ok(op("SET_PARAMS", disks=[["modify", 1, {"mode": "ro"}]])), [["disk.mode/1", "ro"]])
        self.assertEqual(self.disks()[1].mode, "ro")

    def test_disk_removal_needs_a_stopped_instance(self) -> None:
        self.ok(op("SET_PARAMS", disks=[["add", {"size": 1}]]))
        self.ok(op("STARTUP"))
        self.assertIn("stop it before removing disks", self.error(op("SET_PARAMS", disks=[["remove", {}]])))

    def test_failed_disk_creation_changes_nothing(self) -> None:
        self.rpc.fail[("blockdev_create", N2)] = "no space"
        self.assertIn("no space", self.error(op("SET_PARAMS", disks=[["add", {"size": 1}]]), kind="OpExecError"))
        self.assertEqual(len(self.disks()), 1)

    def test_nics(self) -> None:
        result = self.ok(op("SET_PARAMS", nics=[["add", {"ip": "192.0.2.9", "link": "br1"}]]))
        self.assertEqual(result[0][0], "nic.1")
        nics = self.instance().nics
        self.assertEqual((nics[1].ip, nics[1].nicparams), ("192.0.2.9", {"link": "br1"}))
        self.assertNotEqual(nics[0].mac, nics[1].mac)
        result = self.ok(op("SET_PARAMS", nics=[["modify", "eth0", {"mac": "aa:00:00:01:02:03", "vlan": "5"}]]))
        self.assertEqual(result, [["nic.mac/0", "aa:00:00:01:02:03"], ["nic.vlan/0", "5"]])
        self.ok(op("SET_PARAMS", nics=[[1, {"mode": "routed"}]]))
        self.assertEqual(self.instance().nics[1].nicparams, {"link": "br1", "mode": "routed"})
        self.assertEqual(self.ok(op("SET_PARAMS", nics=[["remove", {}]])), [["nic.1", "remove"]])
        self.assertEqual(len(self.instance().nics), 1)
        self.ok(create("other.example.test", pnode=N3, start=False))
        self.assertIn("already in use", self.error(op("SET_PARAMS", "other.example.test",
                                                      nics=[[0, {"mac": "aa:00:00:01:02:03"}]]),
                                                   code=errors.ECODE_NOTUNIQUE))


# --- query data ---------------------------------------------------------------------------


class RuntimeMemoryTests(InstanceTestCase):
    """runtime_mem: ballooning a running instance, within minmem..maxmem."""

    def setUp(self) -> None:
        super().setUp()
        self.rpc.memory[N2] = 1024
        self.ok(create(pnode=N2, beparams={"minmem": 128, "maxmem": 512}))
        self.rpc.calls.clear()

    def test_balloon_down_and_up(self) -> None:
        serial = self.instance().serial_no
        self.assertEqual(self.ok(op("SET_PARAMS", runtime_mem=256)), [["runtime_memory", 256]])
        self.assertEqual(self.rpc.running[N2][WEB], 256)
        ((node, args),) = self.rpc.calls_of("instance_balloon_memory")
        self.assertEqual((node, args[0]["name"], args[1]), (N2, WEB, 256))
        self.assertEqual(self.ok(op("SET_PARAMS", runtime_mem=512)), [["runtime_memory", 512]])
        self.assertEqual(self.rpc.running[N2][WEB], 512)
        inst = self.instance()
        assert inst is not None
        self.assertEqual(inst.beparams, {"minmem": 128, "maxmem": 512})  # the configuration keeps its memory
        self.assertGreaterEqual(inst.serial_no, serial)

    def test_outside_minmem_maxmem_needs_force(self) -> None:
        for memory in (64, 1024):
            message = self.error(op("SET_PARAMS", runtime_mem=memory), code=errors.ECODE_INVAL)
            self.assertEqual(message, "Instance %s must have memory between 128 and 512 MB of memory unless --force"
                                      " is given" % WEB)
        self.assertEqual(self.rpc.calls_of("instance_balloon_memory"), [])
        self.ok(op("SET_PARAMS", runtime_mem=64, force=True))
        self.assertEqual(self.rpc.running[N2][WEB], 64)

    def test_growing_needs_free_memory_on_the_node(self) -> None:
        self.rpc.start(N2, "other", 700)
        self.ok(op("SET_PARAMS", runtime_mem=128))  # shrinking needs nothing: 1024 - 128 - 700 = 196 MiB free
        message = self.error(op("SET_PARAMS", runtime_mem=512))  # 384 more
        self.assertIn("ballooning memory for instance %s" % WEB, message)
        self.assertEqual(self.rpc.running[N2][WEB], 128)
        self.ok(op("SET_PARAMS", runtime_mem=320))  # 192 more
        self.assertEqual(self.rpc.running[N2][WEB], 320)

    def test_checked_before_other_changes(self) -> None:
        self.error(op("SET_PARAMS", runtime_mem=4096, beparams={"vcpus": 4}))
        self.assertNotIn("vcpus", self.instance().beparams)
        self.ok(op("SHUTDOWN"))
        self.assertIn("is not running", self.error(op("SET_PARAMS", runtime_mem=256), code=errors.ECODE_STATE))


class QueryDataTests(InstanceTestCase):
    def test_data(self) -> None:
        self.ok(create(pnode=N2, nics=[{"name": "eth0", "ip": "192.0.2.5"}], tags=["a"]))
        self.ok(create("other.example.test", pnode=N3, start=False, disk_template="diskless", disks=[]))
        result = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["web1"]})
        (data,) = result.values()
        inst = self.instance()
        assert inst is not None
        self.assertEqual((data["name"], data["config_state"], data["run_state"]), (WEB, "up", "up"))
        self.assertEqual((data["pnode"], data["snodes"], data["os"], data["hypervisor"]), (N2, [], "noop", "fake"))
        self.assertEqual(data["pnode_group_name"], "default")
        self.assertEqual(data["nics"], [["eth0", inst.nics[0].uuid, "192.0.2.5", inst.nics[0].mac, "bridged", "br0",
                                         "", None, None]])
        (disk,) = data["disks"]
        self.assertEqual((disk["iv_name"], disk["size"], disk["mode"], disk["dev_type"], disk["pstatus"]),
                         ("disk/0", 1024, "rw", "file", None))
        self.assertEqual(data["be_actual"]["maxmem"], 128)
        self.assertEqual(data["be_instance"], {})
        self.assertEqual(data["hv_actual"], {"migration_mode": "live"})
        self.assertEqual((data["uuid"], data["serial_no"], data["tags"]), (inst.uuid, inst.serial_no, ["a"]))
        everything = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "static": True})
        self.assertEqual(sorted(everything), ["other.example.test", WEB])
        self.assertIsNone(everything[WEB]["run_state"])
        locked = self.ok({"OP_ID": "OP_INSTANCE_QUERY_DATA", "use_locking": True})
        self.assertEqual(locked["other.example.test"]["run_state"], "down")
        self.assertIn("not known", self.error({"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": ["nope"]}))
