"""Queries against a real Ganeti 3.0.2 config and job queue, and hand-made state."""

import glob
import json
import os
from typing import Any

import attrs
import orjson
import pytest

from ganeti import CONFIG_VERSION, GANETI_RELEASE, errors
from ganeti.jobs.model import QueuedJob
from ganeti.objects import ConfigData, Node
from ganeti.query import (
    RS_NODATA,
    RS_NORMAL,
    RS_OFFLINE,
    RS_UNAVAIL,
    RS_UNKNOWN,
    QueryContext,
    cluster_info,
    config_values,
    legacy_query,
    query,
    query_fields,
)
from ganeti.query.engine import evaluate_row
from ganeti.query.fields import QFT_ALL
from ganeti.query.resources import RESOURCES, haskell_show_double, op_summary
from tests.testdata import TESTDATA as _TESTDATA_DIR

TESTDATA = str(_TESTDATA_DIR)

MASTER_UUID = "cbfe05be-22f4-46f2-9bd0-93a1a74f659c"
DEFAULT_GROUP = "7900f1c5-b1b6-421c-869e-574d23686a56"


@pytest.fixture(scope="module")
def config() -> ConfigData:
    path = os.path.join(TESTDATA, "config.data")
    with open(path, "rb") as handle:
        return ConfigData.from_json(handle.read())


@pytest.fixture(scope="module")
def jobs() -> dict[int, QueuedJob]:
    found = {}
    for path in glob.glob(os.path.join(TESTDATA, "queue", "job-*")):
        with open(path, "rb") as handle:
            job = QueuedJob.from_dict(json.loads(handle.read()))
        found[job.id] = job
    assert found, TESTDATA
    return found


@pytest.fixture
def ctx(config, jobs) -> QueryContext:
    return QueryContext(config, jobs)


def column(result: dict[str, Any], index: int = 0) -> list[Any]:
    return [row[index] for row in result["data"]]


def values(resource: str, fields: list[str], ctx: QueryContext, qfilter: Any = None) -> dict[str, list[Any]]:
    """name -> [[status, value], ...] of C{fields} (the first field must be the name)."""
    result = query(resource, fields, qfilter, ctx)
    return {row[0][1]: row[1:] for row in result["data"]}


def with_nodes(config: ConfigData, *nodes: Node) -> ConfigData:
    extra = {node.uuid: node for node in nodes}
    return attrs.evolve(config, nodes={**config.nodes, **extra})


def node(name: str, uuid: str, **kwargs: Any) -> Node:
    return Node(name=name, uuid=uuid, group=DEFAULT_GROUP, primary_ip="192.0.2.99", **kwargs)


# --- result format ------------------------------------------------------------------


def test_result_shape_and_json(ctx):
    result = query("instance", ["name", "status", "nosuch"], None, ctx)
    assert set(result) == {"fields", "data"}
    for fdef in result["fields"]:
        assert set(fdef) == {"name", "title", "kind", "doc"}
    for row in result["data"]:
        assert len(row) == 3
        for status, value in row:
            assert status == RS_NORMAL or value is None
    assert orjson.loads(orjson.dumps(result)) == result


def test_unknown_field_is_reported_per_cell(ctx):
    result = query("node", ["name", "nosuch"], None, ctx)
    assert result["fields"][1] == {"name": "nosuch", "title": "nosuch", "kind": "unknown", "doc": "Unknown field 'nosuch'"}
    assert column(result, 1) == [[RS_UNKNOWN, None]]


def test_unknown_resource(ctx):
    for resource in ("nosuch", "", None, 3):
        with pytest.raises(errors.OpPrereqError) as info:
            query(resource, ["name"], None, ctx)
        assert info.value.args[1] == errors.ECODE_INVAL
    with pytest.raises(errors.OpPrereqError):
        query_fields("nosuch", None)


def test_fields_must_be_strings(ctx):
    with pytest.raises(errors.OpPrereqError):
        query("node", "name", None, ctx)
    with pytest.raises(errors.OpPrereqError):
        query("node", [1], None, ctx)


def test_bad_filter_is_a_parse_error(ctx):
    with pytest.raises(errors.QueryFilterParseError):
        query("instance", ["name"], ["==", "nosuch", "x"], ctx)
    with pytest.raises(errors.QueryFilterParseError):
        query("instance", ["name"], ["==", "name", 1.5], ctx)


