"""Tests for reading the config by its changes: WConfD's store keeps the last
change records (L{ConfigStore.changes_since}), a copy of an older serial is
brought forward with them (L{ConfigData.with_changes}), and a job process's
client asks for them (C{ReadConfig} with C{deltas})."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors
from ganeti.objects import ConfigData
from ganeti.wconfd import commands as c
from ganeti.wconfd import store as store_module
from ganeti.wconfd.store import ConfigStore
from tests.unit.test_wconfd_protocol import INST1, ProtocolTestCase
from tests.unit.test_wconfd_store import _try_op, apply_changes
from tests.unit.wconfd_helpers import by_name, make_config


def _as_json(config: ConfigData) -> Any:
    return orjson.loads(config.to_json())


def _change(store: ConfigStore, op: str, i: int, j: int) -> dict[str, Any] | None:
    """One generated change (L{_try_op}'s, the cluster's or a job filter's); C{None} if refused."""
    if op == "cluster":
        return store.update("cluster", attrs.evolve(store.cluster, candidate_pool_size=j + 1).to_dict())[1]
    if op == "filter":
        uuid = "f%d" % i
        return store.change_filter(uuid, None if j % 3 == 0 else {"uuid": uuid, "priority": j})
    return _try_op(store, op, i, j)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["os", "rename", "move", "regroup", "add", "remove", "add_group", "remove_group", "nic",
                         "disk", "cluster", "filter"]),
        st.integers(0, 7),
        st.integers(0, 7),
    ),
    max_size=25,
)


class ChangesSinceTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.store = ConfigStore(make_config(nodes=3, instances=3))

    def test_a_copy_of_every_earlier_serial_is_brought_to_the_current_config(self) -> None:
        copies = {self.store.serial_no: ConfigData.from_json(self.store.snapshot())}
        for record in apply_changes(self.store):
            copies[record["s"]] = ConfigData.from_json(self.store.snapshot())
        current = _as_json(ConfigData.from_json(self.store.snapshot()))
        for serial, copy in copies.items():
            brought = copy.with_changes(self.store.changes_since(serial) or [])
            self.assertEqual((brought.serial_no, _as_json(brought)), (self.store.serial_no, current))

    def test_the_current_serial_needs_no_change(self) -> None:
        apply_changes(self.store)
        self.assertEqual(self.store.changes_since(self.store.serial_no), [])

    def test_changes_older_than_those_kept_are_not_offered(self) -> None:
        self.patch(store_module, "RECENT_CHANGES", 3)
        store = ConfigStore(make_config(nodes=3, instances=3))
        start = store.serial_no
        records = apply_changes(store)
        self.assertGreater(len(records), 3)
        self.assertIsNone(store.changes_since(start))
        self.assertEqual([r["s"] for r in store.changes_since(store.serial_no - 3) or []],
                         [store.serial_no - 2, store.serial_no - 1, store.serial_no])

    def test_a_whole_config_written_ends_the_changes_before_it(self) -> None:
        start = self.store.serial_no
        apply_changes(self.store)
        middle = self.store.serial_no
        self.store.replace(ConfigData.from_json(self.store.snapshot()))
        self.assertIsNone(self.store.changes_since(start))
        self.assertIsNone(self.store.changes_since(middle))
        self.assertEqual(self.store.changes_since(self.store.serial_no), [])

    def test_a_serial_this_config_never_had_gets_none(self) -> None:
        apply_changes(self.store)
        self.assertIsNone(self.store.changes_since(self.store.serial_no + 1))

    def test_a_copy_of_another_mtime_at_a_serial_is_not_one_this_config_had(self) -> None:
        start = ConfigData.from_json(self.store.snapshot())
        copies = [ConfigData.from_json(self.store.snapshot())]
        for _record in apply_changes(self.store):
            copies.append(ConfigData.from_json(self.store.snapshot()))
        for copy in [start, *copies]:
            self.assertIsNotNone(self.store.changes_since(copy.serial_no, copy.mtime))
            self.assertIsNone(self.store.changes_since(copy.serial_no, (copy.mtime or 0) + 0.5))

    def test_the_records_kept_carry_no_request_answer(self) -> None:
        inst = by_name(self.store, "instance", INST1)
        _stored, record = self.store.update("instance", attrs.evolve(inst, os="debian").to_dict())
        record["r"] = ["owner", 1, "answer"]  # what the service adds before journalling it
        self.assertEqual(set(self.store.changes_since(self.store.serial_no - 1)[0]), {"s", "t", "c"})

    def test_replayed_records_are_kept_too(self) -> None:
        original = make_config(nodes=3, instances=3)
        records = apply_changes(ConfigStore(original))
        replayed = ConfigStore(original)
        for record in records:
            replayed.replay(record)
        brought = ConfigData.from_json(ConfigStore(original).snapshot()).with_changes(
            replayed.changes_since(original.serial_no) or [])
        self.assertEqual(_as_json(brought), _as_json(ConfigData.from_json(replayed.snapshot())))

    @settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_OPS)
    def test_any_accepted_changes_bring_any_earlier_copy_to_the_same_config(self, ops: list[Any]) -> None:
        store = ConfigStore(make_config(nodes=2, instances=3))
        copies = {store.serial_no: ConfigData.from_json(store.snapshot())}
        for op, i, j in ops:
            if _change(store, op, i, j) is not None:
                copies[store.serial_no] = ConfigData.from_json(store.snapshot())
        current = _as_json(ConfigData.from_json(store.snapshot()))
        for serial, copy in copies.items():
            self.assertEqual(_as_json(copy.with_changes(store.changes_since(serial) or [])), current)


