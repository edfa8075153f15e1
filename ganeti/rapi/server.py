"""The RAPI HTTP resource: routing, authentication, bodies, errors, access log.

One leaf L{RapiResource} answers every path: it matches the route table of
L{ganeti.rapi.baserlib}, checks the user's rights, parses the query string
(as Ganeti's server, parameters no resource reads are ignored, e.g.
C{no-remember}) and the JSON body, runs the handler (an C{async def}) and writes the JSON
answer, or Ganeti's error body.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import Any, Callable
from urllib.parse import parse_qs, unquote

import orjson
from twisted.internet.defer import CancelledError, ensureDeferred
from twisted.logger import Logger
from twisted.web import server
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from ganeti import errors
from ganeti.rapi import baserlib, filters, instances, rlib2  # noqa: F401  (they register the routes)
from ganeti.rapi.http import REALM, HttpError, QueryArgs
from ganeti.rapi.luxi import LuxidUnreachable
from ganeti.rapi.metrics import RequestMetrics
from ganeti.rapi.users import UsersFile

#: the largest request body accepted, in bytes (Ganeti's client sends far less)
DEFAULT_MAX_BODY = 1024 * 1024

_JSON = b"application/json"


class _Sink:
    """Where an oversized body goes: nowhere."""

    def write(self, data: bytes) -> None:
        pass

    def seek(self, *args: Any) -> int:
        return 0

    def tell(self) -> int:
        return 0

    def read(self, *args: Any) -> bytes:
        return b""

    def close(self) -> None:
        pass


class RapiRequest(server.Request):
    """A request that does not keep a body larger than C{max_body}."""

    max_body = DEFAULT_MAX_BODY
    too_big = False
    _received = 0

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > self.max_body:
            self.too_big = True
            self.content = _Sink()  # type: ignore[assignment]
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        self._received += len(data)
        if not self.too_big and self._received > self.max_body:
            self.too_big = True
            self.content = _Sink()  # type: ignore[assignment]
        if not self.too_big:
            super().handleContentChunk(data)


def request_factory(max_body: int) -> type[RapiRequest]:
    return type("RapiRequest", (RapiRequest,), {"max_body": max_body})


class RapiSite(server.Site):
    """A Site whose access log is L{RapiResource}'s own (user and duration included)."""

    def log(self, request: Any) -> None:
        pass