def test_every_field_definition_is_well_formed():
    for resource in RESOURCES.values():
        for name, fdef in resource.fields.items():
            assert fdef.name == name
            assert fdef.kind in QFT_ALL and fdef.kind != "unknown"
            assert fdef.title and fdef.doc


def with_network(config: ConfigData) -> ConfigData:
    """C{config} with a network connected to its first group and used by a NIC of its first instance."""
    from ganeti.network import Pool
    from ganeti.objects import Network

    net = Network(name="net1", network="192.0.2.0/28", gateway="192.0.2.1", uuid="net-uuid-1", serial_no=1,
                  ctime=1.0, mtime=1.0)
    pool = Pool.initialize(net)
    pool.reserve("192.0.2.2")
    net = pool.apply(net)
    group = sorted(config.nodegroups.values(), key=lambda g: g.name or "")[0]
    group = attrs.evolve(group, networks={net.uuid: {"mode": "bridged", "link": "br0", "vlan": ""}})
    inst = sorted(config.instances.values(), key=lambda i: i.name or "")[0]
    nics = [attrs.evolve(inst.nics[0], ip="192.0.2.2", network=net.uuid)] + list(inst.nics[1:])
    return attrs.evolve(config, networks={net.uuid: net},
                        nodegroups=dict(config.nodegroups, **{group.uuid: group}),
                        instances=dict(config.instances, **{inst.uuid: attrs.evolve(inst, nics=nics)}))


def test_every_field_evaluates(ctx):
    """No getter crashes on the real config: each cell has a valid status."""
    locks = [[["cluster/BGL", [[[1, "/l", 1], "shared"]]]], []]
    ctx = attrs.evolve(ctx, locks=locks, live=dict(ctx.live or {}, exports=[["node1.example.test", "web1"]]),
                       config=with_network(ctx.config))
    rule = {"uuid": "f1", "watermark": 3, "priority": 0, "predicates": [], "action": "PAUSE", "reason_trail": []}
    ctx = attrs.evolve(ctx, config=attrs.evolve(ctx.config, filters={"f1": rule}))
    for name, resource in RESOURCES.items():
        fields = sorted(resource.fields)
        result = query(name, fields, None, ctx)
        assert result["data"], name
        for row in result["data"]:
            for status, _ in row:
                assert status in (RS_NORMAL, RS_NODATA, RS_UNAVAIL, RS_OFFLINE)
        orjson.dumps(result)


# --- QueryFields ---------------------------------------------------------------------


def test_query_fields_all_sorted(ctx):
    for names in (None, []):
        fields = query_fields("node", names)["fields"]
        got = [f["name"] for f in fields]
        assert set(got) == set(RESOURCES["node"].fields)
        assert got.index("ctime") < got.index("mfree") < got.index("name") < got.index("uuid")


def test_query_fields_selected(ctx):
    fields = query_fields("instance", ["pnode", "nosuch", "vcpus"])["fields"]
    assert fields[0] == {"name": "pnode", "title": "Primary_node", "kind": "text", "doc": "Primary node"}
    assert fields[1]["kind"] == "unknown"
    assert fields[2] == {"name": "vcpus", "title": "ConfigVCPUs", "kind": "number", "doc": 'The "vcpus" backend parameter'}


@pytest.mark.parametrize(
    "resource, name, title, kind",
    [
        ("node", "name", "Node", "text"),
        ("node", "pip", "PrimaryIP", "text"),
        ("node", "master_candidate", "MasterC", "bool"),
        ("node", "mfree", "MFree", "unit"),
        ("node", "pinst_cnt", "Pinst", "number"),
        ("node", "ctime", "CTime", "timestamp"),
        ("instance", "name", "Instance", "text"),
        ("instance", "admin_state", "InstanceState", "text"),
        ("instance", "oper_ram", "Memory", "unit"),
        ("instance", "disk.size/3", "Disk/3", "unit"),
        ("instance", "nic.mac/7", "NicMAC/7", "text"),
        ("instance", "be/maxmem", "ConfigMaxMem", "unit"),
        ("instance", "hv/kernel_path", "Kernel_path", "other"),
        ("group", "node_cnt", "Nodes", "number"),
        ("job", "id", "ID", "number"),
        ("job", "opresult", "OpCode_result", "other"),
        ("job", "received_ts", "Received", "other"),
        ("lock", "owner", "Owner", "other"),
        ("cluster", "master_node", "Master", "text"),
    ],
)
def test_ganeti_titles_and_kinds(resource, name, title, kind):
    (fdef,) = query_fields(resource, [name])["fields"]
    assert (fdef["title"], fdef["kind"]) == (title, kind)


