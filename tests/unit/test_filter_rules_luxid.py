"""Job filter rules through LuxiD's LUXI methods and WConfD's store (fakes, no sockets)."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from twisted.internet.defer import Deferred, ensureDeferred

from ganeti import errors
from ganeti.config.bootstrap import initial_config
from ganeti.luxid.filters import FilterTable
from ganeti.luxid.handler import LuxiHandler
from ganeti.luxid.live import LiveData
from ganeti.objects import ConfigData
from ganeti.wconfd.store import ConfigStore

UUID = "0f6c8a7e-1d2b-4c3d-9e8f-a1b2c3d4e5f6"


class FakeWConfd:
    """WConfD's client over an in-memory L{ConfigStore}."""

    def __init__(self) -> None:
        self.store = ConfigStore(initial_config("cluster.test", "node1.test", "127.0.1.1"))
        self.records: list[dict[str, Any]] = []
        self.reconnected: list[Any] = []

    async def read_serial(self) -> int:
        return self.store.serial_no

    async def read_config(self) -> ConfigData:
        return ConfigData.from_json(self.store.snapshot())

    async def change_filter(self, uuid: str, rule: dict[str, Any] | None) -> int:
        record = self.store.change_filter(uuid, rule)
        if record is not None:
            self.records.append(record)
        return self.store.serial_no


class FakeQueue:
    def __init__(self) -> None:
        self.last = 41

    def serial(self) -> int:
        return self.last


class FakeService:
    liveness = watcher = None

    def __init__(self) -> None:
        self.wconfd = FakeWConfd()
        self.queue = FakeQueue()
        self.scheduled = 0
        self.filters = FilterTable(self.schedule)

    def schedule(self) -> None:
        self.scheduled += 1

    def wconfd_client(self) -> Any:
        return self.wconfd

    def live_jobs(self) -> dict[int, Any]:
        return {}


def call(handler: LuxiHandler, method: str, *args: Any) -> Any:
    answer = handler.handle(method, list(args))
    if not inspect.iscoroutine(answer):
        return answer
    d = ensureDeferred(answer)
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "%s did not answer at once" % method
    if hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


@pytest.fixture
def service() -> FakeService:
    return FakeService()


@pytest.fixture
def handler(service: FakeService) -> LuxiHandler:
    return LuxiHandler(service, None, LiveData(lambda: None))


def test_replace_filter_stores_ganeti_layout_and_schedules(service, handler):
    predicates = [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]
    uuid = call(handler, "ReplaceFilter", None, 5, predicates, "RATE_LIMIT 2", [["gnt:user", "why", 7]])
    stored = json.loads(service.wconfd.store.snapshot())["filters"][uuid]
    assert stored["uuid"] == uuid and stored["watermark"] == 41 and stored["priority"] == 5
    assert stored["predicates"] == predicates and stored["action"] == ["RATE_LIMIT", 2]
    assert stored["reason_trail"][0] == ["gnt:user", "why", 7]
    assert stored["reason_trail"][1][:2] == ["luxid", ""]
    # the scheduler has it at once
    assert [r.uuid for r in service.filters.rules] == [uuid] and service.scheduled == 1
    # replacing keeps the uuid and takes a new watermark
    service.queue.last = 50
    assert call(handler, "ReplaceFilter", uuid, 0, [], "ACCEPT", []) == uuid
    assert call(handler, "QueryFilters", [uuid], ["uuid", "watermark", "action"]) == [[uuid, 50, "ACCEPT"]]


def test_replace_filter_with_a_given_uuid_creates_it(handler, service):
    assert call(handler, "ReplaceFilter", UUID, 1, [], "PAUSE", []) == UUID
    assert call(handler, "QueryFilters", None, ["uuid", "priority"]) == [[UUID, 1]]
    assert call(handler, "QueryFilters", [], ["action"]) == [["PAUSE"]]


