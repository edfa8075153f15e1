"""Sessions of the web console: signed cookies, CSRF tokens, the login throttle (pure).

A session is a cookie the server signs and keeps nothing of::

    base64url(user "\\n" issued "\\n" nonce) "." hex(HMAC-SHA256(key, payload "\\n" H(password entry)))

The MAC covers a hash of the user's line in RAPI's users file as it is now,
so a changed password, a removed user or a changed right ends the session at
once; rights are read from the users file on every request anyway.  A session
ends L{MAX_AGE} seconds after the login; a logout revokes its nonce, kept until
the session would have ended in L{RevocationFile} (C{var/lib/ganeti/rapi/ui-revoked}),
which the master's RAPI pushes to every master candidate at once
(L{ganeti.rapi.ui.revocation}) and WConfD carries with every configuration
it distributes: the RAPI of a candidate that becomes master refuses the
revoked sessions too.  The key is derived from the
cluster's RAPI key, so every candidate's RAPI accepts the master's sessions
(a candidate forwards C{/ui/} to the master's RAPI as any other request).

The CSRF token of a session is C{HMAC(key, "csrf" nonce)}: the page reads it
from C{/ui/session} (same origin only) and sends it in C{X-CSRF-Token} with
every request that changes anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import time
from typing import Callable

import attrs
import orjson

from ganeti.dirwatch import file_stamp
from ganeti.rapi.users import User

#: the session cookie's name
COOKIE = "ganeti_ui"
#: seconds a session lasts after its login
MAX_AGE = 8 * 3600
#: failed logins from one address within L{THROTTLE_WINDOW} after which it must wait
THROTTLE_FAILURES = 5
THROTTLE_WINDOW = 60.0
#: addresses the throttle remembers (the oldest are forgotten first)
THROTTLE_ADDRESSES = 10000


def derive_key(secret: bytes) -> bytes:
    """The session key from a cluster secret (the RAPI private key's PEM)."""
    return hmac.new(secret, b"ganeti-rapi-ui-session-v1", hashlib.sha256).digest()


def _entry_hash(user: User) -> bytes:
    line = "%s\n%s\n%s" % (user.name, user.password, ",".join(sorted(user.options)))
    return hashlib.sha256(line.encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@attrs.frozen
class Session:
    user: str
    issued: float
    nonce: str

    @property
    def expires(self) -> float:
        return self.issued + MAX_AGE


class RevocationFile:
    """The revoked sessions on disk: C{{nonce: when the session would have ended}} as JSON.

    Read again whenever the file changes (a push from the master replaced it),
    written whole by a rename (readers never see half of it); what is not a
    valid file counts as empty.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None

    def _stamp(self) -> tuple[int, int, int] | None:
        return file_stamp(self.path)

    def changed(self) -> bool:
        return self._stamp() != self._seen

    def load(self) -> dict[str, float]:
        stamp = self._stamp()
        self._seen = stamp
        if stamp is None:
            return {}
        try:
            with open(self.path, "rb") as handle:
                data = orjson.loads(handle.read(4 * 1024 * 1024))
        except (OSError, orjson.JSONDecodeError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float)) and len(str(k)) <= 64}

    def save(self, revoked: dict[str, float]) -> bytes:
        """Write C{revoked}; the bytes written (what is pushed to the candidates)."""
        data = orjson.dumps(revoked, option=orjson.OPT_SORT_KEYS)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        temp = "%s.%d.tmp" % (self.path, os.getpid())
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o640)
        os.replace(temp, self.path)
        self._seen = self._stamp()
        return data


class SessionKeeper:
    """Issues and checks session cookies and CSRF tokens.

    @param key: the signing key (L{derive_key}); a random one when C{None}
    @param lookup: the user of a name as the users file says now (or C{None})
    """

    def __init__(self, key: bytes | None, lookup: Callable[[str], User | None],
                 clock: Callable[[], float] = time.time, store: RevocationFile | None = None) -> None:
        self.key = key if key is not None else os.urandom(32)
        self.lookup = lookup
        self.clock = clock
        #: where revocations are kept (none: in memory only)
        self.store = store
        #: nonce -> when its session would have ended
        self._revoked: dict[str, float] = {}
        #: called with the file's bytes after a logout wrote it (the push to the candidates)
        self.on_revoke: Callable[[bytes], object] | None = None

    def _refresh(self) -> None:
        if self.store is not None and self.store.changed():
            self._revoked.update(self.store.load())  # a union: a revocation is never taken back

    def _mac(self, payload: bytes, user: User) -> str:
        return hmac.new(self.key, payload + b"\n" + _entry_hash(user), hashlib.sha256).hexdigest()

    def issue(self, user: User) -> str:
        """A new session cookie value for C{user} (who just gave the right password)."""
        payload = ("%s\n%d\n%s" % (user.name, int(self.clock()), os.urandom(16).hex())).encode()
        return "%s.%s" % (_b64(payload), self._mac(payload, user))

    def check(self, cookie: str | bytes | None) -> tuple[Session, User] | None:
        """The session of C{cookie} and its user now, or C{None} (forged, expired, revoked,
        user gone or changed)."""
        if not cookie:
            return None
        if isinstance(cookie, bytes):
            try:
                cookie = cookie.decode("ascii")
            except UnicodeDecodeError:
                return None
        if len(cookie) > 1024:
            return None
        encoded, _, mac = cookie.partition(".")
        try:
            payload = _unb64(encoded)
            name, issued_text, nonce = payload.decode("utf-8").split("\n")
            issued = float(int(issued_text))
        except (binascii.Error, ValueError, UnicodeDecodeError):
            return None
        user = self.lookup(name)
        if user is None or not hmac.compare_digest(mac.encode("ascii", "replace"),
                                                   self._mac(payload, user).encode()):
            return None
        session = Session(name, issued, nonce)
        now = self.clock()
        self._refresh()
        if not (issued - 60 <= now < session.expires) or nonce in self._revoked:
            return None
        return session, user

    def revoke(self, session: Session) -> None:
        """End C{session} (a logout)."""
        now = self.clock()
        self._refresh()
        for nonce in [n for n, until in self._revoked.items() if until <= now]:
            del self._revoked[nonce]
        self._revoked[session.nonce] = session.expires
        if self.store is not None:
            data = self.store.save(self._revoked)
            if self.on_revoke is not None:
                self.on_revoke(data)

    def csrf_token(self, session: Session) -> str:
        return hmac.new(self.key, b"csrf\n" + session.nonce.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, session: Session, token: str | bytes | None) -> bool:
        if not token:
            return False
        if isinstance(token, str):
            token = token.encode("ascii", "replace")
        return hmac.compare_digest(token, self.csrf_token(session).encode())


class LoginThrottle:
    """At most L{THROTTLE_FAILURES} failed logins per address per L{THROTTLE_WINDOW} seconds."""

    def __init__(self, clock: Callable[[], float] = time.time, failures: int = THROTTLE_FAILURES,
                 window: float = THROTTLE_WINDOW) -> None:
        self.clock = clock
        self.failures = failures
        self.window = window
        self._failed: dict[str, list[float]] = {}

    def _recent(self, address: str) -> list[float]:
        now = self.clock()
        times = [t for t in self._failed.get(address, []) if now - t < self.window]
        if times:
            self._failed[address] = times
        else:
            self._failed.pop(address, None)
        return times

    def wait(self, address: str) -> float:
        """Seconds C{address} must wait before it may try again (0: it may now)."""
        times = self._recent(address)
        if len(times) < self.failures:
            return 0.0
        return max(0.0, times[-self.failures] + self.window - self.clock())

    def failed(self, address: str) -> None:
        times = self._recent(address)
        times.append(self.clock())
        self._failed.pop(address, None)
        self._failed[address] = times  # newest last, so the oldest is forgotten first
        while len(self._failed) > THROTTLE_ADDRESSES:
            del self._failed[next(iter(self._failed))]

    def succeeded(self, address: str) -> None:
        self._failed.pop(address, None)
