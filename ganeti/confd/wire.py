"""The confd packet format, pure: no Twisted, no I/O.

A datagram is C{b"plj0"} followed by a signed envelope::

    {"msg": "<inner JSON>", "salt": "<salt>", "hmac": "<hex HMAC-SHA1(key, salt + msg)>"}

Requests carry the current Unix time as salt (checked against a window of
L{MAX_CLOCK_SKEW} seconds); replies carry the request's C{rsalt}.  The key
is the content of C{hmac.key} as stored, trailing newline included.

Requests are laid out as Ganeti's Python client writes them
(C{serializer.DumpSignedJson}: C{json.dumps} with its default separators
and a trailing newline on both the message and the envelope); replies as
Ganeti's Haskell confd writes them (compact C{J.encodeStrict}).  Both sides
accept either layout, since only the C{msg} string is signed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import orjson

MAGIC = b"plj0"
PROTOCOL_VERSION = 1
PORT = 1814
#: the server reads at most this much of a request datagram
MAX_REQUEST_SIZE = 4096
#: clients refuse to send more (Ganeti's MAX_UDP_DATA_SIZE)
MAX_UDP_DATA_SIZE = 61440
#: CONFD_MAX_CLOCK_SKEW = 2 * NODE_MAX_CLOCK_SKEW
MAX_CLOCK_SKEW = 300

# request types (CONFD_REQ_*)
REQ_PING = 0
REQ_NODE_ROLE_BYNAME = 1
REQ_NODE_PIP_BY_INSTANCE_IP = 2
REQ_CLUSTER_MASTER = 3
REQ_NODE_PIP_LIST = 4
REQ_MC_PIP_LIST = 5
REQ_INSTANCES_IPS_LIST = 6
REQ_NODE_DRBD = 7
REQ_NODE_INSTANCES = 8
REQ_INSTANCE_DISKS = 9
REQ_CONFIG_QUERY = 10
REQ_DATA_COLLECTORS = 11

REQUEST_NAMES = {
    REQ_PING: "PING",
    REQ_NODE_ROLE_BYNAME: "NODE_ROLE_BYNAME",
    REQ_NODE_PIP_BY_INSTANCE_IP: "NODE_PIP_BY_INSTANCE_IP",
    REQ_CLUSTER_MASTER: "CLUSTER_MASTER",
    REQ_NODE_PIP_LIST: "NODE_PIP_LIST",
    REQ_MC_PIP_LIST: "MC_PIP_LIST",
    REQ_INSTANCES_IPS_LIST: "INSTANCES_IPS_LIST",
    REQ_NODE_DRBD: "NODE_DRBD",
    REQ_NODE_INSTANCES: "NODE_INSTANCES",
    REQ_INSTANCE_DISKS: "INSTANCE_DISKS",
    REQ_CONFIG_QUERY: "CONFIG_QUERY",
    REQ_DATA_COLLECTORS: "DATA_COLLECTORS",
}
REQUEST_TYPES = {name: code for code, name in REQUEST_NAMES.items()}

# dict-query keys (CONFD_REQQ_*) and field codes (CONFD_REQFIELD_*)
REQQ_LINK = "0"
REQQ_IP = "1"
REQQ_IPLIST = "2"
REQQ_FIELDS = "3"
REQFIELD_NAME = 0
REQFIELD_IP = 1
REQFIELD_MNODE_PIP = 2

# reply statuses and error codes
REPL_STATUS_OK = 0
REPL_STATUS_ERROR = 1
REPL_STATUS_NOTIMPLEMENTED = 2
ERROR_UNKNOWN_ENTRY = 0
ERROR_INTERNAL = 1
ERROR_ARGUMENT = 2

# node roles (CONFD_NODE_ROLE_*)
NODE_ROLE_MASTER = 0
NODE_ROLE_CANDIDATE = 1
NODE_ROLE_OFFLINE = 2
NODE_ROLE_DRAINED = 3
NODE_ROLE_REGULAR = 4


class BadPacket(Exception):
    """A datagram that is not a valid, correctly signed confd packet."""


def mac(key: bytes, salt: str, msg: str) -> str:
    """Lower-case hex HMAC-SHA1 of C{salt + msg} under C{key}."""
    return hmac.new(key, (salt + msg).encode("utf-8"), hashlib.sha1).hexdigest()


def _python_json(value: Any) -> str:
    """Ganeti's C{serializer.DumpJson}: default C{json.dumps} plus a newline."""
    return json.dumps(value) + "\n"


def sign_python(key: bytes, payload: Any, salt: str) -> bytes:
    """C{plj0} + Ganeti's C{serializer.DumpSignedJson(payload, key, salt)}."""
    msg = _python_json(payload)
    return MAGIC + _python_json({"msg": msg, "salt": salt, "hmac": mac(key, salt, msg)}).encode("utf-8")