@pytest.mark.parametrize("args,words", [
    ([None, 0, [["owner", ["=", "id", 1]]], "ACCEPT", []], "Unknown filter predicate 'owner'"),
    ([None, 0, [], "DROP", []], "Unknown filter action"),
    ([None, 0, [], ["RATE_LIMIT", 0], []], "positive integer"),
    ([None, -1, [], "ACCEPT", []], "non-negative"),
    (["not-a-uuid", 0, [], "ACCEPT", []], "Unable to parse UUID"),
    ([None, 0, [["jobid", [">", "id"]]], "ACCEPT", []], "takes a field name and a value"),
    ([None, 0, [], "ACCEPT", [["only two", "entries"]]], "Reason trail entries"),
])
def test_bad_rules_are_refused_and_nothing_is_stored(handler, service, args, words):
    with pytest.raises(errors.OpPrereqError, match=words):
        call(handler, "ReplaceFilter", *args)
    assert service.wconfd.records == [] and service.wconfd.store.filters == {}


def test_a_wrong_type_is_refused_before_the_handler(handler, service):
    with pytest.raises(errors.OpPrereqError, match="priority"):
        call(handler, "ReplaceFilter", None, "high", [], "ACCEPT", [])
    assert service.wconfd.records == []


def test_delete_filter(handler, service):
    uuid = call(handler, "ReplaceFilter", None, 0, [], "PAUSE", [])
    with pytest.raises(errors.OpPrereqError, match="Filter rule with UUID %s does not exist" % UUID) as raised:
        call(handler, "DeleteFilter", UUID)
    assert raised.value.args[1] == errors.ECODE_NOENT
    assert call(handler, "DeleteFilter", uuid) is None
    assert service.wconfd.store.filters == {} and service.filters.rules == []
    assert call(handler, "QueryFilters", [uuid], ["uuid"]) == []  # unknown: no row, as Ganeti's


def test_query_filters_refuses_unknown_fields(handler):
    with pytest.raises(errors.OpPrereqError, match="Unknown output fields selected: colour"):
        call(handler, "QueryFilters", None, ["uuid", "colour"])


def test_filter_query_resource(handler, service):
    first = call(handler, "ReplaceFilter", UUID, 3, [], "REJECT", [])
    answer = call(handler, "Query", "filter", ["uuid", "priority", "action"], ["==", "priority", 3])
    assert answer["data"] == [[[0, first], [0, 3], [0, "REJECT"]]]
    names = [f["name"] for f in call(handler, "QueryFields", "filter", None)["fields"]]
    assert names == sorted(["watermark", "priority", "predicates", "action", "reason_trail", "uuid"])


# --- WConfD's store -----------------------------------------------------------------------


def test_store_journals_filter_changes_and_replays_them():
    store = ConfigStore(initial_config("cluster.test", "node1.test", "127.0.1.1"))
    base = ConfigData.from_json(store.snapshot())
    rule = {"uuid": UUID, "watermark": 3, "priority": 0, "predicates": [], "action": "PAUSE", "reason_trail": []}
    added = store.change_filter(UUID, rule)
    assert store.change_filter(UUID, dict(rule)) is None  # the same rule again: no change (a re-sent call)
    removed = store.change_filter(UUID, None)
    assert store.change_filter(UUID, None) is None
    replica = ConfigStore(base)
    replica.replay(added)
    assert json.loads(replica.snapshot())["filters"] == {UUID: rule}
    assert replica.serial_no == added["s"]
    replica.replay(removed)
    assert json.loads(replica.snapshot())["filters"] == {}
    for bad in ({"uuid": "other"}, ["PAUSE"]):
        with pytest.raises(errors.ConfigurationError):
            store.change_filter(UUID, bad)


def test_filter_table_follows_reconnects():
    wconfd, changed = FakeWConfd(), []
    table = FilterTable(lambda: changed.append(1))
    rule = {"uuid": UUID, "watermark": 3, "priority": 0, "predicates": [], "action": "PAUSE", "reason_trail": []}
    ensureDeferred(table.follow(wconfd))
    assert table.rules == [] and changed == []
    wconfd.store.change_filter(UUID, rule)
    d = wconfd.reconnected[0]()
    assert isinstance(d, Deferred)
    assert [r.uuid for r in table.rules] == [UUID] and changed == [1]
