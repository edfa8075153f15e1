"""RAPI /2/filters and /2/filters/<uuid>: what reaches LuxiD, what the client gets."""

from __future__ import annotations

from typing import Any

from ganeti import errors
from tests.unit.test_rapi_server import JACK, RapiTestCase, auth

UUID = "0f6c8a7e-1d2b-4c3d-9e8f-a1b2c3d4e5f6"
RULE = [17, 0, [["jobid", [">", "id", "watermark"]]], "PAUSE", [["luxid", "", 5]], UUID]


class FilterTests(RapiTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.luxi.answers["QueryFilters"] = self._query_filters
        self.luxi.answers["ReplaceFilter"] = lambda uuid, *rest: uuid or UUID
        self.luxi.answers["DeleteFilter"] = self._delete

    def _query_filters(self, uuids: Any, fields: list[str]) -> list[list[Any]]:
        if uuids and UUID not in uuids:
            return []
        names = ["watermark", "priority", "predicates", "action", "reason_trail", "uuid"]
        return [[RULE[names.index(f)] for f in fields]]

    def _delete(self, uuid: str) -> None:
        if uuid != UUID:
            raise errors.OpPrereqError("Filter rule with UUID %s does not exist" % uuid, errors.ECODE_NOENT)

    def test_list_and_get(self) -> None:
        self.assertEqual(self.ok("GET", "/2/filters"), [{"uuid": UUID, "uri": "/2/filters/%s" % UUID}])
        bulk = self.ok("GET", "/2/filters?bulk=1")
        self.assertEqual(bulk, [{"watermark": 17, "priority": 0, "predicates": RULE[2], "action": "PAUSE",
                                 "reason_trail": RULE[4], "uuid": UUID}])
        self.assertEqual(self.ok("GET", "/2/filters/%s" % UUID), bulk[0])
        self.error(404, "GET", "/2/filters/11111111-2222-3333-4444-555555555555")

    def test_add_replace_delete_go_straight_to_luxid(self) -> None:
        body = {"priority": 3, "predicates": [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]], "action": "REJECT",
                "reason": [["gnt:client", "", 1]]}
        self.assertEqual(self.ok("POST", "/2/filters", body, user=JACK), UUID)
        self.assertEqual(self.luxi.calls[-1], ("ReplaceFilter", None, 3, body["predicates"], "REJECT", body["reason"]))
        self.assertEqual(self.ok("PUT", "/2/filters/%s" % UUID, {}, user=JACK), UUID)
        self.assertEqual(self.luxi.calls[-1], ("ReplaceFilter", UUID, 0, [], "CONTINUE", []))
        self.assertIsNone(self.ok("DELETE", "/2/filters/%s" % UUID, user=JACK))
        self.error(404, "DELETE", "/2/filters/11111111-2222-3333-4444-555555555555", headers=auth(*JACK))
        self.assertNotIn("SubmitJob", self.luxi.methods())

    def test_bad_bodies_are_refused_before_luxid(self) -> None:
        for body, words in [({"priority": 1, "colour": "red"}, "doesn't support the parameter 'colour'"),
                            ({"priority": "1"}, "priority"), ({"predicates": {}}, "predicates"),
                            ({"reason": "x"}, "reason"), ([1], "JSON object")]:
            _, answer = self.error(400, "POST", "/2/filters", body, headers=auth(*JACK))
            self.assertIn(words, answer["message"])
        self.assertNotIn("ReplaceFilter", self.luxi.methods())
        self.error(401, "POST", "/2/filters", {})

    def test_the_filter_query_resource(self) -> None:
        self.ok("GET", "/2/query/filter?fields=uuid,action", user=JACK)
        self.assertEqual(self.luxi.calls[-1], ("Query", "filter", ["uuid", "action"], None))
        self.ok("GET", "/2/query/filter/fields", user=JACK)
        self.assertEqual(self.luxi.calls[-1][:2], ("QueryFields", "filter"))
