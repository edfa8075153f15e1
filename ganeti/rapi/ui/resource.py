"""The C{/ui/} paths of C{ganeti-rapi}: pages, login, sessions, RAPI under C{/ui/api/}, events.

=================================  ==========================================================
C{GET /ui/}                        the console (C{index.html}); without a session: to the login
C{GET /ui/login}                   the login page; C{POST} (form: C{user}, C{password}) logs in
C{POST /ui/logout}                 ends the session
C{GET /ui/session}                 C{{"user", "write", "csrf"}} of the session
C{GET /ui/static/NAME}             the page's script, style sheet (from the installed package)
C{/ui/api/<RAPI path>}             any RAPI resource (C{/ui/api/2/instances}, ...), as the session's user
C{GET /ui/events}                  server-sent events: nodes, instances, jobs (L{ganeti.rapi.ui.events})
C{GET /ui/jobs/ID/events}          server-sent events: one job's status and log
C{GET /ui/nodes/NAME/liveness}     the node's liveness history (C{liveness.log})
C{GET /ui/instances/NAME/console}  WebSocket: the kvm instance's serial console (L{ganeti.rapi.ui.console})
C{GET /ui/instances/NAME/vnc}      WebSocket: the kvm instance's VNC display, for noVNC (L{ganeti.rapi.ui.console})
C{GET /ui/novnc/PATH}              noVNC's modules, from Debian's C{novnc} package (C{/usr/share/novnc})
C{GET /ui/verify}                  the last C{gnt-cluster verify} run's alerts; C{POST}: run one (L{ganeti.rapi.ui.verify})
=================================  ==========================================================

Every answer carries a Content-Security-Policy that allows scripts and styles
from this origin only (none inline), forbids framing, and C{no-store} for
everything but the static files.  Everything but the login page and the
static files needs a session (L{ganeti.rapi.ui.sessions}); a request that is
not C{GET} must carry the session's CSRF token in C{X-CSRF-Token} (and, when
the browser sends one, an C{Origin} of this host), and a RAPI write needs the
C{write} right in RAPI's users file, as over RAPI itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from typing import Any, Callable
from urllib.parse import parse_qs

import orjson
from twisted.internet.defer import CancelledError, ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.web.server import NOT_DONE_YET

from ganeti.console_socket import socket_path as serial_socket
from ganeti.rapi import baserlib
from ganeti.rapi.http import HttpError
from ganeti.rapi.luxi import LuxidUnreachable
from ganeti.rapi.ui import charts, console, events, verify
from ganeti.rapi.ui.sessions import COOKIE, MAX_AGE, LoginThrottle, RevocationFile, SessionKeeper, derive_key
from ganeti.rapi.users import OPT_WRITE

STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    b"content-security-policy": CSP.encode(),
    b"x-content-type-options": b"nosniff",
    b"x-frame-options": b"DENY",
    b"referrer-policy": b"same-origin",  # not no-referrer: that makes the browser send "Origin: null"
}
_TYPES = {".html": b"text/html; charset=utf-8", ".js": b"text/javascript; charset=utf-8",
          ".css": b"text/css; charset=utf-8", ".svg": b"image/svg+xml", ".png": b"image/png"}
_SAFE = frozenset({b"GET", b"HEAD"})
_JOB_EVENTS = re.compile(r"^/ui/jobs/(\d{1,18})/events$")
_NODE_LIVENESS = re.compile(r"^/ui/nodes/(%s)/liveness$" % baserlib.NAME)
_CONSOLE = re.compile(r"^/ui/instances/(%s)/(console|vnc)$" % baserlib.NAME)
#: where Debian's novnc package puts noVNC (its ES modules are served from there, never from a CDN)
NOVNC_DIR = "/usr/share/novnc"
_NOVNC_PATH = re.compile(r"^/ui/novnc/((?:core|vendor)(?:/[A-Za-z0-9_.-]+)+\.js)$")
#: liveness records answered per node, newest last
LIVENESS_HISTORY = 200


def load_static(directory: str = STATIC_DIR) -> dict[str, tuple[bytes, bytes, bytes]]:
    """C{{name: (content type, body, etag)}} of the static files (read once, at start)."""
    files: dict[str, tuple[bytes, bytes, bytes]] = {}
    for name in sorted(os.listdir(directory)):
        ctype = _TYPES.get(os.path.splitext(name)[1])
        path = os.path.join(directory, name)
        if ctype is None or not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            body = handle.read()
        files[name] = (ctype, body, b'"%s"' % hashlib.sha256(body).hexdigest()[:32].encode())
    return files


def liveness_history(path: str, node: str, limit: int = LIVENESS_HISTORY) -> list[dict[str, Any]]:
    """The last C{limit} records of C{node} in C{liveness.log} (torn or bad lines skipped)."""
    found: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict) and record.get("node") == node:
                    found.append(record)
                    if len(found) > 2 * limit:
                        del found[:-limit]
    except FileNotFoundError:
        return []
    return found[-limit:]


class UiResource:
    """Renders every C{/ui} request (L{ganeti.rapi.server.RapiResource} hands them over).

    @param rapi: the RAPI resource: its LUXI pool, users file, body parsing, error answers, access log
    @param keeper: the sessions
    @param hub: the event poller behind C{/ui/events}
    @param liveness_log: path of the master's C{liveness.log}
    """

    log = Logger()

    def __init__(self, rapi: Any, keeper: SessionKeeper, hub: events.EventHub, liveness_log: str, *,
                 throttle: LoginThrottle | None = None, limits: events.StreamLimits | None = None,
                 static: dict[str, tuple[bytes, bytes, bytes]] | None = None, reactor: Any = None) -> None:
        self.rapi = rapi
        self.keeper = keeper
        self.hub = hub
        self.liveness_log = liveness_log
        self.throttle = throttle if throttle is not None else LoginThrottle(keeper.clock)
        self.streams = events.Streams(limits or events.StreamLimits())
        self.static = static if static is not None else load_static()
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.novnc_dir = NOVNC_DIR

    @classmethod
    def for_rapi(cls, rapi: Any, secret: bytes | None, liveness_log: str, clock: IReactorTime,
                 clock_time: Callable[[], float] = time.time, mond_port: int | None = None,
                 revoked: str | None = None) -> UiResource:
        """@param mond_port: MonD's port on the nodes, for the charts (none: no charts)
        @param revoked: the file of revoked sessions (none: kept in memory)"""
        key = derive_key(secret) if secret else None
        keeper = SessionKeeper(key, lambda name: rapi.users.users().get(name), clock_time,
                               RevocationFile(revoked) if revoked else None)
        metrics = charts.NodeMetrics(clock, mond_port) if mond_port else None
        return cls(rapi, keeper, events.EventHub(rapi.luxi, clock, metrics=metrics), liveness_log, reactor=clock)

    # --- entry -----------------------------------------------------------------------
    def render(self, request: Any) -> Any:
        for name, value in SECURITY_HEADERS.items():
            request.setHeader(name, value)
        started = time.perf_counter()
        state: dict[str, Any] = {"user": None, "resource": "/ui"}
        try:
            result = self._route(request, state)
        except HttpError as e:
            self._error(request, e)
            self.rapi._access_log(request, state, started)
            return NOT_DONE_YET
        if result is NOT_DONE_YET:
            if state.get("stream"):
                self.rapi._access_log(request, state, started)  # logged as it opens
            else:
                request.notifyFinish().addBoth(lambda _: self.rapi._access_log(request, state, started))
            return NOT_DONE_YET
        self.rapi._access_log(request, state, started)
        return result

    def _route(self, request: Any, state: dict[str, Any]) -> Any:
        path = self.rapi._path(request)
        method = request.method
        if path == "/ui":
            return self._redirect(request, "/ui/")
        if path.startswith("/ui/static/") and method in _SAFE:
            state["resource"] = "/ui/static"
            return self._static(request, path[len("/ui/static/"):])
        if path.startswith("/ui/novnc/") and method in _SAFE:
            state["resource"] = "/ui/novnc"
            return self._novnc(request, path)
        if path == "/ui/login":
            state["resource"] = path
            if method == b"POST":
                return self._login(request, state)
            if method in _SAFE:
                return self._page(request, "login.html")
            raise HttpError(405, None, {"Allow": "GET, POST"})
        found = self.keeper.check(self._cookie(request))
        if path in ("/ui/", "/ui/index.html") and method in _SAFE:
            state["resource"] = "/ui/"
            if found is None:
                return self._redirect(request, "/ui/login")
            state["user"] = found[0].user
            return self._page(request, "index.html")
        if found is None:
            raise HttpError(401, "Not logged in (or the session ended): log in at /ui/login")
        session, user = found
        state["user"] = session.user
        if method not in _SAFE:
            self._check_origin(request)
            if not self.keeper.check_csrf(session, request.getHeader(b"x-csrf-token")):
                raise HttpError(403, "Missing or wrong CSRF token")
        if path == "/ui/logout" and method == b"POST":
            state["resource"] = path
            try:
                self.keeper.revoke(session)
            except OSError as e:  # revoked here all the same; the other candidates do not know it
                self.log.error("web console: cannot write the revoked sessions: {why}", why=e)
            self._set_cookie(request, "", 0)
            return self._json(request, {"logged_out": True})
        if path == "/ui/session" and method in _SAFE:
            state["resource"] = path
            return self._json(request, {"user": session.user, "write": OPT_WRITE in user.options,
                                        "csrf": self.keeper.csrf_token(session), "expires": session.expires})
        if path.startswith("/ui/api/"):
            return self._api(request, path[len("/ui/api"):], user, state)
        if path == "/ui/events" and method in _SAFE:
            state["resource"] = path
            return self._cluster_events(request, session.user, state)
        match = _JOB_EVENTS.match(path)
        if match is not None and method in _SAFE:
            state["resource"] = "/ui/jobs/{job_id}/events"
            return self._job_events(request, int(match.group(1)), session.user, state)
        if path == "/ui/verify":
            state["resource"] = path
            return self._verify(request, user, state)
        match = _CONSOLE.match(path)
        if match is not None and method == b"GET":
            state["resource"] = "/ui/instances/{name}/" + match.group(2)
            return self._console(request, match.group(1), user, state, vnc=match.group(2) == "vnc")
        match = _NODE_LIVENESS.match(path)
        if match is not None and method in _SAFE:
            state["resource"] = "/ui/nodes/{name}/liveness"
            return self._json(request, liveness_history(self.liveness_log, match.group(1)))
        raise HttpError(404, "Nothing matches the given URI")

    # --- answers ---------------------------------------------------------------------
    def _error(self, request: Any, error: HttpError) -> None:
        request.setHeader(b"cache-control", b"no-store")
        self.rapi._reply(request, error.code, orjson.dumps(error.body()), error.headers)

    def _json(self, request: Any, value: Any) -> bytes:
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"cache-control", b"no-store")
        return orjson.dumps(value)

    def _redirect(self, request: Any, where: str) -> bytes:
        request.setResponseCode(303)
        request.setHeader(b"location", where.encode("ascii"))
        request.setHeader(b"cache-control", b"no-store")
        return b""

    def _page(self, request: Any, name: str) -> bytes:
        ctype, body, _ = self.static[name]
        request.setHeader(b"content-type", ctype)
        request.setHeader(b"cache-control", b"no-store")
        return body

    def _static(self, request: Any, name: str) -> bytes:
        found = self.static.get(name)
        if found is None or name.endswith(".html"):
            raise HttpError(404)
        ctype, body, etag = found
        request.setHeader(b"etag", etag)
        request.setHeader(b"cache-control", b"no-cache")
        if request.getHeader(b"if-none-match") == etag:
            request.setResponseCode(304)
            return b""
        request.setHeader(b"content-type", ctype)
        return body

    def _cookie(self, request: Any) -> bytes | None:
        cookie: bytes | None = request.getCookie(COOKIE.encode())
        return cookie

    def _set_cookie(self, request: Any, value: str, max_age: int) -> None:
        request.addCookie(COOKIE.encode(), value.encode("ascii"), path=b"/ui", max_age=str(max_age).encode(),
                          secure=True, httpOnly=True, sameSite="strict")

    def _check_origin(self, request: Any) -> None:
        """A browser's cross-site request names another origin: refused.

        The origin must be this host, or the candidate that forwarded the request
        (C{X-Forwarded-Host}: a header a cross-site page cannot set without a CORS
        preflight, which nothing here answers)."""
        origin = request.getHeader(b"origin")
        if origin is None:
            return
        hosts = [request.getHeader(b"host"), request.getHeader(b"x-forwarded-host")]
        if origin.lower() not in [b"https://" + h.lower() for h in hosts if h]:
            raise HttpError(403, "Cross-origin request refused")

    # --- login -----------------------------------------------------------------------
    def _login(self, request: Any, state: dict[str, Any]) -> bytes:
        self._check_origin(request)
        address = str(getattr(request.getClientAddress(), "host", "") or "")
        wait = self.throttle.wait(address)
        if wait > 0:
            raise HttpError(429, "Too many failed logins: try again in %d s" % (int(wait) + 1),
                            {"Retry-After": str(int(wait) + 1)})
        if getattr(request, "too_big", False):
            raise HttpError(413, "The request body is too large")
        request.content.seek(0)
        data = request.content.read(8193)
        if len(data) > 8192:
            raise HttpError(413, "The request body is too large")
        try:
            form = parse_qs(data.decode("utf-8"), keep_blank_values=True, max_num_fields=10, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise HttpError(400, "Invalid login form") from None
        name = (form.get("user") or [""])[0]
        password = (form.get("password") or [""])[0]
        user = self.rapi.users.authenticate(name, password) if name else None
        if user is None:
            self.throttle.failed(address)
            self.log.info("web console: failed login for user {user!r} from {address}", user=name, address=address)
            return self._redirect(request, "/ui/login?failed=1")
        self.throttle.succeeded(address)
        state["user"] = name
        self._set_cookie(request, self.keeper.issue(user), MAX_AGE)
        return self._redirect(request, "/ui/")

    # --- RAPI under /ui/api ----------------------------------------------------------
    def _api(self, request: Any, path: str, user: Any, state: dict[str, Any]) -> Any:
        method = request.method.decode("ascii", "replace")
        found = baserlib.match(path)
        if found is None:
            raise HttpError(404, "Nothing matches the given URI")
        route, groups = found
        state["resource"] = "/ui/api" + route.template
        if any(g in (".", "..") for g in groups):
            raise HttpError(404)
        handler = route.methods.get(method)
        if handler is None:
            raise HttpError(501, "Method %s is unsupported for path %s" % (method, path),
                            {"Allow": ", ".join(sorted(route.methods))})
        if handler.access and not (user.options & set(handler.access)):  # as RAPI's own check
            raise HttpError(403, "User %s lacks the right (%s) to do this" % (user.name, " or ".join(handler.access)))
        args = self.rapi._args(request)
        body = self.rapi._body(request)
        ctx = baserlib.Context(method, path, args, body, user.name, self.rapi.luxi, self.rapi.clock)

        async def call() -> bytes:
            result = await handler.handler(ctx, *groups)
            if isinstance(result, baserlib.Encoded):
                return result.data
            return orjson.dumps(result)

        d = ensureDeferred(call())
        request.notifyFinish().addErrback(lambda _: d.cancel())
        request.setHeader(b"cache-control", b"no-store")
        d.addCallback(lambda data: self.rapi._reply(request, 200, data, {}))
        d.addErrback(self.rapi._error, request)
        return NOT_DONE_YET

    # --- event streams ---------------------------------------------------------------
    def _cluster_events(self, request: Any, user: str, state: dict[str, Any]) -> Any:
        if not self.streams.admit(user):
            raise HttpError(429, "Too many event streams open", {"Retry-After": "10"})
        state["stream"] = True
        events.start_stream(request)
        stream = events.ClusterStream(request, self.hub, user)
        request.registerProducer(stream, True)

        def closed(_: Any) -> None:
            self.hub.unsubscribe(stream)
            self.streams.leave(user)

        request.notifyFinish().addBoth(closed)
        self.hub.subscribe(stream)
        return NOT_DONE_YET

    def _job_events(self, request: Any, job_id: int, user: str, state: dict[str, Any]) -> Any:
        if not self.streams.admit(user):
            raise HttpError(429, "Too many event streams open", {"Retry-After": "10"})
        state["stream"] = True
        events.start_stream(request)
        left: list[bool] = []

        def done() -> None:
            if not left:
                left.append(True)
                self.streams.leave(user)
            if not request.finished and not getattr(request, "_disconnected", False):
                request.finish()

        d = ensureDeferred(events.JobStream(request, self.rapi.luxi, job_id).run(done))
        request.notifyFinish().addErrback(lambda _: d.cancel())
        d.addErrback(lambda f: None if f.check(CancelledError) else self.log.failure("job stream", f))
        return NOT_DONE_YET

    # --- gnt-cluster verify --------------------------------------------------------------
    def _verify(self, request: Any, user: Any, state: dict[str, Any]) -> Any:
        if request.method in _SAFE:
            d = ensureDeferred(verify.last_run(self.rapi.luxi))
        elif request.method == b"POST":
            if OPT_WRITE not in user.options:
                raise HttpError(403, "User %s lacks the right (write) to do this" % user.name)
            ctx = baserlib.Context("POST", "/ui/verify", self.rapi._args(request), {}, user.name, self.rapi.luxi,
                                   self.rapi.clock)
            d = ensureDeferred(ctx.submit(verify.VERIFY_OP, {}, resource="/ui/verify"))
            d.addCallback(lambda job_id: {"job": job_id})
        else:
            raise HttpError(405, None, {"Allow": "GET, POST"})
        request.notifyFinish().addErrback(lambda _: d.cancel())
        request.setHeader(b"cache-control", b"no-store")
        d.addCallback(lambda value: self.rapi._reply(request, 200, orjson.dumps(value), {}))
        d.addErrback(self.rapi._error, request)
        return NOT_DONE_YET

    # --- the serial console (a WebSocket) --------------------------------------------
    def _novnc(self, request: Any, path: str) -> bytes:
        """One of noVNC's modules from the installed package (no session needed: it is public code)."""
        match = _NOVNC_PATH.match(path)
        if match is None or ".." in match.group(1):
            raise HttpError(404)
        name = os.path.join(self.novnc_dir, match.group(1))
        if os.path.realpath(name) != os.path.normpath(name):  # no symbolic link out of the package's tree
            raise HttpError(404)
        try:
            with open(name, "rb") as handle:
                body = handle.read(4 * 1024 * 1024)
        except OSError:
            raise HttpError(404, "noVNC is not installed (Debian's novnc package)" if not os.path.isdir(
                self.novnc_dir) else None) from None
        etag = b'"%s"' % hashlib.sha256(body).hexdigest()[:32].encode()
        request.setHeader(b"etag", etag)
        request.setHeader(b"cache-control", b"no-cache")
        if request.getHeader(b"if-none-match") == etag:
            request.setResponseCode(304)
            return b""
        request.setHeader(b"content-type", _TYPES[".js"])
        return body

    def _console(self, request: Any, name: str, user: Any, state: dict[str, Any], vnc: bool = False) -> Any:
        if OPT_WRITE not in user.options:
            raise HttpError(403, "User %s lacks the right (write) to open a console" % user.name)
        if request.getHeader(b"origin") is None:
            raise HttpError(403, "A console is opened by a browser, which names its Origin")
        self._check_origin(request)
        answer, conn = console.accept(request, ("binary",) if vnc else ())
        if not self.streams.admit(user.name):
            raise HttpError(429, "Too many event streams and consoles open", {"Retry-After": "10"})
        state["stream"] = True
        request.setResponseCode(101)
        cookie = self._cookie(request)

        def alive() -> bool:
            found = self.keeper.check(cookie)
            return found is not None and OPT_WRITE in found[1].options

        bridge = console.ConsoleBridge(request.channel, conn, self.reactor, alive,
                                       lambda: self.streams.leave(user.name), status=not vnc)
        bridge.take_over(answer)
        self.log.info("web console: user {user} opened the {kind} console of {name}", user=user.name, name=name,
                      kind="VNC" if vnc else "serial")
        d = ensureDeferred(self._attach_vnc(bridge, name) if vnc else self._attach(bridge, name))

        def failed(failure: Any) -> None:
            self.log.failure("console of {name}", failure, name=name)
            bridge.fail("Internal error: see ganeti-rapi's log")

        d.addErrback(failed)
        return NOT_DONE_YET

    async def _attach_vnc(self, bridge: console.ConsoleBridge, name: str) -> None:
        try:
            host, port = await console.find_vnc(self.rapi.luxi, name)
        except console.ConsoleUnavailable as e:
            bridge.fail(str(e))
            return
        except LuxidUnreachable as e:
            bridge.fail("Cannot ask LuxiD for the console: %s" % e)
            return
        if not bridge.closed:
            bridge.connect_tcp(self.reactor, host, port)

    async def _attach(self, bridge: console.ConsoleBridge, name: str) -> None:
        try:
            found = await console.find_console(self.rapi.luxi, name)
        except console.ConsoleUnavailable as e:
            bridge.fail(str(e))
            return
        except LuxidUnreachable as e:
            bridge.fail("Cannot ask LuxiD for the console: %s" % e)
            return
        if bridge.closed:
            return
        if console.is_here(found):
            bridge.connect_local(self.reactor, str(serial_socket(found)))
        else:
            bridge.connect_ssh(self.reactor, console.ssh_argv(found))
