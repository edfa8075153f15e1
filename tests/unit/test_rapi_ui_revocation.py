"""Logouts of the web console kept in a file that the master candidates' RAPIs read."""

from __future__ import annotations

import json
import os
import shutil

from twisted.trial.unittest import SynchronousTestCase

from ganeti.rapi.ui.sessions import MAX_AGE, RevocationFile, SessionKeeper
from ganeti.rapi.users import User
from tests.unit.test_rapi_server import _temp_path

NOW = 1700000000.0


class RevocationFileTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.now = NOW
        directory = os.path.dirname(_temp_path(self))
        self.master_file = os.path.join(directory, "master", "ui-revoked")
        self.candidate_file = os.path.join(directory, "candidate", "ui-revoked")
        os.makedirs(os.path.dirname(self.candidate_file))
        self.users = {"jack": User("jack", "abc", frozenset({"write"}))}
        self.pushed: list[bytes] = []
        self.master = self.keeper(self.master_file)
        self.master.on_revoke = self.pushed.append
        self.candidate = self.keeper(self.candidate_file)

    def keeper(self, path: str) -> SessionKeeper:
        return SessionKeeper(b"k" * 32, self.users.get, lambda: self.now, RevocationFile(path))

    def test_a_logout_written_and_pushed_is_refused_by_the_other_rapi(self) -> None:
        gone, kept = self.master.issue(self.users["jack"]), self.master.issue(self.users["jack"])
        found = self.master.check(gone)
        assert found is not None
        self.assertIsNotNone(self.candidate.check(gone))          # before the logout: valid everywhere
        self.master.revoke(found[0])
        (data,) = self.pushed
        self.assertEqual(json.loads(data), {found[0].nonce: NOW + MAX_AGE})
        self.assertIsNone(self.master.check(gone))
        self.assertIsNotNone(self.candidate.check(gone))          # not pushed there yet
        shutil.copy(self.master_file, self.candidate_file)      # what the push does
        self.assertIsNone(self.candidate.check(gone))
        self.assertIsNotNone(self.candidate.check(kept))
        self.assertIsNone(self.keeper(self.master_file).check(gone))  # a restarted RAPI remembers

    def test_a_revocation_is_never_taken_back_and_expired_ones_are_dropped(self) -> None:
        self.cookie_of_first = self.master.issue(self.users["jack"])
        first = self.master.check(self.cookie_of_first)
        assert first is not None
        self.master.revoke(first[0])
        with open(self.master_file, "w") as handle:                  # an older copy arrives
            handle.write("{}")
        self.assertIsNone(self.master.check(self.cookie_of_first))  # still revoked: a union
        self.now += 10
        second = self.master.check(self.master.issue(self.users["jack"]))
        assert second is not None
        self.master.revoke(second[0])
        self.assertEqual(sorted(json.loads(self.pushed[-1])), sorted([first[0].nonce, second[0].nonce]))
        self.now = NOW + MAX_AGE + 5                                 # the first session would have ended
        third = self.master.check(self.master.issue(self.users["jack"]))
        assert third is not None
        self.master.revoke(third[0])
        self.assertNotIn(first[0].nonce, json.loads(self.pushed[-1]))

    def test_a_broken_file_counts_as_empty(self) -> None:
        cookie = self.candidate.issue(self.users["jack"])
        for junk in (b"", b"not json", b"[1, 2]", b'{"a": "b"}', b"\xff\xfe"):
            with open(self.candidate_file, "wb") as handle:
                handle.write(junk)
            self.assertIsNotNone(self.candidate.check(cookie), junk)
