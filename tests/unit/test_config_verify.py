"""Tests for L{ganeti.config.verify}."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from ganeti import CONFIG_VERSION, errors, serializer
from ganeti.config.verify import verify, verify_or_raise
from ganeti.objects import ConfigData
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = _TESTDATA_DIR

NODE = "cbfe05be-22f4-46f2-9bd0-93a1a74f659c"
GROUP = "7900f1c5-b1b6-421c-869e-574d23686a56"
GROUP2 = "eb187439-158a-4f37-891d-69dbd920aaf9"
FILE1 = "d416e2af-c891-4b3a-bfd9-fe8fa50691dc"  # td-file1, has DISK
DISKLESS1 = "dd63a705-fd13-4041-a916-c76ae31c1000"  # td-diskless1
DISK = "4cdf6f2a-d883-4d1b-b9f3-8796754405fc"

Data = dict[str, Any]


@pytest.fixture(scope="module")
def raw() -> Data:
    data = serializer.loads((TESTDATA / "config.data").read_bytes())
    assert isinstance(data, dict)
    return data


def _with_network(d: Data) -> None:
    d["networks"]["net-1"] = {"uuid": "net-1", "name": "public", "network": "10.0.0.0/24", "serial_no": 1}


def test_testdata_config_is_clean(raw: Data) -> None:
    cfg = ConfigData.from_dict(raw)
    assert verify(cfg) == []
    verify_or_raise(cfg)


def test_clean_with_network_and_nic_reference(raw: Data) -> None:
    d = copy.deepcopy(raw)
    _with_network(d)
    d["instances"][FILE1]["nics"][0]["network"] = "net-1"
    assert verify(ConfigData.from_dict(d)) == []


def _set(path: str, value: Any) -> Callable[[Data], None]:
    """A corruption that sets C{d[a][b]...} (path "a/b/...") to C{value}."""
    *parents, last = path.split("/")

    def corrupt(d: Data) -> None:
        for part in parents:
            d = d[part]
        d[last] = value

    return corrupt


def _delete(path: str) -> Callable[[Data], None]:
    *parents, last = path.split("/")

    def corrupt(d: Data) -> None:
        for part in parents:
            d = d[part]
        del d[last]

    return corrupt


def _rekey(kind: str, old: str, new: str) -> Callable[[Data], None]:
    def corrupt(d: Data) -> None:
        d[kind][new] = d[kind].pop(old)

    return corrupt


def _second_node(**fields: Any) -> Callable[[Data], None]:
    def corrupt(d: Data) -> None:
        node = dict(d["nodes"][NODE], uuid="node-2", name="node2.example.test", master_candidate=False)
        node.update(fields)
        d["nodes"]["node-2"] = node

    return corrupt


def _reuse_uuid_across_kinds(d: Data) -> None:
    group = dict(d["nodegroups"][GROUP2], uuid=NODE)
    del d["nodegroups"][GROUP2]
    d["nodegroups"][NODE] = group


def _duplicate_nic_uuid(d: Data) -> None:
    d["instances"][DISKLESS1]["nics"][0]["uuid"] = d["instances"][FILE1]["nics"][0]["uuid"]


def _nic_unknown_network(d: Data) -> None:
    d["instances"][FILE1]["nics"][0]["network"] = "no-such-net"


def _duplicate_network_names(d: Data) -> None:
    _with_network(d)
    d["networks"]["net-2"] = dict(d["networks"]["net-1"], uuid="net-2")


CORRUPTIONS: list[tuple[str, Callable[[Data], None], str]] = [
    (
        "key differs from uuid",
        _rekey("nodegroups", GROUP2, "other-key"),
        "node group 'testgroup' is stored under key 'other-key' but its uuid is '%s'" % GROUP2,
    ),
    (
        "object without uuid",
        _delete("disks/%s/uuid" % DISK),
        "disk with uuid '%s' is stored under key" % DISK,
    ),
    (
        "uuid reused across kinds",
        _reuse_uuid_across_kinds,
        "uuid '%s' is used by both node 'node1.example.test' and node group 'testgroup'" % NODE,
    ),
    (
        "cluster uuid reused",
        _set("cluster/uuid", DISK),
        "uuid '%s' is used by both the cluster and disk" % DISK,
    ),
    (
        "NIC uuid reused",
        _duplicate_nic_uuid,
        "is used by both NIC 0 of instance 'td-file1' and NIC 0 of instance 'td-diskless1'",
    ),
    (
        "duplicate node names",
        _second_node(name="node1.example.test"),
        "2 nodes are named 'node1.example.test' (uuids %s, node-2)" % NODE,
    ),
    (
        "duplicate instance names",
        _set("instances/%s/name" % FILE1, "td-diskless1"),
        "2 instances are named 'td-diskless1'",
    ),
    (
        "duplicate group names",
        _set("nodegroups/%s/name" % GROUP2, "default"),
        "2 node groups are named 'default'",
    ),
    (
        "duplicate network names",
        _duplicate_network_names,
        "2 networks are named 'public' (uuids net-1, net-2)",
    ),
    (
        "unknown master node",
        _set("cluster/master_node", "ghost"),
        "the cluster's master_node 'ghost' is not a known node",
    ),
    ("no master node", _delete("cluster/master_node"), "the cluster has no master_node"),
    (
        "unknown node group",
        _set("nodes/%s/group" % NODE, "ghost"),
        "node 'node1.example.test' belongs to unknown node group 'ghost'",
    ),
    (
        "unknown primary node",
        _set("instances/%s/primary_node" % FILE1, "ghost"),
        "instance 'td-file1' has unknown primary node 'ghost'",
    ),
    (
        "unknown disk",
        _set("instances/%s/disks" % DISKLESS1, ["ghost"]),
        "instance 'td-diskless1' lists unknown disk 'ghost'",
    ),
    (
        "malformed disks",
        _set("instances/%s/disks" % DISKLESS1, "oops"),
        "instance 'td-diskless1' has a malformed disks list",
    ),
    (
        "shared disk",
        _set("instances/%s/disks" % DISKLESS1, [DISK]),
        "disk '%s' is used by both instance 'td-file1' and instance 'td-diskless1'" % DISK,
    ),
    (
        "disk listed twice",
        _set("instances/%s/disks" % FILE1, [DISK, DISK]),
        "instance 'td-file1' lists disk '%s' more than once" % DISK,
    ),
    (
        "disk on unknown node",
        _set("disks/%s/nodes" % DISK, [NODE, "ghost"]),
        "disk with uuid '%s' is on unknown node 'ghost'" % DISK,
    ),
    (
        "disk child on unknown node",
        _set("disks/%s/children" % DISK, [{"dev_type": "plain", "nodes": ["ghost"]}]),
        "child 0 of disk with uuid '%s' is on unknown node 'ghost'" % DISK,
    ),
    (
        "NIC on unknown network",
        _nic_unknown_network,
        "NIC 0 of instance 'td-file1' uses unknown network 'no-such-net'",
    ),
    (
        "candidate cert of unknown node",
        _set("cluster/candidate_certs/ghost", "AA:BB"),
        "the cluster's candidate_certs has an entry for unknown node 'ghost'",
    ),
    # A config.data without "serial_no" loads as 1 (the model's default), so test null.
    ("top-level serial null", _set("serial_no", None), "the configuration has no serial_no"),
    ("top-level serial zero", _set("serial_no", 0), "the configuration has an invalid serial_no 0"),
    ("cluster serial missing", _delete("cluster/serial_no"), "the cluster has no serial_no"),
    (
        "cluster serial is a bool",
        _set("cluster/serial_no", True),
        "the cluster has an invalid serial_no True",
    ),
    (
        "node serial negative",
        _set("nodes/%s/serial_no" % NODE, -3),
        "node 'node1.example.test' has an invalid serial_no -3",
    ),
    (
        "group serial a string",
        _set("nodegroups/%s/serial_no" % GROUP, "1"),
        "node group 'default' has an invalid serial_no '1'",
    ),
    (
        "instance serial a float",
        _set("instances/%s/serial_no" % FILE1, 2.0),
        "instance 'td-file1' has an invalid serial_no 2.0",
    ),
    (
        "disk serial missing",
        _delete("disks/%s/serial_no" % DISK),
        "disk with uuid '%s' has no serial_no" % DISK,
    ),
    (
        "wrong version",
        _set("version", 2160000),
        "configuration version is 2160000, expected %d" % CONFIG_VERSION,
    ),
    (
        "master not a candidate",
        _set("nodes/%s/master_candidate" % NODE, False),
        "master node 'node1.example.test' is not a master candidate",
    ),
    ("node without a name", _delete("nodes/%s/name" % NODE), "node with uuid '%s' has no name" % NODE),
    (
        "instance with empty name",
        _set("instances/%s/name" % FILE1, ""),
        "instance with uuid '%s' has no name" % FILE1,
    ),
    ("cluster without a name", _delete("cluster/cluster_name"), "the cluster has no cluster_name"),
    (
        "filter under a wrong key",
        _set("filters/f1", {"uuid": "f2"}),
        "filter rule with uuid 'f1' is stored under key 'f1'",
    ),
]


@pytest.mark.parametrize(
    "corrupt, expected", [c[1:] for c in CORRUPTIONS], ids=[c[0] for c in CORRUPTIONS]
)
def test_corruption_is_reported(raw: Data, corrupt: Callable[[Data], None], expected: str) -> None:
    data = copy.deepcopy(raw)
    corrupt(data)
    problems = verify(ConfigData.from_dict(data))
    assert any(expected in p for p in problems), problems
    with pytest.raises(errors.ConfigVerifyError) as caught:
        verify_or_raise(ConfigData.from_dict(data))
    assert caught.value.errors == problems
    assert caught.value.msg == "Configuration verification failed"
    assert expected in str(caught.value)


def test_one_problem_per_corruption(raw: Data) -> None:
    """A single corruption gives a single, precise sentence."""
    data = copy.deepcopy(raw)
    data["instances"][FILE1]["primary_node"] = "ghost"
    assert verify(ConfigData.from_dict(data)) == ["instance 'td-file1' has unknown primary node 'ghost'"]


def test_several_problems_all_reported(raw: Data) -> None:
    data = copy.deepcopy(raw)
    data["version"] = 1
    data["nodes"][NODE]["group"] = "ghost"
    data["cluster"]["candidate_certs"]["ghost"] = "AA"
    assert len(verify(ConfigData.from_dict(data))) == 3


def _big_config(instances: int) -> ConfigData:
    nodes = {
        "n%03d" % i: {
            "uuid": "n%03d" % i,
            "name": "node%d" % i,
            "group": "g",
            "master_candidate": i < 10,
            "serial_no": 1,
        }
        for i in range(100)
    }
    insts = {}
    disks = {}
    for i in range(instances):
        node = "n%03d" % (i % 100)
        disks["d%05d" % i] = {"uuid": "d%05d" % i, "nodes": [node], "serial_no": 1}
        insts["i%05d" % i] = {
            "uuid": "i%05d" % i,
            "name": "inst%d" % i,
            "primary_node": node,
            "disks": ["d%05d" % i],
            "nics": [{"uuid": "nic%05d" % i, "network": "net"}],
            "serial_no": 1,
        }
    return ConfigData.from_dict(
        {
            "version": CONFIG_VERSION,
            "cluster": {"cluster_name": "big", "master_node": "n000", "serial_no": 1, "uuid": "c"},
            "nodes": nodes,
            "nodegroups": {"g": {"uuid": "g", "name": "default", "serial_no": 1}},
            "networks": {"net": {"uuid": "net", "name": "net", "serial_no": 1}},
            "instances": insts,
            "disks": disks,
            "serial_no": 1,
        }
    )


def test_ten_thousand_instances() -> None:
    """Linear by design: dict and set look-ups only, one pass per kind."""
    assert verify(_big_config(10000)) == []
