"""The RAPI users file: parsing, password checks and reloading (no Twisted).

One user per line: C{<user> <password> [opt1,opt2]}; C{#} comments and blank
lines are ignored.  Passwords are C{{CLEARTEXT}secret}, a plain C{secret}
(not starting with C{{}), or C{{HA1}<hex>} with hex =
C{MD5("user:Ganeti Remote API:password")}.  Options: C{write}, C{read}.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Iterable

import attrs

from ganeti.rapi.http import REALM

OPT_WRITE = "write"
OPT_READ = "read"

_SCHEME = re.compile(r"^\{([^}]*)\}(.*)$", re.S)


@attrs.frozen
class User:
    name: str
    password: str  # as written in the file, scheme included
    options: frozenset[str] = frozenset()

    def check_password(self, password: str, realm: str = REALM) -> bool:
        """Whether C{password} (cleartext, as sent by the client) is this user's."""
        match = _SCHEME.match(self.password)
        if match is None:
            scheme, stored = "CLEARTEXT", self.password
        else:
            scheme, stored = match.group(1).upper(), match.group(2)
        if scheme == "CLEARTEXT":
            return hmac.compare_digest(stored.encode(), password.encode())
        if scheme == "HA1":
            digest = hashlib.md5(("%s:%s:%s" % (self.name, realm, password)).encode()).hexdigest()
            return hmac.compare_digest(stored.lower().encode(), digest.encode())
        return False  # unknown scheme: nobody gets in


def ha1(user: str, password: str, realm: str = REALM) -> str:
    """The C{{HA1}...} password form for a users file line."""
    return "{HA1}" + hashlib.md5(("%s:%s:%s" % (user, realm, password)).encode()).hexdigest()


def parse_users(lines: Iterable[str]) -> dict[str, User]:
    """Parse a users file; malformed lines (a user without password) are skipped."""
    users: dict[str, User] = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2:
            continue
        options: frozenset[str] = frozenset()
        if len(parts) == 3:
            options = frozenset(o.strip().lower() for o in parts[2].split(",") if o.strip())
        users[parts[0]] = User(parts[0], parts[1], options)
    return users


class UsersFile:
    """The users file, re-read whenever it changes (checked on each use).

    A missing or unreadable file means no users: only anonymous reads work.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._users: dict[str, User] = {}

    def users(self) -> dict[str, User]:
        try:
            st = os.stat(self.path)
        except OSError:
            self._stamp, self._users = None, {}
            return self._users
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                with open(self.path, encoding="utf-8", errors="replace") as handle:
                    self._users = parse_users(handle)
            except OSError:
                self._users = {}
            self._stamp = stamp
        return self._users

    def authenticate(self, name: str, password: str) -> User | None:
        user = self.users().get(name)
        if user is None or not user.check_password(password):
            return None
        return user
