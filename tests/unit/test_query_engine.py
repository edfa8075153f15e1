"""The query engine evaluates column by column: same cells as one field at a time, per item."""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest
from twisted.internet.task import Clock

from ganeti.config.bootstrap import grow, initial_config
from ganeti.daemon import FrozenHeapService
from ganeti.objects import ConfigData, _nice_sort_key_slow, nice_sort_key
from ganeti.query import RS_NORMAL, QueryContext, legacy_query, query
from ganeti.query.engine import evaluate_row, get_resource
from ganeti.query.instance import instances


@pytest.fixture(scope="module")
def config() -> ConfigData:
    return grow(initial_config("engine.test", "node1.test", "127.0.1.1"), nodes=3, instances=12)


def _live(config: ConfigData) -> dict[str, Any]:
    """Live data where some instances run on their primary, one elsewhere too, one nowhere."""
    names = [i.name for i in instances(QueryContext(config))]
    nodes = {n.uuid: n.name for n in config.nodes.values()}
    live: dict[str, Any] = {name: {"instances": {}, "mfree": 100} for name in nodes.values()}
    for inst in config.instances.values():
        if inst.name == names[0]:
            continue  # runs nowhere
        live[nodes[inst.primary_node]]["instances"][inst.name] = {"state": "running", "memory": 128, "vcpus": 1}
    second = next(i for i in config.instances.values() if i.name == names[1])
    elsewhere = next(n for n in live if n != nodes[second.primary_node])
    live[elsewhere]["instances"][names[1]] = {"state": "running", "memory": 64, "vcpus": 2}
    live["ghost.test"] = "not a dict"
    return live


@pytest.mark.parametrize("resource", ["instance", "node", "group"])
@pytest.mark.parametrize("with_live", [False, True])
def test_columns_equal_rows(config: ConfigData, resource: str, with_live: bool) -> None:
    ctx = QueryContext(config, live=_live(config) if with_live else {})
    fields = sorted(get_resource(resource).fields) + ["no-such-field"]
    result = query(resource, fields, None, ctx)
    items = get_resource(resource).items(QueryContext(config, live=ctx.live))
    expected = [[list(cell) for cell in evaluate_row(resource, fields, item, QueryContext(config, live=ctx.live))]
                for item in items]
    assert result["data"] == expected
    plain = legacy_query(resource, [], fields[:-1], QueryContext(config, live=ctx.live))
    assert plain == [[value if status == RS_NORMAL else None for status, value in row[:-1]] for row in expected]


def test_primary_report_wins(config: ConfigData) -> None:
    inst = instances(QueryContext(config))[1]
    live = _live(config)
    result = query("instance", ["name", "oper_ram", "oper_vcpus", "status"], ["=", "name", inst.name],
                   QueryContext(config, live=live))
    running = "running" if inst.admin_state == "up" else "ERROR_up"
    assert result["data"] == [[[0, inst.name], [0, 128], [0, 1], [0, running]]]
    primary = next(n.name for n in config.nodes.values() if n.uuid == inst.primary_node)
    del live[primary]["instances"][inst.name]
    result = query("instance", ["status", "oper_ram"], ["=", "name", inst.name], QueryContext(config, live=live))
    assert result["data"] == [[[0, "ERROR_wrongnode"], [0, 64]]]


def test_no_fields_and_filters(config: ConfigData) -> None:
    ctx = QueryContext(config)
    assert query("instance", [], None, ctx)["data"] == [[] for _ in config.instances]
    assert legacy_query("instance", [], [], ctx) == [[] for _ in config.instances]
    names = [i.name for i in instances(ctx)]
    result = query("instance", ["name"], ["=~", "name", "[13]"], ctx)
    assert [row[0][1] for row in result["data"]] == [n for n in names if "1" in n or "3" in n]
    assert query("instance", ["name"], ["!", ["?", "name"]], ctx)["data"] == []


def test_legacy_jobs_keep_missing_rows() -> None:
    config = grow(initial_config("engine.test", "node1.test", "127.0.1.1"), nodes=1, instances=0)
    assert legacy_query("job", [5, 6], ["id"], QueryContext(config)) == [None, None]


def test_nice_sort_key() -> None:
    rng = random.Random(7)
    names = ["", "1", "a", "node2", "node10", "x01y002", "inst-0001.example.com", "\u00b2x", "n\u0663a"]
    names += ["".join(rng.choice("ab.-0192") for _ in range(rng.randint(0, 10))) for _ in range(5000)]
    for name in names:
        if name.isascii():
            assert nice_sort_key(name) == _nice_sort_key_slow(name), name
    assert sorted(["node10", "node9", "node1a", "node1"], key=nice_sort_key) == ["node1", "node1a", "node9", "node10"]
    assert nice_sort_key("n\u0663a") == _nice_sort_key_slow("n\u0663a")


class FakeCollector:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.old = 0
        self.frozen = 0

    def get_freeze_count(self) -> int:
        return self.frozen

    def get_objects(self, generation: int) -> list[object]:
        assert generation == 2
        return [object()] * self.old

    def __getattr__(self, name: str) -> Any:
        return lambda: self.calls.append(name)


