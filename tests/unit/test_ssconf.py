"""Tests for L{ganeti.ssconf}."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import attrs
import pytest

from ganeti import GANETI_RELEASE, errors, ssconf
from ganeti.objects import ConfigData
from ganeti.paths import Paths
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = _TESTDATA_DIR

SSCONF_DIR = TESTDATA / "ssconf"


def _testdata_config() -> ConfigData:
    return ConfigData.from_json((TESTDATA / "config.data").read_bytes())


def _testdata_files() -> dict[str, bytes]:
    prefix = "ssconf_"
    return {p.name[len(prefix) :]: p.read_bytes() for p in SSCONF_DIR.iterdir() if p.name.startswith(prefix)}


@pytest.fixture(scope="module")
def testdata_cfg() -> ConfigData:
    return _testdata_config()


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths(str(tmp_path))


# --- compute against Ganeti 3.0.2's own output ----------------------------------


def test_keys_are_the_files_ganeti_wrote() -> None:
    assert set(ssconf.KEYS) == set(_testdata_files())
    assert len(ssconf.KEYS) == len(set(ssconf.KEYS))


def test_compute_gives_every_key(testdata_cfg: ConfigData) -> None:
    assert set(ssconf.compute(testdata_cfg)) == set(ssconf.KEYS)


@pytest.mark.parametrize("key", sorted(_testdata_files()))
def test_compute_matches_ganeti_byte_for_byte(testdata_cfg: ConfigData, key: str) -> None:
    values = ssconf.compute(testdata_cfg, release_version="3.0.2")
    assert ssconf.render(values[key]) == _testdata_files()[key]


def test_release_version_defaults_to_ours(testdata_cfg: ConfigData) -> None:
    assert ssconf.compute(testdata_cfg)["release_version"] == [GANETI_RELEASE]


# --- render -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ([], b""),
        ([""], b""),
        ("", b""),
        (["a"], b"a\n"),
        (["a", "b"], b"a\nb\n"),
        ("a\nb", b"a\nb\n"),
        ("a\nb\n", b"a\nb\n"),
        (["n\u00e9"], "n\u00e9\n".encode()),
    ],
)
def test_render(value: Any, expected: bytes) -> None:
    assert ssconf.render(value) == expected


# --- ordering and special cases -------------------------------------------------------


def _node(uuid: str, name: str, group: str = "g-default", **fields: Any) -> dict[str, Any]:
    node = {
        "uuid": uuid,
        "name": name,
        "primary_ip": "10.0.0.%d" % (sum(map(ord, name)) % 250),
        "secondary_ip": "10.1.0.1",
        "group": group,
        "master_candidate": False,
        "offline": False,
        "vm_capable": True,
        "ndparams": {},
        "serial_no": 1,
    }
    node.update(fields)
    return node


def _cluster_dict(nodes: list[dict[str, Any]], **cluster: Any) -> dict[str, Any]:
    base_cluster = {
        "cluster_name": "c.example",
        "master_node": nodes[0]["uuid"],
        "ndparams": {"ssh_port": 22},
        "enabled_hypervisors": ["kvm", "fake"],
        "hvparams": {},
        "serial_no": 1,
    }
    base_cluster.update(cluster)
    return {
        "version": 3000000,
        "cluster": base_cluster,
        "nodes": {n["uuid"]: n for n in nodes},
        "nodegroups": {
            "g-default": {"uuid": "g-default", "name": "default", "ndparams": {}, "serial_no": 1},
            "g-other": {"uuid": "g-other", "name": "other", "ndparams": {"ssh_port": 2222}, "serial_no": 1},
        },
        "instances": {},
        "serial_no": 1,
    }


@pytest.fixture
def multi() -> ConfigData:
    """Four nodes whose names need nice sorting; UUID order differs from name order."""
    nodes = [
        _node("u0", "node10", master_candidate=True),  # the master
        _node("u1", "node2", master_candidate=True),
        _node("u3", "node1", offline=True, vm_capable=False),
        _node("u2", "node3", group="g-other"),  # not a candidate
    ]
    return ConfigData.from_dict(_cluster_dict(nodes))


def test_node_lists_are_nice_sorted(multi: ConfigData) -> None:
    values = ssconf.compute(multi)
    assert values["node_list"] == ["node1", "node2", "node3", "node10"]
    assert values["online_nodes"] == ["node2", "node3", "node10"]
    assert values["offline_nodes"] == ["node1"]
    assert values["node_vm_capable"] == ["node1=False", "node2=True", "node3=True", "node10=True"]
    assert [line.split()[0] for line in values["node_primary_ips"]] == values["node_list"]
    assert values["node_secondary_ips"][0] == "node1 10.1.0.1"


def test_master_candidates_in_uuid_order(multi: ConfigData) -> None:
    """Ganeti lists the master and the candidates in node UUID order."""
    values = ssconf.compute(multi)
    assert values["master_candidates"] == ["node10", "node2"]
    ips = {n.name: n.primary_ip for n in multi.nodes.values()}
    assert values["master_candidates_ips"] == [ips["node10"], ips["node2"]]
    assert values["master_node"] == ["node10"]


def test_master_is_a_candidate_even_if_not_flagged(multi: ConfigData) -> None:
    master = attrs.evolve(multi.nodes["u0"], master_candidate=False)
    cfg = attrs.evolve(multi, nodes={**multi.nodes, "u0": master})
    assert ssconf.compute(cfg)["master_candidates"] == ["node10", "node2"]


def test_unknown_master(multi: ConfigData) -> None:
    cfg = attrs.evolve(multi, cluster=attrs.evolve(multi.cluster, master_node="nope"))
    assert ssconf.compute(cfg)["master_node"] == ["NO MASTER"]


def test_ssh_port_fallback(multi: ConfigData) -> None:
    """Node ndparams win over the group's, which win over the cluster's."""
    node2 = attrs.evolve(multi.nodes["u1"], ndparams={"ssh_port": 8022})
    orphan = attrs.evolve(multi.nodes["u3"], group="no-such-group")
    cfg = attrs.evolve(multi, nodes={**multi.nodes, "u1": node2, "u3": orphan})
    assert ssconf.compute(cfg)["ssh_ports"] == [
        "node1=",  # unknown group: Ganeti writes an empty port
        "node2=8022",  # node
        "node3=2222",  # group
        "node10=22",  # cluster
    ]


def test_nodegroups_networks_and_certs() -> None:
    data = _cluster_dict([_node("u1", "n1")])
    data["nodegroups"] = {
        "b": {"uuid": "b", "name": "group10"},
        "a": {"uuid": "a", "name": "group9"},
        "c": {"uuid": "c", "name": "alpha"},
    }
    data["networks"] = {"n2": {"uuid": "n2", "name": "aaa"}, "n1": {"uuid": "n1", "name": "zzz"}}
    data["cluster"]["candidate_certs"] = {"u2": "BB:BB", "u1": "AA:AA"}
    values = ssconf.compute(ConfigData.from_dict(data))
    assert values["nodegroups"] == ["c alpha", "a group9", "b group10"]
    assert values["networks"] == ["n1 zzz", "n2 aaa"]
    assert values["master_candidates_certs"] == ["u1=AA:AA", "u2=BB:BB"]


def test_instances_tags_uid_pool_and_flags() -> None:
    data = _cluster_dict(
        [_node("u1", "n1")],
        tags=["web", "db", "web"],
        uid_pool=[[1000, 1010], [2000, 2000]],
        maintain_node_health=True,
        enabled_user_shutdown=True,
        primary_ip_family=10,
        master_netmask=64,
    )
    data["instances"] = {
        "i1": {"uuid": "i1", "name": "inst10"},
        "i2": {"uuid": "i2", "name": "inst9"},
        "i3": {"uuid": "i3"},  # no name: left out, as Ganeti does
    }
    values = ssconf.compute(ConfigData.from_dict(data))
    assert values["instance_list"] == ["inst9", "inst10"]
    assert values["cluster_tags"] == ["db", "web"]
    assert values["uid_pool"] == ["1000-1010", "2000"]
    assert values["maintain_node_health"] == ["True"]
    assert values["enabled_user_shutdown"] == ["True"]
    assert values["primary_ip_family"] == ["10"]
    assert values["master_netmask"] == ["64"]
    assert values["hypervisor_list"] == ["kvm", "fake"]


def test_hvparams_formatting() -> None:
    params = {
        "s": "text",
        "b": False,
        "i": 42,
        "f": 0.5,
        "g": 2.0,
        "e": 0.01,
        "n": None,
        "l": [1, "x"],
        "d": {"k": True},
    }
    data = _cluster_dict([_node("u1", "n1")], hvparams={"kvm": params})
    values = ssconf.compute(ConfigData.from_dict(data))
    assert values["hvparams_kvm"] == [
        "b=False",
        'd={"k":true}',
        "e=1.0e-2",
        "f=0.5",
        "g=2",
        "i=42",
        'l=[1,"x"]',
        "n=null",
        "s=text",
    ]
    assert values["hvparams_xen-pvm"] == []


def test_compute_is_fast_on_a_big_cluster() -> None:
    """A 10,000-instance config computes in one pass (no per-item scans)."""
    data = _cluster_dict([_node("u%04d" % i, "node%d" % i) for i in range(200)])
    data["instances"] = {"i%05d" % i: {"uuid": "i%05d" % i, "name": "inst%d" % i} for i in range(10000)}
    values = ssconf.compute(ConfigData.from_dict(data))
    assert len(values["instance_list"]) == 10000
    assert values["instance_list"][:3] == ["inst0", "inst1", "inst2"]
    assert values["node_list"][-1] == "node199"


# --- files ----------------------------------------------------------------------------


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_write_and_read_round_trip(testdata_cfg: ConfigData, paths: Paths) -> None:
    values = ssconf.compute(testdata_cfg, release_version="3.0.2")
    written = ssconf.write_files(paths, values)
    assert sorted(written) == sorted(ssconf.KEYS)
    assert sorted(os.listdir(paths.data_dir)) == sorted("ssconf_" + k for k in ssconf.KEYS)
    expected = _testdata_files()
    for key in ssconf.KEYS:
        with open(paths.ssconf(key), "rb") as handle:
            assert handle.read() == expected[key]
        assert _mode(paths.ssconf(key)) == 0o444
    read = ssconf.read_values(paths)
    assert read == {key: data.decode().rstrip("\n") for key, data in expected.items()}


def test_unchanged_files_not_rewritten(testdata_cfg: ConfigData, paths: Paths) -> None:
    values = ssconf.compute(testdata_cfg)
    ssconf.write_files(paths, values)
    inodes = {key: os.stat(paths.ssconf(key)).st_ino for key in ssconf.KEYS}
    assert ssconf.write_files(paths, values) == []
    changed = dict(values, cluster_name=["other.example"], master_ip=["192.0.2.200"])
    assert sorted(ssconf.write_files(paths, changed)) == ["cluster_name", "master_ip"]
    for key in ssconf.KEYS:
        same = os.stat(paths.ssconf(key)).st_ino == inodes[key]
        assert same == (key not in ("cluster_name", "master_ip")), key
    assert [f for f in os.listdir(paths.data_dir) if not f.startswith("ssconf_")] == []


def test_wrong_mode_is_rewritten(paths: Paths) -> None:
    ssconf.write_files(paths, {"cluster_name": ["c"]})
    os.chmod(paths.ssconf("cluster_name"), 0o644)
    assert ssconf.write_files(paths, {"cluster_name": ["c"]}) == ["cluster_name"]
    assert _mode(paths.ssconf("cluster_name")) == 0o444


def test_string_values_accepted(paths: Paths) -> None:
    ssconf.write_files(paths, {"node_list": "a\nb", "cluster_tags": ""})
    with open(paths.ssconf("node_list"), "rb") as handle:
        assert handle.read() == b"a\nb\n"
    with open(paths.ssconf("cluster_tags"), "rb") as handle:
        assert handle.read() == b""


def test_unknown_key_refused_nothing_written(paths: Paths) -> None:
    with pytest.raises(errors.ConfigurationError, match="bogus"):
        ssconf.write_files(paths, {"cluster_name": ["c"], "bogus": ["x"]})
    assert not os.path.exists(paths.data_dir) or os.listdir(paths.data_dir) == []


def test_oversized_value_refused_nothing_written(paths: Paths) -> None:
    huge = ["x" * 1023] * 129  # 129 KiB with the newlines
    with pytest.raises(errors.ConfigurationError, match="instance_list.*131072"):
        ssconf.write_files(paths, {"cluster_name": ["c"], "instance_list": huge})
    assert not os.path.exists(paths.data_dir) or os.listdir(paths.data_dir) == []
    exactly = "y" * (ssconf.MAX_FILE_SIZE - 1)
    assert ssconf.write_files(paths, {"instance_list": exactly}) == ["instance_list"]


def test_size_limit_can_be_lifted(paths: Paths) -> None:
    """A 10,000-instance cluster with real names needs more than 128 KiB."""
    names = ["instance%05d.example.com" % i for i in range(10000)]
    assert ssconf.write_files(paths, {"instance_list": names}, max_size=None) == ["instance_list"]
    with pytest.raises(errors.ConfigurationError, match="larger than 131072"):
        ssconf.SimpleStore(paths).get_value("instance_list")
    with pytest.raises(errors.ConfigurationError, match="larger than"):
        ssconf.read_values(paths)
    assert ssconf.read_values(paths, max_size=None)["instance_list"].splitlines() == names
    store = ssconf.SimpleStore(paths, max_size=None)
    assert store.get_value("instance_list").count("\n") == 9999


# --- SimpleStore ------------------------------------------------------------------------


@pytest.fixture
def store(testdata_cfg: ConfigData, paths: Paths) -> ssconf.SimpleStore:
    ssconf.write_files(paths, ssconf.compute(testdata_cfg))
    return ssconf.SimpleStore(paths)


def test_store_getters(store: ssconf.SimpleStore) -> None:
    assert store.get_cluster_name() == "cluster.example.test"
    assert store.get_master_node() == "node1.example.test"
    assert store.get_master_ip() == "192.0.2.100"
    assert store.get_master_candidates() == ["node1.example.test"]
    assert store.get_master_candidates_ips() == ["192.0.2.11"]
    assert store.get_node_list() == ["node1.example.test"]
    assert store.get_online_nodes() == ["node1.example.test"]
    assert store.get_node_primary_ips() == {"node1.example.test": "192.0.2.11"}
    assert store.get_nodegroups() == {
        "7900f1c5-b1b6-421c-869e-574d23686a56": "default",
        "eb187439-158a-4f37-891d-69dbd920aaf9": "testgroup",
    }
    assert store.get_primary_ip_family() == 2
    assert store.get_hvparams("fake") == {"migration_mode": "live"}
    assert store.get_hvparams("kvm")["acpi"] == "True"
    assert store.get_hvparams("xen-pvm")["root_path"] == "/dev/xvda1"
    assert store.get_master_candidates_certs() == {
        "cbfe05be-22f4-46f2-9bd0-93a1a74f659c": "11:EE:63:02:C6:FD:34:90:2D:8A:AA:2A:7D:4D:41:8D:90:2F:4F:56"
    }


def test_store_empty_list(paths: Paths) -> None:
    ssconf.write_files(paths, {"online_nodes": []})
    assert ssconf.SimpleStore(paths).get_online_nodes() == []


def test_store_missing_file(paths: Paths) -> None:
    store = ssconf.SimpleStore(paths)
    with pytest.raises(errors.ConfigurationError, match="ssconf_cluster_name is missing"):
        store.get_cluster_name()
    with pytest.raises(errors.ConfigurationError, match="missing"):
        store.get_nodegroups()


def test_store_malformed(paths: Paths) -> None:
    ssconf.write_files(paths, {"primary_ip_family": ["7"], "node_primary_ips": ["lonely"]})
    store = ssconf.SimpleStore(paths)
    with pytest.raises(errors.ConfigurationError, match="primary IP family"):
        store.get_primary_ip_family()
    with pytest.raises(errors.ConfigurationError, match="Malformed"):
        store.get_node_primary_ips()
    with pytest.raises(errors.ConfigurationError, match="hypervisor"):
        store.get_hvparams("vmware")


def test_read_values_skips_missing(paths: Paths) -> None:
    ssconf.write_files(paths, {"cluster_name": ["c"], "node_list": ["a", "b"]})
    assert ssconf.read_values(paths) == {"cluster_name": "c", "node_list": "a\nb"}
