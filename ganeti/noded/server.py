"""noded's HTTP side: C{POST /<procedure>} with a JSON array of arguments.

Answers: 200 C{[true, payload]} or C{[false, message]} (the procedure
failed or refused); 404 for a procedure not declared in
L{ganeti.rpc.procedures}, 400 for another method than POST, a malformed
body or another number of arguments than declared, 413 for a body over the
limit; an argument of another type than declared is refused as the
procedure refuses bad input (200 C{[false, message]}), before it runs; 409 for a call carrying a master epoch lower than the highest this
node has seen (L{ganeti.ha.epoch}; the answer carries the node's epoch in the
same header).  Every error answer is C{[false, message]} and changes nothing.
"""

from __future__ import annotations

import inspect
from typing import IO, Any, cast

from twisted.internet import defer
from twisted.internet.defer import CancelledError
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.web import http
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from ganeti.ha import epoch as master_epoch
from ganeti.http_limits import json_site_options
from ganeti.noded.procedures import NodeProcedures, RpcFailure
from ganeti.rpc import wire
from ganeti.rpc.contract import ContractError


class NodeRpcResource(Resource):
    isLeaf = True
    log = Logger()

    def __init__(self, procedures: NodeProcedures, max_body: int = wire.MAX_BODY) -> None:
        super().__init__()
        self._procedures = procedures
        self._max_body = max_body

    def render(self, request: Request) -> Any:
        request.setHeader(b"Content-Type", b"application/json")
        if request.method != b"POST":
            return self._error(request, 400, "Only POST is supported")
        return self.render_POST(request)

    def _error(self, request: Request, code: int, message: str) -> bytes:
        request.setResponseCode(code)
        return wire.encode_response(False, message)

    def render_POST(self, request: Request) -> Any:
        # Site sets the path and the body before it renders
        segments = [s for s in cast("list[bytes]", request.postpath) if s]
        name = segments[0].decode("ascii", "replace") if len(segments) == 1 else ""
        entry = self._procedures.dispatch.get(name) if wire.valid_procedure(name) else None
        if entry is None:
            return self._error(request, 404, "Unknown procedure %r" % "/".join(s.decode("ascii", "replace") for s in segments))
        content = cast(IO[bytes], request.content)
        content.seek(0, 2)
        if content.tell() > self._max_body:
            return self._error(request, 413, "Request body over %d bytes" % self._max_body)
        content.seek(0)
        try:
            args = wire.decode_request(content.read())
            entry.procedure.check_count(args)
        except (wire.RpcWireError, ContractError) as e:
            return self._error(request, 400, str(e))
        offered = master_epoch.parse(request.getHeader(master_epoch.HEADER))
        try:
            self._procedures.epoch.check(offered)
        except master_epoch.StaleEpoch as e:
            request.setHeader(master_epoch.HEADER, b"%d" % e.highest)
            self.log.warn("refused {name}: {why}", name=name, why=str(e))
            return self._error(request, master_epoch.STALE_CODE, str(e))
        try:
            entry.procedure.check_types(args)
        except ContractError as e:  # refused as the procedure itself would: [false, why]
            return wire.encode_response(False, str(e))
        # the handlers that record who wrote config.data read the call's epoch as they start
        token = master_epoch.request_epoch.set(offered)
        try:
            d = defer.maybeDeferred(lambda: _run(entry.function, args))
        finally:
            master_epoch.request_epoch.reset(token)
        finished = request.notifyFinish()
        finished.addErrback(lambda _: d.cancel())
        d.addCallbacks(lambda payload: wire.encode_response(True, payload), lambda f: self._failure(f, name))
        d.addCallback(self._write, request)
        return NOT_DONE_YET

    def _failure(self, failure: Any, name: str) -> bytes | None:
        if failure.check(CancelledError):
            return None
        if failure.check(RpcFailure):
            return wire.encode_response(False, str(failure.value))
        self.log.failure("procedure {name} crashed", failure, name=name)
        return wire.encode_response(False, "Error while executing backend function: %s" % (failure.value,))

    def _write(self, body: bytes | None, request: Request) -> None:
        if body is None or request.finished or request._disconnected:
            return
        request.write(body)
        request.finish()


def _run(function: Any, args: list[Any]) -> Any:
    result = function(*args)
    if inspect.iscoroutine(result):
        return defer.ensureDeferred(result)
    return result


class _QuietSite(Site):
    """No per-request access log line (each call is already cheap to trace
    from the caller; a log line per RPC costs more than the call)."""

    def log(self, request: http.Request) -> None:
        pass


def node_site(procedures: NodeProcedures, access_log: bool = False, reactor: IReactorTime | None = None) -> Site:
    site = (Site if access_log else _QuietSite)(NodeRpcResource(procedures), reactor=reactor, **json_site_options())
    site.displayTracebacks = False
    site.noisy = False
    return site
