"""The web console of ganeti-rapi (/ui/): sessions, CSRF, CSP, rights, event streams."""

from __future__ import annotations

import json
import os
import re
from typing import Any
from urllib.parse import urlencode

from treq.testing import StubTreq
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from ganeti.rapi.server import RapiResource
from ganeti.rapi.ui import events
from ganeti.rapi.ui.resource import CSP, STATIC_DIR, UiResource, liveness_history
from ganeti.rapi.ui.sessions import MAX_AGE, LoginThrottle, SessionKeeper
from ganeti.rapi.users import User, UsersFile, ha1
from tests.unit.test_rapi_server import BASE, FakeLuxi, _temp_path

NOW = 1700000000.0


class SessionTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.now = NOW
        self.users = {"jack": User("jack", "abc", frozenset({"write"}))}
        self.keeper = SessionKeeper(b"k" * 32, self.users.get, lambda: self.now)

    def test_a_session_names_its_user(self) -> None:
        found = self.keeper.check(self.keeper.issue(self.users["jack"]))
        assert found is not None
        self.assertEqual(found[0].user, "jack")

    def test_forged_or_tampered_cookies_are_refused(self) -> None:
        cookie = self.keeper.issue(self.users["jack"])
        other = SessionKeeper(b"x" * 32, self.users.get, lambda: self.now)
        self.assertIsNone(other.check(cookie))  # another key
        payload, _, mac = cookie.partition(".")
        self.assertIsNone(self.keeper.check(payload + "." + "0" * len(mac)))
        for junk in ("", "x", "....", "\u00e9", b"\xff", "a" * 5000):
            self.assertIsNone(self.keeper.check(junk))

    def test_a_session_ends_after_max_age_on_logout_and_on_a_password_change(self) -> None:
        cookie = self.keeper.issue(self.users["jack"])
        self.now += MAX_AGE
        self.assertIsNone(self.keeper.check(cookie))
        self.now = NOW
        found = self.keeper.check(cookie)
        assert found is not None
        self.keeper.revoke(found[0])
        self.assertIsNone(self.keeper.check(cookie))
        cookie = self.keeper.issue(self.users["jack"])
        self.users["jack"] = User("jack", "new", frozenset({"write"}))
        self.assertIsNone(self.keeper.check(cookie))
        cookie = self.keeper.issue(self.users["jack"])
        self.users["jack"] = User("jack", "new", frozenset({"read"}))  # a right taken away: logged out
        self.assertIsNone(self.keeper.check(cookie))
        del self.users["jack"]
        self.assertIsNone(self.keeper.check(cookie))

    def test_csrf_token_belongs_to_its_session(self) -> None:
        one = self.keeper.check(self.keeper.issue(self.users["jack"]))
        two = self.keeper.check(self.keeper.issue(self.users["jack"]))
        assert one is not None and two is not None
        token = self.keeper.csrf_token(one[0])
        self.assertTrue(self.keeper.check_csrf(one[0], token))
        self.assertFalse(self.keeper.check_csrf(two[0], token))
        self.assertFalse(self.keeper.check_csrf(one[0], None))
        self.assertFalse(self.keeper.check_csrf(one[0], ""))


class ThrottleTests(SynchronousTestCase):
    def test_five_failures_in_a_minute_make_an_address_wait(self) -> None:
        now = [NOW]
        throttle = LoginThrottle(lambda: now[0])
        for _ in range(5):
            self.assertEqual(throttle.wait("a"), 0)
            throttle.failed("a")
        self.assertGreater(throttle.wait("a"), 0)
        self.assertEqual(throttle.wait("b"), 0)  # others are not held up
        now[0] += 60
        self.assertEqual(throttle.wait("a"), 0)


