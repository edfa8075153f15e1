"""The fake hypervisor: instance state in files under each node's root."""

import os

import pytest
from zope.interface.verify import verifyObject

from ganeti.backend import hypervisor as hv
from ganeti.backend.hypervisor.fake import FakeHypervisor
from ganeti.objects import Instance
from ganeti.paths import Paths


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def inst(name="inst1.example.com", memory=256, vcpus=2):
    return Instance(name=name, hypervisor="fake", beparams={"maxmem": memory, "vcpus": vcpus})


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def node(tmp_path, clock):
    return FakeHypervisor(Paths(str(tmp_path / "node1")), memory_total=4096, cpu_total=4, clock=clock)


@pytest.fixture
def node2(tmp_path, clock):
    return FakeHypervisor(Paths(str(tmp_path / "node2")), memory_total=4096, cpu_total=4, clock=clock)


def test_provides_interface(node):
    assert verifyObject(hv.IHypervisor, node)


def test_state_file_lives_under_root(node, tmp_path):
    node.start_instance(inst(), [], False)
    path = tmp_path / "node1" / "var" / "run" / "ganeti" / "fake-hypervisor" / "inst1.example.com"
    assert path.is_file()
    import json

    record = json.loads(path.read_text())
    assert record["memory"] == 256 and record["vcpus"] == 2 and record["state"] == "running"


def test_lifecycle(node, clock):
    assert node.list_instances() == []
    assert node.get_instance_info("inst1.example.com") is None
    node.start_instance(inst(), [("disk", "/srv/x/disk0", None)], False)
    assert node.list_instances() == ["inst1.example.com"]
    clock.now += 30
    assert node.get_instance_info("inst1.example.com") == {
        "memory": 256, "vcpus": 2, "state": hv.STATE_RUNNING, "time": 30,
    }
    with pytest.raises(hv.HypervisorError):
        node.start_instance(inst(), [], False)
    node.reboot_instance(inst())
    assert node.get_instance_info("inst1.example.com")["time"] == 0
    node.stop_instance(inst(), False, 10)
    assert node.list_instances() == []
    assert node.get_instance_info("inst1.example.com") is None


def test_stop_not_running(node):
    with pytest.raises(hv.HypervisorError):
        node.stop_instance(inst(), False, 10)
    node.stop_instance(inst(), True, 10)  # forced: nothing to do


def test_reboot_not_running(node):
    with pytest.raises(hv.HypervisorError):
        node.reboot_instance(inst())


def test_errors_are_op_exec_errors():
    from ganeti import errors

    assert issubclass(hv.HypervisorError, errors.OpExecError)


def test_paused_start_counts_as_running(node):
    node.start_instance(inst(), [], True)
    assert node.list_instances() == ["inst1.example.com"]


def test_all_instances_info_and_memory(node):
    node.start_instance(inst("a", 512, 1), [], False)
    node.start_instance(inst("b", 1024, 4), [], False)
    info = node.get_all_instances_info()
    assert sorted(info) == ["a", "b"]
    assert info["b"]["memory"] == 1024 and info["b"]["vcpus"] == 4
    node_info = node.get_node_info()
    assert node_info["memory_total"] == 4096
    assert node_info["memory_free"] == 4096 - 1536
    assert node_info["cpu_total"] == 4


def test_node_info_defaults_from_machine(tmp_path):
    info = FakeHypervisor(Paths(str(tmp_path))).get_node_info()
    assert info["memory_total"] > 0 and info["memory_free"] == info["memory_total"]
    assert info["cpu_total"] >= 1


def test_console(node):
    console = node.get_console_info(inst())
    assert console["kind"] == hv.CONS_MESSAGE
    assert console["instance"] == "inst1.example.com"
    assert "fake" in console["message"]


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", ""])
def test_bad_names_refused(node, name):
    with pytest.raises(hv.HypervisorError):
        node.start_instance(inst(name), [], False)


def test_beparams_fallbacks():
    assert hv.instance_memory(Instance(name="x", beparams={"memory": 64})) == 64
    assert hv.instance_memory(Instance(name="x")) == 128
    assert hv.instance_vcpus(Instance(name="x")) == 1


def _migrate(source, target, instance, success=True):
    info = source.migration_info(instance)
    target.accept_instance(instance, info)
    source.migrate_instance(instance, "node2")
    target.finalize_migration(instance, info, success)
    source.finalize_migration(instance, info, success)


def test_migration_moves_state_between_roots(node, node2, tmp_path):
    node.start_instance(inst(), [], False)
    _migrate(node, node2, inst())
    assert node.list_instances() == []
    assert node2.list_instances() == ["inst1.example.com"]
    assert node2.get_instance_info("inst1.example.com")["memory"] == 256
    assert node.get_node_info()["memory_free"] == 4096
    assert node2.get_node_info()["memory_free"] == 4096 - 256
    leftovers = os.listdir(tmp_path / "node1" / "var" / "run" / "ganeti" / "fake-hypervisor")
    assert leftovers == []
    # and back again
    _migrate(node2, node, inst())
    assert node.list_instances() == ["inst1.example.com"] and node2.list_instances() == []


def test_accepted_instance_is_not_running_yet(node, node2):
    node.start_instance(inst(), [], False)
    node2.accept_instance(inst(), node.migration_info(inst()))
    assert node2.list_instances() == []
    assert node2.get_instance_info("inst1.example.com") is None
    # but its memory is reserved
    assert node2.get_node_info()["memory_free"] == 4096 - 256
    with pytest.raises(hv.HypervisorError):
        node2.start_instance(inst(), [], False)


def test_failed_migration_rolls_back(node, node2):
    node.start_instance(inst(), [], False)
    _migrate(node, node2, inst(), success=False)
    assert node.list_instances() == ["inst1.example.com"]
    assert node2.list_instances() == []
    assert node2.get_node_info()["memory_free"] == 4096


def test_migration_refusals(node, node2):
    with pytest.raises(hv.HypervisorError):
        node.migration_info(inst())
    with pytest.raises(hv.HypervisorError):
        node.migrate_instance(inst(), "node2")
    node.start_instance(inst(), [], False)
    node2.start_instance(inst(), [], False)
    with pytest.raises(hv.HypervisorError):
        node2.accept_instance(inst(), node.migration_info(inst()))
    with pytest.raises(hv.HypervisorError):
        node.finalize_migration(inst(), {}, True)


def test_migration_status(node):
    node.start_instance(inst(), [], False)
    assert node.get_migration_status(inst())["status"] == "none"
    node.migrate_instance(inst(), "node2")
    assert node.get_migration_status(inst())["status"] == "completed"