def test_hypervisor_globals_have_no_field():
    fields = RESOURCES["instance"].fields
    assert "hv/migration_port" not in fields and "hv/xen_cmd" not in fields
    assert "hv/acpi" in fields and "be/vcpus" in fields and "be/memory" in fields


# --- nodes -----------------------------------------------------------------------------


def test_node_fields(ctx):
    got = values(
        "node",
        ["name", "role", "master", "master_candidate", "pip", "group", "group.uuid", "pinst_cnt", "pinst_list", "sinst_cnt", "tags", "serial_no", "uuid"],
        ctx,
    )
    assert got == {
        "node1.example.test": [
            [0, "M"],
            [0, True],
            [0, True],
            [0, "192.0.2.11"],
            [0, "default"],
            [0, DEFAULT_GROUP],
            [0, 2],
            [0, ["td-diskless1", "td-file1"]],
            [0, 0],
            [0, []],
            [0, 1],
            [0, MASTER_UUID],
        ]
    }


def test_node_params_and_powered(ctx):
    row = values("node", ["name", "ndparams", "ndp/ssh_port", "powered", "hv_state"], ctx)["node1.example.test"]
    assert row[0][1]["ovs_name"] == "switch1"
    assert row[1] == [0, 22]
    assert row[2] == [RS_UNAVAIL, None]  # no out-of-band program
    assert row[3] == [RS_UNAVAIL, None]


def test_node_live_fields_without_data(ctx):
    row = values("node", ["name", "mfree", "mtotal", "dfree", "ctotal", "cnos", "bootid"], ctx)["node1.example.test"]
    assert row == [[RS_NODATA, None]] * 6


def test_node_live_fields_with_data(ctx):
    ctx = attrs.evolve(ctx, live={"node1.example.test": {"mfree": 512, "bootid": "b-1"}})
    row = values("node", ["name", "mfree", "bootid", "mtotal"], ctx)["node1.example.test"]
    assert row == [[0, 512], [0, "b-1"], [RS_NODATA, None]]


def test_offline_node(config):
    cfg = with_nodes(config, node("node3.example.test", "n3", offline=True, master_candidate=False))
    ctx = QueryContext(cfg, live={"node3.example.test": {"mfree": 1}})
    got = values("node", ["name", "role", "offline", "mfree", "pinst_cnt"], ctx)
    assert got["node3.example.test"] == [[0, "O"], [0, True], [RS_OFFLINE, None], [0, 0]]


@pytest.mark.parametrize(
    "flags, role",
    [({}, "R"), ({"master_candidate": True}, "C"), ({"drained": True}, "D"), ({"offline": True}, "O"), ({"drained": True, "offline": True}, "D")],
)
def test_node_roles(config, flags, role):
    cfg = with_nodes(config, node("node2.example.test", "n2", **flags))
    assert values("node", ["name", "role"], QueryContext(cfg))["node2.example.test"] == [[0, role]]


def test_nodes_are_nice_sorted(config):
    cfg = with_nodes(
        config,
        node("node10.example.test", "n10"),
        node("node2.example.test", "n2"),
        node("node9.example.test", "n9"),
    )
    names = [row[0][1] for row in query("node", ["name"], None, QueryContext(cfg))["data"]]
    assert names == ["node1.example.test", "node2.example.test", "node9.example.test", "node10.example.test"]


def test_node_group_missing_is_nodata(config):
    cfg = with_nodes(config, Node(name="lost.example.test", uuid="nl", group="no-such-group"))
    row = values("node", ["name", "group", "group.uuid", "ndparams"], QueryContext(cfg))["lost.example.test"]
    assert row == [[RS_NODATA, None], [0, "no-such-group"], [RS_NODATA, None]]


# --- instances ----------------------------------------------------------------------------


def test_instance_config_fields(ctx):
    got = values(
        "instance",
        ["name", "tags", "os", "pnode", "pnode.group", "snodes", "admin_state", "admin_state_source", "admin_up", "disks_active", "hypervisor", "network_port", "disk_template", "serial_no"],
        ctx,
    )
    assert got["td-diskless1"] == [
        [0, ["prod", "web"]],
        [0, "noop"],
        [0, "node1.example.test"],
        [0, "default"],
        [0, []],
        [0, "up"],
        [0, "admin"],
        [0, True],
        [0, True],
        [0, "fake"],
        [RS_UNAVAIL, None],
        [0, "diskless"],
        [0, 4],
    ]
    assert got["td-file1"][0] == [0, []]
    assert got["td-file1"][5] == [0, "down"]
    assert got["td-file1"][11] == [0, "file"]