class UiTestCase(SynchronousTestCase):
    def setUp(self) -> None:
        self.users_path = _temp_path(self)
        with open(self.users_path, "w") as handle:
            handle.write("jack abc123 write\nreader %s read\nplain pw2\n" % ha1("reader", "pw"))
        self.luxi = FakeLuxi()
        self.resource = RapiResource(self.luxi, UsersFile(self.users_path), clock=lambda: NOW, max_body=4096)
        self.clock = Clock()
        self.liveness_log = os.path.join(os.path.dirname(self.users_path), "liveness.log")
        self.resource.ui = UiResource.for_rapi(self.resource, b"secret", self.liveness_log, self.clock,
                                               lambda: NOW)
        self.stub = StubTreq(self.resource)

    def request(self, method: str, path: str, data: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
        d = self.stub.request(method, BASE + path, data=data, headers=headers or {}, allow_redirects=False)
        self.stub.flush()
        response = self.successResultOf(d)
        content = self.successResultOf(response.content())
        return response.code, response.headers, content

    def login(self, user: str, password: str) -> dict[str, str]:
        """The headers of the session's requests (its cookie and CSRF token)."""
        code, headers, _ = self.request("POST", "/ui/login", urlencode({"user": user, "password": password}).encode(),
                                        {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(code, 303)
        self.assertEqual(headers.getRawHeaders("location"), ["/ui/"])
        (cookie,) = headers.getRawHeaders("set-cookie")
        session = {"Cookie": cookie.split(";")[0]}
        code, _, body = self.request("GET", "/ui/session", headers=session)
        self.assertEqual(code, 200)
        return {**session, "X-CSRF-Token": json.loads(body)["csrf"]}


class UiPageTests(UiTestCase):
    def test_without_a_session_the_console_sends_to_the_login_page(self) -> None:
        code, headers, _ = self.request("GET", "/ui/")
        self.assertEqual((code, headers.getRawHeaders("location")), (303, ["/ui/login"]))
        code, headers, body = self.request("GET", "/ui/login")
        self.assertEqual(code, 200)
        self.assertIn(b"<form", body)
        self.assertEqual(self.request("GET", "/ui/session")[0], 401)
        self.assertEqual(self.request("GET", "/ui/api/2/nodes")[0], 401)
        self.assertEqual(self.request("GET", "/ui/events")[0], 401)

    def test_every_answer_has_a_strict_content_security_policy(self) -> None:
        for path in ("/ui/", "/ui/login", "/ui/static/app.js", "/ui/session", "/ui/nope"):
            _, headers, _ = self.request("GET", path)
            self.assertEqual(headers.getRawHeaders("content-security-policy"), [CSP], path)
            self.assertEqual(headers.getRawHeaders("x-frame-options"), ["DENY"])
        self.assertNotIn("unsafe", CSP)
        self.assertIn("script-src 'self'", CSP)
        self.assertIn("frame-ancestors 'none'", CSP)

    def test_pages_have_no_inline_script_or_style_and_name_no_other_host(self) -> None:
        for name in os.listdir(STATIC_DIR):
            with open(os.path.join(STATIC_DIR, name), encoding="utf-8") as handle:
                text = handle.read()
            if name.endswith(".html"):
                self.assertFalse(re.search(r"<script(?![^>]*\bsrc=)", text), name)
                self.assertNotIn("<style", text)
                self.assertNotIn(" style=", text)
                self.assertNotRegex(text, r"\son[a-z]+=")
            text = text.replace('"http://www.w3.org/2000/svg"', "")  # SVG's XML namespace: a name, never fetched
            self.assertNotRegex(text, r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", name)  # no CDN, nothing fetched elsewhere

    def test_static_files_come_from_the_package_with_their_types(self) -> None:
        code, headers, body = self.request("GET", "/ui/static/app.js")
        self.assertEqual(code, 200)
        self.assertEqual(headers.getRawHeaders("content-type"), ["text/javascript; charset=utf-8"])
        with open(os.path.join(STATIC_DIR, "app.js"), "rb") as handle:
            self.assertEqual(body, handle.read())
        (etag,) = headers.getRawHeaders("etag")
        self.assertEqual(self.request("GET", "/ui/static/app.js", headers={"If-None-Match": etag})[0], 304)
        for bad in ("/ui/static/../resource.py", "/ui/static/nope.js", "/ui/static/index.html",
                    "/ui/static/%2e%2e/sessions.py"):
            self.assertEqual(self.request("GET", bad)[0], 404, bad)

    def test_login_sets_a_secure_httponly_samesite_cookie(self) -> None:
        code, headers, _ = self.request("POST", "/ui/login", b"user=jack&password=abc123",
                                        {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(code, 303)
        (cookie,) = headers.getRawHeaders("set-cookie")
        attributes = [a.strip().lower() for a in cookie.split(";")[1:]]
        for wanted in ("secure", "httponly", "samesite=strict", "path=/ui", "max-age=%d" % MAX_AGE):
            self.assertIn(wanted, attributes)
        code, _, body = self.request("GET", "/ui/", headers={"Cookie": cookie.split(";")[0]})
        self.assertEqual(code, 200)
        self.assertIn(b"/ui/static/app.js", body)

    def test_a_wrong_password_logs_nobody_in_and_floods_are_throttled(self) -> None:
        for _ in range(5):
            code, headers, _ = self.request("POST", "/ui/login", b"user=jack&password=nope")
            self.assertEqual(headers.getRawHeaders("location"), ["/ui/login?failed=1"])
            self.assertIsNone(headers.getRawHeaders("set-cookie"))
        code, headers, _ = self.request("POST", "/ui/login", b"user=jack&password=abc123")
        self.assertEqual(code, 429)  # even the right password waits
        self.assertIsNone(headers.getRawHeaders("set-cookie"))

    def test_a_cross_site_login_is_refused(self) -> None:
        code, _, _ = self.request("POST", "/ui/login", b"user=jack&password=abc123",
                                  {"Origin": "https://evil.example"})
        self.assertEqual(code, 403)

    def test_session_tells_user_and_rights(self) -> None:
        for user, password, write in (("jack", "abc123", True), ("reader", "pw", False)):
            headers = self.login(user, password)
            body = json.loads(self.request("GET", "/ui/session", headers={"Cookie": headers["Cookie"]})[2])
            self.assertEqual((body["user"], body["write"]), (user, write))

    def test_logout_ends_the_session(self) -> None:
        headers = self.login("jack", "abc123")
        self.assertEqual(self.request("POST", "/ui/logout", headers={"Cookie": headers["Cookie"]})[0], 403)  # no token
        code, answer, _ = self.request("POST", "/ui/logout", headers=headers)
        self.assertEqual(code, 200)
        self.assertIn("Max-Age=0", answer.getRawHeaders("set-cookie")[0])
        self.assertEqual(self.request("GET", "/ui/session", headers=headers)[0], 401)


class UiApiTests(UiTestCase):
    def test_reads_go_to_rapi_resources_as_the_session_user(self) -> None:
        headers = self.login("reader", "pw")
        code, _, body = self.request("GET", "/ui/api/2/info", headers={"Cookie": headers["Cookie"]})
        self.assertEqual(code, 200)
        self.assertEqual(json.loads(body)["name"], "cluster.test")
        code, _, body = self.request("GET", "/ui/api/2/nodes?bulk=1", headers={"Cookie": headers["Cookie"]})
        self.assertEqual([n["name"] for n in json.loads(body)], ["node1.test", "node2.test"])
        self.assertEqual(self.request("GET", "/ui/api/2/nope", headers=headers)[0], 404)

    def test_a_write_needs_the_csrf_token(self) -> None:
        headers = self.login("jack", "abc123")
        code, _, body = self.request("PUT", "/ui/api/2/instances/inst1.test/startup", b"{}",
                                     {"Cookie": headers["Cookie"], "Content-Type": "application/json"})
        self.assertEqual(code, 403, body)
        self.assertIn(b"CSRF", body)
        code, _, _ = self.request("PUT", "/ui/api/2/instances/inst1.test/startup", b"{}",
                                  {**headers, "X-CSRF-Token": "0" * 64, "Content-Type": "application/json"})
        self.assertEqual(code, 403)
        self.assertNotIn("SubmitJob", self.luxi.methods())
        code, _, body = self.request("PUT", "/ui/api/2/instances/inst1.test/startup", b"{}",
                                     {**headers, "Content-Type": "application/json"})
        self.assertEqual((code, json.loads(body)), (200, 42))
        (submitted,) = [c for c in self.luxi.calls if c[0] == "SubmitJob"]
        self.assertEqual(submitted[1][0]["OP_ID"], "OP_INSTANCE_STARTUP")

    def test_a_cross_origin_write_is_refused_even_with_the_token(self) -> None:
        headers = self.login("jack", "abc123")
        code, _, _ = self.request("DELETE", "/ui/api/2/jobs/2", headers={**headers, "Origin": "https://evil.example"})
        self.assertEqual(code, 403)
        code, _, _ = self.request("DELETE", "/ui/api/2/jobs/2", headers={**headers, "Origin": "https://rapi.test:5080"})
        self.assertEqual(code, 200)

    def test_a_read_user_cannot_act_even_with_a_valid_token(self) -> None:
        headers = self.login("reader", "pw")
        for method, path in (("PUT", "/ui/api/2/instances/inst1.test/startup"), ("DELETE", "/ui/api/2/jobs/2"),
                             ("POST", "/ui/api/2/nodes/node2.test/modify")):
            code, _, body = self.request(method, path, b"{}", {**headers, "Content-Type": "application/json"})
            self.assertEqual(code, 403, body)
            self.assertIn(b"lacks the right", body)
        self.assertFalse({"SubmitJob", "CancelJob"} & set(self.luxi.methods()))

    def test_rights_are_rapis_own(self) -> None:
        """A user without options reads what anybody may, not what needs C{read}, as over RAPI."""
        plain, reader = self.login("plain", "pw2"), self.login("reader", "pw")
        self.assertEqual(self.request("GET", "/ui/api/2/nodes", headers=plain)[0], 200)
        self.assertEqual(self.request("GET", "/ui/api/2/query/node?fields=name", headers=plain)[0], 403)
        self.assertEqual(self.request("GET", "/ui/api/2/query/node?fields=name", headers=reader)[0], 200)

    def test_liveness_history_of_a_node(self) -> None:
        with open(self.liveness_log, "w") as handle:
            handle.write('{"node": "node2.test", "event": "unreachable", "state": "unreachable", "time": 1}\n'
                         "torn line\n"
                         '{"node": "node1.test", "event": "up", "state": "up", "time": 2}\n'
                         '{"node": "node2.test", "event": "up", "state": "up", "time": 3}\n')
        headers = self.login("reader", "pw")
        code, _, body = self.request("GET", "/ui/nodes/node2.test/liveness", headers=headers)
        self.assertEqual(code, 200)
        self.assertEqual([r["time"] for r in json.loads(body)], [1, 3])
        self.assertEqual(liveness_history(self.liveness_log + ".none", "node2.test"), [])


# --- event streams -------------------------------------------------------------------

class FakeRequest:
    """What a stream writes to."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def events(self) -> list[tuple[str, Any]]:
        out = []
        for chunk in b"".join(self.written).split(b"\n\n"):
            fields = dict(line.split(b": ", 1) for line in chunk.split(b"\n") if b": " in line)
            if b"event" in fields:
                out.append((fields[b"event"].decode(), json.loads(fields[b"data"])))
        self.written.clear()
        return out


class ClusterLuxi:
    """LUXI's answers to the event poller: C{nodes}, C{instances}, C{jobs} rows."""

    def __init__(self) -> None:
        self.nodes = {"node1.test": {"liveness": "up"}, "node2.test": {"liveness": "up"}}
        self.instances = {"inst1.test": {"status": "ADMIN_down"}}
        self.jobs: dict[int, str] = {1: "success"}
        self.rounds = 0
        self.down = False

    async def call(self, method: str, *args: Any) -> Any:
        if self.down:
            raise OSError("connection refused")
        if method == "QueryJobs":
            self.rounds += 1
            return [[i if f == "id" else s if f == "status" else None for f in args[1]] for i, s in self.jobs.items()]
        what, fields = args[0], args[1]
        items = self.nodes if what == "node" else self.instances
        return {"data": [[[0, name] if f == "name" else [0, values[f]] if f in values else [2, None] for f in fields]
                         for name, values in items.items()]}


class EventHubTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.luxi = ClusterLuxi()
        self.hub = events.EventHub(self.luxi, self.clock, interval=0.5)

    def stream(self) -> tuple[events.ClusterStream, FakeRequest]:
        request = FakeRequest()
        stream = events.ClusterStream(request, self.hub, "jack")
        self.hub.subscribe(stream)
        return stream, request

    def test_a_page_gets_a_snapshot_then_only_changes(self) -> None:
        _, request = self.stream()
        ((kind, snapshot),) = request.events()
        self.assertEqual(kind, "snapshot")
        self.assertEqual(sorted(n["name"] for n in snapshot["nodes"]), ["node1.test", "node2.test"])
        self.assertEqual(snapshot["jobs"][0]["id"], 1)
        self.clock.advance(0.5)
        self.assertEqual(request.events(), [])  # nothing changed, nothing sent
        self.luxi.nodes["node2.test"]["liveness"] = "unreachable"
        self.luxi.jobs[2] = "running"
        self.clock.advance(0.5)
        got = dict(request.events())
        self.assertEqual([n["name"] for n in got["nodes"]["changed"]], ["node2.test"])
        self.assertEqual(got["nodes"]["changed"][0]["liveness"], "unreachable")
        self.assertEqual(got["jobs"], {"changed": [{"id": 2, "status": "running", "summary": None, "received_ts": None,
                                                    "start_ts": None, "end_ts": None}], "removed": []})
        del self.luxi.instances["inst1.test"]
        self.clock.advance(0.5)
        self.assertEqual(request.events(), [("instances", {"changed": [], "removed": ["inst1.test"]})])

    def test_one_round_of_queries_serves_every_page_and_none_without_pages(self) -> None:
        one, _ = self.stream()
        two, _ = self.stream()
        self.clock.pump([0.5] * 10)
        self.assertEqual(self.luxi.rounds, 11)  # at subscription, then every 0.5 s: not per page
        self.hub.unsubscribe(one)
        self.hub.unsubscribe(two)
        self.clock.pump([0.5] * int(events.IDLE_GRACE / 0.5))  # a reload would find the state current
        rounds = self.luxi.rounds
        self.assertGreater(rounds, 11)
        self.clock.pump([0.5] * 10)
        self.assertEqual(self.luxi.rounds, rounds)  # then no page, no queries

    def test_a_slow_query_is_asked_less_often(self) -> None:
        """Instances taking 1 s to query are asked every 4 s; nodes still every 0.5 s."""
        elapsed = [0.0]
        counts = {"node": 0, "instance": 0}
        luxi = self.luxi

        class Slow:
            async def call(self, method: str, *args: Any) -> Any:
                if method == "Query":
                    counts[args[0]] += 1
                    if args[0] == "instance":
                        elapsed[0] += 1.0
                return await luxi.call(method, *args)

        self.hub = events.EventHub(Slow(), self.clock, interval=0.5, timer=lambda: elapsed[0])
        self.stream()
        self.clock.pump([0.5] * 16)
        self.assertEqual(counts, {"node": 17, "instance": 3})  # at 0, 4 and 8 s

    def test_a_reload_gets_its_snapshot_at_once(self) -> None:
        one, _ = self.stream()
        self.hub.unsubscribe(one)
        self.clock.advance(1)
        rounds = self.luxi.rounds
        _, request = self.stream()
        self.assertEqual([k for k, _ in request.events()], ["snapshot"])
        self.assertEqual(self.luxi.rounds, rounds)

    def test_a_paused_page_gets_nothing_then_a_new_snapshot(self) -> None:
        stream, request = self.stream()
        request.events()
        stream.pauseProducing()
        self.luxi.nodes["node1.test"]["liveness"] = "unreachable"
        self.clock.advance(0.5)
        self.assertEqual(request.written, [])
        stream.resumeProducing()
        ((kind, snapshot),) = request.events()
        self.assertEqual(kind, "snapshot")
        self.assertIn("unreachable", [n["liveness"] for n in snapshot["nodes"]])

    def test_luxid_unreachable_is_an_error_event_then_cleared(self) -> None:
        _, request = self.stream()
        request.events()
        self.luxi.down = True
        self.clock.advance(0.5)
        ((kind, error),) = request.events()
        self.assertEqual(kind, "error")
        self.assertIn("connection refused", error["message"])
        self.clock.advance(0.5)
        self.assertEqual(request.events(), [])  # said once
        self.luxi.down = False
        self.clock.advance(0.5)
        self.assertEqual(request.events(), [("error", {"message": None})])

    def test_keepalive_comments_keep_a_quiet_stream_open(self) -> None:
        _, request = self.stream()
        request.written.clear()
        self.clock.advance(events.KEEPALIVE + 1)
        self.assertIn(b": keep-alive\n\n", request.written)


class StreamLimitTests(UiTestCase):
    def test_streams_beyond_the_per_user_limit_are_refused(self) -> None:
        self.resource.ui.streams = events.Streams(events.StreamLimits(total=3, per_user=2))
        headers = self.login("jack", "abc123")
        for _ in range(2):
            self.assertTrue(self.resource.ui.streams.admit("jack"))
        code, _, body = self.request("GET", "/ui/events", headers=headers)
        self.assertEqual(code, 429, body)
        self.assertTrue(self.resource.ui.streams.admit("reader"))
        self.assertFalse(self.resource.ui.streams.admit("other"))  # the total


class JobStreamTests(SynchronousTestCase):
    def test_a_job_stream_pushes_log_entries_until_the_job_ends(self) -> None:
        answers = [
            [["running", ["running"]], [[1, [NOW, 0], "message", "starting"]]],
            "nochange",
            [["success", ["success"]], [[2, [NOW, 5], "message", "done"]]],
        ]
        asked: list[Any] = []

        class Luxi:
            async def call_alone(self, method: str, *args: Any) -> Any:
                asked.append(args)
                return answers.pop(0)

        request, ended = FakeRequest(), []
        d = ensureDeferred(events.JobStream(request, Luxi(), 7).run(lambda: ended.append(True)))
        self.successResultOf(d)
        got = request.events()
        self.assertEqual([k for k, _ in got], ["job", "job", "end"])
        self.assertEqual([e["message"] for _, d in got[:2] for e in d["log"]], ["starting", "done"])
        self.assertEqual(got[1][1]["status"], "success")
        self.assertEqual(asked[2][3], 1)  # the next wait asks for entries after the last seen
        self.assertEqual(ended, [True])


class SseFormatTests(SynchronousTestCase):
    def test_an_event_is_one_data_line(self) -> None:
        data = events.sse("nodes", {"x": "a\nb"})
        self.assertEqual(data.count(b"\n"), 3)
        self.assertTrue(data.endswith(b"\n\n"))


class _Channel:
    """What L{console.ConsoleBridge} takes over: an HTTP channel with a transport."""

    def __init__(self) -> None:
        from twisted.internet.testing import StringTransport

        self.transport = StringTransport()
        self.timeout: Any = 60
        self.lost: list[Any] = []
        self.closing = False

    def setTimeout(self, value: Any) -> None:
        self.timeout = value

    def connectionLost(self, reason: Any = None) -> None:
        self.lost.append(reason)

    def dataReceived(self, data: bytes) -> None:
        raise AssertionError("the HTTP channel got WebSocket bytes")

    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def loseConnection(self) -> None:
        self.closing = True


class ConsoleTests(UiTestCase):
    """The serial console's WebSocket: who may open it, and the bridge's framing."""

    def test_only_a_write_user_from_this_origin_with_an_upgrade_gets_a_console(self) -> None:
        path = "/ui/instances/inst1.test/console"
        upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                   "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        self.assertEqual(self.request("GET", path, headers=upgrade)[0], 401)
        reader = self.login("reader", "pw")
        code, _, body = self.request("GET", path, headers={**upgrade, "Cookie": reader["Cookie"],
                                                            "Origin": BASE})
        self.assertEqual(code, 403, body)
        self.assertIn(b"right (write)", body)
        jack = {"Cookie": self.login("jack", "abc123")["Cookie"]}
        self.assertEqual(self.request("GET", path, headers={**upgrade, **jack})[0], 403)          # no Origin
        self.assertEqual(self.request("GET", path, headers={**upgrade, **jack, "Origin": "https://evil.example"})[0],
                         403)
        code, _, body = self.request("GET", path, headers={**jack, "Origin": BASE})
        self.assertEqual(code, 400, body)                                                            # no upgrade
        self.assertIn(b"WebSocket", body)
        self.assertNotIn("Query", self.luxi.methods())                    # nothing was looked up for them

    def bridge(self, alive: list[bool]) -> tuple[Any, _Channel, Any, list[int]]:
        from twisted.internet.testing import StringTransport
        from wsproto import ConnectionType
        from wsproto.connection import Connection

        from ganeti.rapi.ui import console

        channel = _Channel()
        closed: list[int] = []
        bridge = console.ConsoleBridge(channel, Connection(ConnectionType.SERVER), self.clock, lambda: alive[0],
                                       lambda: closed.append(1))
        bridge.take_over(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
        self.assertIsNone(channel.timeout)
        serial = StringTransport()
        bridge.attached(serial)
        return bridge, channel, serial, closed

    def frames(self, client: Any, channel: _Channel) -> list[Any]:
        data = channel.transport.value()
        channel.transport.clear()
        client.receive_data(data.split(b"\r\n\r\n", 1)[1] if data.startswith(b"HTTP/") else data)
        return list(client.events())

    def test_the_bridge_carries_bytes_both_ways_and_pings(self) -> None:
        from wsproto import ConnectionType
        from wsproto.connection import Connection
        from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

        client = Connection(ConnectionType.CLIENT)
        bridge, channel, serial, closed = self.bridge([True])
        (status,) = self.frames(client, channel)
        self.assertEqual(json.loads(status.data), {"connected": True})
        channel.dataReceived(client.send(BytesMessage(data=b"ls\r")) + client.send(TextMessage(data="é")))
        self.assertEqual(serial.value(), b"ls\r" + "é".encode())
        bridge.send_bytes(b"bin  etc\r\n")
        (message,) = self.frames(client, channel)
        self.assertEqual(bytes(message.data), b"bin  etc\r\n")
        self.clock.advance(15)
        self.assertIsInstance(self.frames(client, channel)[0], Ping)
        channel.dataReceived(client.send(CloseConnection(code=1000)))          # the page went away
        self.assertTrue(serial.disconnecting and channel.closing)
        self.assertEqual(closed, [1])
        channel.connectionLost(None)
        self.assertEqual((closed, len(channel.lost)), ([1], 1))               # once; the channel's own cleanup ran
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_a_session_that_ended_ends_the_console(self) -> None:
        from wsproto import ConnectionType
        from wsproto.connection import Connection
        from wsproto.events import CloseConnection

        client = Connection(ConnectionType.CLIENT)
        alive = [True]
        _, channel, serial, closed = self.bridge(alive)
        self.frames(client, channel)
        alive[0] = False                                                       # logged out, password changed...
        self.clock.advance(15)
        events_ = self.frames(client, channel)
        self.assertIn("session ended", events_[0].data)
        self.assertEqual(events_[1].code, 1008)
        self.assertIsInstance(events_[1], CloseConnection)
        self.assertTrue(serial.disconnecting)
        self.assertEqual(closed, [1])

    def test_a_flood_from_the_page_is_cut(self) -> None:
        from wsproto import ConnectionType
        from wsproto.connection import Connection
        from wsproto.events import BytesMessage

        client = Connection(ConnectionType.CLIENT)
        _, channel, serial, closed = self.bridge([True])
        self.frames(client, channel)
        channel.dataReceived(client.send(BytesMessage(data=b"x" * 70000, message_finished=False)))
        self.assertEqual(self.frames(client, channel)[-1].code, 1009)
        self.assertEqual(closed, [1])
        self.assertTrue(serial.disconnecting)

    def test_remote_consoles_go_through_ssh_and_socat(self) -> None:
        from ganeti.rapi.ui import console

        found = {"kind": "msg", "host": "node7.example.com",
                 "command": ["socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:/run/ganeti/kvm/ctrl/i.serial"]}
        self.assertEqual(console.ssh_argv(found), ["ssh", "-oBatchMode=yes", "-oEscapeChar=none", "-T",
                                                   "node7.example.com",
                                                   "socat STDIO UNIX-CONNECT:/run/ganeti/kvm/ctrl/i.serial"])
        self.assertFalse(console.is_here(found))


class NoVncTests(UiTestCase):
    """noVNC's modules come from the installed package's tree, nothing else."""

    def setUp(self) -> None:
        super().setUp()
        self.novnc = os.path.join(os.path.dirname(self.users_path), "novnc")
        os.makedirs(os.path.join(self.novnc, "core", "util"))
        with open(os.path.join(self.novnc, "core", "util", "events.js"), "w") as handle:
            handle.write("export default 1;\n")
        with open(os.path.join(self.novnc, "vnc.html"), "w") as handle:
            handle.write("<html>")
        os.symlink("/etc/passwd", os.path.join(self.novnc, "core", "passwd.js"))
        self.resource.ui.novnc_dir = self.novnc

    def test_modules_are_served_from_the_package_and_nothing_else(self) -> None:
        code, headers, body = self.request("GET", "/ui/novnc/core/util/events.js")
        self.assertEqual((code, body), (200, b"export default 1;\n"))
        self.assertEqual(headers.getRawHeaders("content-type"), ["text/javascript; charset=utf-8"])
        self.assertEqual(headers.getRawHeaders("content-security-policy"), [CSP])
        for bad in ("/ui/novnc/vnc.html", "/ui/novnc/core/passwd.js", "/ui/novnc/core/../../users.js",
                    "/ui/novnc/core/%2e%2e/x.js", "/ui/novnc/core/nope.js", "/ui/novnc/app/ui.js"):
            self.assertEqual(self.request("GET", bad)[0], 404, bad)

    def test_the_vnc_socket_is_a_write_users_action_too(self) -> None:
        path = "/ui/instances/inst1.test/vnc"
        upgrade = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                   "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": "binary",
                   "Origin": BASE}
        self.assertEqual(self.request("GET", path, headers=upgrade)[0], 401)
        reader = self.login("reader", "pw")
        self.assertEqual(self.request("GET", path, headers={**upgrade, "Cookie": reader["Cookie"]})[0], 403)
