"""The RAPI users file: parsing, password forms, reloading."""

from __future__ import annotations

import hashlib
import os

from twisted.trial.unittest import SynchronousTestCase


def _temp_path(case: SynchronousTestCase) -> str:
    """A path in a fresh temporary directory removed after the test."""
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="rapi-test-")
    case.addCleanup(shutil.rmtree, directory, True)
    return directory + "/users"

from ganeti.rapi.users import UsersFile, ha1, parse_users


class ParseTests(SynchronousTestCase):
    def test_lines(self) -> None:
        users = parse_users([
            "# comment", "", "jack  abc123  write", "reader {HA1}%s read" % ha1("reader", "pw")[5:],
            "both {cleartext}x read,write", "broken",
        ])
        self.assertEqual(sorted(users), ["both", "jack", "reader"])
        self.assertEqual(users["jack"].options, frozenset({"write"}))
        self.assertEqual(users["both"].options, frozenset({"read", "write"}))

    def test_passwords(self) -> None:
        users = parse_users([
            "jack abc123", "clear {CLEARTEXT}s3cret", "hashed {ha1}%s" % hashlib.md5(
                b"hashed:Ganeti Remote API:pw").hexdigest().upper(), "odd {MD5}x",
        ])
        self.assertTrue(users["jack"].check_password("abc123"))
        self.assertFalse(users["jack"].check_password("abc124"))
        self.assertTrue(users["clear"].check_password("s3cret"))
        self.assertFalse(users["clear"].check_password("{CLEARTEXT}s3cret"))
        self.assertTrue(users["hashed"].check_password("pw"))
        self.assertFalse(users["hashed"].check_password("px"))
        self.assertFalse(users["odd"].check_password("x"))


class ReloadTests(SynchronousTestCase):
    def test_reloaded_when_changed(self) -> None:
        path = _temp_path(self)
        users = UsersFile(path)
        self.assertIsNone(users.authenticate("jack", "a"), "no file: nobody")
        with open(path, "w") as handle:
            handle.write("jack a write\n")
        self.assertEqual(users.authenticate("jack", "a").options, frozenset({"write"}))
        with open(path, "w") as handle:
            handle.write("jack bb read\n")
        os.utime(path, ns=(1, 1))
        self.assertIsNone(users.authenticate("jack", "a"))
        self.assertEqual(users.authenticate("jack", "bb").options, frozenset({"read"}))
        os.unlink(path)
        self.assertIsNone(users.authenticate("jack", "bb"))