def test_instance_status_without_live_data(ctx):
    got = values("instance", ["name", "status", "oper_state", "oper_ram", "console"], ctx)
    assert got["td-file1"] == [[0, "ADMIN_down"], [RS_NODATA, None], [RS_NODATA, None], [RS_NODATA, None]]
    assert got["td-diskless1"] == [[RS_NODATA, None]] * 4


def test_instance_offline_admin_state(config):
    inst = next(i for i in config.instances.values() if i.name == "td-file1")
    cfg = attrs.evolve(config, instances={**config.instances, inst.uuid: attrs.evolve(inst, admin_state="offline")})
    assert values("instance", ["name", "status"], QueryContext(cfg))["td-file1"] == [[0, "ADMIN_offline"]]


def _live(**instances: Any) -> dict[str, Any]:
    return {"node1.example.test": {"instances": instances}}


@pytest.mark.parametrize(
    "live, diskless, file1",
    [
        (_live(**{"td-diskless1": {"state": "running"}}), "running", "ADMIN_down"),
        (_live(**{"td-file1": {"state": "running"}}), "ERROR_down", "ERROR_up"),
        (_live(**{"td-diskless1": {"state": "shutdown"}}), "ERROR_down", "ADMIN_down"),
        ({"node1.example.test": {}, "other": {"instances": {"td-diskless1": {}}}}, "ERROR_wrongnode", "ADMIN_down"),
    ],
)
def test_instance_status_with_live_data(ctx, live, diskless, file1):
    got = values("instance", ["name", "status"], attrs.evolve(ctx, live=live))
    assert got == {"td-diskless1": [[0, diskless]], "td-file1": [[0, file1]]}


def test_instance_live_values(ctx):
    live = _live(**{"td-diskless1": {"state": "running", "memory": 128, "vcpus": 1}})
    got = values("instance", ["name", "oper_state", "oper_ram", "oper_vcpus"], attrs.evolve(ctx, live=live))
    assert got["td-diskless1"] == [[0, True], [0, 128], [0, 1]]
    assert got["td-file1"] == [[0, False], [RS_UNAVAIL, None], [RS_UNAVAIL, None]]


def test_instance_on_offline_node(config):
    master = config.nodes[MASTER_UUID]
    cfg = attrs.evolve(config, nodes={MASTER_UUID: attrs.evolve(master, offline=True)})
    got = values("instance", ["name", "status", "oper_state"], QueryContext(cfg, live=_live()))
    assert got["td-diskless1"] == [[0, "ERROR_nodeoffline"], [RS_OFFLINE, None]]


def test_instance_disk_fields(ctx):
    got = values(
        "instance",
        ["name", "disk.count", "disk.sizes", "disk.size/0", "disk.size/1", "sda_size", "disk.uuids", "disk_usage", "disk.name/0"],
        ctx,
    )
    assert got["td-file1"] == [
        [0, 1],
        [0, [1024]],
        [0, 1024],
        [RS_UNAVAIL, None],
        [0, 1024],
        [0, ["4cdf6f2a-d883-4d1b-b9f3-8796754405fc"]],
        [0, 1024],
        [RS_UNAVAIL, None],
    ]
    assert got["td-diskless1"][:4] == [[0, 0], [0, []], [RS_UNAVAIL, None], [RS_UNAVAIL, None]]


def test_instance_nic_fields(ctx):
    got = values(
        "instance",
        ["name", "nic.count", "nic.macs", "nic.ips", "nic.modes", "nic.links", "nic.bridges", "nic.mac/0", "mac", "nic.mode/0", "nic.link/0", "nic.bridge/0", "nic.ip/0", "nic.mac/1", "nic.vlan/0", "nic.networks"],
        ctx,
    )
    assert got["td-diskless1"] == [
        [0, 1],
        [0, ["aa:00:00:6b:29:d4"]],
        [0, [None]],
        [0, ["bridged"]],
        [0, ["br0"]],
        [0, ["br0"]],
        [0, "aa:00:00:6b:29:d4"],
        [0, "aa:00:00:6b:29:d4"],
        [0, "bridged"],
        [0, "br0"],
        [0, "br0"],
        [RS_UNAVAIL, None],
        [RS_UNAVAIL, None],
        [RS_UNAVAIL, None],
        [0, [None]],
    ]


