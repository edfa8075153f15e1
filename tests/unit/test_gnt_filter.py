"""gnt-filter: the LUXI calls its options become, and what it prints (a fake client)."""

from __future__ import annotations

import io
from typing import Any

import pytest

from ganeti import errors
from ganeti.client import gnt_filter
from ganeti.client.runner import run
from tests.unit.test_cli import FakeClient

UUID = "0f6c8a7e-1d2b-4c3d-9e8f-a1b2c3d4e5f6"


class FilterClient(FakeClient):
    def replace_filter(self, *args: Any) -> Any:
        return self._answer("ReplaceFilter", *args)

    def delete_filter(self, uuid: str) -> Any:
        return self._answer("DeleteFilter", uuid)

    def query_filters(self, uuids: Any, fields: list[str]) -> Any:
        return self._answer("QueryFilters", uuids, fields)


def gnt(*argv: str, fake: FakeClient) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run("gnt-filter", gnt_filter.COMMANDS, list(argv), aliases=gnt_filter.ALIASES,
               client_factory=lambda ctx: fake, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_add_sends_ganeti_defaults_and_prints_the_uuid():
    fake = FilterClient(ReplaceFilter=UUID)
    assert gnt("add", fake=fake) == (0, UUID + "\n", "")
    assert fake.args("ReplaceFilter") == [(None, 0, [], "CONTINUE", [])]


def test_add_with_options():
    fake = FilterClient(ReplaceFilter=UUID)
    code, out, _ = gnt("add", "--priority=3", '--predicates=[["jobid", [">", "id", "watermark"]]]',
                       "--action=RATE_LIMIT 10", "--reason", "maintenance", fake=fake)
    assert (code, out) == (0, UUID + "\n")
    ((uuid, priority, predicates, action, reason),) = fake.args("ReplaceFilter")
    assert (uuid, priority, predicates, action) == (None, 3, [["jobid", [">", "id", "watermark"]]], ["RATE_LIMIT", 10])
    assert len(reason) == 1 and reason[0][:2] == ["gnt:user", "maintenance"] and isinstance(reason[0][2], int)


def test_replace_and_its_alias_modify():
    for command in ("replace", "modify"):
        fake = FilterClient(ReplaceFilter=UUID)
        assert gnt(command, "--action=PAUSE", UUID, fake=fake) == (0, UUID + "\n", "")
        assert fake.args("ReplaceFilter") == [(UUID, 0, [], "PAUSE", [])]


def test_delete_and_its_alias_remove():
    for command in ("delete", "remove"):
        fake = FilterClient(DeleteFilter=None)
        assert gnt(command, UUID, fake=fake) == (0, "", "")
        assert fake.args("DeleteFilter") == [(UUID,)]


def test_errors_of_luxid_are_shown():
    fake = FilterClient(DeleteFilter=errors.OpPrereqError("Filter rule with UUID %s does not exist" % UUID,
                                                          errors.ECODE_NOENT))
    code, out, err = gnt("delete", UUID, fake=fake)
    assert code == 1 and "Filter rule with UUID %s does not exist" % UUID in err


def test_malformed_json_is_refused_before_luxid():
    fake = FilterClient()
    code, _, err = gnt("add", "--predicates=[[jobid", fake=fake)
    assert code == 2 and "not valid JSON" in err and fake.calls == []
    code, _, err = gnt("add", "--priority=high", fake=fake)
    assert code == 2 and fake.calls == []


def test_info_prints_ganeti_layout():
    row = [UUID, 17, 0, [["jobid", [">", "id", "watermark"]]], ["RATE_LIMIT", 2],
           [["gnt:user", "why", 5], ["luxid", "", 6]]]
    fake = FilterClient(QueryFilters=lambda uuids, fields: [row])
    code, out, _ = gnt("info", UUID, fake=fake)
    assert code == 0
    assert out == (
        "UUID: %s\n"
        "  Watermark: 17\n"
        "  Priority: 0\n"
        "  Predicates: [['jobid', ['>', 'id', 'watermark']]]\n"
        "  Action: ['RATE_LIMIT', 2]\n"
        "  Reason trail: [['gnt:user', 'why', 5], ['luxid', '', 6]]\n" % UUID
    )
    assert fake.args("QueryFilters") == [([UUID], gnt_filter.LIST_DEF_FIELDS)]


@pytest.mark.parametrize("argv,qfilter", [((), None), ((UUID,), ["|", ["==", "uuid", UUID]])])
def test_list(argv, qfilter):
    fields = [{"name": n, "title": t, "kind": "other", "doc": ""} for n, t in [("uuid", "UUID"), ("action", "Action")]]
    fake = FilterClient(Query={"fields": fields, "data": [[[0, UUID], [0, "PAUSE"]]]})
    code, out, _ = gnt("list", "-o", "uuid,action", *argv, fake=fake)
    assert code == 0 and out.splitlines() == ["UUID                                 Action", UUID + " PAUSE"]
    assert fake.args("Query") == [("filter", ["uuid", "action"], qfilter)]
