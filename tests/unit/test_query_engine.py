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
