"""LuxiD's live query data: which fields make which node RPC calls, what
the answers become, and that live queries bypass the per-serial cache
(a fake RPC client; no sockets)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from twisted.internet.defer import Deferred, ensureDeferred

from ganeti.luxid import live
from ganeti.luxid.handler import LuxiHandler
from ganeti.objects import Cluster, ConfigData, Instance, Node, NodeGroup
from ganeti.query import RS_NODATA, RS_NORMAL, RS_OFFLINE, RS_UNAVAIL
from ganeti.query import fields as q
from ganeti.rpc import RpcResult
from ganeti.rpc import live as rpc_live
from ganeti.rpc.contract import Runner

GROUP = "g-1"


def make_config() -> ConfigData:
    nodes = {
        "n1": Node(name="node1.example.test", uuid="n1", group=GROUP, primary_ip="192.0.2.1", vm_capable=True),
        "n2": Node(name="node2.example.test", uuid="n2", group=GROUP, primary_ip="192.0.2.2", vm_capable=True),
        "n3": Node(name="node3.example.test", uuid="n3", group=GROUP, primary_ip="192.0.2.3", offline=True),
        "n4": Node(name="node4.example.test", uuid="n4", group=GROUP, primary_ip="192.0.2.4", vm_capable=False),
    }
    instances = {
        "i1": Instance(name="web1", uuid="i1", primary_node="n1", hypervisor="fake", admin_state="up", os="noop"),
        "i2": Instance(name="web2", uuid="i2", primary_node="n2", hypervisor="fake", admin_state="up", os="noop"),
        "i3": Instance(name="db1", uuid="i3", primary_node="n3", hypervisor="fake", admin_state="up", os="noop"),
        "i4": Instance(name="idle1", uuid="i4", primary_node="n1", hypervisor="fake", admin_state="down", os="noop"),
    }
    cluster = Cluster(
        cluster_name="cluster.example.test",
        master_node="n1",
        enabled_hypervisors=["fake", "kvm"],
        hvparams={"fake": {"migration_mode": "live"}, "kvm": {"kernel_path": ""}, "xen-pvm": {}},
        beparams={"default": {"maxmem": 128, "minmem": 128, "vcpus": 1}},
        enabled_disk_templates=["diskless", "file"],
        file_storage_dir="/srv/ganeti/file-storage",
    )
    return ConfigData(
        cluster=cluster,
        nodes=nodes,
        nodegroups={GROUP: NodeGroup(name="default", uuid=GROUP)},
        instances=instances,
    )


NODE_INFO = [
    "boot-1",
    [{"type": "file", "name": "/srv/ganeti/file-storage", "storage_free": 1000, "storage_size": 2000}],
    [{"hv_name": "fake", "memory_total": 4096, "memory_free": 3000, "memory_dom0": 1096, "cpu_total": 4,
      "cpu_nodes": 1, "cpu_sockets": 1, "cpu_dom0": 4}],
]


class FakeRpc(Runner):
    """Answers node RPC from C{answers[(procedure, node)]}: a payload, an
    L{Exception} (a failed result) or a L{Deferred} (still under way)."""

    def __init__(self, answers: dict[tuple[str, str], Any] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[str, dict[str, Any], Any, float]] = []

    def _result(self, procedure: str, node: str) -> Any:
        answer = self.answers.get((procedure, node), Exception("timeout after 5s calling %s" % procedure))
        if isinstance(answer, Exception):
            return RpcResult.failure(node, str(answer))
        return RpcResult(node, True, answer)

    async def call(self, nodes: Any, procedure: str, args: Any = (), *, timeout: float = 60, **kw: Any) -> Any:
        nodes = dict(nodes)
        self.calls.append((procedure, nodes, args, timeout))
        pending = self.answers.get((procedure, "*"))
        if isinstance(pending, Deferred):
            await pending
        return {name: self._result(procedure, name) for name in nodes}

    async def call_one(self, name: str, address: Any, procedure: str, args: Any = (), *, timeout: float = 60) -> Any:
        self.calls.append((procedure, {name: address}, args, timeout))
        return self._result(procedure, name)

    def procedures(self) -> list[str]:
        return [call[0] for call in self.calls]


def gather(rpc: FakeRpc, needs: Any, names: Any = None, config: ConfigData | None = None) -> dict[str, Any]:
    data = live.LiveData(lambda: rpc)
    d = ensureDeferred(data.gather(config or make_config(), needs, names))
    assert d.called
    return d.result


# --- which fields need what ---------------------------------------------------------------
@pytest.mark.parametrize(
    "resource, fields, qfilter, expected",
    [
        ("instance", ["name", "os", "pnode", "be/maxmem", "disk.sizes"], None, set()),
        ("instance", ["name", "status"], None, {q.NEED_LIVE_INSTANCES}),
        ("instance", ["oper_ram"], None, {q.NEED_LIVE_INSTANCES}),
        ("instance", ["oper_vcpus", "oper_state"], None, {q.NEED_LIVE_INSTANCES}),
        ("instance", ["console"], None, {q.NEED_LIVE_INSTANCES, q.NEED_CONSOLE}),
        ("instance", ["name"], ["==", "status", "running"], {q.NEED_LIVE_INSTANCES}),
        ("instance", ["name"], ["&", ["=~", "name", "^w"], ["!", ["?", "oper_state"]]], {q.NEED_LIVE_INSTANCES}),
        ("instance", ["name"], ["|", ["==", "name", "web1"], ["==", "name", "web2"]], set()),
        ("node", ["name", "pinst_cnt", "role"], None, set()),
        ("node", ["name", "mfree"], None, {q.NEED_LIVE_NODES}),
        ("node", ["dtotal", "bootid", "cnos"], None, {q.NEED_LIVE_NODES}),
        ("node", ["name"], [">", "mfree", 100], {q.NEED_LIVE_NODES}),
        ("group", ["name", "node_cnt"], None, set()),
        ("job", ["id", "status"], None, set()),
        ("nosuch", ["status"], None, set()),
        ("instance", ["nosuch", 3], ["bad", 1, 2], set()),
        ("instance", "status", None, set()),
    ],
)
def test_needed(resource: str, fields: Any, qfilter: Any, expected: set[str]) -> None:
    assert live.needed(resource, fields, qfilter) == expected


def test_every_live_field_is_marked() -> None:
    """The fields that read ctx.live are exactly the marked ones."""
    from ganeti.query.resources import NODE_LIVE_FIELDS, RESOURCES

    instance = {name for name, f in RESOURCES["instance"].fields.items() if f.needs}
    node = {name for name, f in RESOURCES["node"].fields.items() if q.NEED_LIVE_NODES in f.needs}
    roster = {name for name, f in RESOURCES["node"].fields.items() if q.NEED_LIVENESS in f.needs}
    assert instance == {"status", "oper_state", "oper_ram", "oper_vcpus", "console"}
    assert node == set(NODE_LIVE_FIELDS)
    assert roster == {"liveness", "liveness_since", "last_seen", "seen_boot_id"}


# --- the calls --------------------------------------------------------------------------
def test_config_only_needs_make_no_call() -> None:
    rpc = FakeRpc()
    assert gather(rpc, frozenset()) == {}
    assert rpc.calls == []


def test_instance_fields_ask_all_instances_info_on_online_vm_capable_nodes() -> None:
    rpc = FakeRpc({
        ("all_instances_info", "node1.example.test"): {
            "web1": {"memory": 128, "vcpus": 1, "state": 0, "time": 12.5},
            "idle1": {"memory": 64, "vcpus": 1, "state": 1, "time": 1.0},
        },
        ("all_instances_info", "node2.example.test"): {},
    })
    got = gather(rpc, {q.NEED_LIVE_INSTANCES})
    ((procedure, nodes, args, timeout),) = rpc.calls
    assert procedure == "all_instances_info"
    assert nodes == {"node1.example.test": "192.0.2.1", "node2.example.test": "192.0.2.2"}
    assert args == [["fake", "kvm"], {"fake": {"migration_mode": "live"}, "kvm": {"kernel_path": ""}}]
    assert timeout == live.LIVE_TIMEOUT
    assert got == {
        "node1.example.test": {"instances": {
            "web1": {"memory": 128, "vcpus": 1, "state": "running", "time": 12.5},
            "idle1": {"memory": 64, "vcpus": 1, "state": "shutdown", "time": 1.0},
        }},
        "node2.example.test": {"instances": {}},
    }


def test_node_fields_ask_node_info() -> None:
    rpc = FakeRpc({("node_info", "node1.example.test"): NODE_INFO})
    got = gather(rpc, {q.NEED_LIVE_NODES})
    ((procedure, nodes, args, _),) = rpc.calls
    assert procedure == "node_info"
    assert sorted(nodes) == ["node1.example.test", "node2.example.test"]
    assert args == [[["file", "/srv/ganeti/file-storage", []]], [["fake", {"migration_mode": "live"}]]]
    assert got == {"node1.example.test": {
        "bootid": "boot-1", "dtotal": 2000, "dfree": 1000, "mtotal": 4096, "mfree": 3000, "mnode": 1096,
        "ctotal": 4, "cnodes": 1, "csockets": 1, "cnos": 4,
    }}


def test_storage_unit_only_for_storage_noded_reports() -> None:
    config = make_config()
    import attrs

    diskless = attrs.evolve(config, cluster=attrs.evolve(config.cluster, enabled_disk_templates=["diskless", "plain"]))
    assert rpc_live.storage_units(diskless) == []
    shared = attrs.evolve(config, cluster=attrs.evolve(
        config.cluster, enabled_disk_templates=["sharedfile"], shared_file_storage_dir="/srv/shared"))
    assert rpc_live.storage_units(shared) == [["sharedfile", "/srv/shared", []]]


def test_malformed_answers_are_no_data() -> None:
    rpc = FakeRpc({
        ("node_info", "node1.example.test"): ["boot-1", "junk"],
        ("node_info", "node2.example.test"): ["", [], [{"memory_free": "lots", "memory_total": 10}]],
    })
    assert gather(rpc, {q.NEED_LIVE_NODES}) == {"node2.example.test": {"mtotal": 10}}
    rpc = FakeRpc({("all_instances_info", "node1.example.test"): ["web1"]})
    assert gather(rpc, {q.NEED_LIVE_INSTANCES}) == {}


def test_consoles_of_named_running_instances() -> None:
    console = {"instance": "web1", "kind": "msg", "message": "no console"}
    rpc = FakeRpc({
        ("all_instances_info", "node1.example.test"): {"web1": {"state": 0}, "idle1": {"state": 1}},
        ("all_instances_info", "node2.example.test"): {"web2": {"state": 0}},
        ("instance_console_info", "node1.example.test"): console,
    })
    got = gather(rpc, {q.NEED_LIVE_INSTANCES, q.NEED_CONSOLE}, names=["web1", "db1", "nosuch"])
    assert rpc.procedures() == ["all_instances_info", "instance_console_info"]
    ((inst_dict,),) = [call[2] for call in rpc.calls if call[0] == "instance_console_info"]
    assert inst_dict["name"] == "web1" and inst_dict["beparams"]["maxmem"] == 128
    assert got["node1.example.test"]["instances"]["web1"]["console"] == console
    assert "console" not in got["node2.example.test"]["instances"]["web2"]


def test_consoles_of_all_running_instances_when_none_named() -> None:
    rpc = FakeRpc({
        ("all_instances_info", "node1.example.test"): {"web1": {"state": 0}},
        ("all_instances_info", "node2.example.test"): {"web2": {"state": 0}},
    })
    got = gather(rpc, {q.NEED_LIVE_INSTANCES, q.NEED_CONSOLE})
    assert sorted(c[1].popitem()[0] for c in rpc.calls if c[0] == "instance_console_info") == [
        "node1.example.test", "node2.example.test"]
    assert "console" not in got["node1.example.test"]["instances"]["web1"]  # the console call failed


def test_concurrent_gathers_share_one_round_of_calls() -> None:
    pending: Deferred[None] = Deferred()
    rpc = FakeRpc({("all_instances_info", "*"): pending,
                   ("all_instances_info", "node1.example.test"): {"web1": {"state": 0}}})
    data = live.LiveData(lambda: rpc)
    config = make_config()
    first = ensureDeferred(data.gather(config, {q.NEED_LIVE_INSTANCES}))
    second = ensureDeferred(data.gather(config, {q.NEED_LIVE_INSTANCES}))
    assert not first.called and not second.called
    pending.callback(None)
    assert first.result == second.result == {"node1.example.test": {"instances": {"web1": {"state": "running"}}}}
    assert rpc.procedures() == ["all_instances_info"]
    ensureDeferred(data.gather(config, {q.NEED_LIVE_INSTANCES}))
    assert rpc.procedures() == ["all_instances_info"] * 2


def test_a_failing_client_gives_no_data() -> None:
    class Broken(FakeRpc):
        async def call(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

    assert gather(Broken(), {q.NEED_LIVE_NODES, q.NEED_LIVE_INSTANCES}) == {}


# --- through the handler ------------------------------------------------------------------
class FakeWConfd:
    def __init__(self, config: ConfigData) -> None:
        self.config, self.serial = config, 1

    async def read_serial(self) -> int:
        return self.serial

    async def read_config(self) -> ConfigData:
        return self.config


class FakeService:
    liveness = None
    watcher = None

    def __init__(self, config: ConfigData) -> None:
        self.wconfd = FakeWConfd(config)

    def wconfd_client(self) -> FakeWConfd:
        return self.wconfd

    def live_jobs(self) -> dict[int, Any]:
        return {}


def handler(rpc: FakeRpc) -> LuxiHandler:
    h = LuxiHandler(FakeService(make_config()), None, live.LiveData(lambda: rpc))
    return h


def run(d: Any) -> Any:
    d = ensureDeferred(d)
    assert d.called
    return d.result


LIVE_ANSWERS = {
    ("all_instances_info", "node1.example.test"): {"web1": {"memory": 128, "vcpus": 1, "state": 0}},
    ("node_info", "node2.example.test"): NODE_INFO,
}


def test_query_with_live_fields_is_never_cached() -> None:
    rpc = FakeRpc(dict(LIVE_ANSWERS))
    h = handler(rpc)
    fields = ["name", "status", "oper_ram"]
    first = run(h.luxi_Query("instance", fields, None))
    assert {row[0][1]: row[1:] for row in first["data"]} == {
        "db1": [[RS_NORMAL, "ERROR_nodeoffline"], [RS_OFFLINE, None]],
        "idle1": [[RS_NORMAL, "ADMIN_down"], [RS_UNAVAIL, None]],
        "web1": [[RS_NORMAL, "running"], [RS_NORMAL, 128]],
        "web2": [[RS_NODATA, None], [RS_NODATA, None]],  # node2 did not answer
    }
    rpc.answers[("all_instances_info", "node1.example.test")] = {}
    second = run(h.luxi_Query("instance", fields, None))
    assert second["data"][2][1:] == [[RS_NORMAL, "ERROR_down"], [RS_UNAVAIL, None]]
    assert rpc.procedures() == ["all_instances_info", "all_instances_info"]
    assert h._query_cache == {}


def test_config_only_query_is_cached_and_makes_no_call() -> None:
    rpc = FakeRpc()
    h = handler(rpc)
    first = run(h.luxi_Query("instance", ["name", "pnode"], None))
    assert run(h.luxi_Query("instance", ["name", "pnode"], None)) is first
    assert rpc.calls == [] and len(h._query_cache) == 1


@pytest.mark.parametrize("serial_step, mtime_step", [(1, 1.0), (0, 1.0)])
def test_a_config_that_changed_is_queried_anew(serial_step: int, mtime_step: float) -> None:
    """A new serial, or the same serial with another mtime (changes dropped when WConfD's disk was full gave
    their serials again): the answer kept for the config before is not given for it."""
    h = handler(FakeRpc())
    first = run(h.luxi_Query("instance", ["name", "os"], None))
    wconfd = h.service.wconfd
    before = wconfd.config
    inst = next(iter(before.instances.values()))
    wconfd.config = attrs.evolve(before, serial_no=before.serial_no + serial_step, mtime=(before.mtime or 0) + mtime_step,
                                 instances={**before.instances, inst.uuid: attrs.evolve(inst, os="changed")})
    second = run(h.luxi_Query("instance", ["name", "os"], None))
    assert second is not first
    assert [row[1][1] for row in second["data"] if row[0][1] == inst.name] == ["changed"]
    assert run(h.luxi_Query("instance", ["name", "os"], None)) is second


def test_filter_on_a_live_field_gets_live_data() -> None:
    rpc = FakeRpc(dict(LIVE_ANSWERS))
    result = run(handler(rpc).luxi_Query("instance", ["name"], ["==", "status", "running"]))
    assert result["data"] == [[[RS_NORMAL, "web1"]]]
    assert rpc.procedures() == ["all_instances_info"]


def test_node_query_with_live_fields() -> None:
    rpc = FakeRpc(dict(LIVE_ANSWERS))
    result = run(handler(rpc).luxi_Query("node", ["name", "mfree", "dfree"], None))
    assert [row[1:] for row in result["data"]] == [
        [[RS_NODATA, None], [RS_NODATA, None]],  # node1: no answer
        [[RS_NORMAL, 3000], [RS_NORMAL, 1000]],
        [[RS_OFFLINE, None], [RS_OFFLINE, None]],  # offline: not asked
        [[RS_UNAVAIL, None], [RS_UNAVAIL, None]],  # not vm-capable: not asked
    ]
    ((_, nodes, _, _),) = rpc.calls
    assert sorted(nodes) == ["node1.example.test", "node2.example.test"]


def test_legacy_queries_get_live_data() -> None:
    rpc = FakeRpc(dict(LIVE_ANSWERS))
    h = handler(rpc)
    assert run(h.luxi_QueryInstances(["web1"], ["name", "oper_state", "oper_ram"], False)) == [["web1", True, 128]]
    assert run(h.luxi_QueryNodes(["node2.example.test"], ["mtotal"], False)) == [[4096]]
    assert run(h.luxi_QueryInstances([], ["name", "os"], False))[0] == ["db1", "noop"]
    assert rpc.procedures() == ["all_instances_info", "node_info"]


def test_console_query_names_come_from_the_filter() -> None:
    console = {"instance": "web1", "kind": "vnc", "host": "node1", "port": 5901, "display": 1}
    rpc = FakeRpc({**LIVE_ANSWERS, ("instance_console_info", "node1.example.test"): console})
    h = handler(rpc)
    result = run(h.luxi_Query("instance", ["console"], ["|", ["==", "name", "web1"]]))
    assert result["data"] == [[[RS_NORMAL, console]]]
    assert run(h.luxi_QueryInstances(["web1"], ["console", "oper_state"], False)) == [[console, True]]


def test_console_of_an_instance_a_lagging_report_misses_is_asked_by_rpc() -> None:
    """A node's pushed report may not list an instance started a moment
    ago: for a named console, its primary node is asked again."""
    console = {"instance": "web1", "kind": "msg", "message": "serial"}
    rpc = FakeRpc({
        ("all_instances_info", "node1.example.test"): {"web1": {"state": 0}},
        ("instance_console_info", "node1.example.test"): console,
    })
    reports = {"node1.example.test": {"instances": {}}, "node2.example.test": {"instances": {"web2": {}}}}
    data = live.LiveData(lambda: rpc)
    d = ensureDeferred(data.gather(make_config(), {q.NEED_LIVE_INSTANCES, q.NEED_CONSOLE}, ["web1"],
                                   reports=reports.get))
    got = d.result
    assert rpc.procedures() == ["all_instances_info", "instance_console_info"]
    assert got["node1.example.test"]["instances"]["web1"]["console"] == console
    # a report that lists the instance is trusted: no RPC but the console's
    rpc2 = FakeRpc({("instance_console_info", "node1.example.test"): console})
    reports["node1.example.test"] = {"instances": {"web1": {"state": "running"}}}
    d = ensureDeferred(live.LiveData(lambda: rpc2).gather(make_config(), {q.NEED_LIVE_INSTANCES, q.NEED_CONSOLE},
                                                           ["web1"], reports=reports.get))
    assert rpc2.procedures() == ["instance_console_info"]
    assert d.result["node1.example.test"]["instances"]["web1"]["console"] == console