class WithChangesTests(SynchronousTestCase):
    def test_only_the_maps_that_changed_are_copied(self) -> None:
        store = ConfigStore(make_config(nodes=3, instances=3))
        copy = ConfigData.from_json(store.snapshot())
        inst = by_name(store, "instance", INST1)
        store.update("instance", attrs.evolve(inst, os="debian").to_dict())
        brought = copy.with_changes(store.changes_since(copy.serial_no) or [])
        self.assertIs(brought.nodes, copy.nodes)
        self.assertIsNot(brought.instances, copy.instances)
        other = by_name(copy, "instance", "inst2.example.test")
        self.assertIs(brought.instances[other.uuid], other)  # the instances that did not change are shared
        self.assertEqual(copy.instances[inst.uuid].os, inst.os)  # the copy itself is left as it was

    def test_an_entity_changed_many_times_is_decoded_once(self) -> None:
        from ganeti.objects import Instance

        store = ConfigStore(make_config(nodes=3, instances=3))
        copy = ConfigData.from_json(store.snapshot())
        for n in range(5):
            inst = by_name(store, "instance", INST1)
            store.update("instance", attrs.evolve(inst, os="os%d" % n).to_dict())
        decoded: list[Any] = []
        real = Instance.from_dict.__func__
        self.patch(Instance, "from_dict", classmethod(lambda cls, data: decoded.append(1) or real(cls, data)))
        brought = copy.with_changes(store.changes_since(copy.serial_no) or [])
        self.assertEqual((len(decoded), brought.find_instance(INST1).os), (1, "os4"))

    def test_a_record_that_is_not_one_raises_value_error(self) -> None:
        copy = make_config()
        for junk in ({"s": 2}, {"s": 2, "t": 1.0, "c": [["volume", "u", {}]]}, {"s": 2, "t": 1.0, "c": [["node"]]},
                     {"s": 2, "t": 1.0, "c": [["instance", "u", "not an object"]]}):
            self.assertRaises(ValueError, copy.with_changes, [junk])


class DeltaReadTests(ProtocolTestCase):
    """A job process's client (C{cache_config}) brings its copy forward with WConfD's changes."""

    def setUp(self) -> None:
        super().setUp()
        self.client.cache_config = True
        self.snapshots: list[int] = []
        real = self.service.read_config
        self.patch(self.service, "read_config", lambda: self.snapshots.append(1) or real())

    def change_os(self, name: str, os_name: str) -> None:
        self.run_ok(self.client.update_instance(self.a, attrs.evolve(
            self.run_ok(self.client.read_instance(name)), os=os_name)))

    def test_a_changed_config_is_read_by_its_changes(self) -> None:
        self.run_ok(self.client.register_owner(self.a))
        self.run_ok(self.client.try_update_locks(self.a, [("cluster/BGL", "shared"), ("instance/" + INST1, "exclusive")]))
        first = self.run_ok(self.client.read_config())
        self.assertEqual(self.snapshots, [1])
        self.change_os(INST1, "debian")
        fresh = self.run_ok(self.client.read_config())
        self.assertEqual(self.snapshots, [1])  # no whole config sent again
        self.assertEqual(by_name(fresh, "instance", INST1).os, "debian")
        self.assertEqual(_as_json(fresh), _as_json(ConfigData.from_json(self.service.read_config()[0])))
        self.assertIsNot(fresh, first)
        self.assertIs(self.run_ok(self.client.read_config()), fresh)

    def test_an_adopted_copy_is_brought_forward_at_the_registration(self) -> None:
        copy = ConfigData.from_json(self.service.read_config()[0])
        del self.snapshots[:]
        self.run_ok(self.client.register_owner(self.a))
        self.run_ok(self.client.try_update_locks(self.a, [("cluster/BGL", "shared"), ("instance/" + INST1, "exclusive")]))
        self.change_os(INST1, "gentoo")
        self.client.adopt_config(copy.serial_no, copy)
        self.run_ok(self.client.register_owner(self.b, with_config=True))
        fresh = self.run_ok(self.client.read_config())
        self.assertEqual((self.snapshots, by_name(fresh, "instance", INST1).os), ([], "gentoo"))

    def test_a_copy_older_than_the_changes_kept_gets_the_whole_config(self) -> None:
        copy = ConfigData.from_json(self.service.read_config()[0])
        self.service.config_store._recent.clear()  # (as after WConfD's start)
        self.run_ok(self.client.register_owner(self.a))
        self.run_ok(self.client.try_update_locks(self.a, [("cluster/BGL", "shared"), ("instance/" + INST1, "exclusive")]))
        self.change_os(INST1, "arch")
        self.service.config_store._recent.clear()
        self.client.adopt_config(copy.serial_no, copy)
        del self.snapshots[:]
        fresh = self.run_ok(self.client.read_config())
        self.assertEqual((self.snapshots, by_name(fresh, "instance", INST1).os), ([1], "arch"))

    def test_changes_that_do_not_apply_are_dropped_for_the_whole_config(self) -> None:
        copy = ConfigData.from_json(self.service.read_config()[0])
        self.client.adopt_config(copy.serial_no - 1, copy)  # a copy that is not what its serial says
        del self.snapshots[:]
        self.run_ok(self.client.register_owner(self.a))
        self.run_ok(self.client.try_update_locks(self.a, [("cluster/BGL", "shared"), ("instance/" + INST1, "exclusive")]))
        self.change_os(INST1, "alpine")
        self.client.adopt_config(copy.serial_no - 5, copy)
        fresh = self.run_ok(self.client.read_config())
        self.assertEqual((self.snapshots, by_name(fresh, "instance", INST1).os), ([1], "alpine"))

    def test_without_deltas_the_whole_config_is_sent_as_before(self) -> None:
        serial = self.service.config_store.serial_no
        self.run_ok(self.client.register_owner(self.a))
        self.run_ok(self.client.try_update_locks(self.a, [("cluster/BGL", "shared"), ("instance/" + INST1, "exclusive")]))
        self.change_os(INST1, "suse")
        answer = self.run_ok(self.client.call(c.ReadConfig, unless_serial=serial))
        self.assertTrue(answer["config"])
        self.assertIsNone(answer.get("changes"))
        answer = self.run_ok(self.client.call(c.ReadConfig, unless_serial=serial, deltas=True))
        self.assertEqual((answer["config"], [r["s"] for r in answer["changes"]]), (b"", [serial + 1]))


