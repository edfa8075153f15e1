"""Tests for L{ganeti.wconfd.store}: the in-memory config of WConfD."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from ganeti import errors, serializer
from ganeti.objects import NIC, ConfigData, Disk, Instance, Network, NodeGroup
from ganeti.wconfd import store as store_module
from ganeti.wconfd.store import ConfigStore, UnknownEntity
from tests.unit.wconfd_helpers import MASTER, TESTDATA, by_name, make_config


def _disk(node: str, name: str) -> dict[str, Any]:
    return Disk(dev_type="file", logical_id=["loop", "/srv/%s" % name], nodes=[node], size=512, mode="rw").to_dict()


class StoreTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = itertools.count(1000)
        self.patch(store_module, "now", lambda: float(next(self.clock)))
        self.original = make_config(nodes=2, instances=3)
        self.store = ConfigStore(self.original)

    def instance(self, name: str = "inst1.example.test") -> Instance:
        return by_name(self.store, "instance", name)

    def node(self, name: str) -> Any:
        return by_name(self.store, "node", name)

    def assertRefused(self, call: Any, *args: Any, exc: type[Exception] = errors.ConfigurationError) -> Exception:
        """C{call(*args)} raises and the store is exactly as before."""
        before, serial = self.store.snapshot(), self.store.serial_no
        raised = self.assertRaises(exc, call, *args)
        self.assertIs(self.store.snapshot(), before)
        self.assertEqual(self.store.serial_no, serial)
        return raised


class UpdateTests(StoreTestCase):
    def test_update_bumps_entity_serial_mtime_and_config_serial(self) -> None:
        """An update stamps the entity (serial + 1, new mtime, old ctime) and the config."""
        inst = self.instance()
        serial = self.store.serial_no
        stored, record = self.store.update("instance", attrs.evolve(inst, os="debian").to_dict())
        self.assertEqual(stored.serial_no, inst.serial_no + 1)
        self.assertEqual(stored.mtime, 1000.0)
        self.assertEqual(stored.ctime, inst.ctime)
        self.assertEqual(self.store.serial_no, serial + 1)
        self.assertEqual(self.store.mtime, 1000.0)
        self.assertEqual(self.store.lookup("instance", inst.uuid), stored)
        self.assertEqual(self.store.lookup("instance", inst.uuid).os, "debian")
        self.assertEqual(record["s"], serial + 1)

    def test_update_cluster(self) -> None:
        """The cluster is updated like an entity and keeps its master node."""
        cluster = self.store.cluster
        stored, _ = self.store.update("cluster", attrs.evolve(cluster, candidate_pool_size=3).to_dict())
        self.assertEqual(self.store.cluster.candidate_pool_size, 3)
        self.assertEqual(stored.serial_no, cluster.serial_no + 1)

    def test_update_with_stale_serial_is_refused_and_changes_nothing(self) -> None:
        """A writer that read an older version gets an error, not a lost update."""
        inst = self.instance()
        self.store.update("instance", attrs.evolve(inst, os="first").to_dict())
        error = self.assertRefused(self.store.update, "instance", attrs.evolve(inst, os="second").to_dict())
        self.assertIn("was changed since it was read", str(error))
        self.assertEqual(self.instance().os, "first")

    def test_rename_to_a_taken_name_is_refused(self) -> None:
        inst = self.instance()
        error = self.assertRefused(
            self.store.update, "instance", attrs.evolve(inst, name="inst2.example.test").to_dict(), exc=errors.ConfigVerifyError
        )
        self.assertIn("already used", str(error))

    def test_rename_frees_the_old_name(self) -> None:
        """After a rename the entity is found by its new name only."""
        inst = self.instance()
        self.store.update("instance", attrs.evolve(inst, name="web.example.test").to_dict())
        self.assertEqual(self.store.lookup("instance", "web.example.test").uuid, inst.uuid)
        self.assertRaises(UnknownEntity, self.store.lookup, "instance", "inst1.example.test")
        # and the freed name can be taken by another instance
        other = self.instance("inst2.example.test")
        self.store.update("instance", attrs.evolve(other, name="inst1.example.test").to_dict())
        self.assertEqual(self.store.lookup("instance", "inst1.example.test").uuid, other.uuid)

    def test_node_in_unknown_group_is_refused(self) -> None:
        node = self.node("node2.example.test")
        error = self.assertRefused(
            self.store.update, "node", attrs.evolve(node, group="no-such-group").to_dict(), exc=errors.ConfigVerifyError
        )
        self.assertIn("node group 'no-such-group' does not exist", str(error))

    def test_instance_on_unknown_primary_node_is_refused(self) -> None:
        inst = self.instance()
        error = self.assertRefused(
            self.store.update, "instance", attrs.evolve(inst, primary_node="no-such-node").to_dict(), exc=errors.ConfigVerifyError
        )
        self.assertIn("primary node 'no-such-node' does not exist", str(error))

    def test_instance_taking_another_instances_disk_is_refused(self) -> None:
        inst, other = self.instance(), self.instance("inst2.example.test")
        changed = attrs.evolve(inst, disks=list(inst.disks) + list(other.disks))
        error = self.assertRefused(self.store.update, "instance", changed.to_dict(), exc=errors.ConfigVerifyError)
        self.assertIn("belongs to instance inst2.example.test", str(error))

    def test_instance_on_unknown_network_is_refused(self) -> None:
        inst = self.instance()
        changed = attrs.evolve(inst, nics=[attrs.evolve(inst.nics[0], network="no-such-network")])
        error = self.assertRefused(self.store.update, "instance", changed.to_dict(), exc=errors.ConfigVerifyError)
        self.assertIn("network 'no-such-network' does not exist", str(error))

    def test_unknown_entity_is_refused(self) -> None:
        inst = self.instance()
        self.assertRefused(self.store.update, "instance", attrs.evolve(inst, uuid="no-such-uuid").to_dict(), exc=UnknownEntity)

    def test_update_naming_the_entity_by_name_instead_of_uuid_is_refused(self) -> None:
        """The uuid of an update is a uuid: a name there must not create a twin.

        (It used to be resolved like a lookup key, so a node renamed with its
        old name as uuid was stored a second time under the key 'node2...'.)
        """
        node = self.node("node2.example.test")
        changed = attrs.evolve(node, uuid=node.name, name="node9.example.test")
        self.assertRefused(self.store.update, "node", changed.to_dict(), exc=UnknownEntity)
        self.assertEqual(len(self.store.maps["node"]), 3)


class AddRemoveTests(StoreTestCase):
    def test_add_instance_with_disks(self) -> None:
        """The instance gets fresh uuids for itself and its disks, all stamped."""
        primary = self.node("node2.example.test").uuid
        new = Instance(name="db.example.test", primary_node=primary, os="noop", disk_template="file")
        serial = self.store.serial_no
        stored, record = self.store.add(
            "instance", new.to_dict(), disks=[_disk(primary, "db0"), _disk(primary, "db1")]
        )
        self.assertEqual(self.store.lookup("instance", "db.example.test"), stored)
        self.assertEqual(len(stored.disks), 2)
        for uuid in stored.disks:
            disk = self.store.lookup("disk", uuid)
            self.assertEqual((disk.serial_no, disk.ctime, disk.nodes), (1, 1000.0, [primary]))
        self.assertEqual((stored.serial_no, stored.ctime, stored.mtime), (1, 1000.0, 1000.0))
        self.assertEqual(self.store.serial_no, serial + 1)
        self.assertEqual([c[0] for c in record["c"]], ["disk", "disk", "instance"])
        self.assertEqual(self.store.verify(), [])

    def test_add_instance_with_taken_name_is_refused(self) -> None:
        primary = self.node("node2.example.test").uuid
        new = Instance(name="inst1.example.test", primary_node=primary)
        self.assertRefused(self.store.add, "instance", new.to_dict(), [_disk(primary, "x")], exc=errors.ConfigVerifyError)
        self.assertEqual(len(self.store.maps["disk"]), 3)

    def test_add_node_group_and_network(self) -> None:
        group, _ = self.store.add("nodegroup", NodeGroup(name="rack2").to_dict())
        network, _ = self.store.add("network", Network(name="public", network="10.0.0.0/24").to_dict())
        self.assertEqual(self.store.lookup("nodegroup", "rack2").uuid, group.uuid)
        self.assertEqual(self.store.lookup("network", network.uuid).name, "public")

    def test_remove_node_with_instances_is_refused(self) -> None:
        error = self.assertRefused(self.store.remove, "node", "node2.example.test")
        self.assertIn("still has instances: inst2.example.test", str(error))

    def test_remove_master_node_is_refused(self) -> None:
        error = self.assertRefused(self.store.remove, "node", MASTER)
        self.assertIn("is the master node", str(error))

    def test_remove_node_without_instances(self) -> None:
        node = self.node("node3.example.test")
        self.store.remove("instance", "inst3.example.test")
        removed, _ = self.store.remove("node", node.uuid)
        self.assertEqual(removed, node)
        self.assertRaises(UnknownEntity, self.store.lookup, "node", "node3.example.test")

    def test_remove_last_group_is_refused(self) -> None:
        """The only node group stays, even when it has no nodes."""
        empty = attrs.evolve(self.original, nodes={}, instances={}, disks={})
        self.store = ConfigStore(empty)
        (group,) = empty.nodegroups.values()
        error = self.assertRefused(self.store.remove, "nodegroup", group.uuid)
        self.assertIn("is the last one", str(error))

    def test_remove_group_with_nodes_is_refused_and_empty_one_allowed(self) -> None:
        (default,) = self.original.nodegroups.values()
        spare, _ = self.store.add("nodegroup", NodeGroup(name="spare").to_dict())
        self.assertRefused(self.store.remove, "nodegroup", default.uuid)
        self.store.remove("nodegroup", "spare")
        self.assertRaises(UnknownEntity, self.store.lookup, "nodegroup", spare.uuid)

    def test_a_group_emptied_by_moving_its_nodes_can_be_removed(self) -> None:
        (default,) = self.original.nodegroups.values()
        spare, _ = self.store.add("nodegroup", NodeGroup(name="spare").to_dict())
        for node in list(self.store.maps["node"].values()):
            self.store.update("node", attrs.evolve(node, group=spare.uuid).to_dict())
        self.store.remove("nodegroup", default.uuid)
        self.assertRefused(self.store.remove, "nodegroup", spare.uuid)
        self.assertEqual(self.store.verify(), [])

    def test_a_disk_dropped_by_one_instance_can_be_attached_to_another(self) -> None:
        inst, other = self.instance(), self.instance("inst2.example.test")
        disk = inst.disks[0]
        self.store.update("instance", attrs.evolve(inst, disks=[]).to_dict())
        self.store.update("instance", attrs.evolve(other, disks=list(other.disks) + [disk]).to_dict())
        self.assertEqual(self.instance("inst2.example.test").disks, list(other.disks) + [disk])
        # and the first one cannot take it back
        self.assertRefused(
            self.store.update, "instance", attrs.evolve(self.instance(), disks=[disk]).to_dict(), exc=errors.ConfigVerifyError
        )

    def test_remove_instance_removes_its_disks(self) -> None:
        inst = self.instance()
        other_disks = set(self.store.maps["disk"]) - set(inst.disks)
        self.store.remove("instance", inst.name)
        self.assertEqual(set(self.store.maps["disk"]), other_disks)
        self.assertRaises(UnknownEntity, self.store.lookup, "instance", inst.uuid)
        self.assertEqual(self.store.verify(), [])

    def test_remove_network_in_use_is_refused(self) -> None:
        network, _ = self.store.add("network", Network(name="public").to_dict())
        inst = self.instance()
        self.store.update("instance", attrs.evolve(inst, nics=[NIC(network=network.uuid)]).to_dict())
        self.assertRefused(self.store.remove, "network", "public")


class ReadTests(StoreTestCase):
    def test_lookup_by_name_and_by_uuid(self) -> None:
        inst = self.instance()
        self.assertIs(self.store.lookup("instance", inst.uuid), self.store.lookup("instance", inst.name))
        self.assertIs(self.store.lookup("cluster", "anything"), self.store.cluster)
        disk = inst.disks[0]
        self.assertEqual(self.store.lookup("disk", disk).uuid, disk)

    def test_lookup_of_unknown_entity_or_kind(self) -> None:
        error = self.assertRaises(UnknownEntity, self.store.lookup, "nodegroup", "nope")
        self.assertEqual(str(error), "node group 'nope' is not known")
        self.assertRaises(errors.ConfigurationError, self.store.lookup, "bogus", "x")

    def test_snapshot_is_config_as_json_after_changes(self) -> None:
        """The fragment-built bytes say what C{config().to_json()} says."""
        apply_changes(self.store)
        self.assertEqual(orjson.loads(self.store.snapshot()), orjson.loads(self.store.config().to_json()))
        self.assertEqual(ConfigData.from_json(self.store.snapshot()), self.store.config())

    def test_snapshot_is_cached_until_the_next_change(self) -> None:
        first = self.store.snapshot()
        self.assertIs(self.store.snapshot(), first)
        self.store.lookup("instance", "inst1.example.test")
        self.store.config()
        self.assertIs(self.store.snapshot(), first)
        self.store.update("instance", attrs.evolve(self.instance(), os="x").to_dict())
        second = self.store.snapshot()
        self.assertIsNot(second, first)
        self.assertNotEqual(second, first)
        self.assertIs(self.store.snapshot(), second)

    def test_replay_of_records_reproduces_the_snapshot(self) -> None:
        """Records (through JSON, as in the journal) replayed on the start state give the same bytes."""
        records = apply_changes(self.store)
        replayed = ConfigStore(self.original)
        for record in records:
            replayed.replay(serializer.loads(serializer.dumps(record)))
        self.assertEqual(replayed.snapshot(), self.store.snapshot())
        self.assertEqual(replayed.serial_no, self.store.serial_no)
        # the indexes were rebuilt too: the replayed store refuses what the live one refuses
        self.assertRaises(errors.ConfigurationError, replayed.remove, "node", "node2.example.test")
        self.assertEqual(replayed.lookup("instance", "renamed.example.test").uuid,
                         self.store.lookup("instance", "renamed.example.test").uuid)

    def test_ganeti_3_0_2_config_loads_and_snapshot_equals_the_file(self) -> None:
        raw = (TESTDATA / "config.data").read_bytes()
        store = ConfigStore(ConfigData.from_json(raw))
        self.assertEqual(orjson.loads(store.snapshot()), orjson.loads(raw))
        self.assertEqual(store.verify(), [])
        self.assertEqual(store.lookup("node", store.cluster.master_node).uuid, store.cluster.master_node)


def apply_changes(store: ConfigStore) -> list[dict[str, Any]]:
    """A mix of every kind of change; returns their journal records."""
    records = []

    def keep(result: tuple[Any, dict[str, Any]]) -> Any:
        records.append(result[1])
        return result[0]

    inst1 = by_name(store, "instance", "inst1.example.test")
    node2 = by_name(store, "node", "node2.example.test")
    keep(store.update("instance", attrs.evolve(inst1, os="debian", name="renamed.example.test").to_dict()))
    keep(store.update("node", attrs.evolve(node2, drained=True).to_dict()))
    keep(store.update("cluster", attrs.evolve(store.cluster, candidate_pool_size=4).to_dict()))
    network = keep(store.add("network", Network(name="public", network="10.0.0.0/24").to_dict()))
    group = keep(store.add("nodegroup", NodeGroup(name="rack2").to_dict()))
    node2 = by_name(store, "node", "node2.example.test")
    keep(store.update("node", attrs.evolve(node2, group=group.uuid).to_dict()))
    new = keep(store.add(
        "instance",
        Instance(name="db.example.test", primary_node=node2.uuid, nics=[NIC(network=network.uuid)]).to_dict(),
        [_disk(node2.uuid, "db0")],
    ))
    keep(store.remove("instance", "inst3.example.test"))
    keep(store.remove("node", "node3.example.test"))
    disk = store.lookup("disk", new.disks[0])
    keep(store.update("disk", attrs.evolve(disk, size=2048).to_dict()))
    return records


# --- property: any accepted sequence of changes replays to the same bytes -----

_OPS = st.lists(
    st.tuples(
        st.sampled_from(["os", "rename", "move", "regroup", "add", "remove", "add_group", "remove_group", "nic", "disk"]),
        st.integers(0, 7),
        st.integers(0, 7),
    ),
    max_size=25,
)


def _try_op(store: ConfigStore, op: str, i: int, j: int) -> dict[str, Any] | None:
    """Apply one generated change; C{None} if the store refused it."""
    instances = list(store.maps["instance"].values())
    nodes = list(store.maps["node"].values())
    groups = list(store.maps["nodegroup"].values())
    networks = list(store.maps["network"].values())
    inst = instances[i % len(instances)] if instances else None
    try:
        if op == "os" and inst:
            return store.update("instance", attrs.evolve(inst, os="os%d" % j).to_dict())[1]
        if op == "rename" and inst:
            return store.update("instance", attrs.evolve(inst, name="inst%d.example.test" % j).to_dict())[1]
        if op == "move" and inst:
            return store.update("instance", attrs.evolve(inst, primary_node=nodes[j % len(nodes)].uuid).to_dict())[1]
        if op == "regroup":
            node = nodes[i % len(nodes)]
            return store.update("node", attrs.evolve(node, group=groups[j % len(groups)].uuid).to_dict())[1]
        if op == "add":
            node = nodes[j % len(nodes)].uuid
            new = Instance(name="new%d.example.test" % i, primary_node=node, disk_template="file")
            return store.add("instance", new.to_dict(), [_disk(node, "new%d" % i)] * (j % 3))[1]
        if op == "remove" and inst:
            return store.remove("instance", inst.uuid)[1]
        if op == "add_group":
            return store.add("nodegroup", NodeGroup(name="group%d" % i).to_dict())[1]
        if op == "remove_group":
            return store.remove("nodegroup", groups[i % len(groups)].uuid)[1]
        if op == "nic" and inst:
            if not networks:
                return store.add("network", Network(name="net%d" % j).to_dict())[1]
            nic = NIC(network=networks[j % len(networks)].uuid if j % 2 else None)
            return store.update("instance", attrs.evolve(inst, nics=[nic]).to_dict())[1]
        if op == "disk" and store.maps["disk"]:
            disk = list(store.maps["disk"].values())[i % len(store.maps["disk"])]
            return store.update("disk", attrs.evolve(disk, size=1024 * (j + 1)).to_dict())[1]
    except errors.ConfigurationError:
        return None
    return None


class PropertyTests(SynchronousTestCase):
    @settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_OPS)
    def test_accepted_changes_keep_the_config_valid_and_replay_identically(self, ops: list[Any]) -> None:
        original = make_config(nodes=2, instances=3)
        store = ConfigStore(original)
        records = []
        for op, i, j in ops:
            before = store.snapshot()
            record = _try_op(store, op, i, j)
            if record is None:
                self.assertIs(store.snapshot(), before)  # a refused change leaves no trace
            else:
                records.append(serializer.loads(serializer.dumps(record)))
        self.assertEqual(store.verify(), [])
        self.assertEqual(orjson.loads(store.snapshot()), orjson.loads(store.config().to_json()))
        replayed = ConfigStore(original)
        for record in records:
            replayed.replay(record)
        self.assertEqual(replayed.snapshot(), store.snapshot())
        self.assertEqual(ConfigStore(store.config()).snapshot(), store.snapshot())