def test_instance_parameters_filled_from_cluster(ctx):
    got = values(
        "instance",
        ["name", "beparams", "be/maxmem", "vcpus", "be/memory", "custom_beparams", "hvparams", "hv/acpi", "osparams"],
        ctx,
    )
    row = got["td-file1"]
    assert row[0][1] == {"minmem": 128, "maxmem": 128, "vcpus": 1, "auto_balance": True, "always_failover": False, "spindle_use": 1}
    assert row[1:5] == [[0, 128], [0, 1], [0, 128], [0, {}]]
    assert row[5] == [0, {}]  # "fake" only has the global migration_mode
    assert row[6] == [RS_UNAVAIL, None]
    assert row[7] == [0, {}]


def test_instance_hvparams_with_custom_values(config):
    inst = next(i for i in config.instances.values() if i.name == "td-file1")
    changed = attrs.evolve(inst, hypervisor="kvm", hvparams={"acpi": False})
    cfg = attrs.evolve(config, instances={**config.instances, inst.uuid: changed})
    row = values("instance", ["name", "hv/acpi", "hv/kernel_path", "hvparams", "custom_hvparams"], QueryContext(cfg))["td-file1"]
    assert row[0] == [0, False]
    assert row[1] == [0, "/boot/vmlinuz-3-kvmU"]
    assert "migration_port" not in row[2][1] and row[2][1]["acpi"] is False
    assert row[3] == [0, {"acpi": False}]


def test_instance_filters(ctx):
    assert column(query("instance", ["name"], ["==", "status", "ADMIN_down"], ctx)) == [[0, "td-file1"]]
    assert column(query("instance", ["name"], ["=[]", "tags", "web"], ctx)) == [[0, "td-diskless1"]]
    assert column(query("instance", ["name"], ["!", ["?", "admin_up"]], ctx)) == [[0, "td-file1"]]
    assert column(query("instance", ["name"], ["=~", "name", "^td-"], ctx)) == [[0, "td-diskless1"], [0, "td-file1"]]
    assert column(query("instance", ["name"], ["==", "pnode", "node1"], ctx)) == [[0, "td-diskless1"], [0, "td-file1"]]
    # the filter field need not be among the selected ones
    assert query("instance", ["os"], ["==", "disk_template", "file"], ctx)["data"] == [[[0, "noop"]]]


def test_instance_names_filter_keeps_order_and_reports_unknown(ctx):
    flt = ["|", ["==", "name", "td-file1"], ["==", "name", "td-diskless1"], ["==", "name", "td-file1"]]
    assert column(query("instance", ["name"], flt, ctx)) == [[0, "td-file1"], [0, "td-diskless1"]]
    with pytest.raises(errors.OpPrereqError) as info:
        query("instance", ["name"], ["|", ["==", "name", "td-file1"], ["==", "name", "nosuch"]], ctx)
    assert info.value.args == ("Instance 'nosuch' not known", errors.ECODE_NOENT)


def test_node_short_name(ctx):
    assert column(query("node", ["name"], ["==", "name", "node1"], ctx)) == [[0, "node1.example.test"]]
    with pytest.raises(errors.OpPrereqError) as info:
        query("node", ["name"], ["==", "name", "node"], ctx)
    assert info.value.args[1] == errors.ECODE_NOENT


# --- groups ---------------------------------------------------------------------------------


def test_group_fields(ctx):
    got = values("group", ["name", "node_cnt", "node_list", "pinst_cnt", "pinst_list", "alloc_policy", "uuid"], ctx)
    assert got == {
        "default": [[0, 1], [0, ["node1.example.test"]], [0, 2], [0, ["td-diskless1", "td-file1"]], [0, "preferred"], [0, DEFAULT_GROUP]],
        "testgroup": [[0, 0], [0, []], [0, 0], [0, []], [0, "preferred"], [0, "eb187439-158a-4f37-891d-69dbd920aaf9"]],
    }


def test_group_merged_params(ctx):
    row = values("group", ["name", "ndparams", "diskparams", "ipolicy", "custom_ndparams", "ndp/spindle_count"], ctx)["testgroup"]
    assert row[0][1]["ssh_port"] == 22
    assert row[1][1]["drbd"]["protocol"] == "C"
    assert "minmax" in row[2][1]
    assert row[3:] == [[0, {}], [0, 1]]


# --- jobs ------------------------------------------------------------------------------------