def test_frozen_heap_service() -> None:
    clock, collector = Clock(), FakeCollector()
    service = FrozenHeapService(clock, interval=60, threshold=1000, collector=collector,
                                trim=lambda: collector.calls.append("trim"))
    service.startService()
    clock.advance(0)
    assert collector.calls == ["unfreeze", "collect", "freeze", "trim"]
    collector.old = 10
    clock.advance(60)
    assert len(collector.calls) == 4  # the long-lived generation is small: nothing to do
    collector.old = 1001
    clock.advance(60)
    assert collector.calls[4:] == ["unfreeze", "collect", "freeze", "trim"]
    service.stopService()
    assert collector.calls[-1] == "unfreeze"
    assert not clock.getDelayedCalls()


def test_heap_frozen_by_the_parent_stays_frozen() -> None:
    """A daemon forked from a launcher that froze its heap never unfreezes
    it: collecting it would copy the pages the siblings share."""
    clock, collector = Clock(), FakeCollector()
    collector.frozen = 50_000
    service = FrozenHeapService(clock, interval=60, threshold=1000, collector=collector,
                                trim=lambda: collector.calls.append("trim"))
    service.startService()
    clock.advance(0)
    collector.old = 1001
    clock.advance(60)
    assert collector.calls == ["collect", "freeze", "trim"] * 2
    service.stopService()


def test_frozen_heap_service_stopped_before_running() -> None:
    clock, collector = Clock(), FakeCollector()
    service = FrozenHeapService(clock, collector=collector, trim=lambda: collector.calls.append("trim"))
    service.startService()
    service.stopService()
    assert collector.calls == ["unfreeze"]
    assert not clock.getDelayedCalls()


def test_offline_primary(config: ConfigData) -> None:
    inst = instances(QueryContext(config))[0]
    nodes = {u: attrs.evolve(n, offline=True) if u == inst.primary_node else n for u, n in config.nodes.items()}
    ctx = QueryContext(attrs.evolve(config, nodes=nodes), live=_live(config))
    row = query("instance", ["status", "oper_state"], ["=", "name", inst.name], ctx)["data"][0]
    assert row == [[0, "ERROR_nodeoffline"], [4, None]]


@pytest.mark.parametrize("resource", ["instance", "node", "group"])
def test_kept_columns_give_the_same_answers(config: ConfigData, resource: str) -> None:
    """A listing with the columns kept (LuxiD, one config serial) answers as one without, each time."""
    fields = sorted(get_resource(resource).fields)
    live = _live(config)
    kept: dict[Any, Any] = {}
    for _ in range(2):
        ctx = QueryContext(config, live=live, columns=kept)
        assert query(resource, fields, None, ctx) == query(resource, fields, None, QueryContext(config, live=live))
        assert (legacy_query(resource, [], fields, ctx)
                == legacy_query(resource, [], fields, QueryContext(config, live=live)))
    assert kept  # the config-only columns were kept


def test_kept_columns_leave_live_fields_live(config: ConfigData) -> None:
    """A second listing with the same kept columns shows the nodes' new reports,
    and a listing by name or filter sees only its own items."""
    kept: dict[Any, Any] = {}
    fields = ["name", "os", "status", "oper_ram"]
    live = _live(config)
    before = query("instance", fields, None, QueryContext(config, live=live, columns=kept))["data"]
    for report in live.values():
        if isinstance(report, dict):
            for info in report["instances"].values():
                info["memory"] = 4096
    after = query("instance", fields, None, QueryContext(config, live=live, columns=kept))["data"]
    assert [row[:2] for row in after] == [row[:2] for row in before]
    assert {row[3][1] for row in after if row[3][0] == RS_NORMAL} == {4096}
    names = [row[0][1] for row in before]
    some = query("instance", ["name", "os"], ["|", ["=", "name", names[2]], ["=", "name", names[0]]],
                 QueryContext(config, live=live, columns=kept))["data"]
    assert [row[0][1] for row in some] == [names[2], names[0]]
    assert [row[0] for row in legacy_query("instance", [names[1]], ["name"],
                                           QueryContext(config, live=live, columns=kept))] == [names[1]]


def test_name_filters_keep_their_meaning(config: ConfigData) -> None:
    """A filter naming instances (by name, short name, UUID, twice) selects
    what the whole filter selects over the named items, in the order named."""
    from ganeti.query import qlang

    ctx = QueryContext(config)
    listed = instances(ctx)
    short = listed[0].name.split(".")[0]
    cases = [
        [listed[2].uuid, listed[3].name, short, listed[3].name],
        [listed[1].uuid, listed[1].name],  # found by its UUID, kept for its name
        [listed[4].uuid],
        [i.name for i in reversed(listed)],
    ]
    for names in cases:
        qfilter = ["|"] + [["=", "name", n] for n in names]
        found = [r[0][1] for r in query("instance", ["name"], qfilter, ctx)["data"]]
        predicate = qlang.compile_filter(qfilter, get_resource("instance").fields)
        expected, seen = [], set()
        for n in names:
            item = get_resource("instance").lookup(ctx, n)
            if item.uuid in seen:
                continue
            seen.add(item.uuid)
            if predicate(lambda field, item=item: evaluate_row("instance", [field], item, ctx)[0]):
                expected.append(item.name)
        assert found == expected
    assert [r[0][1] for r in query("instance", ["name"], ["|", ["=", "name", listed[1].uuid],
                                                              ["=", "name", listed[1].name]], ctx)["data"]] \
        == [listed[1].name]
    assert query("instance", ["name"], ["=", "name", listed[4].uuid], ctx)["data"] == []
    with pytest.raises(Exception, match="not known"):
        query("instance", ["name"], ["|", ["=", "name", listed[0].name], ["=", "name", "nosuch.test"]], ctx)
