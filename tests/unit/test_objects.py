"""The config model reads and writes Ganeti 3.0's config.data layout."""

import os

import attrs
import orjson
import pytest

from ganeti.objects import NIC, ConfigData, Instance, nice_sort
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = str(_TESTDATA_DIR)
REAL_CONFIG = os.path.join(TESTDATA, "config.data")


def real_config_bytes() -> bytes:
    with open(REAL_CONFIG, "rb") as handle:
        return handle.read()


def test_real_ganeti_config_saves_back_unchanged():
    raw = real_config_bytes()
    assert orjson.loads(ConfigData.from_json(raw).to_json()) == orjson.loads(raw)


def test_real_config_is_understood():
    config = ConfigData.from_json(real_config_bytes())
    assert config.cluster.cluster_name == "cluster.example.test"
    assert config.master_node_name() == "node1.example.test"
    running = config.find_instance("td-diskless1")
    assert running is not None and running.admin_state == "up" and running.tags == ["prod", "web"]
    assert running.nics[0].mac == "aa:00:00:6b:29:d4"
    with_disk = config.find_instance("td-file1")
    assert with_disk is not None
    disk = config.disks[with_disk.disks[0]]
    assert disk.size == 1024 and disk.dev_type == "file"
    assert config.find_group("testgroup") is not None
    assert config.find_node(config.cluster.master_node) is config.find_node("node1.example.test")


def test_unknown_keys_survive_at_every_level():
    data = orjson.loads(real_config_bytes())
    data["future_top"] = {"x": 1}
    data["cluster"]["future_cluster_param"] = [1, 2]
    inst = next(iter(data["instances"].values()))
    inst["future_instance_field"] = "kept"
    inst["nics"][0]["future_nic_field"] = True
    disk = next(iter(data["disks"].values()))
    disk["future_disk_field"] = None
    out = orjson.loads(ConfigData.from_dict(data).to_json())
    assert out == data


def test_absent_fields_stay_absent_and_none_is_not_written():
    nic = NIC(mac="aa:00:00:00:00:01")
    assert nic.to_dict() == {"mac": "aa:00:00:00:00:01", "nicparams": {}}
    inst = Instance.from_dict({"name": "a", "uuid": "u", "serial_no": 1})
    assert inst.to_dict()["name"] == "a" and "network_port" not in inst.to_dict()


def test_touched_bumps_serial_and_mtime():
    inst = Instance(name="a", uuid="u", serial_no=4, mtime=1.0)
    new = inst.touched(5.0)
    assert (new.serial_no, new.mtime) == (5, 5.0)
    assert inst.serial_no == 4  # records are immutable


def test_malformed_records_are_refused():
    with pytest.raises(TypeError):
        ConfigData.from_dict({"nodes": []})
    with pytest.raises(TypeError):
        Instance.from_dict(["not", "a", "dict"])


def test_nice_sort_orders_numbers_numerically():
    assert nice_sort(["node10", "node2", "node1", "alpha"]) == ["alpha", "node1", "node2", "node10"]


def test_evolve_keeps_extra():
    inst = Instance.from_dict({"name": "a", "uuid": "u", "weird": 1})
    assert attrs.evolve(inst, os="x").to_dict()["weird"] == 1
