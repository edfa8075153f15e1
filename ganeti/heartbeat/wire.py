"""The heartbeat protocol between NodeD and LuxiD: framing and messages.

Pure: no Twisted, no I/O.  Each message is one JSON object in a frame of
a 4-byte big-endian length and the JSON text (Twisted's
C{Int32StringReceiver} framing), inside mutual TLS with the cluster
certificate.  The key C{"t"} names the message:

From NodeD:
  - C{hello} (first, once per connection): C{node} (name), C{uuid} (may
    be empty), C{boot_id}, C{serial} (its config serial or C{null}),
    C{version}; optionally C{beats}: C{true} asks LuxiD to answer every
    beat with a beat (a node that says nothing gets no answers: older
    nodes take an unknown message for a broken connection);
  - C{beat}: nothing else, every second;
  - C{report}: C{full} (bool) and what the node reports (C{instances}:
    name -> state dict; C{node}: resources), see L{check_report}.

From LuxiD (answers to C{hello}):
  - C{accepted}: C{master} (its name) and, once LuxiD knows the cluster,
    C{args}: C{{"instances": [...], "node_info": [...]}}, the arguments of
    the C{all_instances_info} and C{node_info} calls whose answers the
    node's reports carry; C{beats}: C{true} when LuxiD answers every beat
    with a beat (the hello asked for it), in order, once it has handled the
    frames before it (a node that sends a beat after a report knows LuxiD
    has the report when the answer comes).  A node then counts the master
    lost after a liveness timeout without a byte from it, whatever TCP
    says; without it (an older LuxiD), only when the connection closes;
  - C{redirect}: "not the master, the master is X": C{master},
    C{address}, C{port}; LuxiD then closes the connection.
"""

from __future__ import annotations

from typing import Any

import orjson

#: largest frame either side accepts (a full report of a busy node fits)
MAX_FRAME = 4 * 1024 * 1024
#: the protocol's default TCP port (C{--heartbeat-port})
DEFAULT_PORT = 1817
#: environment variable overriding L{DEFAULT_PORT} (tests run many clusters)
PORT_ENV = "GANETI_HEARTBEAT_PORT"
#: the longest a node waits between two connection attempts (its backoff's
#: ceiling); a starting LuxiD gives nodes this long on top of the liveness
#: timeout before it calls one that never connected unreachable
MAX_RECONNECT_DELAY = 2.0

HELLO = "hello"
BEAT = "beat"
REPORT = "report"
ACCEPTED = "accepted"
REDIRECT = "redirect"
PARAMS = "params"

#: a beat, encoded once
BEAT_FRAME_BODY = orjson.dumps({"t": BEAT})

_MAX_TEXT = 256


class BadMessage(ValueError):
    """A frame that is not a valid heartbeat message."""


def encode(message: dict[str, Any]) -> bytes:
    """The JSON body of a frame (the framing adds the length)."""
    return orjson.dumps(message)


def _text(message: dict[str, Any], key: str, *, empty: bool = False) -> str:
    value = message.get(key)
    if not isinstance(value, str) or len(value) > _MAX_TEXT or (not value and not empty):
        raise BadMessage("%r must be a%s string of at most %d characters" % (key, "" if empty else " non-empty", _MAX_TEXT))
    return value


def decode(body: bytes) -> dict[str, Any]:
    """The checked message of a frame body.

    @raise BadMessage: not JSON, not an object, an unknown type, or a
        field missing or of the wrong type.
    """
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise BadMessage("not JSON: %s" % e) from None
    if not isinstance(message, dict):
        raise BadMessage("a message must be a JSON object")
    kind = message.get("t")
    checker = _CHECKS.get(kind) if isinstance(kind, str) else None
    if checker is None:
        raise BadMessage("unknown message type %r" % (kind,))
    checker(message)
    return message


def hello(node: str, uuid: str, boot_id: str, serial: int | None, version: str, *,
          beats: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"t": HELLO, "node": node, "uuid": uuid, "boot_id": boot_id, "serial": serial,
                               "version": version}
    if beats:
        message["beats"] = True
    return message


def report(full: bool, instances: dict[str, Any] | None = None, node: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"t": REPORT, "full": full}
    if instances is not None:
        message["instances"] = instances
    if node is not None:
        message["node"] = node
    return message


