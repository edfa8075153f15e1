"""HTTP errors in Ganeti's RAPI format and query-argument parsing (pure).

An error answers C{{"code": 404, "message": "...", "explain": "..."}}:
C{message} is the specific text (HTML-escaped) or the status' reason
phrase, C{explain} the standard long description of the status.
"""

from __future__ import annotations

import html
from http import HTTPStatus
from typing import Any

#: the realm of HTTP Basic authentication
REALM = "Ganeti Remote API"

#: status -> (reason phrase, long description): the standard library's table
#: (http.server's, without loading http.server, socketserver and mimetypes)
_RESPONSES: dict[int, tuple[str, str]] = {int(status): (status.phrase, status.description) for status in HTTPStatus}


def reason_phrase(code: int) -> str:
    return _RESPONSES.get(code, ("Error", ""))[0]


class HttpError(Exception):
    """An answer other than 200, with Ganeti's error body.

    @ivar headers: extra response headers (e.g. C{WWW-Authenticate}).
    """

    def __init__(self, code: int, message: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        short, explain = _RESPONSES.get(self.code, ("Error", ""))
        message = html.escape(self.message, quote=False) if self.message else short
        return {"code": self.code, "message": message, "explain": explain}

    def __str__(self) -> str:
        return "%d %s" % (self.code, self.message or reason_phrase(self.code))


def bad_request(message: str) -> HttpError:
    return HttpError(400, message)


def not_found(message: str | None = None) -> HttpError:
    return HttpError(404, message)


def not_implemented(message: str) -> HttpError:
    return HttpError(501, message)


class QueryArgs:
    """The query arguments of one request, parsed the way Ganeti does.

    Values are lists (a name may repeat: C{?tag=a&tag=b}); integers are
    parsed with C{int()}, booleans are integers (the Ganeti client sends
    C{0}/C{1}).
    """

    def __init__(self, args: dict[str, list[str]]) -> None:
        self.args = args

    def __contains__(self, name: str) -> bool:
        return name in self.args

    def one(self, name: str, default: str | None = None) -> str | None:
        values = self.args.get(name)
        if not values:
            return default
        if len(values) > 1:
            raise bad_request("Only one '%s' parameter is allowed" % name)
        return values[0]

    def all(self, name: str) -> list[str]:
        return list(self.args.get(name, []))

    def int(self, name: str, default: int | None = None) -> int | None:
        value = self.one(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise bad_request("Invalid value for the '%s' parameter: %r is not an integer" % (name, value)) from None

    def bool(self, name: str, default: bool = False) -> bool:
        value = self.int(name)
        return default if value is None else bool(value)