def test_job_error(ctx):
    got = values("job", ["id", "status", "opstatus", "opresult", "summary", "priority", "received_ts", "end_ts"], ctx, ["==", "id", 1890])
    assert got == {
        1890: [
            [0, "error"],
            [0, ["error"]],
            [
                0,
                [
                    [
                        "OpPrereqError",
                        [
                            "Desired group name 'testgroup' already exists as a node group"
                            " (UUID: eb187439-158a-4f37-891d-69dbd920aaf9)",
                            "already_exists",
                        ],
                    ]
                ],
            ],
            [0, ["GROUP_ADD(testgroup)"]],
            [0, 0],
            [0, [1795315658, 218727]],
            [0, [1795315658, 589103]],
        ]
    }


def test_jobs_in_id_order_with_summaries(ctx):
    result = query("job", ["id", "summary"], None, ctx)
    ids = [row[0][1] for row in result["data"]]
    assert ids == sorted(ids) and ids[0] == 1838 and ids[-1] == 1892
    summaries = {row[0][1]: row[1][1] for row in result["data"]}
    assert summaries[1838] == ["INSTANCE_REMOVE(big199.example.test)"]
    assert summaries[1885] == ["INSTANCE_CREATE(td-diskless1)"]
    assert summaries[1886] == ["TAGS_SET"]
    assert summaries[1891] == ["TEST_DELAY(1.0e-3)"]


def test_job_ops_and_log(ctx, jobs):
    row = values("job", ["id", "ops", "oplog", "opstart", "opexec", "opend", "oppriority"], ctx, ["==", "id", "1892"])[1892]
    job = jobs[1892]
    assert row[0] == [0, [job.ops[0].input]]
    assert row[1][1][0][1] == [2, [1795315673, 485949], "message", " - INFO: Test delay iteration 1/1"]
    assert row[2:] == [[0, [[1795315673, 470672]]], [0, [[1795315673, 479110]]], [0, [[1795315673, 492554]]], [0, [0]]]


def test_unknown_job_is_unavailable(ctx):
    result = query("job", ["id", "status", "archived"], ["|", ["==", "id", 99], ["==", "id", 1838]], ctx)
    assert result["data"] == [
        [[0, 99], [RS_UNAVAIL, None], [RS_UNAVAIL, None]],
        [[0, 1838], [0, "error"], [0, False]],
    ]
    archived = attrs.evolve(ctx, archived_jobs=frozenset({1838}))
    assert query("job", ["archived"], ["==", "id", 1838], archived)["data"] == [[[0, True]]]


def test_job_filters(ctx):
    assert column(query("job", ["id"], ["==", "status", "error"], ctx)) == [[0, 1838], [0, 1890]]
    assert column(query("job", ["id"], ["&", [">", "id", 1889], ["=[]", "summary", "TEST_DELAY(1.0e-3)"]], ctx)) == [[0, 1891], [0, 1892]]
    assert column(query("job", ["id"], [">=", "received_ts", 1795315672], ctx)) == [[0, 1891], [0, 1892]]


def test_job_pending_timestamps_unavailable():
    job = QueuedJob.new(5, [{"OP_ID": "OP_TEST_DELAY", "duration": 2}], when=1700000000.5)
    ctx = QueryContext(ConfigData(), {5: job})
    row = query("job", ["status", "start_ts", "end_ts", "opstart", "summary", "received_ts"], None, ctx)["data"][0]
    assert row == [[0, "queued"], [RS_UNAVAIL, None], [RS_UNAVAIL, None], [0, [None]], [0, ["TEST_DELAY(2.0)"]], [0, [1700000000, 500000]]]


def test_invalid_job_id(ctx):
    with pytest.raises(errors.OpPrereqError):
        query("job", ["id"], ["==", "id", "abc"], ctx)


def test_evaluate_row(ctx, jobs):
    assert evaluate_row("job", ["status", "nosuch"], (1890, jobs[1890]), ctx) == [(0, "error"), (RS_UNKNOWN, None)]


@pytest.mark.parametrize(
    "value, text",
    [(0.001, "1.0e-3"), (2, "2.0"), (2.5, "2.5"), (10.0, "10.0"), (0.1, "0.1"), (0.05, "5.0e-2"), (1234567.0, "1234567.0"), (1e7, "1.0e7"), (12345678.9, "1.23456789e7"), (0, "0.0"), (-1.5, "-1.5"), (100.25, "100.25")],
)
def test_haskell_show_double(value, text):
    assert haskell_show_double(value) == text


