"""MonD's HTTP API (Ganeti's, plain HTTP, GET only) and C{/metrics}.

==================================  ==========================================
C{/}                                C{[1]}
C{/1}                               C{null}
C{/1/list/collectors}               C{[[name, category, kind], ...]}
C{/1/report/all}                    every active collector's report
C{/1/report/CATEGORY/COLLECTOR}     one report (C{default} for no category)
C{/metrics}                         the Prometheus text format
==================================  ==========================================

C{?verbose=1} adds the details of status collectors.  Unknown paths give
404 C{Resource not found}; a bad report path 404 C{Unable to produce a
report for the requested resource}; methods other than GET (and HEAD) 405.

The answers come from L{answer} (pure routing over the service's cache);
L{MondFactory} serves them with C{twisted.web.http} alone (keep-alive,
pipelining, an access log), without twisted.web's resource tree and
templates, to keep MonD small.
"""

from __future__ import annotations

from typing import Any, cast

from twisted.internet.interfaces import IReactorTime
from twisted.web import http

from ganeti.mond import metrics
from ganeti.mond import report as rp

JSON = b"application/json"
TEXT = b"text/plain; charset=utf-8"
METRICS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

#: C{(code, content type, body, extra headers)}
Answer = tuple[int, bytes, bytes, dict[bytes, bytes]]


class Api:
    """Routes requests to the service's cached reports."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self._metrics: tuple[int, str, bytes] | None = None

    def answer(self, method: bytes, path: bytes, args: dict[bytes, list[bytes]]) -> Answer:
        if method not in (b"GET", b"HEAD"):
            return 405, TEXT, b"Method not allowed", {b"allow": b"GET, HEAD"}
        try:
            parts = [s.decode("ascii") for s in path.split(b"?", 1)[0].split(b"/") if s]
        except UnicodeDecodeError:
            return 404, TEXT, rp.NOT_FOUND, {}
        verbose = args.get(b"verbose", [b"0"])[-1] == b"1"
        service = self.service
        if not parts:
            return 200, JSON, b"[%d]" % rp.LATEST_API_VERSION, {}
        if parts == ["metrics"]:
            return 200, METRICS_TYPE, self.metrics(), {}
        if parts[0] != str(rp.LATEST_API_VERSION):
            return 404, TEXT, rp.NOT_FOUND, {}
        rest = parts[1:]
        if not rest:
            return 200, JSON, b"null", {}
        if rest == ["list", "collectors"]:
            return 200, JSON, service.list_bytes(), {}
        if rest[0] == "report":
            if rest[1:] == ["all"]:
                return 200, JSON, service.all_bytes(verbose), {}
            if len(rest) == 3:
                known, category = rp.category_from_url(rest[1])
                collector = service.find(category, rest[2]) if known else None
                if collector is not None:
                    return 200, JSON, service.report_bytes(collector, verbose), {}
            return 404, TEXT, rp.NO_REPORT, {}
        return 404, TEXT, rp.NOT_FOUND, {}

    def metrics(self) -> bytes:
        """The metrics text, rebuilt only when a report changed."""
        service = self.service
        key = (service.generation, service.view.stale)
        if self._metrics is None or self._metrics[:2] != key:
            entries = [service.entries[c.name] for c in service.active if c.name in service.entries]
            self._metrics = (key[0], key[1], metrics.render(entries, service.view.stale, service.view.source))
        return self._metrics[2]


class MondRequest(http.Request):
    """One request, answered at once from L{Api}."""

    api: Api

    def process(self) -> None:
        # the request is parsed (args set) before process() is called
        code, ctype, body, headers = self.api.answer(self.method, self.path, cast("dict[bytes, list[bytes]]", self.args))
        self.setResponseCode(code)
        self.setHeader(b"content-type", ctype)
        self.setHeader(b"content-length", b"%d" % len(body))
        for name, value in headers.items():
            self.setHeader(name, value)
        if self.method != b"HEAD":
            self.write(body)
        self.finish()


class MondFactory(http.HTTPFactory):
    """HTTP/1.1 connections whose requests L{Api} answers.

    @param log_path: the access log (C{None}: none)
    """

    def __init__(self, api: Api, log_path: str | None = None, reactor: IReactorTime | None = None) -> None:
        super().__init__(logPath=log_path, reactor=reactor)
        self.api = api
        self._request = type("MondRequest", (MondRequest,), {"api": api})

    def buildProtocol(self, addr: Any) -> Any:
        channel: Any = super().buildProtocol(addr)
        channel.requestFactory = self._request
        return channel
