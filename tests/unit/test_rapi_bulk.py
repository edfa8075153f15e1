"""RAPI bulk lists built from parts kept per config serial (L{ganeti.rapi.bulk}):
the same bytes as a full query, the config-only fields asked once per serial."""

from __future__ import annotations

from typing import Any

import attrs
import orjson
import pytest
from twisted.internet.defer import ensureDeferred

from ganeti.config.bootstrap import grow, initial_config
from ganeti.query import engine
from ganeti.query import fields as q
from ganeti.rapi import bulk
from ganeti.rapi.rlib2 import I_FIELDS


def make_config(instances: int = 7) -> Any:
    base = grow(initial_config("bulk.test", "node1.test", "192.0.2.1"), nodes=3, instances=instances)
    states = ["up", "down", "offline"]
    return attrs.evolve(base, instances={u: attrs.evolve(i, admin_state=states[n % 3])
                                         for n, (u, i) in enumerate(sorted(base.instances.items()))})


def live_of(config: Any) -> dict[str, Any]:
    """Node reports: every instance but the last runs on its primary node;
    one node does not report at all."""
    names = {n.uuid: n.name for n in config.nodes.values()}
    live: dict[str, Any] = {name: {"instances": {}} for name in names.values()}
    for inst in sorted(config.instances.values(), key=lambda i: i.name)[:-1]:
        live[names[inst.primary_node]]["instances"][inst.name] = {"state": "running", "memory": 128, "vcpus": 2}
    del live[sorted(live)[-1]]
    return live


class Luxi:
    """LuxiD as the bulk list asks it: the config serial and legacy queries."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.live = live_of(config)
        self.asked: list[list[str]] = []

    async def serial(self) -> Any:
        return self.config.serial_no

    async def query(self, fields: list[str]) -> list[list[Any]]:
        self.asked.append(list(fields))
        ctx = q.QueryContext(config=self.config, live=self.live)
        return engine.legacy_query("instance", [], fields, ctx)

    def full(self, fields: list[str]) -> bytes:
        ctx = q.QueryContext(config=self.config, live=self.live)
        return orjson.dumps([dict(zip(fields, row)) for row in engine.legacy_query("instance", [], fields, ctx)])


def listing(cache: dict[Any, Any], luxi: Luxi, fields: list[str]) -> bytes:
    d = ensureDeferred(bulk.bulk_list(cache, "instance", fields, luxi.serial, luxi.query))
    assert d.called
    return d.result


def test_live_fields_are_those_that_read_more_than_the_config() -> None:
    res = engine.get_resource("instance")
    assert {f for f in I_FIELDS if res.fields[f].needs} == bulk.LIVE_FIELDS["instance"]


@pytest.mark.parametrize("fields", [
    I_FIELDS,
    ["status", "name", "os"],  # a live field first
    ["name", "os", "oper_ram"],  # and last
    ["name", "oper_state", "os", "oper_ram", "oper_vcpus", "tags", "status"],  # several live runs
])
def test_same_bytes_as_a_full_query(fields: list[str]) -> None:
    luxi = Luxi(make_config())
    cache: dict[Any, Any] = {}
    assert listing(cache, luxi, fields) == luxi.full(fields)
    assert listing(cache, luxi, fields) == luxi.full(fields)  # from the kept parts


def test_config_only_fields_asked_once_per_serial() -> None:
    luxi = Luxi(make_config())
    cache: dict[Any, Any] = {}
    live = ["name", "oper_state", "oper_ram", "oper_vcpus", "status"]
    listing(cache, luxi, I_FIELDS)
    listing(cache, luxi, I_FIELDS)
    assert luxi.asked[1:] == [live, live]
    # a node reports a change: seen at once, without asking the config-only fields again
    node, report = next(iter(luxi.live.items()))
    luxi.live[node] = {"instances": {name: dict(info, memory=512) for name, info in report["instances"].items()}}
    assert listing(cache, luxi, I_FIELDS) == luxi.full(I_FIELDS)
    assert luxi.asked[-1] == live and len(luxi.asked) == 4
    # the config changes (a new serial): its fields are asked again
    first = sorted(luxi.config.instances)[0]
    inst = luxi.config.instances[first]
    luxi.config = attrs.evolve(luxi.config, serial_no=luxi.config.serial_no + 1,
                               instances={**luxi.config.instances, first: attrs.evolve(inst, os="other-os")})
    body = listing(cache, luxi, I_FIELDS)
    assert body == luxi.full(I_FIELDS)
    assert b'"other-os"' in body
    assert len(luxi.asked) == 6


def test_items_changed_between_the_queries() -> None:
    """An instance added between the config-only and the live query: every
    field is asked at once, and nothing stale is kept."""
    luxi = Luxi(make_config())
    cache: dict[Any, Any] = {}
    grown = grow(luxi.config, instances=1)
    asked = luxi.query

    async def query(fields: list[str]) -> list[list[Any]]:
        rows = await asked(fields)
        luxi.config = grown  # the same serial: the change lands between the two queries
        luxi.live = live_of(grown)
        return rows

    d = ensureDeferred(bulk.bulk_list(cache, "instance", I_FIELDS, luxi.serial, query))
    assert d.result == luxi.full(I_FIELDS)
    assert len(orjson.loads(d.result)) == len(grown.instances)
    assert cache == {}


def test_no_serial_keeps_nothing() -> None:
    luxi = Luxi(make_config())
    cache: dict[Any, Any] = {}

    async def unknown() -> Any:
        return None

    d = ensureDeferred(bulk.bulk_list(cache, "instance", I_FIELDS, unknown, luxi.query))
    assert d.result == luxi.full(I_FIELDS)
    assert cache == {}


def test_usable() -> None:
    assert bulk.usable("instance", I_FIELDS)
    assert not bulk.usable("node", ["name", "mfree"])
    assert not bulk.usable("instance", ["os", "status"])  # no name to match the live rows by
    assert not bulk.usable("instance", ["name", "os"])  # nothing live: one query is enough
    assert not bulk.usable("instance", ["name", "status", "name"])
