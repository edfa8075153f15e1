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
"""

from __future__ import annotations

from typing import Any

from twisted.web.resource import Resource
from twisted.web.server import Request

from ganeti.mond import metrics
from ganeti.mond import report as rp
from ganeti.promtext import CONTENT_TYPE as METRICS_TYPE

JSON = b"application/json"
TEXT = b"text/plain; charset=utf-8"


class MondResource(Resource):
    isLeaf = True

    def __init__(self, service: Any) -> None:
        super().__init__()
        self.service = service
        self._metrics: tuple[int, str, bytes] | None = None

    def render(self, request: Request) -> bytes:
        if request.method not in (b"GET", b"HEAD"):
            request.setHeader(b"allow", b"GET, HEAD")
            return self._error(request, 405, b"Method not allowed")
        segments = [s for s in request.path.split(b"?", 1)[0].split(b"/") if s]
        try:
            parts = [s.decode("ascii") for s in segments]
        except UnicodeDecodeError:
            return self._error(request, 404, rp.NOT_FOUND)
        verbose = request.args.get(b"verbose", [b"0"])[-1] == b"1"
        if not parts:
            return self._json(request, b"[%d]" % rp.LATEST_API_VERSION)
        if parts == ["metrics"]:
            request.setHeader(b"content-type", METRICS_TYPE)
            return self.metrics()
        if parts[0] != str(rp.LATEST_API_VERSION):
            return self._error(request, 404, rp.NOT_FOUND)
        rest = parts[1:]
        if not rest:
            return self._json(request, b"null")
        if rest == ["list", "collectors"]:
            return self._json(request, self.service.list_bytes())
        if rest[0] == "report":
            if rest[1:] == ["all"]:
                return self._json(request, self.service.all_bytes(verbose))
            if len(rest) == 3:
                known, category = rp.category_from_url(rest[1])
                collector = self.service.find(category, rest[2]) if known else None
                if collector is not None:
                    return self._json(request, self.service.report_bytes(collector, verbose))
            return self._error(request, 404, rp.NO_REPORT)
        return self._error(request, 404, rp.NOT_FOUND)

    def metrics(self) -> bytes:
        """The metrics text, rebuilt only when a report changed."""
        service = self.service
        key = (service.generation, service.view.stale)
        if self._metrics is None or self._metrics[:2] != key:
            entries = [service.entries[c.name] for c in service.active if c.name in service.entries]
            self._metrics = (key[0], key[1], metrics.render(entries, service.view.stale, service.view.source))
        return self._metrics[2]

    @staticmethod
    def _json(request: Request, body: bytes) -> bytes:
        request.setHeader(b"content-type", JSON)
        return body

    @staticmethod
    def _error(request: Request, code: int, text: bytes) -> bytes:
        request.setResponseCode(code)
        request.setHeader(b"content-type", TEXT)
        return text