class RapiResource(Resource):
    """Every RAPI path."""

    isLeaf = True
    log = Logger()

    def __init__(
        self,
        luxi: Any,
        users: UsersFile,
        *,
        require_authentication: bool = False,
        max_body: int = DEFAULT_MAX_BODY,
        clock: Callable[[], float] = time.time,
        openapi: Callable[[], Any] | None = None,
        public_metrics: bool = False,
    ) -> None:
        super().__init__()
        self.luxi = luxi
        self.users = users
        self.require_authentication = require_authentication
        self.max_body = max_body
        self.clock = clock
        if openapi is None:
            from ganeti.rapi.openapi import describe

            openapi = describe
        self._openapi = openapi
        self._openapi_doc: bytes | None = None
        #: C{/metrics} needs no authentication, even with C{require_authentication}
        self.public_metrics = public_metrics
        self.requests = RequestMetrics()
        #: requests this RAPI forwarded to the master's (L{ganeti.rapi.forward} observes them)
        self.forwarded = RequestMetrics()
        #: whether this RAPI forwards to the master's now (a candidate's); set by the composition root
        self.forwarding: Callable[[], bool] = lambda: False
        #: the web console (L{ganeti.rapi.ui.resource.UiResource}) that answers C{/ui} paths; none: 404
        self.ui: Any = None

    # twisted.web calls render_<METHOD>; all of them go to one place
    def render_GET(self, request: Any) -> Any:
        return self._render(request)

    render_PUT = render_POST = render_DELETE = render_GET

    def render(self, request: Any) -> Any:
        # any other method too: the route table answers 501 for it
        return self._render(request)

    # --- request handling ------------------------------------------------------------
    def _render(self, request: Any) -> Any:
        if self.ui is not None and (request.path == b"/ui" or request.path.startswith(b"/ui/")):
            return self.ui.render(request)
        started = time.perf_counter()
        state: dict[str, Any] = {"user": None}
        d = ensureDeferred(self._handle(request, state))
        request.notifyFinish().addErrback(lambda _: d.cancel())
        d.addCallback(lambda body: self._reply(request, 200, body, state.get("headers", {})))
        d.addErrback(self._error, request)
        d.addBoth(lambda _: self._access_log(request, state, started))
        return NOT_DONE_YET

    async def _handle(self, request: Any, state: dict[str, Any]) -> bytes:
        method = request.method.decode("ascii", "replace")
        path = self._path(request)
        if path == "/openapi.json" and method == "GET":
            state["resource"] = path
            self._authorize(request, (), state)
            if self._openapi_doc is None:
                self._openapi_doc = orjson.dumps(self._openapi())
            return self._openapi_doc
        if path == "/metrics" and method == "GET":
            from ganeti.rapi import metrics

            state["resource"] = path
            if not self.public_metrics:
                self._authorize(request, (), state)
            state["headers"] = {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
            if self.forwarding():  # a candidate's: its own figures, the cluster's are the master's
                return metrics.render_candidate(self.requests, self.forwarded)
            return await metrics.collect(self.luxi, self.requests)
        found = baserlib.match(path)
        if found is None:
            raise HttpError(404, "Nothing matches the given URI" if path else None)
        route, groups = found
        state["resource"] = route.template
        if any(g in (".", "..") for g in groups):
            raise HttpError(404)
        handler = route.methods.get(method)
        if handler is None:
            allowed = ", ".join(sorted(route.methods))
            raise HttpError(501, "Method %s is unsupported for path %s" % (method, path), {"Allow": allowed})
        self._authorize(request, handler.access, state)
        args = self._args(request)
        body = self._body(request)
        ctx = baserlib.Context(method, path, args, body, state["user"], self.luxi, self.clock)
        result = await handler.handler(ctx, *groups)
        if isinstance(result, baserlib.Encoded):
            return result.data
        return orjson.dumps(result)

    def _path(self, request: Any) -> str:
        try:
            raw = request.path.decode("ascii")
            path = unquote(raw, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise HttpError(400, "The path is not valid") from None
        if "\x00" in path:
            raise HttpError(400, "The path is not valid")
        return path

    def _authorize(self, request: Any, access: tuple[str, ...], state: dict[str, Any]) -> None:
        if not (self.require_authentication or access):
            return
        unauthorized = HttpError(401, None, {"WWW-Authenticate": 'Basic realm="%s"' % REALM})
        header = request.getHeader(b"authorization")
        if not header:
            raise unauthorized
        scheme, _, value = header.decode("latin-1").partition(" ")
        if scheme.lower() != "basic":
            raise unauthorized
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise unauthorized from None
        name, sep, password = decoded.partition(":")
        if not sep:
            raise unauthorized
        user = self.users.authenticate(name, password)
        if user is None:
            self.log.info("authentication failed for user {user!r}", user=name)
            raise unauthorized
        state["user"] = name
        if access and not (user.options & set(access)):
            raise HttpError(403, "User %s lacks the right (%s) to do this" % (name, " or ".join(access)))

    def _args(self, request: Any) -> QueryArgs:
        _, _, query = request.uri.partition(b"?")
        try:
            parsed = parse_qs(query.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                              errors="strict", max_num_fields=200)
        except (UnicodeDecodeError, ValueError) as e:
            raise HttpError(400, "Invalid query string: %s" % e) from None
        # as Ganeti's: a resource reads the parameters it knows, others are ignored
        return QueryArgs(parsed)

    def _body(self, request: Any) -> Any:
        if getattr(request, "too_big", False):
            request.setHeader(b"connection", b"close")
            raise HttpError(413, "The request body is larger than %d bytes" % self.max_body)
        request.content.seek(0)
        data = request.content.read(self.max_body + 1)
        if len(data) > self.max_body:
            raise HttpError(413, "The request body is larger than %d bytes" % self.max_body)
        if not data.strip():
            return None
        ctype = (request.getHeader(b"content-type") or b"").split(b";")[0].strip().lower()
        if ctype != _JSON:
            raise HttpError(415, "Only 'application/json' is supported for request bodies")
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as e:
            raise HttpError(400, "Unable to parse the JSON body: %s" % e) from None

    # --- answers -----------------------------------------------------------------------
    def _reply(self, request: Any, code: int, body: bytes, headers: dict[str, str]) -> None:
        if getattr(request, "_disconnected", False) or request.finished:
            return
        request.setResponseCode(code)
        request.setHeader(b"content-type", _JSON)
        for name, value in headers.items():
            request.setHeader(name.encode(), value.encode())
        request.write(body)
        request.finish()

    def _error(self, failure: Any, request: Any) -> None:
        if failure.check(CancelledError):
            return
        exc = failure.value
        if isinstance(exc, HttpError):
            error = exc
        elif isinstance(exc, LuxidUnreachable):
            error = HttpError(502, "Cannot reach the master daemon (LuxiD): %s" % exc)
        elif isinstance(exc, errors.OpPrereqError):
            code = exc.args[1] if len(exc.args) > 1 else None
            error = HttpError(404 if code == errors.ECODE_NOENT else 400, str(exc.args[0] if exc.args else exc))
        elif isinstance(exc, errors.JobLost):
            error = HttpError(404, str(exc.args[0] if exc.args else "Job not found"))
        elif isinstance(exc, (errors.JobQueueFull, errors.JobQueueDrainError)):
            error = HttpError(503, str(exc.args[0] if exc.args else exc) or "The job queue is full or drained")
        elif isinstance(exc, errors.LuxiError):
            error = HttpError(502, "The master daemon (LuxiD) failed: %s" % (exc.args[0] if exc.args else exc))
        elif isinstance(exc, errors.GenericError):
            error = HttpError(500, "%s: %s" % (type(exc).__name__, ", ".join(str(a) for a in exc.args)))
        else:
            self.log.failure("unexpected error answering {path}", failure, path=request.path)
            error = HttpError(500, "Internal error: %s" % exc)
        self._reply(request, error.code, orjson.dumps(error.body()), error.headers)

    def _access_log(self, request: Any, state: dict[str, Any], started: float) -> None:
        self.requests.observe(state.get("resource", "unmatched"), request.method.decode("ascii", "replace"),
                              request.code, time.perf_counter() - started)
        self.log.info(
            "{user} {method} {path} {status} {duration:.1f}ms",
            user=state.get("user") or "-",
            method=request.method.decode("ascii", "replace"),
            path=request.uri.decode("ascii", "replace"),
            status=request.code,
            duration=(time.perf_counter() - started) * 1000,
            log_system="access",
        )