def accepted(master: str, args: dict[str, Any] | None = None, *, beats: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {"t": ACCEPTED, "master": master}
    if args is not None:
        message["args"] = args
    if beats:
        message["beats"] = True
    return message


def wants_beats(message: dict[str, Any]) -> bool:
    """Whether a checked C{hello} or C{accepted} negotiates beats from LuxiD."""
    return message.get("beats") is True


def params(args: dict[str, Any]) -> dict[str, Any]:
    return {"t": PARAMS, "args": args}


def redirect(master: str, address: str, port: int) -> dict[str, Any]:
    return {"t": REDIRECT, "master": master, "address": address, "port": port}


def _check_hello(message: dict[str, Any]) -> None:
    _text(message, "node")
    _text(message, "uuid", empty=True)
    _text(message, "boot_id", empty=True)
    _text(message, "version", empty=True)
    serial = message.get("serial")
    if serial is not None and (isinstance(serial, bool) or not isinstance(serial, int)):
        raise BadMessage("'serial' must be a number or null")
    _check_beats(message)


def _check_beats(message: dict[str, Any]) -> None:
    if not isinstance(message.get("beats", False), bool):
        raise BadMessage("'beats' must be true or false")


def _check_beat(message: dict[str, Any]) -> None:
    pass


def check_report(message: dict[str, Any]) -> None:
    """C{instances}: name -> C{{"state": "running"|"shutdown", "memory",
    "vcpus", ...}} (a full report lists every instance; a partial one only
    those that changed, C{null} for one that is gone); C{node}: resource
    numbers (C{mfree}, C{mtotal}, C{dfree}, ...)."""
    if not isinstance(message.get("full"), bool):
        raise BadMessage("'full' must be true or false")
    instances = message.get("instances", {})
    if not isinstance(instances, dict):
        raise BadMessage("'instances' must be an object")
    for name, state in instances.items():
        if not isinstance(name, str) or not (state is None or isinstance(state, dict)):
            raise BadMessage("instance %r: its state must be an object or null" % (name,))
        if state is not None and not isinstance(state.get("state"), str):
            raise BadMessage("instance %r: its state must be a string" % (name,))
    node = message.get("node", {})
    if not isinstance(node, dict) or not all(isinstance(v, (int, float, str)) or v is None for v in node.values()):
        raise BadMessage("'node' must be an object of numbers")


def _check_args(message: dict[str, Any], required: bool) -> None:
    args = message.get("args")
    if args is None and not required:
        return
    if not isinstance(args, dict) or not all(isinstance(args.get(k), list) for k in ("instances", "node_info")):
        raise BadMessage("'args' must hold the lists 'instances' and 'node_info'")


def _check_accepted(message: dict[str, Any]) -> None:
    _text(message, "master")
    _check_args(message, required=False)
    _check_beats(message)


def _check_params(message: dict[str, Any]) -> None:
    _check_args(message, required=True)


def _check_redirect(message: dict[str, Any]) -> None:
    _text(message, "master")
    _text(message, "address")
    port = message.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise BadMessage("'port' must be a TCP port")


_CHECKS = {
    HELLO: _check_hello,
    BEAT: _check_beat,
    REPORT: check_report,
    ACCEPTED: _check_accepted,
    REDIRECT: _check_redirect,
    PARAMS: _check_params,
}


def heartbeat_port(value: str | None = None) -> int:
    """The heartbeat port: C{value}, else C{$GANETI_HEARTBEAT_PORT}, else L{DEFAULT_PORT}."""
    import os

    text = value if value is not None else os.environ.get(PORT_ENV, "")
    try:
        port = int(text) if text else DEFAULT_PORT
    except ValueError:
        return DEFAULT_PORT
    return port if 0 < port < 65536 else DEFAULT_PORT


__all__ = [
    "ACCEPTED", "BEAT", "BadMessage", "DEFAULT_PORT", "HELLO", "MAX_FRAME", "PARAMS", "PORT_ENV", "REDIRECT",
    "REPORT", "accepted", "check_report", "decode", "encode", "heartbeat_port", "hello", "params", "redirect",
    "report", "wants_beats",
]
