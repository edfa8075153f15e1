"""LUXI framing and message encoding: pure functions, no Twisted, no I/O.

A LUXI message is UTF-8 JSON followed by one ETX byte (C{0x03}).  JSON
escapes every control character inside strings and never needs one outside
them, so an encoded payload cannot contain ETX and splitting a stream on
ETX is exact.

A request is C{{"method": str, "args": list[, "version": int]}}; a response
is C{{"success": bool, "result": any}}.  A failed request carries its error
as C{[ClassName, [args...]]} (see L{ganeti.errors.encode}), or as a plain
string when the request itself could not be parsed.

This module is imported by the blocking CLI client, so it must stay cheap
to import: the standard library, L{ganeti.errors} and L{ganeti.lightjson}
only.  What a client sends and reads (requests out, responses in) goes
through the standard library's JSON codec (L{ganeti.lightjson}: its C part
without the C{json} package's import), as in Ganeti's own client: importing
orjson costs a command-line tool more than encoding its few small messages.  What a
server reads and sends (requests in, responses out) goes through orjson,
imported on first use (the daemons have it loaded anyway); so does a
response too big for C{json} to decode quickly.
"""

from __future__ import annotations

from ganeti import CONFIG_VERSION, errors, lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

#: The message terminator.
ETX = b"\x03"

#: What Ganeti's Python client sends as C{version} (its C{CONFIG_VERSION}).
LUXI_VERSION = CONFIG_VERSION

#: The largest payload (ETX excluded) accepted by default: 16 MiB.
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

KEY_METHOD = "method"
KEY_ARGS = "args"
KEY_VERSION = "version"
KEY_SUCCESS = "success"
KEY_RESULT = "result"

#: a response payload above this size is decoded with orjson, whose import
#: then costs less than C{json}'s slower decoding
_LARGE_PAYLOAD = 256 * 1024


class LuxiProtocolError(errors.LuxiError):
    """A LUXI message is malformed, or breaks a limit of the protocol."""


def _dumps(value: Any) -> bytes:
    """Encode C{value} as JSON (server side, orjson); raises C{TypeError} when it cannot be.

    Dict keys that are not strings (ints, enums) become strings, as
    Python's json module does; Ganeti's own encoder behaves the same way.
    """
    import orjson

    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def _client_dumps(value: Any) -> bytes:
    """Encode C{value} as JSON (client side, the standard library); raises C{TypeError}.

    C{allow_nan=False}: NaN and the infinities are not JSON, and a server
    would refuse them.
    """
    try:
        return lightjson.dumps(value).encode("utf-8")
    except ValueError as e:  # NaN; orjson raises TypeError for what it cannot encode
        raise TypeError(str(e)) from None


def _loads_object(payload: bytes, what: str, fast: bool = True) -> dict[str, Any]:
    """Decode C{payload} as a JSON object, or raise L{LuxiProtocolError}.

    @param fast: decode with orjson (the servers); else with C{json} unless
        the payload is large (the clients: L{ganeti.lightjson}).
    """
    try:
        if fast or len(payload) > _LARGE_PAYLOAD:
            import orjson

            value = orjson.loads(payload)
        else:
            value = lightjson.loads(payload)
    except (ValueError, UnicodeDecodeError) as e:  # orjson.JSONDecodeError is a json.JSONDecodeError
        raise LuxiProtocolError("%s is not valid JSON: %s" % (what, e)) from None
    if not isinstance(value, dict):
        raise LuxiProtocolError("%s is not a JSON object but %s" % (what, _json_type(value)))
    return value


