"""WConfD for instance creation: unique MACs, disks added and removed with an
instance update, lock names of failed creations, guarded opportunistic
locking (store, service and over the wire)."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.objects import NIC, Disk, Instance, new_uuid
from ganeti.wconfd import commands as c
from ganeti.wconfd import store as store_module
from ganeti.wconfd.store import ConfigStore, MacInUse
from tests.unit.wconfd_helpers import BGL, Wire, by_name, job, make_config, make_service

INST1, INST2 = "inst1.example.test", "inst2.example.test"


def new_disk(node: str, path: str) -> Disk:
    return Disk(uuid=new_uuid(), dev_type="file", logical_id=["loop", path], nodes=[node], size=64, mode="rw",
                iv_name="disk/9")


class StoreTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = itertools.count(1000)
        self.patch(store_module, "now", lambda: float(next(self.clock)))
        self.original = make_config(nodes=2, instances=3)
        self.store = ConfigStore(self.original)
        self.records: list[Any] = []

    def instance(self, name: str = INST1) -> Instance:
        return by_name(self.store, "instance", name)

    def update(self, inst: Instance, **kwargs: Any) -> Instance:
        stored, record = self.store.update("instance", inst.to_dict(), **kwargs)
        self.records.append(serializer.loads(serializer.dumps(record)))
        return stored

    def assertRefused(self, exc: type[Exception], call: Any, *args: Any, **kwargs: Any) -> Exception:
        before, serial = self.store.snapshot(), self.store.serial_no
        raised = self.assertRaises(exc, call, *args, **kwargs)
        self.assertIs(self.store.snapshot(), before)
        self.assertEqual(self.store.serial_no, serial)
        return raised

    def assertReplays(self) -> None:
        replayed = ConfigStore(self.original)
        for record in self.records:
            replayed.replay(record)
        self.assertEqual(replayed.snapshot(), self.store.snapshot())
        self.assertEqual(self.store.verify(), [])


class MacTests(StoreTestCase):
    def test_a_mac_of_another_instance_is_refused(self) -> None:
        taken = self.instance(INST2).nics[0].mac
        inst = self.instance()
        e = self.assertRefused(MacInUse, self.store.update, "instance",
                               attrs.evolve(inst, nics=[NIC(mac=taken.upper(), uuid=new_uuid())]).to_dict())
        self.assertIn("already in use by instance %s" % INST2, str(e))
        self.assertIsInstance(e, errors.ConfigurationError)
        data = Instance(name="new.example.test", primary_node=inst.primary_node, nics=[NIC(mac=taken)]).to_dict()
        self.assertRefused(MacInUse, self.store.add, "instance", data)

    def test_two_nics_with_one_mac_are_refused(self) -> None:
        inst = self.instance()
        nics = [NIC(mac="aa:00:00:99:99:99"), NIC(mac="aa:00:00:99:99:99")]
        e = self.assertRefused(MacInUse, self.store.update, "instance", attrs.evolve(inst, nics=nics).to_dict())
        self.assertIn("used by two of its NICs", str(e))

    def test_own_mac_is_fine_and_a_freed_mac_can_be_reused(self) -> None:
        inst, other = self.instance(), self.instance(INST2)
        mac = inst.nics[0].mac
        self.update(attrs.evolve(inst, os="other"))
        self.assertEqual(self.store.mac_owner(mac.upper()), inst.uuid)
        self.update(attrs.evolve(self.instance(), nics=[NIC(mac="aa:00:00:12:34:56")]))
        self.assertIsNone(self.store.mac_owner(mac))
        self.update(attrs.evolve(other, nics=list(other.nics) + [NIC(mac=mac)]))
        self.assertEqual(self.store.mac_owner(mac), other.uuid)
        _removed, record = self.store.remove("instance", INST2)
        self.records.append(serializer.loads(serializer.dumps(record)))
        self.assertIsNone(self.store.mac_owner(mac))
        self.assertReplays()

    def test_the_index_is_rebuilt_on_load_and_replay(self) -> None:
        inst = self.instance()
        self.update(attrs.evolve(inst, nics=[NIC(mac="aa:00:00:ab:cd:ef")]))
        self.assertEqual(ConfigStore(self.store.config()).mac_owner("aa:00:00:ab:cd:ef"), inst.uuid)
        replayed = ConfigStore(self.original)
        for record in self.records:
            replayed.replay(record)
        self.assertEqual(replayed.mac_owner("aa:00:00:ab:cd:ef"), inst.uuid)


class DiskTests(StoreTestCase):
    def test_update_adds_new_disks_in_the_same_change(self) -> None:
        inst = self.instance()
        disk = new_disk(inst.primary_node, "/srv/x/disk9")
        serial = self.store.serial_no
        stored = self.update(attrs.evolve(inst, disks=list(inst.disks) + [disk.uuid]), disks=[disk.to_dict()])
        self.assertEqual(self.store.serial_no, serial + 1, "one change")
        self.assertEqual(stored.disks[-1], disk.uuid)
        kept = self.store.lookup("disk", disk.uuid)
        self.assertEqual((kept.serial_no, kept.ctime, kept.logical_id), (1, stored.mtime, disk.logical_id))
        self.assertEqual(self.store.guarding_lock("disk", kept), "instance/%s" % INST1)
        self.assertReplays()

    def test_new_disks_must_be_listed_fresh_and_owned(self) -> None:
        inst = self.instance()
        disk = new_disk(inst.primary_node, "/srv/x/disk9")
        self.assertRefused(errors.ConfigurationError, self.store.update, "instance", inst.to_dict(),
                           disks=[disk.to_dict()])
        existing = self.store.lookup("disk", inst.disks[0])
        self.assertRefused(errors.ConfigurationError, self.store.update, "instance", inst.to_dict(),
                           disks=[existing.to_dict()])
        self.assertRefused(errors.ConfigurationError, self.store.update, "instance",
                           attrs.evolve(inst, disks=[attrs.evolve(disk, uuid=None).uuid]).to_dict(),
                           disks=[attrs.evolve(disk, uuid=None).to_dict()])
        node = self.store.lookup("node", inst.primary_node)
        self.assertRefused(errors.ConfigurationError, self.store.update, "node", node.to_dict(),
                           disks=[disk.to_dict()])

    def test_remove_disks_drops_them_from_the_config(self) -> None:
        inst = self.instance()
        (gone,) = inst.disks
        self.update(attrs.evolve(inst, disks=[]), remove_disks=[gone])
        self.assertRaises(store_module.UnknownEntity, self.store.lookup, "disk", gone)
        self.assertReplays()

    def test_only_disks_the_instance_drops_can_be_removed(self) -> None:
        inst, other = self.instance(), self.instance(INST2)
        self.assertRefused(errors.ConfigurationError, self.store.update, "instance", inst.to_dict(),
                           remove_disks=[inst.disks[0]])
        self.assertRefused(errors.ConfigurationError, self.store.update, "instance", inst.to_dict(),
                           remove_disks=[other.disks[0]])

    def test_backs_lock(self) -> None:
        inst = self.instance()
        node = inst.primary_node
        group = next(iter(self.original.nodegroups))
        for name in ("instance/%s" % INST1, "node/%s" % node, "node-res/%s" % node, "nodegroup/%s" % group):
            self.assertTrue(self.store.backs_lock(name), name)
        for name in ("instance/new.example.test", "node/nope", "network/nope", "cluster/BGL"):
            self.assertFalse(self.store.backs_lock(name), name)


class ServiceTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.service = make_service(make_config(nodes=2, instances=1), clock=self.clock)
        self.a, self.b, self.c = job(1), job(2), job(3)

    def test_the_name_of_a_failed_creation_can_be_added_again(self) -> None:
        name = "instance/new.example.test"
        self.service.try_update(self.a, [(BGL, "shared")])
        self.assertEqual(self.service.add_locks(self.a, [name]), [])
        self.service.try_update(self.b, [(BGL, "shared")])
        self.assertRaises(errors.LockError, self.service.add_locks, self.b, [name])  # held: refused
        self.service.lock_call("free", self.a)
        self.assertEqual(self.service.add_locks(self.b, [name]), [], "nobody holds it, no instance has it")
        existing = "instance/%s" % by_name(self.service.config_store, "instance", "inst1.example.test").name
        self.assertRaises(errors.LockError, self.service.add_locks, self.b, [existing])

    def test_guarded_union_takes_the_count_and_waits_for_a_free_lock(self) -> None:
        nodes = sorted(self.service.config_store.maps["node"])
        request = [("node/%s" % n, "exclusive") for n in nodes]
        for owner in (self.a, self.b, self.c):
            self.service.try_update(owner, [(BGL, "shared")])
        self.service.try_update(self.a, request)
        waiting = [ensureDeferred(self.service.opportunistic(o, request, 1, 30, True)) for o in (self.b, self.c)]
        for d in waiting:
            self.assertNoResult(d)
        self.service.try_update(self.a, [(request[0][0], "release")])
        got = [d.result for d in waiting if d.called]
        self.assertEqual(got, [[request[0][0]]], "one waiter gets the one lock freed")
        self.clock.advance(30)
        self.assertEqual([d.result for d in waiting], [[request[0][0]], []], "the other times out empty")

    def test_a_guarded_union_below_its_count_changes_nothing(self) -> None:
        nodes = sorted(self.service.config_store.maps["node"])
        request = [("node/%s" % n, "exclusive") for n in nodes]
        locks = self.service.locks
        locks.take_dirty()
        generation = locks.generation
        self.assertEqual(locks.guarded_opportunistic_union(len(nodes) + 1, self.a, request), [])
        self.assertEqual((locks.generation, locks.take_dirty(), locks.owned(self.a)), (generation, set(), []))
        self.assertEqual(len(locks.guarded_opportunistic_union(len(nodes), self.a, request)), len(nodes))
        self.assertNotEqual(locks.generation, generation)

    def test_waiters_are_not_woken_by_attempts_that_change_nothing(self) -> None:
        nodes = sorted(self.service.config_store.maps["node"])
        request = [("node/%s" % n, "exclusive") for n in nodes]
        owners = [job(10 + i) for i in range(10)]
        for owner in [self.a] + owners:
            self.service.try_update(owner, [(BGL, "shared")])
        self.service.try_update(self.a, request)
        calls = []
        real = self.service.locks.guarded_opportunistic_union

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            return real(*args, **kwargs)

        self.patch(self.service.locks, "guarded_opportunistic_union", counting)
        waiting = [ensureDeferred(self.service.opportunistic(o, request, 2, 60, True)) for o in owners]
        self.assertEqual(len(calls), 10, "one attempt each")
        self.service.try_update(self.a, [(request[0][0], "release")])
        self.assertLessEqual(len(calls), 20, "one lock freed: each tries once more, at most")
        self.assertFalse(any(d.called for d in waiting), "a count of 2 is not met by one free lock")
        self.clock.advance(60)
        self.assertEqual([d.result for d in waiting], [[]] * 10)


class WireTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.service = make_service(make_config(nodes=2, instances=2))
        self.wire = Wire.connect(self.service)
        self.client = self.wire.client
        self.a = job(1)
        inst = self.call(self.client.read_instance(INST1))
        self.call(self.client.try_update_locks(self.a, [(BGL, "shared"), ("instance/" + INST1, "exclusive")]))
        self.inst = inst

    def call(self, work: Any) -> Any:
        return self.successResultOf(self.wire.run(work))

    def test_mac_in_use_arrives_as_its_own_error(self) -> None:
        taken = self.call(self.client.read_instance(INST2)).nics[0].mac
        failure = self.failureResultOf(self.wire.run(self.client.update_instance(
            self.a, attrs.evolve(self.inst, nics=[NIC(mac=taken)]))), c.MacInUse)
        self.assertIn("already in use", str(failure.value))

    def test_update_with_new_and_removed_disks(self) -> None:
        inst = self.inst
        disk = new_disk(inst.primary_node, "/srv/y/disk1")
        (old,) = inst.disks
        stored = self.call(self.client.update(self.a, "instance", attrs.evolve(inst, disks=[disk.uuid]),
                                             disks=[disk], remove_disks=[old]))
        self.assertEqual(stored.disks, [disk.uuid])
        self.assertEqual(self.call(self.client.read_entity("disk", disk.uuid))["logical_id"], disk.logical_id)
        self.failureResultOf(self.wire.run(self.client.read_entity("disk", old)), c.UnknownEntity)