def sign_compact(key: bytes, msg: str, salt: str) -> bytes:
    """C{plj0} + the compact envelope around the already encoded C{msg}."""
    return MAGIC + orjson.dumps({"msg": msg, "salt": salt, "hmac": mac(key, salt, msg)})


def request(qtype: int, query: Any = None, rsalt: str = "", protocol: int = PROTOCOL_VERSION) -> dict[str, Any]:
    """A request dict as Ganeti's C{ConfdRequest.ToDict()} has it (C{None} left out)."""
    out: dict[str, Any] = {"protocol": protocol, "type": qtype}
    if query is not None:
        out["query"] = query
    out["rsalt"] = rsalt
    return out


def pack_request(key: bytes, req: dict[str, Any], now: float) -> bytes:
    """Sign a request with the timestamp salt C{"%d" % now}, as Ganeti's client does."""
    packet = sign_python(key, req, "%d" % now)
    if len(packet) > MAX_UDP_DATA_SIZE:
        raise ValueError("confd request too big (%d bytes)" % len(packet))
    return packet


def reply(status: int, answer: Any, serial: int, protocol: int = PROTOCOL_VERSION) -> dict[str, Any]:
    return {"protocol": protocol, "status": status, "answer": answer, "serial": serial}


def encode_reply_msg(reply_dict: dict[str, Any]) -> str:
    """The compact inner JSON of a reply (what gets signed)."""
    try:
        return orjson.dumps(reply_dict).decode("utf-8")
    except TypeError:  # integers beyond 64 bits
        return json.dumps(reply_dict, separators=(",", ":"), ensure_ascii=False)


def pack_reply(key: bytes, reply_msg: str, rsalt: str) -> bytes:
    """Sign an encoded reply message with the request's C{rsalt}."""
    return sign_compact(key, reply_msg, rsalt)


def unpack(key: bytes, packet: bytes) -> tuple[str, str]:
    """Check magic and signature; return C{(msg, salt)} with C{msg} still encoded.

    @raise BadPacket: no magic, not a JSON envelope, or a wrong signature
    """
    if packet[:4] != MAGIC:
        raise BadPacket("no magic")
    try:
        signed = orjson.loads(packet[4:])
        msg, salt, digest = signed["msg"], signed["salt"], signed["hmac"]
    except (ValueError, KeyError, TypeError) as e:
        raise BadPacket("malformed envelope") from e
    if not (isinstance(msg, str) and isinstance(salt, str) and isinstance(digest, str)):
        raise BadPacket("malformed envelope")
    if not hmac.compare_digest(digest.lower().encode("utf-8", "replace"), mac(key, salt, msg).encode("ascii")):
        raise BadPacket("bad signature")
    return msg, salt


def check_timestamp(salt: str, now: float, skew: int = MAX_CLOCK_SKEW) -> int:
    """The request salt as an integer time within C{skew} seconds of C{now}.

    @raise BadPacket: not an integer, or too old or too new
    """
    if not salt or len(salt) > 20:
        raise BadPacket("bad timestamp salt")
    try:
        stamp = int(salt)
    except ValueError as e:
        raise BadPacket("bad timestamp salt") from e
    if abs(stamp - now) > skew:
        raise BadPacket("timestamp outside the %ds window" % skew)
    return stamp


def unpack_request(key: bytes, packet: bytes, now: float) -> dict[str, Any]:
    """Decode and verify a request datagram; return the request dict.

    The dict has at least C{type} (int) and C{rsalt} (str).
    @raise BadPacket: anything wrong with it
    """
    if len(packet) > MAX_REQUEST_SIZE:
        raise BadPacket("oversized (%d bytes)" % len(packet))
    msg, salt = unpack(key, packet)
    check_timestamp(salt, now)
    try:
        req = orjson.loads(msg)
    except ValueError as e:
        raise BadPacket("message is not JSON") from e
    if not isinstance(req, dict):
        raise BadPacket("request is not an object")
    qtype, rsalt = req.get("type"), req.get("rsalt")
    if type(qtype) is not int or not isinstance(rsalt, str):
        raise BadPacket("request without an integer type and a string rsalt")
    return req


def unpack_reply(key: bytes, packet: bytes) -> tuple[dict[str, Any], str]:
    """Decode and verify a reply datagram; return C{(reply, salt)}.

    @raise BadPacket: anything wrong with it
    """
    msg, salt = unpack(key, packet)
    try:
        rep = orjson.loads(msg)
    except ValueError as e:
        raise BadPacket("message is not JSON") from e
    if not isinstance(rep, dict) or type(rep.get("status")) is not int or "answer" not in rep:
        raise BadPacket("malformed reply")
    if type(rep.get("serial", 0)) is not int:
        raise BadPacket("malformed reply")
    return rep, salt