def _json_type(value: Any) -> str:
    """The JSON name of the type of a decoded value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


# --- requests --------------------------------------------------------------
def encode_request(method: str, args: list[Any] | tuple[Any, ...], version: int | None = None) -> bytes:
    """Frame a request to call C{method} with positional C{args}.

    @param version: sent as C{"version"} when given (Ganeti's client sends
        L{LUXI_VERSION}; servers ignore it).
    @raise TypeError: an argument cannot be encoded as JSON.
    """
    request: dict[str, Any] = {KEY_METHOD: method, KEY_ARGS: list(args)}
    if version is not None:
        request[KEY_VERSION] = version
    return _client_dumps(request) + ETX


def decode_request(payload: bytes) -> tuple[str, list[Any]]:
    """Decode one request payload (without its ETX) into C{(method, args)}.

    @raise LuxiProtocolError: the payload is not JSON, not an object, or
        lacks a string C{method} or a list C{args}.
    """
    request = _loads_object(payload, "request")
    if KEY_METHOD not in request:
        raise LuxiProtocolError("request has no 'method'")
    method = request[KEY_METHOD]
    if not isinstance(method, str):
        raise LuxiProtocolError("'method' is %s, not a string" % _json_type(method))
    if KEY_ARGS not in request:
        raise LuxiProtocolError("request for %s has no 'args'" % method)
    args = request[KEY_ARGS]
    if not isinstance(args, list):
        raise LuxiProtocolError("'args' of %s is %s, not an array" % (method, _json_type(args)))
    return method, args


# --- responses -------------------------------------------------------------
def encode_response(success: bool, result: Any) -> bytes:
    """Frame a response.  Never carries C{"version"}: Ganeti's client would
    insist that it equals the version it sent.

    @raise TypeError: C{result} cannot be encoded as JSON.
    """
    return _dumps({KEY_SUCCESS: bool(success), KEY_RESULT: result}) + ETX


def encode_error(exc: BaseException) -> bytes:
    """Frame a failure response carrying C{exc} as C{[ClassName, [args]]}.

    An exception whose arguments still do not encode travels as a
    C{GenericError} with its text, so this never raises.
    """
    try:
        return encode_response(False, errors.encode(exc))
    except TypeError:
        return encode_response(False, ["GenericError", ["%s: %s" % (type(exc).__name__, exc)]])


def encode_parse_failure(reason: str) -> bytes:
    """Frame the plain-string answer to a request that could not be parsed."""
    return encode_response(False, "Failed to parse request: %s" % reason)


def decode_response(payload: bytes, version: int | None = None) -> tuple[bool, Any]:
    """Decode one response payload (without its ETX) into C{(success, result)}.

    @param version: the version the request carried; a response that
        names a different one is refused, as Ganeti's client does.
    @raise LuxiProtocolError: the payload is not a valid response.
    """
    response = _loads_object(payload, "response", fast=False)
    if KEY_SUCCESS not in response or KEY_RESULT not in response:
        raise LuxiProtocolError("response lacks 'success' or 'result': %.200r" % (response,))
    success = response[KEY_SUCCESS]
    if not isinstance(success, bool):
        raise LuxiProtocolError("'success' is %s, not a boolean" % _json_type(success))
    if version is not None and KEY_VERSION in response and response[KEY_VERSION] != version:
        raise LuxiProtocolError(
            "LUXI version mismatch, server %r, request %r" % (response[KEY_VERSION], version)
        )
    return success, response[KEY_RESULT]


def error_from_result(result: Any) -> errors.GenericError:
    """The exception carried by the C{result} of a failure response.

    C{[ClassName, [args]]} becomes that class of L{ganeti.errors}; a plain
    string (such as "Failed to parse request: ...") or any other shape
    becomes a L{errors.LuxiError}.
    """
    return errors.decode(result)


def decode_result(payload: bytes, version: int | None = None) -> Any:
    """Decode a response payload and return its result, or raise its error.

    @raise LuxiProtocolError: the payload is not a valid response.
    @raise errors.GenericError: the server answered with a failure.
    """
    success, result = decode_response(payload, version)
    if not success:
        raise error_from_result(result)
    return result


# --- framing ---------------------------------------------------------------
class Framer:
    """Split a byte stream into ETX-terminated messages.

    Feed it whatever arrives; iterate over what L{feed} returns to get the
    complete payloads (ETX stripped) in order.  Bytes of an incomplete
    message are kept for the next call.

        framer = Framer()
        for payload in framer.feed(data):
            handle(payload)

    A message longer than C{max_message_size} bytes (ETX excluded) raises
    L{LuxiProtocolError} as soon as that is certain, after the complete
    messages before it have been yielded.  The stream cannot be resumed
    after that: the caller should drop the connection.
    """

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
        """
        @param max_message_size: the largest payload accepted, in bytes.
        """
        self.max_message_size = max_message_size
        self._buffer = bytearray()
        self._start = 0  # where the first unconsumed message begins
        self._scan = 0  # no ETX before this offset (avoids rescans)

    @property
    def buffered(self) -> int:
        """How many bytes of an incomplete message are waiting."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Add C{data} and return an iterator over the completed messages.

        The data is taken at once; the messages are split off as the
        iterator is consumed, and any left unconsumed are returned by the
        next call's iterator.
        """
        self._buffer += data
        return self._messages()

    def _messages(self) -> Iterator[bytes]:
        buffer = self._buffer
        while True:
            end = buffer.find(ETX, self._scan)
            if end < 0:
                self._compact()
                if len(self._buffer) > self.max_message_size:
                    self._fail(len(self._buffer), "at least ")
                return
            start = self._start
            self._start = self._scan = end + 1
            if end - start > self.max_message_size:
                self._fail(end - start, "")
            yield bytes(buffer[start:end])

    def _compact(self) -> None:
        """Drop consumed bytes from the front of the buffer."""
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._scan = len(self._buffer)

    def _fail(self, size: int, qualifier: str) -> None:
        self._buffer.clear()
        self._start = self._scan = 0
        raise LuxiProtocolError(
            "message too large (%s%d bytes, the limit is %d)" % (qualifier, size, self.max_message_size)
        )