class TwoReadsTests(SynchronousTestCase):
    """Two reads sent from one copy (a job process's prefetch and its registration; LuxiD's queries): each
    answer is applied to the copy its read was sent from."""

    def test_an_answer_is_applied_to_the_copy_its_read_was_sent_from(self) -> None:
        from ganeti.wconfd.client import WConfdClient

        config = make_config(nodes=3, instances=3)
        dropped, kept = ConfigStore(config), ConfigStore(config)  # WConfD before and after dropping a change
        base = (config.serial_no, ConfigData.from_json(dropped.snapshot()))
        inst1, inst2 = by_name(dropped, "instance", INST1), by_name(kept, "instance", "inst2.example.test")
        dropped.update("instance", attrs.evolve(inst1, os="dropped").to_dict())
        kept.update("instance", attrs.evolve(inst2, os="kept").to_dict())
        self.assertEqual(dropped.serial_no, kept.serial_no)  # the dropped change's serial, given again
        client = WConfdClient(None, None)
        client.cache_config = True
        client._config = base
        first = client._take_config({"config": b"", "serial_no": dropped.serial_no,
                                     "changes": dropped.changes_since(*self.key(base[1]))}, base)
        self.assertEqual(first.find_instance(INST1).os, "dropped")
        second = client._take_config({"config": b"", "serial_no": kept.serial_no,
                                      "changes": kept.changes_since(*self.key(base[1]))}, base)
        self.assertEqual(_as_json(second), _as_json(ConfigData.from_json(kept.snapshot())))
        self.assertEqual(client._config, (kept.serial_no, second))

    @staticmethod
    def key(config: ConfigData) -> tuple[int, float | None]:
        return config.serial_no, config.mtime

    def test_a_changes_answer_without_a_copy_asks_for_the_whole_config(self) -> None:
        from ganeti.wconfd.client import WConfdClient

        client = WConfdClient(None, None)
        self.assertIsNone(client._take_config({"config": b"", "serial_no": 5, "changes": []}, None))

    def test_a_whole_number_mtime_is_sent_as_a_float(self) -> None:
        from ganeti.wconfd.client import _unless

        config = attrs.evolve(make_config(), mtime=1700000000)
        arguments = _unless((config.serial_no, config))
        self.assertEqual(c.ReadConfig.makeArguments(arguments, None)[b"unless_mtime"], b"1700000000.0")


class ErrorTests(SynchronousTestCase):
    def test_changes_of_an_unknown_kind_are_refused_by_the_store_not_kept(self) -> None:
        store = ConfigStore(make_config())
        before = store.serial_no
        self.assertRaises(errors.ConfigurationError, store.update, "volume", {"uuid": "x"})
        self.assertEqual(store.changes_since(before), [])