@pytest.mark.parametrize(
    "op, summary",
    [
        ({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1"}, "INSTANCE_STARTUP(web1)"),
        ({"OP_ID": "OP_NODE_ADD", "node_name": "n1"}, "NODE_ADD(n1)"),
        ({"OP_ID": "OP_CLUSTER_VERIFY"}, "CLUSTER_VERIFY"),
        ({"OP_ID": "OP_TAGS_GET", "kind": "cluster", "name": None}, "TAGS_GET(None)"),
        ({"OP_ID": "OP_TAGS_GET", "kind": "instance", "name": "web1"}, "TAGS_GET(web1)"),
        ({"OP_ID": "OP_TEST_ALLOCATOR", "iallocator": None}, "TEST_ALLOCATOR(None)"),
        ({"OP_ID": "OP_INSTANCE_REMOVE"}, "INSTANCE_REMOVE"),
        ({"OP_ID": "OP_QUERY", "what": "node"}, "QUERY(node)"),
        ({"OP_ID": 5}, "INVALID_OP"),
        ({}, "INVALID_OP"),
        ("nonsense", "INVALID_OP"),
    ],
)
def test_op_summary(op, summary):
    assert op_summary(op) == summary


# --- locks -------------------------------------------------------------------------------------

OWNER_17 = [17, "/var/run/ganeti/livelocks/job_000017_1700000000", 4242]
OWNER_18 = [18, "/var/run/ganeti/livelocks/job_000018_1700000001", 4250]
OWNER_LUXID = ["luxid-ThreadId 7", "/var/run/ganeti/livelocks/luxi-daemon_1700000000", 100]

LOCKS = [
    [
        ["cluster/BGL", [[OWNER_17, "shared"], [OWNER_LUXID, "shared"]]],
        ["instance/web1.example.com", [[OWNER_17, "exclusive"]]],
    ],
    [
        [0, OWNER_18, [["cluster/BGL", "shared"], ["instance/web1.example.com", "exclusive"], ["node/n1", "release"]]],
        [10, OWNER_LUXID, [["nodegroup/g1", "shared"]]],
    ],
]


def test_lock_query(config):
    ctx = QueryContext(config, {}, LOCKS)
    result = query("lock", ["name", "mode", "owner", "pending"], None, ctx)
    assert result["data"] == [
        [[0, "cluster/BGL"], [0, "shared"], [0, ["17", '"luxid-ThreadId 7"']], [0, [["shared", ["18"]]]]],
        [[0, "instance/web1.example.com"], [0, "exclusive"], [0, ["17"]], [0, [["exclusive", ["18"]]]]],
        [[0, "nodegroup/g1"], [0, None], [0, []], [0, [["shared", ['"luxid-ThreadId 7"']]]]],
    ]
    assert column(query("lock", ["name"], ["=~", "name", "^instance/"], ctx)) == [[0, "instance/web1.example.com"]]
    assert column(query("lock", ["name"], ["==", "mode", "exclusive"], ctx)) == [[0, "instance/web1.example.com"]]


def test_lock_query_empty(config):
    assert query("lock", ["name"], None, QueryContext(config))["data"] == []


# --- cluster --------------------------------------------------------------------------------------


def test_cluster_query(ctx):
    ctx = attrs.evolve(ctx, drain_flag=True, watcher_pause=1800000000.0)
    fields = ["name", "cluster_name", "master_node", "tags", "drain_flag", "watcher_pause", "software_version", "config_version", "volume_group_name", "uuid"]
    row = query("cluster", fields, None, ctx)["data"][0]
    assert row == [
        [0, "cluster.example.test"],
        [0, "cluster.example.test"],
        [0, "node1.example.test"],
        [0, []],
        [0, True],
        [0, 1800000000.0],
        [0, GANETI_RELEASE],
        [0, CONFIG_VERSION],
        [RS_UNAVAIL, None],
        [0, "ac3e7b06-41fa-4c04-8563-101c90c302a5"],
    ]


CLUSTER_INFO_KEYS = (
    "software_version protocol_version config_version os_api_version export_version vcs_version architecture"
    " name master default_hypervisor enabled_hypervisors hvparams os_hvp beparams osparams ipolicy nicparams"
    " ndparams diskparams candidate_pool_size max_running_jobs max_tracked_jobs mac_prefix master_netdev"
    " master_netmask use_external_mip_script volume_group_name drbd_usermode_helper file_storage_dir"
    " shared_file_storage_dir gluster_storage_dir maintain_node_health ctime mtime uuid tags uid_pool"
    " default_iallocator default_iallocator_params reserved_lvs primary_ip_version prealloc_wipe_disks hidden_os"
    " blacklisted_os enabled_disk_templates install_image instance_communication_network zeroing_image"
    " compression_tools enabled_user_shutdown enabled_data_collectors data_collector_interval modify_ssh_setup"
    " ssh_key_type ssh_key_bits"
).split()


def test_cluster_info(config):
    info = cluster_info(config)
    assert sorted(info) == sorted(CLUSTER_INFO_KEYS)
    assert info["software_version"] == GANETI_RELEASE == "3.0.2"
    assert info["protocol_version"] == info["config_version"] == CONFIG_VERSION
    assert (info["os_api_version"], info["export_version"]) == (20, 0)
    assert info["name"] == "cluster.example.test"
    assert info["master"] == "node1.example.test"
    assert info["default_hypervisor"] == "fake" and info["enabled_hypervisors"] == ["fake"]
    assert info["primary_ip_version"] == 4
    assert info["architecture"][0].endswith("bits") and len(info["architecture"]) == 2
    assert info["volume_group_name"] is None
    assert info["max_running_jobs"] == 20 and info["max_tracked_jobs"] == 25
    assert info["enabled_data_collectors"]["drbd"] is True
    assert info["data_collector_interval"]["lv"] == 5000000
    assert info["ssh_key_type"] == "rsa" and info["ssh_key_bits"] == 2048
    assert info["beparams"]["default"]["maxmem"] == 128
    assert info["ctime"] == 1795314416.1453838
    orjson.dumps(info)


def test_cluster_info_of_an_empty_config():
    info = cluster_info(ConfigData())
    assert sorted(info) == sorted(CLUSTER_INFO_KEYS)
    assert info["master"] is None and info["default_hypervisor"] is None
    orjson.dumps(info)


def test_config_values(config):
    names = ["cluster_name", "master_node", "drain_flag", "watcher_pause", "modify_ssh_setup", "ssh_key_type", "ssh_key_bits", "nosuch"]
    assert config_values(config, names, True, 1800000000.5) == [
        "cluster.example.test",
        "node1.example.test",
        True,
        1800000000.5,
        False,
        "rsa",
        2048,
        None,
    ]
    assert config_values(config, ["drain_flag", "watcher_pause"], False, None) == [False, None]
    assert config_values(config, [], False, None) == []


# --- legacy queries --------------------------------------------------------------------------------


def test_legacy_instances(ctx):
    rows = legacy_query("instance", [], ["name", "admin_state", "status", "tags", "oper_state"], ctx)
    assert rows == [["td-diskless1", "up", None, ["prod", "web"], None], ["td-file1", "down", "ADMIN_down", [], None]]


def test_legacy_names_in_order_by_name_or_uuid(ctx):
    rows = legacy_query("instance", ["td-file1", "dd63a705-fd13-4041-a916-c76ae31c1000"], ["name"], ctx)
    assert rows == [["td-file1"], ["td-diskless1"]]
    assert legacy_query("node", ["node1"], ["name", "role"], ctx) == [["node1.example.test", "M"]]
    assert legacy_query("group", [], ["name", "node_cnt"], ctx) == [["default", 1], ["testgroup", 0]]


def test_legacy_unknown_name(ctx):
    with pytest.raises(errors.OpPrereqError) as info:
        legacy_query("instance", ["nosuch"], ["name"], ctx)
    assert info.value.args == ("Instance 'nosuch' not known", errors.ECODE_NOENT)
    with pytest.raises(errors.OpPrereqError) as info:
        legacy_query("group", ["nosuch"], ["name"], ctx)
    assert info.value.args[1] == errors.ECODE_NOENT


def test_legacy_unknown_field(ctx):
    with pytest.raises(errors.OpPrereqError) as info:
        legacy_query("node", [], ["name", "foo", "bar"], ctx)
    assert info.value.args == ("Unknown output fields selected: foo, bar", errors.ECODE_INVAL)


def test_legacy_jobs(ctx):
    assert legacy_query("job", [1890, 42, "1838"], ["id", "status"], ctx) == [[1890, "error"], None, [1838, "error"]]
    rows = legacy_query("job", [], ["id"], ctx)
    assert rows[0] == [1838] and len(rows) == 9
